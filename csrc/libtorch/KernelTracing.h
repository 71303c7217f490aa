#pragma once
// Kernel tracing for one profile: activity records around the counted forward (attributed to
// ops through external correlation) and the traced forwards after it, from a TraceBackend
// (CUPTI by default: libtorch/HardwareBackends.h). Where the backend cannot trace (no CUDA
// device, a build without CUPTI, torch.profiler running), start() says why and the profile runs
// without kernel records.
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/HardwareBackends.h"
#include "core/KernelTrace.h"
#include "libtorch/HardwareBackends.h"

namespace torchutil {

// How KernelTracing::finish tied the traced forwards' kernels to ops.
enum class TracedOps : uint8_t {
  ByPosition,    // they repeat the counted forward's sequence (or the capture's), and each took
                 // the op at its position
  CountedOnly,   // they do not repeat the counted forward's sequence: they keep no op, and the
                 // per-op kernel figures come from the counted forward's kernels
  ByGraphNodes,  // each through its graph node
  Unattributed,  // graph or capture nodes could not attribute them: `problem` says why
};

struct FinishedTrace {
  TracedOps ops = TracedOps::CountedOnly;
  std::string problem;
  // Whether the per-op kernel figures come from the traced forwards (else the counted one's).
  bool perOpFromTraced() const { return ops != TracedOps::CountedOnly; }
};

class KernelTracing {
 public:
  // Starts tracing on device, correlating the counted forward's launches as `how` says, or
  // returns null and sets *why (the backend's reason, or the refused call's sentence).
  // recordFromStart (TORCHUTIL_CUPTI_RECORD_CAPTURE=1, a measurement switch of
  // benchmarks/cost/trace_cost.py): a trace that would leave its records off until the traced
  // forwards (capture nodes) records from its start, through the capture, as the others do.
  static std::unique_ptr<KernelTracing> start(c10::Device device, std::string* why,
                                              TraceBackend& backend = traceBackend(),
                                              Correlation how = Correlation::Markers,
                                              bool recordFromStart = false);
  ~KernelTracing();
  KernelTracing(const KernelTracing&) = delete;
  KernelTracing& operator=(const KernelTracing&) = delete;

  // Hooks for the counted forward (op events and external correlation).
  const TraceHooks* hooks() const { return &hooks_; }
  // Correlation::CaptureNodes: the capture that counts begins on `stream`; the counted forward
  // inside it is done (still capturing). No-ops for the other correlations.
  void captureBegins(c10::Stream stream) { trace_->captureBegins(stream.native_handle()); }
  void captureEnds() { trace_->captureEnds(); }
  // The counted forward has been launched: waits for the device and marks the boundary.
  void countedDone();
  // The traced forwards start now (the device is idle).
  void timedStart();
  // Waits for the device, stops tracing, returns the records of the counted forward and of the
  // `forwards` traced forwards, and ties both to ops, as the correlation says: the counted
  // forward's through the external ids of their launches (markers, API records), the traced
  // ones by position against them; or, with Correlation::GraphNodes or CaptureNodes (no eager
  // counted forward: *counted stays empty), the traced replays through their graph nodes or
  // the captured sequence. This is where every kernel gets its op.
  FinishedTrace finish(std::vector<KernelRecord>* counted, std::vector<KernelRecord>* timed,
                       int64_t forwards);
  Correlation correlation() const { return how_; }
  // Records the backend dropped (buffers full); a non-zero count makes the figures incomplete.
  uint64_t dropped() const { return dropped_; }
  // Whether the backend detaches from the process when the trace ends (ActivityTrace).
  void detachWhenDone(bool detach) { trace_->detachWhenDone(detach); }

 private:
  KernelTracing(c10::Device device, TraceHooks hooks, Correlation how);

  c10::Device device_;
  Correlation how_;
  TraceHooks hooks_;
  std::unique_ptr<ActivityTrace> trace_;
  uint64_t begin_ = 0;
  uint64_t countedEnd_ = 0;
  uint64_t timedBegin_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace torchutil
