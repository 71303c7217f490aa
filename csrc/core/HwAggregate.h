#pragma once
// Range counters over kernels, torch-free: per-kernel values summed (counts) or weighted by
// kernel time (percentages) over an op's kernels or a forward's, and the matching of the range
// profiler's auto ranges to a forward's kernel records.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/MetricCatalog.h"

namespace torchutil::hw {

// A kernel with its counters: its duration (the weight of its percentages) and the op-table
// row that accounts for it (-1: none).
struct HwKernel {
  RangeValues values;
  uint64_t durationNs = 0;
  int64_t row = -1;
};

struct HwAggregate {
  RangeValues values;  // sums and duration-weighted means, NaN where no kernel had a value
  uint64_t durationNs = 0;
  size_t kernels = 0;
};

// Sums counts and takes duration-weighted means of percentages over kernels (a plain mean
// where every duration is 0).
HwAggregate aggregate(const std::vector<HwKernel>& kernels);
// The same per op-table row (rows outside 0..numRows-1 are left out).
std::vector<HwAggregate> aggregateByRow(const std::vector<HwKernel>& kernels, size_t numRows);

// Which of a forward's records the profiler's auto ranges are, in execution order: kernels
// only (what CUPTI's auto range profiles), or kernels and memsets when the counts say so.
// Returns the positions (into `isKernel`/`isMemset`, records sorted by start) matched to
// ranges 0..numRanges-1, or an empty vector and *why when the counts do not match.
std::vector<size_t> matchRangesToRecords(size_t numRanges, const std::vector<bool>& isKernel,
                                         const std::vector<bool>& isMemset, std::string* why);

// Auto-range names are the kernel's launch index as text ("0", "1", ...); sorts range indices
// by that number when every name is one, else keeps the image's order.
std::vector<size_t> rangeOrder(const std::vector<std::string>& rangeNames);

}  // namespace torchutil::hw
