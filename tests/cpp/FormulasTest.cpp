// Every formula family of Formulas.cpp against a closed form computed here, on arguments laid
// out as the op's schema (native_functions.yaml) has them.
#include "core/FormulaRegistry.h"

#include "core/Convention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace torchutil {
namespace {

using Flops = std::pair<int64_t, int64_t>;  // (matrix FLOPs, vector FLOPs)
using Sizes = std::vector<int64_t>;
using Names = std::vector<std::string>;

Arg t(Sizes sizes) {
  return Arg::ofTensor(std::move(sizes));
}

// An argument the formulas cannot read (a string, a ScalarType, a list of scalars).
Arg other() {
  Arg a;
  a.kind = ArgKind::Other;
  return a;
}

int64_t prod(const Sizes& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

Sizes concat(Sizes head, const Sizes& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// One call of op, priced by the formula registered under exactly that name, which must be of
// class c.
Flops cost(const std::string& op, OpClass c, const Args& in, const Args& out) {
  const FormulaEntry* e = FormulaRegistry::global().find(op);
  if (e == nullptr || e->name != op || e->formula == nullptr) {
    ADD_FAILURE() << op << " has no formula of its own";
    return {-1, -1};
  }
  EXPECT_EQ(e->opClass, c) << op << " is " << opClassName(e->opClass);
  const Cost k = e->formula(in, out);
  return {k.matrixFlops, k.vectorFlops};
}

// The whole Cost of one call (masked FLOPs, unpriced) by the formula of exactly that name.
Cost fullCost(const std::string& op, const Args& in, const Args& out) {
  const FormulaEntry* e = FormulaRegistry::global().find(op);
  if (e == nullptr || e->name != op || e->formula == nullptr) {
    ADD_FAILURE() << op << " has no formula of its own";
    return {};
  }
  return e->formula(in, out);
}

Flops matrixCost(const std::string& op, const Args& in, const Args& out) {
  return cost(op, OpClass::Matrix, in, out);
}

Flops vectorCost(const std::string& op, const Args& in, const Args& out) {
  return cost(op, OpClass::Vector, in, out);
}

// ---- the families, as this test expects them -----------------------------------------------

const Names kMatrixProducts = {"aten::mm",
                               "aten::_int_mm",
                               "aten::bmm",
                               "aten::mv",
                               "aten::dot",
                               "aten::vdot",
                               "aten::addmm",
                               "aten::_addmm_activation",
                               "aten::baddbmm",
                               "aten::addmv",
                               "aten::addbmm",
                               "aten::_scaled_mm",
                               "mkldnn::_linear_pointwise"};
const Names kGroupedMm = {"aten::_grouped_mm", "aten::_scaled_grouped_mm"};

// Convolutions by the dimensions they take (0: any).
const std::vector<std::pair<std::string, int>> kConvolutions = {
    {"aten::convolution", 0},
    {"aten::_convolution", 0},
    {"aten::convolution_overrideable", 0},
    {"aten::mkldnn_convolution", 0},
    {"prim::mkldnn_convolution", 0},
    {"mkldnn::_convolution_pointwise", 0},
    {"aten::miopen_convolution", 0},
    {"aten::miopen_depthwise_convolution", 0},
    {"aten::cudnn_convolution", 0},
    {"aten::cudnn_convolution_relu", 0},
    {"aten::cudnn_convolution_add_relu", 0},
    {"aten::_nnpack_spatial_convolution", 2},
    {"aten::_slow_conv2d_forward", 2},
    {"aten::thnn_conv2d", 2},
    {"aten::_conv_depthwise2d", 2},
    {"aten::slow_conv_dilated2d", 2},
    {"aten::slow_conv3d", 3},
    {"aten::slow_conv3d_forward", 3},
    {"aten::conv_depthwise3d", 3},
    {"aten::slow_conv_dilated3d", 3},
};
const std::vector<std::pair<std::string, int>> kTransposedConvolutions = {
    {"aten::convolution", 0},
    {"aten::_convolution", 0},
    {"aten::convolution_overrideable", 0},
    {"aten::miopen_convolution_transpose", 0},
    {"mkldnn::_convolution_transpose_pointwise", 0},
    {"aten::cudnn_convolution_transpose", 0},
    {"aten::slow_conv_transpose2d", 2},
    {"aten::slow_conv_transpose3d", 3},
};

const Names kAttentionBHLE = {"aten::scaled_dot_product_attention",
                              "aten::_scaled_dot_product_attention_math",
                              "aten::_scaled_dot_product_attention_math_for_mps",
                              "aten::_scaled_dot_product_flash_attention",
                              "aten::_scaled_dot_product_flash_attention_for_cpu",
                              "aten::_scaled_dot_product_efficient_attention",
                              "aten::_scaled_dot_product_cudnn_attention",
                              "aten::_scaled_dot_product_fused_attention_overrideable"};
const Names kAttentionBLHE = {"aten::_flash_attention_forward",
                              "aten::_efficient_attention_forward"};
const Names kMultiHeadAttention = {"aten::_native_multi_head_attention"};
const Names kRecurrent = {"aten::mkldnn_rnn_layer", "aten::_cudnn_rnn"};

const Names kElementwise = {"aten::add",         "aten::sub",
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
                            "aten::atan2"};
// Integer and boolean only: 1 per output element by the formula, 0 FLOPs once CountSession
// sees their integer inputs (CountSessionTest.BooleanMaskOpsCostBytesButNoFlops).
const Names kBitwise = {"aten::bitwise_and",
                        "aten::bitwise_or",
                        "aten::bitwise_xor",
                        "aten::bitwise_not",
                        "aten::bitwise_left_shift",
                        "aten::bitwise_right_shift",
                        "aten::__and__",
                        "aten::__or__",
                        "aten::__xor__",
                        "aten::__iand__",
                        "aten::__ior__",
                        "aten::__ixor__",
                        "aten::__lshift__",
                        "aten::__rshift__",
                        "aten::__ilshift__",
                        "aten::__irshift__"};
const Names kGridSampler = {"aten::grid_sampler", "aten::grid_sampler_2d", "aten::grid_sampler_3d",
                            "aten::_grid_sampler_2d_cpu_fallback", "aten::cudnn_grid_sampler"};
const Names kDetection = {"torchvision::roi_align", "torchvision::nms"};
const Names kFusedMultiplyAdd = {"aten::addcmul", "aten::addcdiv", "aten::lerp",
                                 "aten::native_dropout"};

const Names kBatchNormWithTrainingFlag = {"aten::batch_norm",
                                          "aten::_batch_norm_impl_index",
                                          "aten::native_batch_norm",
                                          "aten::_native_batch_norm_legit",
                                          "aten::_native_batch_norm_legit_functional",
                                          "aten::cudnn_batch_norm",
                                          "aten::miopen_batch_norm"};
const Names kBatchNormTraining = {"aten::_batch_norm_with_update",
                                  "aten::_batch_norm_with_update_functional"};
const Names kBatchNormInference = {"aten::_native_batch_norm_legit_no_training",
                                   "aten::_batch_norm_no_update"};
const Names kNormalization = {"aten::layer_norm",     "aten::native_layer_norm",
                              "aten::group_norm",     "aten::native_group_norm",
                              "aten::instance_norm",  "aten::rms_norm",
                              "aten::_fused_rms_norm"};
const Names kSoftmax = {"aten::softmax",
                        "aten::_softmax",
                        "aten::log_softmax",
                        "aten::_log_softmax",
                        "aten::_masked_softmax",
                        "aten::_safe_softmax",
                        "aten::_nested_tensor_softmax_with_shape"};

const Names kPool1d = {"aten::max_pool1d", "aten::max_pool1d_with_indices", "aten::avg_pool1d"};
const Names kPool2d = {"aten::max_pool2d", "aten::max_pool2d_with_indices",
                       "aten::mkldnn_max_pool2d", "aten::avg_pool2d", "aten::quantized_max_pool2d"};
const Names kPool3d = {"aten::max_pool3d", "aten::max_pool3d_with_indices",
                       "aten::mkldnn_max_pool3d", "aten::avg_pool3d"};
const Names kAdaptivePool = {
    "aten::adaptive_avg_pool1d",  "aten::adaptive_avg_pool2d",  "aten::adaptive_avg_pool3d",
    "aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d", "aten::mkldnn_adaptive_avg_pool2d",
    "aten::adaptive_max_pool1d",  "aten::adaptive_max_pool2d",  "aten::adaptive_max_pool3d"};

const Names kReductions = {"aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::max",
                           "aten::min", "aten::prod", "aten::all", "aten::any", "aten::argmax",
                           "aten::argmin", "aten::cumsum", "aten::cumprod", "aten::count_nonzero",
                           "aten::nansum",
                           // also 1 per input element: comparisons with a scalar result, and
                           // the attention fast path's qkv bias add
                           "aten::equal", "aten::allclose", "aten::_transform_bias_rescale_qkv"};
const Names kNorms = {"aten::norm", "aten::linalg_vector_norm", "aten::frobenius_norm"};
const Names kMoments = {"aten::var", "aten::std", "aten::var_mean", "aten::std_mean",
                        "aten::logsumexp"};

// Interpolation: (op, taps per output element, spatial dims).
struct Interpolation {
  std::string op;
  int64_t taps;
  int dims;
};
const std::vector<Interpolation> kInterpolation = {
    {"aten::upsample_linear1d", 2, 1},       {"aten::upsample_bilinear2d", 4, 2},
    {"aten::_upsample_bilinear2d_aa", 4, 2}, {"aten::upsample_trilinear3d", 8, 3},
    {"aten::upsample_bicubic2d", 16, 2},     {"aten::_upsample_bicubic2d_aa", 16, 2}};

// ---- matrix products ------------------------------------------------------------------------

TEST(FormulasTest, MatrixProductsAreTwoFlopsPerMultiplyAccumulate) {
  const int64_t b = 3, m = 5, k = 7, n = 11;
  for (const char* op : {"aten::mm", "aten::_int_mm"}) {
    EXPECT_EQ(matrixCost(op, {t({m, k}), t({k, n})}, {t({m, n})}), (Flops{2 * m * k * n, 0})) << op;
  }
  EXPECT_EQ(matrixCost("aten::bmm", {t({b, m, k}), t({b, k, n})}, {t({b, m, n})}),
            (Flops{2 * b * m * k * n, 0}));
  EXPECT_EQ(matrixCost("aten::mv", {t({m, k}), t({k})}, {t({m})}), (Flops{2 * m * k, 0}));
  for (const char* op : {"aten::dot", "aten::vdot"}) {
    EXPECT_EQ(matrixCost(op, {t({k}), t({k})}, {t({})}), (Flops{2 * k, 0})) << op;
  }
}

TEST(FormulasTest, MatrixProductsAddOneVectorFlopPerOutputForTheBias) {
  const int64_t b = 3, m = 5, k = 7, n = 11;
  const Arg one = Arg::ofInt(1);
  // addmm(self, mat1, mat2, beta, alpha), self broadcast to the output.
  EXPECT_EQ(matrixCost("aten::addmm", {t({n}), t({m, k}), t({k, n}), one, one}, {t({m, n})}),
            (Flops{2 * m * k * n, m * n}));
  // _addmm_activation fuses a ReLU or GELU: one more FLOP per output element.
  EXPECT_EQ(matrixCost("aten::_addmm_activation",
                       {t({m, n}), t({m, k}), t({k, n}), one, one, Arg::ofBool(true)}, {t({m, n})}),
            (Flops{2 * m * k * n, 2 * m * n}));
  EXPECT_EQ(matrixCost("aten::baddbmm", {t({b, m, n}), t({b, m, k}), t({b, k, n}), one, one},
                       {t({b, m, n})}),
            (Flops{2 * b * m * k * n, b * m * n}));
  // beta = 0: the bias is not added (GPT-2's baddbmm(empty, q, k, beta=0)).
  EXPECT_EQ(
      matrixCost("aten::baddbmm", {t({b, m, n}), t({b, m, k}), t({b, k, n}), Arg::ofInt(0), one},
                 {t({b, m, n})}),
      (Flops{2 * b * m * k * n, 0}));
  EXPECT_EQ(matrixCost("aten::addmm", {t({n}), t({m, k}), t({k, n}), Arg::ofDouble(0.0), one},
                       {t({m, n})}),
            (Flops{2 * m * k * n, 0}));
  EXPECT_EQ(matrixCost("aten::addmv", {t({m}), t({m, k}), t({k}), one, one}, {t({m})}),
            (Flops{2 * m * k, m}));
  // addbmm sums the b products into one [m, n] result.
  EXPECT_EQ(
      matrixCost("aten::addbmm", {t({m, n}), t({b, m, k}), t({b, k, n}), one, one}, {t({m, n})}),
      (Flops{2 * b * m * k * n, m * n}));
}

// A mixture-of-experts layer's experts in one call: `tokens` tokens routed to topK of g experts,
// their (token, expert) rows sorted by expert, the offsets the router's cumulative counts.
TEST(FormulasTest, GroupedMmCountsEveryRoutedRowOnce) {
  const int64_t tokens = 10, topK = 2, g = 4, d = 16, f = 24, m = 5;
  const int64_t rows = tokens * topK;
  const Arg offs = Arg::ofTensor({g}, /*elementSize=*/4, "int32");
  // x [rows, d] @ w [g, d, f] -> [rows, f]: every routed row through its expert's projection.
  EXPECT_EQ(
      matrixCost("aten::_grouped_mm", {t({rows, d}), t({g, d, f}), offs, Arg::none(), Arg::none()},
                 {t({rows, f})}),
      (Flops{2 * rows * d * f, 0}));
  // With a bias [g, f]: one add per output element.
  EXPECT_EQ(matrixCost("aten::_grouped_mm",
                       {t({rows, d}), t({g, d, f}), offs, t({g, f}), Arg::none()}, {t({rows, f})}),
            (Flops{2 * rows * d * f, rows * f}));
  // Batched, no offsets: [g, m, d] @ [g, d, f] -> [g, m, f].
  EXPECT_EQ(matrixCost("aten::_grouped_mm",
                       {t({g, m, d}), t({g, d, f}), Arg::none(), Arg::none(), Arg::none()},
                       {t({g, m, f})}),
            (Flops{2 * g * m * d * f, 0}));
  // Offsets over the contracted length: [m, K] @ [K, f] -> [g, m, f], the groups sharing K.
  EXPECT_EQ(
      matrixCost("aten::_grouped_mm", {t({m, rows}), t({rows, f}), offs, Arg::none(), Arg::none()},
                 {t({g, m, f})}),
      (Flops{2 * m * rows * f, 0}));
  // Offsets over mat2's columns: [g, m, d] @ [d, rows] -> [m, rows].
  EXPECT_EQ(
      matrixCost("aten::_grouped_mm", {t({g, m, d}), t({d, rows}), offs, Arg::none(), Arg::none()},
                 {t({m, rows})}),
      (Flops{2 * m * rows * d, 0}));
  // _scaled_grouped_mm(self, mat2, scale_a, scale_b, offs, bias, scale_result, out_dtype,
  // use_fast_accum) in float8.
  const Arg a = Arg::ofTensor({rows, d}, /*elementSize=*/1, "float8_e4m3fn");
  const Arg b = Arg::ofTensor({g, d, f}, /*elementSize=*/1, "float8_e4m3fn");
  EXPECT_EQ(matrixCost("aten::_scaled_grouped_mm",
                       {a, b, t({rows}), t({g, f}), offs, t({g, f}), Arg::none(), Arg::none(),
                        Arg::ofBool(false)},
                       {t({rows, f})}),
            (Flops{2 * rows * d * f, rows * f}));
}

TEST(FormulasTest, ScaledMmCountsItsOptionalBias) {
  const int64_t m = 16, k = 32, n = 8;
  const Arg a = Arg::ofTensor({m, k}, /*elementSize=*/1, "Float8_e4m3fn");
  const Arg b = Arg::ofTensor({k, n}, /*elementSize=*/1, "Float8_e4m3fn");
  const Args out = {Arg::ofTensor({m, n}, /*elementSize=*/2, "bfloat16")};
  // _scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
  EXPECT_EQ(matrixCost(
                "aten::_scaled_mm",
                {a, b, t({}), t({}), t({n}), Arg::none(), Arg::ofInt(15), Arg::ofBool(false)}, out),
            (Flops{2 * m * k * n, m * n}));
  EXPECT_EQ(
      matrixCost("aten::_scaled_mm",
                 {a, b, t({}), t({}), Arg::none(), Arg::none(), Arg::none(), Arg::ofBool(true)},
                 out),
      (Flops{2 * m * k * n, 0}));
}

TEST(FormulasTest, MkldnnLinearPointwiseContractsTheLastInputDimension) {
  const int64_t b = 2, s = 5, k = 12, n = 7;
  // _linear_pointwise(X, W, B, attr, scalars, algorithm); W is [n, k].
  EXPECT_EQ(
      matrixCost("mkldnn::_linear_pointwise",
                 {t({b, s, k}), t({n, k}), t({n}), other(), other(), Arg::none()}, {t({b, s, n})}),
      (Flops{2 * b * s * k * n, b * s * n}));
  EXPECT_EQ(matrixCost("mkldnn::_linear_pointwise",
                       {t({b, s, k}), t({n, k}), Arg::none(), other(), other(), Arg::none()},
                       {t({b, s, n})}),
            (Flops{2 * b * s * k * n, 0}));
}

// ---- convolutions ---------------------------------------------------------------------------

struct Conv {
  int64_t n, cin, cout, groups;
  Sizes in, kernel, stride, padding, dilation, outputPadding;
  bool transposed;

  int dims() const { return static_cast<int>(in.size()); }
  Sizes outSpatial() const {
    Sizes out;
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t span = dilation[i] * (kernel[i] - 1);
      out.push_back(transposed
                        ? (in[i] - 1) * stride[i] - 2 * padding[i] + span + outputPadding[i] + 1
                        : (in[i] + 2 * padding[i] - span - 1) / stride[i] + 1);
    }
    return out;
  }
  Sizes input() const { return concat({n, cin}, in); }
  Sizes weight() const {
    return transposed ? concat({cin, cout / groups}, kernel) : concat({cout, cin / groups}, kernel);
  }
  Sizes output() const { return concat({n, cout}, outSpatial()); }

  // Each output element takes cin/groups x kernel MACs; transposed, each input element gives
  // cout/groups x kernel MACs.
  int64_t matrixFlops() const {
    return transposed ? 2 * n * prod(in) * cin * (cout / groups) * prod(kernel)
                      : 2 * n * prod(outSpatial()) * cout * (cin / groups) * prod(kernel);
  }
  int64_t biasFlops() const { return prod(output()); }
};

bool isOneOf(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (op == n) {
      return true;
    }
  }
  return false;
}

bool hasBias(const std::string& op) {
  return !isOneOf(op, {"aten::cudnn_convolution", "aten::cudnn_convolution_transpose"});
}

// The op's arguments in its schema's order.
Args convArgs(const std::string& op, const Conv& c, bool withBias) {
  const Arg x = t(c.input());
  const Arg w = t(c.weight());
  const Arg bias = withBias ? t({c.cout}) : Arg::none();
  const Arg stride = Arg::ofInts(c.stride);
  const Arg padding = Arg::ofInts(c.padding);
  const Arg dilation = Arg::ofInts(c.dilation);
  const Arg outputPadding = Arg::ofInts(c.outputPadding);
  const Arg kernel = Arg::ofInts(c.kernel);
  const Arg groups = Arg::ofInt(c.groups);
  const Arg no = Arg::ofBool(false);
  const Arg yes = Arg::ofBool(true);
  const Arg transposed = Arg::ofBool(c.transposed);
  if (isOneOf(op, {"aten::convolution", "aten::convolution_overrideable"})) {
    return {x, w, bias, stride, padding, dilation, transposed, outputPadding, groups};
  }
  if (op == "aten::_convolution") {
    // ..., benchmark, deterministic, cudnn_enabled, allow_tf32
    return {x,      w,  bias, stride, padding, dilation, transposed, outputPadding,
            groups, no, no,   yes,    yes};
  }
  if (op == "aten::mkldnn_convolution") {
    return {x, w, bias, padding, stride, dilation, groups};
  }
  if (op == "prim::mkldnn_convolution") {
    return {x, w, bias, stride, padding, dilation, groups};
  }
  if (op == "mkldnn::_convolution_pointwise") {
    return {x, w, bias, padding, stride, dilation, groups, other(), other(), Arg::none()};
  }
  if (isOneOf(op, {"aten::miopen_convolution", "aten::miopen_depthwise_convolution"})) {
    return {x, w, bias, padding, stride, dilation, groups, no, no};
  }
  if (op == "aten::cudnn_convolution") {
    return {x, w, padding, stride, dilation, groups, no, no, yes};
  }
  if (op == "aten::cudnn_convolution_relu") {
    return {x, w, bias, stride, padding, dilation, groups};
  }
  if (op == "aten::cudnn_convolution_add_relu") {
    // (self, weight, z, alpha, bias, ...): z is the addend, shaped like the output.
    return {x, w, t(c.output()), Arg::ofDouble(1.0), bias, stride, padding, dilation, groups};
  }
  if (op == "aten::_nnpack_spatial_convolution") {
    return {x, w, bias, padding, stride};
  }
  if (isOneOf(op, {"aten::_slow_conv2d_forward", "aten::thnn_conv2d", "aten::slow_conv3d",
                   "aten::slow_conv3d_forward"})) {
    return {x, w, kernel, bias, stride, padding};
  }
  if (isOneOf(op, {"aten::_conv_depthwise2d", "aten::conv_depthwise3d", "aten::slow_conv_dilated2d",
                   "aten::slow_conv_dilated3d"})) {
    return {x, w, kernel, bias, stride, padding, dilation};
  }
  if (op == "aten::miopen_convolution_transpose") {
    return {x, w, bias, padding, outputPadding, stride, dilation, groups, no, no};
  }
  if (op == "mkldnn::_convolution_transpose_pointwise") {
    return {x,        w,      bias,    padding, outputPadding, stride,
            dilation, groups, other(), other(), Arg::none()};
  }
  if (op == "aten::cudnn_convolution_transpose") {
    return {x, w, padding, outputPadding, stride, dilation, groups, no, no, yes};
  }
  if (isOneOf(op, {"aten::slow_conv_transpose2d", "aten::slow_conv_transpose3d"})) {
    return {x, w, kernel, bias, stride, padding, outputPadding, dilation};
  }
  ADD_FAILURE() << "this test has no schema for " << op;
  return {};
}

void expectConvolution(const std::string& op, const Conv& c) {
  SCOPED_TRACE(op + " over " + std::to_string(c.dims()) + " spatial dims, groups " +
               std::to_string(c.groups) + (c.transposed ? ", transposed" : ""));
  const Args out = {t(c.output())};
  const int64_t bias = hasBias(op) ? c.biasFlops() : 0;
  EXPECT_EQ(matrixCost(op, convArgs(op, c, /*withBias=*/true), out),
            (Flops{c.matrixFlops(), bias}));
  EXPECT_EQ(matrixCost(op, convArgs(op, c, /*withBias=*/false), out), (Flops{c.matrixFlops(), 0}));
}

const std::vector<Conv> kConvCases = {
    // conv1d, strided and padded
    {3, 4, 5, 1, {20}, {5}, {2}, {2}, {1}, {0}, false},
    // conv2d with different kernel, stride, padding and dilation per dimension
    {2, 6, 8, 1, {9, 11}, {3, 2}, {2, 1}, {1, 0}, {1, 2}, {0, 0}, false},
    // grouped conv2d
    {2, 6, 9, 3, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, false},
    // depthwise conv2d with channel multiplier 2
    {1, 4, 8, 4, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, false},
    // conv3d
    {1, 2, 4, 1, {5, 6, 7}, {3, 3, 3}, {1, 2, 1}, {1, 0, 1}, {1, 1, 1}, {0, 0, 0}, false},
    // depthwise conv3d
    {2, 3, 3, 3, {4, 5, 6}, {3, 1, 3}, {1, 1, 2}, {1, 0, 1}, {1, 1, 1}, {0, 0, 0}, false},
};

const std::vector<Conv> kTransposedConvCases = {
    {2, 6, 4, 1, {9}, {4}, {2}, {1}, {1}, {1}, true},
    {2, 6, 4, 1, {5, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 0}, true},
    // grouped
    {1, 6, 9, 3, {4, 4}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, {0, 0}, true},
    {1, 4, 2, 2, {3, 4, 5}, {2, 3, 2}, {2, 1, 2}, {0, 1, 0}, {1, 1, 1}, {1, 0, 0}, true},
};

TEST(FormulasTest, Convolutions) {
  for (const Conv& c : kConvCases) {
    for (const auto& [op, dims] : kConvolutions) {
      const bool depthwiseOnly = op.find("depthwise") != std::string::npos;
      if ((dims == 0 || dims == c.dims()) && (!depthwiseOnly || c.groups == c.cin)) {
        expectConvolution(op, c);
      }
    }
  }
}

TEST(FormulasTest, TransposedConvolutions) {
  for (const Conv& c : kTransposedConvCases) {
    for (const auto& [op, dims] : kTransposedConvolutions) {
      if (dims == 0 || dims == c.dims()) {
        expectConvolution(op, c);
      }
    }
  }
}

TEST(FormulasTest, ConvolutionReadsTheTransposedFlag) {
  // The same input and weight shapes priced both ways: a transposed convolution is priced over
  // its input positions, a plain one over its output positions.
  Conv plain{2, 4, 4, 1, {6, 6}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, {0, 0}, false};
  Conv transposed = plain;
  transposed.transposed = true;
  ASSERT_NE(plain.matrixFlops(), transposed.matrixFlops());
  for (const char* op :
       {"aten::convolution", "aten::_convolution", "aten::convolution_overrideable"}) {
    EXPECT_EQ(matrixCost(op, convArgs(op, plain, true), {t(plain.output())}).first,
              plain.matrixFlops())
        << op;
    EXPECT_EQ(matrixCost(op, convArgs(op, transposed, true), {t(transposed.output())}).first,
              transposed.matrixFlops())
        << op;
  }
}

// ---- attention ------------------------------------------------------------------------------

// QK^T and PV over bh (batch x heads) problems, and the softmax over the scores.
Flops attention(int64_t bh, int64_t lq, int64_t lk, int64_t e, int64_t ev) {
  const int64_t scores = bh * lq * lk;
  return {2 * scores * e + 2 * scores * ev, 5 * scores};
}

TEST(FormulasTest, AttentionBatchHeadsLengthEmbedding) {
  const int64_t b = 2, h = 3, lq = 5, lk = 7, e = 8, ev = 4;
  const Args in = {t({b, h, lq, e}), t({b, h, lk, e}), t({b, h, lk, ev}), Arg::none()};
  const Args out = {t({b, h, lq, ev})};
  for (const std::string& op : kAttentionBHLE) {
    EXPECT_EQ(matrixCost(op, in, out), attention(b * h, lq, lk, e, ev)) << op;
  }
  // Without a head dimension, and with fewer key/value heads than query heads (grouped-query
  // attention: every query head attends over all keys).
  EXPECT_EQ(matrixCost("aten::scaled_dot_product_attention",
                       {t({b, lq, e}), t({b, lk, e}), t({b, lk, ev})}, {t({b, lq, ev})}),
            attention(b, lq, lk, e, ev));
  EXPECT_EQ(
      matrixCost("aten::scaled_dot_product_attention",
                 {t({b, 8, lq, e}), t({b, 2, lk, e}), t({b, 2, lk, ev})}, {t({b, 8, lq, ev})}),
      attention(b * 8, lq, lk, e, ev));
}

TEST(FormulasTest, AttentionBatchLengthHeadsEmbedding) {
  const int64_t b = 2, h = 3, lq = 5, lk = 7, e = 8, ev = 4;
  const Arg q = t({b, lq, h, e}), k = t({b, lk, h, e}), v = t({b, lk, h, ev});
  const Args out = {t({b, lq, h, ev})};
  const Flops expected = attention(b * h, lq, lk, e, ev);
  // _flash_attention_forward(q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
  // return_debug_mask)
  EXPECT_EQ(matrixCost("aten::_flash_attention_forward",
                       {q, k, v, Arg::none(), Arg::none(), Arg::ofInt(lq), Arg::ofInt(lk),
                        Arg::ofDouble(0.0), Arg::ofBool(true), Arg::ofBool(false)},
                       out),
            expected);
  // _efficient_attention_forward(q, k, v, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
  // max_seqlen_k, dropout_p, custom_mask_type, compute_log_sumexp)
  EXPECT_EQ(matrixCost("aten::_efficient_attention_forward",
                       {q, k, v, Arg::none(), Arg::none(), Arg::none(), Arg::none(), Arg::none(),
                        Arg::ofDouble(0.0), Arg::ofInt(0), Arg::ofBool(false)},
                       out),
            expected);
}

TEST(FormulasTest, VariableLengthAttentionIsBoundedByTheMaximumLengths) {
  // Three sequences of query lengths 4, 6, 2 and key lengths 5, 9, 3, packed.
  const int64_t batch = 3, h = 2, e = 8, ev = 16;
  const int64_t totalQ = 12, totalK = 17, maxQ = 6, maxK = 9;
  const Arg cuSeqQ = Arg::ofTensor({batch + 1}, /*elementSize=*/4, "Int");
  const Arg cuSeqK = Arg::ofTensor({batch + 1}, /*elementSize=*/4, "Int");
  const Flops expected = attention(batch * h, maxQ, maxK, e, ev);

  // flash packs to [total, H, E]; cum_seq_q, cum_seq_k, max_q, max_k are arguments 3 to 6.
  EXPECT_EQ(matrixCost("aten::_flash_attention_forward",
                       {t({totalQ, h, e}), t({totalK, h, e}), t({totalK, h, ev}), cuSeqQ, cuSeqK,
                        Arg::ofInt(maxQ), Arg::ofInt(maxK), Arg::ofDouble(0.0), Arg::ofBool(false),
                        Arg::ofBool(false)},
                       {t({totalQ, h, ev})}),
            expected);
  // efficient packs to [1, total, H, E]; its bias comes first, so cu_seqlens_q, cu_seqlens_k,
  // max_seqlen_q, max_seqlen_k are arguments 4 to 7.
  EXPECT_EQ(matrixCost("aten::_efficient_attention_forward",
                       {t({1, totalQ, h, e}), t({1, totalK, h, e}), t({1, totalK, h, ev}),
                        Arg::none(), cuSeqQ, cuSeqK, Arg::ofInt(maxQ), Arg::ofInt(maxK),
                        Arg::ofDouble(0.0), Arg::ofInt(0), Arg::ofBool(false)},
                       {t({1, totalQ, h, ev})}),
            expected);
}

// ---- what a causal mask discards ------------------------------------------------------------

// Scores of an lq x lk attention whose query i keeps key j when
// i + offset - left <= j <= i + offset + right (left, right < 0: no limit), by enumeration.
int64_t keptByEnumeration(int64_t lq, int64_t lk, int64_t offset, int64_t left, int64_t right) {
  int64_t kept = 0;
  for (int64_t i = 0; i < lq; ++i) {
    for (int64_t j = 0; j < lk; ++j) {
      kept += (left < 0 || j >= i + offset - left) && (right < 0 || j <= i + offset + right);
    }
  }
  return kept;
}

// Causal masks in closed form: top-left (query i keeps keys 0..i) keeps l(l+1)/2 of l x s scores
// for l <= s, and s(s+1)/2 + (l - s)s for l > s; bottom-right (the last query keeps every key)
// keeps ls - l(l-1)/2 for l <= s, and s(s+1)/2 for l > s (the first l - s queries keep none).
int64_t topLeftKept(int64_t l, int64_t s) {
  return l <= s ? l * (l + 1) / 2 : s * (s + 1) / 2 + (l - s) * s;
}
int64_t bottomRightKept(int64_t l, int64_t s) {
  return l <= s ? l * s - l * (l - 1) / 2 : s * (s + 1) / 2;
}

// FLOPs of the discarded scores: 2E + 2Ev matrix and 5 softmax FLOPs each.
int64_t discardedFlops(int64_t bh, int64_t l, int64_t s, int64_t kept, int64_t e, int64_t ev) {
  return bh * (l * s - kept) * (2 * e + 2 * ev + 5);
}

TEST(FormulasTest, CausalClosedFormsMatchTheMaskTheyDescribe) {
  for (int64_t l : {1, 2, 5, 9}) {
    for (int64_t s : {1, 3, 5, 12}) {
      EXPECT_EQ(topLeftKept(l, s), keptByEnumeration(l, s, 0, -1, 0)) << l << "x" << s;
      EXPECT_EQ(bottomRightKept(l, s), keptByEnumeration(l, s, s - l, -1, 0)) << l << "x" << s;
    }
  }
}

// is_causal, where each backend's schema has it, aligned as its kernel aligns it.
TEST(FormulasTest, CausalAttentionCountsTheFullMatrixAndWhatTheMaskDiscards) {
  const int64_t b = 2, h = 3, e = 8, ev = 4;
  struct Backend {
    std::string op;
    size_t causalIdx;
    bool bottomRight;
  };
  const std::vector<Backend> backends = {
      {"aten::scaled_dot_product_attention", 5, false},
      {"aten::_scaled_dot_product_attention_math", 5, false},
      {"aten::_scaled_dot_product_attention_math_for_mps", 5, false},
      {"aten::_scaled_dot_product_fused_attention_overrideable", 5, false},
      {"aten::_scaled_dot_product_flash_attention_for_cpu", 4, false},
      {"aten::_scaled_dot_product_flash_attention", 4, true},
      {"aten::_scaled_dot_product_efficient_attention", 6, false},
      {"aten::_scaled_dot_product_cudnn_attention", 6, false},
  };
  for (const auto& [lq, lk] : std::vector<std::pair<int64_t, int64_t>>{{7, 7}, {3, 10}, {9, 4}}) {
    for (const Backend& be : backends) {
      Args in = {t({b, h, lq, e}), t({b, h, lk, e}), t({b, h, lk, ev})};
      in.resize(be.causalIdx + 2, Arg::none());
      in[be.causalIdx] = Arg::ofBool(true);
      const Cost c = fullCost(be.op, in, {t({b, h, lq, ev})});
      EXPECT_EQ((Flops{c.matrixFlops, c.vectorFlops}), attention(b * h, lq, lk, e, ev)) << be.op;
      const int64_t kept = be.bottomRight ? bottomRightKept(lq, lk) : topLeftKept(lq, lk);
      EXPECT_EQ(c.maskedFlops, discardedFlops(b * h, lq, lk, kept, e, ev))
          << be.op << " " << lq << "x" << lk;
      in[be.causalIdx] = Arg::ofBool(false);
      EXPECT_EQ(fullCost(be.op, in, {t({b, h, lq, ev})}).maskedFlops, 0) << be.op;
    }
  }
  // An attn_mask is data: not read, nothing discarded.
  const int64_t l = 6;
  EXPECT_EQ(fullCost("aten::scaled_dot_product_attention",
                     {t({b, h, l, e}), t({b, h, l, e}), t({b, h, l, ev}),
                      Arg::ofTensor({l, l}, /*elementSize=*/1, "bool"), Arg::ofDouble(0.0),
                      Arg::ofBool(false)},
                     {t({b, h, l, ev})})
                .maskedFlops,
            0);
  // Decoding one query against a KV cache of s keys, bottom-right: nothing is discarded.
  EXPECT_EQ(bottomRightKept(1, 12), 12);
}

// _flash_attention_forward: flash-attn's masks, bottom-right, with sliding windows.
TEST(FormulasTest, FlashAttentionForwardDiscardsOutsideItsCausalBandOrWindow) {
  const int64_t b = 2, h = 3, e = 8, ev = 4;
  // (q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, return_debug_mask,
  //  scale, window_size_left, window_size_right)
  auto args = [&](int64_t lq, int64_t lk, bool causal, Arg left, Arg right) {
    return Args{t({b, lq, h, e}),
                t({b, lk, h, e}),
                t({b, lk, h, ev}),
                Arg::none(),
                Arg::none(),
                Arg::ofInt(lq),
                Arg::ofInt(lk),
                Arg::ofDouble(0.0),
                Arg::ofBool(causal),
                Arg::ofBool(false),
                Arg::none(),
                left,
                right};
  };
  for (const auto& [lq, lk] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {3, 11}, {10, 4}}) {
    const Args out = {t({b, lq, h, ev})};
    const Cost causal = fullCost("aten::_flash_attention_forward",
                                 args(lq, lk, true, Arg::none(), Arg::none()), out);
    EXPECT_EQ((Flops{causal.matrixFlops, causal.vectorFlops}), attention(b * h, lq, lk, e, ev));
    EXPECT_EQ(causal.maskedFlops, discardedFlops(b * h, lq, lk, bottomRightKept(lq, lk), e, ev));
    for (const auto& [left, right] :
         std::vector<std::pair<int64_t, int64_t>>{{2, 0}, {1, 3}, {-1, 2}, {4, -1}}) {
      const Cost w = fullCost("aten::_flash_attention_forward",
                              args(lq, lk, false, Arg::ofInt(left), Arg::ofInt(right)), out);
      EXPECT_EQ(
          w.maskedFlops,
          discardedFlops(b * h, lq, lk, keptByEnumeration(lq, lk, lk - lq, left, right), e, ev))
          << lq << "x" << lk << " window " << left << "," << right;
    }
    EXPECT_EQ(fullCost("aten::_flash_attention_forward",
                       args(lq, lk, false, Arg::none(), Arg::none()), out)
                  .maskedFlops,
              0);
  }
}

