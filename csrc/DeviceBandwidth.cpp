#include "DeviceBandwidth.h"

#include <ATen/ops/empty.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <map>
#include <mutex>
#include <sstream>

#include "Timing.h"
#include "core/PeakTable.h"

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
  const int perRep = device.is_cpu() ? 1 : 10;
  double best = 0.0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  for (int rep = 0; rep < 12; ++rep) {
    synchronizeDevice(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < perRep; ++i) {
      dst.copy_(src);
    }
    synchronizeDevice(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) {  // the first copy pays for page faults
      best = std::max(best, 2.0 * static_cast<double>(bytes) * perRep / s);  // read + write
    }
    if (rep >= 3 && std::chrono::steady_clock::now() > deadline) {
      break;
    }
  }
  return best;
}

}  // namespace

double measuredCopyBandwidth(c10::Device device) {
  static std::mutex mutex;
  static std::map<std::string, double> cache;
  const std::string key = device.str();
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      return it->second;
    }
  }
  const double value = timeCopy(device);
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = value;
  return value;
}

Bandwidth deviceBandwidth(c10::Device device, std::string_view source) {
  TORCH_CHECK_VALUE(source == "auto" || source == "datasheet" || source == "computed" ||
                        source == "measured",
                    "torchutil: bandwidth source must be one of 'auto', 'datasheet', "
                    "'computed', 'measured', got '", std::string(source), "'");
#ifdef TORCHUTIL_WITH_CUDA
  if (device.is_cuda()) {
    const cuda::DeviceInfo info = cuda::deviceInfo(device.index());
    if (source == "auto" || source == "datasheet") {
      const DatasheetEntry* e = findDatasheet(info.name);
      if (e != nullptr && e->memoryGBps > 0) {
        return {e->memoryGBps * 1e9, std::string("datasheet: ") + e->name};
      }
      TORCH_CHECK_VALUE(source == "auto", "torchutil: no datasheet bandwidth for ", info.name,
                        "; use source='computed' or 'measured'");
    }
    if (source == "auto" || source == "computed") {
      if (info.memoryBytesPerSecond > 0) {
        return {info.memoryBytesPerSecond, "computed: 2 x memory clock x bus width of " + info.name};
      }
      TORCH_CHECK_VALUE(source == "auto", "torchutil: ", info.name,
                        " reports no memory clock; use source='measured'");
    }
  }
#endif
  TORCH_CHECK_VALUE(source == "auto" || source == "measured", "torchutil: a ",
                    std::string(source), " bandwidth exists only for CUDA GPUs, not for ",
                    device.str(), "; use source='measured' or 'auto'");
  std::ostringstream src;
  src << "measured: best copy of a large tensor on " << device.str() << " (read + write)";
  return {measuredCopyBandwidth(device), src.str()};
}

}  // namespace torchutil
