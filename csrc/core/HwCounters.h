#pragma once
// What the GPU's own counters saw, torch-free: the named counter sets a profile can ask for
// (counters="flops" | "throughput" | "timeline"), the metrics behind each, the conversion of
// tensor-path counters into FLOPs (stated once, kTensorOpFlopsPerUnit), the decoding of one
// range profiler range (metric name -> value) into a per-kernel record, per-op and per-forward
// aggregation, and the alignment of PM samples with kernel intervals. The CUPTI side that reads
// the counters is csrc/cupti/RangeProfiler.cpp and csrc/cupti/PmSampler.cpp; everything here is
// tested on synthetic counter data (tests/cpp/HwCountersTest.cpp).
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace torchutil::hw {

// flops: tensor-path math per path and dtype, FMA/ALU pipe instructions (range profiler).
// throughput: SM and DRAM throughput %, tensor-pipe activity %, achieved occupancy (range
// profiler). timeline: GPU-wide PM sampling over the traced forwards (else forwards after the
// timed ones).
enum class CounterSet : uint8_t { Flops, Throughput, Timeline };
const char* counterSetName(CounterSet s);

// Names -> sets, in first-mention order without repeats. "all" is every set. Throws
// std::invalid_argument naming the value and the valid names for anything else (and for "").
std::vector<CounterSet> parseCounterSets(const std::vector<std::string>& names);
bool hasSet(const std::vector<CounterSet>& sets, CounterSet s);
// Whether the sets need the range profiler (flops, throughput) / PM sampling (timeline).
bool needsRangeProfiler(const std::vector<CounterSet>& sets);
bool needsPmSampling(const std::vector<CounterSet>& sets);

// How the range profiler gets its passes: "user" (one more forward of the model per pass, the
// default: each pass is a forward torchutil runs anyway) or "kernel" (CUPTI replays each kernel
// itself, saving and restoring device memory, within one forward, as ncu does: for forwards
// that cannot be run again unchanged).
enum class Replay : uint8_t { User, Kernel };
const char* replayName(Replay r);
// Throws std::invalid_argument naming the value for anything but "user" and "kernel".
Replay parseReplay(std::string_view name);

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
};

const std::vector<MetricDef>& rangeMetricDefs();  // indexed by RangeMetric
const std::vector<MetricDef>& pmMetricDefs();     // indexed by PmMetric

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

// The most PM samples one sampled window may take: half of what CUPTI's 32 MB hardware buffer
// held on the H200 (4,043 samples fit, 6,059 overflowed; benchmarks/pm_probe.cu). The buffer is
// decoded after sampling only: decoding takes ~30 us of CPU per sample, so no decoding thread
// keeps up with a sample every 10 us.
constexpr size_t kPmBufferSamples = 2400;
// The PM interval for a window expected to last windowSeconds: leastNs, or longer where the
// window would take more than maxSamples samples (then rounded up to a whole microsecond).
uint64_t pmIntervalNs(uint64_t leastNs, double windowSeconds, size_t maxSamples);

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

// ---- PM sampling ----

struct PmSample {
  uint64_t startNs = 0;  // the sampler's clock
  uint64_t endNs = 0;
  PmValues values;
};

struct Span {
  uint64_t start = 0;
  uint64_t end = 0;
  int64_t row = -1;  // op-table row, for kernels
};

struct PmAggregate {
  PmValues values;  // overlap-weighted means, NaN where nothing overlapped
  uint64_t overlapNs = 0;
  size_t samples = 0;  // samples that overlapped
};

// Overlap-weighted means of the samples (shifted by offsetNs onto the kernels' clock) over
// [start, end).
PmAggregate pmOver(const std::vector<PmSample>& samples, int64_t offsetNs, uint64_t start,
                   uint64_t end);
// Per op-table row: each kernel takes the samples that overlap it, weighted by the overlap.
std::vector<PmAggregate> pmByRow(const std::vector<PmSample>& samples, int64_t offsetNs,
                                 const std::vector<Span>& kernels, size_t numRows);

// The offset (ns, added to sample times) that best lines the samples up with the kernels'
// clock: starts from a guess (0 when the samples overlap [windowStart, windowEnd], else the
// shift that puts the first sample at windowStart) and searches +-searchNs around it in steps
// of stepNs for the largest sum of activity x busy fraction, where activity is `metric` and the
// busy fraction is the share of the shifted sample that the union of `busy` covers. Ties go
// to the offset closest to the guess. Returns the guess when no sample has activity.
struct PmAlignment {
  int64_t offsetNs = 0;
  int64_t guessNs = 0;
  double score = 0;  // mean busy fraction of the active samples at the offset found (0..1)
};
PmAlignment alignPmSamples(const std::vector<PmSample>& samples, const std::vector<Span>& busy,
                           uint64_t windowStart, uint64_t windowEnd, PmMetric metric,
                           int64_t searchNs, int64_t stepNs);

}  // namespace torchutil::hw