// _efficient_attention_forward's custom_mask_type: 1 causal top-left, 2 bottom-right.
TEST(FormulasTest, EfficientAttentionForwardReadsItsCustomMaskType) {
  const int64_t b = 2, h = 3, lq = 5, lk = 9, e = 8, ev = 4;
  for (const auto& [type, kept] : std::vector<std::pair<int64_t, int64_t>>{
           {0, lq * lk}, {1, topLeftKept(lq, lk)}, {2, bottomRightKept(lq, lk)}}) {
    const Cost c = fullCost("aten::_efficient_attention_forward",
                            {t({b, lq, h, e}), t({b, lk, h, e}), t({b, lk, h, ev}), Arg::none(),
                             Arg::none(), Arg::none(), Arg::none(), Arg::none(), Arg::ofDouble(0.0),
                             Arg::ofInt(type), Arg::ofBool(false)},
                            {t({b, lq, h, ev})});
    EXPECT_EQ((Flops{c.matrixFlops, c.vectorFlops}), attention(b * h, lq, lk, e, ev));
    EXPECT_EQ(c.maskedFlops, discardedFlops(b * h, lq, lk, kept, e, ev)) << "type " << type;
  }
}

TEST(FormulasTest, NativeMultiHeadAttentionCountsProjectionsAndAttention) {
  const int64_t b = 2, l = 5, s = 7, d = 12, heads = 3;
  const Args in = {
      t({b, l, d}),       t({b, s, d}),      t({b, s, d}), Arg::ofInt(d), Arg::ofInt(heads),
      t({3 * d, d}),      t({3 * d}),        t({d, d}),    t({d}),        Arg::none(),
      Arg::ofBool(false), Arg::ofBool(true), Arg::none()};
  // Projections: query and output over l positions, key and value over s, each d x d.
  const int64_t projections = 2 * b * l * d * d + 2 * (2 * b * s * d * d) + 2 * b * l * d * d;
  // Per head, QK^T and PV over l x s scores with d / heads features: together 4*b*l*s*d.
  const int64_t attentionMatrix = 4 * b * l * s * d;
  const int64_t biases = b * l * d + 2 * b * s * d + b * l * d;
  const int64_t softmax = 5 * b * heads * l * s;
  EXPECT_EQ(matrixCost("aten::_native_multi_head_attention", in, {t({b, l, d}), Arg::none()}),
            (Flops{projections + attentionMatrix, biases + softmax}));
}

