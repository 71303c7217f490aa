// Matrix formulas: matrix products, grouped products, recurrent layers, convolutions. They
// follow torch.utils.flop_counter (same results on the same shapes) where it has the op; the
// convention is in Convention.h, the bias of each is a vector FLOP per output element.
#include "core/FormulaFamilies.h"

namespace torchutil::formulas {
namespace {

// ---- matrix products: 2 * (output elements) * (contracted length) ------------------------
// A is the index of the left operand; the contracted length is its last dimension. BiasIdx is
// the index of the bias (added once per output element), kNoBias where there is none.
// A sparse operand (the right one follows the left) multiplies only the values it stores: each
// stored value of the left operand meets the N columns of the right one (2·nnz·N; 1 for a
// vector), each stored value of the right one the M rows of the left (2·nnz·M), whatever the
// dense shape: torch.sparse.mm, sparse.addmm, CSR @ dense, dense @ sparse.
constexpr int kNoBias = -1;
template <int A, int BiasIdx>
Cost contraction(const Args& in, const Args& out) {
  const TensorInfo* a = tensorAt(in, A);
  const TensorInfo* b = tensorAt(in, A + 1);
  const TensorInfo* o = firstTensor(out);
  if (a == nullptr || o == nullptr || a->dim() == 0) {
    return {};
  }
  if (!a->sparse() && (b == nullptr || !b->sparse())) {
    return {macsToFlops(saturatingMul(o->numel(), a->size(-1))), biasFlops(in, BiasIdx, *o)};
  }
  if (b == nullptr || (a->sparse() && b->sparse())) {
    // sparse x sparse: the products depend on where the values of both lie (data, not
    // shapes), so the call is reported as one product with no formula.
    Cost unknown;
    unknown.unpriced = true;
    return unknown;
  }
  const int64_t macs = a->sparse()
                           ? saturatingMul(a->storedValues, b->dim() >= 2 ? b->size(-1) : 1)
                           : saturatingMul(b->storedValues, a->dim() >= 2 ? a->size(-2) : 1);
  return {macsToFlops(macs), biasFlops(in, BiasIdx, *o)};
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

// _grouped_mm(self, mat2, offs, bias, out_dtype) and _scaled_grouped_mm(self, mat2, scale_a,
// scale_b, offs, bias, ...): G products in one call, such as the routed experts of a
// mixture-of-experts layer. With offsets the groups split one dimension of a 2-d operand: the
// rows of self ([M, K] x [G, K, N] -> [M, N]: the tokens routed to each expert), the columns of
// mat2 ([G, M, K] x [K, N] -> [M, N]) or the contracted length ([M, K] x [K, N] -> [G, M, N]);
// without, it is a batched product ([G, M, K] x [G, K, N] -> [G, M, N]). Each output element
// takes K MACs (its group's share of K where K is split), so the count is exact where the
// offsets end at the split dimension's size, as a router's cumulative counts do, and an upper
// bound where they end before it (the rows past the last offset are not computed): the offsets'
// values are data, not shapes.
template <int BiasIdx>
Cost groupedMm(const Args& in, const Args& out) {
  const TensorInfo* a = tensorAt(in, 0);
  const TensorInfo* b = tensorAt(in, 1);
  const TensorInfo* o = firstTensor(out);
  if (a == nullptr || b == nullptr || o == nullptr || a->dim() < 2 || b->dim() < 2) {
    return {};
  }
  const int64_t macs = a->dim() == 2 && b->dim() == 2
                           ? saturatingMul(saturatingMul(a->size(0), a->size(1)), b->size(1))
                           : saturatingMul(o->numel(), a->size(-1));
  return {macsToFlops(macs), biasFlops(in, BiasIdx, *o)};
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

// ---- quantized products --------------------------------------------------------------------
// quantized::linear(X, W_prepack, Y_scale, Y_zero_point) and its kin take the weight packed in
// a custom class (no shape of its own here): X [..., K] and Y [..., N] give 2·M·K·N, products
// of 8-bit integers. Per output element the int32 accumulator is rescaled (1) and the bias
// added (1), and fused activations take Activation more. A dynamic one (linear_dynamic) takes
// float X and quantizes it inside: its range (2 per element: min and max) and the quantization
// (2: scale and round), and runs its products in int8 (the row's dtype, hence the int8 peak).
template <bool Dynamic, int Activation>
Cost quantizedLinear(const Args& in, const Args& out) {
  Cost c = contraction</*A=*/0, kNoBias>(in, out);
  const TensorInfo* x = tensorAt(in, 0);
  const TensorInfo* o = firstTensor(out);
  if (c.matrixFlops == 0 || x == nullptr || o == nullptr) {
    return c;
  }
  c.vectorFlops = saturatingMul(2 + Activation, o->numel());
  if (Dynamic) {
    c.vectorFlops = saturatingAdd(c.vectorFlops, saturatingMul(4, x->numel()));
    c.dtype = "int8";
  }
  return c;
}

// quantized::conv1d/2d/3d(qX, packed_weight, output_scale, output_zero_point) and their _relu
// kin take the weight packed in a custom class, which the libtorch layer reads as the unpacked
// weight's shape (IValueArgs.cpp): a convolution's MACs of 8-bit integers, and per output
// element the int32 accumulator rescaled (1) and the bias added (1), Activation more for a
// fused relu. A weight that could not be read leaves the call unpriced (reported).
// Transposed ones (conv_transpose1d/2d/3d) pack theirs in the same classes, [C_in,
// C_out/groups, k...] once unpacked: MACs per input position, as a float transposed one.
template <int Activation, int kTransposedArg = kNever>
Cost quantizedConvolution(const Args& in, const Args& out) {
  const TensorInfo* o = firstTensor(out);
  if (tensorAt(in, 1) == nullptr || o == nullptr) {
    Cost unknown;
    unknown.unpriced = true;
    return unknown;
  }
  Cost c = convolution<kNoBias, kTransposedArg>(in, out);
  c.vectorFlops = saturatingMul(2 + Activation, o->numel());
  return c;
}

}  // namespace

void registerMatrixFormulas(FormulaRegistry& r) {
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
  addAll(r, {"aten::addmm", "aten::baddbmm", "aten::addmv", "aten::_sparse_addmm"}, C::Matrix,
         &addmm</*Activation=*/0>);
  r.add("aten::_addmm_activation", C::Matrix, &addmm</*Activation=*/1>);
  r.add("aten::addbmm", C::Matrix, &addbmm);
  // Grouped products: the bias after the offsets.
  r.add("aten::_grouped_mm", C::Matrix, &groupedMm</*BiasIdx=*/3>);
  r.add("aten::_scaled_grouped_mm", C::Matrix, &groupedMm</*BiasIdx=*/5>);

  // Convolutions, by where each variant keeps its bias and its `transposed` flag.
  addAll(r, {"aten::convolution", "aten::_convolution", "aten::convolution_overrideable"},
         C::Matrix, &convolution<kConvBias, kConvTransposed>);
  addAll(
      r,
      {"aten::mkldnn_convolution", "aten::miopen_convolution", "aten::miopen_depthwise_convolution",
       "aten::cudnn_convolution_relu", "aten::_nnpack_spatial_convolution",
       // torch.jit.optimize_for_inference's convolution, (input, weight, bias, stride, padding,
       // dilation, groups): run by the TorchScript interpreter, never by the dispatcher, and
       // priced from the graph (ScriptForward::unseenWork).
       "prim::mkldnn_convolution"},
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

  // Quantized Linear layers (torch.ao.quantization): static (quint8 input) and dynamic.
  r.add("quantized::linear", C::Matrix, &quantizedLinear</*Dynamic=*/false, /*Activation=*/0>);
  r.add("quantized::linear_relu", C::Matrix, &quantizedLinear<false, 1>);
  r.add("quantized::linear_dynamic", C::Matrix, &quantizedLinear</*Dynamic=*/true, 0>);
  r.add("quantized::linear_relu_dynamic", C::Matrix, &quantizedLinear<true, 1>);
  addAll(r, {"quantized::conv1d", "quantized::conv2d", "quantized::conv3d"}, C::Matrix,
         &quantizedConvolution</*Activation=*/0>);
  addAll(r, {"quantized::conv1d_relu", "quantized::conv2d_relu", "quantized::conv3d_relu"},
         C::Matrix, &quantizedConvolution<1>);
  addAll(
      r,
      {"quantized::conv_transpose1d", "quantized::conv_transpose2d", "quantized::conv_transpose3d"},
      C::Matrix, &quantizedConvolution</*Activation=*/0, kAlways>);

  // Recurrent layers: oneDNN's (one layer and direction a call) and cuDNN's (all of them).
  r.add("aten::mkldnn_rnn_layer", C::Matrix, &mkldnnRnnLayer);
  r.add("aten::_cudnn_rnn", C::Matrix, &cudnnRnn);
}

}  // namespace torchutil::formulas
