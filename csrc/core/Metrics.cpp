#include "core/Metrics.h"
#include "core/NotANumber.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace torchutil {
namespace {

double ratio(double num, double den) {
  return den > 0.0 && std::isfinite(den) ? num / den : kNaN;
}

}  // namespace

std::vector<double> summarize(const SummaryInputs& in) {
  std::vector<double> v(kNumFields, kNaN);
  auto set = [&](Field f, double x) { v[static_cast<size_t>(f)] = x; };
  auto counted = [&](int64_t n) { return in.flopsUnknown ? kNaN : static_cast<double>(n); };
  const double flops = counted(in.totals.flops());
  const double matrix = counted(in.totals.matrixFlops);
  const double achieved = ratio(flops, in.secondsPerForward);
  set(Field::flops, flops);
  set(Field::matrix_flops, matrix);
  set(Field::vector_flops, counted(in.totals.vectorFlops));
  set(Field::useful_flops, counted(in.totals.usefulFlops()));
  set(Field::bytes, static_cast<double>(in.totals.bytes));
  set(Field::arithmetic_intensity, ratio(flops, static_cast<double>(in.totals.bytes)));
  set(Field::seconds, in.secondsPerForward);
  set(Field::params, in.params);
  set(Field::seconds_ci_low, in.secondsInterval.low);
  set(Field::seconds_ci_high, in.secondsInterval.high);
  set(Field::seconds_relative_ci, in.secondsInterval.relativeHalfWidth());
  const double bytesPerSecond = ratio(static_cast<double>(in.totals.bytes), in.secondsPerForward);
  set(Field::achieved_bytes_per_second, bytesPerSecond);
  set(Field::peak_bytes_per_second, in.peakBytesPerSecond);
  set(Field::bandwidth_utilization, ratio(bytesPerSecond, in.peakBytesPerSecond));
  set(Field::inputs_per_second, ratio(static_cast<double>(in.batchSize), in.secondsPerForward));
  set(Field::achieved_flops_per_second, achieved);
  set(Field::peak_flops_per_second, in.peakFlopsPerSecond);
  set(Field::utilization, ratio(achieved, in.peakFlopsPerSecond));
  set(Field::matrix_utilization, ratio(ratio(matrix, in.secondsPerForward), in.peakFlopsPerSecond));
  set(Field::batch_size, static_cast<double>(in.batchSize));
  set(Field::iterations, static_cast<double>(in.iterations));
  set(Field::counted_op_calls, static_cast<double>(in.totals.countedCalls));
  set(Field::unknown_op_calls, static_cast<double>(in.totals.unknownCalls));
  set(Field::cuda_graph, in.cudaGraph ? 1.0 : 0.0);
  set(Field::traced, in.trace != nullptr ? 1.0 : 0.0);
  if (in.trace != nullptr) {
    const TraceStats& t = *in.trace;
    set(Field::kernels_per_forward, t.kernelsPerForward);
    set(Field::kernel_seconds, t.kernelSeconds);
    set(Field::gpu_busy_seconds, t.busySeconds);
    set(Field::gpu_busy_fraction, ratio(t.busySeconds, in.secondsPerForward));
    set(Field::kernel_utilization, ratio(ratio(flops, t.kernelSeconds), in.peakFlopsPerSecond));
    set(Field::kernel_bandwidth_utilization,
        ratio(ratio(static_cast<double>(in.totals.bytes), t.kernelSeconds), in.peakBytesPerSecond));
    set(Field::traced_forwards, static_cast<double>(in.tracedForwards));
    set(Field::unattributed_kernel_seconds, t.unattributedSeconds);
  }
  if (in.energy != nullptr && in.energy->measured()) {
    const double joules = in.energy->perForward.value;
    set(Field::joules, joules);
    set(Field::joules_ci_low, in.energy->perForward.low);
    set(Field::joules_ci_high, in.energy->perForward.high);
    set(Field::watts, in.energy->watts);
    set(Field::flops_per_joule, ratio(flops, joules));
    set(Field::inputs_per_joule, ratio(static_cast<double>(in.batchSize), joules));
    set(Field::energy_seconds, in.energy->seconds);
    set(Field::energy_wait_seconds, in.energy->waitSeconds);
    set(Field::energy_drain_seconds, in.energy->drainSeconds);
  }
  set(Field::other_thread_op_calls, static_cast<double>(in.totals.otherThreadCalls));
  set(Field::count_saturated, in.totals.saturated ? 1.0 : 0.0);
  // A peak must bound what the device does; a measured one (a timed GEMM on a CPU) can fall
  // below what the forward reached. Say so, and by how much, rather than report > 1 silently.
  double exceeded = 0.0;
  for (Field f : {Field::utilization, Field::kernel_utilization}) {
    const double u = v[static_cast<size_t>(f)];
    if (std::isfinite(u) && u > 1.0) {
      exceeded = std::max(exceeded, u);
    }
  }
  set(Field::peak_exceeded, exceeded);
  return v;
}

