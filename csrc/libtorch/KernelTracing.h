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

class KernelTracing {
 public:
  // Starts tracing on device, correlating the counted forward's launches as `how` says, or
  // returns null and sets *status to why not ("off: ...").
  static std::unique_ptr<KernelTracing> start(c10::Device device, std::string* status,
                                              TraceBackend& backend = traceBackend(),
                                              Correlation how = Correlation::Markers);
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
  // Waits for the device, stops tracing and returns the records of the counted forward
  // (attributed to op events) and of the `forwards` traced forwards. With
  // Correlation::GraphNodes or CaptureNodes there is no eager counted forward: *counted stays
  // empty, and the traced replays are attributed through their graph nodes or the captured
  // sequence; returns whether they were (else *problem says why). The other correlations
  // return false: attributeByPosition's turn.
  bool finish(std::vector<KernelRecord>* counted, std::vector<KernelRecord>* timed,
              int64_t forwards, std::string* problem);
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
