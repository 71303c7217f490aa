#include "libtorch/DeviceBandwidth.h"

#include <ATen/ops/empty.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <sstream>

#include "core/PeakTable.h"
#include "libtorch/Devices.h"
#include "libtorch/MeasuredRate.h"

#ifdef TORCHUTIL_WITH_CUDA
#include "cuda/CudaSupport.h"
#endif

namespace torchutil {
namespace {

double timeCopy(c10::Device device) {
  TORCH_CHECK_VALUE(!device.is_meta(), "torchutil: the meta device has no memory bandwidth");
  c10::InferenceMode inference;
  const int64_t bytes = device.is_cpu() ? (int64_t{256} << 20) : (int64_t{2} << 30);
  const auto opts = at::TensorOptions().device(device).dtype(at::kByte);
  at::Tensor src = at::empty({bytes}, opts).fill_(1);
  at::Tensor dst = at::empty({bytes}, opts);
  // Every copy reads and writes `bytes`.
  return bestRate(
      device, [&] { dst.copy_(src); }, device.is_cpu() ? 1 : 10, 2.0 * static_cast<double>(bytes));
}

}  // namespace

double measuredCopyBandwidth(c10::Device device) {
  return memoized("copy " + device.str(), [&] { return timeCopy(device); });
}

Bandwidth deviceBandwidth(c10::Device device, RateSource source) {
#ifdef TORCHUTIL_WITH_CUDA
  if (device.is_cuda()) {
    const cuda::DeviceInfo info = cuda::deviceInfo(device.index());
    if (source == RateSource::Auto || source == RateSource::Datasheet) {
      const DatasheetEntry* e = findDatasheet(info.name);
      if (e != nullptr && e->memoryGBps > 0) {
        return {e->memoryGBps * 1e9, std::string("datasheet: ") + e->name};
      }
      TORCH_CHECK_VALUE(source == RateSource::Auto, "torchutil: no datasheet bandwidth for ",
                        info.name, "; use source='computed' or 'measured'");
    }
    if (source == RateSource::Auto || source == RateSource::Computed) {
      if (info.memoryBytesPerSecond > 0) {
        return {info.memoryBytesPerSecond,
                "computed: 2 x memory clock x bus width of " + info.name};
      }
      TORCH_CHECK_VALUE(source == RateSource::Auto, "torchutil: ", info.name,
                        " reports no memory clock; use source='measured'");
    }
  }
#endif
  TORCH_CHECK_VALUE(source == RateSource::Auto || source == RateSource::Measured, "torchutil: a ",
                    rateSourceName(source), " bandwidth exists only for CUDA GPUs, not for ",
                    device.str(), "; use source='measured' or 'auto'");
  std::ostringstream src;
  src << "measured: best copy of a large tensor on " << device.str() << " (read + write)";
  return {measuredCopyBandwidth(device), src.str()};
}

}  // namespace torchutil
