// torchutil._C: importing it runs the TORCH_LIBRARY registrations of the util:: ops and binds
// the few things the dispatcher cannot carry (boxing a Python callable, module scopes).
#include <torch/python.h>

#include "core/Options.h"
#include "core/TraceStages.h"
#include "libtorch/OpCounter.h"
#include "libtorch/Timing.h"
#include "python/PyModule.h"
#include "python/UserFormulas.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  torchutil::registerPyModule();
  m.doc() = "torchutil C++ core; use the torchutil package, not this module";
  // The options table (core/Options.h), the one source of torchutil/_ops.py's types, defaults
  // and choices and of the command line's flags: a row a dict, in the schema's order.
  m.def(
      "_options_table",
      [] {
        py::list rows;
        for (const torchutil::OptionRow& o : torchutil::optionsTable()) {
          py::dict row;
          row["name"] = o.name;
          row["type"] = o.schemaType();
          row["default"] = std::visit(
              [](const auto& v) -> py::object {
                if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
                  return py::none();
                } else {
                  return py::cast(v);
                }
              },
              o.defaultValue);
          row["default_literal"] = o.defaultLiteral();
          row["choices"] = py::tuple(py::cast(o.choices));
          row["low"] = o.hasRange() ? py::object(py::float_(o.low)) : py::none();
          row["high"] = o.hasRange() ? py::object(py::float_(o.high)) : py::none();
          row["low_open"] = o.lowOpen;
          row["high_open"] = o.highOpen;
          row["range"] = o.rangeText();
          row["doc"] = o.doc;
          row["summary_op"] = o.summaryOp;
          rows.append(row);
        }
        return rows;
      },
      "The profile ops' options: name, type (the schema's), default, choices, range, doc.");
  m.def(
      "_check_options",
      [](const py::dict& options) {
        torchutil::GivenOptions given;
        for (const auto& [key, value] : options) {
          torchutil::OptionValue v;
          if (value.is_none()) {
            v = std::monostate{};
          } else if (py::isinstance<py::bool_>(value)) {
            v = value.cast<bool>();
          } else if (py::isinstance<py::int_>(value)) {
            v = value.cast<int64_t>();
          } else if (py::isinstance<py::float_>(value)) {
            v = value.cast<double>();
          } else if (py::isinstance<py::str>(value)) {
            v = value.cast<std::string>();
          } else {
            v = value.cast<std::vector<std::string>>();
          }
          given.emplace(key.cast<std::string>(), std::move(v));
        }
        torchutil::parseOptions(given, /*summaryOp=*/false);
      },
      py::arg("options"),
      "Checks options (the rest: their defaults) as the profile ops do, with their messages: a "
      "ValueError naming the option and the value, for callers that check before any work (the "
      "command line).");
  m.def(
      "_option_rules",
      [] {
        py::list rules;
        for (const torchutil::OptionRule& r : torchutil::optionRules()) {
          rules.append(py::make_tuple(r.options, r.rule));
        }
        return rules;
      },
      "The rules between options, as (options, rule): checked where the options are parsed.");
  m.def(
      "_env_switches",
      [] {
        py::list rows;
        for (const torchutil::EnvSwitchRow& r : torchutil::envSwitchTable()) {
          rows.append(py::make_tuple(r.name, r.values, r.doc));
        }
        return rows;
      },
      "The environment switches, as (name, values, doc): read once per profile call.");
  m.def("_wrap_module", &torchutil::wrapCallable, py::arg("model"), py::arg("args") = py::none(),
        py::arg("kwargs") = py::none(),
        "Boxes a Python callable (called with args and kwargs when given) in a util.PyModule "
        "script object for torch.ops.util.");
  m.def("_set_callback", &torchutil::setPythonCallback, py::arg("name"), py::arg("fn"),
        "Registers a Python function the profile calls (csrc/python/PyModule.h: "
        "'inductor_recording', 'run_eager'; None unregisters it); the torchutil package does it "
        "when imported.");
  m.def("_callbacks", &torchutil::pythonCallbacks,
        "The registered Python callbacks: {name: function, or None where none is}.");
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
