#pragma once
// GPU activity of a profile, torch-free: kernel (and memcpy/memset) records as CUPTI reports
// them, their attribution to the ops that launched them, interval arithmetic, and the Chrome
// trace writer. The CUPTI side that fills the records is csrc/cupti/CuptiTracer.cpp.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/CountSession.h"

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
  uint64_t bytes = 0;    // memcpy / memset size
  uint32_t graphId = 0;  // non-zero for a kernel replayed from a CUDA graph
  // Attribution (attributeCounted / attributeByPosition):
  int64_t opEvent = -1;  // index into the counted forward's OpEvents; -1: launched by no op
  int32_t forward = -1;  // -1: the counted forward; 0.. : the timed forwards

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
// (OpEvent index + 1). Sets opEvent and forward = -1.
void attributeCounted(std::vector<KernelRecord>& kernels,
                      const std::unordered_map<uint32_t, uint64_t>& externalIdOf);

// Kernels of `forwards` timed forwards (eager or graph replays) launch the same sequence as the
// counted forward. Sorts timed by start, splits it into `forwards` runs and copies opEvent by
// position, checking names. Returns false (and attributes nothing) when the sequence differs.
bool attributeByPosition(const std::vector<KernelRecord>& counted,
                         std::vector<KernelRecord>& timed, int64_t forwards);

struct OpKernelStats {
  double kernels = 0;  // per forward
  double seconds = 0;  // kernel time per forward
};

struct TraceStats {
  double kernelsPerForward = 0;
  double kernelSeconds = 0;      // sum of kernel durations, per forward
  double busySeconds = 0;        // union of kernel intervals, per forward
  double unattributedSeconds = 0;  // kernel time launched by no counted op, per forward
  bool perOpFromTimed = false;   // per-op figures from the timed forwards (else the counted one)
  std::vector<OpKernelStats> perRow;  // indexed like CountTable::rows()
};

// Figures per forward: from the timed forwards' kernels when there are any, else from the
// counted forward's. Per-op figures follow attribution (by position when it held).
TraceStats summarizeTrace(const std::vector<KernelRecord>& counted,
                          const std::vector<KernelRecord>& timed, int64_t forwards,
                          bool positionAttributed, const std::vector<OpEvent>& events,
                          size_t numRows);

// A Chrome trace (JSON; opens in Perfetto and chrome://tracing): the counted forward's ops on a
// CPU track (FLOPs, bytes, module in their args), every kernel on one track per device stream
// (op, module, grid, block, registers, shared memory in their args). Times in microseconds
// from the first event.
std::string chromeTrace(const std::vector<OpEvent>& events, const std::vector<OpStats>& rows,
                        const std::vector<KernelRecord>& kernels, const std::string& deviceName);

std::string jsonEscape(const std::string& s);

// Columns of the kernel table tensor, in order.
#define TORCHUTIL_KERNEL_FIELDS(X)                                                     \
  X(forward, "-1 for the counted forward, else the timed forward's index")             \
  X(kind, "0 kernel, 1 memcpy, 2 memset")                                               \
  X(start_us, "start, microseconds from the first record")                              \
  X(duration_us, "duration in microseconds")                                            \
  X(device, "CUDA device") X(stream, "CUDA stream") X(grid_x, "") X(grid_y, "")          \
  X(grid_z, "") X(block_x, "") X(block_y, "") X(block_z, "")                             \
  X(registers_per_thread, "") X(static_shared_bytes, "") X(dynamic_shared_bytes, "")    \
  X(bytes, "bytes copied or set (memcpy, memset)")                                      \
  X(op_row, "row of the op table that accounts for it, -1 when none")                   \
  X(graph_id, "CUDA graph id, 0 outside graphs")

std::vector<std::string> kernelFieldNames();
// One row in TORCHUTIL_KERNEL_FIELDS order; origin is the first record's start.
std::vector<double> kernelRow(const KernelRecord& k, uint64_t originNs, int64_t opRow);

}  // namespace torchutil
