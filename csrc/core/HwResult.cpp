#include "core/HwResult.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace torchutil::hw {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double at(const RangeValues& v, RangeMetric m) {
  return v[static_cast<size_t>(m)];
}

double at(const PmValues& v, PmMetric m) {
  return v[static_cast<size_t>(m)];
}

// The op-table row that accounts for a kernel (its launching op's row), -1 when none.
int64_t rowOf(const KernelRecord& k, const std::vector<OpEvent>& events) {
  if (k.opEvent < 0 || static_cast<size_t>(k.opEvent) >= events.size()) {
    return -1;
  }
  return events[static_cast<size_t>(k.opEvent)].row;
}

// The values the summary, op and kernel rows share, by field of table E.
template <class E>
void setCommon(ResultTable& t, size_t row, const RangeValues& v) {
  t.set(row, E::sm_throughput_pct, at(v, RangeMetric::SmThroughputPct));
  t.set(row, E::dram_throughput_pct, at(v, RangeMetric::DramThroughputPct));
  t.set(row, E::tensor_active_pct, at(v, RangeMetric::TensorActivePct));
  t.set(row, E::achieved_occupancy_pct, at(v, RangeMetric::AchievedOccupancyPct));
  t.set(row, E::hw_tensor_flops, tensorFlops(v));
}

}  // namespace

bool matchRanges(const std::vector<RangeValues>& ranges, const std::vector<KernelRecord>& kernels,
                 const std::vector<OpEvent>& events, HwResult* out, std::string* why) {
  std::vector<size_t> counted;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!kernels[i].timed) {
      counted.push_back(i);
    }
  }
  std::stable_sort(counted.begin(), counted.end(), [&](size_t a, size_t b) {
    const KernelRecord& x = kernels[a];
    const KernelRecord& y = kernels[b];
    return x.startNs != y.startNs ? x.startNs < y.startNs : x.correlationId < y.correlationId;
  });
  std::vector<bool> isKernel, isMemset;
  for (size_t i : counted) {
    isKernel.push_back(kernels[i].kind == KernelRecord::Kind::Kernel);
    isMemset.push_back(kernels[i].kind == KernelRecord::Kind::Memset);
  }
  const std::vector<size_t> matched = matchRangesToRecords(ranges.size(), isKernel, isMemset, why);
  if (matched.size() != ranges.size() || ranges.empty()) {
    if (ranges.empty() && why != nullptr) {
      *why = "the range profiler returned no ranges";
    }
    return false;
  }
  out->kernels.clear();
  out->kernelIndex.clear();
  for (size_t r = 0; r < ranges.size(); ++r) {
    const size_t index = counted[matched[r]];
    const KernelRecord& k = kernels[index];
    out->kernels.push_back(HwKernel{ranges[r], k.durationNs(), rowOf(k, events)});
    out->kernelIndex.push_back(index);
  }
  out->ranges = true;
  return true;
}

std::vector<Span> attributedSpans(const std::vector<KernelRecord>& kernels,
                                  const std::vector<OpEvent>& events) {
  std::vector<Span> spans;
  for (const KernelRecord& k : kernels) {
    if (k.timed) {
      spans.push_back(Span{k.startNs, k.endNs, rowOf(k, events)});
    }
  }
  return spans;
}

void fillSummary(std::vector<double>& summary, const HwResult& hw, double matrixFlops) {
  const auto set = [&](Field f, double x) {
    if (static_cast<size_t>(f) < summary.size()) {
      summary[static_cast<size_t>(f)] = x;
    }
  };
  if (hw.ranges) {
    const HwAggregate total = aggregate(hw.kernels);
    const RangeValues& v = total.values;
    const double flops = tensorFlops(v);
    set(Field::hw_tensor_flops, flops);
    set(Field::hw_flops_ratio, hwRatio(flops, matrixFlops));
    set(Field::hw_tensor_flops_fp16, tensorFlops(v, "float16"));
    set(Field::hw_tensor_flops_bf16, tensorFlops(v, "bfloat16"));
    set(Field::hw_tensor_flops_tf32, tensorFlops(v, "tf32"));
    set(Field::hw_tensor_flops_fp8, tensorFlops(v, "float8"));
    set(Field::hw_tensor_int8_ops, tensorIntOps(v));
    set(Field::hw_gmma_instructions, at(v, RangeMetric::GmmaInstructions));
    set(Field::hw_fma_instructions, at(v, RangeMetric::FmaInstructions));
    set(Field::hw_alu_instructions, at(v, RangeMetric::AluInstructions));
    set(Field::sm_throughput_pct, at(v, RangeMetric::SmThroughputPct));
    set(Field::dram_throughput_pct, at(v, RangeMetric::DramThroughputPct));
    set(Field::tensor_active_pct, at(v, RangeMetric::TensorActivePct));
    set(Field::achieved_occupancy_pct, at(v, RangeMetric::AchievedOccupancyPct));
    set(Field::counter_kernels, static_cast<double>(hw.kernels.size()));
    set(Field::counter_passes, static_cast<double>(hw.passes));
    set(Field::counter_seconds, hw.seconds);
  }
  if (hw.timeline) {
    const PmAggregate window = pmOver(hw.samples, hw.offsetNs, hw.windowStartNs, hw.windowEndNs);
    set(Field::pm_sm_active_pct, at(window.values, PmMetric::SmActivePct));
    set(Field::pm_tensor_active_pct, at(window.values, PmMetric::TensorActivePct));
    set(Field::pm_dram_throughput_pct, at(window.values, PmMetric::DramThroughputPct));
    set(Field::pm_samples, static_cast<double>(hw.samples.size()));
    set(Field::pm_interval_us, static_cast<double>(hw.intervalNs) / 1e3);
    set(Field::pm_clock_offset_us, static_cast<double>(hw.offsetNs) / 1e3);
  }
}

