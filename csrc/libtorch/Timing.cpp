#include "libtorch/Timing.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

#ifdef TORCHUTIL_WITH_CUDA
#include "cuda/CudaSupport.h"
#endif

namespace torchutil {

const char* timingModeName(TimingMode m) {
  return m == TimingMode::CudaGraph ? "cuda_graph" : "eager";
}

std::vector<double> timeForwards(Forward& forward, const std::vector<at::Tensor>& inputs,
                                 c10::Device device, TimingMode mode, int64_t warmup,
                                 int64_t iters, const std::function<void()>& beforeTimed) {
  if (mode == TimingMode::CudaGraph) {
    TORCH_CHECK_VALUE(device.is_cuda(), "torchutil: cuda_graph=True needs CUDA inputs, got ",
                      device.str());
#ifdef TORCHUTIL_WITH_CUDA
    return cuda::timeGraphReplays(forward, inputs, device, warmup, iters, beforeTimed);
#else
    TORCH_CHECK(false, "torchutil: cuda_graph=True needs torchutil built with CUDA; this build "
                "has none (see torchutil.build_info())");
#endif
  }
  for (int64_t i = 0; i < warmup; ++i) {
    forward.run(inputs);
  }
  if (beforeTimed) {
    synchronizeDevice(device);
    beforeTimed();
  }
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(iters));
  if (device.is_cpu()) {
    for (int64_t i = 0; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      forward.run(inputs);
      const auto t1 = std::chrono::steady_clock::now();
      seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    return seconds;
  }
  // Device events: one pair per forward, recorded on the current stream of the input's
  // device; read after a single synchronization so that timing adds no host stalls.
  c10::DeviceGuard guard(device);
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  const c10::Stream stream = impl->getStream(device);
  std::vector<c10::Event> starts, ends;
  starts.reserve(static_cast<size_t>(iters));
  ends.reserve(static_cast<size_t>(iters));
  for (int64_t i = 0; i < iters; ++i) {
    starts.emplace_back(device.type(), c10::EventFlag::BACKEND_DEFAULT);
    ends.emplace_back(device.type(), c10::EventFlag::BACKEND_DEFAULT);
  }
  impl->synchronizeDevice(device.index());
  for (int64_t i = 0; i < iters; ++i) {
    starts[static_cast<size_t>(i)].record(stream);
    forward.run(inputs);
    ends[static_cast<size_t>(i)].record(stream);
  }
  ends.back().synchronize();
  for (int64_t i = 0; i < iters; ++i) {
    seconds.push_back(starts[static_cast<size_t>(i)].elapsedTime(ends[static_cast<size_t>(i)]) / 1e3);
  }
  return seconds;
}

}  // namespace torchutil
