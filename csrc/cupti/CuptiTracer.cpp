#include "cupti/CuptiTracer.h"

#include <c10/util/Exception.h>
#include <cupti.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <cstdlib>
#include <ctime>
#include <mutex>
#include <utility>

#include "cupti/ActivityDecoder.h"

// Every CUPTI call goes through this: it names the call and CUPTI's own message.
#define TORCHUTIL_CUPTI_CALL(call)                                                     \
  do {                                                                                 \
    CUptiResult status_ = (call);                                                      \
    if (status_ != CUPTI_SUCCESS) {                                                    \
      const char* msg_ = nullptr;                                                      \
      cuptiGetResultString(status_, &msg_);                                            \
      TORCH_CHECK(false, "torchutil: CUPTI call ", #call, " failed: ",                 \
                  msg_ != nullptr ? msg_ : "unknown error");                           \
    }                                                                                  \
  } while (0)

namespace torchutil::cupti {
namespace {

constexpr size_t kBufferBytes = 4 * 1024 * 1024;
// Recorded for the whole trace.
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
// Recorded while correlating (the counted forward): CUPTI emits external-correlation records
// only for API calls it traces, so the runtime and driver APIs are on too (their own records
// are dropped). Off for the timed forwards, where they would only add launch overhead.
constexpr CUpti_ActivityKind kCorrelationKinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME,
                                                    CUPTI_ACTIVITY_KIND_DRIVER,
                                                    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

// CUPTI's default clock on Linux is CLOCK_REALTIME in nanoseconds. Kineto (torch.profiler)
// registers its own, a TSC-based approximate time in other units, and leaves it registered;
// a trace after torch.profiler would then read durations in TSC ticks. So every trace sets the
// default clock back (Kineto registers its own again whenever it starts).
uint64_t CUPTIAPI realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// What the buffer callbacks fill. CUPTI calls them from its own thread or from the flushing
// thread, so everything here is under the mutex.
struct Records {
  std::mutex mutex;
  bool tracing = false;  // a CuptiTracer is alive
  DecodedActivity activity;
};

Records& records() {
  static Records r;
  return r;
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *maxNumRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t /*size*/,
                              size_t validSize) {
  DecodedActivity batch;
  CUpti_Activity* record = nullptr;
  while (validSize > 0 &&
         cuptiActivityGetNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
    batch.add(*record);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, streamId, &dropped) == CUPTI_SUCCESS) {
    batch.dropped = dropped;
  }
  std::free(buffer);
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  if (rec.tracing) {  // else a late buffer of a finished trace
    rec.activity.append(std::move(batch));
  }
}

}  // namespace

std::string CuptiTracer::unavailableReason() {
  if (torch::profiler::impl::profilerEnabled() ||
      torch::autograd::profiler::isProfilerEnabledInMainThread()) {
    return "torch.profiler is running; CUPTI serves one client at a time, so this profile "
           "reports FLOPs and event timing without kernel records";
  }
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  if (rec.tracing) {
    return "another torchutil profile is tracing kernels in this process";
  }
  return "";
}

CuptiTracer::CuptiTracer() {
  Records& rec = records();
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    TORCH_CHECK(!rec.tracing, "torchutil: another torchutil profile is tracing kernels in this "
                "process");
    rec.tracing = true;
    rec.activity = DecodedActivity();
  }
  active_ = true;
  try {
    TORCHUTIL_CUPTI_CALL(cuptiActivityRegisterTimestampCallback(realtimeNs));
    TORCHUTIL_CUPTI_CALL(cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted));
    for (CUpti_ActivityKind kind : kKinds) {
      TORCHUTIL_CUPTI_CALL(cuptiActivityEnable(kind));
    }
    for (CUpti_ActivityKind kind : kCorrelationKinds) {
      TORCHUTIL_CUPTI_CALL(cuptiActivityEnable(kind));
    }
  } catch (...) {
    release();
    throw;
  }
}

CuptiTracer::~CuptiTracer() {
  release();
}

void CuptiTracer::release() noexcept {
  if (!active_) {
    return;
  }
  active_ = false;
  for (CUpti_ActivityKind kind : kKinds) {
    cuptiActivityDisable(kind);  // best effort: a kind that was never enabled reports an error
  }
  for (CUpti_ActivityKind kind : kCorrelationKinds) {
    cuptiActivityDisable(kind);
  }
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  rec.tracing = false;
  rec.activity = DecodedActivity();
}

void CuptiTracer::stopCorrelating() {
  for (CUpti_ActivityKind kind : kCorrelationKinds) {
    TORCHUTIL_CUPTI_CALL(cuptiActivityDisable(kind));
  }
}

void CuptiTracer::flush() {
  TORCHUTIL_CUPTI_CALL(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
}

std::vector<KernelRecord> CuptiTracer::takeKernels() {
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  return std::exchange(rec.activity.kernels, {});
}

std::unordered_map<uint32_t, uint64_t> CuptiTracer::takeExternalIds() {
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  return std::exchange(rec.activity.externalIds, {});
}

uint64_t CuptiTracer::droppedRecords() const {
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  return rec.activity.dropped;
}

uint64_t CuptiTracer::timestamp() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

void CuptiTracer::pushExternalId(uint64_t id) {
  cuptiActivityPushExternalCorrelationId(kExternalKind, id);
}

void CuptiTracer::popExternalId() {
  uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(kExternalKind, &last);
}

}  // namespace torchutil::cupti
