#include "python/PyModule.h"

#include <torch/csrc/jit/python/pybind_utils.h>

#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "libtorch/Forward.h"
#include "libtorch/OpCounter.h"

namespace py = pybind11;

namespace torchutil {
namespace {

// An instance of module.name; a module nobody imported (torch._dynamo, whose first import takes
// seconds, inside a call's time but in none of its phases) holds no class of obj, so it is not
// imported here.
bool isinstance(const py::handle& obj, const char* module, const char* name) {
  py::dict loaded = py::module_::import("sys").attr("modules");
  if (!loaded.contains(module)) {
    return false;
  }
  return py::isinstance(obj, loaded[module].attr(name));
}

// Whether obj is a torch.compile'd module. Nothing can have been compiled before torch._dynamo
// was imported, so an eager model is answered without importing it (seconds on a first call).
bool dynamoImported() {
  return py::module_::import("sys").attr("modules").contains("torch._dynamo");
}

bool isCompiledModule(const py::handle& obj) {
  if (!dynamoImported()) {
    return false;
  }
  return isinstance(obj, "torch._dynamo.eval_frame", "OptimizedModule");
}

// A model profiled with count_as= (torchutil._eager.CountedAs): timed as given, counted as the
// eager model it names (an AOTInductor package as the program it was exported from).
bool isCountedAs(const py::handle& obj) {
  return isinstance(obj, "torchutil._eager", "CountedAs");
}

// Global module hooks that report each module's qualified name (from the profiled root; a
// module it does not name, by its type under its caller) to OpCounter, for a root that is not
// an eager nn.Module (a function, a compiled or scripted module; an eager one has its forwards
// wrapped instead, ModuleForwards.cpp). Removed, with the GIL, when the scope ends.
class PyModuleScope final : public Forward::ModuleScope {
 public:
  explicit PyModuleScope(const py::object& root) {
    py::gil_scoped_acquire gil;
    auto names = std::make_shared<std::unordered_map<PyObject*, std::string>>();
    if (isinstance(root, "torch.nn", "Module")) {
      for (py::handle item : root.attr("named_modules")()) {
        auto pair = item.cast<py::tuple>();
        names->emplace(pair[1].ptr(), pair[0].cast<std::string>());
      }
    }
    // The hooks are process-wide but the scope belongs to this thread: another thread's
    // forwards (a concurrent profile) must not push paths into this thread's count.
    const std::thread::id owner = std::this_thread::get_id();
    py::cpp_function pre([names, owner](py::object module, py::object /*args*/) {
      if (std::this_thread::get_id() != owner) {
        return py::none();
      }
      auto it = names->find(module.ptr());
      std::string path;
      if (it != names->end()) {
        path = it->second;
      } else {
        const std::string parent = OpCounter::currentModule();
        const std::string type = py::str(py::type::handle_of(module).attr("__name__"));
        path = parent.empty() ? type : parent + "." + type;
      }
      OpCounter::enterModule(path);
      return py::none();
    });
    py::cpp_function post([owner](py::object, py::object, py::object) {
      if (std::this_thread::get_id() != owner) {
        return py::none();
      }
      OpCounter::exitModule();
      return py::none();
    });
    py::module_ m = py::module_::import("torch.nn.modules.module");
    preHandle_ = m.attr("register_module_forward_pre_hook")(pre);
    try {
      postHandle_ = m.attr("register_module_forward_hook")(post, py::arg("always_call") = true);
    } catch (py::error_already_set&) {
      remove(preHandle_);  // the destructor will not run: no hook may outlive the failed scope
      throw;
    }
  }

  ~PyModuleScope() override {
    py::gil_scoped_acquire gil;
    if (removeHooks()) {
      PyErr_SetInterrupt();  // re-armed: raised at the next signal check, where SIGINT is Python's
    }
  }

  void close() override {
    py::gil_scoped_acquire gil;
    if (removeHooks()) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    }
  }

 private:
  // Both hooks removed (each tried whatever the other did); whether an interrupt was taken.
  bool removeHooks() {
    const bool pre = remove(preHandle_);
    const bool post = remove(postHandle_);
    return pre || post;
  }

