// Every FLOP formula of torchutil, one per op family. The convention is in Convention.h.
//
// Matrix formulas follow torch.utils.flop_counter (same results on the same shapes). The vector
// factors below are torchutil's own, documented in docs/counting.md:
//   elementwise op ............ 1 per output element (2 for fused multiply-adds such as addcmul)
//   bias of addmm / conv ...... 1 per output element
//   batch norm ................ 2 per element in inference (scale and shift), 5 when training
//   layer/group/instance/RMS .. 5 per element (statistics, normalize, affine)
//   softmax ................... 5 per element (max, subtract, exp, sum, divide)
//   max/avg pooling ........... 1 per window element per output element
//   adaptive pooling, reductions 1 per input element (norms 2, variance 3, logsumexp 3)
//   interpolation ............. 1 per tap per output element (linear 2, bilinear 4, bicubic 16)
// Which level of a composite op is counted is decided by CountSession (outermost counted op).
#include <stdexcept>
#include <string>

#include "core/Convention.h"
#include "core/FormulaRegistry.h"

namespace torchutil {
namespace {

const TensorInfo* tensorAt(const Args& args, size_t i) {
  if (i < args.size() && args[i].kind == ArgKind::Tensor) {
    return &args[i].tensor;
  }
  return nullptr;
}

bool boolAt(const Args& args, size_t i) {
  return i < args.size() && args[i].kind == ArgKind::Bool && args[i].flag;
}

int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) {
    p = saturatingMul(p, v[i]);
  }
  return p;
}

bool isZero(const Args& args, size_t i) {
  return i < args.size() && (args[i].kind == ArgKind::Double || args[i].kind == ArgKind::Int) &&
         args[i].number == 0.0;
}

// A bias (the input at biasIdx) is added once per output element; when the op scales it by a
// beta (the argument at betaIdx) of 0 it is not added at all (baddbmm(..., beta=0) in GPT-2's
// attention only allocates its output).
int64_t biasFlops(const Args& in, int biasIdx, const TensorInfo& out, int betaIdx = -1) {
  if (biasIdx < 0 || tensorAt(in, static_cast<size_t>(biasIdx)) == nullptr ||
      (betaIdx >= 0 && isZero(in, static_cast<size_t>(betaIdx)))) {
    return 0;
  }
  return out.numel();
}

// ---- matrix products: 2 * (output elements) * (contracted length) ------------------------
// A is the index of the left operand; the contracted length is its last dimension. BiasIdx is
// the index of the bias (added once per output element), kNoBias where there is none.
constexpr int kNoBias = -1;
template <int A, int BiasIdx>
Cost contraction(const Args& in, const Args& out) {
  const TensorInfo* a = tensorAt(in, A);
  const TensorInfo* o = firstTensor(out);
  if (a == nullptr || o == nullptr || a->dim() == 0) {
    return {};
  }
  return {macsToFlops(saturatingMul(o->numel(), a->size(-1))), biasFlops(in, BiasIdx, *o)};
}

// addbmm(self [n,p], batch1 [b,n,m], batch2 [b,m,p]) sums b products into one [n,p] result.
Cost addbmm(const Args& in, const Args& out) {
  const TensorInfo* b1 = tensorAt(in, 1);
  const TensorInfo* o = firstTensor(out);
  if (b1 == nullptr || o == nullptr || b1->dim() != 3) {
    return {};
  }
  return {macsToFlops(saturatingMul(saturatingMul(o->numel(), b1->size(0)), b1->size(2))),
          biasFlops(in, /*biasIdx=*/0, *o, /*betaIdx=*/3)};
}

// addmm(self, mat1, mat2, beta, alpha) and its kin (baddbmm, addmv): self, the bias, is added
// once per output element unless beta is 0. _addmm_activation fuses a ReLU or GELU into the
// epilogue: Activation more FLOPs per output element.
constexpr int kAddmmBeta = 3;
template <int Activation>
Cost addmm(const Args& in, const Args& out) {
  Cost c = contraction</*A=*/1, kNoBias>(in, out);
  const TensorInfo* o = firstTensor(out);
  if (o != nullptr && c.matrixFlops > 0) {
    c.vectorFlops = saturatingAdd(biasFlops(in, /*biasIdx=*/0, *o, kAddmmBeta),
                                  saturatingMul(Activation, o->numel()));
  }
  return c;
}

