#include "core/OpTimes.h"

#include <chrono>
#include <limits>

namespace torchutil {

uint64_t steadyClockNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

const TraceHooks* cpuOpClock() {
  static const TraceHooks hooks{&steadyClockNs, /*push=*/nullptr, /*pop=*/nullptr};
  return &hooks;
}

std::vector<OpKernelStats> cpuOpSeconds(const std::vector<OpEvent>& events, size_t numRows) {
  std::vector<OpKernelStats> rows(numRows,
                                  OpKernelStats{std::numeric_limits<double>::quiet_NaN(), 0.0});
  for (const OpEvent& e : events) {
    if (e.kind != OpEvent::Kind::Counted || e.row < 0 || static_cast<size_t>(e.row) >= numRows) {
      continue;
    }
    const uint64_t ns = e.endNs > e.startNs ? e.endNs - e.startNs : 0;
    rows[static_cast<size_t>(e.row)].seconds += static_cast<double>(ns) * 1e-9;
  }
  return rows;
}

}  // namespace torchutil
