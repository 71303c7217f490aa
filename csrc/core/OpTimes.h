#pragma once
// The time of each op on the CPU, torch-free. A CPU runs an op synchronously, inside its call,
// so the wall time between an op's enter and exit on the dispatcher is the op's time; there is
// no kernel to trace. The counted forward keeps an OpEvent per op call, timed on the steady
// clock (cpuOpClock), and each op-table row takes the wall time of its counted calls.
//
// Inclusive: a counted op's time is its whole call, the ops it calls included (aten::conv2d
// holds convolution -> _convolution -> mkldnn_convolution); those are its implementation and
// never counted again (CountSession rule 1), so no time is counted twice. Counted ops never
// nest, so the rows' times add up to at most the forward's wall time; the rest is Python, module
// calls, unknown and transparent ops between them, and the counting callback itself.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/CountSession.h"
#include "core/HardwareBackends.h"  // TraceHooks
#include "core/KernelTrace.h"       // OpKernelStats

namespace torchutil {

// Steady-clock nanoseconds.
uint64_t steadyClockNs();

// Hooks that time every op call of a counted forward on the steady clock and mark nothing (no
// push or pop: nothing to correlate on a CPU).
const TraceHooks* cpuOpClock();

// Per op-table row (numRows rows), the wall time of its counted calls in seconds, from the
// events of one counted forward; kernels is NaN (a CPU launches none).
std::vector<OpKernelStats> cpuOpSeconds(const std::vector<OpEvent>& events, size_t numRows);

}  // namespace torchutil
