#pragma once
// The profile of one model on one input, in named phases (warm-up, count, capture, trace, time,
// counters, assemble; see docs/architecture.md), and the summary. Shared by the ops in
// ops/ProfileOps.cpp, whose options table (ops/ProfileArgs.h) fills ProfileOptions.
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
#include "libtorch/EnergyReading.h"
#include "libtorch/Timing.h"

namespace torchutil {

// The defaults here are ops/ProfileArgs.h's, which the ops and Python use.
struct ProfileOptions {
  // Forwards before the timed ones, the counted one among them (at most kMaxIters).
  int64_t warmup = 3;
  // The timed forwards: iters (minIters), and with a target interval, up to maxIters or the
  // time budget.
  RepeatPolicy repeat;
  // nullopt (the default): Auto on CUDA (CUDA-graph replays where the forward captures), eager
  // elsewhere. An explicit Auto that times eagerly says why in timing_note.
  std::optional<TimingMode> timing;
  RateSource peak = RateSource::Auto;
  std::optional<double> peakFlops;
  // The batch the figures are per; nullopt: the first input's first dimension (which must then
  // be unambiguous: a tensor of two or more dimensions).
  std::optional<int64_t> batchSize;
  bool trace = true;  // record GPU kernels with CUPTI (CUDA only)
  // Forwards traced after the counted one (untimed; the timed forwards run without CUPTI).
  int64_t traceForwards = 1;
  bool chromeTrace = false;  // also build the Chrome trace JSON
  // Name the module of every op during the counted forward (an eager module's forwards wrapped,
  // other roots' global module hooks: csrc/python; about 0.4 ms a resnet50 forward on an H200
  // host, benchmarks/module_path_cost.py), which the summary-only op goes without.
  bool modulePaths = true;
  // Hardware counters (counters=...; none by default): range-profiler passes after the timed
  // forwards (flops, throughput) and PM sampling over the traced forwards, else over forwards
  // after the timed ones (timeline).
  std::vector<hw::CounterSet> counters;
  uint64_t pmIntervalNs = 10000;
  hw::Replay counterReplay = hw::Replay::User;  // how the range profiler gets its passes
  // A lock file that every phase running work on the GPU holds (flock), so that processes, or
  // threads of one, sharing one GPU time their forwards one at a time; the host-only capture of
  // an untraced graph profile runs without it, in thread-local capture mode.
  std::optional<std::string> gpuLock;
  // Energy per forward (energy=True): windows of the forwards as they were timed (graph replays
  // or eager), run after the timed ones and aligned to the counter's updates, energy_window
  // seconds in all (libtorch/EnergyReading.h).
  bool energy = false;
  EnergyPlan energyPlan;
  // The tracer, counter profilers and energy counter (null, or a null member: CUPTI's, NVML's
  // and RAPL's, or what a build without them says). Tests pass fakes
  // (tests/cpp/FakeTraceBackend.h, tests/cpp/FakeCounterBackend.h).
  const HardwareBackends* backends = nullptr;
};

// Steady-clock seconds of each phase of one call (the phase_* summary fields).
struct PhaseSeconds {
  double warmup = 0, count = 0, capture = 0, trace = 0, time = 0, counters = 0, energy = 0,
         wait = 0, assemble = 0, call = 0;
};

struct ProfileOutput {
  std::vector<double> summary;  // Field order (core/Metrics.h)
  CountTable table;
  Peak peak;
  Bandwidth bandwidth;
  std::string timingMode;
  std::string timingNote;        // why timing="auto" timed eagerly, one line
  std::string timingNoteDetail;  // the whole error behind it (a failed capture's traceback)
  std::string repetition;        // how many timed forwards, and why that many
  std::string device;
  // Why the FLOPs are NaN (Forward::Unseen::uncounted), "" when they are counted.
  std::string flopsNote;
  // Kernel tracing: traceStatus is "on" or "off: <why>"; the rest is empty when off (events:
  // but on a CPU, whose op calls are timed).
  std::string traceStatus = "off: not a CUDA profile";
  bool traced = false;
  TraceStats trace;
  std::vector<OpEvent> events;
  std::vector<KernelRecord> kernels;  // counted forward first, then the timed forwards
  std::vector<GeneratedKernelRow>
      generated;  // kernels Inductor generated (KernelRecord::generated)
  // On a CPU: each op row's wall time in the counted forward (core/OpTimes.h), else empty.
  std::vector<OpKernelStats> cpuOpTimes;
  std::string chromeTrace;
  // Hardware counters: what was read, matched to kernels and ops, and the status.
  hw::HwResult hw;
  std::string countersStatus = "off";
  std::string countersNotOnGpu;  // metrics asked for that this GPU has no counter for
  EnergyOutput energy;           // energy=True: joules per forward and where they came from
  PhaseSeconds phases;
};

// The result by name, for Python (util.ProfileOutput): summary, tables and texts.
// tables=false: the summary and the texts only; nameTables adds the op, kernel and unknown-op
// tables (hundreds of kernel rows: built when a caller first reads one).
NamedResult nameResult(const ProfileOutput& out, bool tables = true);
void nameTables(const ProfileOutput& out, NamedResult* r);

ProfileOutput profileModel(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
                           const ProfileOptions& options);

// Builds the output of a count that the caller timed itself (torchutil.Profiler).
ProfileOutput summarizeCount(CountTable table, c10::Device device, int64_t batchSize,
                             double seconds, RateSource peakSource,
                             std::optional<double> peakFlops);

}  // namespace torchutil