// ---- vector ops ---------------------------------------------------------------------------

TEST(FormulasTest, ElementwiseOpsCostOnePerOutputElement) {
  for (const std::string& op : kElementwise) {
    EXPECT_EQ(vectorCost(op, {t({4, 5}), t({4, 5})}, {t({4, 5})}), (Flops{0, 20})) << op;
  }
  // Broadcasting: the output, not the inputs, sets the count.
  EXPECT_EQ(vectorCost("aten::add", {t({4, 1}), t({1, 5}), Arg::ofInt(1)}, {t({4, 5})}),
            (Flops{0, 20}));
  EXPECT_EQ(vectorCost("aten::mul", {t({2, 3, 4}), t({})}, {t({2, 3, 4})}), (Flops{0, 24}));
}

TEST(FormulasTest, FusedMultiplyAddsCostTwoPerOutputElement) {
  for (const std::string& op : kFusedMultiplyAdd) {
    EXPECT_EQ(vectorCost(op, {t({3, 7}), t({3, 7}), t({1, 7})}, {t({3, 7})}), (Flops{0, 42})) << op;
  }
  // native_dropout returns (output, mask): the output sets the count.
  EXPECT_EQ(vectorCost("aten::native_dropout", {t({6}), Arg::ofDouble(0.5), Arg::ofBool(true)},
                       {t({6}), Arg::ofTensor({6}, /*elementSize=*/1, "Bool")}),
            (Flops{0, 12}));
}

