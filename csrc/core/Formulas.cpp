// The registry's formulas: vector ops, memory ops and transparent ops here, the other families
// in Formulas<Family>.cpp (FormulaFamilies.h). The convention is in Convention.h.
//
// Matrix formulas follow torch.utils.flop_counter (same results on the same shapes). The vector
// factors are torchutil's own, documented in docs/counting.md:
//   elementwise op ............ 1 per output element (2 for fused multiply-adds such as addcmul)
//   bias of addmm / conv ...... 1 per output element
//   batch norm ................ 2 per element in inference (scale and shift), 5 when training
//   layer/group/instance/RMS .. 5 per element (statistics, normalize, affine)
//   softmax ................... 5 per element (max, subtract, exp, sum, divide)
//   max/avg pooling ........... 1 per window element per output element
//   adaptive pooling, reductions 1 per input element (norms 2, variance 3, logsumexp 3)
//   interpolation ............. 1 per tap per output element (linear 2, bilinear 4, bicubic 16)
//   sampling at points ........ the taps, and per point its coordinate and weights
//                               (FormulasSampling.cpp)
// Integer and boolean elementwise work (bitwise ops, a step counter's add_) is registered here
// like any elementwise op; CountSession prices it at 0 FLOPs (its bytes count).
// Which level of a composite op is counted is decided by CountSession (outermost counted op).
#include "core/FormulaFamilies.h"

