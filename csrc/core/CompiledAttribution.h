#pragma once
// Kernel figures of a torch.compile'd forward, carried onto the rows of its eager count,
// torch-free. A compiled forward is counted as its eager self (every op on the dispatcher,
// with its module), while its kernels come from the compiled code: extern calls (cuBLAS,
// cuDNN, attention) through the dispatcher ops that launched them, Inductor's generated kernels
// through the aten ops they fused. Each is tied to eager rows by the name of the op: a kernel's
// time is shared among the eager rows of that op (docs/counting.md, "Compiled models").
#include <cstdint>
#include <string>
#include <vector>

#include "core/CountSession.h"
#include "core/KernelTrace.h"

namespace torchutil {

// Kernel figures over the rows of the compiled forward's own count (summarizeTrace over its
// events), moved onto the eager count's rows. A compiled row's kernels and seconds are shared
// among the eager rows that ran an op of its name (an eager event of that name, counted or
// inside a counted op, whose row it is; of its dtype where one is), in proportion to their
// FLOPs (bytes where they have none, calls where neither); a compiled row no eager row ran is
// unattributed. rowOf[c]: the eager row that took the largest share of compiled row c (-1:
// none), for the kernel table.
TraceStats shareOntoEagerRows(const TraceStats& compiled, const std::vector<OpStats>& compiledRows,
                              const std::vector<OpStats>& eagerRows,
                              const std::vector<OpEvent>& eagerEvents, std::vector<int64_t>* rowOf);

// One op an Inductor kernel fused: a post-grad FX node, priced by the formula registry
// (torchutil/_inductor.py runs it on meta tensors of its shapes inside a count).
struct FusedOp {
  std::string node;              // the FX node's name
  std::vector<std::string> ops;  // names it answers to: the op it runs, the op it came from
  std::string module;            // its module, from the compiled code's root ("" where none)
  int64_t matrixFlops = 0;
  int64_t vectorFlops = 0;
  int64_t bytes = 0;  // nominal: what the op reads and writes, run alone
  bool priced = false;
};

// A kernel Inductor generated (Triton, C++), by the name the trace records, and what it fused;
// refusal says why it is tied to nothing ("" when it is tied).
struct GeneratedKernel {
  std::string name;
  std::string refusal;
  std::vector<FusedOp> fused;
};

struct GeneratedKernels {
  std::string status;  // how they were found, or why none were
  std::vector<GeneratedKernel> kernels;
};

// The eager rows a fused op's share goes to, in this order of preference: rows of one of its op
// names (rows whose work ran an op of that name: their own op, or one inside it, as events
// say) in its module; in a module whose path ends with it (compiled code called below the
// profiled root); any row of its module (an op Inductor decomposed into ops the eager forward
// did not run there); rows of one of its op names anywhere. Empty: none (its share stays
// unattributed).
std::vector<int64_t> rowsOfFusedOp(const FusedOp& op, const std::vector<OpStats>& rows,
                                   const std::vector<OpEvent>& events);

// Ties the kernels no op launched (opEvent < 0) that are generated kernels to the eager rows
// of what they fused. A kernel's time is shared among its fused ops by their FLOPs where they
// hold matrix FLOPs (templates), else by their nominal bytes (pointwise and reduction kernels),
// equally where an op is unpriced or all weigh 0; the pieces of an op Inductor decomposed
// (those of one original op in one module) are one op, weighing what the heaviest weighs. Each
// op's share goes to its rows (rowsOfFusedOp), shared as shareOntoEagerRows shares. Moves that time
// from stats->unattributedSeconds onto stats->perRow, over the records summarizeTrace took per-op
// figures from (stats->perOpFromTimed); sets KernelRecord::generated of every generated kernel's
// record (an index into the rows returned); appends what it did to *status.
std::vector<GeneratedKernelRow> attributeGenerated(
    TraceStats* stats, std::vector<KernelRecord>& counted, std::vector<KernelRecord>& timed,
    int64_t forwards, const GeneratedKernels& generated, const std::vector<OpStats>& rows,
    const std::vector<OpEvent>& events, std::string* status);

// A compiled forward's trace onto its eager count, in one step: shareOntoEagerRows of *stats
// (over the compiled count's rows), the compiled events' rows renamed to eager rows; then the
// kernels launched by no op, or inside an event no eager row holds (dynamo's region mark
// around a compiled frame's code), tied by attributeGenerated. Returns its rows.
std::vector<GeneratedKernelRow> tieCompiledTrace(
    TraceStats* stats, std::vector<OpEvent>& compiledEvents,
    const std::vector<OpStats>& compiledRows, const std::vector<OpStats>& eagerRows,
    const std::vector<OpEvent>& eagerEvents, std::vector<KernelRecord>& counted,
    std::vector<KernelRecord>& timed, int64_t forwards, const GeneratedKernels& generated,
    std::string* status);

}  // namespace torchutil
