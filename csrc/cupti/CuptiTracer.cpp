#include "cupti/CuptiTracer.h"

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/KernelName.h"
#include "core/TraceStages.h"
#include "cupti/ActivityDecoder.h"
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

// The marker stream and its byte on a device, made once per device and kept for the process
// (a trace per profile call would otherwise pay for a stream and an allocation each time).
struct MarkerResources {
  cudaStream_t stream = nullptr;
  void* scratch = nullptr;
};

// Correlation::Markers: what the hooks need while the counted forward runs. The hooks are plain
// functions called for every op, so this is process state, as CUPTI's external-id stack is; it
// belongs to the tracer that owns the trace, and only the thread that started it marks (the
// profile takes API records for forwards that may run ops on other threads).
// With Correlation::GraphNodes the same state keeps the open ops, issues no marker, and ties
// each graph node the capture creates to the innermost of them (graphNodeCallback).
struct Marking {
  std::atomic<bool> on{false};
  bool issue = true;  // markers (else graph nodes: the stack only)
  std::thread::id owner;
  MarkerResources resources;
  std::vector<uint64_t> issued;  // the external id each marker issued stands for
  std::vector<uint64_t> open;    // the external ids pushed and not popped
  uint64_t current = 0;          // the id of the last marker issued
  GraphNodeOps nodes;            // GraphNodes: what the callbacks saw
  // CaptureNodes: the capturing stream (null: not capturing yet), the graph it captures into
  // (asked once, when the capture begins: null when that failed), and what the queries saw.
  bool capture = false;
  cudaStream_t captureStream = nullptr;
  cudaGraph_t captureGraph = nullptr;
  CapturedForward captured;
};

Marking& marking() {
  static Marking m;
  return m;
}

// What the hooks do at a change of the innermost op: issue a marker, note the capture's node
// count, or only keep the stack (graph nodes: the callbacks read it).
enum class Keeping : uint8_t { Markers, CapturedNodes, StackOnly };

// Opens the stack for the thread starting a trace.
void openMarking(Marking& m, Keeping keeping) {
  m.issue = keeping == Keeping::Markers;
  m.capture = keeping == Keeping::CapturedNodes;
  m.owner = std::this_thread::get_id();
  m.issued.clear();
  m.open.clear();
  m.current = 0;
  m.nodes = GraphNodeOps();
  m.captureStream = nullptr;
  m.captureGraph = nullptr;
  m.captured = CapturedForward();
  m.on = true;
}

// CaptureNodes: the graph the stream is capturing into, or null (and the capture marked
// incomplete) when it is not capturing or CUDA fails.
cudaGraph_t capturingGraph(Marking& m) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  if (cudaStreamGetCaptureInfo(m.captureStream, &status, nullptr, &graph) != cudaSuccess ||
      status != cudaStreamCaptureStatusActive || graph == nullptr) {
    cudaGetLastError();
    m.captured.complete = false;
    return nullptr;
  }
  return graph;
}

// CaptureNodes: the innermost op is `id` from the next node the capture creates on. One query
// per change (the node count): a resnet50 b1 forward makes 467 changes, 0.5-0.6 ms of queries
// on an H200 host (the "query" stage of torchutil._C._trace_stages, benchmarks/trace_cost.py);
// the graph was asked for when the capture began.
void noteChange(Marking& m, uint64_t id) {
  m.current = id;
  if (m.captureStream == nullptr) {
    return;  // before the capture began: nothing to attribute
  }
  TraceStageTimer t(TraceStage::Query);
  size_t count = 0;
  if (m.captureGraph == nullptr ||
      cudaGraphGetNodes(m.captureGraph, nullptr, &count) != cudaSuccess) {
    cudaGetLastError();
    m.captured.complete = false;
    return;
  }
  m.captured.opChanges.emplace_back(count, id);
}

// A kernel function's demangled name, asked of CUDA once per function (a capture lists a few
// hundred kernel nodes of a few dozen functions); nullptr when CUDA gives none.
const std::string* kernelFunctionName(const void* func) {
  static std::mutex mutex;
  static std::unordered_map<const void*, std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = names.find(func); it != names.end()) {
    return &it->second;
  }
  const char* name = nullptr;
  if (cudaFuncGetName(&name, func) != cudaSuccess || name == nullptr) {
    return nullptr;
  }
  return &names.emplace(func, demangleKernelName(name)).first->second;
}

