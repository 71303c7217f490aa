#pragma once
// GPU activity of a profile, torch-free: kernel (and memcpy/memset) records as CUPTI reports
// them, their attribution to the ops that launched them, interval arithmetic, and the Chrome
// trace writer. The CUPTI side that fills the records is csrc/cupti/CuptiTracer.cpp.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/CountSession.h"
#include "core/ResultSchema.h"

namespace torchutil {

struct KernelRecord {
  enum class Kind : uint8_t { Kernel, Memcpy, Memset };
  Kind kind = Kind::Kernel;
  std::string name;
  uint64_t startNs = 0;
  uint64_t endNs = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlationId = 0;  // of the CUDA API call that launched it
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  int32_t registersPerThread = 0;
  int32_t staticSharedBytes = 0;
  int32_t dynamicSharedBytes = 0;
  uint64_t bytes = 0;        // memcpy / memset size
  uint32_t graphId = 0;      // non-zero for a kernel replayed from a CUDA graph
  uint64_t graphNodeId = 0;  // its node in the executable graph (CUPTI's id), else 0
  // Which forward launched it: the counted one, or one of the timed ones (set when the trace
  // is split by time); forward is the timed forward's index, known once attributeByPosition
  // has split the timed kernels into forwards.
  bool timed = false;
  std::optional<int32_t> forward;
  // Attribution (attributeCounted / attributeByPosition):
  int64_t opEvent = -1;    // index into the counted forward's OpEvents; -1: launched by no op
  int32_t generated = -1;  // a generated kernel's row (attributeGenerated), else -1

