// The util:: roofline operators (core/Roofline.h). Schemas stand next to their
// implementations; private ops start with _.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <stdexcept>

#include "libtorch/DeviceBandwidth.h"
#include "libtorch/DevicePeak.h"
#include "libtorch/Devices.h"
#include "core/Roofline.h"

namespace torchutil {
namespace {

// Column order of _roofline_points' table.
constexpr const char* kPointFields[] = {"intensity", "attainable_flops_per_second",
                                        "attainable_utilization", "roofline_seconds",
                                        "achieved_flops_per_second", "roofline_share"};
constexpr int64_t kNumPointFields = sizeof(kPointFields) / sizeof(kPointFields[0]);

void checkDevice(double peakFlops, double bandwidth) {
  TORCH_CHECK_VALUE(peakFlops > 0 && std::isfinite(peakFlops),
                    "torchutil: peak_flops must be a positive number of FLOP/s, got ", peakFlops);
  TORCH_CHECK_VALUE(bandwidth > 0 && std::isfinite(bandwidth),
                    "torchutil: bandwidth must be a positive number of bytes/s, got ", bandwidth);
}

// min(1, flops / bytes x bandwidth / peak), elementwise; NaN where an op has neither FLOPs
// nor bytes.
at::Tensor rooflineOp(const at::Tensor& flops, const at::Tensor& bytes, double peakFlops,
                      double bandwidth) {
  TORCH_CHECK_VALUE(flops.is_floating_point() && bytes.is_floating_point(),
                    "torchutil: roofline takes floating-point tensors, got ", flops.scalar_type(),
                    " and ", bytes.scalar_type());
  checkDevice(peakFlops, bandwidth);
  return at::clamp_max(flops / bytes * (bandwidth / peakFlops), 1.0);
}

std::tuple<at::Tensor, std::vector<std::string>> rooflinePointsOp(
    const at::Tensor& flops, const at::Tensor& bytes, double peakFlops, double bandwidth,
    const std::optional<at::Tensor>& kernelSeconds) {
  checkDevice(peakFlops, bandwidth);
  TORCH_CHECK_VALUE(flops.dim() == 1 && bytes.sizes() == flops.sizes(),
                    "torchutil: flops and bytes must be 1-d tensors of one length, got ",
                    flops.sizes(), " and ", bytes.sizes());
  TORCH_CHECK_VALUE(!kernelSeconds.has_value() || kernelSeconds->sizes() == flops.sizes(),
                    "torchutil: kernel_seconds must match flops, got ", kernelSeconds->sizes(),
                    " and ", flops.sizes());
  const at::Tensor f = flops.to(at::kDouble).cpu().contiguous();
  const at::Tensor b = bytes.to(at::kDouble).cpu().contiguous();
  at::Tensor k;
  if (kernelSeconds.has_value()) {
    k = kernelSeconds->to(at::kDouble).cpu().contiguous();
  }
  const int64_t n = f.numel();
  at::Tensor table = at::empty({n, kNumPointFields}, at::kDouble);
  auto out = table.accessor<double, 2>();
  std::vector<std::string> bounds;
  for (int64_t i = 0; i < n; ++i) {
    std::optional<double> seconds;
    if (k.defined()) {
      seconds = k.data_ptr<double>()[i];
    }
    RooflinePoint p;
    try {
      p = placeOnRoofline(f.data_ptr<double>()[i], b.data_ptr<double>()[i], peakFlops, bandwidth,
                          seconds);
    } catch (const std::invalid_argument& e) {
      TORCH_CHECK_VALUE(false, e.what(), " (row ", i, ")");
    }
    const double values[kNumPointFields] = {p.intensity, p.attainableFlopsPerSecond,
                                            p.attainableUtilization, p.rooflineSeconds,
                                            p.achievedFlopsPerSecond, p.rooflineShare};
    for (int64_t j = 0; j < kNumPointFields; ++j) {
      out[i][j] = values[j];
    }
    bounds.emplace_back(rooflineBoundName(p.bound));
  }
  return {table, bounds};
}

std::tuple<double, std::string> memoryBandwidthOp(c10::Device device, std::string source) {
  Bandwidth bw =
      deviceBandwidth(concreteDevice(device), rateSourceArgument(source, "bandwidth source"));
  return {bw.bytesPerSecond, bw.source};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(util, m) {
  m.def("roofline(Tensor flops, Tensor bytes, float peak_flops, float bandwidth) -> Tensor",
        &rooflineOp);
  m.def("_roofline_points(Tensor flops, Tensor bytes, float peak_flops, float bandwidth, "
        "Tensor? kernel_seconds=None) -> (Tensor table, str[] bounds)",
        &rooflinePointsOp);
  m.def("_roofline_fields() -> str[]", [] {
    return std::vector<std::string>(std::begin(kPointFields), std::end(kPointFields));
  });
  m.def("memory_bandwidth(Device device, str source=\"auto\") -> (float, str)",
        &memoryBandwidthOp);
}

}  // namespace torchutil