// ---- recurrent layers ---------------------------------------------------------------------
// A layer and direction of an RNN over T steps and B sequences (T*B rows; packed sequences:
// their total length) with G gates of width H, input width I and recurrent width R (H, or the
// projection size): 2*T*B*G*H*(I + R) matrix FLOPs (the input and recurrent products), plus
// 2*T*B*H*R for an LSTM's projection. Vector FLOPs per T*B*H: G for each of the two biases
// (b_ih, b_hh) and the gate math of PyTorch's equations (nn.LSTM, nn.GRU, nn.RNN):
//   LSTM 13: add the two products (4), sigmoid i f o (3), tanh g (1), f*c, i*g, o*tanh(c) (3),
//            c = f*c + i*g (1), tanh(c) (1)
//   GRU  10: add r z (2), sigmoid r z (2), r * (W_hn h + b_hn) (1), add W_in x (1), tanh n (1),
//            h' = n + z * (h - n) (3)
//   RNN   2: add the two products (1), tanh or relu (1)
// These are the counts of the ops the native CPU path runs for the same layer (addmm with its
// bias, add_, sigmoid_, tanh, mul, sub), so the oneDNN, cuDNN and native paths count alike.
// The mode is cuDNN's: 0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU.
struct RnnGates {
  int64_t gates = 0;
  int64_t gateMath = 0;
};

RnnGates rnnGates(int64_t mode) {
  switch (mode) {
    case 0:
    case 1: return {1, 2};
    case 2: return {4, 13};
    case 3: return {3, 10};
    default: return {};
  }
}

int64_t intAt(const Args& args, size_t i, int64_t fallback = -1) {
  return i < args.size() && args[i].kind == ArgKind::Int ? args[i].ints.front() : fallback;
}

// One layer and direction: wIh [G*H, I], wHh [G*H, R], wHr [R, H] (projection) or nullptr.
Cost rnnLayer(int64_t rows, const RnnGates& g, int64_t hidden, const TensorInfo& wIh,
              const TensorInfo& wHh, const TensorInfo* wHr, bool biases) {
  if (wIh.dim() != 2 || wHh.dim() != 2 || g.gates == 0 || hidden <= 0) {
    return {};
  }
  const int64_t gateRows = saturatingMul(rows, wIh.size(0));  // T*B*G*H
  int64_t matrix = macsToFlops(saturatingMul(gateRows, saturatingAdd(wIh.size(1), wHh.size(1))));
  if (wHr != nullptr && wHr->dim() == 2) {
    matrix = saturatingAdd(matrix, macsToFlops(saturatingMul(rows, wHr->numel())));
  }
  const int64_t cells = saturatingMul(rows, hidden);  // T*B*H
  const int64_t vector =
      saturatingAdd(saturatingMul(cells, g.gateMath), biases ? saturatingMul(2, gateRows) : 0);
  return {matrix, vector};
}

// Rows of an RNN input: [T, B, I], [B, T, I] or packed [sum of lengths, I].
int64_t rnnRows(const TensorInfo& x) {
  return x.dim() >= 2 && x.size(-1) > 0 ? x.numel() / x.size(-1) : 0;
}

// mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode,
// hidden_size, num_layers, has_biases, bidirectional, batch_first, train): one layer and
// direction of oneDNN's RNN (the CPU's default path of nn.LSTM).
Cost mkldnnRnnLayer(const Args& in, const Args&) {
  const TensorInfo* x = tensorAt(in, 0);
  const TensorInfo* wIh = tensorAt(in, 1);
  const TensorInfo* wHh = tensorAt(in, 2);
  if (x == nullptr || wIh == nullptr || wHh == nullptr) {
    return {};
  }
  return rnnLayer(rnnRows(*x), rnnGates(intAt(in, 9)), intAt(in, 10), *wIh, *wHh, nullptr,
                  boolAt(in, 12));
}

