#pragma once
// Synthetic counter data shared by the hardware-counter tests (HwCountersTest, HwResultTest).
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/HwCounters.h"

namespace torchutil::hw::testdata {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline size_t idx(RangeMetric m) {
  return static_cast<size_t>(m);
}
inline size_t idx(PmMetric m) {
  return static_cast<size_t>(m);
}

// One PM sample over [start, end) ns with SM-active, tensor-active and DRAM percentages.
inline PmSample pmSample(uint64_t start, uint64_t end, double sm, double tensor = kNaN,
                         double dram = kNaN) {
  PmSample s;
  s.startNs = start;
  s.endNs = end;
  s.values = {sm, tensor, dram};
  return s;
}

}  // namespace torchutil::hw::testdata