  // RemovableHandle.remove() is Python, where a pending Ctrl-C is raised: it would abort the
  // removal and leave the hook installed. So an interrupt raised there is taken and the removal
  // done again; returns whether one was taken, for close() to raise it (it was discarded as
  // unraisable, and the profile went on timing).
  static bool remove(py::object& handle) {
    bool interrupted = false;
    for (int attempt = 0; handle && attempt < kRemoveAttempts; ++attempt) {
      try {
        handle.attr("remove")();
        break;
      } catch (py::error_already_set& e) {
        if (!e.matches(PyExc_KeyboardInterrupt)) {
          e.discard_as_unraisable("torchutil: removing module hooks");
          break;
        }
        interrupted = true;
      }
    }
    handle = py::object();
    return interrupted;
  }
  // Tries per hook: each pending interrupt is raised once, so a retry or two removes it.
  static constexpr int kRemoveAttempts = 3;

  py::object preHandle_;
  py::object postHandle_;
};

// Recording.finish()'s (status, kernels) of torchutil/_inductor.py.
GeneratedKernels toGeneratedKernels(const py::handle& finished) {
  auto result = finished.cast<py::tuple>();
  GeneratedKernels out;
  out.status = result[0].cast<std::string>();
  for (py::handle item : result[1]) {
    auto k = item.cast<py::tuple>();
    GeneratedKernel g{k[0].cast<std::string>(), k[1].cast<std::string>(), {}};
    for (py::handle op : k[2]) {
      auto f = op.cast<py::tuple>();
      g.fused.push_back(FusedOp{f[0].cast<std::string>(), f[1].cast<std::vector<std::string>>(),
                                f[2].cast<std::string>(), f[3].cast<int64_t>(),
                                f[4].cast<int64_t>(), f[5].cast<int64_t>(), f[6].cast<bool>()});
    }
    out.kernels.push_back(std::move(g));
  }
  return out;
}

// Calls f(value) for each value of a module's table (its _parameters or _modules): a dict
// walked without Python calls, else (a TorchScript submodule's wrapper) through items().
template <class F>
void forEachValue(const py::handle& module, const char* table, F&& f) {
  py::object t = module.attr(table);
  if (PyDict_Check(t.ptr())) {
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(t.ptr(), &pos, &key, &value)) {
      f(py::handle(value));
    }
    return;
  }
  for (py::handle item : t.attr("items")()) {
    f(item.cast<py::tuple>()[1]);
  }
}

// The elements of the parameters of root and every module under it, each parameter once (as
// nn.Module.named_parameters() counts them), read from the modules' own tables (_parameters,
// _modules) rather than through named_parameters()'s generators, which cost about 1 ms a
// NATS-Bench network on a CPU: more than util::profile may add to every call. nullopt where a
// lazy module's parameter has no shape yet.
std::optional<double> parameterElements(const py::handle& root) {
  const py::object lazy =
      py::module_::import("torch.nn.parameter").attr("UninitializedTensorMixin");
  std::unordered_set<PyObject*> modules;
  std::unordered_set<const c10::TensorImpl*> parameters;
  std::vector<py::object> todo{py::reinterpret_borrow<py::object>(root)};
  double elements = 0;
  bool shapeless = false;
  while (!todo.empty() && !shapeless) {
    py::object module = std::move(todo.back());
    todo.pop_back();
    if (!modules.insert(module.ptr()).second) {
      continue;
    }
    forEachValue(module, "_parameters", [&](py::handle p) {
      if (p.is_none() || shapeless) {
        return;
      }
      if (py::isinstance(p, lazy)) {
        shapeless = true;
        return;
      }
      const at::Tensor t = py::cast<at::Tensor>(p);
      if (parameters.insert(t.unsafeGetTensorImpl()).second) {
        elements += static_cast<double>(t.numel());
      }
    });
    forEachValue(module, "_modules", [&](py::handle child) {
      if (!child.is_none()) {
        todo.push_back(py::reinterpret_borrow<py::object>(child));
      }
    });
  }
  if (shapeless) {
    return std::nullopt;
  }
  return elements;
}

class PyForward final : public Forward {
 public:
  explicit PyForward(c10::intrusive_ptr<PyModule> module) : module_(std::move(module)) {}

  // Inductor's configuration is restored however the profile ends.
  ~PyForward() override {
    if (recording_ && Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      try {
        recording_.attr("stop")();
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("torchutil: restoring Inductor's configuration");
      }
      recording_ = py::object();
    }
  }

  void recordGeneratedKernels() override {
    py::gil_scoped_acquire gil;
    recording_ = pythonCallback("inductor_recording")();
    recording_.attr("start")();
  }