// A batch norm's arguments in its schema's order; training < 0: the schema has no flag.
Args batchNormArgs(const std::string& op, const Arg& x, int training) {
  const Arg c = t({3});
  const Arg flag = Arg::ofBool(training > 0);
  const Arg momentum = Arg::ofDouble(0.1), eps = Arg::ofDouble(1e-5);
  if (isOneOf(op, {"aten::batch_norm", "aten::_batch_norm_impl_index"})) {
    return {x, c, c, c, c, flag, momentum, eps, /*cudnn_enabled=*/Arg::ofBool(true)};
  }
  if (training < 0) {
    return {x, c, c, c, c, momentum, eps};
  }
  return {x, c, c, c, c, flag, momentum, eps};
}

TEST(FormulasTest, BatchNormCostsFivePerElementTrainingAndTwoInInference) {
  const Arg x = t({4, 3, 5, 6});
  const int64_t numel = 4 * 3 * 5 * 6;
  for (const std::string& op : kBatchNormWithTrainingFlag) {
    EXPECT_EQ(vectorCost(op, batchNormArgs(op, x, /*training=*/1), {x}), (Flops{0, 5 * numel}))
        << op;
    EXPECT_EQ(vectorCost(op, batchNormArgs(op, x, /*training=*/0), {x}), (Flops{0, 2 * numel}))
        << op;
  }
  for (const std::string& op : kBatchNormTraining) {
    EXPECT_EQ(vectorCost(op, batchNormArgs(op, x, /*training=*/-1), {x}), (Flops{0, 5 * numel}))
        << op;
  }
  for (const std::string& op : kBatchNormInference) {
    EXPECT_EQ(vectorCost(op, batchNormArgs(op, x, /*training=*/-1), {x}), (Flops{0, 2 * numel}))
        << op;
  }
  // The no_stats overload of _native_batch_norm_legit has no running statistics, so its
  // training flag comes earlier; optional weights may be absent.
  EXPECT_EQ(vectorCost("aten::_native_batch_norm_legit",
                       {x, Arg::none(), Arg::none(), Arg::ofBool(true), Arg::ofDouble(0.1),
                        Arg::ofDouble(1e-5)},
                       {x}),
            (Flops{0, 5 * numel}));
  EXPECT_EQ(vectorCost("aten::native_batch_norm",
                       {x, Arg::none(), Arg::none(), Arg::none(), Arg::none(), Arg::ofBool(false),
                        Arg::ofDouble(0.1), Arg::ofDouble(1e-5)},
                       {x}),
            (Flops{0, 2 * numel}));
}