  uint64_t durationNs() const { return endNs > startNs ? endNs - startNs : 0; }
};

const char* kernelKindName(KernelRecord::Kind k);

struct Interval {
  uint64_t start = 0;
  uint64_t end = 0;
};

// Length covered by the union of the intervals (what the GPU was busy for).
uint64_t unionLength(std::vector<Interval> intervals);

// Kernels of the counted forward: CUPTI's external-correlation records map the launching API
// call's correlation id to the external id torchutil pushed for the innermost open op
// (OpEvent index + 1). Sets opEvent; the kernels are the counted forward's (timed = false).
void attributeCounted(std::vector<KernelRecord>& kernels,
                      const std::unordered_map<uint32_t, uint64_t>& externalIdOf);

// Launch-order correlation, the alternative to CUPTI's API records: the tracer issues a marker
// (a one-byte memset on a stream of its own) whenever the innermost open op of the counted
// forward changes, and CUDA numbers every call of a thread in the order it is made (the
// correlation id each record carries). A launch belongs to the last marker before it.
struct MarkerStream {
  uint32_t device = 0;
  uint32_t stream = 0;  // the tracer's stream id, as records carry it
};
// Removes the markers (memset records on the marker stream) from records and returns, for every
// other record's launch, the external id of the last marker issued before it (launches before
// the first marker, or after a marker for no op, get none). markerIds: the external id each
// marker stood for (0: no op), in the order they were issued. When the markers recorded are not
// the markers issued (lost records), returns {} and says so in *problem: nothing is attributed.
std::unordered_map<uint32_t, uint64_t> correlateByMarkers(std::vector<KernelRecord>& records,
                                                          MarkerStream markers,
                                                          const std::vector<uint64_t>& markerIds,
                                                          std::string* problem);

// Graph-node correlation, for a counted forward run inside a CUDA-graph capture: each node the
// capture creates belongs to the innermost op open when it was created, and instantiating the
// graph clones every node into the executable graph, whose node ids the replays' records carry.
struct GraphNodeOps {
  std::unordered_map<uint64_t, uint64_t> created;  // node id -> external id (0: no op open)
  std::unordered_map<uint64_t, uint64_t> cloned;   // executable node id -> node id it cloned
};
// Attributes the records of `forwards` replays of the graph: opEvent from each record's node,
// forward from its launch (one graph launch, one correlation id, per replay; numbered in launch
// order). Returns false and attributes nothing (no opEvent, no forward index) when the records
// are not `forwards` launches of equal size or when a record's node was not created by the
// capture, and says which in *problem.
bool attributeByGraphNodes(std::vector<KernelRecord>& timed, const GraphNodeOps& nodes,
                           int64_t forwards, std::string* problem);

// Capture-node correlation, for a counted forward run inside a CUDA-graph capture with no CUPTI
// callback: the nodes the capture created, in creation order, and at every change of the
// innermost open op how many nodes there were. A node that produces a record when replayed
// (kernel, memcpy, memset) runs; the others (events, empty nodes) produce none.
struct CapturedNode {
  bool runs = false;
  KernelRecord::Kind kind = KernelRecord::Kind::Kernel;
  std::string name;  // a kernel's demangled name as records carry it; "" when CUDA gave none
};
struct CapturedForward {
  std::vector<CapturedNode> nodes;
  // (nodes created before the change, the external id of the innermost op from then on; 0: none)
  std::vector<std::pair<size_t, uint64_t>> opChanges;
  bool complete = true;  // false when a query failed: the sequence cannot be trusted
};
// The nodes that run, in creation order, as reference records for attributeByPosition: kind,
// name, and opEvent from the op open when the capture created each (startNs: its position).
std::vector<KernelRecord> capturedSequence(const CapturedForward& forward);

// Kernels of `forwards` timed forwards (eager or graph replays) launch the same sequence as the
// counted forward. Sorts timed by start, splits it into `forwards` runs and copies opEvent and
// the forward index by position, checking kinds and names (a reference with no name matches
// any name of its kind). Returns false (and attributes nothing: no opEvent, no forward index)
// when the sequence differs.
bool attributeByPosition(const std::vector<KernelRecord>& counted, std::vector<KernelRecord>& timed,
                         int64_t forwards);

struct OpKernelStats {
  double kernels = 0;  // per forward
  double seconds = 0;  // kernel time per forward
};

struct TraceStats {
  double kernelsPerForward = 0;
  double kernelSeconds = 0;        // sum of kernel durations, per forward
  double busySeconds = 0;          // union of kernel intervals, per forward
  double unattributedSeconds = 0;  // kernel time launched by no counted op, per forward
  bool perOpFromTimed = false;     // per-op figures from the timed forwards (else the counted one)
  std::vector<OpKernelStats> perRow;  // indexed like CountTable::rows()
};

// Figures per forward: from the timed forwards' kernels when there are any, else from the
// counted forward's. Per-op figures follow attribution (by position when it held).
TraceStats summarizeTrace(const std::vector<KernelRecord>& counted,
                          const std::vector<KernelRecord>& timed, int64_t forwards,
                          bool positionAttributed, const std::vector<OpEvent>& events,
                          size_t numRows);

// A counter track of a Chrome trace ("ph": "C"): (time on the kernels' clock, value) points.
struct CounterTrack {
  std::string name;
  std::vector<std::pair<uint64_t, double>> points;
};

// A Chrome trace (JSON; opens in Perfetto and chrome://tracing): the counted forward's ops on a
// CPU track (FLOPs, bytes, module in their args), every kernel on one track per device stream
// (op, module, grid, block, registers, shared memory in their args), and the counter tracks on
// the GPU process (PM samples). Times in microseconds from the first op or kernel; counter
// points before it are left out. Without kernels or counter tracks (a CPU profile, whose op
// events are timed on the steady clock: core/OpTimes.h) there is no GPU process.
std::string chromeTrace(const std::vector<OpEvent>& events, const std::vector<OpStats>& rows,
                        const std::vector<KernelRecord>& kernels, const std::string& deviceName,
                        const std::vector<CounterTrack>& counters = {});

std::string jsonEscape(const std::string& s);

// What the kernel table says of a generated kernel (core/CompiledAttribution.h).
struct GeneratedKernelRow {
  std::string ops;      // the ops it fused, " + "-joined, in its order
  std::string modules;  // their modules
  int64_t row = -1;     // the op row that took the largest share of its time
  double flops = std::numeric_limits<double>::quiet_NaN();  // nominal, of its ops (NaN: unpriced)
  double bytes = std::numeric_limits<double>::quiet_NaN();
};

// Appends one row per kernel to a "kernels" table, each with the op that accounts for it (the
// counted op that owns its launching op, else that op itself) and that op's op-table row; a
// generated kernel with the ops it fused (generated[k.generated]). Start times are
// microseconds from the first kernel's start.
void addKernelRows(ResultTable& table, const std::vector<KernelRecord>& kernels,
                   const std::vector<OpEvent>& events,
                   const std::vector<GeneratedKernelRow>& generated = {});

}  // namespace torchutil
