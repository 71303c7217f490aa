#include "core/HwCounters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace torchutil::hw {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <size_t N>
std::array<double, N> nanArray() {
  std::array<double, N> a;
  a.fill(kNaN);
  return a;
}

// A value CUPTI reported: finite and not negative (it reports -1 / NaN for "no data").
bool usable(double v) {
  return std::isfinite(v) && v >= 0.0;
}

MetricDef tensor(const char* key, const char* dtype, std::vector<std::string> names,
                 bool floating = true) {
  MetricDef d{key, CounterSet::Flops, Reduce::Sum, std::move(names)};
  d.dtype = dtype;
  d.tensorFlops = floating;
  d.tensorIntOps = !floating;
  return d;
}

MetricDef metric(const char* key, CounterSet set, Reduce reduce, std::vector<std::string> names) {
  return MetricDef{key, set, reduce, std::move(names)};
}

template <size_t N>
std::array<double, N> decode(const std::vector<MetricDef>& defs, const ResolvedMetrics& r,
                             const std::vector<double>& values) {
  std::array<double, N> out = nanArray<N>();
  const size_t n = std::min(values.size(), r.index.size());
  for (size_t i = 0; i < n; ++i) {
    const int idx = r.index[i];
    if (idx >= 0 && static_cast<size_t>(idx) < defs.size() && usable(values[i])) {
      out[static_cast<size_t>(idx)] = values[i];
    }
  }
  return out;
}

ResolvedMetrics resolve(const std::vector<MetricDef>& defs, const std::vector<CounterSet>& sets,
                        const KnownMetric& known) {
  ResolvedMetrics r;
  for (size_t i = 0; i < defs.size(); ++i) {
    if (!hasSet(sets, defs[i].set)) {
      continue;
    }
    bool found = false;
    for (const std::string& name : defs[i].candidates) {
      if (known(name)) {
        r.index.push_back(static_cast<int>(i));
        r.names.push_back(name);
        found = true;
        break;
      }
    }
    if (!found) {
      r.missing.emplace_back(defs[i].key);
    }
  }
  return r;
}

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

const char* counterSetName(CounterSet s) {
  switch (s) {
    case CounterSet::Flops: return "flops";
    case CounterSet::Throughput: return "throughput";
    case CounterSet::Timeline: return "timeline";
  }
  return "?";
}

std::vector<CounterSet> parseCounterSets(const std::vector<std::string>& names) {
  constexpr CounterSet kAll[] = {CounterSet::Flops, CounterSet::Throughput, CounterSet::Timeline};
  std::vector<CounterSet> sets;
  const auto add = [&](CounterSet s) {
    if (!hasSet(sets, s)) {
      sets.push_back(s);
    }
  };
  for (const std::string& name : names) {
    if (name == "all") {
      for (CounterSet s : kAll) {
        add(s);
      }
      continue;
    }
    bool found = false;
    for (CounterSet s : kAll) {
      if (name == counterSetName(s)) {
        add(s);
        found = true;
      }
    }
    if (!found) {
      throw std::invalid_argument("torchutil: unknown counter set '" + name +
                                  "'; counters= takes None, 'flops', 'throughput', 'timeline', "
                                  "'all' or a list of them");
    }
  }
  return sets;
}

const char* replayName(Replay r) {
  return r == Replay::Kernel ? "kernel" : "user";
}

Replay parseReplay(std::string_view name) {
  for (Replay r : {Replay::User, Replay::Kernel}) {
    if (name == replayName(r)) {
      return r;
    }
  }
  throw std::invalid_argument("torchutil: counter_replay must be 'user' or 'kernel', got '" +
                              std::string(name) + "'");
}

bool hasSet(const std::vector<CounterSet>& sets, CounterSet s) {
  return std::find(sets.begin(), sets.end(), s) != sets.end();
}

bool needsRangeProfiler(const std::vector<CounterSet>& sets) {
  return hasSet(sets, CounterSet::Flops) || hasSet(sets, CounterSet::Throughput);
}

bool needsPmSampling(const std::vector<CounterSet>& sets) {
  return hasSet(sets, CounterSet::Timeline);
}