// CaptureNodes: every node of the capture so far, in the order CUDA lists them (the order it
// created them), with the kind of record each produces when replayed.
void readCapturedNodes(Marking& m) {
  TraceStageTimer t(TraceStage::ReadNodes);
  cudaGraph_t graph = m.captureGraph;  // asked for when the capture began
  size_t count = 0;
  if (graph == nullptr || cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) {
    cudaGetLastError();
    m.captured.complete = false;
    return;
  }
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0 && cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) {
    cudaGetLastError();
    m.captured.complete = false;
    return;
  }
  for (cudaGraphNode_t node : nodes) {
    CapturedNode n;
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) {
      cudaGetLastError();
      m.captured.complete = false;
    }
    n.runs = type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeMemcpy ||
             type == cudaGraphNodeTypeMemset;
    n.kind = type == cudaGraphNodeTypeMemcpy   ? KernelRecord::Kind::Memcpy
             : type == cudaGraphNodeTypeMemset ? KernelRecord::Kind::Memset
                                               : KernelRecord::Kind::Kernel;
    cudaKernelNodeParams params{};
    const std::string* name = nullptr;
    // A kernel launched through the runtime names itself; one launched through the driver
    // (a library's) may not: then any kernel name matches it (attributeByPosition).
    if (type == cudaGraphNodeTypeKernel &&
        cudaGraphKernelNodeGetParams(node, &params) == cudaSuccess &&
        (name = kernelFunctionName(params.func)) != nullptr) {
      n.name = *name;
    }
    cudaGetLastError();
    m.captured.nodes.push_back(std::move(n));
  }
}

bool markerResources(int device, MarkerResources* out, std::string* why) {
  static std::mutex mutex;
  static std::vector<std::pair<int, MarkerResources>> made;
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [d, r] : made) {
    if (d == device) {
      *out = r;
      return true;
    }
  }
  MarkerResources r;
  cudaError_t e = cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) {
    e = cudaMalloc(&r.scratch, 1);
    if (e != cudaSuccess) {
      cudaStreamDestroy(r.stream);
    }
  }
  if (e != cudaSuccess) {
    *why = std::string("the op markers' stream could not be made on cuda:") +
           std::to_string(device) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clears the error, so that torch does not report it later
    return false;
  }
  made.emplace_back(device, r);
  *out = r;
  return true;
}

// One marker: a one-byte memset on the marker stream, standing for external id `id`.
void mark(Marking& m, uint64_t id) {
  const cudaError_t e = cudaMemsetAsync(m.resources.scratch, 0, 1, m.resources.stream);
  if (e != cudaSuccess) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      warn(std::string("torchutil: an op marker could not be issued (") + cudaGetErrorString(e) +
           "); the kernels of that op may be attributed to the op before it");
    }
    cudaGetLastError();
    return;
  }
  m.issued.push_back(id);
  m.current = id;
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

// Correlation::GraphNodes: CUPTI calls this on the thread that creates or clones a graph node.
// A node created on the tracing thread belongs to its innermost open op (the capture runs the
// counted forward there); instantiation clones each node into the executable graph, whose ids
// the replays' records carry.
void CUPTIAPI graphNodeCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                                CUpti_CallbackId id, const void* data) {
  Marking& m = marking();
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || !m.on || m.issue ||
      std::this_thread::get_id() != m.owner) {
    return;
  }
  const auto* graph = static_cast<const CUpti_GraphData*>(
      static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
  uint64_t node = 0;
  if (graph == nullptr || cuptiGetGraphNodeId(graph->node, &node) != CUPTI_SUCCESS) {
    return;  // the node stays unknown: attributeByGraphNodes refuses and says so
  }
  if (id == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    m.nodes.created.emplace(node, m.open.empty() ? 0 : m.open.back());
  } else if (id == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    uint64_t original = 0;
    if (cuptiGetGraphNodeId(graph->originalNode, &original) == CUPTI_SUCCESS) {
      m.nodes.cloned[node] = original;
    }
  }
}

constexpr CUpti_CallbackIdResource kGraphCallbacks[] = {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
                                                        CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED};

}  // namespace

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
  // TORCHUTIL_CUPTI_RECORD_CAPTURE=1 (a measurement switch of benchmarks/trace_cost.py): capture
  // nodes record from the trace's start, through the capture, as the other correlations do.
  const char* early = std::getenv("TORCHUTIL_CUPTI_RECORD_CAPTURE");
  recordsDeferred_ =
      how == Correlation::CaptureNodes && (early == nullptr || std::string(early) != "1");
  for (CUpti_ActivityKind kind : kKinds) {
    if (recordsDeferred_) {
      break;
    }
    TORCHUTIL_CUPTI_CHECK(cuptiActivityEnable(kind), why);
    enabledKinds_.push_back(kind);
  }
  if (how == Correlation::None) {
    return true;  // kernel records only, attributed to no op
  }
  if (how == Correlation::Markers) {
    return startMarking(why);
  }
  if (how == Correlation::GraphNodes) {
    return startGraphNodes(why);
  }
  if (how == Correlation::CaptureNodes) {
    captureNodes_ = true;
    openMarking(marking(), Keeping::CapturedNodes);
    return true;
  }
  for (CUpti_ActivityKind kind : kCorrelationKinds) {
    TORCHUTIL_CUPTI_CHECK(cuptiActivityEnable(kind), why);
    enabledKinds_.push_back(kind);
  }
  return true;
}

