#include "python/UserFormulas.h"

#include <c10/util/Exception.h>

#include <memory>
#include <stdexcept>

#include "core/FormulaRegistry.h"
#include "libtorch/OpCounter.h"

namespace py = pybind11;

namespace torchutil {
namespace {

py::object userFormulaShape(const TensorInfo& t) {
  static const py::object size = py::module_::import("torch").attr("Size");
  return size(py::cast(t.sizes));
}

py::object userFormulaArg(const Arg& a) {
  switch (a.kind) {
    case ArgKind::Tensor: return userFormulaShape(a.tensor);
    case ArgKind::TensorList: {
      py::list shapes;
      for (const TensorInfo& t : a.tensors) {
        shapes.append(userFormulaShape(t));
      }
      return std::move(shapes);
    }
    case ArgKind::Int: return py::int_(a.ints.front());
    case ArgKind::IntList: return py::cast(a.ints);
    case ArgKind::Double: return py::float_(a.number);
    case ArgKind::Bool: return py::bool_(a.flag);
    case ArgKind::String: return py::str(a.text);
    case ArgKind::None:
    case ArgKind::Other: return py::none();
  }
  return py::none();
}

int64_t userFormulaCount(const py::handle& value, const std::string& op, const char* what) {
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value) ||
      value.cast<int64_t>() < 0) {
    throw std::invalid_argument("the FLOP formula registered for '" + op + "' returned " + what +
                                " = " + py::repr(value).cast<std::string>() +
                                "; expected a non-negative int");
  }
  return value.cast<int64_t>();
}

// Python's result as a Cost: an int is matrix FLOPs, a dict may split them and give bytes.
Cost userFormulaCost(const py::object& r, const std::string& op) {
  Cost c;
  if (r.is_none()) {
    c.unpriced = true;
    return c;
  }
  if (!py::isinstance<py::dict>(r)) {
    c.matrixFlops = userFormulaCount(r, op, "flops");
    return c;
  }
  const py::dict d = r.cast<py::dict>();
  for (const auto& [key, value] : d) {
    const std::string k = py::str(key);
    if (k == "matrix_flops") {
      c.matrixFlops = userFormulaCount(value, op, "matrix_flops");
    } else if (k == "vector_flops") {
      c.vectorFlops = userFormulaCount(value, op, "vector_flops");
    } else if (k == "bytes") {
      c.bytes = userFormulaCount(value, op, "bytes");
    } else {
      throw std::invalid_argument("the FLOP formula registered for '" + op +
                                  "' returned a dict with key '" + k +
                                  "'; expected matrix_flops, vector_flops, bytes");
    }
  }
  return c;
}

void checkNotCounting(const std::string& op) {
  TORCH_CHECK(OpCounter::liveCallbacks() == 0, "torchutil: cannot change the FLOP formula of '", op,
              "' while a count runs (a torchutil.profile or Profiler); change it before or after");
}

}  // namespace

void registerUserFormula(const std::string& op, const py::object& fn, bool replace) {
  if (!PyCallable_Check(fn.ptr())) {
    throw py::type_error("torchutil: the FLOP formula for '" + op + "' must be callable, got " +
                         py::repr(fn).cast<std::string>());
  }
  checkNotCounting(op);
  // The callable is called and released with the GIL held, from whichever thread counts.
  // After Python's finalization (the registry is a static) it is left alone.
  std::shared_ptr<py::object> held(new py::object(fn), [](py::object* p) {
    if (Py_IsInitialized() == 0) {
      return;
    }
    py::gil_scoped_acquire gil;
    delete p;
  });
  UserFormula formula = [held, op](const Args& inputs, const Args& outputs) -> Cost {
    py::gil_scoped_acquire gil;
    try {
      py::list args;
      for (const Arg& a : inputs) {
        args.append(userFormulaArg(a));
      }
      py::object outShape = py::none();
      if (outputs.size() == 1) {
        outShape = userFormulaArg(outputs.front());
      } else if (!outputs.empty()) {
        py::list shapes;
        for (const Arg& a : outputs) {
          shapes.append(userFormulaArg(a));
        }
        outShape = py::tuple(shapes);
      }
      return userFormulaCost((*held)(*args, py::arg("out_shape") = outShape), op);
    } catch (const std::exception& e) {
      // Nothing may leave the count's callback: the call is reported instead, and a Python
      // warning says why (TORCH_WARN from here would reach stderr only). A warning turned into
      // an error cannot leave either.
      const std::string why = "torchutil: the FLOP formula registered for '" + op + "' failed (" +
                              e.what() + "); the call is reported with the unknown ops";
      if (PyErr_WarnEx(PyExc_UserWarning, why.c_str(), 1) != 0) {
        PyErr_Clear();
      }
      Cost unknown;
      unknown.unpriced = true;
      return unknown;
    }
  };
  try {
    FormulaRegistry::globalForUsers().addUser(op, std::move(formula), replace);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
}

void unregisterUserFormula(const std::string& op) {
  checkNotCounting(op);
  try {
    FormulaRegistry::globalForUsers().removeUser(op);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
}

std::vector<std::string> userFormulaNames() {
  return FormulaRegistry::global().userNames();
}

}  // namespace torchutil