const std::vector<MetricDef>& rangeMetricDefs() {
  using S = CounterSet;
  using R = Reduce;
  // Names as `ncu --query-metrics --chip gh100` lists them (base metric), with the rollup the
  // range profiler needs. Later candidates are the spellings of other chips or variants.
  static const std::vector<MetricDef> defs{
      tensor("tensor_hgmma_fp16", "float16",
             {"sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum",
              "sm__ops_path_tensor_op_hgmma_src_fp16_dst_fp32.sum"}),
      tensor("tensor_hgmma_bf16", "bfloat16",
             {"sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum",
              "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum"}),
      tensor("tensor_hgmma_tf32", "tf32",
             {"sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum",
              "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32_sparsity_off.sum"}),
      // GH100 has no tensor-path op counter for fp8 (QGMMA): `ncu --query-metrics --chip gh100`
      // lists these paths for fp16, bf16, tf32, int8 and int1 only
      // (docs/results/counters/ncu_tensor_metrics.txt). Kept for chips that may name one.
      tensor("tensor_hgmma_fp8", "float8",
             {"sm__ops_path_tensor_op_hgmma_src_fp8_sparsity_off.sum",
              "sm__ops_path_tensor_op_hgmma_src_fp8.sum"}),
      // fp16 mma.sync accumulating in fp32 (as PyTorch's fp16 GEMMs and convolutions do): the
      // name seen on gh100; fp16-accumulating variants are not read.
      tensor("tensor_hmma_fp16", "float16",
             {"sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum",
              "sm__ops_path_tensor_op_hmma_src_fp16_sparsity_off.sum"}),
      tensor("tensor_hmma_bf16", "bfloat16",
             {"sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum",
              "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32_sparsity_off.sum"}),
      tensor("tensor_hmma_tf32", "tf32",
             {"sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum",
              "sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32_sparsity_off.sum"}),
      tensor("tensor_igmma_int8", "int8",
             {"sm__ops_path_tensor_op_igmma_src_int8.sum",
              "sm__ops_path_tensor_op_igmma_src_int8_sparsity_off.sum"},
             /*floating=*/false),
      tensor("tensor_imma_int8", "int8",
             {"sm__ops_path_tensor_op_imma_src_int8.sum",
              "sm__ops_path_tensor_op_imma_src_int8_sparsity_off.sum"},
             /*floating=*/false),
      metric("gmma_instructions", S::Flops, R::Sum, {"sm__inst_executed_pipe_tensor_op_gmma.sum"}),
      metric("fma_instructions", S::Flops, R::Sum, {"sm__inst_executed_pipe_fma.sum"}),
      metric("alu_instructions", S::Flops, R::Sum, {"sm__inst_executed_pipe_alu.sum"}),
      metric("sm_throughput_pct", S::Throughput, R::TimeWeighted,
             {"sm__throughput.avg.pct_of_peak_sustained_elapsed"}),
      metric("dram_throughput_pct", S::Throughput, R::TimeWeighted,
             {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
              "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"}),
      metric("tensor_active_pct", S::Throughput, R::TimeWeighted,
             {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
              "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
              "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"}),
      metric("achieved_occupancy_pct", S::Throughput, R::TimeWeighted,
             {"sm__warps_active.avg.pct_of_peak_sustained_active"}),
  };
  return defs;
}

const std::vector<MetricDef>& pmMetricDefs() {
  using S = CounterSet;
  using R = Reduce;
  static const std::vector<MetricDef> defs{
      metric("pm_sm_active_pct", S::Timeline, R::TimeWeighted,
             {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"}),
      metric("pm_tensor_active_pct", S::Timeline, R::TimeWeighted,
             {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
              "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
              "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_elapsed"}),
      metric("pm_dram_throughput_pct", S::Timeline, R::TimeWeighted,
             {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
              "dram__bytes.sum.pct_of_peak_sustained_elapsed"}),
  };
  return defs;
}

ResolvedMetrics resolveRangeMetrics(const std::vector<CounterSet>& sets, const KnownMetric& known) {
  return resolve(rangeMetricDefs(), sets, known);
}

ResolvedMetrics resolvePmMetrics(const std::vector<CounterSet>& sets, const KnownMetric& known) {
  return resolve(pmMetricDefs(), sets, known);
}

RangeValues decodeRange(const ResolvedMetrics& r, const std::vector<double>& values) {
  return decode<kNumRangeMetrics>(rangeMetricDefs(), r, values);
}

PmValues decodePmSample(const ResolvedMetrics& r, const std::vector<double>& values) {
  return decode<kNumPmMetrics>(pmMetricDefs(), r, values);
}

uint64_t pmIntervalNs(uint64_t leastNs, double windowSeconds, size_t maxSamples) {
  if (!(windowSeconds > 0) || !std::isfinite(windowSeconds) || maxSamples == 0) {
    return leastNs;
  }
  const double needed = std::ceil(windowSeconds * 1e9 / static_cast<double>(maxSamples) / 1000.0);
  return std::max(leastNs, static_cast<uint64_t>(needed) * 1000);
}

namespace {

double sumPaths(const RangeValues& v, bool floating, std::string_view dtype) {
  const std::vector<MetricDef>& defs = rangeMetricDefs();
  double total = 0;
  bool any = false;
  for (size_t i = 0; i < defs.size(); ++i) {
    const bool selected = floating ? defs[i].tensorFlops : defs[i].tensorIntOps;
    if (!selected || (!dtype.empty() && dtype != defs[i].dtype) || !std::isfinite(v[i])) {
      continue;
    }
    total += floating ? v[i] * kTensorOpFlopsPerUnit : v[i];
    any = true;
  }
  return any ? total : kNaN;
}

}  // namespace

double tensorFlops(const RangeValues& v) {
  return sumPaths(v, true, "");
}

double tensorFlops(const RangeValues& v, std::string_view dtype) {
  return sumPaths(v, true, dtype);
}

double tensorIntOps(const RangeValues& v) {
  return sumPaths(v, false, "");
}

double hwRatio(double hw, double nominal) {
  return std::isfinite(hw) && nominal > 0 && std::isfinite(nominal) ? hw / nominal : kNaN;
}

HwAggregate aggregate(const std::vector<HwKernel>& kernels) {
  const std::vector<MetricDef>& defs = rangeMetricDefs();
  HwAggregate a;
  a.values = nanArray<kNumRangeMetrics>();
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
  std::vector<size_t> order(rangeNames.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::vector<unsigned long long> key(rangeNames.size());
  for (size_t i = 0; i < rangeNames.size(); ++i) {
    const std::string& s = rangeNames[i];
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) {
      return order;  // not all numeric: the image's order
    }
    key[i] = std::strtoull(s.c_str(), nullptr, 10);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
  return order;
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