  GeneratedKernels generatedKernels() override {
    py::gil_scoped_acquire gil;
    if (!recording_) {
      return {};
    }
    // A torch whose Inductor records otherwise: the kernels stay unattributed, and the status
    // says why, rather than the profile failing.
    try {
      py::object finished = recording_.attr("finish")();
      recording_ = py::object();
      return toGeneratedKernels(finished);
    } catch (py::error_already_set& e) {
      return GeneratedKernels{
          std::string("Inductor kernels not tied: recording them failed: ") + e.what(), {}};
    }
  }

  void run(const std::vector<at::Tensor>& inputs) override {
    py::gil_scoped_acquire gil;
    call(inputs);
  }

  // torchutil/_eager.py: torch.compile's force_eager stance, FlexAttention priced as one op.
  void runEager(const std::vector<at::Tensor>& inputs) override {
    py::gil_scoped_acquire gil;
    py::object runEager = pythonCallback("run_eager");
    if (module_->bound) {
      runEager(module_->callable, module_->args, module_->kwargs);
      return;
    }
    runEager(module_->callable, positional(inputs), py::dict());
  }

  std::optional<c10::Device> parameterDevice() override {
    py::gil_scoped_acquire gil;
    const py::object& m = module_->callable;
    if (!isinstance(m, "torch.nn", "Module")) {
      return std::nullopt;
    }
    for (const char* attr : {"parameters", "buffers"}) {
      for (py::handle t : m.attr(attr)()) {
        return py::cast<at::Tensor>(t).device();
      }
    }
    return std::nullopt;
  }

  std::string describe() override { return module_->repr; }

  // As nn.Module.named_parameters() counts them (a shared parameter once), through the module a
  // torch.compile'd one compiled; a callable that is no nn.Module has no parameters to count.
  ModelFacts modelFacts() override {
    py::gil_scoped_acquire gil;
    const py::object& model = module_->callable;
    if (!isinstance(model, "torch.nn", "Module")) {
      py::object qualname = py::getattr(model, "__qualname__", py::none());
      const std::string type = py::str(py::type::handle_of(model).attr("__name__"));
      return {qualname.is_none() ? type : std::string(py::str(qualname)), kNaN,
              "the model is a " + type + ", not an nn.Module: it has no parameters() to count"};
    }
    py::object root = py::getattr(model, "_orig_mod", model);  // torch.compile's OptimizedModule
    py::object original = py::getattr(root, "original_name", py::none());  // TorchScript keeps it
    const std::string name = py::str(original.is_none() || !py::bool_(original)
                                         ? py::type::handle_of(root).attr("__name__")
                                         : original);
    std::optional<double> params = parameterElements(root);
    if (!params) {
      return {name, kNaN, "a lazy module's parameter has no shape yet (before its first forward)"};
    }
    return {name, *params, ""};
  }

  bool compiled() override {
    py::gil_scoped_acquire gil;
    return isCompiledModule(module_->callable) || isCountedAs(module_->callable);
  }

  // A compiled module's paths are its eager module's (the forward counted is that module's).
  std::unique_ptr<ModuleScope> trackModules() override {
    py::gil_scoped_acquire gil;
    const py::object& m = module_->callable;
    return makeModuleScope(isCompiledModule(m) ? py::object(m.attr("_orig_mod"))
                           : isCountedAs(m)    ? py::object(m.attr("eager"))
                                               : m);
  }

  // torchutil/_eager.py: a model whose kernels the dispatcher never sees (an AOTInductor
  // package) has its FLOPs NaN, the reason in flops_note.
  Unseen unseenWork(const std::vector<at::Tensor>& /*inputs*/) override {
    py::gil_scoped_acquire gil;
    Unseen unseen;
    unseen.uncounted = pythonCallback("uncounted_reason")(module_->callable).cast<std::string>();
    return unseen;
  }

 private:
  void call(const std::vector<at::Tensor>& inputs) {
    if (module_->bound) {
      module_->callable(*module_->args, **module_->kwargs);
      return;
    }
    module_->callable(*positional(inputs));
  }

  static py::tuple positional(const std::vector<at::Tensor>& inputs) {
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      args[i] = py::cast(inputs[i]);
    }
    return args;
  }

  c10::intrusive_ptr<PyModule> module_;
  py::object recording_;  // an inductor_recording callback's Recording while it records
};

// The registered Python callbacks (setPythonCallback), touched with the GIL held. Never
// destroyed: the interpreter may be gone when static destructors run.
std::unordered_map<std::string, py::object>& registeredCallbacks() {
  static auto* callbacks = new std::unordered_map<std::string, py::object>();
  return *callbacks;
}

