#pragma once
// The profile of one model on one input: warm-up, one counted forward, timed forwards, peak,
// and the summary. Shared by the ops in ops/ProfileOps.cpp.
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

#include "core/CountSession.h"
#include "core/HardwareBackends.h"
#include "core/HwCounters.h"
#include "core/HwResult.h"
#include "core/KernelTrace.h"
#include "core/ResultSchema.h"
#include "libtorch/DeviceBandwidth.h"
#include "libtorch/DevicePeak.h"
#include "libtorch/Timing.h"

namespace torchutil {

struct ProfileOptions {
  int64_t warmup = 3;
  // The timed forwards: iters (minIters), and with a target interval, up to maxIters or the
  // time budget.
  RepeatPolicy repeat;
  TimingMode timing = TimingMode::Eager;
  RateSource peak = RateSource::Auto;
  std::optional<double> peakFlops;
  bool trace = true;  // record GPU kernels with CUPTI (CUDA only)
  // Forwards traced after the counted one (untimed; the timed forwards run without CUPTI).
  int64_t traceForwards = 1;
  bool chromeTrace = false;  // also build the Chrome trace JSON
  // Name the module of every op (Python module hooks during the counted forward; they cost
  // about a third of a forward at batch 1 on a GPU, so the summary-only op goes without).
  bool modulePaths = true;
  // Hardware counters (counters=...; none by default): range-profiler passes after the timed
  // forwards (flops, throughput) and PM sampling over the traced forwards, else over forwards
  // after the timed ones (timeline).
  std::vector<hw::CounterSet> counters;
  uint64_t pmIntervalNs = 10000;
  hw::Replay counterReplay = hw::Replay::User;  // how the range profiler gets its passes
  // The tracer and counter profilers (null, or a null member: CUPTI's, or what a build without
  // it says). Tests pass fakes (tests/cpp/FakeTraceBackend.h, tests/cpp/FakeCounterBackend.h).
  const HardwareBackends* backends = nullptr;
};

struct ProfileOutput {
  std::vector<double> summary;  // Field order (core/Metrics.h)
  CountTable table;
  Peak peak;
  Bandwidth bandwidth;
  std::string timingMode;
  std::string timingNote;  // why timing="auto" timed eagerly
  std::string repetition;  // how many timed forwards, and why that many
  std::string device;
  // Kernel tracing: traceStatus is "on" or "off: <why>"; the rest is empty when off.
  std::string traceStatus = "off: not a CUDA profile";
  bool traced = false;
  TraceStats trace;
  std::vector<OpEvent> events;
  std::vector<KernelRecord> kernels;  // counted forward first, then the timed forwards
  std::string chromeTrace;
  // Hardware counters: what was read, matched to kernels and ops, and the status.
  hw::HwResult hw;
  std::string countersStatus = "off";
  std::string countersNotOnGpu;  // metrics asked for that this GPU has no counter for
};

// The result by name, for Python (util.ProfileOutput): summary, tables and texts.
NamedResult nameResult(const ProfileOutput& out);

ProfileOutput profileModel(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
                           const ProfileOptions& options);

// Builds the output of a count that the caller timed itself (torchutil.Profiler).
ProfileOutput summarizeCount(CountTable table, c10::Device device, int64_t batchSize,
                             double seconds, RateSource peakSource,
                             std::optional<double> peakFlops);

}  // namespace torchutil
