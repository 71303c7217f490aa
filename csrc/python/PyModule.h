#pragma once
// util.PyModule: a TorchScript custom class that boxes an eager Python callable (an nn.Module,
// a torch.compile'd module, a function) so that the dispatcher can carry it as `Any`.
#include <torch/custom_class.h>
#include <torch/python.h>

#include <memory>

#include "libtorch/Forward.h"

namespace torchutil {

struct PyModule : torch::CustomClassHolder {
  explicit PyModule(pybind11::object callable);
  ~PyModule() override;

  pybind11::object callable;  // touched only with the GIL held
  std::string repr;
};

// Global module hooks that report the module scopes under root (qualified names) to
// OpCounter until the returned object is destroyed.
std::unique_ptr<Forward::ModuleScope> makeModuleScope(const pybind11::object& root);

// Boxes obj; raises TypeError when obj is not callable.
pybind11::object wrapCallable(const pybind11::object& obj);

// Registers util.PyModule and its Forward factory. Called once from the module init.
void registerPyModule();

}  // namespace torchutil
