#pragma once
// The parts of torchutil that need the CUDA runtime. Built only when TORCHUTIL_WITH_CUDA is
// defined (torch has CUDA and the CUDA toolkit headers were found at build time). It knows
// torch's CUDA layer and nothing of torchutil's LibTorch layer, which calls it
// (libtorch/Timing.cpp turns a captured graph into a Runner).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torchutil::cuda {

struct DeviceInfo {
  std::string name;
  int major = 0;
  int minor = 0;
  int multiprocessors = 0;
  double clockHz = 0.0;               // maximum SM clock
  double memoryBytesPerSecond = 0.0;  // 2 x memory clock x bus width
  std::string pciBusId;               // "0000:19:00.0": names the device to NVML too
};

DeviceInfo deviceInfo(c10::DeviceIndex index);

// A captured forward: one replay at a time, on the stream it was captured on.
class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
  virtual void replay() = 0;
  virtual c10::Stream stream() const = 0;
};

// A captured forward, or why it could not be captured.
struct GraphCapture {
  std::unique_ptr<CapturedGraph> graph;  // null when the capture failed
  std::string failure;                   // the forward's error during capture
};

// Captures forward() in a CUDA graph on `stream`, a side stream (libtorch's captureStream()). A
// failed capture is retried once after freeing the allocator's cache and running warmUp() (if
// given) on the stream; a second failure is the Capture's failure, with the CUDA state cleaned up.
// threadLocal: capture in cudaStreamCaptureModeThreadLocal, where other threads of the process (in
// SharedCaptureMode) may make any CUDA call meanwhile (a sweep's threads sharing the GPU), their
// captures too, side by side; else in the global mode, which refuses them. See libtorch/Timing.h's
// captureForward. keepPools: allocate from the thread's pool kept between calls (else a private
// pool per capture: TORCHUTIL_KEEP_CAPTURE_POOL=0).
GraphCapture captureGraph(const std::function<void()>& forward, const std::function<void()>& warmUp,
                          c10::Device device, c10::Stream stream, bool threadLocal, bool keepPools);

// Captures forward() on `stream` into a graph that is never instantiated nor replayed (kept as
// a template and destroyed): for a forward whose capture only counts and lists its nodes. False
// with *failure (the forward's error) when the capture fails, with the CUDA state cleaned up.
// threadLocal and keepPools as captureGraph's.
bool captureWithoutReplay(const std::function<void()>& forward, c10::Device device,
                          c10::Stream stream, bool threadLocal, bool keepPools,
                          std::string* failure);

// The side stream this thread's captures on `device` (a concrete one) take every time while
// they keep their pool, so that its blocks are reused.
c10::Stream keptCaptureStream(c10::Device device);

// Gives back the memory pools this thread's captures keep between profiles (one per device: the
// largest forward captured on the thread); torch.cuda.empty_cache() then returns the memory to
// the driver. The next capture makes a new pool.
void freeCapturePools();

// While it lives (and is on), this thread's CUDA calls are refused only during its own captures
// (CUDA's thread-local interaction mode), not while another thread of the process captures: the
// default (global) mode refuses a synchronization whenever any thread captures in a mode other
// than relaxed. The thread's mode is restored after.
class SharedCaptureMode {
 public:
  explicit SharedCaptureMode(bool on);
  ~SharedCaptureMode();
  SharedCaptureMode(const SharedCaptureMode&) = delete;
  SharedCaptureMode& operator=(const SharedCaptureMode&) = delete;

 private:
  bool on_;
  int previous_ = 0;
};

}  // namespace torchutil::cuda