// _cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size,
// num_layers, batch_first, dropout, train, bidirectional, batch_sizes, dropout_state): all
// layers and directions. weight holds weight_stride0 tensors per layer and direction: w_ih,
// w_hh, then b_ih, b_hh when there are biases, then w_hr with a projection (2, 3, 4 or 5). The
// input of layer l > 0 is the previous layer's output, whose width w_ih says.
Cost cudnnRnn(const Args& in, const Args&) {
  const TensorInfo* x = tensorAt(in, 0);
  const int64_t stride = intAt(in, 2);
  if (x == nullptr || in.size() < 8 || in[1].kind != ArgKind::TensorList || stride < 2) {
    return {};
  }
  const std::vector<TensorInfo>& w = in[1].tensors;
  const bool projection = intAt(in, 8) > 0;
  const bool biases = stride >= (projection ? 5 : 4);
  const RnnGates g = rnnGates(intAt(in, 6));
  const int64_t rows = rnnRows(*x);
  Cost c;
  for (size_t i = 0; i + static_cast<size_t>(stride) <= w.size();
       i += static_cast<size_t>(stride)) {
    const TensorInfo* wHr = projection ? &w[i + static_cast<size_t>(stride) - 1] : nullptr;
    const Cost layer = rnnLayer(rows, g, intAt(in, 7), w[i], w[i + 1], wHr, biases);
    c.matrixFlops = saturatingAdd(c.matrixFlops, layer.matrixFlops);
    c.vectorFlops = saturatingAdd(c.vectorFlops, layer.vectorFlops);
  }
  return c;
}

// ---- convolutions -------------------------------------------------------------------------
// Weight is [C_out, C_in/groups, k...] (transposed: [C_in, C_out/groups, k...]), so per output
// position (input position when transposed) and batch element there are prod(weight) MACs.
// kTransposedArg: index of the `transposed` flag, or kNever / kAlways.
constexpr int kNever = -1;
constexpr int kAlways = -2;
// The schemas' own positions, named once. aten::convolution(input, weight, bias, stride,
// padding, dilation, transposed, ...); the slow CPU kernels take (self, weight, kernel_size,
// bias, ...).
constexpr int kConvBias = 2;
constexpr int kConvTransposed = 6;
constexpr int kSlowConvBias = 3;

template <int BiasIdx, int kTransposedArg>
Cost convolution(const Args& in, const Args& out) {
  const TensorInfo* x = tensorAt(in, 0);
  const TensorInfo* w = tensorAt(in, 1);
  const TensorInfo* o = firstTensor(out);
  if (x == nullptr || w == nullptr || o == nullptr || x->dim() < 3) {
    return {};
  }
  const bool transposed =
      kTransposedArg == kAlways || (kTransposedArg >= 0 && boolAt(in, kTransposedArg));
  const TensorInfo& positions = transposed ? *x : *o;
  const int64_t macs =
      saturatingMul(saturatingMul(x->size(0), product(positions.sizes, 2)), product(w->sizes));
  return {macsToFlops(macs), biasFlops(in, BiasIdx, *o)};
}

// mkldnn's fused pointwise ops have a `.binary` overload, (X, other, W, B, ...), that fuses an
// elementwise op with a second input shaped like the output; the registry sees one name for
// both overloads, so the binary one is told apart by that input and priced without it.
template <Formula Unary>
Cost mkldnnPointwise(const Args& in, const Args& out) {
  const TensorInfo* other = tensorAt(in, 1);
  const TensorInfo* o = firstTensor(out);
  if (other != nullptr && o != nullptr && tensorAt(in, 2) != nullptr && other->sizes == o->sizes) {
    Args unary(in);
    unary.erase(unary.begin() + 1);
    Cost c = Unary(unary, out);
    c.vectorFlops += o->numel();  // the fused binary op
    return c;
  }
  return Unary(in, out);
}

// ---- attention ----------------------------------------------------------------------------
// QK^T and PV: 2*B*H*Lq*Lk*E + 2*B*H*Lq*Lk*Ev matrix FLOPs (causal masks are not discounted, as
// in FlopCounterMode), plus the softmax over B*H*Lq*Lk scores.
struct AttentionDims {
  int64_t bh = 0, lq = 0, lk = 0, e = 0, ev = 0;
};

Cost attentionCost(const AttentionDims& d) {
  const int64_t scores = saturatingMul(saturatingMul(d.bh, d.lq), d.lk);
  return {saturatingAdd(macsToFlops(saturatingMul(scores, d.e)),
                        macsToFlops(saturatingMul(scores, d.ev))),
          saturatingMul(5, scores)};
}

