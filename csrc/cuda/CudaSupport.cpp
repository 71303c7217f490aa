#include "cuda/CudaSupport.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

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
  char busId[32] = {};
  C10_CUDA_CHECK(cudaDeviceGetPCIBusId(busId, sizeof(busId), index));
  info.pciBusId = busId;
  known.emplace(index, info);
  return info;
}

namespace {

// torch 2.11 does not guard a graph's registration with the CUDA generator's state against
// threads: capture_begin inserts the graph into an unordered set, capture_end updates the
// state and ~CUDAGraph erases the graph. Every capture_begin, capture_end and graph destruction
// here takes this lock, so that threads sharing the GPU may capture side by side.
std::mutex& graphBookkeeping() {
  static std::mutex mutex;
  return mutex;
}

// Captures of threads sharing the GPU run side by side (their forwards' Python takes turns at
// the GIL; their launches, counting and instantiation need not). A retry takes the gate alone:
// it frees the allocator's cache, which must not run beside another capture.
std::shared_mutex& captureGate() {
  static std::shared_mutex mutex;
  return mutex;
}

// A graph kept as a template after its capture (keep_graph: capture_end instantiates nothing,
// instantiate() may, outside graphBookkeeping()), destroyed under graphBookkeeping().
class KeptGraph {
 public:
  KeptGraph() : graph_(std::make_unique<at::cuda::CUDAGraph>(/*keep_graph=*/true)) {}
  ~KeptGraph() {
    const std::lock_guard<std::mutex> lock(graphBookkeeping());
    graph_.reset();
  }
  KeptGraph(const KeptGraph&) = delete;
  KeptGraph& operator=(const KeptGraph&) = delete;
  at::cuda::CUDAGraph& operator*() { return *graph_; }

 private:
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
};

class GraphReplay final : public CapturedGraph {
 public:
  explicit GraphReplay(c10::cuda::CUDAStream side) : side_(side) {}

  at::cuda::CUDAGraph& graph() { return *graph_; }
  void replay() override {
    c10::cuda::CUDAStreamGuard streamGuard(side_);
    (*graph_).replay();
  }
  c10::Stream stream() const override { return side_.unwrap(); }

 private:
  c10::cuda::CUDAStream side_;
  KeptGraph graph_;
};

cudaStreamCaptureMode captureMode(bool threadLocal) {
  return threadLocal ? cudaStreamCaptureModeThreadLocal : cudaStreamCaptureModeGlobal;
}

// torch 2.11's capture_end throws on a failed capture before it ends the CUDA generator's
// capture (capture_epilogue), and the default generator then refuses every later random op
// outside a capture ("Offset increment outside graph capture encountered unexpectedly": seen on
// an H200 in every test after a forward that synchronized inside its capture) until a capture
// succeeds. One small capture that succeeds ends it; torch versions that keep a generator state
// per capture are left as they are by it.
void endGeneratorCapture(bool threadLocal) {
  try {
    // One memset node on a byte allocated before the capture (the graph is never replayed):
    // nothing between capture_begin and capture_end can throw.
    const c10::DeviceIndex device = c10::cuda::current_device();
    const at::Tensor byte =
        at::empty({1}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device));
    KeptGraph heal;
    {
      const std::lock_guard<std::mutex> lock(graphBookkeeping());
      (*heal).capture_begin({0, 0}, captureMode(threadLocal));
    }
    (void)cudaMemsetAsync(byte.data_ptr(), 0, 1, c10::cuda::getCurrentCUDAStream(device).stream());
    const std::lock_guard<std::mutex> lock(graphBookkeeping());
    (*heal).capture_end();
  } catch (...) {
    (void)cudaGetLastError();  // nothing more can be done here; the next capture may end it
  }
}

