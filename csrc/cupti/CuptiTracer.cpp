#include "cupti/CuptiTracer.h"

#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "cupti/ActivityDecoder.h"
#include "cupti/CudaMarking.h"
#include "cupti/CuptiStatus.h"

namespace torchutil::cupti {
namespace {

constexpr size_t kBufferBytes = size_t{4} << 20;  // per activity buffer
constexpr size_t kBufferAlignment = 8;            // CUPTI's ACTIVITY_RECORD_ALIGNMENT
// Recorded for the whole trace.
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
// Recorded while correlating the counted forward with Correlation::ApiRecords: CUPTI emits
// external-correlation records only for API calls it traces, so the runtime and driver APIs are
// on too (their own records are dropped). Off for the timed forwards, where they would only add
// launch overhead.
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

// An activity buffer. CUPTI's callbacks pass buffers as raw pointers: bufferRequested releases
// one to CUPTI and bufferCompleted adopts it again at once, so every buffer is freed exactly
// once, on every path out of bufferCompleted.
struct FreeBuffer {
  void operator()(uint8_t* buffer) const noexcept { std::free(buffer); }
};
using Buffer = std::unique_ptr<uint8_t, FreeBuffer>;

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  Buffer owned(static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes)));
  *size = owned != nullptr ? kBufferBytes : 0;  // 0: CUPTI drops records and counts them
  *maxNumRecords = 0;
  *buffer = owned.release();
}

void CUPTIAPI bufferCompleted(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t /*size*/,
                              size_t validSize) {
  const Buffer owned(buffer);
  DecodedActivity batch;
  CUpti_Activity* record = nullptr;
  // Ends with CUPTI_ERROR_MAX_LIMIT_REACHED after the last record.
  while (validSize > 0 &&
         cuptiActivityGetNextRecord(owned.get(), validSize, &record) == CUPTI_SUCCESS) {
    batch.add(*record);
  }
  size_t dropped = 0;
  TORCHUTIL_CUPTI_WARN(cuptiActivityGetNumDroppedRecords(ctx, streamId, &dropped));
  batch.dropped = dropped;
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  if (rec.tracing) {  // else a late buffer of a finished trace
    rec.activity.append(std::move(batch));
  }
}

// The marking's CUDA calls, for the process as the marking is.
CudaMarking& cudaMarking() {
  static CudaMarking cuda;
  return cuda;
}

}  // namespace

OpMarking& CuptiTracer::marking() {
  static OpMarking m;
  return m;
}

std::string CuptiTracer::busyReason() {
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  return rec.tracing ? "another torchutil profile is tracing kernels in this process" : "";
}

std::unique_ptr<CuptiTracer> CuptiTracer::start(std::string* why, Correlation how) {
  std::unique_ptr<CuptiTracer> tracer(new CuptiTracer());
  Records& rec = records();
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    if (rec.tracing) {
      *why = "another torchutil profile is tracing kernels in this process";
      return nullptr;
    }
    rec.tracing = true;
    rec.activity = DecodedActivity();
  }
  tracer->active_ = true;  // from here its destructor releases the trace
  if (!tracer->enable(why, how)) {
    return nullptr;
  }
  return tracer;
}

bool CuptiTracer::enable(std::string* why, Correlation how) {
  TORCHUTIL_CUPTI_CHECK(cuptiActivityRegisterTimestampCallback(realtimeNs), why);
  TORCHUTIL_CUPTI_CHECK(cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted), why);
  // Capture nodes record from the traced forwards on (recordFromNow), unless the profile asks
  // for records through the capture (TORCHUTIL_CUPTI_RECORD_CAPTURE=1: KernelTracing::start).
  recordsDeferred_ = how == Correlation::CaptureNodes;
  for (CUpti_ActivityKind kind : kKinds) {
    if (recordsDeferred_) {
      break;
    }
    TORCHUTIL_CUPTI_CHECK(cuptiActivityEnable(kind), why);
    enabledKinds_.push_back(kind);
  }
  how_ = how;
  switch (how) {
    case Correlation::Markers: return startMarking(why);
    case Correlation::GraphNodes: return startGraphNodes(why);
    case Correlation::CaptureNodes: marking().open(how, &cudaMarking()); return true;
    case Correlation::ApiRecords:
      for (CUpti_ActivityKind kind : kCorrelationKinds) {
        TORCHUTIL_CUPTI_CHECK(cuptiActivityEnable(kind), why);
        enabledKinds_.push_back(kind);
      }
      return true;
    case Correlation::None: return true;  // kernel records only, attributed to no op
  }
  return true;
}

