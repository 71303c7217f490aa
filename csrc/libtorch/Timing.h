#pragma once
// Runs and times forwards: a steady clock on the CPU, device events on accelerators (one pair
// per forward, read after one synchronization per batch), eager or as CUDA-graph replays, a
// fixed count or adaptive repetition (core/Repetition.h). The profile (libtorch/Profile.cpp)
// decides what runs when; this file only knows how.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ProfilePlan.h"
#include "core/Repetition.h"
#include "libtorch/Devices.h"
#include "libtorch/Forward.h"

namespace torchutil {

// TimingMode (core/ProfilePlan.h) by name; c10::ValueError listing the names for another.
TimingMode parseTimingMode(std::string_view name);

// Whether this build captures CUDA graphs (TORCHUTIL_WITH_CUDA).
bool cudaGraphsBuilt();

// One forward, or one replay of a captured forward.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual void run() = 0;
  // The stream its work goes to (events are recorded there); nullopt on the CPU.
  virtual std::optional<c10::Stream> stream() = 0;
};

// The model's forward on fixed inputs, launched from the host each time.
std::unique_ptr<Runner> eagerRunner(Forward& forward, const std::vector<at::Tensor>& inputs,
                                    c10::Device device);

// Graph timing captures on a side stream (capture cannot run on the legacy default stream). A
// profile runs its warm-ups and its counted forward on this stream, so that lazy
// initialization (cuDNN/cuBLAS handles and workspaces) happens before the capture. nullopt
// unless `mode` may capture on `device`; the stream waits for the work queued so far on the
// current one (the inputs). keepPools (TORCHUTIL_KEEP_CAPTURE_POOL, on unless =0): the thread's
// kept capture stream (cuda::keptCaptureStream), else one from torch's pool, round robin.
std::optional<c10::Stream> captureStream(c10::Device device, TimingMode mode, bool keepPools);

// A captured forward, or why it could not be captured.
struct Capture {
  std::unique_ptr<Runner> runner;  // replays the graph; null when the capture failed
  std::string failure;             // the forward's error during capture
};

// Captures forward() (one forward of the model; the caller may count it) on `stream`
// (captureStream()). When the capture fails it frees the allocator's cache, runs warmUp() once
// on the stream (may be null: an eager forward outside the graph, for lazy initialization the
// caller's warm-ups did not do) and tries once more. threadLocal: the capture lets the
// process's other threads make CUDA calls meanwhile (cuda::captureGraph). keepPools: the
// thread's kept memory pool, else a private one per capture. Throws c10::Error without CUDA in
// the build.
Capture captureForward(const std::function<void()>& forward, const std::function<void()>& warmUp,
                       c10::Device device, c10::Stream stream, bool threadLocal, bool keepPools);

// Captures forward() on `stream` into a graph never replayed (cuda::captureWithoutReplay):
// false with *failure when it fails. Throws c10::Error without CUDA in the build.
bool captureWithoutReplay(const std::function<void()>& forward, c10::Device device,
                          c10::Stream stream, bool threadLocal, bool keepPools,
                          std::string* failure);

// Gives back the memory pools this thread's captures keep between calls (unless
// TORCHUTIL_KEEP_CAPTURE_POOL=0: cuda::freeCapturePools); nothing without CUDA in the build.
void freeCapturePools();

// For the life of the handle (on: a gpu_lock, other threads of the process may share the GPU),
// this thread's CUDA calls stay legal while another thread captures (cuda::SharedCaptureMode),
// captures with threadLocal may run beside other threads' captures, and synchronizeDevice waits
// for this thread's streams only (ThreadStreams). Null when off or without CUDA in the build.
std::shared_ptr<void> shareCapturesWithThreads(bool on);

// n forwards, untimed, then waits for the device.
void runForwards(Runner& runner, c10::Device device, int64_t n);

// The timed forwards under policy (checked by repeatTimed). idleBeforeUs
// (TORCHUTIL_IDLE_BEFORE_TIMING_US, a diagnostic switch of benchmarks/gpu/run_gpu.sh sweeplevel;
// 0 by default): on a device, the host sleeps this many microseconds between the
// synchronization before a batch of timed forwards and the first of them, so that they start on
// an idle device.
RepeatResult timeForwards(Runner& runner, c10::Device device, const RepeatPolicy& policy,
                          int64_t idleBeforeUs = 0);

}  // namespace torchutil