// Captures forward() into `graph` on the current stream, allocating from `pool` (a private one
// when {0, 0}): true, or false with *failure (the forward's error) and the CUDA state cleaned up
// as far as torch lets it be.
bool captureInto(at::cuda::CUDAGraph& graph, const std::function<void()>& forward, bool threadLocal,
                 std::string* failure, at::cuda::MempoolId_t pool = {0, 0}) {
  {
    const std::lock_guard<std::mutex> lock(graphBookkeeping());
    graph.capture_begin(pool, captureMode(threadLocal));
  }
  try {
    forward();
  } catch (const std::exception& e) {
    try {
      const std::lock_guard<std::mutex> lock(graphBookkeeping());
      graph.capture_end();
    } catch (...) {
      // capture is invalid after a failure inside it; capture_end reports that too (before it
      // ends the allocator's routing into the pool: a kept pool is dropped then, captureFailed)
    }
    (void)cudaGetLastError();  // the failed capture's error must not reach the next call
    *failure = e.what();
    endGeneratorCapture(threadLocal);
    return false;
  }
  const std::lock_guard<std::mutex> lock(graphBookkeeping());
  graph.capture_end();
  return true;
}

// The memory pool a thread's captures on one device allocate from, kept between captures (on
// by default; TORCHUTIL_KEEP_CAPTURE_POOL=0: every capture takes a private pool of its own, as
// torch's do). A capture in a fresh private pool makes new segments
// for every activation (cudaMalloc: 1 ms of a resnet50 b1 capture's 6 on an H200 host,
// benchmarks/capture_cycle_cost.py), and the destroyed graph's pool stays in the allocator's
// cache until it is emptied. Here a one-op graph, captured into the pool and never replayed,
// keeps the pool alive, so each capture takes the blocks of the graph before it. The allocator
// reuses a free block only on the stream it was allocated on, so the thread also keeps one
// capture stream per device (keptCaptureStream): the pool then holds the largest forward
// captured on the thread, no more. Sharing is safe because a thread's graphs never live side by
// side: a profile destroys its graph before it returns (and a failed capture's before the
// retry), and profiles on one thread do not nest. Threads keep their own pools and streams,
// since their graphs replay at once.
class CapturePool {
 public:
  // Captures the keeper on the current stream (a side stream); id() is {0, 0} (a private pool
  // per capture) when that fails, for the thread's life.
  explicit CapturePool(c10::DeviceIndex device, bool threadLocal) {
    const at::cuda::MempoolId_t id = at::cuda::graph_pool_handle();
    std::string failure;
    // One byte from the pool and a memset node (a kernel might be loaded lazily, in the capture).
    const auto touch = [device] {
      const at::Tensor byte =
          at::empty({1}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device));
      C10_CUDA_CHECK(
          cudaMemsetAsync(byte.data_ptr(), 0, 1, c10::cuda::getCurrentCUDAStream(device).stream()));
    };
    if (captureInto(*keeper_, touch, threadLocal, &failure, id)) {
      id_ = id;
    }
  }
  at::cuda::MempoolId_t id() const { return id_; }

 private:
  KeptGraph keeper_;
  at::cuda::MempoolId_t id_{0, 0};
};

std::map<c10::DeviceIndex, std::unique_ptr<CapturePool>>& threadPools() {
  thread_local std::map<c10::DeviceIndex, std::unique_ptr<CapturePool>> pools;
  return pools;
}

// Set when a capture of the thread fails, until freeCapturePools(): its captures then take a
// private pool each, as torch's do. A failed capture leaves state behind in torch 2.11 that a
// later capture into the same pool trips over (capture_end throws before it ends the allocator's
// routing into the pool: "beginAllocateToPool: already recording to mempool_id"; ending the
// routing by hand did not cure it on an H200, device call 5 of 2026-12-02's eighth session), so
// the failed pool is dropped and none is kept after it.
bool& poolsOff() {
  thread_local bool off = false;
  return off;
}

// keepPools: TORCHUTIL_KEEP_CAPTURE_POOL (on unless =0), read with the call's options.
at::cuda::MempoolId_t capturePool(c10::DeviceIndex device, bool threadLocal, bool keepPools) {
  if (!keepPools || poolsOff()) {
    return {0, 0};
  }
  std::unique_ptr<CapturePool>& pool = threadPools()[device];
  if (!pool) {
    pool = std::make_unique<CapturePool>(device, threadLocal);
  }
  return pool->id();
}