const PythonCallbackSpec* findPythonCallback(const std::string& name) {
  for (const PythonCallbackSpec& spec : kPythonCallbacks) {
    if (name == spec.name) {
      return &spec;
    }
  }
  return nullptr;
}

std::string pythonCallbackNames() {
  std::string names;
  for (const PythonCallbackSpec& spec : kPythonCallbacks) {
    names += std::string(names.empty() ? "" : ", ") + "'" + spec.name + "'";
  }
  return names;
}

// Raises the pending signal's exception (KeyboardInterrupt on Ctrl-C) in the profile call.
void checkPythonSignals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) {
    throw py::error_already_set();
  }
}

std::unique_ptr<Forward> makePyForward(const c10::IValue& model) {
  if (!model.isObject()) {
    return nullptr;
  }
  const auto& type = model.toObjectRef().type();
  static const auto pyModuleType = c10::getCustomClassType<c10::intrusive_ptr<PyModule>>();
  if (type != pyModuleType) {
    return nullptr;
  }
  return std::make_unique<PyForward>(model.toCustomClass<PyModule>());
}

}  // namespace

PyModule::PyModule(py::object c, py::object a, py::object k) : callable(std::move(c)) {
  repr = "Python callable " + std::string(py::str(py::type::handle_of(callable).attr("__name__")));
  bound = !a.is_none() || !k.is_none();
  args = a.is_none() ? py::tuple() : py::tuple(a);
  kwargs = k.is_none() ? py::dict() : py::dict(k);
}

PyModule::~PyModule() {
  if (Py_IsInitialized()) {
    py::gil_scoped_acquire gil;
    callable = py::object();
    args = py::object();
    kwargs = py::object();
  } else {
    // the interpreter is gone; nothing to decrement
    callable.release();
    args.release();
    kwargs.release();
  }
}

std::unique_ptr<Forward::ModuleScope> makeModuleScope(const py::object& root) {
  {
    py::gil_scoped_acquire gil;
    if (isinstance(root, "torch.nn", "Module") && !isinstance(root, "torch.jit", "ScriptModule") &&
        !isCompiledModule(root)) {
      return makeForwardScope(root);
    }
  }
  return std::make_unique<PyModuleScope>(root);
}

py::object wrapCallable(const py::object& obj, const py::object& args, const py::object& kwargs) {
  if (!PyCallable_Check(obj.ptr())) {
    throw py::type_error(
        "torchutil: model must be an nn.Module, a TorchScript module or a "
        "callable, got " +
        std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
  auto holder = c10::make_intrusive<PyModule>(obj, args, kwargs);
  return torch::jit::toPyObject(c10::IValue(std::move(holder)));
}

void setPythonCallback(const std::string& name, py::object fn) {
  if (findPythonCallback(name) == nullptr) {
    throw py::value_error("torchutil: no Python callback is called '" + name +
                          "'; the callbacks are " + pythonCallbackNames());
  }
  if (fn.is_none()) {
    registeredCallbacks().erase(name);
    return;
  }
  if (!PyCallable_Check(fn.ptr())) {
    throw py::type_error("torchutil: the Python callback '" + name + "' must be callable, got " +
                         std::string(py::str(py::type::handle_of(fn).attr("__name__"))));
  }
  registeredCallbacks()[name] = std::move(fn);
}

py::object pythonCallback(const std::string& name) {
  auto it = registeredCallbacks().find(name);
  if (it == registeredCallbacks().end()) {
    const PythonCallbackSpec* spec = findPythonCallback(name);
    TORCH_CHECK(false, "torchutil: the Python callback '", name,
                "' is not registered: ", spec != nullptr ? spec->module : "torchutil",
                " registers it (torchutil._C._set_callback) when torchutil is imported; "
                "was that import interrupted?");
  }
  return it->second;
}

py::dict pythonCallbacks() {
  py::dict out;
  for (const PythonCallbackSpec& spec : kPythonCallbacks) {
    auto it = registeredCallbacks().find(spec.name);
    out[spec.name] = it == registeredCallbacks().end() ? py::none() : it->second;
  }
  return out;
}

void registerPyModule() {
  static auto cls =
      torch::class_<PyModule>("util", "PyModule")
          .def("__repr__", [](const c10::intrusive_ptr<PyModule>& self) { return self->repr; });
  registerForwardFactory(&makePyForward);
  registerInterruptCheck(&checkPythonSignals);
}

}  // namespace torchutil
