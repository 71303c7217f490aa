#pragma once
// util.PyModule: a TorchScript custom class that boxes an eager Python callable (an nn.Module,
// a torch.compile'd module, a function) so that the dispatcher can carry it as `Any`.
#include <torch/custom_class.h>
#include <torch/python.h>

#include <memory>
#include <string>

#include "libtorch/Forward.h"

namespace torchutil {

struct PyModule : torch::CustomClassHolder {
  // args and kwargs (a tuple and a dict, or None): when either is given, every forward is
  // callable(*args, **kwargs) and the profile's input tensors only say the device and batch.
  PyModule(pybind11::object callable, pybind11::object args, pybind11::object kwargs);
  ~PyModule() override;

  pybind11::object callable;  // these three touched only with the GIL held
  pybind11::object args;
  pybind11::object kwargs;
  bool bound = false;
  std::string repr;
};

// Reports the module scopes of the forwards under root to OpCounter until the returned object
// is closed or destroyed: for an eager nn.Module, its named modules' qualified names (their
// forwards wrapped, ModuleForwards.cpp); for anything else, each module's type under its
// caller (global module hooks).
std::unique_ptr<Forward::ModuleScope> makeModuleScope(const pybind11::object& root);

// The forwards wrapped by the live scopes of an nn.Module root, and how many modules are
// wrapped now (0 when no such scope is live: the tests' check that none outlives its call).
std::unique_ptr<Forward::ModuleScope> makeForwardScope(const pybind11::object& root);
size_t wrappedForwards();

// Boxes obj, with the args (tuple) and kwargs (dict) every forward is called with when given;
// raises TypeError when obj is not callable.
pybind11::object wrapCallable(const pybind11::object& obj, const pybind11::object& args,
                              const pybind11::object& kwargs);

// Registers util.PyModule and its Forward factory. Called once from the module init.
void registerPyModule();

// The Python functions the profile calls into the torchutil package with, each registered by the
// module that defines it when torchutil is imported (torchutil._C._set_callback): C++ imports no
// module of the package. With the GIL held. setPythonCallback refuses an unknown name or a
// callable that is not one (None unregisters it); pythonCallback throws naming the callback and
// the module that registers it where none is registered.
struct PythonCallbackSpec {
  const char* name;
  const char* module;  // the module that defines and registers it
};
inline constexpr PythonCallbackSpec kPythonCallbacks[] = {
    // The factory of an Inductor recording (start(), stop(), finish()), for a profile that
    // traces a compiled model's kernels.
    {"inductor_recording", "torchutil/_inductor.py"},
    // run_eager(callable, args, kwargs): the count's eager forward of compiled code.
    {"run_eager", "torchutil/_eager.py"},
    // uncounted_reason(callable): why its FLOPs cannot be counted (an AOTInductor package), "".
    {"uncounted_reason", "torchutil/_eager.py"},
};
void setPythonCallback(const std::string& name, pybind11::object fn);
pybind11::object pythonCallback(const std::string& name);
// name -> the registered callable, or None where none is.
pybind11::dict pythonCallbacks();

}  // namespace torchutil