// Query [..., Lq, E], key [..., Lk, E], value [..., Lk, Ev]; leading dims are batch and heads.
Cost attentionBHLE(const Args& in, const Args&) {
  const TensorInfo* q = tensorAt(in, 0);
  const TensorInfo* k = tensorAt(in, 1);
  const TensorInfo* v = tensorAt(in, 2);
  if (q == nullptr || k == nullptr || v == nullptr || q->dim() < 2 || k->dim() < 2) {
    return {};
  }
  AttentionDims d;
  d.bh = product(std::vector<int64_t>(q->sizes.begin(), q->sizes.end() - 2));
  d.lq = q->size(-2);
  d.e = q->size(-1);
  d.lk = k->size(-2);
  d.ev = v->size(-1);
  return attentionCost(d);
}

// _flash_attention_forward / _efficient_attention_forward: [B, L, H, E]. With cumulative
// sequence lengths (variable-length batches: argument CuSeqQ, the maximum lengths two and three
// after it) q is [total, H, E] (flash) or [1, total, H, E] (efficient); the count then uses the
// maximum lengths and is an upper bound.
template <int CuSeqQ>
Cost attentionBLHE(const Args& in, const Args&) {
  const TensorInfo* q = tensorAt(in, 0);
  const TensorInfo* k = tensorAt(in, 1);
  const TensorInfo* v = tensorAt(in, 2);
  if (q == nullptr || k == nullptr || v == nullptr) {
    return {};
  }
  AttentionDims d;
  const TensorInfo* cuSeq = tensorAt(in, CuSeqQ);
  if (q->dim() == 4 && cuSeq == nullptr) {
    d.bh = q->size(0) * q->size(2);
    d.lq = q->size(1);
    d.e = q->size(3);
    d.lk = k->size(1);
    d.ev = v->size(3);
  } else if (q->dim() == 3 || q->dim() == 4) {
    const int64_t batch = cuSeq != nullptr ? cuSeq->numel() - 1 : 1;
    d.bh = batch * q->size(-2);
    d.lq = intAt(in, CuSeqQ + 2, /*fallback=*/0);
    d.lk = intAt(in, CuSeqQ + 3, /*fallback=*/0);
    d.e = q->size(-1);
    d.ev = v->size(-1);
  }
  return attentionCost(d);
}

// _native_multi_head_attention(query [B,L,D], key [B,S,D], value, embed_dim, num_head,
// qkv_weight, qkv_bias, proj_weight, proj_bias, ...): the nn.MultiheadAttention fast path.
Cost nativeMultiHeadAttention(const Args& in, const Args&) {
  const TensorInfo* q = tensorAt(in, 0);
  const TensorInfo* k = tensorAt(in, 1);
  if (q == nullptr || k == nullptr || q->dim() != 3 || k->dim() != 3 || in.size() < 5 ||
      in[4].kind != ArgKind::Int) {
    return {};
  }
  const int64_t b = q->size(0), l = q->size(1), dModel = q->size(2), s = k->size(1);
  const int64_t heads = in[4].ints.front();
  const int64_t projections = macsToFlops(b * l * dModel * dModel)        // q
                              + 2 * macsToFlops(b * s * dModel * dModel)  // k, v
                              + macsToFlops(b * l * dModel * dModel);     // out
  const int64_t biases = 2 * b * l * dModel + 2 * b * s * dModel;
  AttentionDims d{b * heads, l, s, dModel / heads, dModel / heads};
  Cost c = attentionCost(d);
  c.matrixFlops += projections;
  c.vectorFlops += biases;
  return c;
}

// ---- vector ops ---------------------------------------------------------------------------
template <int K>
Cost perOutput(const Args&, const Args& out) {
  const TensorInfo* o = firstTensor(out);
  return {0, o == nullptr ? 0 : saturatingMul(K, o->numel())};
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

void addAll(FormulaRegistry& r, std::initializer_list<const char*> names, OpClass c,
            Formula f = nullptr) {
  for (const char* n : names) {
    r.add(n, c, f);
  }
}

}  // namespace