TEST(FormulasTest, NormalizationsAndSoftmaxCostFivePerInputElement) {
  const int64_t numel = 2 * 6 * 4 * 4;
  const Arg x = t({2, 6, 4, 4});
  const Arg w = t({4});
  // Each op's input comes first; the rest differs by schema and is not read.
  const std::vector<std::pair<std::string, Args>> cases = {
      {"aten::layer_norm", {x, Arg::ofInts({4}), w, w, Arg::ofDouble(1e-5), Arg::ofBool(true)}},
      {"aten::native_layer_norm", {x, Arg::ofInts({4}), w, w, Arg::ofDouble(1e-5)}},
      {"aten::group_norm", {x, Arg::ofInt(3), t({6}), t({6}), Arg::ofDouble(1e-5)}},
      {"aten::native_group_norm",
       {x, t({6}), t({6}), Arg::ofInt(2), Arg::ofInt(6), Arg::ofInt(16), Arg::ofInt(3),
        Arg::ofDouble(1e-5)}},
      {"aten::instance_norm",
       {x, t({6}), t({6}), Arg::none(), Arg::none(), Arg::ofBool(true), Arg::ofDouble(0.1),
        Arg::ofDouble(1e-5), Arg::ofBool(true)}},
      {"aten::rms_norm", {x, Arg::ofInts({4}), w, Arg::none()}},
      {"aten::_fused_rms_norm", {x, Arg::ofInts({4}), w, Arg::none()}},
      {"aten::softmax", {x, Arg::ofInt(-1), Arg::none()}},
      {"aten::_softmax", {x, Arg::ofInt(-1), Arg::ofBool(false)}},
      {"aten::log_softmax", {x, Arg::ofInt(-1), Arg::none()}},
      {"aten::_log_softmax", {x, Arg::ofInt(-1), Arg::ofBool(false)}},
      {"aten::_masked_softmax",
       {x, Arg::ofTensor({2, 6, 4, 4}, /*elementSize=*/1, "Bool"), Arg::ofInt(-1), Arg::none()}},
      {"aten::_safe_softmax", {x, Arg::ofInt(-1), Arg::none()}},
      // (self, query): the padded scores of a nested batch, shaped by the query.
      {"aten::_nested_tensor_softmax_with_shape", {x, t({2, 4, 6})}},
  };
  std::set<std::string> tested;
  for (const auto& [op, in] : cases) {
    EXPECT_EQ(vectorCost(op, in, {x}), (Flops{0, 5 * numel})) << op;
    tested.insert(op);
  }
  for (const Names* family : {&kNormalization, &kSoftmax}) {
    for (const std::string& op : *family) {
      EXPECT_EQ(tested.count(op), 1u) << op << " has no case here";
    }
  }
}

int64_t poolOut(int64_t in, int64_t k, int64_t s, int64_t p) {
  return (in + 2 * p - k) / s + 1;
}

// A pooling call laid out as its schema: (self, kernel_size, stride, padding, ...).
Flops poolCost(const std::string& op, const Sizes& input, const Arg& kernelArg,
               const Sizes& kernel) {
  const size_t nsp = kernel.size();
  Sizes out(input.begin(), input.end() - static_cast<std::ptrdiff_t>(nsp));
  for (size_t i = 0; i < nsp; ++i) {
    out.push_back(poolOut(input[input.size() - nsp + i], kernel[i], /*s=*/2, /*p=*/1));
  }
  const Args in = {t(input),
                   kernelArg,
                   Arg::ofInts(Sizes(nsp, 2)),
                   Arg::ofInts(Sizes(nsp, 1)),
                   Arg::ofInts(Sizes(nsp, 1)),
                   Arg::ofBool(false)};
  return vectorCost(op, in, {t(out), t(out)});
}

int64_t pooledElements(const Sizes& input, const Sizes& kernel) {
  const size_t nsp = kernel.size();
  int64_t n = prod(Sizes(input.begin(), input.end() - static_cast<std::ptrdiff_t>(nsp)));
  for (size_t i = 0; i < nsp; ++i) {
    n *= poolOut(input[input.size() - nsp + i], kernel[i], 2, 1);
  }
  return n;
}

TEST(FormulasTest, PoolingCostsItsWindowPerOutputElement) {
  const std::vector<std::pair<const Names*, std::pair<Sizes, Sizes>>> families = {
      {&kPool1d, {{2, 3, 20}, {4}}},
      {&kPool2d, {{2, 3, 12, 10}, {3, 2}}},
      {&kPool3d, {{1, 2, 8, 9, 10}, {2, 3, 4}}},
  };
  for (const auto& [names, shapes] : families) {
    const auto& [input, kernel] = shapes;
    for (const std::string& op : *names) {
      EXPECT_EQ(poolCost(op, input, Arg::ofInts(kernel), kernel),
                (Flops{0, prod(kernel) * pooledElements(input, kernel)}))
          << op;
    }
  }
}

TEST(FormulasTest, PoolingWithAScalarKernelSizeUsesItForEveryDimension) {
  const std::vector<std::pair<const Names*, Sizes>> families = {
      {&kPool1d, {2, 3, 20}}, {&kPool2d, {2, 3, 12, 10}}, {&kPool3d, {1, 2, 8, 9, 10}}};
  for (const auto& [names, input] : families) {
    const size_t nsp = input.size() - 2;
    const Sizes cube(nsp, 3);
    const Flops expected{0, prod(cube) * pooledElements(input, cube)};
    for (const std::string& op : *names) {
      // kernel_size=3 boxes as [3] (a one-element int[N]) or, from Python, as [3, 3, ...].
      EXPECT_EQ(poolCost(op, input, Arg::ofInts({3}), cube), expected) << op;
      EXPECT_EQ(poolCost(op, input, Arg::ofInt(3), cube), expected) << op;
      EXPECT_EQ(poolCost(op, input, Arg::ofInts(cube), cube), expected) << op;
    }
  }
}

TEST(FormulasTest, AdaptivePoolingAndReductionsCostPerInputElement) {
  for (const std::string& op : kAdaptivePool) {
    const bool is1d = op.find("1d") != std::string::npos;
    const bool is3d = op.find("3d") != std::string::npos;
    const Sizes input = is1d ? Sizes{2, 3, 30} : is3d ? Sizes{2, 3, 4, 6, 8} : Sizes{2, 3, 12, 10};
    const Sizes outSize = is1d ? Sizes{5} : is3d ? Sizes{2, 3, 4} : Sizes{4, 5};
    const Args out = {t(concat({2, 3}, outSize))};
    EXPECT_EQ(vectorCost(op, {t(input), Arg::ofInts(outSize)}, out), (Flops{0, prod(input)})) << op;
  }
  const Arg x = t({4, 5, 6});
  const Args in = {x, Arg::ofInts({1}), Arg::ofBool(false)};
  const std::vector<std::pair<const Names*, int64_t>> families = {
      {&kReductions, 1}, {&kNorms, 2}, {&kMoments, 3}};
  for (const auto& [names, perElement] : families) {
    for (const std::string& op : *names) {
      EXPECT_EQ(vectorCost(op, in, {t({4, 6})}), (Flops{0, perElement * 120})) << op;
    }
  }
}

TEST(FormulasTest, InterpolationCostsItsTapsPerOutputElement) {
  for (const Interpolation& i : kInterpolation) {
    const Sizes inSpatial = Sizes{6, 7, 8}, outSpatial = Sizes{12, 10, 9};
    const Sizes input = concat({2, 3}, Sizes(inSpatial.begin(), inSpatial.begin() + i.dims));
    const Sizes output = concat({2, 3}, Sizes(outSpatial.begin(), outSpatial.begin() + i.dims));
    const Args in = {t(input), Arg::ofInts(Sizes(output.begin() + 2, output.end())),
                     Arg::ofBool(false), Arg::none()};
    EXPECT_EQ(vectorCost(i.op, in, {t(output)}), (Flops{0, i.taps * prod(output)})) << i.op;
  }
}

// ---- sampling at points ---------------------------------------------------------------------

// Per value (point and channel) one FLOP per tap; per point 2 per axis for its coordinate and
// one per tap weight.
int64_t sampled(int64_t points, int64_t channels, int64_t dims, int64_t taps) {
  return points * channels * taps + points * (2 * dims + taps);
}

TEST(FormulasTest, GridSamplerCountsTapsPerValueAndCoordinateAndWeightsPerPoint) {
  const int64_t n = 2, c = 3, ho = 5, wo = 7;
  const Arg x = t({n, c, 9, 11}), grid = t({n, ho, wo, 2});
  const Args out = {t({n, c, ho, wo})};
  const int64_t points = n * ho * wo;
  auto args = [&](int64_t mode) {
    return Args{x, grid, Arg::ofInt(mode), Arg::ofInt(0), Arg::ofBool(false)};
  };
  for (const char* op :
       {"aten::grid_sampler", "aten::grid_sampler_2d", "aten::_grid_sampler_2d_cpu_fallback"}) {
    EXPECT_EQ(vectorCost(op, args(0), out), (Flops{0, 4 * n * c * ho * wo + 8 * points})) << op;
    EXPECT_EQ(vectorCost(op, args(1), out), (Flops{0, 4 * points})) << op;  // nearest
    EXPECT_EQ(vectorCost(op, args(2), out), (Flops{0, 16 * n * c * ho * wo + 20 * points})) << op;
    EXPECT_EQ(vectorCost(op, args(0), out), (Flops{0, sampled(points, c, 2, 4)})) << op;
    EXPECT_EQ(vectorCost(op, args(7), out), (Flops{0, 0})) << op;  // no such mode
  }
  // cudnn_grid_sampler(input, grid) is bilinear.
  EXPECT_EQ(vectorCost("aten::cudnn_grid_sampler", {x, grid}, out),
            (Flops{0, 4 * n * c * ho * wo + 8 * points}));
  // 3-d: trilinear, 8 taps; a coordinate of 3 axes.
  const int64_t d = 4;
  for (const char* op : {"aten::grid_sampler", "aten::grid_sampler_3d"}) {
    EXPECT_EQ(vectorCost(op,
                         {t({n, c, 6, 9, 11}), t({n, d, ho, wo, 3}), Arg::ofInt(0), Arg::ofInt(0),
                          Arg::ofBool(true)},
                         {t({n, c, d, ho, wo})}),
              (Flops{0, 8 * n * c * d * ho * wo + (6 + 8) * n * d * ho * wo}))
        << op;
  }
}

