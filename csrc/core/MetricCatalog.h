#pragma once
// The hardware metrics a profile can read, torch-free: the counter sets, one table row per
// metric (the names CUPTI knows it by on each chip, how it combines over kernels, and the result
// fields it fills), candidate resolution against what a chip knows, the decoding of CUPTI's values
// into records indexed by metric, and the conversion of tensor-path counters into FLOPs.
//
// Adding a metric: one row in rangeMetricDefs() / pmMetricDefs() (and its enumerator here, at
// the same position), and the fields it fills in core/ResultSchema.h; core/HwResult.cpp loops
// over the rows, so nothing else changes (docs/architecture.md, "Adding a counter metric").
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ResultSchema.h"

namespace torchutil::hw {

// flops: tensor-path math per path and dtype, FMA/ALU pipe instructions (range profiler).
// throughput: SM and DRAM throughput %, tensor-pipe activity %, achieved occupancy (range
// profiler). timeline: GPU-wide PM sampling over the traced forwards (else forwards after the
// timed ones).
enum class CounterSet : uint8_t { Flops, Throughput, Timeline };

// How a metric combines over kernels: counts add up; percentages are means weighted by kernel
// duration (by overlap time for PM samples).
enum class Reduce : uint8_t { Sum, TimeWeighted };

// FLOPs per unit of an sm__ops_path_tensor_op_* counter: the one place this conversion is
// stated. The ops-path counters are taken to count floating-point operations with a
// multiply-add as two (as 2*M*N*K counts a GEMM), so the factor is 1. This is an assumption
// to be confirmed on the H200: tests/test_counters_cuda.py runs fp16, bf16 and tf32 GEMMs whose
// shapes tile evenly and prints hw_tensor_flops / (2*M*N*K) for each; a ratio of 0.5 or 2
// there means this factor is wrong for that path, and it is changed here, nowhere else.
constexpr double kTensorOpFlopsPerUnit = 1.0;

// Range-profiler metrics (per kernel), in table order.
enum class RangeMetric : int {
  TensorHgmmaFp16,  // wgmma (sm90) fp16 inputs
  TensorHgmmaBf16,
  TensorHgmmaTf32,
  TensorHgmmaFp8,
  TensorHmmaFp16,  // mma.sync fp16 inputs (pre-Hopper kernels, small shapes)
  TensorHmmaBf16,
  TensorHmmaTf32,
  TensorIgmmaInt8,  // integer: ops, not FLOPs
  TensorImmaInt8,
  GmmaInstructions,  // warp-level tensor instructions (a cross-check; not converted)
  FmaInstructions,   // FMA pipe warp instructions (not converted: no per-thread op count)
  AluInstructions,
  SmThroughputPct,
  DramThroughputPct,
  TensorActivePct,
  AchievedOccupancyPct,
  kCount
};
constexpr size_t kNumRangeMetrics = static_cast<size_t>(RangeMetric::kCount);

// PM-sampling metrics (GPU-wide, per sample).
enum class PmMetric : int { SmActivePct, TensorActivePct, DramThroughputPct, kCount };
constexpr size_t kNumPmMetrics = static_cast<size_t>(PmMetric::kCount);

struct MetricDef {
  const char* key;  // short name used in messages ("tensor_hgmma_fp16")
  CounterSet set;
  Reduce reduce;
  // Full metric names (base metric + rollup + submetric), the first one the chip knows is
  // read: names differ between architectures, and one unknown name makes CUPTI refuse a
  // whole configuration.
  std::vector<std::string> candidates;
  // Tensor paths: the arithmetic ("float16", "bfloat16", "tf32", "float8", "int8") and
  // whether the counter converts to FLOPs (kTensorOpFlopsPerUnit); integer paths are ops.
  const char* dtype = "";
  bool tensorFlops = false;
  bool tensorIntOps = false;
  // The result fields that take the value as it is: the summary's (over the forward, or the
  // sampled window), an op row's (over its kernels) and a kernel row's; none where the metric
  // only enters derived fields (the tensor paths: hw_tensor_flops, tensorDtypeFields()).
  std::optional<Field> summary = std::nullopt;
  std::optional<OpField> op = std::nullopt;
  std::optional<KernelField> kernel = std::nullopt;
  const char* track = "";  // PM metrics: the Chrome trace's counter track
};

const std::vector<MetricDef>& rangeMetricDefs();  // indexed by RangeMetric
const std::vector<MetricDef>& pmMetricDefs();     // indexed by PmMetric

// The summary field of each floating-point tensor dtype: hw_tensor_flops of its paths.
struct TensorDtypeField {
  const char* dtype;
  Field field;
};
const std::vector<TensorDtypeField>& tensorDtypeFields();

// The tensor-path arithmetic ("float16", "bfloat16", "float8") an op row's dtype (its first
// input's: "float8_e4m3fn") runs its matrix work in, "" where none is certain: float32 runs on
// the tf32 paths only where TF32 is allowed, else on the FMA pipe (no tensor path to miss).
std::string_view tensorPathDtype(std::string_view tensorDtype);

// The metrics a profile reads: for each table entry in the requested sets, the metric name
// chosen (the first candidate `known` accepts), or the entry's key in `missing`.
struct ResolvedMetrics {
  std::vector<int> index;          // table index of each chosen name
  std::vector<std::string> names;  // the names to configure, in table order
  std::vector<std::string> missing;
  bool empty() const { return names.empty(); }
};
using KnownMetric = std::function<bool(const std::string&)>;
ResolvedMetrics resolveRangeMetrics(const std::vector<CounterSet>& sets, const KnownMetric& known);
ResolvedMetrics resolvePmMetrics(const std::vector<CounterSet>& sets, const KnownMetric& known);

using RangeValues = std::array<double, kNumRangeMetrics>;  // NaN: not read
using PmValues = std::array<double, kNumPmMetrics>;

// One range's values (in the order of r.names) into a record indexed by RangeMetric, NaN where
// nothing was read. Negative or non-finite values (CUPTI's "no data") become NaN too.
RangeValues decodeRange(const ResolvedMetrics& r, const std::vector<double>& values);
PmValues decodePmSample(const ResolvedMetrics& r, const std::vector<double>& values);

// Hardware FLOPs of the tensor paths (sum of each floating-point path x kTensorOpFlopsPerUnit);
// NaN when no tensor path was read. With dtype, only the paths of that dtype.
double tensorFlops(const RangeValues& v);
double tensorFlops(const RangeValues& v, std::string_view dtype);
double tensorIntOps(const RangeValues& v);  // integer tensor paths, ops
// hw / nominal; NaN when nominal is not positive or hw is NaN.
double hwRatio(double hw, double nominal);

}  // namespace torchutil::hw