bool CuptiTracer::startMarking(std::string* why) {
  int device = 0;
  void* stream = nullptr;
  if (!cudaMarking().useMarkerStream(&device, &stream, why)) {
    return false;
  }
  // CUPTI's id for the stream, as its records carry it (asked at every trace: a detached CUPTI
  // numbers streams afresh).
  uint32_t streamId = 0;
  TORCHUTIL_CUPTI_CHECK(cuptiGetStreamIdEx(nullptr, static_cast<CUstream>(stream), 0, &streamId),
                        why);
  markers_ = MarkerStream{static_cast<uint32_t>(device), streamId};
  marking().open(Correlation::Markers, &cudaMarking());
  return true;
}

void CuptiTracer::captureBegins(void* stream) {
  marking().captureBegins(stream);
}

void CuptiTracer::captureEnds() {
  marking().captureEnds();
}

CapturedForward CuptiTracer::takeCapturedForward() {
  return marking().takeCaptured();
}

CuptiTracer::~CuptiTracer() {
  release();
}

void CuptiTracer::release() noexcept {
  if (!active_) {
    return;
  }
  active_ = false;
  marking().close();
  unsubscribe();
  for (uint32_t kind : enabledKinds_) {
    TORCHUTIL_CUPTI_WARN(cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind)));
  }
  enabledKinds_.clear();
  TORCHUTIL_CUPTI_WARN(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (detach_) {
    TORCHUTIL_CUPTI_WARN(cuptiFinalize());
  }
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  rec.tracing = false;
  rec.activity = DecodedActivity();
}

void CuptiTracer::stopCorrelating() {
  marking().close();
  if (how_ == Correlation::GraphNodes) {
    graphNodeOps_ = marking().takeGraphNodes();
  }
  unsubscribe();
  for (CUpti_ActivityKind kind : kCorrelationKinds) {
    const auto it =
        std::find(enabledKinds_.begin(), enabledKinds_.end(), static_cast<uint32_t>(kind));
    if (it != enabledKinds_.end()) {
      enabledKinds_.erase(it);
      TORCHUTIL_CUPTI_THROW(cuptiActivityDisable(kind));
    }
  }
}

void CuptiTracer::recordFromNow() {
  if (!std::exchange(recordsDeferred_, false)) {
    return;
  }
  for (CUpti_ActivityKind kind : kKinds) {
    TORCHUTIL_CUPTI_THROW(cuptiActivityEnable(kind));
    enabledKinds_.push_back(kind);
  }
}

void CuptiTracer::flush() {
  TORCHUTIL_CUPTI_THROW(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
}

std::vector<KernelRecord> CuptiTracer::takeKernels() {
  std::vector<KernelRecord> kernels;
  {
    Records& rec = records();
    std::lock_guard<std::mutex> lock(rec.mutex);
    kernels = std::exchange(rec.activity.kernels, {});
  }
  if (how_ == Correlation::Markers) {
    // The markers leave the records here, and their ids become takeExternalIds()'s answer.
    std::string problem;
    markedIds_ = correlateByMarkers(kernels, markers_, marking().issued(), &problem);
    if (!problem.empty()) {
      warn("torchutil: " + problem + "; the counted forward's kernels are attributed to no op");
    }
  }
  return kernels;
}

std::unordered_map<uint32_t, uint64_t> CuptiTracer::takeExternalIds() {
  if (how_ == Correlation::Markers) {
    return std::exchange(markedIds_, {});
  }
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  return std::exchange(rec.activity.externalIds, {});
}

GraphNodeOps CuptiTracer::takeGraphNodes() {
  return std::exchange(graphNodeOps_, {});
}

uint64_t CuptiTracer::dropped() const {
  Records& rec = records();
  std::lock_guard<std::mutex> lock(rec.mutex);
  return rec.activity.dropped;
}

// The clock every trace registers with CUPTI for its records (enable()), read directly: the
// counted forward reads it twice per op call for its op events.
uint64_t CuptiTracer::timestamp() {
  return realtimeNs();
}

// While the marking is on (markers, capture nodes, graph nodes), it keeps the op stack; else
// (API records) CUPTI's external-correlation stack does.
void CuptiTracer::pushExternalId(uint64_t id) {
  OpMarking& m = marking();
  if (m.on()) {
    m.push(id);
    return;
  }
  TORCHUTIL_CUPTI_WARN(cuptiActivityPushExternalCorrelationId(kExternalKind, id));
}

void CuptiTracer::popExternalId() {
  OpMarking& m = marking();
  if (m.on()) {
    m.pop();
    return;
  }
  uint64_t last = 0;
  TORCHUTIL_CUPTI_WARN(cuptiActivityPopExternalCorrelationId(kExternalKind, &last));
}

}  // namespace torchutil::cupti
