#pragma once
// Converts the dispatcher's boxed arguments (c10::IValue) into torch-free OpArgs.
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include "core/OpArgs.h"

namespace torchutil {

struct ConvertedArgs {
  Args args;
  // Some tensor is a Python subclass or a fake tensor (DispatchKey::Python): the op's real
  // work happens in the ops its __torch_dispatch__ calls, which are seen on their own.
  bool pythonTensor = false;
};

ConvertedArgs toArgs(c10::ArrayRef<const c10::IValue> values);
Args toArgs(const std::vector<c10::IValue>& values);

TensorInfo tensorInfo(const at::Tensor& t);

}  // namespace torchutil
