#include "cuda/CudaSupport.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>

namespace torchutil::cuda {
namespace {

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

}  // namespace

DeviceInfo deviceInfo(c10::DeviceIndex index) {
  // torch.device("cuda") has no index: the current device (cudaDeviceGetAttribute rejects -1).
  if (index < 0) {
    index = c10::cuda::current_device();
  }
  // A device's properties do not change: read once per device (every profile asks twice).
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, DeviceInfo> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(index); it != known.end()) {
    return it->second;
  }
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
  DeviceInfo info;
  info.name = prop->name;
  info.major = prop->major;
  info.minor = prop->minor;
  info.multiprocessors = prop->multiProcessorCount;
  // cudaDeviceProp::clockRate and memoryClockRate are gone in CUDA 13; the attributes remain.
  info.clockHz = attribute(cudaDevAttrClockRate, index) * 1e3;
  const double memoryClockHz = attribute(cudaDevAttrMemoryClockRate, index) * 1e3;
  const double busBytes = attribute(cudaDevAttrGlobalMemoryBusWidth, index) / 8.0;
  info.memoryBytesPerSecond = 2.0 * memoryClockHz * busBytes;
  known.emplace(index, info);
  return info;
}

namespace {

class GraphRunner final : public Runner {
 public:
  GraphRunner(c10::Device device, c10::cuda::CUDAStream side) : device_(device), side_(side) {}

  at::cuda::CUDAGraph& graph() { return graph_; }
  void run() override {
    c10::cuda::CUDAStreamGuard streamGuard(side_);
    graph_.replay();
  }
  std::optional<c10::Stream> stream() override { return side_.unwrap(); }

 private:
  c10::Device device_;
  c10::cuda::CUDAStream side_;
  at::cuda::CUDAGraph graph_;
};

}  // namespace

namespace {

cudaStreamCaptureMode captureMode(bool threadLocal) {
  return threadLocal ? cudaStreamCaptureModeThreadLocal : cudaStreamCaptureModeGlobal;
}

// Captures of threads sharing the GPU take turns: the retry frees the allocator's cache, which
// must not run beside another capture, and torch 2.11's CUDA generator tracks whether a capture
// is underway (random numbers drawn beside one failed: "Offset increment outside graph capture
// encountered unexpectedly"). Their Python forwards hold the GIL anyway; replays still overlap.
std::unique_lock<std::mutex> captureTurn(bool threadLocal) {
  static std::mutex mutex;
  return threadLocal ? std::unique_lock<std::mutex>(mutex) : std::unique_lock<std::mutex>();
}

// One capture attempt: the runner, or the message of the forward's failure during capture.
std::unique_ptr<GraphRunner> tryCapture(const std::function<void()>& forward, c10::Device device,
                                        c10::cuda::CUDAStream side, bool threadLocal,
                                        std::string* failure) {
  auto runner = std::make_unique<GraphRunner>(device, side);
  c10::cuda::CUDAStreamGuard streamGuard(side);
  runner->graph().capture_begin({0, 0}, captureMode(threadLocal));
  try {
    forward();
  } catch (const std::exception& e) {
    try {
      runner->graph().capture_end();
    } catch (...) {
      // capture is invalid after a failure inside it; capture_end reports that too
    }
    (void)cudaGetLastError();  // the failed capture's error must not reach the next call
    *failure = e.what();
    return nullptr;
  }
  runner->graph().capture_end();
  return runner;
}

}  // namespace

Capture captureGraph(const std::function<void()>& forward, const std::function<void()>& warmUp,
                     c10::Device device, c10::Stream stream, bool threadLocal) {
  const std::unique_lock<std::mutex> turn = captureTurn(threadLocal);
  c10::cuda::CUDAGuard deviceGuard(device);
  c10::cuda::CUDAStream side(stream);
  side.synchronize();
  Capture capture;
  if ((capture.runner = tryCapture(forward, device, side, threadLocal, &capture.failure))) {
    return capture;
  }
  // A destroyed graph's private memory pool stays cached until the allocator frees cached
  // blocks, which it cannot do while capturing: after some thousand profiles of one network
  // (a NAS sweep on an H200 failed every capture from the 2,068th cell on) the next capture
  // runs out of memory. A forward never run before may also initialize lazily (a library
  // handle, a workspace) inside the capture, which capture forbids. So: free the cache, run one
  // eager forward on the stream, and try once more.
  c10::cuda::CUDACachingAllocator::emptyCache();
  if (warmUp) {
    c10::cuda::CUDAStreamGuard streamGuard(side);
    warmUp();
    side.synchronize();
  }
  capture.failure.clear();
  capture.runner = tryCapture(forward, device, side, threadLocal, &capture.failure);
  return capture;
}

bool captureWithoutReplay(const std::function<void()>& forward, c10::Device device,
                          c10::Stream stream, bool threadLocal, std::string* failure) {
  const std::unique_lock<std::mutex> turn = captureTurn(threadLocal);
  c10::cuda::CUDAGuard deviceGuard(device);
  c10::cuda::CUDAStream side(stream);
  side.synchronize();
  at::cuda::CUDAGraph graph(/*keep_graph=*/true);  // capture_end instantiates nothing
  c10::cuda::CUDAStreamGuard streamGuard(side);
  graph.capture_begin({0, 0}, captureMode(threadLocal));
  try {
    forward();
  } catch (const std::exception& e) {
    try {
      graph.capture_end();
    } catch (...) {
      // capture is invalid after a failure inside it; capture_end reports that too
    }
    (void)cudaGetLastError();
    *failure = e.what();
    return false;
  }
  graph.capture_end();
  return true;
}

SharedCaptureMode::SharedCaptureMode(bool on) : on_(on) {
  if (on_) {
    auto mode = cudaStreamCaptureModeThreadLocal;
    C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    previous_ = static_cast<int>(mode);
  }
}

SharedCaptureMode::~SharedCaptureMode() {
  if (on_) {
    auto mode = static_cast<cudaStreamCaptureMode>(previous_);
    C10_CUDA_CHECK_WARN(cudaThreadExchangeStreamCaptureMode(&mode));
  }
}

}  // namespace torchutil::cuda