namespace torchutil {
namespace formulas {
namespace {

// ---- vector ops ---------------------------------------------------------------------------
template <int K>
Cost perOutput(const Args&, const Args& out) {
  const TensorInfo* o = firstTensor(out);
  return {0, o == nullptr ? 0 : saturatingMul(K, o->numel())};
}

// 1 FLOP per element of the input at I.
template <size_t I>
Cost perInputAt(const Args& in, const Args&) {
  const TensorInfo* x = tensorAt(in, I);
  return {0, x == nullptr ? 0 : x->numel()};
}

template <int K>
Cost perInput(const Args& in, const Args&) {
  const TensorInfo* x = firstTensor(in);
  return {0, x == nullptr ? 0 : saturatingMul(K, x->numel())};
}

// Batch norm: the first bool argument is `training` in every variant that has one (the no_stats
// overload of _native_batch_norm_legit has it earlier than the others).
Cost batchNorm(const Args& in, const Args&) {
  const TensorInfo* x = firstTensor(in);
  if (x == nullptr) {
    return {};
  }
  bool training = false;
  for (const Arg& a : in) {
    if (a.kind == ArgKind::Bool) {
      training = a.flag;
      break;
    }
  }
  return {0, saturatingMul(training ? 5 : 2, x->numel())};
}

Cost batchNormInference(const Args& in, const Args&) {
  const TensorInfo* x = firstTensor(in);
  return {0, x == nullptr ? 0 : saturatingMul(2, x->numel())};
}

// Pooling with a kernel_size argument at index 1 over Nsp spatial dims.
template <int Nsp>
Cost poolWindow(const Args& in, const Args& out) {
  const TensorInfo* o = firstTensor(out);
  if (o == nullptr || in.size() < 2 || in[1].ints.empty()) {
    return {};
  }
  const std::vector<int64_t>& kernel = in[1].ints;
  int64_t window = 1;
  for (int i = 0; i < Nsp; ++i) {
    window *= kernel.size() == 1 ? kernel[0] : kernel[static_cast<size_t>(i) % kernel.size()];
  }
  return {0, saturatingMul(window, o->numel())};
}

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
// per_sample_weights, include_last_offset, padding_idx) and _embedding_bag_forward_only: each
// of the indices gathers a row of D values into its bag, 1 FLOP per gathered value (an add in
// the sum and mean modes, a compare in max mode: a reduction's 1 per input element), and with
// per_sample_weights 1 more (its multiply).
constexpr size_t kBagIndices = 1;
constexpr size_t kBagPerSampleWeights = 6;
Cost embeddingBag(const Args& in, const Args&) {
  const TensorInfo* weight = tensorAt(in, 0);
  const TensorInfo* indices = tensorAt(in, kBagIndices);
  if (weight == nullptr || indices == nullptr || weight->dim() != 2) {
    return {};
  }
  const int64_t gathered = saturatingMul(indices->numel(), weight->size(1));
  const int64_t weighted = tensorAt(in, kBagPerSampleWeights) != nullptr ? 2 : 1;
  return {0, saturatingMul(weighted, gathered)};
}

// Accumulations at indices: index_add(self, dim, index, source, alpha) adds each source
// element into self (1), scaled first where alpha is not 1 (1 more); scatter_add(self, dim,
// index, src) adds each src element (1); scatter_reduce(self, dim, index, src, reduce,
// include_self) combines each src element with its target (1: a sum, product, max or min), and
// "mean" divides each output element by its count (1 per output element).
constexpr size_t kIndexAddSource = 3;
constexpr size_t kIndexAddAlpha = 4;
constexpr size_t kScatterReduceMode = 4;
Cost indexAddFlops(const Args& in, const Args&) {
  const TensorInfo* source = tensorAt(in, kIndexAddSource);
  if (source == nullptr) {
    return {};
  }
  const bool scaled =
      kIndexAddAlpha < in.size() &&
      (in[kIndexAddAlpha].kind == ArgKind::Int || in[kIndexAddAlpha].kind == ArgKind::Double) &&
      in[kIndexAddAlpha].number != 1.0;
  return {0, saturatingMul(scaled ? 2 : 1, source->numel())};
}

Cost scatterReduceFlops(const Args& in, const Args& out) {
  const TensorInfo* src = tensorAt(in, kIndexAddSource);
  const TensorInfo* o = firstTensor(out);
  if (src == nullptr || o == nullptr) {
    return {};
  }
  const bool mean = kScatterReduceMode < in.size() &&
                    in[kScatterReduceMode].kind == ArgKind::String &&
                    in[kScatterReduceMode].text == "mean";
  return {0, saturatingAdd(src->numel(), mean ? o->numel() : 0)};
}

// _weight_norm_interface(v, g, dim) and its composite _weight_norm: w = v * (g / ||v||), the
// norm over every dimension but dim (one per element of g): per element of v its square and
// its add (2) and the multiply (1); per element of g the square root and the divide (2).
Cost weightNormFlops(const Args& in, const Args&) {
  const TensorInfo* v = tensorAt(in, 0);
  const TensorInfo* g = tensorAt(in, 1);
  if (v == nullptr || g == nullptr) {
    return {};
  }
  return {0, saturatingAdd(saturatingMul(3, v->numel()), saturatingMul(2, g->numel()))};
}

}  // namespace
}  // namespace formulas

void registerAllFormulas(FormulaRegistry& r) {
  using namespace formulas;
  using C = OpClass;

  registerMatrixFormulas(r);
  registerAttentionFormulas(r);
  registerSamplingFormulas(r);
  registerLinalgFormulas(r);
  addAll(r, {"aten::_embedding_bag", "aten::_embedding_bag_forward_only"}, C::Vector,
         &embeddingBag);

  // Elementwise arithmetic and activations: 1 FLOP per output element.
  addAll(r, {"aten::add",         "aten::sub",
             "aten::mul",         "aten::div",
             "aten::rsub",        "aten::neg",
             "aten::abs",         "aten::relu",
             "aten::relu6",       "aten::leaky_relu",
             "aten::hardtanh",    "aten::threshold",
             "aten::clamp",       "aten::clamp_min",
             "aten::clamp_max",   "aten::clip",
             "aten::maximum",     "aten::minimum",
             "aten::fmax",        "aten::fmin",
             "aten::where",       "aten::sqrt",
             "aten::rsqrt",       "aten::reciprocal",
             "aten::pow",         "aten::square",
             "aten::exp",         "aten::exp2",
             "aten::expm1",       "aten::log",
             "aten::log1p",       "aten::log2",
             "aten::log10",       "aten::sin",
             "aten::cos",         "aten::tan",
             "aten::tanh",        "aten::sigmoid",
             "aten::erf",         "aten::erfc",
             "aten::sign",        "aten::floor",
             "aten::ceil",        "aten::round",
             "aten::trunc",       "aten::frac",
             "aten::eq",          "aten::ne",
             "aten::lt",          "aten::le",
             "aten::gt",          "aten::ge",
             "aten::logical_and", "aten::logical_or",
             "aten::logical_not", "aten::logical_xor",
             "aten::masked_fill", "aten::elu",
             "aten::selu",        "aten::celu",
             "aten::softplus",    "aten::softshrink",
             "aten::hardshrink",  "aten::silu",
             "aten::gelu",        "aten::hardswish",
             "aten::hardsigmoid", "aten::mish",
             "aten::prelu",       "aten::_prelu_kernel",
             "aten::glu",         "aten::logit",
             "aten::nan_to_num",  "aten::remainder",
             "aten::fmod",        "aten::floor_divide",
             "aten::atan2"},
         C::Vector, &perOutput<1>);
  // Bitwise ops and shifts, as functions and as operators (&, |, ^, ~, <<, >>, in place too):
  // elementwise, and defined on integer and boolean tensors only, so their FLOPs are 0 and
  // their bytes count (CountSession's rule for integer work).
  addAll(r,
         {"aten::bitwise_and", "aten::bitwise_or", "aten::bitwise_xor", "aten::bitwise_not",
          "aten::bitwise_left_shift", "aten::bitwise_right_shift", "aten::__and__", "aten::__or__",
          "aten::__xor__", "aten::__iand__", "aten::__ior__", "aten::__ixor__", "aten::__lshift__",
          "aten::__rshift__", "aten::__ilshift__", "aten::__irshift__"},
         C::Vector, &perOutput<1>);
  // Comparisons with a scalar result: 1 per input element.
  addAll(r, {"aten::equal", "aten::allclose"}, C::Vector, &perInput<1>);
  addAll(r, {"aten::addcmul", "aten::addcdiv", "aten::lerp", "aten::native_dropout"}, C::Vector,
         &perOutput<2>);
  // torch.ao.quantization's conversions: quantizing scales and rounds (2 per element, as
  // quantized::linear_dynamic's own quantization counts), dequantizing subtracts the zero
  // point and scales (2).
  addAll(r, {"aten::quantize_per_tensor", "aten::quantize_per_channel", "aten::dequantize"},
         C::Vector, &perInput<2>);
  // Quantized elementwise ops (torch.ao.nn.quantized.FloatFunctional, quantized activations):
  // the op (1) and the output's requantization (1) per element, 1 more for a fused ReLU.
  addAll(r, {"quantized::add", "quantized::mul", "quantized::hardswish"}, C::Vector, &perOutput<2>);
  addAll(r, {"quantized::add_relu", "quantized::mul_relu"}, C::Vector, &perOutput<3>);

  // Accumulations at indices (index_add_'s scatter_add_ runs inside it).
  r.add("aten::index_add", C::Vector, &indexAddFlops);
  r.add("aten::scatter_add", C::Vector, &perInputAt<kIndexAddSource>);
  r.add("aten::scatter_reduce", C::Vector, &scatterReduceFlops);
  addAll(r, {"aten::_weight_norm_interface", "aten::_weight_norm"}, C::Vector, &weightNormFlops);

  // The attention fast path's qkv bias add: 1 per element (q's scaling is not counted).
  r.add("aten::_transform_bias_rescale_qkv", C::Vector, &perInput<1>);

  // Normalization.
  addAll(r,
         {"aten::batch_norm", "aten::_batch_norm_impl_index", "aten::native_batch_norm",
          "aten::_native_batch_norm_legit", "aten::_native_batch_norm_legit_functional",
          "aten::cudnn_batch_norm", "aten::miopen_batch_norm"},
         C::Vector, &batchNorm);
  // The with_update variants have no `training` flag: they always train (they update the
  // running statistics).
  addAll(r, {"aten::_batch_norm_with_update", "aten::_batch_norm_with_update_functional"},
         C::Vector, &perInput<5>);
  addAll(r, {"aten::_native_batch_norm_legit_no_training", "aten::_batch_norm_no_update"},
         C::Vector, &batchNormInference);
  addAll(
      r,
      {"aten::layer_norm", "aten::native_layer_norm", "aten::group_norm", "aten::native_group_norm",
       "aten::instance_norm", "aten::rms_norm", "aten::_fused_rms_norm"},
      C::Vector, &perInput<5>);
  addAll(
      r,
      {"aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax",
       "aten::_masked_softmax", "aten::_safe_softmax", "aten::_nested_tensor_softmax_with_shape"},
      C::Vector, &perInput<5>);

  // Pooling.
  addAll(r, {"aten::max_pool1d", "aten::max_pool1d_with_indices", "aten::avg_pool1d"}, C::Vector,
         &poolWindow<1>);
  addAll(r,
         {"aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::mkldnn_max_pool2d",
          "aten::avg_pool2d", "aten::quantized_max_pool2d"},
         C::Vector, &poolWindow<2>);
  addAll(r,
         {"aten::max_pool3d", "aten::max_pool3d_with_indices", "aten::mkldnn_max_pool3d",
          "aten::avg_pool3d"},
         C::Vector, &poolWindow<3>);
  addAll(r,
         {"aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
          "aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d",
          "aten::mkldnn_adaptive_avg_pool2d", "aten::adaptive_max_pool1d",
          "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d"},
         C::Vector, &perInput<1>);

  // Reductions and scans.
  addAll(r,
         {"aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::max", "aten::min",
          "aten::prod", "aten::all", "aten::any", "aten::argmax", "aten::argmin", "aten::cumsum",
          "aten::cumprod", "aten::count_nonzero", "aten::nansum"},
         C::Vector, &perInput<1>);
  addAll(r, {"aten::norm", "aten::linalg_vector_norm", "aten::frobenius_norm"}, C::Vector,
         &perInput<2>);
  addAll(r, {"aten::var", "aten::std", "aten::var_mean", "aten::std_mean", "aten::logsumexp"},
         C::Vector, &perInput<3>);

  // Interpolation: taps per output element.
  addAll(r, {"aten::upsample_linear1d"}, C::Vector, &perOutput<2>);
  addAll(r, {"aten::upsample_bilinear2d", "aten::_upsample_bilinear2d_aa"}, C::Vector,
         &perOutput<4>);
  addAll(r, {"aten::upsample_trilinear3d"}, C::Vector, &perOutput<8>);
  addAll(r, {"aten::upsample_bicubic2d", "aten::_upsample_bicubic2d_aa"}, C::Vector,
         &perOutput<16>);

  // Data movement: bytes, no FLOPs (prims::convert_element_type: the casts of Inductor's
  // decompositions, e.g. a half batch norm's computing in float; sparse layouts' sorting and
  // merging of indices, and conversions between layouts).
  addAll(r,
         {"aten::copy_",
          "aten::clone",
          "aten::_to_copy",
          "prims::convert_element_type",
          "aten::cat",
          "aten::stack",
          "aten::constant_pad_nd",
          "aten::reflection_pad1d",
          "aten::reflection_pad2d",
          "aten::reflection_pad3d",
          "aten::replication_pad1d",
          "aten::replication_pad2d",
          "aten::replication_pad3d",
          "aten::index_select",
          "aten::gather",
          "aten::scatter",
          "aten::index",
          "aten::index_put",
          "aten::_unsafe_index",
          "aten::embedding",
          "aten::masked_select",
          "aten::repeat",
          "aten::repeat_interleave",
          "aten::roll",
          "aten::flip",
          "aten::fill",
          "aten::zero",
          "aten::zeros",
          "aten::zeros_like",
          "aten::ones",
          "aten::ones_like",
          "aten::full",
          "aten::full_like",
          "aten::new_zeros",
          "aten::new_ones",
          "aten::new_full",
          "aten::scalar_tensor",
          "aten::arange",
          "aten::linspace",
          "aten::pixel_shuffle",
          "aten::pixel_unshuffle",
          "aten::channel_shuffle",
          "aten::native_channel_shuffle",
          "aten::_local_scalar_dense",
          "aten::im2col",
          "aten::col2im",
          "aten::narrow_copy",
          "aten::lift_fresh_copy",
          "aten::upsample_nearest1d",
          "aten::upsample_nearest2d",
          "aten::upsample_nearest3d",
          "aten::_upsample_nearest_exact1d",
          "aten::_upsample_nearest_exact2d",
          "aten::_upsample_nearest_exact3d",
          "aten::bernoulli",
          "aten::uniform",
          "aten::normal",
          "aten::rand",
          "aten::randn",
          "aten::randint",
          "aten::rand_like",
          "aten::randn_like",
          "aten::tril",
          "aten::triu",
          "aten::_reshape_copy",
          "aten::block_diag",
          "aten::_nested_from_padded",
          "aten::_nested_tensor_from_mask",
          "aten::_nested_from_padded_and_nested_example",
          "aten::to_padded_tensor",
          "aten::_nested_tensor_from_tensor_list",
          "aten::tril_indices",
          "aten::triu_indices",
          "aten::coalesce",
          "aten::_coalesce",
          "aten::_to_sparse",
          "aten::_to_sparse_csr",
          "aten::_to_sparse_csc",
          "aten::_to_sparse_bsr",
          "aten::_to_sparse_bsc",
          "aten::_to_dense",
          "aten::to_mkldnn",
          "aten::_convert_indices_from_coo_to_csr",
          "aten::_convert_indices_from_csr_to_coo",
          "quantized::cat"},
         C::Memory);

  // Views, allocations, metadata and composite wrappers whose callees are counted (sparse
  // tensors' metadata, their parts, construction from parts, and the composites that dispatch
  // to a priced product or conversion).
  addAll(r,
         {"aten::view",
          "aten::reshape",
          "aten::_reshape_alias",
          "aten::_unsafe_view",
          "aten::flatten",
          "aten::unflatten",
          "aten::squeeze",
          "aten::unsqueeze",
          "aten::expand",
          "aten::expand_as",
          "aten::broadcast_to",
          "aten::permute",
          "aten::transpose",
          "aten::t",
          "aten::numpy_T",
          "aten::mT",
          "aten::mH",
          "aten::adjoint",
          "aten::conj",
          "aten::_conj",
          "aten::_neg_view",
          "aten::select",
          "aten::slice",
          "aten::narrow",
          "aten::split",
          "aten::split_with_sizes",
          "aten::chunk",
          "aten::unbind",
          "aten::unsafe_split",
          "aten::unsafe_split_with_sizes",
          "aten::unsafe_chunk",
          "aten::cudnn_is_acceptable",
          "aten::tensor_split",
          "aten::as_strided",
          "aten::alias",
          "aten::detach",
          "aten::lift_fresh",
          "aten::view_as",
          "aten::reshape_as",
          "aten::movedim",
          "aten::swapaxes",
          "aten::diagonal",
          "aten::unfold",
          "aten::real",
          "aten::imag",
          "aten::view_as_real",
          "aten::view_as_complex",
          "aten::empty",
          "aten::empty_like",
          "aten::empty_strided",
          "aten::new_empty",
          "aten::new_empty_strided",
          "aten::_empty_affine_quantized",
          "aten::_empty_per_channel_affine_quantized",
          "aten::qscheme",
          "aten::q_scale",
          "aten::q_zero_point",
          "aten::q_per_channel_scales",
          "aten::q_per_channel_zero_points",
          "aten::q_per_channel_axis",
          "aten::resize",
          "aten::resize_as",
          "aten::set",
          "aten::contiguous",
          "aten::to",
          "aten::type_as",
          "aten::_autocast_to_reduced_precision",
          "aten::_autocast_to_full_precision",
          "aten::dropout",
          "aten::feature_dropout",
          "aten::alpha_dropout",
          "aten::feature_alpha_dropout",
          "aten::linear",
          "aten::matmul",
          "aten::einsum",
          "aten::conv1d",
          "aten::conv2d",
          "aten::conv3d",
          "aten::conv_transpose1d",
          "aten::conv_transpose2d",
          "aten::conv_transpose3d",
          "aten::_convolution_mode",
          "aten::size",
          "aten::sym_size",
          "aten::stride",
          "aten::sym_stride",
          "aten::numel",
          "aten::sym_numel",
          "aten::dim",
          "aten::is_contiguous",
          "aten::is_floating_point",
          "aten::is_complex",
          "aten::is_nonzero",
          "aten::is_same_size",
          "aten::result_type",
          "aten::item",
          "aten::_has_compatible_shallow_copy_type",
          "aten::_shape_as_tensor",
          "aten::broadcast_tensors",
          "aten::meshgrid",
          "aten::_nested_tensor_from_mask_left_aligned",
          "aten::_assert_async",
          "aten::_assert_tensor_metadata",
          "aten::_functional_assert_async",
          "aten::record_stream",
          "aten::flatten_dense_tensors",
          "aten::unflatten_dense_tensors",
          "aten::_version",
          "aten::retain_grad",
          "aten::requires_grad_",
          "aten::output_nr",
          "aten::_fw_primal",
          "aten::_make_dual",
          "aten::_unpack_dual",
          "aten::pad",
          "aten::resolve_conj",
          "aten::resolve_neg",
          "aten::_nnz",
          "aten::_indices",
          "aten::_values",
          "aten::indices",
          "aten::values",
          "aten::crow_indices",
          "aten::col_indices",
          "aten::ccol_indices",
          "aten::row_indices",
          "aten::sparse_dim",
          "aten::dense_dim",
          "aten::is_coalesced",
          "aten::_coalesced",
          "aten::sparse_resize",
          "aten::sparse_resize_and_clear",
          "aten::_sparse_coo_tensor_with_dims",
          "aten::_sparse_coo_tensor_with_dims_and_tensors",
          "aten::_sparse_coo_tensor_unsafe",
          "aten::sparse_coo_tensor",
          "aten::_sparse_compressed_tensor_unsafe",
          "aten::sparse_compressed_tensor",
          "aten::_sparse_csr_tensor_unsafe",
          "aten::sparse_csr_tensor",
          "aten::_sparse_mm",
          "aten::to_sparse",
          "aten::to_sparse_csr",
          "aten::to_sparse_csc",
          "aten::to_sparse_bsr",
          "aten::to_sparse_bsc",
          "aten::to_dense"},
         C::Transparent);
}

}  // namespace torchutil