TEST(FormulasTest, RoiAlignAveragesSamplingRatioSquaredBilinearSamplesPerBin) {
  const int64_t k = 6, c = 8, ph = 7, pw = 5;
  const Args out = {t({k, c, ph, pw})};
  for (int64_t ratio : {1, 2, 3}) {
    const Args in = {t({2, c, 20, 24}), t({k, 5}),         Arg::ofDouble(0.25), Arg::ofInt(ph),
                     Arg::ofInt(pw),    Arg::ofInt(ratio), Arg::ofBool(true)};
    // Per bin and channel ratio^2 samples of 4 taps, summed (1 each) and divided (1); per
    // sample point its coordinate (4) and 4 weights, shared by the channels.
    const int64_t expected =
        k * c * ph * pw * (5 * ratio * ratio + 1) + 8 * k * ph * pw * ratio * ratio;
    const Cost cost = fullCost("torchvision::roi_align", in, out);
    EXPECT_EQ((Flops{cost.matrixFlops, cost.vectorFlops}), (Flops{0, expected})) << ratio;
    EXPECT_FALSE(cost.unpriced);
  }
  // An adaptive ratio (<= 0) depends on each box: unpriced, not zero.
  const Cost adaptive = fullCost("torchvision::roi_align",
                                 {t({2, c, 20, 24}), t({k, 5}), Arg::ofDouble(0.25), Arg::ofInt(ph),
                                  Arg::ofInt(pw), Arg::ofInt(-1), Arg::ofBool(false)},
                                 out);
  EXPECT_TRUE(adaptive.unpriced);
}

TEST(FormulasTest, NmsComputesTheIouOfEveryPairOfBoxes) {
  // 13 FLOPs per pair's IoU and its comparison, 3 per box for its area.
  for (int64_t n : {0, 1, 2, 7, 100}) {
    EXPECT_EQ(vectorCost("torchvision::nms", {t({n, 4}), t({n}), Arg::ofDouble(0.5)},
                         {Arg::ofTensor({n}, /*elementSize=*/8, "int64")}),
              (Flops{0, 13 * n * (n - 1) / 2 + 3 * n}))
        << n;
  }
}

// ---- classes without formulas ------------------------------------------------------------

TEST(FormulasTest, DataMovementIsMemoryAndViewsAreTransparent) {
  const FormulaRegistry& r = FormulaRegistry::global();
  for (const char* op :
       {"aten::copy_", "aten::clone", "aten::_to_copy", "prims::convert_element_type", "aten::cat",
        "aten::stack", "aten::constant_pad_nd", "aten::index_select", "aten::embedding",
        "aten::upsample_nearest2d", "aten::zeros", "aten::flip", "aten::repeat"}) {
    ASSERT_NE(r.find(op), nullptr) << op;
    EXPECT_EQ(r.find(op)->opClass, OpClass::Memory) << op;
    EXPECT_EQ(r.find(op)->formula, nullptr) << op;
  }
  // Views, allocations and composite wrappers whose callees do the counting.
  for (const char* op : {"aten::view", "aten::reshape", "aten::permute", "aten::transpose",
                         "aten::empty", "aten::contiguous", "aten::linear", "aten::matmul",
                         "aten::einsum", "aten::conv2d", "aten::conv_transpose2d", "aten::dropout",
                         "aten::to", "aten::broadcast_to", "aten::meshgrid"}) {
    ASSERT_NE(r.find(op), nullptr) << op;
    EXPECT_EQ(r.find(op)->opClass, OpClass::Transparent) << op;
    EXPECT_EQ(r.find(op)->formula, nullptr) << op;
  }
}

// ---- the registry as a whole --------------------------------------------------------------

// ---- decompositions, solves, FFTs, embedding bags, quantized layers, FlexAttention ---------
// Golub & Van Loan's counts and the radix-2 FFT count, computed here.
const Names kPricedOnce{"aten::linalg_lu_factor_ex",
                        "aten::linalg_cholesky_ex",
                        "aten::linalg_qr",
                        "aten::_linalg_eigh",
                        "aten::_linalg_svd",
                        "aten::linalg_eig",
                        "aten::linalg_eigvals",
                        "aten::linalg_lu_solve",
                        "aten::linalg_solve_triangular",
                        "aten::cholesky_solve",
                        "aten::_cholesky_solve_helper",
                        "aten::_fft_c2c",
                        "aten::_fft_r2c",
                        "aten::_fft_c2r",
                        "aten::_embedding_bag",
                        "aten::_embedding_bag_forward_only",
                        "quantized::linear",
                        "quantized::linear_relu",
                        "quantized::linear_dynamic",
                        "quantized::linear_relu_dynamic",
                        "quantized::conv1d",
                        "quantized::conv2d",
                        "quantized::conv3d",
                        "quantized::conv1d_relu",
                        "quantized::conv2d_relu",
                        "quantized::conv3d_relu",
                        "quantized::conv_transpose1d",
                        "quantized::conv_transpose2d",
                        "quantized::conv_transpose3d",
                        "aten::index_add",
                        "aten::scatter_add",
                        "aten::scatter_reduce",
                        "aten::_weight_norm",
                        "aten::_weight_norm_interface",
                        "aten::_sparse_addmm",
                        "aten::quantize_per_tensor",
                        "aten::quantize_per_channel",
                        "aten::dequantize",
                        "quantized::add",
                        "quantized::mul",
                        "quantized::hardswish",
                        "quantized::add_relu",
                        "quantized::mul_relu",
                        "torchutil::flex_attention"};

Arg typed(std::vector<int64_t> sizes, const char* dtype) {
  return Arg::ofTensor(std::move(sizes), 4, dtype);
}

Cost priced(const std::string& op, OpClass c, const Args& in, const Args& out) {
  const FormulaEntry* e = FormulaRegistry::global().find(op);
  if (e == nullptr || e->name != op || e->formula == nullptr) {
    ADD_FAILURE() << op << " has no formula of its own";
    return {};
  }
  EXPECT_EQ(e->opClass, c) << op;
  return e->formula(in, out);
}

int64_t vectorOf(const std::string& op, const Args& in, const Args& out) {
  return priced(op, OpClass::Vector, in, out).vectorFlops;
}

TEST(FormulasTest, FactorizationsAreGolubVanLoansCounts) {
  // LU of 3 square 30 x 30 matrices: 2n³/3 each; of a 40 x 10 one: mn² - n³/3.
  EXPECT_EQ(vectorOf("aten::linalg_lu_factor_ex", {t({3, 30, 30})}, {}), 3 * 2 * 27000 / 3);
  EXPECT_EQ(vectorOf("aten::linalg_lu_factor_ex", {t({40, 10})}, {}),
            std::llround(40.0 * 100 - 1000.0 / 3));
  EXPECT_EQ(vectorOf("aten::linalg_cholesky_ex", {t({2, 30, 30})}, {}), 2 * 27000 / 3);
  // QR of 40 x 10, reduced (thin Q [40, 10]): twice 2mn² - 2n³/3; complete (Q [40, 40]):
  // R, then 4(m²n - mn² + n³/3); mode "r" (an empty Q): R alone.
  const double r = 2.0 * 40 * 100 - 2000.0 / 3;
  EXPECT_EQ(vectorOf("aten::linalg_qr", {t({40, 10})}, {t({40, 10}), t({10, 10})}),
            std::llround(2 * r));
  EXPECT_EQ(vectorOf("aten::linalg_qr", {t({40, 10})}, {t({40, 40}), t({40, 10})}),
            std::llround(r + 4 * (1600.0 * 10 - 40.0 * 100 + 1000.0 / 3)));
  EXPECT_EQ(vectorOf("aten::linalg_qr", {t({40, 10})}, {t({0}), t({10, 10})}), std::llround(r));
  // Symmetric eigenproblem: 9n³ with the vectors, 4n³/3 without.
  EXPECT_EQ(vectorOf("aten::_linalg_eigh", {t({30, 30}), Arg{}, Arg::ofBool(true)}, {}), 9 * 27000);
  EXPECT_EQ(vectorOf("aten::_linalg_eigh", {t({30, 30}), Arg{}, Arg::ofBool(false)}, {}),
            4 * 27000 / 3);
  // Nonsymmetric eigenproblem: about 25n³ with the vectors, 10n³ without.
  EXPECT_EQ(vectorOf("aten::linalg_eig", {t({2, 30, 30})}, {}), 2 * 25 * 27000);
  EXPECT_EQ(vectorOf("aten::linalg_eigvals", {t({30, 30})}, {}), 10 * 27000);
  // SVD of 40 x 10 (and of its transpose): values 4mn² - 4n³/3; thin 14mn² + 8n³; full
  // 4m²n + 8mn² + 9n³.
  for (const std::vector<int64_t>& a : {std::vector<int64_t>{40, 10}, {10, 40}}) {
    const auto svd = [&](bool full, bool uv) {
      return vectorOf("aten::_linalg_svd", {t(a), Arg::ofBool(full), Arg::ofBool(uv)}, {});
    };
    EXPECT_EQ(svd(false, false), std::llround(4.0 * 40 * 100 - 4000.0 / 3));
    EXPECT_EQ(svd(false, true), 14 * 40 * 100 + 8 * 1000);
    EXPECT_EQ(svd(true, true), 4 * 1600 * 10 + 8 * 40 * 100 + 9 * 1000);
  }
}

TEST(FormulasTest, SolvesAreNSquaredPerRightHandSideAndTriangle) {
  // LU solve: L then U, n² each per right-hand side; a triangular solve: one.
  EXPECT_EQ(vectorOf("aten::linalg_lu_solve", {t({2, 30, 30}), t({2, 30}), t({2, 30, 4})},
                     {t({2, 30, 4})}),
            2 * 2 * 900 * 4);
  EXPECT_EQ(vectorOf("aten::linalg_solve_triangular", {t({30, 30}), t({30, 4})}, {t({30, 4})}),
            900 * 4);
  // cholesky_solve(B, L): the factor is the second input.
  for (const char* op : {"aten::cholesky_solve", "aten::_cholesky_solve_helper"}) {
    EXPECT_EQ(vectorOf(op, {t({30, 4}), t({30, 30})}, {t({30, 4})}), 2 * 900 * 4) << op;
  }
}

