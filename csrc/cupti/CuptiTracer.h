#pragma once
// CUPTI Activity API behind a small interface: kernel, memcpy and memset records, and external
// correlation (which torchutil op launched each kernel). Built only with TORCHUTIL_WITH_CUPTI.
//
// CUPTI delivers activity buffers to one set of callbacks per process, so one tracer runs at a
// time in a process; torch.profiler (Kineto) registers its own callbacks each time it starts,
// so it keeps working after a torchutil trace.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/KernelTrace.h"

namespace torchutil::cupti {

class CuptiTracer {
 public:
  // Why a trace cannot start now, or "" when it can: torch.profiler is running, or another
  // torchutil trace is running in this process.
  static std::string unavailableReason();

  // Enables kernel, memcpy, memset and external-correlation records, with CUPTI's default clock
  // (CLOCK_REALTIME, ns) for their timestamps. Throws c10::Error naming
  // the CUPTI call and CUPTI's message when CUPTI refuses (another tool owns it, say); nothing
  // stays enabled then.
  CuptiTracer();
  // Disables what the constructor enabled and flushes; never throws: a CUPTI error there is a
  // one-time warning.
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // Ends the correlation of API calls to external ids (the runtime/driver API records it needs
  // cost launch time); kernel records go on.
  void stopCorrelating();
  // Flushes every buffer (the caller has synchronized the device) and returns all records so far.
  void flush();
  std::vector<KernelRecord> takeKernels();
  std::unordered_map<uint32_t, uint64_t> takeExternalIds();
  uint64_t droppedRecords() const;

  // CUPTI's clock, the one kernel records use (nanoseconds).
  static uint64_t timestamp();
  // Marks the CUDA calls of this thread with an external id until the matching pop. A CUPTI
  // error is a one-time warning (the kernels then go unattributed), not an exception.
  static void pushExternalId(uint64_t id);
  static void popExternalId();

 private:
  void release() noexcept;

  bool active_ = false;  // this tracer owns the process's trace (records())
  // CUpti_ActivityKind values enabled and not disabled yet: release() disables exactly these.
  std::vector<uint32_t> enabledKinds_;
};

}  // namespace torchutil::cupti