void captureFailed(c10::DeviceIndex device) {
  threadPools().erase(device);
  poolsOff() = true;
}

// One capture attempt: the runner (its graph instantiated), or null with *failure. Threads
// sharing the GPU upload the graph now, on the stream (a copy of its launch data, no kernel),
// so that the first replay under the gpu_lock does not leave the GPU idle while it uploads.
std::unique_ptr<GraphReplay> tryCapture(const std::function<void()>& forward,
                                        c10::cuda::CUDAStream side, bool threadLocal,
                                        bool keepPools, std::string* failure) {
  auto runner = std::make_unique<GraphReplay>(side);
  c10::cuda::CUDAStreamGuard streamGuard(side);
  const at::cuda::MempoolId_t pool = capturePool(side.device_index(), threadLocal, keepPools);
  if (!captureInto(runner->graph(), forward, threadLocal, failure, pool)) {
    captureFailed(side.device_index());
    return nullptr;
  }
  runner->graph().instantiate();
  if (threadLocal) {
    C10_CUDA_CHECK(cudaGraphUpload(runner->graph().raw_cuda_graph_exec(), side.stream()));
  }
  return runner;
}

}  // namespace

GraphCapture captureGraph(const std::function<void()>& forward, const std::function<void()>& warmUp,
                          c10::Device device, c10::Stream stream, bool threadLocal,
                          bool keepPools) {
  c10::cuda::CUDAGuard deviceGuard(device);
  c10::cuda::CUDAStream side(stream);
  side.synchronize();
  GraphCapture capture;
  {
    const std::shared_lock<std::shared_mutex> beside(captureGate());
    if ((capture.graph = tryCapture(forward, side, threadLocal, keepPools, &capture.failure))) {
      return capture;
    }
  }
  // A destroyed graph's private memory pool stays cached until the allocator frees cached
  // blocks, which it cannot do while capturing: after some thousand profiles of one network
  // (a NAS sweep on an H200 failed every capture from the 2,068th cell on) the next capture
  // runs out of memory. A forward never run before may also initialize lazily (a library
  // handle, a workspace) inside the capture, which capture forbids. So: free the cache, run one
  // eager forward on the stream, and try once more.
  // (warmUp() may wait for a gpu_lock, whose holder may wait for the gate: not under it.)
  {
    const std::unique_lock<std::shared_mutex> alone(captureGate());
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
  if (warmUp) {
    c10::cuda::CUDAStreamGuard streamGuard(side);
    warmUp();
    side.synchronize();
  }
  capture.failure.clear();
  const std::shared_lock<std::shared_mutex> beside(captureGate());
  capture.graph = tryCapture(forward, side, threadLocal, keepPools, &capture.failure);
  return capture;
}

bool captureWithoutReplay(const std::function<void()>& forward, c10::Device device,
                          c10::Stream stream, bool threadLocal, bool keepPools,
                          std::string* failure) {
  const std::shared_lock<std::shared_mutex> beside(captureGate());
  c10::cuda::CUDAGuard deviceGuard(device);
  c10::cuda::CUDAStream side(stream);
  side.synchronize();
  c10::cuda::CUDAStreamGuard streamGuard(side);
  const at::cuda::MempoolId_t pool = capturePool(side.device_index(), threadLocal, keepPools);
  KeptGraph graph;  // never instantiated
  if (captureInto(*graph, forward, threadLocal, failure, pool)) {
    return true;
  }
  captureFailed(side.device_index());
  return false;
}

c10::Stream keptCaptureStream(c10::Device device) {
  thread_local std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  auto it = streams.find(device.index());
  if (it == streams.end()) {
    it = streams.emplace(device.index(), c10::cuda::getStreamFromPool(false, device.index())).first;
  }
  return it->second.unwrap();
}

void freeCapturePools() {
  const std::unique_lock<std::shared_mutex> alone(captureGate());
  threadPools().clear();
  poolsOff() = false;
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
