#pragma once
// Times forwards: a steady clock on the CPU, device events on accelerators (one pair per
// forward, read after one synchronization per batch), eager or as CUDA-graph replays, a fixed
// count or adaptive repetition (core/Repetition.h).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/Repetition.h"
#include "libtorch/Devices.h"
#include "libtorch/Forward.h"

namespace torchutil {

// Auto: CUDA-graph replays when the forward can be captured, else eager, saying why.
enum class TimingMode { Eager, CudaGraph, Auto };
const char* timingModeName(TimingMode m);  // "eager", "cuda_graph", "auto"
// Throws c10::ValueError naming the value for anything but the three names.
TimingMode parseTimingMode(std::string_view name);

// One forward, or one replay of a captured forward.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual void run() = 0;
  // The stream its work goes to (events are recorded there); nullopt on the CPU.
  virtual std::optional<c10::Stream> stream() = 0;
};

struct TimingPlan {
  TimingMode mode = TimingMode::Eager;
  // Replays of a captured graph before the timed ones (the first replay uploads the graph);
  // the last tracedForwards of them are the traced ones. Eager forwards are warm by then (the
  // caller ran its warm-ups before the counted forward).
  int64_t warmup = 0;
  // Forwards (replays) between beforeTraced and afterTraced, not timed.
  int64_t tracedForwards = 0;
  std::function<void()> beforeTraced;  // called with the device idle
  std::function<void()> afterTraced;   // called with the device idle
  // Forwards (replays) after the timed ones, between beforeSampled and afterSampled (called
  // with the device idle), not timed: the hardware counters' timeline when nothing is traced.
  int64_t sampledForwards = 0;
  std::function<void()> beforeSampled;
  std::function<void()> afterSampled;
  RepeatPolicy repeat;  // then the timed forwards
  // Graph timing (CudaGraph, Auto on CUDA): the stream of captureStream(), on which the caller
  // has run the forward at least once; the capture goes there.
  std::optional<c10::Stream> warmedStream;
};

// Graph timing captures on a side stream (capture cannot run on the legacy default stream) and
// needs one forward there first, so that lazy initialization (cuDNN/cuBLAS handles and
// workspaces, autotuning) stays out of the graph. A profile runs its warm-ups and its counted
// forward on this stream, which then are that forward. nullopt unless `mode` may capture on
// `device`; the stream waits for the work queued so far on the current one (the inputs).
std::optional<c10::Stream> captureStream(c10::Device device, TimingMode mode);

struct TimingResult {
  RepeatResult repeat;
  TimingMode used = TimingMode::Eager;  // Eager or CudaGraph
  std::string note;                     // why Auto timed eagerly; "" otherwise
};

TimingResult timeForwards(Forward& forward, const std::vector<at::Tensor>& inputs,
                          c10::Device device, const TimingPlan& plan);

}  // namespace torchutil