TEST(FormulasTest, FftsAreFiveNLogNPerComplexTransformAndHalfForRealOnes) {
  const auto dims = [](std::vector<int64_t> d) { return Arg::ofInts(std::move(d)); };
  // 3 complex transforms of 64 points, no normalization.
  EXPECT_EQ(vectorOf("aten::_fft_c2c", {typed({3, 64}, "complex64"), dims({1}), Arg::ofInt(0)},
                     {typed({3, 64}, "complex64")}),
            3 * 5 * 64 * 6);
  // A 2-d real transform of 8 x 16 points (N = 128) on 2 signals, normalized by 1/N: 2 FLOPs
  // per complex output element.
  EXPECT_EQ(vectorOf("aten::_fft_r2c", {t({2, 8, 16}), dims({1, 2}), Arg::ofInt(2)},
                     {typed({2, 8, 9}, "complex64")}),
            std::llround(2 * 2.5 * 128 * 7) + 2 * 2 * 8 * 9);
  // c2r: N is the real output's, 1 FLOP per real output element for the normalization.
  EXPECT_EQ(vectorOf("aten::_fft_c2r", {typed({4, 33}, "complex64"), dims({1}), Arg::ofInt(2)},
                     {t({4, 64})}),
            std::llround(4 * 2.5 * 64 * 6) + 4 * 64);
}

TEST(FormulasTest, EmbeddingBagIsOneFlopPerGatheredValue) {
  // weight [100, 8], 12 indices in 3 bags; per_sample_weights doubles it.
  const Args in{t({100, 8}),
                typed({12}, "int64"),
                typed({3}, "int64"),
                Arg::ofBool(false),
                Arg::ofInt(0),
                Arg::ofBool(false),
                Arg{}};
  EXPECT_EQ(vectorOf("aten::_embedding_bag", in, {t({3, 8})}), 12 * 8);
  Args weighted = in;
  weighted[6] = t({12});
  EXPECT_EQ(vectorOf("aten::_embedding_bag_forward_only", weighted, {t({3, 8})}), 2 * 12 * 8);
}

TEST(FormulasTest, QuantizedLinearIsInt8MatrixWork) {
  Arg packed;
  packed.kind = ArgKind::Other;  // the packed weight: a custom class, no shape here
  const Cost dynamic = priced("quantized::linear_dynamic", OpClass::Matrix,
                              {t({4, 64}), packed, Arg::ofBool(false)}, {t({4, 32})});
  EXPECT_EQ(dynamic.matrixFlops, 2 * 4 * 64 * 32);
  EXPECT_EQ(dynamic.vectorFlops, 4 * 4 * 64 + 2 * 4 * 32);
  EXPECT_STREQ(dynamic.dtype, "int8");
  const Cost fixed = priced("quantized::linear_relu", OpClass::Matrix,
                            {typed({4, 64}, "quint8"), packed, Arg::ofDouble(0.1), Arg::ofInt(0)},
                            {typed({4, 32}, "quint8")});
  EXPECT_EQ(fixed.matrixFlops, 2 * 4 * 64 * 32);
  EXPECT_EQ(fixed.vectorFlops, 3 * 4 * 32);
  EXPECT_EQ(fixed.dtype, nullptr);  // the row's dtype is its input's, quint8
  // Without the fused ReLU, one FLOP fewer per output element.
  EXPECT_EQ(priced("quantized::linear", OpClass::Matrix,
                   {typed({4, 64}, "quint8"), packed, Arg::ofDouble(0.1), Arg::ofInt(0)},
                   {typed({4, 32}, "quint8")})
                .vectorFlops,
            2 * 4 * 32);
  EXPECT_EQ(priced("quantized::linear_relu_dynamic", OpClass::Matrix,
                   {t({4, 64}), packed, Arg::ofBool(false)}, {t({4, 32})})
                .vectorFlops,
            dynamic.vectorFlops + 4 * 32);
}

TEST(FormulasTest, QuantizedConvolutionIsInt8MatrixWorkOnItsUnpackedWeight) {
  // The libtorch layer hands the packed weight over as the unpacked weight's shape
  // (IValueArgs.cpp): X [2, 3, 32, 32], W [16, 3, 3, 3] -> Y [2, 16, 30, 30].
  const Args in{typed({2, 3, 32, 32}, "quint8"), typed({16, 3, 3, 3}, "qint8"), Arg::ofDouble(0.1),
                Arg::ofInt(0)};
  const Args out{typed({2, 16, 30, 30}, "quint8")};
  const int64_t outputs = 2 * 16 * 30 * 30;
  const Cost plain = priced("quantized::conv2d", OpClass::Matrix, in, out);
  EXPECT_EQ(plain.matrixFlops, 2 * outputs * 3 * 3 * 3);
  EXPECT_EQ(plain.vectorFlops, 2 * outputs);  // rescale and bias
  EXPECT_FALSE(plain.unpriced);
  EXPECT_EQ(priced("quantized::conv2d_relu", OpClass::Matrix, in, out).vectorFlops, 3 * outputs);
  // Depthwise 3-d: W [8, 1, 3, 3, 3], groups 8.
  const Cost depthwise = priced("quantized::conv3d", OpClass::Matrix,
                                {typed({1, 8, 4, 8, 8}, "quint8"), typed({8, 1, 3, 3, 3}, "qint8")},
                                {typed({1, 8, 4, 8, 8}, "quint8")});
  EXPECT_EQ(depthwise.matrixFlops, 2 * (8 * 4 * 8 * 8) * 27);
  EXPECT_EQ(priced("quantized::conv1d_relu", OpClass::Matrix,
                   {typed({2, 4, 16}, "quint8"), typed({6, 4, 3}, "qint8")},
                   {typed({2, 6, 14}, "quint8")})
                .matrixFlops,
            2 * (2 * 6 * 14) * 4 * 3);
  // A weight the libtorch layer could not unpack: reported, not priced at 0.
  Arg packed;
  packed.kind = ArgKind::Other;
  const Cost unknown = priced("quantized::conv3d_relu", OpClass::Matrix,
                              {typed({1, 8, 4, 8, 8}, "quint8"), packed}, {t({1, 8, 4, 8, 8})});
  EXPECT_TRUE(unknown.unpriced);
  // Transposed: W [C_in 4, C_out/groups 6, 3, 3] once unpacked, X [1, 4, 8, 8] -> Y [1, 6, 10,
  // 10]: MACs per input position, as a float transposed convolution.
  for (const auto& [op, k] : std::vector<std::pair<const char*, std::vector<int64_t>>>{
           {"quantized::conv_transpose1d", {3}},
           {"quantized::conv_transpose2d", {3, 3}},
           {"quantized::conv_transpose3d", {3, 3, 3}}}) {
    std::vector<int64_t> x{1, 4}, w{4, 6}, y{1, 6};
    int64_t inputs = 1, taps = 1, outs = 6;
    for (const int64_t kd : k) {
      x.push_back(8);
      w.push_back(kd);
      y.push_back(8 + kd - 1);
      inputs *= 8;
      taps *= kd;
      outs *= 8 + kd - 1;
    }
    const Cost c =
        priced(op, OpClass::Matrix, {typed(x, "quint8"), typed(w, "qint8")}, {typed(y, "quint8")});
    EXPECT_EQ(c.matrixFlops, 2 * inputs * 4 * 6 * taps) << op;
    EXPECT_EQ(c.vectorFlops, 2 * outs) << op;
  }
}

TEST(FormulasTest, QuantizingAndDequantizingCostTwoPerElement) {
  EXPECT_EQ(vectorOf("aten::quantize_per_tensor",
                     {t({2, 3, 8, 8}), Arg::ofDouble(0.1), Arg::ofInt(0), Arg::ofInt(13)},
                     {typed({2, 3, 8, 8}, "quint8")}),
            2 * 2 * 3 * 8 * 8);
  EXPECT_EQ(vectorOf("aten::quantize_per_channel",
                     {t({4, 6}), t({4}), typed({4}, "int64"), Arg::ofInt(0), Arg::ofInt(12)},
                     {typed({4, 6}, "qint8")}),
            2 * 4 * 6);
  EXPECT_EQ(vectorOf("aten::dequantize", {typed({5, 7}, "quint8")}, {t({5, 7})}), 2 * 5 * 7);
}

TEST(FormulasTest, QuantizedElementwiseOpsRequantizeEachOutput) {
  const Args in{typed({2, 8, 4, 4}, "quint8"), typed({2, 8, 4, 4}, "quint8"), Arg::ofDouble(0.1),
                Arg::ofInt(0)};
  const Args out{typed({2, 8, 4, 4}, "quint8")};
  const int64_t n = 2 * 8 * 4 * 4;
  EXPECT_EQ(vectorOf("quantized::add", in, out), 2 * n);
  EXPECT_EQ(vectorOf("quantized::mul", in, out), 2 * n);
  EXPECT_EQ(vectorOf("quantized::hardswish", {in[0], Arg::ofDouble(0.1), Arg::ofInt(0)}, out),
            2 * n);
  EXPECT_EQ(vectorOf("quantized::add_relu", in, out), 3 * n);
  EXPECT_EQ(vectorOf("quantized::mul_relu", in, out), 3 * n);
  const FormulaRegistry& r = FormulaRegistry::global();
  EXPECT_EQ(r.find("quantized::cat")->opClass, OpClass::Memory);
  for (const char* op : {"aten::_empty_affine_quantized", "aten::qscheme", "aten::q_scale",
                         "aten::q_zero_point", "aten::q_per_channel_scales"}) {
    EXPECT_EQ(r.find(op)->opClass, OpClass::Transparent) << op;
  }
}

TEST(FormulasTest, FlexAttentionMasksTheBlocksItsBlockMaskSkips) {
  // B 2, H 4, L = S = 512, E = Ev = 64; 10 of 16 block pairs computed (causal, 128 blocks).
  const int64_t scores = 2 * 4 * 512 * 512;
  const Cost c = priced(
      "torchutil::flex_attention", OpClass::Matrix,
      {t({2, 4, 512, 64}), t({2, 4, 512, 64}), t({2, 4, 512, 64}), Arg::ofInt(10), Arg::ofInt(16)},
      {t({2, 4, 512, 64})});
  EXPECT_EQ(c.matrixFlops, 4 * scores * 64);
  EXPECT_EQ(c.vectorFlops, 5 * scores);
  EXPECT_EQ(c.maskedFlops, (4 * scores * 64 + 5 * scores) / 16 * 6);
}

