#include "libtorch/Timing.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <utility>

#include "libtorch/ValueErrors.h"

#ifdef TORCHUTIL_WITH_CUDA
#include "cuda/CudaSupport.h"
#endif

namespace torchutil {
namespace {

class EagerRunner final : public Runner {
 public:
  EagerRunner(Forward& forward, const std::vector<at::Tensor>& inputs, c10::Device device)
      : forward_(forward), inputs_(inputs), device_(device) {}

  void run() override { forward_.run(inputs_); }

  std::optional<c10::Stream> stream() override {
    if (device_.is_cpu()) {
      return std::nullopt;
    }
    return c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_);
  }

 private:
  Forward& forward_;
  const std::vector<at::Tensor>& inputs_;
  c10::Device device_;
};

#ifdef TORCHUTIL_WITH_CUDA
// Replays of a captured forward.
class GraphRunner final : public Runner {
 public:
  explicit GraphRunner(std::unique_ptr<cuda::CapturedGraph> graph) : graph_(std::move(graph)) {}
  void run() override { graph_->replay(); }
  std::optional<c10::Stream> stream() override { return graph_->stream(); }

 private:
  std::unique_ptr<cuda::CapturedGraph> graph_;
};
#endif

double steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// n forwards; on a device one pair of events around each, read after one synchronization so
// that timing adds no host stalls between forwards.
std::vector<double> timeBatch(Runner& runner, c10::Device device, int64_t n, int64_t idleBeforeUs) {
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(n));
  const std::optional<c10::Stream> stream = runner.stream();
  if (!stream.has_value()) {
    for (int64_t i = 0; i < n; ++i) {
      const double t0 = steadySeconds();
      runner.run();
      seconds.push_back(steadySeconds() - t0);
      checkInterrupt();
    }
    return seconds;
  }
  c10::DeviceGuard guard(device);
  std::vector<c10::Event> starts, ends;
  starts.reserve(static_cast<size_t>(n));
  ends.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    starts.emplace_back(device.type(), c10::EventFlag::BACKEND_DEFAULT);
    ends.emplace_back(device.type(), c10::EventFlag::BACKEND_DEFAULT);
  }
  synchronizeDevice(device);
  if (idleBeforeUs > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(idleBeforeUs));
  }
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    starts[i].record(*stream);
    runner.run();
    ends[i].record(*stream);
    checkInterrupt();
  }
  ends.back().synchronize();
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    seconds.push_back(starts[i].elapsedTime(ends[i]) / 1e3);
  }
  return seconds;
}

}  // namespace

TimingMode parseTimingMode(std::string_view name) {
  return valueErrors([&] { return kTimingModes.parse(name, "timing"); });
}

bool cudaGraphsBuilt() {
#ifdef TORCHUTIL_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Runner> eagerRunner(Forward& forward, const std::vector<at::Tensor>& inputs,
                                    c10::Device device) {
  return std::make_unique<EagerRunner>(forward, inputs, device);
}

std::optional<c10::Stream> captureStream(c10::Device device, TimingMode mode, bool keepPools) {
#ifdef TORCHUTIL_WITH_CUDA
  if (mode == TimingMode::Eager || !device.is_cuda()) {
    return std::nullopt;
  }
  device = concreteDevice(device);
  const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(device.type());
  const std::optional<c10::Stream> kept =
      keepPools ? std::optional<c10::Stream>(cuda::keptCaptureStream(device)) : std::nullopt;
  const c10::Stream side =
      kept ? *kept : impl->getStreamFromGlobalPool(device, /*isHighPriority=*/false);
  c10::Event ready(device.type());
  ready.record(impl->getStream(device));
  ready.block(side);
  noteThreadStream(side);
  return side;
#else
  (void)device;
  (void)mode;
  (void)keepPools;
  return std::nullopt;
#endif
}

Capture captureForward(const std::function<void()>& forward, const std::function<void()>& warmUp,
                       c10::Device device, c10::Stream stream, bool threadLocal, bool keepPools) {
#ifdef TORCHUTIL_WITH_CUDA
  cuda::GraphCapture captured =
      cuda::captureGraph(forward, warmUp, device, stream, threadLocal, keepPools);
  Capture c;
  c.failure = std::move(captured.failure);
  if (captured.graph) {
    c.runner = std::make_unique<GraphRunner>(std::move(captured.graph));
  }
  return c;
#else
  (void)threadLocal;
  (void)keepPools;
  (void)forward;
  (void)warmUp;
  (void)device;
  (void)stream;
  TORCH_CHECK(false,
              "torchutil: timing='cuda_graph' needs torchutil built with CUDA; this build has "
              "none (see torchutil.build_info())");
#endif
}

void freeCapturePools() {
#ifdef TORCHUTIL_WITH_CUDA
  cuda::freeCapturePools();
#endif
}

std::shared_ptr<void> shareCapturesWithThreads(bool on) {
#ifdef TORCHUTIL_WITH_CUDA
  struct Shared {
    cuda::SharedCaptureMode mode{true};
    ThreadStreams streams;
  };
  return on ? std::make_shared<Shared>() : nullptr;
#else
  (void)on;
  return nullptr;
#endif
}

bool captureWithoutReplay(const std::function<void()>& forward, c10::Device device,
                          c10::Stream stream, bool threadLocal, bool keepPools,
                          std::string* failure) {
#ifdef TORCHUTIL_WITH_CUDA
  return cuda::captureWithoutReplay(forward, device, stream, threadLocal, keepPools, failure);
#else
  (void)threadLocal;
  (void)keepPools;
  (void)forward;
  (void)device;
  (void)stream;
  (void)failure;
  TORCH_CHECK(false, "torchutil: a capture needs torchutil built with CUDA");
#endif
}

void runForwards(Runner& runner, c10::Device device, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    runner.run();
    checkInterrupt();
  }
  synchronizeDevice(device);
}

RepeatResult timeForwards(Runner& runner, c10::Device device, const RepeatPolicy& policy,
                          int64_t idleBeforeUs) {
  return valueErrors([&] {
    return repeatTimed([&](int64_t n) { return timeBatch(runner, device, n, idleBeforeUs); },
                       &steadySeconds, policy);
  });
}

}  // namespace torchutil