bool CuptiTracer::startMarking(std::string* why) {
  int device = 0;
  const cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) {
    *why = std::string("cudaGetDevice failed (") + cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return false;
  }
  MarkerResources r;
  if (!markerResources(device, &r, why)) {
    return false;
  }
  // CUPTI's id for the stream, as its records carry it (asked at every trace: a detached CUPTI
  // numbers streams afresh).
  uint32_t streamId = 0;
  TORCHUTIL_CUPTI_CHECK(cuptiGetStreamIdEx(nullptr, r.stream, 0, &streamId), why);
  markers_ = MarkerStream{static_cast<uint32_t>(device), streamId};
  marking().resources = r;
  marked_ = true;
  openMarking(marking(), Keeping::Markers);
  return true;
}

// One subscriber per process: another tool's (Kineto's, with its callbacks on) refuses ours,
// and the profile then correlates with markers instead.
bool CuptiTracer::startGraphNodes(std::string* why) {
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "torchutil";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof(holder);
  const CUptiResult status = cuptiSubscribe_v2(&subscriber_, graphNodeCallback, nullptr, &params);
  if (status == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    // Kineto keeps its subscriber once torch.profiler has run in the process (it names none).
    const std::string name(holder);
    *why = "CUPTI has one callback subscriber per process and another client holds it" +
           (name.empty() || name.find("not provided") != std::string::npos
                ? std::string(" (torch.profiler's Kineto, once it has run here, or nsys/ncu)")
                : " (" + name + ")") +
           "; cuptiSubscribe_v2 failed (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)";
    return false;
  }
  if (status != CUPTI_SUCCESS) {
    *why = failure("cuptiSubscribe_v2", status);
    return false;
  }
  subscribed_ = true;
  for (CUpti_CallbackIdResource id : kGraphCallbacks) {
    TORCHUTIL_CUPTI_CHECK(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, id), why);
  }
  graphNodes_ = true;
  openMarking(marking(), Keeping::StackOnly);
  return true;
}

void CuptiTracer::captureBegins(void* stream) {
  Marking& m = marking();
  if (captureNodes_ && m.on && std::this_thread::get_id() == m.owner) {
    m.captureStream = static_cast<cudaStream_t>(stream);
    m.captured = CapturedForward();
    m.captureGraph = capturingGraph(m);
    noteChange(m, m.current);  // the op open when the capture begins (none, in a profile)
  }
}

void CuptiTracer::captureEnds() {
  Marking& m = marking();
  if (captureNodes_ && m.on && m.captureStream != nullptr &&
      std::this_thread::get_id() == m.owner) {
    readCapturedNodes(m);
    m.captureStream = nullptr;
    m.captureGraph = nullptr;
  }
}

CapturedForward CuptiTracer::takeCapturedForward() {
  return std::exchange(marking().captured, {});
}

// Disables the graph-node callbacks and unsubscribes; from release() too, so no failed or
// interrupted trace leaves a subscriber behind.
void CuptiTracer::unsubscribe() noexcept {
  if (!subscribed_) {
    return;
  }
  subscribed_ = false;
  for (CUpti_CallbackIdResource id : kGraphCallbacks) {
    TORCHUTIL_CUPTI_WARN(cuptiEnableCallback(0, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, id));
  }
  TORCHUTIL_CUPTI_WARN(cuptiUnsubscribe(subscriber_));
}

CuptiTracer::~CuptiTracer() {
  release();
}

void CuptiTracer::release() noexcept {
  if (!active_) {
    return;
  }
  active_ = false;
  marking().on = false;
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
  marking().on = false;
  if (graphNodes_) {
    graphNodeOps_ = std::exchange(marking().nodes, {});
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
  if (marked_) {
    // The markers leave the records here, and their ids become takeExternalIds()'s answer.
    std::string problem;
    markedIds_ = correlateByMarkers(kernels, markers_, marking().issued, &problem);
    if (!problem.empty()) {
      warn("torchutil: " + problem + "; the counted forward's kernels are attributed to no op");
    }
  }
  return kernels;
}

std::unordered_map<uint32_t, uint64_t> CuptiTracer::takeExternalIds() {
  if (marked_) {
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

// With markers, a marker only where the innermost open op changes: the ops nested in a counted
// op push its id again (CountSession::attributionEvent) and mark nothing.
void CuptiTracer::pushExternalId(uint64_t id) {
  Marking& m = marking();
  if (m.on) {
    if (std::this_thread::get_id() == m.owner) {
      m.open.push_back(id);
      if (m.issue && id != m.current) {
        mark(m, id);
      } else if (m.capture && id != m.current) {
        noteChange(m, id);
      }
    }
    return;
  }
  TORCHUTIL_CUPTI_WARN(cuptiActivityPushExternalCorrelationId(kExternalKind, id));
}

void CuptiTracer::popExternalId() {
  Marking& m = marking();
  if (m.on) {
    if (std::this_thread::get_id() == m.owner && !m.open.empty()) {
      m.open.pop_back();
      const uint64_t next = m.open.empty() ? 0 : m.open.back();
      if (m.issue && next != m.current) {
        mark(m, next);
      } else if (m.capture && next != m.current) {
        noteChange(m, next);
      }
    }
    return;
  }
  uint64_t last = 0;
  TORCHUTIL_CUPTI_WARN(cuptiActivityPopExternalCorrelationId(kExternalKind, &last));
}

}  // namespace torchutil::cupti
