#include "core/PmSamples.h"
#include "core/NotANumber.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace torchutil::hw {
namespace {

uint64_t overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  const uint64_t lo = std::max(a0, b0);
  const uint64_t hi = std::min(a1, b1);
  return hi > lo ? hi - lo : 0;
}

// Sample time on the kernels' clock (clamped at 0).
uint64_t shifted(uint64_t t, int64_t offset) {
  if (offset < 0 && t < static_cast<uint64_t>(-offset)) {
    return 0;
  }
  return static_cast<uint64_t>(static_cast<int64_t>(t) + offset);
}

// Adds the samples overlapping [start, end) to sums, weighted by the overlap.
void accumulate(const std::vector<PmSample>& samples, int64_t offsetNs, uint64_t start,
                uint64_t end, PmValues& weighted, std::array<double, kNumPmMetrics>& weights,
                PmAggregate& agg) {
  // Samples are sorted by start; the first that can overlap ends after start.
  auto it = std::lower_bound(
      samples.begin(), samples.end(), start,
      [&](const PmSample& s, uint64_t t) { return shifted(s.endNs, offsetNs) <= t; });
  for (; it != samples.end() && shifted(it->startNs, offsetNs) < end; ++it) {
    const uint64_t w =
        overlap(shifted(it->startNs, offsetNs), shifted(it->endNs, offsetNs), start, end);
    if (w == 0) {
      continue;
    }
    agg.overlapNs += w;
    agg.samples += 1;
    for (size_t m = 0; m < kNumPmMetrics; ++m) {
      if (std::isfinite(it->values[m])) {
        weighted[m] += it->values[m] * static_cast<double>(w);
        weights[m] += static_cast<double>(w);
      }
    }
  }
}

void finish(PmAggregate& agg, const PmValues& weighted,
            const std::array<double, kNumPmMetrics>& weights) {
  for (size_t m = 0; m < kNumPmMetrics; ++m) {
    agg.values[m] = weights[m] > 0 ? weighted[m] / weights[m] : kNaN;
  }
}

bool sortedByStart(const std::vector<PmSample>& s) {
  return std::is_sorted(s.begin(), s.end(),
                        [](const PmSample& a, const PmSample& b) { return a.startNs < b.startNs; });
}

std::vector<PmSample> sortByStart(std::vector<PmSample> s) {
  std::stable_sort(s.begin(), s.end(),
                   [](const PmSample& a, const PmSample& b) { return a.startNs < b.startNs; });
  return s;
}

// Merged, sorted busy intervals.
std::vector<Span> mergeSpans(std::vector<Span> v) {
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  std::vector<Span> out;
  for (const Span& s : v) {
    if (s.end <= s.start) {
      continue;
    }
    if (!out.empty() && s.start <= out.back().end) {
      out.back().end = std::max(out.back().end, s.end);
    } else {
      out.push_back({s.start, s.end, -1});
    }
  }
  return out;
}

uint64_t coveredBy(const std::vector<Span>& merged, uint64_t a, uint64_t b) {
  auto it = std::lower_bound(merged.begin(), merged.end(), a,
                             [](const Span& s, uint64_t t) { return s.end <= t; });
  uint64_t total = 0;
  for (; it != merged.end() && it->start < b; ++it) {
    total += overlap(it->start, it->end, a, b);
  }
  return total;
}

}  // namespace

uint64_t pmIntervalNs(uint64_t leastNs, double windowSeconds, size_t maxSamples) {
  if (!(windowSeconds > 0) || !std::isfinite(windowSeconds) || maxSamples == 0) {
    return leastNs;
  }
  const double needed = std::ceil(windowSeconds * 1e9 / static_cast<double>(maxSamples) / 1000.0);
  return std::max(leastNs, static_cast<uint64_t>(needed) * 1000);
}

