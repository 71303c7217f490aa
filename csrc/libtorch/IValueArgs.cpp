#include "libtorch/IValueArgs.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace torchutil {
namespace {

Arg toArg(const c10::IValue& v, bool& pythonTensor) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      return Arg::none();
    }
    pythonTensor = pythonTensor || t.key_set().has(c10::DispatchKey::Python);
    Arg a;
    a.kind = ArgKind::Tensor;
    a.tensor = tensorInfo(t);
    return a;
  }
  if (v.isTensorList() || v.isOptionalTensorList()) {
    Arg a;
    a.kind = ArgKind::TensorList;
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined()) {
        pythonTensor = pythonTensor || e.toTensor().key_set().has(c10::DispatchKey::Python);
        a.tensors.push_back(tensorInfo(e.toTensor()));
      }
    }
    return a;
  }
  if (v.isInt()) {
    return Arg::ofInt(v.toInt());
  }
  if (v.isSymInt()) {
    auto s = v.toSymInt();
    return s.is_heap_allocated() ? Arg{} : Arg::ofInt(s.as_int_unchecked());
  }
  if (v.isIntList()) {
    return Arg::ofInts(v.toIntVector());
  }
  if (v.isList()) {
    // SymInt lists box as generic lists.
    std::vector<int64_t> ints;
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isInt()) {
        ints.push_back(e.toInt());
      } else if (e.isSymInt() && !e.toSymInt().is_heap_allocated()) {
        ints.push_back(e.toSymInt().as_int_unchecked());
      } else {
        Arg other;
        other.kind = ArgKind::Other;
        return other;
      }
    }
    return Arg::ofInts(std::move(ints));
  }
  if (v.isDouble()) {
    return Arg::ofDouble(v.toDouble());
  }
  if (v.isBool()) {
    return Arg::ofBool(v.toBool());
  }
  if (v.isNone()) {
    return Arg::none();
  }
  Arg other;
  other.kind = ArgKind::Other;
  return other;
}

}  // namespace

TensorInfo tensorInfo(const at::Tensor& t) {
  TensorInfo info;
  if (t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    return info;  // symbolic shapes (tracing): no concrete size to price
  }
  info.sizes = t.sizes().vec();
  info.elementSize = static_cast<int64_t>(t.element_size());
  info.dtype = torchDtypeName(c10::toString(t.scalar_type()));
  return info;
}

ConvertedArgs toArgs(c10::ArrayRef<const c10::IValue> values) {
  ConvertedArgs out;
  out.args.reserve(values.size());
  for (const c10::IValue& v : values) {
    out.args.push_back(toArg(v, out.pythonTensor));
  }
  return out;
}

Args toArgs(const std::vector<c10::IValue>& values) {
  bool ignored = false;
  Args args;
  args.reserve(values.size());
  for (const c10::IValue& v : values) {
    args.push_back(toArg(v, ignored));
  }
  return args;
}

}  // namespace torchutil
