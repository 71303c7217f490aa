#include "core/HwResult.h"
#include "core/NotANumber.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace torchutil::hw {
namespace {

// The op-table row that accounts for a kernel (its launching op's row), -1 when none.
int64_t rowOf(const KernelRecord& k, const std::vector<OpEvent>& events) {
  if (k.opEvent < 0 || static_cast<size_t>(k.opEvent) >= events.size()) {
    return -1;
  }
  return events[static_cast<size_t>(k.opEvent)].row;
}

// Each metric's value into the field the catalog names for it in one table (MetricDef::summary,
// ::op or ::kernel), where it names one.
template <size_t N, class E, class Set>
void setMetricFields(const std::vector<MetricDef>& defs, const std::array<double, N>& v,
                     std::optional<E> MetricDef::*field, const Set& set) {
  for (size_t m = 0; m < N && m < defs.size(); ++m) {
    if (const std::optional<E>& f = defs[m].*field) {
      set(*f, v[m]);
    }
  }
}

// Whether a row's matrix work ran in a dtype whose tensor paths v did not read.
bool unreadPath(const RangeValues& v, const OpStats& row) {
  const std::string_view path = tensorPathDtype(row.dtype);
  return row.matrixFlops > 0 && !path.empty() && std::isnan(tensorFlops(v, path));
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
    const RangeValues& v = aggregate(hw.kernels).values;
    setMetricFields(rangeMetricDefs(), v, &MetricDef::summary, set);
    const double flops = tensorFlops(v);
    set(Field::hw_tensor_flops, flops);
    set(Field::hw_flops_ratio, hwRatio(flops, matrixFlops));
    for (const TensorDtypeField& d : tensorDtypeFields()) {
      set(d.field, tensorFlops(v, d.dtype));
    }
    set(Field::hw_tensor_int8_ops, tensorIntOps(v));
    set(Field::counter_kernels, static_cast<double>(hw.kernels.size()));
    set(Field::counter_passes, static_cast<double>(hw.passes));
    set(Field::counter_seconds, hw.seconds);
    set(Field::counter_setup_seconds, hw.setupSeconds);
    set(Field::counter_pass_seconds, hw.passSeconds);
    set(Field::counter_decode_seconds, hw.decodeSeconds);
  }
  if (hw.timeline) {
    const PmAggregate window = pmOver(hw.samples, hw.offsetNs, hw.windowStartNs, hw.windowEndNs);
    setMetricFields(pmMetricDefs(), window.values, &MetricDef::summary, set);
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
      const RangeValues& v = perRow[r].values;
      setMetricFields(rangeMetricDefs(), v, &MetricDef::op,
                      [&](OpField f, double x) { ops.set(r, f, x); });
      const double flops = unreadPath(v, rows[r]) ? kNaN : tensorFlops(v);
      ops.set(r, OpField::hw_tensor_flops, flops);
      ops.set(r, OpField::hw_flops_ratio, hwRatio(flops, static_cast<double>(rows[r].matrixFlops)));
    }
  }
  if (hw.timeline && !hw.kernelSpans.empty()) {
    const std::vector<PmAggregate> pm = pmByRow(hw.samples, hw.offsetNs, hw.kernelSpans, n);
    for (size_t r = 0; r < n; ++r) {
      if (pm[r].samples == 0) {
        continue;
      }
      setMetricFields(pmMetricDefs(), pm[r].values, &MetricDef::op,
                      [&](OpField f, double x) { ops.set(r, f, x); });
    }
  }
}

void markUncountedTensorWork(std::vector<double>& summary, std::string* status, const HwResult& hw,
                             const std::vector<OpStats>& rows) {
  if (!hw.ranges) {
    return;
  }
  const RangeValues& v = aggregate(hw.kernels).values;
  std::map<std::string, std::pair<std::vector<std::string>, int64_t>>
      missed;  // dtype -> ops, FLOPs
  for (const OpStats& r : rows) {
    if (unreadPath(v, r)) {
      auto& [ops, flops] = missed[std::string(tensorPathDtype(r.dtype))];
      if (std::find(ops.begin(), ops.end(), r.op) == ops.end()) {
        ops.push_back(r.op);
      }
      flops = saturatingAdd(flops, r.matrixFlops);
    }
  }
  if (missed.empty()) {
    return;
  }
  for (Field f : {Field::hw_tensor_flops, Field::hw_flops_ratio}) {
    if (static_cast<size_t>(f) < summary.size()) {
      summary[static_cast<size_t>(f)] = kNaN;
    }
  }
  std::string why;
  for (const auto& [dtype, opsAndFlops] : missed) {
    std::string ops;
    for (const std::string& op : opsAndFlops.first) {
      ops += (ops.empty() ? "" : ", ") + op;
    }
    why += std::string(why.empty() ? "" : "; ") +
           "flops: this GPU has no tensor-path counter for " + dtype + ", the dtype of " +
           std::to_string(opsAndFlops.second) + " counted matrix FLOPs (" + ops +
           "): hw_tensor_flops and hw_flops_ratio are NaN for those ops and for the forward";
  }
  *status = *status == "on" ? "on, partial: " + why : *status + "; " + why;
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
    setMetricFields(rangeMetricDefs(), v, &MetricDef::kernel,
                    [&](KernelField f, double x) { kernels.set(row, f, x); });
    kernels.set(row, KernelField::hw_tensor_flops, tensorFlops(v));
  }
}

std::vector<CounterTrack> counterTracks(const HwResult& hw) {
  std::vector<CounterTrack> tracks;
  if (!hw.timeline) {
    return tracks;
  }
  const std::vector<MetricDef>& defs = pmMetricDefs();
  for (size_t m = 0; m < kNumPmMetrics; ++m) {
    CounterTrack t{defs[m].track, {}};
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