PmAggregate pmOver(const std::vector<PmSample>& samples, int64_t offsetNs, uint64_t start,
                   uint64_t end) {
  const std::vector<PmSample> sorted = sortedByStart(samples) ? samples : sortByStart(samples);
  PmAggregate agg;
  PmValues weighted{};
  std::array<double, kNumPmMetrics> weights{};
  if (end > start) {
    accumulate(sorted, offsetNs, start, end, weighted, weights, agg);
  }
  finish(agg, weighted, weights);
  return agg;
}

std::vector<PmAggregate> pmByRow(const std::vector<PmSample>& samples, int64_t offsetNs,
                                 const std::vector<Span>& kernels, size_t numRows) {
  const std::vector<PmSample> sorted = sortedByStart(samples) ? samples : sortByStart(samples);
  std::vector<PmAggregate> rows(numRows);
  std::vector<PmValues> weighted(numRows, PmValues{});
  std::vector<std::array<double, kNumPmMetrics>> weights(numRows,
                                                         std::array<double, kNumPmMetrics>{});
  for (const Span& k : kernels) {
    if (k.row < 0 || static_cast<size_t>(k.row) >= numRows || k.end <= k.start) {
      continue;
    }
    const size_t r = static_cast<size_t>(k.row);
    accumulate(sorted, offsetNs, k.start, k.end, weighted[r], weights[r], rows[r]);
  }
  for (size_t r = 0; r < numRows; ++r) {
    finish(rows[r], weighted[r], weights[r]);
  }
  return rows;
}

PmAlignment alignPmSamples(const std::vector<PmSample>& samples, const std::vector<Span>& busy,
                           uint64_t windowStart, uint64_t windowEnd, PmMetric metric,
                           int64_t searchNs, int64_t stepNs) {
  PmAlignment result;
  if (samples.empty()) {
    return result;
  }
  const std::vector<PmSample> sorted = sortedByStart(samples) ? samples : sortByStart(samples);
  const uint64_t first = sorted.front().startNs;
  uint64_t last = 0;
  for (const PmSample& s : sorted) {
    last = std::max(last, s.endNs);
  }
  const bool overlaps = first < windowEnd && last > windowStart;
  result.guessNs = overlaps ? 0 : static_cast<int64_t>(windowStart) - static_cast<int64_t>(first);
  result.offsetNs = result.guessNs;
  const std::vector<Span> merged = mergeSpans(busy);
  const size_t m = static_cast<size_t>(metric);
  double activeSum = 0;
  for (const PmSample& s : sorted) {
    if (std::isfinite(s.values[m]) && s.values[m] > 0) {
      activeSum += s.values[m];
    }
  }
  if (merged.empty() || activeSum <= 0) {
    return result;
  }
  const auto score = [&](int64_t offset) {
    double total = 0;
    for (const PmSample& s : sorted) {
      const double v = s.values[m];
      if (!std::isfinite(v) || v <= 0 || s.endNs <= s.startNs) {
        continue;
      }
      const uint64_t a = shifted(s.startNs, offset);
      const uint64_t b = shifted(s.endNs, offset);
      if (b <= a) {
        continue;
      }
      total += v * static_cast<double>(coveredBy(merged, a, b)) / static_cast<double>(b - a);
    }
    return total / activeSum;
  };
  const int64_t step = std::max<int64_t>(stepNs, 1);
  const int64_t steps = std::max<int64_t>(searchNs, 0) / step;
  double best = score(result.guessNs);
  int64_t bestOffset = result.guessNs;
  for (int64_t i = 1; i <= steps; ++i) {
    for (int64_t sign : {-1, 1}) {
      const int64_t offset = result.guessNs + sign * i * step;
      const double s = score(offset);
      if (s > best + 1e-12) {  // ties keep the offset closer to the guess
        best = s;
        bestOffset = offset;
      }
    }
  }
  result.offsetNs = bestOffset;
  result.score = best;
  return result;
}

}  // namespace torchutil::hw
