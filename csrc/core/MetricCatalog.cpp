#include "core/MetricCatalog.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/HwCounters.h"
#include "core/NotANumber.h"

namespace torchutil::hw {
namespace {

// A value CUPTI reported: finite and not negative (it reports -1 / NaN for "no data").
bool usable(double v) {
  return std::isfinite(v) && v >= 0.0;
}

// A tensor path: read by the flops set, summed, and entering only the derived fields.
MetricDef tensor(const char* key, const char* dtype, std::vector<std::string> names,
                 bool floating = true) {
  MetricDef d{key, CounterSet::Flops, Reduce::Sum, std::move(names)};
  d.dtype = dtype;
  d.tensorFlops = floating;
  d.tensorIntOps = !floating;
  return d;
}

// A metric whose value fills the given fields as it is (std::nullopt: none of that table).
MetricDef metric(const char* key, CounterSet set, Reduce reduce, std::vector<std::string> names,
                 std::optional<Field> summary, std::optional<OpField> op,
                 std::optional<KernelField> kernel) {
  MetricDef d{key, set, reduce, std::move(names)};
  d.summary = summary;
  d.op = op;
  d.kernel = kernel;
  return d;
}

// A PM metric: the sampled window's summary field, an op row's field, and its counter track.
MetricDef sampled(const char* key, std::vector<std::string> names, Field summary, OpField op,
                  const char* track) {
  MetricDef d = metric(key, CounterSet::Timeline, Reduce::TimeWeighted, std::move(names), summary,
                       op, std::nullopt);
  d.track = track;
  return d;
}

template <size_t N>
std::array<double, N> decode(const std::vector<MetricDef>& defs, const ResolvedMetrics& r,
                             const std::vector<double>& values) {
  std::array<double, N> out;
  out.fill(kNaN);
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

const std::vector<MetricDef>& rangeMetricDefs() {
  using S = CounterSet;
  using R = Reduce;
  constexpr auto none = std::nullopt;
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
      metric("gmma_instructions", S::Flops, R::Sum, {"sm__inst_executed_pipe_tensor_op_gmma.sum"},
             Field::hw_gmma_instructions, none, KernelField::hw_gmma_instructions),
      metric("fma_instructions", S::Flops, R::Sum, {"sm__inst_executed_pipe_fma.sum"},
             Field::hw_fma_instructions, OpField::hw_fma_instructions,
             KernelField::hw_fma_instructions),
      metric("alu_instructions", S::Flops, R::Sum, {"sm__inst_executed_pipe_alu.sum"},
             Field::hw_alu_instructions, OpField::hw_alu_instructions,
             KernelField::hw_alu_instructions),
      metric("sm_throughput_pct", S::Throughput, R::TimeWeighted,
             {"sm__throughput.avg.pct_of_peak_sustained_elapsed"}, Field::sm_throughput_pct,
             OpField::sm_throughput_pct, KernelField::sm_throughput_pct),
      metric("dram_throughput_pct", S::Throughput, R::TimeWeighted,
             {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
              "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"},
             Field::dram_throughput_pct, OpField::dram_throughput_pct,
             KernelField::dram_throughput_pct),
      metric("tensor_active_pct", S::Throughput, R::TimeWeighted,
             {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
              "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
              "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"},
             Field::tensor_active_pct, OpField::tensor_active_pct, KernelField::tensor_active_pct),
      metric("achieved_occupancy_pct", S::Throughput, R::TimeWeighted,
             {"sm__warps_active.avg.pct_of_peak_sustained_active"}, Field::achieved_occupancy_pct,
             OpField::achieved_occupancy_pct, KernelField::achieved_occupancy_pct),
  };
  return defs;
}

const std::vector<MetricDef>& pmMetricDefs() {
  static const std::vector<MetricDef> defs{
      sampled("pm_sm_active_pct", {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"},
              Field::pm_sm_active_pct, OpField::pm_sm_active_pct, "PM: SM active %"),
      sampled("pm_tensor_active_pct",
              {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
               "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
               "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_elapsed"},
              Field::pm_tensor_active_pct, OpField::pm_tensor_active_pct,
              "PM: tensor pipe active %"),
      sampled("pm_dram_throughput_pct",
              {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
               "dram__bytes.sum.pct_of_peak_sustained_elapsed"},
              Field::pm_dram_throughput_pct, OpField::pm_dram_throughput_pct,
              "PM: DRAM throughput %"),
  };
  return defs;
}

const std::vector<TensorDtypeField>& tensorDtypeFields() {
  static const std::vector<TensorDtypeField> fields{
      {"float16", Field::hw_tensor_flops_fp16},
      {"bfloat16", Field::hw_tensor_flops_bf16},
      {"tf32", Field::hw_tensor_flops_tf32},
      {"float8", Field::hw_tensor_flops_fp8},
  };
  return fields;
}

std::string_view tensorPathDtype(std::string_view tensorDtype) {
  if (tensorDtype == "float16" || tensorDtype == "bfloat16") {
    return tensorDtype;
  }
  if (tensorDtype.substr(0, 6) == "float8") {  // float8_e4m3fn, float8_e5m2, ...
    return "float8";
  }
  return "";
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

}  // namespace torchutil::hw
