#include "cuda/CudaSupport.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

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

std::vector<double> timeGraphReplays(Forward& forward, const std::vector<at::Tensor>& inputs,
                                     c10::Device device, int64_t warmup, int64_t iters,
                                     const std::function<void()>& beforeTimed) {
  c10::cuda::CUDAGuard deviceGuard(device);
  // Capture must not run on the legacy default stream; warm the side stream up first so that
  // lazy initialization (cuDNN/cuBLAS handles, autotuning) stays out of the graph.
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  {
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device.index()));
    ready.block(side);
  }
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard streamGuard(side);
    forward.run(inputs);
    side.synchronize();
    graph.capture_begin();
    try {
      forward.run(inputs);
    } catch (const std::exception& e) {
      try {
        graph.capture_end();
      } catch (...) {
        // capture is invalid after a failure inside it; capture_end reports that too
      }
      TORCH_CHECK(false, "torchutil: the model could not be captured in a CUDA graph "
                  "(cuda_graph=True); its forward failed during capture: ", e.what());
    }
    graph.capture_end();
  }
  c10::cuda::CUDAStreamGuard streamGuard(side);
  for (int64_t i = 0; i < warmup; ++i) {
    graph.replay();
  }
  if (beforeTimed) {
    side.synchronize();
    beforeTimed();
  }
  std::vector<at::cuda::CUDAEvent> starts, ends;
  starts.reserve(iters);
  ends.reserve(iters);
  for (int64_t i = 0; i < iters; ++i) {
    starts.emplace_back(cudaEventDefault);
    ends.emplace_back(cudaEventDefault);
  }
  for (int64_t i = 0; i < iters; ++i) {
    starts[i].record(side);
    graph.replay();
    ends[i].record(side);
  }
  side.synchronize();
  std::vector<double> seconds;
  seconds.reserve(iters);
  for (int64_t i = 0; i < iters; ++i) {
    seconds.push_back(starts[i].elapsed_time(ends[i]) / 1e3);
  }
  return seconds;
}

}  // namespace torchutil::cuda
