#pragma once
// The profile of one model on one input, in named phases (warm-up, count, capture, trace, time,
// counters, assemble; see docs/architecture.md), and the summary. Shared by the ops in
// ops/ProfileOps.cpp, whose options (core/Options.h, read by ops/ProfileArgs.h) fill
// ProfileOptions.
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
#include "core/Options.h"
#include "core/ResultSchema.h"
#include "libtorch/DeviceBandwidth.h"
#include "libtorch/DevicePeak.h"
#include "libtorch/EnergyReading.h"
#include "libtorch/Forward.h"
#include "libtorch/Timing.h"

namespace torchutil {

// The options of one call, parsed and checked once (core/Options.h: ProfileConfig, whose
// defaults are the options table's), and the hardware the run uses.
struct ProfileOptions : ProfileConfig {
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
  ModelFacts model;  // the model, params and params_note fields
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

// Builds the output of a count that the caller timed itself (torchutil.Profiler); model: what
// the result says of the model the caller named, if any.
ProfileOutput summarizeCount(CountTable table, c10::Device device, int64_t batchSize,
                             double seconds, RateSource peakSource, std::optional<double> peakFlops,
                             ModelFacts model);

}  // namespace torchutil
