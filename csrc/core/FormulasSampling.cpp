// Formulas of ops that sample a tensor at computed points, and torchvision's detection ops:
// grid_sample, roi_align and nms. All vector FLOPs (docs/counting.md).
//
// A sample of a tensor at a fractional point costs, per channel, one FLOP per tap, as
// interpolation counts them (bilinear 2^dims, bicubic 16, nearest none: a copy); unlike
// upsampling, whose weights depend on the output row or column only, each point here has its
// own coordinate and weights, shared by the channels: 2 FLOPs per axis for the coordinate (a
// scale and a shift) and 1 per tap weight.
#include "core/FormulaFamilies.h"

namespace torchutil::formulas {
namespace {

// Vector FLOPs of sampling `channels` values at each of `points` points of `dims` axes with
// `taps` taps per value (0 for nearest).
int64_t samplingFlops(int64_t points, int64_t channels, int64_t dims, int64_t taps) {
  const int64_t perValue = saturatingMul(saturatingMul(points, channels), taps);
  const int64_t perPoint = saturatingMul(points, 2 * dims + taps);
  return saturatingAdd(perValue, perPoint);
}

// interpolation_mode of grid_sampler: 0 bilinear, 1 nearest, 2 bicubic (2-d only).
int64_t gridSamplerTaps(int64_t mode, int64_t dims) {
  switch (mode) {
    case 0: return int64_t{1} << dims;
    case 1: return 0;
    case 2: return 16;
    default: return -1;
  }
}

constexpr int kBilinearOnly = -1;

// grid_sampler(input [N, C, in...], grid [N, out..., dims], interpolation_mode, padding_mode,
// align_corners), F.grid_sample: N * prod(out) points of C channels. cudnn_grid_sampler(input,
// grid) is bilinear only (kBilinearOnly).
template <int ModeIdx>
Cost gridSampler(const Args& in, const Args&) {
  const TensorInfo* x = tensorAt(in, 0);
  const TensorInfo* grid = tensorAt(in, 1);
  if (x == nullptr || grid == nullptr || x->dim() < 3 || grid->dim() != x->dim() ||
      grid->size(-1) != x->dim() - 2) {
    return {};
  }
  const int64_t dims = grid->size(-1);
  const int64_t taps = gridSamplerTaps(ModeIdx < 0 ? 0 : intAt(in, ModeIdx), dims);
  if (taps < 0) {
    return {};
  }
  return {0, samplingFlops(grid->numel() / dims, x->size(1), dims, taps)};
}

// torchvision::roi_align(input [N, C, H, W], rois [K, 5], spatial_scale, pooled_height,
// pooled_width, sampling_ratio, aligned) -> [K, C, ph, pw]: each output bin averages
// sampling_ratio^2 bilinear samples: the samples (samplingFlops), one add per sample and one
// divide per bin for the average. sampling_ratio <= 0 takes ceil(roi size / bin) samples, which
// depends on each box: the shapes do not say, and the call is reported (Cost::unpriced).
Cost roiAlign(const Args& in, const Args&) {
  const TensorInfo* x = tensorAt(in, 0);
  const TensorInfo* rois = tensorAt(in, 1);
  const int64_t ph = intAt(in, 3), pw = intAt(in, 4), ratio = intAt(in, 5, /*fallback=*/0);
  if (x == nullptr || rois == nullptr || x->dim() != 4 || rois->dim() != 2 || ph < 0 || pw < 0) {
    return {};
  }
  if (ratio <= 0) {
    Cost c;
    c.unpriced = true;
    return c;
  }
  const int64_t bins = saturatingMul(saturatingMul(rois->size(0), ph), pw);
  const int64_t points = saturatingMul(bins, ratio * ratio);
  const int64_t channels = x->size(1);
  const int64_t average =
      saturatingAdd(saturatingMul(points, channels), saturatingMul(bins, channels));
  return {0, saturatingAdd(samplingFlops(points, channels, /*dims=*/2, /*taps=*/4), average)};
}

// torchvision::nms(dets [N, 4], scores [N], iou_threshold): the area of each box (2
// subtractions, 1 product) and the IoU of every pair of boxes, 13 FLOPs each: the
// intersection's corners (2 max, 2 min), its sides (2 subtractions, each clamped at 0), its
// area (1), the union (1 add, 1 subtract), the ratio (1) and the comparison with the threshold
// (1). All N(N-1)/2 pairs: what the CUDA kernel computes; the CPU loop skips the pairs of
// boxes already suppressed, so there it is an upper bound (which pairs are skipped is data).
Cost nms(const Args& in, const Args&) {
  const TensorInfo* boxes = tensorAt(in, 0);
  if (boxes == nullptr || boxes->dim() != 2) {
    return {};
  }
  const int64_t n = boxes->size(0);
  const int64_t pairs = n % 2 == 0 ? saturatingMul(n / 2, n - 1) : saturatingMul(n, (n - 1) / 2);
  return {0, saturatingAdd(saturatingMul(13, pairs), saturatingMul(3, n))};
}

}  // namespace

void registerSamplingFormulas(FormulaRegistry& r) {
  using C = OpClass;
  // grid_sampler chooses cudnn_grid_sampler or grid_sampler_2d / _3d; the CPU kernel may call
  // its fallback. Each is priced alike, at the outermost one.
  addAll(r,
         {"aten::grid_sampler", "aten::grid_sampler_2d", "aten::grid_sampler_3d",
          "aten::_grid_sampler_2d_cpu_fallback"},
         C::Vector, &gridSampler</*ModeIdx=*/2>);
  r.add("aten::cudnn_grid_sampler", C::Vector, &gridSampler<kBilinearOnly>);
  r.add("torchvision::roi_align", C::Vector, &roiAlign);
  r.add("torchvision::nms", C::Vector, &nms);
}

}  // namespace torchutil::formulas
