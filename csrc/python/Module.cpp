// torchutil._C: importing it runs the TORCH_LIBRARY registrations of the util:: ops and binds
// the few things the dispatcher cannot carry (boxing a Python callable, module scopes).
#include <torch/python.h>

#include "core/EnergyWindows.h"
#include "core/TraceStages.h"
#include "libtorch/OpCounter.h"
#include "libtorch/Timing.h"
#include "python/PyModule.h"
#include "python/UserFormulas.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  torchutil::registerPyModule();
  m.doc() = "torchutil C++ core; use the torchutil package, not this module";
  // The most energy_windows the ops take (checkEnergyPlan), for the command line's own check.
  m.attr("MOST_ENERGY_WINDOWS") = py::int_(torchutil::kMostEnergyWindows);
  m.def("_wrap_module", &torchutil::wrapCallable, py::arg("model"), py::arg("args") = py::none(),
        py::arg("kwargs") = py::none(),
        "Boxes a Python callable (called with args and kwargs when given) in a util.PyModule "
        "script object for torch.ops.util.");
  m.def("_register_formula", &torchutil::registerUserFormula, py::arg("op"), py::arg("fn"),
        py::arg("override") = false,
        "Registers fn as op's FLOP formula in the one registry (torchutil.register_formula).");
  m.def("_unregister_formula", &torchutil::unregisterUserFormula, py::arg("op"));
  m.def("_user_formulas", &torchutil::userFormulaNames,
        "The ops with a formula registered by torchutil.register_formula, sorted.");
  m.def("_enter_module", &torchutil::OpCounter::enterModule, py::arg("path"));
  m.def("_exit_module", &torchutil::OpCounter::exitModule);
  m.def("_wrapped_forwards", &torchutil::wrappedForwards,
        "How many modules' forwards module-path scopes have wrapped now.");
  // torchutil.Profiler's module scopes: wrapped forwards (or hooks) live until close() (or
  // garbage collection).
  struct ModuleScopeHandle {
    std::unique_ptr<torchutil::Forward::ModuleScope> scope;
  };
  py::class_<ModuleScopeHandle>(m, "_ModuleScope")
      .def(py::init([](const py::object& root) {
        return ModuleScopeHandle{torchutil::makeModuleScope(root)};
      }))
      .def("close", [](ModuleScopeHandle& h) {
        if (auto scope = std::move(h.scope)) {
          scope->close();
        }
      });
  m.def("_free_capture_pools", &torchutil::freeCapturePools,
        py::call_guard<py::gil_scoped_release>(),
        "Gives back the memory pools this thread's CUDA-graph captures keep between calls (none "
        "with TORCHUTIL_KEEP_CAPTURE_POOL=0), and keeps them again after a failed capture.");
  m.def(
      "_trace_stages",
      [] {
        py::dict out;
        for (const torchutil::TraceStageTotal& t : torchutil::takeTraceStages()) {
          out[py::str(t.stage)] = py::make_tuple(t.times, t.seconds);
        }
        return out;
      },
      "Where kernel traces' host time went since the last call: {stage: (times, seconds)}, "
      "summed over the process's traces; the sums start again from zero.");
  m.def("_build_info", [] {
    py::dict info;
#ifdef TORCHUTIL_WITH_CUDA
    info["cuda"] = true;
#else
    info["cuda"] = false;
#endif
#ifdef TORCHUTIL_WITH_CUPTI
    info["cupti"] = true;
#else
    info["cupti"] = false;
#endif
    info["torch_version"] = TORCHUTIL_TORCH_VERSION;
    return info;
  });
}
