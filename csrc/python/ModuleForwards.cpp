// Module paths for an eager nn.Module root, by wrapping each submodule's forward.
//
// Global module hooks (register_module_forward_pre_hook) see every module call, but they put
// every call of every module in the process on nn.Module's slow path (_call_impl's hook loops):
// with them, module paths cost a resnet50 forward about 1 ms on the 2-core CPU machine (an
// ad-hoc check), against 0.3 ms now (benchmarks/module_path_cost.py). Here each module that
// root.named_modules() names (the tree walked in C++) gets, in its instance __dict__, a C
// callable in place of `forward`: _call_impl's fast path calls it, it pushes the module's
// qualified name, calls the forward the module had and pops the name. Modules the root does not
// name (held in a plain list, made during the forward) are counted in the module that calls
// them. Everything is done with the GIL held; installing and removing run no Python code beyond
// attribute reads, so a pending Ctrl-C cannot cut a removal.
#include <thread>
#include <unordered_map>
#include <vector>

#include "libtorch/OpCounter.h"
#include "python/PyModule.h"

// after Python.h (PyModule.h)
#include <structmember.h>

namespace py = pybind11;

namespace torchutil {
namespace {

// One live scope: the thread whose count its paths go to, and the names under its root.
struct ForwardScopeState {
  std::thread::id owner;
  std::unordered_map<PyObject*, std::string> names;
};

// Live scopes (usually one; several when threads profile side by side). GIL held.
std::vector<const ForwardScopeState*>& liveScopes() {
  static auto* scopes = new std::vector<const ForwardScopeState*>();
  return *scopes;
}

// The path module has in this thread's live scope; nullptr when this thread has none.
const std::string* activePath(PyObject* module) {
  const auto& scopes = liveScopes();
  if (scopes.empty()) {
    return nullptr;
  }
  const std::thread::id me = std::this_thread::get_id();
  for (const ForwardScopeState* s : scopes) {
    if (s->owner == me) {
      auto it = s->names.find(module);
      return it == s->names.end() ? nullptr : &it->second;
    }
  }
  return nullptr;
}

// The callable put in a module's __dict__ as `forward`.
struct WrappedForward {
  PyObject ob_base;
  PyObject* original;  // the forward the module had (usually its bound method)
  PyObject* module;
};

PyObject* wrappedCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* w = reinterpret_cast<WrappedForward*>(self);
  const std::string* path = activePath(w->module);
  if (path == nullptr) {
    return PyObject_Call(w->original, args, kwargs);
  }
  try {
    OpCounter::enterModule(*path);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  PyObject* out = PyObject_Call(w->original, args, kwargs);
  OpCounter::exitModule();
  return out;
}

// Attributes the wrapper lacks are the original's (__name__, __self__, __func__, __doc__), and
// __wrapped__ leads inspect.signature to the original's signature.
PyObject* wrappedGetattr(PyObject* self, PyObject* name) {
  PyObject* found = PyObject_GenericGetAttr(self, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) {
    return found;
  }
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<WrappedForward*>(self)->original, name);
}

PyObject* wrappedRepr(PyObject* self) {
  return PyObject_Repr(reinterpret_cast<WrappedForward*>(self)->original);
}

// A copy or pickle of the module made inside the scope carries the original forward, not the
// wrapper (which holds this process's counting state).
PyObject* wrappedReduce(PyObject* self, PyObject* /*unused*/) {
  return PyObject_CallMethod(reinterpret_cast<WrappedForward*>(self)->original, "__reduce__",
                             nullptr);
}

PyObject* wrappedDeepcopy(PyObject* self, PyObject* memo) {
  PyObject* copy = PyImport_ImportModule("copy");
  if (copy == nullptr) {
    return nullptr;
  }
  PyObject* out = PyObject_CallMethod(copy, "deepcopy", "OO",
                                      reinterpret_cast<WrappedForward*>(self)->original, memo);
  Py_DECREF(copy);
  return out;
}

int wrappedTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* w = reinterpret_cast<WrappedForward*>(self);
  Py_VISIT(w->original);
  Py_VISIT(w->module);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int wrappedClear(PyObject* self) {
  auto* w = reinterpret_cast<WrappedForward*>(self);
  Py_CLEAR(w->original);
  Py_CLEAR(w->module);
  return 0;
}

void wrappedDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  wrappedClear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef wrappedMembers[] = {
    {"__wrapped__", T_OBJECT, offsetof(WrappedForward, original), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyMethodDef wrappedMethods[] = {{"__reduce__", wrappedReduce, METH_NOARGS, nullptr},
                                {"__deepcopy__", wrappedDeepcopy, METH_O, nullptr},
                                {nullptr, nullptr, 0, nullptr}};

PyTypeObject* wrappedType() {
  static PyTypeObject* type = [] {
    PyType_Slot slots[] = {{Py_tp_call, reinterpret_cast<void*>(wrappedCall)},
                           {Py_tp_getattro, reinterpret_cast<void*>(wrappedGetattr)},
                           {Py_tp_repr, reinterpret_cast<void*>(wrappedRepr)},
                           {Py_tp_traverse, reinterpret_cast<void*>(wrappedTraverse)},
                           {Py_tp_clear, reinterpret_cast<void*>(wrappedClear)},
                           {Py_tp_dealloc, reinterpret_cast<void*>(wrappedDealloc)},
                           {Py_tp_members, wrappedMembers},
                           {Py_tp_methods, wrappedMethods},
                           {0, nullptr}};
    PyType_Spec spec = {"torchutil._C.WrappedForward", sizeof(WrappedForward), 0,
                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, slots};
    PyObject* made = PyType_FromSpec(&spec);
    if (made == nullptr) {
      throw py::error_already_set();
    }
    return reinterpret_cast<PyTypeObject*>(made);
  }();
  return type;
}

// "forward" and "_modules", made once (interned): the lookups below make no string objects.
PyObject* interned(const char* text) {
  PyObject* name = PyUnicode_InternFromString(text);
  if (name == nullptr) {
    throw py::error_already_set();
  }
  return name;  // kept for the process
}

PyObject* forwardName() {
  static PyObject* name = interned("forward");
  return name;
}

// Every module under root with its qualified name, as root.named_modules() gives them (each
// module once, at the first path that reaches it; None children skipped), walked in C++ over
// the _modules dicts: the Python generator costs more than everything else a scope does.
void nameModules(PyObject* module, std::string& path,
                 std::unordered_map<PyObject*, std::string>& names) {
  if (!names.emplace(module, path).second) {
    return;
  }
  static PyObject* modulesName = interned("_modules");
  py::object dict = py::reinterpret_steal<py::object>(PyObject_GenericGetDict(module, nullptr));
  if (!dict) {
    throw py::error_already_set();
  }
  PyObject* children = PyDict_GetItemWithError(dict.ptr(), modulesName);  // borrowed
  if (children == nullptr || !PyDict_Check(children)) {
    if (PyErr_Occurred()) {
      throw py::error_already_set();
    }
    return;
  }
  Py_ssize_t pos = 0;
  PyObject* key = nullptr;
  PyObject* child = nullptr;
  while (PyDict_Next(children, &pos, &key, &child)) {
    Py_ssize_t size = 0;
    const char* name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, &size) : nullptr;
    if (child == Py_None || name == nullptr) {
      PyErr_Clear();
      continue;
    }
    const size_t mark = path.size();
    if (mark > 0) {
      path.push_back('.');
    }
    path.append(name, static_cast<size_t>(size));
    nameModules(child, path, names);
    path.resize(mark);
  }
}

// A module whose forward is wrapped, and by how many live scopes (threads may share modules).
struct Installed {
  PyObject* wrapper;   // strong
  PyObject* previous;  // strong: what __dict__["forward"] held before, or nullptr
  int users;
};

std::unordered_map<PyObject*, Installed>& installed() {
  static auto* map = new std::unordered_map<PyObject*, Installed>();
  return *map;
}

// Wraps module's forward, or counts one more user of its wrapper.
void wrap(PyObject* module) {
  auto& map = installed();
  if (auto it = map.find(module); it != map.end()) {
    ++it->second.users;
    return;
  }
  py::object dict = py::reinterpret_steal<py::object>(PyObject_GenericGetDict(module, nullptr));
  if (!dict) {
    throw py::error_already_set();
  }
  PyObject* previous = PyDict_GetItemWithError(dict.ptr(), forwardName());  // borrowed
  if (previous == nullptr && PyErr_Occurred()) {
    throw py::error_already_set();
  }
  py::object original = py::reinterpret_steal<py::object>(PyObject_GetAttr(module, forwardName()));
  if (!original) {
    throw py::error_already_set();
  }
  auto* w = PyObject_GC_New(WrappedForward, wrappedType());
  if (w == nullptr) {
    throw py::error_already_set();
  }
  w->original = original.release().ptr();
  w->module = Py_NewRef(module);
  PyObject_GC_Track(w);
  py::object wrapper = py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(w));
  Py_XINCREF(previous);
  if (PyDict_SetItem(dict.ptr(), forwardName(), wrapper.ptr()) != 0) {
    Py_XDECREF(previous);
    throw py::error_already_set();
  }
  map.emplace(module, Installed{wrapper.release().ptr(), previous, 1});
}

// One user fewer; the last puts back what __dict__["forward"] held (unless something else has
// replaced the wrapper since). Runs no Python code and raises nothing; an error already pending
// (a forward's, on its way out) is kept.
void unwrap(PyObject* module) {
  auto& map = installed();
  auto it = map.find(module);
  if (it == map.end() || --it->second.users > 0) {
    return;
  }
  Installed gone = it->second;
  map.erase(it);
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  PyObject* dict = PyObject_GenericGetDict(module, nullptr);
  if (dict != nullptr) {
    PyObject* now = PyDict_GetItemWithError(dict, forwardName());
    if (now == gone.wrapper) {
      if (gone.previous != nullptr) {
        PyDict_SetItem(dict, forwardName(), gone.previous);
      } else {
        PyDict_DelItem(dict, forwardName());
      }
    }
    Py_DECREF(dict);
  }
  if (PyErr_Occurred()) {
    PyErr_WriteUnraisable(module);
  }
  PyErr_Restore(type, value, trace);
  Py_XDECREF(gone.previous);
  Py_DECREF(gone.wrapper);
}

class ForwardScope final : public Forward::ModuleScope {
 public:
  explicit ForwardScope(const py::object& root) {
    py::gil_scoped_acquire gil;
    state_.owner = std::this_thread::get_id();
    std::string path;
    nameModules(root.ptr(), path, state_.names);
    modules_.reserve(state_.names.size());
    try {
      for (const auto& [module, name] : state_.names) {
        wrap(module);
        modules_.push_back(module);
      }
    } catch (...) {
      release();  // the destructor will not run: no wrapper may outlive the failed scope
      throw;
    }
    liveScopes().push_back(&state_);
  }

  ~ForwardScope() override {
    py::gil_scoped_acquire gil;
    release();
  }

  void close() override {
    py::gil_scoped_acquire gil;
    release();
  }

 private:
  void release() {
    auto& scopes = liveScopes();
    for (auto it = scopes.begin(); it != scopes.end(); ++it) {
      if (*it == &state_) {
        scopes.erase(it);
        break;
      }
    }
    for (PyObject* module : modules_) {
      unwrap(module);
    }
    modules_.clear();
  }

  ForwardScopeState state_;
  std::vector<PyObject*> modules_;  // wrapped by this scope; each kept alive by its wrapper
};

}  // namespace

std::unique_ptr<Forward::ModuleScope> makeForwardScope(const py::object& root) {
  return std::make_unique<ForwardScope>(root);
}

size_t wrappedForwards() {
  return installed().size();
}

}  // namespace torchutil