TEST(FormulasTest, EveryArithmeticOpBelongsToATestedFamily) {
  std::set<std::string> tested;
  for (const Names* family : {&kMatrixProducts,
                              &kGroupedMm,
                              &kBitwise,
                              &kGridSampler,
                              &kDetection,
                              &kAttentionBHLE,
                              &kAttentionBLHE,
                              &kMultiHeadAttention,
                              &kRecurrent,
                              &kElementwise,
                              &kFusedMultiplyAdd,
                              &kBatchNormWithTrainingFlag,
                              &kBatchNormTraining,
                              &kBatchNormInference,
                              &kNormalization,
                              &kSoftmax,
                              &kPool1d,
                              &kPool2d,
                              &kPool3d,
                              &kAdaptivePool,
                              &kReductions,
                              &kNorms,
                              &kMoments,
                              &kPricedOnce}) {
    tested.insert(family->begin(), family->end());
  }
  for (const auto* convs : {&kConvolutions, &kTransposedConvolutions}) {
    for (const auto& c : *convs) {
      tested.insert(c.first);
    }
  }
  for (const Interpolation& i : kInterpolation) {
    tested.insert(i.op);
  }
  const FormulaRegistry& r = FormulaRegistry::global();
  for (const std::string& op : r.names()) {
    const OpClass c = r.find(op)->opClass;
    if (c == OpClass::Matrix || c == OpClass::Vector) {
      EXPECT_EQ(tested.count(op), 1u)
          << op << " is registered as " << opClassName(c) << " but no test here checks its formula";
    }
  }
  for (const std::string& op : tested) {
    EXPECT_NE(r.find(op), nullptr) << op << " is tested here but not registered";
  }
}

TEST(FormulasTest, MalformedArgumentsCostNothingRatherThanThrow) {
  // The dispatcher may box what a formula does not expect (a missing optional, a symbolic
  // shape); no formula may throw or invent FLOPs from it.
  const FormulaRegistry& r = FormulaRegistry::global();
  const std::vector<std::pair<Args, Args>> malformed = {
      {{}, {}},
      {{Arg::ofInt(2), Arg::ofInt(3), Arg::ofInt(4)}, {}},
      {{Arg::none(), Arg::none(), Arg::none(), Arg::none()}, {Arg::none()}},
  };
  for (const std::string& op : r.names()) {
    const FormulaEntry* e = r.find(op);
    if (e->formula == nullptr) {
      continue;
    }
    for (const auto& [in, out] : malformed) {
      Cost c;
      EXPECT_NO_THROW(c = e->formula(in, out)) << op;
      EXPECT_EQ((Flops{c.matrixFlops, c.vectorFlops}), (Flops{0, 0})) << op;
    }
  }
}

// mkldnn's fused pointwise ops: the .binary overload (X, other, W, B, ...) shares the name of
// the unary one (X, W, B, ...) and is priced as the same convolution / linear plus the fused
// elementwise op.
TEST(FormulasTest, MkldnnPointwiseUnaryAndBinaryOverloads) {
  const Sizes x{2, 8, 10, 10}, w{16, 8, 3, 3}, o{2, 16, 8, 8};
  const int64_t convFlops = 2 * 2 * prod({8, 8}) * prod(w);
  const Args unary{t(x),
                   t(w),
                   t(Sizes{16}),
                   Arg::ofInts({0, 0}),
                   Arg::ofInts({1, 1}),
                   Arg::ofInts({1, 1}),
                   Arg::ofInt(1),
                   other()};
  EXPECT_EQ(matrixCost("mkldnn::_convolution_pointwise", unary, {t(o)}),
            Flops(convFlops, prod(o)));  // bias
  const Args binary{t(x),
                    t(o),
                    t(w),
                    t(Sizes{16}),
                    Arg::ofInts({0, 0}),
                    Arg::ofInts({1, 1}),
                    Arg::ofInts({1, 1}),
                    Arg::ofInt(1),
                    other()};
  EXPECT_EQ(matrixCost("mkldnn::_convolution_pointwise", binary, {t(o)}),
            Flops(convFlops, 2 * prod(o)));  // bias and the fused add
  const Args linearBinary{t(Sizes{4, 32}), t(Sizes{4, 64}), t(Sizes{64, 32}), Arg::none()};
  EXPECT_EQ(matrixCost("mkldnn::_linear_pointwise", linearBinary, {t(Sizes{4, 64})}),
            Flops(2 * 4 * 64 * 32, 4 * 64));  // no bias; the fused op
}

// RNN layers against 2*T*B*G*H*(I + H) per layer and direction, plus the vector FLOPs of
// Formulas.cpp: 2*G per T*B*H for the biases and the gate math (LSTM 13, GRU 10, RNN 2).
TEST(FormulasTest, MkldnnRnnLayerIsOneLayerAndDirection) {
  const int64_t steps = 7, batch = 3, in = 10, h = 6;
  for (const auto& [mode, gates, gateMath] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{2, 4, 13}, {3, 3, 10}, {1, 1, 2}}) {
    const Args args{
        t({steps, batch, in}), t({gates * h, in}), t({gates * h, h}),  t({gates * h}),
        t({gates * h}),        t({batch, h}),      t({batch, h}),      Arg::ofBool(false),
        Arg::ofInts({}),       Arg::ofInt(mode),   Arg::ofInt(h),      Arg::ofInt(1),
        Arg::ofBool(true),     Arg::ofBool(false), Arg::ofBool(false), Arg::ofBool(false)};
    const int64_t cells = steps * batch * h;
    EXPECT_EQ(matrixCost("aten::mkldnn_rnn_layer", args, {t({steps, batch, h})}),
              (Flops{2 * steps * batch * gates * h * (in + h), cells * (2 * gates + gateMath)}))
        << "mode " << mode;
  }
}

TEST(FormulasTest, CudnnRnnPricesEveryLayerAndDirection) {
  // A 2-layer bidirectional GRU with biases, batch_first [B, T, I]: layer 1 reads I, layer 2
  // reads both directions of layer 1 (2H).
  const int64_t steps = 5, batch = 4, in = 8, h = 6, g = 3;
  Arg weights;
  weights.kind = ArgKind::TensorList;
  for (int64_t layerIn : {in, in, 2 * h, 2 * h}) {
    for (const Sizes& w : {Sizes{g * h, layerIn}, Sizes{g * h, h}, Sizes{g * h}, Sizes{g * h}}) {
      weights.tensors.push_back(t(w).tensor);
    }
  }
  const Args args{t({batch, steps, in}), weights,           Arg::ofInt(4),     Arg::none(),
                  t({4, batch, h}),      Arg::none(),       Arg::ofInt(3),     Arg::ofInt(h),
                  Arg::ofInt(0),         Arg::ofInt(2),     Arg::ofBool(true), Arg::ofDouble(0.0),
                  Arg::ofBool(false),    Arg::ofBool(true), Arg::ofInts({}),   Arg::none()};
  const int64_t rows = steps * batch;
  const int64_t matrix = 2 * (2 * rows * g * h * (in + h)) + 2 * (2 * rows * g * h * (2 * h + h));
  const int64_t vector = 4 * rows * h * (2 * g + 10);
  EXPECT_EQ(matrixCost("aten::_cudnn_rnn", args, {t({batch, steps, 2 * h})}),
            (Flops{matrix, vector}));
}

// Counts that do not fit int64 are held at its maximum, never wrapped.
TEST(FormulasTest, CountsSaturateInsteadOfOverflowing) {
  const int64_t m = int64_t{1} << 30, k = int64_t{1} << 20, n = int64_t{1} << 30;
  const Flops c = matrixCost("aten::mm", {t({m, k}), t({k, n})}, {t({m, n})});
  EXPECT_EQ(c.first, kSaturatedCount);
  EXPECT_EQ(saturatingAdd(kSaturatedCount, 1), kSaturatedCount);
  EXPECT_EQ(saturatingMul(int64_t{1} << 40, int64_t{1} << 40), kSaturatedCount);
}

// A product with a sparse operand: 2·nnz·N (sparse left) or 2·nnz·M (sparse right), the closed
// form of the values stored; two sparse operands: unpriced (the work is data).
TEST(FormulasTest, SparseProductsArePricedByTheirStoredValues) {
  const int64_t m = 64, k = 128, n = 32, nnz = 200;
  const Arg sparseA = Arg::ofSparse({m, k}, nnz, /*storedBytes=*/nnz * 4 + 2 * nnz * 8);
  EXPECT_EQ(matrixCost("aten::mm", {sparseA, t({k, n})}, {t({m, n})}), (Flops{2 * nnz * n, 0}));
  EXPECT_EQ(matrixCost("aten::mm", {t({n, m}), Arg::ofSparse({m, k}, nnz, 0)}, {t({n, k})}),
            (Flops{2 * nnz * n, 0}));
  EXPECT_EQ(matrixCost("aten::mv", {sparseA, t({k})}, {t({m})}), (Flops{2 * nnz, 0}));
  // addmm and sparse.addmm: the product and the bias once per output element.
  for (const char* op : {"aten::addmm", "aten::_sparse_addmm"}) {
    EXPECT_EQ(
        matrixCost(op, {t({m, n}), sparseA, t({k, n}), Arg::ofInt(1), Arg::ofInt(1)}, {t({m, n})}),
        (Flops{2 * nnz * n, m * n}))
        << op;
  }
  EXPECT_TRUE(fullCost("aten::mm", {sparseA, Arg::ofSparse({k, n}, 10, 0)}, {t({m, n})}).unpriced);
  // The bytes of a sparse tensor are its stored values and indices.
  EXPECT_EQ(sparseA.tensor.nbytes(), nnz * 4 + 2 * nnz * 8);
  EXPECT_EQ(totalBytes({sparseA, t({k, n})}), nnz * 4 + 2 * nnz * 8 + k * n * 4);
}

TEST(FormulasTest, AccumulationsAtIndicesAndWeightNorm) {
  const Args indexAdd = {t({10, 16}), Arg::ofInt(0), t({40}), t({40, 16}), Arg::ofInt(1)};
  EXPECT_EQ(vectorCost("aten::index_add", indexAdd, {t({10, 16})}), (Flops{0, 640}));
  Args scaled = indexAdd;
  scaled[4] = Arg::ofDouble(0.5);
  EXPECT_EQ(vectorCost("aten::index_add", scaled, {t({10, 16})}), (Flops{0, 1280}));
  EXPECT_EQ(vectorCost("aten::scatter_add", {t({10, 16}), Arg::ofInt(0), t({40, 16}), t({40, 16})},
                       {t({10, 16})}),
            (Flops{0, 640}));
  for (const auto& [mode, extra] : {std::pair<const char*, int64_t>{"sum", 0}, {"mean", 160}}) {
    EXPECT_EQ(vectorCost("aten::scatter_reduce",
                         {t({10, 16}), Arg::ofInt(0), t({40, 16}), t({40, 16}), Arg::ofString(mode),
                          Arg::ofBool(true)},
                         {t({10, 16})}),
              (Flops{0, 640 + extra}))
        << mode;
  }
  for (const char* op : {"aten::_weight_norm_interface", "aten::_weight_norm"}) {
    EXPECT_EQ(vectorCost(op, {t({32, 16, 3, 3}), t({32, 1, 1, 1}), Arg::ofInt(0)},
                         {t({32, 16, 3, 3}), t({32, 1, 1, 1})}),
              (Flops{0, 3 * 32 * 16 * 9 + 2 * 32}))
        << op;
  }
}

}  // namespace
}  // namespace torchutil
