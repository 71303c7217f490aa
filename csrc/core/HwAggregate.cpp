#include "core/HwAggregate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace torchutil::hw {

HwAggregate aggregate(const std::vector<HwKernel>& kernels) {
  const std::vector<MetricDef>& defs = rangeMetricDefs();
  HwAggregate a;
  a.values.fill(std::numeric_limits<double>::quiet_NaN());
  std::array<double, kNumRangeMetrics> sum{}, weight{}, plain{};
  std::array<size_t, kNumRangeMetrics> seen{};
  for (const HwKernel& k : kernels) {
    a.kernels += 1;
    a.durationNs += k.durationNs;
    for (size_t m = 0; m < kNumRangeMetrics; ++m) {
      const double v = k.values[m];
      if (!std::isfinite(v)) {
        continue;
      }
      seen[m] += 1;
      if (defs[m].reduce == Reduce::Sum) {
        sum[m] += v;
      } else {
        sum[m] += v * static_cast<double>(k.durationNs);
        weight[m] += static_cast<double>(k.durationNs);
        plain[m] += v;
      }
    }
  }
  for (size_t m = 0; m < kNumRangeMetrics; ++m) {
    if (seen[m] == 0) {
      continue;
    }
    if (defs[m].reduce == Reduce::Sum) {
      a.values[m] = sum[m];
    } else {
      a.values[m] = weight[m] > 0 ? sum[m] / weight[m] : plain[m] / static_cast<double>(seen[m]);
    }
  }
  return a;
}

std::vector<HwAggregate> aggregateByRow(const std::vector<HwKernel>& kernels, size_t numRows) {
  std::vector<std::vector<HwKernel>> byRow(numRows);
  for (const HwKernel& k : kernels) {
    if (k.row >= 0 && static_cast<size_t>(k.row) < numRows) {
      byRow[static_cast<size_t>(k.row)].push_back(k);
    }
  }
  std::vector<HwAggregate> out;
  out.reserve(numRows);
  for (const auto& ks : byRow) {
    out.push_back(aggregate(ks));
  }
  return out;
}

std::vector<size_t> matchRangesToRecords(size_t numRanges, const std::vector<bool>& isKernel,
                                         const std::vector<bool>& isMemset, std::string* why) {
  std::vector<size_t> kernels, withMemsets;
  for (size_t i = 0; i < isKernel.size(); ++i) {
    const bool memset = i < isMemset.size() && isMemset[i];
    if (isKernel[i]) {
      kernels.push_back(i);
    }
    if (isKernel[i] || memset) {
      withMemsets.push_back(i);
    }
  }
  if (numRanges == kernels.size()) {
    return kernels;
  }
  if (numRanges == withMemsets.size()) {
    return withMemsets;
  }
  if (why != nullptr) {
    *why = "the counter passes profiled " + std::to_string(numRanges) +
           " kernels but the counted forward launched " + std::to_string(kernels.size()) +
           " (and " + std::to_string(withMemsets.size() - kernels.size()) +
           " memsets): the forwards do not repeat one kernel sequence, so counters cannot be "
           "matched to kernels";
  }
  return {};
}

std::vector<size_t> rangeOrder(const std::vector<std::string>& rangeNames) {
  // Longer digit strings would not fit an unsigned long long.
  constexpr size_t kMaxIndexDigits = 18;
  std::vector<size_t> order(rangeNames.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::vector<unsigned long long> key(rangeNames.size());
  for (size_t i = 0; i < rangeNames.size(); ++i) {
    const std::string& s = rangeNames[i];
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos ||
        s.size() > kMaxIndexDigits) {
      return order;  // not all numeric: the image's order
    }
    key[i] = std::strtoull(s.c_str(), nullptr, 10);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
  return order;
}

}  // namespace torchutil::hw
