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

}  // namespace torchutil
