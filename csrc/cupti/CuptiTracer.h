#pragma once
// CUPTI Activity API behind ActivityTrace (core/HardwareBackends.h): kernel, memcpy and memset
// records, and external correlation (which torchutil op launched each kernel). Built only with
// TORCHUTIL_WITH_CUPTI; torch-free (csrc/libtorch/HardwareBackends.cpp adds what torch knows:
// whether torch.profiler is running).
//
// CUPTI delivers activity buffers to one set of callbacks per process, so one tracer runs at a
// time in a process; torch.profiler (Kineto) registers its own callbacks each time it starts,
// so it keeps working after a torchutil trace.
//
// By correlation: the records and API records here (CuptiTracer.cpp), the op stack the markers,
// capture nodes and graph nodes keep in cupti/OpMarking.h (its CUDA calls: cupti/CudaMarking.h),
// the graph-node subscriber in CuptiGraphNodes.cpp.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <cupti.h>

#include "core/HardwareBackends.h"
#include "cupti/OpMarking.h"

namespace torchutil::cupti {

class CuptiTracer final : public ActivityTrace {
 public:
  // Why a trace cannot start now, or "" when it can: another torchutil trace is running in this
  // process.
  static std::string busyReason();

  // Enables kernel, memcpy and memset records, with CUPTI's default clock (CLOCK_REALTIME, ns)
  // for their timestamps, and correlates the launches of the counted forward as `how` says:
  // markers (a one-byte memset on a stream of the tracer's, kept for the process, at every
  // change of the innermost op, from the thread that started the trace) or external-correlation
  // and API records. Returns null and sets *why (the failed call and what it means) when CUPTI
  // refuses (another tool owns it, say); nothing stays enabled then.
  static std::unique_ptr<CuptiTracer> start(std::string* why, Correlation how);
  // Disables what start() enabled and flushes; never throws: a CUPTI error there is a one-time
  // warning.
  ~CuptiTracer() override;
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // Ends the correlation (the markers, or the runtime/driver API records, which cost launch
  // time); kernel records go on. Throws std::runtime_error when CUPTI fails.
  void stopCorrelating() override;
  // Flushes every buffer (the caller has synchronized the device); throws as stopCorrelating.
  void flush() override;
  std::vector<KernelRecord> takeKernels() override;
  std::unordered_map<uint32_t, uint64_t> takeExternalIds() override;
  GraphNodeOps takeGraphNodes() override;
  void captureBegins(void* stream) override;
  void captureEnds() override;
  CapturedForward takeCapturedForward() override;
  // CaptureNodes: enables the records (they stay off through the capture and the graph's warm-up
  // replays until this is called); throws as stopCorrelating.
  void recordFromNow() override;
  uint64_t dropped() const override;
  // CUPTI stays attached to the process after its activities are disabled, and the driver's API
  // calls keep paying for its hooks: on an H200, eager forwards ran 1.33-2.28x slower after one
  // trace with API records (benchmarks/trace_cost.py; Kineto saw the same,
  // pytorch/pytorch#146604), 0.99-1.10x with the markers (no API records). Detaching
  // (cuptiFinalize, the device idle and the buffers flushed, as it requires) costs the next
  // trace a fresh attach (about 20 ms there). The profile's plan decides
  // (TORCHUTIL_CUPTI_TEARDOWN=1, core/Options.h; off by default).
  void detachWhenDone(bool detach) override { detach_ = detach; }

  // The clock kernel records use while a trace runs (CLOCK_REALTIME, nanoseconds: every trace
  // registers it with CUPTI).
  static uint64_t timestamp();
  // Marks the CUDA calls of this thread with an external id until the matching pop. A CUPTI or
  // CUDA error is a one-time warning (the kernels then go unattributed), not an exception.
  static void pushExternalId(uint64_t id);
  static void popExternalId();

 private:
  CuptiTracer() = default;
  bool enable(std::string* why, Correlation how);
  // One per correlation: Markers (this file), GraphNodes (CuptiGraphNodes.cpp); CaptureNodes
  // needs only the marking; ApiRecords enables CUPTI's API and external-correlation records.
  bool startMarking(std::string* why);
  bool startGraphNodes(std::string* why);
  void unsubscribe() noexcept;
  void release() noexcept;
  // The process's op stack, which the hooks (plain functions) mark, and its CUDA calls.
  static OpMarking& marking();
  static void CUPTIAPI graphNodeCallback(void* userdata, CUpti_CallbackDomain domain,
                                         CUpti_CallbackId id, const void* data);

  bool active_ = false;                  // this tracer owns the process's trace (records())
  bool detach_ = false;                  // cuptiFinalize when it ends
  Correlation how_ = Correlation::None;  // what start() set up
  // CUpti_ActivityKind values enabled and not disabled yet: release() disables exactly these.
  std::vector<uint32_t> enabledKinds_;
  bool recordsDeferred_ = false;  // kKinds not enabled yet: recordFromNow() does
  // Correlation::Markers: the marker stream, and the ids the markers gave (takeKernels).
  MarkerStream markers_;
  std::unordered_map<uint32_t, uint64_t> markedIds_;
  // Correlation::GraphNodes: CUPTI's subscriber for the graph-node callbacks (while
  // correlating), and what they saw (takeGraphNodes).
  bool subscribed_ = false;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  GraphNodeOps graphNodeOps_;
};

}  // namespace torchutil::cupti