void addOpRow(ResultTable& table, const OpStats& s, const OpKernelStats* k, double peak,
              double peakBytesPerSecond) {
  const size_t row = table.addRow();
  const double flops = static_cast<double>(s.flops());
  table.setText(row, OpField::op, s.op);
  table.setText(row, OpField::module, s.module);
  table.setText(row, OpField::dtype, s.dtype);
  table.setText(row, OpField::op_class, opClassName(s.opClass));
  table.set(row, OpField::calls, static_cast<double>(s.calls));
  table.set(row, OpField::matrix_flops, static_cast<double>(s.matrixFlops));
  table.set(row, OpField::vector_flops, static_cast<double>(s.vectorFlops));
  table.set(row, OpField::useful_flops, static_cast<double>(s.usefulFlops()));
  table.set(row, OpField::bytes, static_cast<double>(s.bytes));
  table.set(row, OpField::arithmetic_intensity, ratio(flops, static_cast<double>(s.bytes)));
  if (k != nullptr) {
    const double achieved = k->seconds > 0 ? flops / k->seconds : kNaN;
    table.set(row, OpField::kernels, k->kernels);
    table.set(row, OpField::kernel_seconds, k->seconds);
    table.set(row, OpField::kernel_flops_per_second, achieved);
    table.set(row, OpField::kernel_utilization, ratio(achieved, peak));
    table.set(row, OpField::kernel_bandwidth_utilization,
              ratio(ratio(static_cast<double>(s.bytes), k->seconds), peakBytesPerSecond));
    table.set(row, OpField::lost_seconds,
              peak > 0 && std::isfinite(peak) ? k->seconds - flops / peak : kNaN);
  }
}

double median(std::vector<double> values) {
  if (values.empty()) {
    return kNaN;
  }
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double hi = values[mid];
  if (values.size() % 2 == 1) {
    return hi;
  }
  const double lo =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lo + hi);
}

}  // namespace torchutil

namespace torchutil {

std::optional<PeakDtype> dominantPeakDtype(const CountTable& table, bool tf32Matmul,
                                           bool tf32Conv) {
  constexpr size_t n = static_cast<size_t>(PeakDtype::kCount);
  std::pair<int64_t, int64_t> score[n] = {};
  bool seen[n] = {};
  for (const OpStats& r : table.rows()) {
    const bool conv = r.op.find("conv") != std::string::npos;
    const auto d = peakDtypeOfTensorDtype(r.dtype, conv ? tf32Conv : tf32Matmul);
    if (!d.has_value()) {
      continue;
    }
    seen[static_cast<size_t>(*d)] = true;
    score[static_cast<size_t>(*d)].first += r.matrixFlops;
    score[static_cast<size_t>(*d)].second += r.flops();
  }
  // Only dtypes that occur compete: rows without FLOPs (copies) still name theirs.
  std::optional<size_t> best;
  for (size_t i = 0; i < n; ++i) {
    if (seen[i] && (!best.has_value() || score[i] > score[*best])) {
      best = i;
    }
  }
  if (!best.has_value()) {
    return std::nullopt;
  }
  return static_cast<PeakDtype>(*best);
}

}  // namespace torchutil