void registerAllFormulas(FormulaRegistry& r) {
  using C = OpClass;

  // Matrix products (left operand index, bias index).
  addAll(r, {"aten::mm", "aten::bmm", "aten::_int_mm", "aten::mv", "aten::dot", "aten::vdot"},
         C::Matrix, &contraction</*A=*/0, kNoBias>);
  // _scaled_mm(self, mat2, scale_a, scale_b, bias, ...)
  r.add("aten::_scaled_mm", C::Matrix, &contraction</*A=*/0, /*BiasIdx=*/4>);
  // _linear_pointwise(X, W, B, ...)
  r.add("mkldnn::_linear_pointwise", C::Matrix,
        &mkldnnPointwise<&contraction</*A=*/0, /*BiasIdx=*/2>>);
  // addmm(self, mat1, mat2, ...): self is the bias.
  addAll(r, {"aten::addmm", "aten::baddbmm", "aten::addmv"}, C::Matrix, &addmm</*Activation=*/0>);
  r.add("aten::_addmm_activation", C::Matrix, &addmm</*Activation=*/1>);
  r.add("aten::addbmm", C::Matrix, &addbmm);

  // Convolutions, by where each variant keeps its bias and its `transposed` flag.
  addAll(r, {"aten::convolution", "aten::_convolution", "aten::convolution_overrideable"},
         C::Matrix, &convolution<kConvBias, kConvTransposed>);
  addAll(
      r,
      {"aten::mkldnn_convolution", "aten::miopen_convolution", "aten::miopen_depthwise_convolution",
       "aten::cudnn_convolution_relu", "aten::_nnpack_spatial_convolution"},
      C::Matrix, &convolution<kConvBias, kNever>);
  r.add("mkldnn::_convolution_pointwise", C::Matrix,
        &mkldnnPointwise<&convolution<kConvBias, kNever>>);
  // (self, weight, z, alpha, bias, ...): z, the tensor added before the relu, is not a bias.
  r.add("aten::cudnn_convolution_add_relu", C::Matrix, &convolution</*BiasIdx=*/4, kNever>);
  addAll(r, {"aten::miopen_convolution_transpose", "mkldnn::_convolution_transpose_pointwise"},
         C::Matrix, &convolution<kConvBias, kAlways>);
  r.add("aten::cudnn_convolution", C::Matrix, &convolution<kNoBias, kNever>);
  r.add("aten::cudnn_convolution_transpose", C::Matrix, &convolution<kNoBias, kAlways>);
  addAll(r,
         {"aten::_slow_conv2d_forward", "aten::thnn_conv2d", "aten::slow_conv3d",
          "aten::slow_conv3d_forward", "aten::_conv_depthwise2d", "aten::conv_depthwise3d",
          "aten::slow_conv_dilated2d", "aten::slow_conv_dilated3d"},
         C::Matrix, &convolution<kSlowConvBias, kNever>);
  addAll(r, {"aten::slow_conv_transpose2d", "aten::slow_conv_transpose3d"}, C::Matrix,
         &convolution<kSlowConvBias, kAlways>);

  // Attention, every backend of scaled_dot_product_attention.
  addAll(
      r,
      {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math",
       "aten::_scaled_dot_product_attention_math_for_mps",
       "aten::_scaled_dot_product_flash_attention",
       "aten::_scaled_dot_product_flash_attention_for_cpu",
       "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
       "aten::_scaled_dot_product_fused_attention_overrideable"},
      C::Matrix, &attentionBHLE);
  // Cumulative sequence lengths at 3 (flash) or, after the bias, at 4 (efficient).
  r.add("aten::_flash_attention_forward", C::Matrix, &attentionBLHE</*CuSeqArg=*/3>);
  r.add("aten::_efficient_attention_forward", C::Matrix, &attentionBLHE</*CuSeqArg=*/4>);
  r.add("aten::_native_multi_head_attention", C::Matrix, &nativeMultiHeadAttention);

  // Recurrent layers: oneDNN's (one layer and direction a call) and cuDNN's (all of them).
  r.add("aten::mkldnn_rnn_layer", C::Matrix, &mkldnnRnnLayer);
  r.add("aten::_cudnn_rnn", C::Matrix, &cudnnRnn);

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
  // Comparisons with a scalar result: 1 per input element.
  addAll(r, {"aten::equal", "aten::allclose"}, C::Vector, &perInput<1>);
  addAll(r, {"aten::addcmul", "aten::addcdiv", "aten::lerp", "aten::native_dropout"}, C::Vector,
         &perOutput<2>);

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

  // Data movement: bytes, no FLOPs.
  addAll(r,
         {"aten::copy_",
          "aten::clone",
          "aten::_to_copy",
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
          "aten::_nested_tensor_from_tensor_list"},
         C::Memory);

  // Views, allocations, metadata and composite wrappers whose callees are counted.
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
          "aten::permute",
          "aten::transpose",
          "aten::t",
          "aten::numpy_T",
          "aten::mT",
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
          "aten::pad"},
         C::Transparent);
}

}  // namespace torchutil
