// The util:: roofline operators (core/Roofline.h). Schemas stand next to their
// implementations; private ops start with _.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <stdexcept>

#include "core/ResultSchema.h"
#include "core/Roofline.h"
#include "libtorch/DeviceBandwidth.h"
#include "libtorch/DevicePeak.h"
#include "libtorch/Devices.h"
#include "libtorch/ValueErrors.h"

namespace torchutil {
namespace {

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

// The table's columns are the numeric fields of the "roofline" schema, bounds its text field.
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
  ResultTable points("roofline");
  for (int64_t i = 0; i < n; ++i) {
    std::optional<double> seconds;
    if (k.defined()) {
      seconds = k.data_ptr<double>()[i];
    }
    const std::string row = " (row " + std::to_string(i) + ")";
    const RooflinePoint p = valueErrors(
        [&] {
          return placeOnRoofline(f.data_ptr<double>()[i], b.data_ptr<double>()[i], peakFlops,
                                 bandwidth, seconds);
        },
        row.c_str());
    const size_t r = points.addRow();
    points.set(r, RooflineField::intensity, p.intensity);
    points.set(r, RooflineField::attainable_flops_per_second, p.attainableFlopsPerSecond);
    points.set(r, RooflineField::attainable_utilization, p.attainableUtilization);
    points.set(r, RooflineField::roofline_seconds, p.rooflineSeconds);
    points.set(r, RooflineField::achieved_flops_per_second, p.achievedFlopsPerSecond);
    points.set(r, RooflineField::roofline_share, p.rooflineShare);
    points.setText(r, RooflineField::bound, rooflineBoundName(p.bound));
  }
  const at::Tensor table = at::tensor(points.numbers(), at::TensorOptions().dtype(at::kDouble))
                               .reshape({n, static_cast<int64_t>(points.numericWidth())});
  const std::vector<std::string>& bounds = points.textColumn("bound");
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
  m.def(
      "_roofline_points(Tensor flops, Tensor bytes, float peak_flops, float bandwidth, "
      "Tensor? kernel_seconds=None) -> (Tensor table, str[] bounds)",
      &rooflinePointsOp);
  m.def("_roofline_fields() -> str[]", [] { return numericFieldNames("roofline"); });
  m.def("memory_bandwidth(Device device, str source=\"auto\") -> (float, str)", &memoryBandwidthOp);
}

}  // namespace torchutil
