#pragma once
// util.PyModule: a TorchScript custom class that boxes an eager Python callable (an nn.Module,
// a torch.compile'd module, a function) so that the dispatcher can carry it as `Any`.
#include <torch/custom_class.h>
#include <torch/python.h>

#include <memory>

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

// Global module hooks that report the module scopes under root (qualified names) to
// OpCounter until the returned object is destroyed.
std::unique_ptr<Forward::ModuleScope> makeModuleScope(const pybind11::object& root);

// Boxes obj, with the args (tuple) and kwargs (dict) every forward is called with when given;
// raises TypeError when obj is not callable.
pybind11::object wrapCallable(const pybind11::object& obj, const pybind11::object& args,
                              const pybind11::object& kwargs);

// Registers util.PyModule and its Forward factory. Called once from the module init.
void registerPyModule();

}  // namespace torchutil
