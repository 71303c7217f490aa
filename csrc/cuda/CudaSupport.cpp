#include "cuda/CudaSupport.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

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

// One capture attempt: the runner, or the message of the forward's failure during capture.
std::unique_ptr<GraphRunner> tryCapture(Forward& forward, const std::vector<at::Tensor>& inputs,
                                        c10::Device device, c10::cuda::CUDAStream side,
                                        std::string* failure) {
  auto runner = std::make_unique<GraphRunner>(device, side);
  c10::cuda::CUDAStreamGuard streamGuard(side);
  runner->graph().capture_begin();
  try {
    forward.run(inputs);
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

// Captures on `side`, which has run the forward before; on failure frees the allocator's cache
// and tries once more.
std::unique_ptr<Runner> captureOn(Forward& forward, const std::vector<at::Tensor>& inputs,
                                  c10::Device device, c10::cuda::CUDAStream side) {
  std::string failure;
  if (auto runner = tryCapture(forward, inputs, device, side, &failure)) {
    return runner;
  }
  // A destroyed graph's private memory pool stays cached until the allocator frees cached
  // blocks, which it cannot do while capturing: after some thousand profiles of one network
  // (a NAS sweep on an H200 failed every capture from the 2,068th cell on) the next capture
  // runs out of memory. Free the cache once and try again.
  c10::cuda::CUDACachingAllocator::emptyCache();
  if (auto runner = tryCapture(forward, inputs, device, side, &failure)) {
    return runner;
  }
  TORCH_CHECK(false,
              "torchutil: the model could not be captured in a CUDA graph; its forward "
              "failed during capture: ",
              failure);
}

}  // namespace

std::unique_ptr<Runner> captureGraph(Forward& forward, const std::vector<at::Tensor>& inputs,
                                     c10::Device device, c10::Stream warmed) {
  c10::cuda::CUDAGuard deviceGuard(device);
  c10::cuda::CUDAStream side(warmed);
  side.synchronize();
  return captureOn(forward, inputs, device, side);
}

}  // namespace torchutil::cuda
