#include "libtorch/IValueArgs.h"

#include <ATen/NestedTensorImpl.h>
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/class_type.h>
#include <ATen/core/function.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <utility>

namespace torchutil {
namespace {

// A quantized convolution's weight, packed in a custom class (torch.ao.quantization's
// Conv2dPackedParamsBase and Conv3dPackedParamsBase; conv1d uses the 2-d one): the unpacked
// weight's shape, through the class's own unpack(), with RecordFunction off so that its ops
// are not taken for the model's. Nothing for any other object.
std::optional<TensorInfo> packedConvolutionWeight(const c10::IValue& v) {
  const c10::ClassTypePtr type = v.toObjectRef().type();
  const std::optional<c10::QualifiedName>& name = type->name();
  if (!name.has_value() ||
      (name->name() != "Conv2dPackedParamsBase" && name->name() != "Conv3dPackedParamsBase")) {
    return std::nullopt;
  }
  torch::jit::Function* unpack = type->findMethod("unpack");
  if (unpack == nullptr) {
    return std::nullopt;
  }
  const at::DisableRecordFunctionGuard quiet;
  torch::jit::Stack stack{v};
  unpack->run(stack);
  if (stack.size() != 1 || !stack[0].isTuple()) {
    return std::nullopt;
  }
  const auto& parts = stack[0].toTupleRef().elements();
  if (parts.empty() || !parts[0].isTensor() || !parts[0].toTensor().defined()) {
    return std::nullopt;
  }
  return tensorInfo(parts[0].toTensor());
}

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
  if (v.isString()) {
    return Arg::ofString(v.toStringRef());
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
  if (v.isObject()) {
    if (std::optional<TensorInfo> weight = packedConvolutionWeight(v)) {
      Arg a;
      a.kind = ArgKind::Tensor;
      a.tensor = std::move(*weight);
      return a;
    }
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
  if (t.is_nested()) {
    // A nested tensor has no sizes() (it throws): it is described by its components. They are
    // stacked along their first dimension, [sum of their first sizes, the rest...], when the
    // rest agree (the [length_i, D] tokens of a padded batch), else flattened, so that
    // elementwise ops, norms and softmax see the elements the kernels really touch.
    const at::Tensor& sizes = at::native::get_nested_sizes(t);
    const int64_t n = sizes.dim() == 2 ? sizes.size(0) : 0;
    const int64_t d = sizes.dim() == 2 ? sizes.size(1) : 0;
    const int64_t* s = sizes.data_ptr<int64_t>();
    int64_t rows = 0;
    int64_t total = 0;
    bool stackable = d > 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t numel = 1;
      for (int64_t j = 0; j < d; ++j) {
        numel *= s[i * d + j];
        stackable = stackable && (j == 0 || s[i * d + j] == s[j]);
      }
      rows += d > 0 ? s[i * d] : 0;
      total += numel;
    }
    if (stackable && n > 0) {
      info.sizes.assign(s, s + d);
      info.sizes[0] = rows;
    } else {
      info.sizes = {total};
    }
    info.nested = true;
  } else {
    info.sizes = t.sizes().vec();
  }
  // A sparse tensor's parts are read from its impl, not through _values() and _indices(),
  // which are dispatcher ops: the count's own callback would see them.
  if (t.is_sparse()) {
    const auto* impl = static_cast<const at::SparseTensorImpl*>(t.unsafeGetTensorImpl());
    const at::Tensor values = impl->values();
    const at::Tensor indices = impl->indices();
    info.storedValues = values.numel();
    info.storedBytes = static_cast<int64_t>(values.nbytes() + indices.nbytes());
  } else if (t.is_sparse_csr()) {  // every compressed layout: CSR, CSC, BSR, BSC
    const auto* impl = static_cast<const at::SparseCsrTensorImpl*>(t.unsafeGetTensorImpl());
    info.storedValues = impl->values().numel();
    info.storedBytes =
        static_cast<int64_t>(impl->values().nbytes() + impl->compressed_indices().nbytes() +
                             impl->plain_indices().nbytes());
  }
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