void fillOpRows(ResultTable& ops, const HwResult& hw, const std::vector<OpStats>& rows) {
  const size_t n = std::min(ops.rows(), rows.size());
  if (hw.ranges) {
    const std::vector<HwAggregate> perRow = aggregateByRow(hw.kernels, n);
    for (size_t r = 0; r < n; ++r) {
      if (perRow[r].kernels == 0) {
        continue;
      }
      setCommon<OpField>(ops, r, perRow[r].values);
      ops.set(r, OpField::hw_fma_instructions, at(perRow[r].values, RangeMetric::FmaInstructions));
      ops.set(r, OpField::hw_alu_instructions, at(perRow[r].values, RangeMetric::AluInstructions));
      ops.set(r, OpField::hw_flops_ratio,
              hwRatio(tensorFlops(perRow[r].values), static_cast<double>(rows[r].matrixFlops)));
    }
  }
  if (hw.timeline && !hw.kernelSpans.empty()) {
    const std::vector<PmAggregate> pm = pmByRow(hw.samples, hw.offsetNs, hw.kernelSpans, n);
    for (size_t r = 0; r < n; ++r) {
      if (pm[r].samples == 0) {
        continue;
      }
      ops.set(r, OpField::pm_sm_active_pct, at(pm[r].values, PmMetric::SmActivePct));
      ops.set(r, OpField::pm_tensor_active_pct, at(pm[r].values, PmMetric::TensorActivePct));
      ops.set(r, OpField::pm_dram_throughput_pct, at(pm[r].values, PmMetric::DramThroughputPct));
    }
  }
}

void fillKernelRows(ResultTable& kernels, const HwResult& hw) {
  if (!hw.ranges) {
    return;
  }
  for (size_t i = 0; i < hw.kernels.size() && i < hw.kernelIndex.size(); ++i) {
    const size_t row = hw.kernelIndex[i];
    if (row >= kernels.rows()) {
      continue;
    }
    const RangeValues& v = hw.kernels[i].values;
    setCommon<KernelField>(kernels, row, v);
    kernels.set(row, KernelField::hw_gmma_instructions, at(v, RangeMetric::GmmaInstructions));
    kernels.set(row, KernelField::hw_fma_instructions, at(v, RangeMetric::FmaInstructions));
    kernels.set(row, KernelField::hw_alu_instructions, at(v, RangeMetric::AluInstructions));
  }
}

std::vector<CounterTrack> counterTracks(const HwResult& hw) {
  std::vector<CounterTrack> tracks;
  if (!hw.timeline) {
    return tracks;
  }
  const char* names[kNumPmMetrics] = {"PM: SM active %", "PM: tensor pipe active %",
                                      "PM: DRAM throughput %"};
  for (size_t m = 0; m < kNumPmMetrics; ++m) {
    CounterTrack t{names[m], {}};
    for (const PmSample& s : hw.samples) {
      if (!std::isfinite(s.values[m])) {
        continue;
      }
      const int64_t ns = static_cast<int64_t>(s.startNs) + hw.offsetNs;
      t.points.emplace_back(ns > 0 ? static_cast<uint64_t>(ns) : 0, s.values[m]);
    }
    if (!t.points.empty()) {
      tracks.push_back(std::move(t));
    }
  }
  return tracks;
}

}  // namespace torchutil::hw
