// Counter sets, metric decoding, per-op aggregation and PM-sample alignment on synthetic counter
// data (what CUPTI's range profiler and PM sampler would report), with hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "HwTestData.h"
#include "core/HwCounters.h"

namespace torchutil::hw {
namespace {

using testdata::idx;
using testdata::kNaN;
using testdata::pmSample;

RangeValues empty() {
  RangeValues v;
  v.fill(kNaN);
  return v;
}

// Every candidate is known: the first candidate of each entry is chosen.
bool allKnown(const std::string&) {
  return true;
}

TEST(HwCountersTest, ParsesSetNamesInOrderWithoutRepeats) {
  EXPECT_TRUE(parseCounterSets({}).empty());
  EXPECT_EQ(parseCounterSets({"flops"}), std::vector<CounterSet>{CounterSet::Flops});
  EXPECT_EQ(parseCounterSets({"timeline", "flops", "timeline"}),
            (std::vector<CounterSet>{CounterSet::Timeline, CounterSet::Flops}));
  EXPECT_EQ(
      parseCounterSets({"all"}),
      (std::vector<CounterSet>{CounterSet::Flops, CounterSet::Throughput, CounterSet::Timeline}));
  EXPECT_TRUE(needsRangeProfiler(parseCounterSets({"throughput"})));
  EXPECT_FALSE(needsRangeProfiler(parseCounterSets({"timeline"})));
  EXPECT_TRUE(needsPmSampling(parseCounterSets({"timeline"})));
  EXPECT_FALSE(needsPmSampling(parseCounterSets({"flops"})));
}

TEST(HwCountersTest, UnknownSetNameIsRejectedByName) {
  try {
    parseCounterSets({"flops", "flopz"});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'flopz'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'timeline'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parseCounterSets({""}), std::invalid_argument);
}

TEST(HwCountersTest, ReplayModesByName) {
  EXPECT_EQ(parseReplay("user"), Replay::User);
  EXPECT_EQ(parseReplay("kernel"), Replay::Kernel);
  EXPECT_STREQ(replayName(Replay::Kernel), "kernel");
  try {
    parseReplay("application");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("got 'application'"), std::string::npos) << e.what();
  }
}

TEST(HwCountersTest, MetricTablesAreIndexedByTheirEnums) {
  ASSERT_EQ(rangeMetricDefs().size(), kNumRangeMetrics);
  ASSERT_EQ(pmMetricDefs().size(), kNumPmMetrics);
  std::set<std::string> keys;
  for (const MetricDef& d : rangeMetricDefs()) {
    EXPECT_FALSE(d.candidates.empty()) << d.key;
    EXPECT_TRUE(keys.insert(d.key).second) << "duplicate key " << d.key;
    EXPECT_NE(d.set, CounterSet::Timeline) << d.key;
    for (const std::string& name : d.candidates) {
      // Range-profiler metrics need a rollup (.sum / .avg ...).
      EXPECT_NE(name.find('.'), std::string::npos) << name;
    }
  }
  for (const MetricDef& d : pmMetricDefs()) {
    EXPECT_EQ(d.set, CounterSet::Timeline) << d.key;
  }
  // Every row is the one its enumerator names: its key, set, how it combines, its arithmetic.
  struct Row {
    RangeMetric metric;
    const char* key;
    CounterSet set;
    Reduce reduce;
    const char* dtype;  // tensor paths only
    bool flops;         // a floating-point tensor path (converted to FLOPs)
    bool intOps;        // an integer tensor path
  };
  using S = CounterSet;
  using R = Reduce;
  const Row rows[] = {
      {RangeMetric::TensorHgmmaFp16, "tensor_hgmma_fp16", S::Flops, R::Sum, "float16", true, false},
      {RangeMetric::TensorHgmmaBf16, "tensor_hgmma_bf16", S::Flops, R::Sum, "bfloat16", true,
       false},
      {RangeMetric::TensorHgmmaTf32, "tensor_hgmma_tf32", S::Flops, R::Sum, "tf32", true, false},
      {RangeMetric::TensorHgmmaFp8, "tensor_hgmma_fp8", S::Flops, R::Sum, "float8", true, false},
      {RangeMetric::TensorHmmaFp16, "tensor_hmma_fp16", S::Flops, R::Sum, "float16", true, false},
      {RangeMetric::TensorHmmaBf16, "tensor_hmma_bf16", S::Flops, R::Sum, "bfloat16", true, false},
      {RangeMetric::TensorHmmaTf32, "tensor_hmma_tf32", S::Flops, R::Sum, "tf32", true, false},
      {RangeMetric::TensorIgmmaInt8, "tensor_igmma_int8", S::Flops, R::Sum, "int8", false, true},
      {RangeMetric::TensorImmaInt8, "tensor_imma_int8", S::Flops, R::Sum, "int8", false, true},
      {RangeMetric::GmmaInstructions, "gmma_instructions", S::Flops, R::Sum, "", false, false},
      {RangeMetric::FmaInstructions, "fma_instructions", S::Flops, R::Sum, "", false, false},
      {RangeMetric::AluInstructions, "alu_instructions", S::Flops, R::Sum, "", false, false},
      {RangeMetric::SmThroughputPct, "sm_throughput_pct", S::Throughput, R::TimeWeighted, "", false,
       false},
      {RangeMetric::DramThroughputPct, "dram_throughput_pct", S::Throughput, R::TimeWeighted, "",
       false, false},
      {RangeMetric::TensorActivePct, "tensor_active_pct", S::Throughput, R::TimeWeighted, "", false,
       false},
      {RangeMetric::AchievedOccupancyPct, "achieved_occupancy_pct", S::Throughput, R::TimeWeighted,
       "", false, false},
  };
  ASSERT_EQ(std::size(rows), kNumRangeMetrics);
  for (const Row& row : rows) {
    const MetricDef& d = rangeMetricDefs()[idx(row.metric)];
    EXPECT_STREQ(d.key, row.key);
    EXPECT_EQ(d.set, row.set) << row.key;
    EXPECT_EQ(d.reduce, row.reduce) << row.key;
    EXPECT_STREQ(d.dtype, row.dtype) << row.key;
    EXPECT_EQ(d.tensorFlops, row.flops) << row.key;
    EXPECT_EQ(d.tensorIntOps, row.intOps) << row.key;
    // A metric that fills fields as it is fills the field of its own name; the tensor paths
    // enter derived fields only.
    const bool tensorPath = row.flops || row.intOps;
    EXPECT_EQ(d.summary.has_value(), !tensorPath) << row.key;
    EXPECT_EQ(d.kernel.has_value(), !tensorPath) << row.key;
  }
  const struct {
    PmMetric metric;
    const char* key;
  } pmRows[] = {{PmMetric::SmActivePct, "pm_sm_active_pct"},
                {PmMetric::TensorActivePct, "pm_tensor_active_pct"},
                {PmMetric::DramThroughputPct, "pm_dram_throughput_pct"}};
  ASSERT_EQ(std::size(pmRows), kNumPmMetrics);
  for (const auto& row : pmRows) {
    const MetricDef& d = pmMetricDefs()[idx(row.metric)];
    EXPECT_STREQ(d.key, row.key);
    EXPECT_EQ(d.reduce, Reduce::TimeWeighted) << row.key;
    EXPECT_FALSE(d.kernel.has_value()) << row.key;  // PM samples are GPU-wide, not per kernel
    EXPECT_STRNE(d.track, "") << row.key;
  }
  // The names seen on the H200 (ncu --query-metrics --chip gh100) are the first candidates.
  EXPECT_EQ(rangeMetricDefs()[idx(RangeMetric::SmThroughputPct)].candidates[0],
            "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(rangeMetricDefs()[idx(RangeMetric::TensorHgmmaFp16)].candidates[0],
            "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum");
  EXPECT_EQ(rangeMetricDefs()[idx(RangeMetric::TensorHgmmaTf32)].candidates[0],
            "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum");
}

// The catalog's field columns name fields of the metric's own name, so that a result reads
// each metric under its key.
TEST(HwCountersTest, EachMetricFillsTheFieldsOfItsOwnName) {
  const auto nameOf = [](const char* table, size_t field) {
    return std::string(schema(table)[field].name);
  };
  for (const auto* defs : {&rangeMetricDefs(), &pmMetricDefs()}) {
    for (const MetricDef& d : *defs) {
      // Range fields are named after the key, with hw_ before instruction counts.
      const std::string key = d.key;
      const std::string expected =
          key.find("instructions") != std::string::npos ? "hw_" + key : key;
      if (d.summary) {
        EXPECT_EQ(nameOf("summary", static_cast<size_t>(*d.summary)), expected);
      }
      if (d.op) {
        EXPECT_EQ(nameOf("ops", static_cast<size_t>(*d.op)), expected);
      }
      if (d.kernel) {
        EXPECT_EQ(nameOf("kernels", static_cast<size_t>(*d.kernel)), expected);
      }
    }
  }
  for (const TensorDtypeField& f : tensorDtypeFields()) {
    bool pathOfDtype = false;
    for (const MetricDef& d : rangeMetricDefs()) {
      pathOfDtype = pathOfDtype || (d.tensorFlops && std::string(d.dtype) == f.dtype);
    }
    EXPECT_TRUE(pathOfDtype) << f.dtype;
  }
}

TEST(HwCountersTest, ResolveTakesTheSetsAndTheFirstKnownCandidate) {
  const auto r = resolveRangeMetrics({CounterSet::Throughput}, allKnown);
  ASSERT_EQ(r.names.size(), 4u);
  EXPECT_EQ(r.index[0], static_cast<int>(RangeMetric::SmThroughputPct));
  EXPECT_EQ(r.names[1], "dram__throughput.avg.pct_of_peak_sustained_elapsed");
  EXPECT_TRUE(r.missing.empty());

  // The chip knows only the second spelling of the tensor-active metric and nothing of DRAM.
  const auto known = [](const std::string& n) {
    return n.rfind("dram", 0) != 0 && n.rfind("gpu__dram", 0) != 0 &&
           n != "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed";
  };
  const auto r2 = resolveRangeMetrics({CounterSet::Throughput}, known);
  ASSERT_EQ(r2.names.size(), 3u);
  EXPECT_EQ(r2.names[1], "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(r2.index[1], static_cast<int>(RangeMetric::TensorActivePct));
  EXPECT_EQ(r2.missing, std::vector<std::string>{"dram_throughput_pct"});

  EXPECT_TRUE(resolveRangeMetrics({CounterSet::Timeline}, allKnown).empty());
  EXPECT_EQ(resolvePmMetrics({CounterSet::Timeline}, allKnown).names.size(), kNumPmMetrics);
  EXPECT_TRUE(resolvePmMetrics({CounterSet::Flops}, allKnown).empty());
}

TEST(HwCountersTest, PmIntervalStretchesSoTheWindowFitsTheBuffer) {
  // 5 ms at 10 us: 500 samples, within 2400.
  EXPECT_EQ(hw::pmIntervalNs(10000, 0.005, 2400), 10000u);
  // 2 s would take 200,000: 2 s / 2400 = 833.3 us, rounded up to 834 us.
  EXPECT_EQ(hw::pmIntervalNs(10000, 2.0, 2400), 834000u);
  EXPECT_LE(2.0e9 / static_cast<double>(hw::pmIntervalNs(10000, 2.0, 2400)), 2400.0);
  // Nothing known about the window: the least interval.
  EXPECT_EQ(hw::pmIntervalNs(10000, 0.0, 2400), 10000u);
  EXPECT_EQ(hw::pmIntervalNs(10000, std::nan(""), 2400), 10000u);
}

TEST(HwCountersTest, DecodeRangePutsValuesAtTheirMetricAndDropsNoData) {
  const auto r = resolveRangeMetrics({CounterSet::Flops, CounterSet::Throughput}, allKnown);
  std::vector<double> values(r.names.size(), 0.0);
  for (size_t i = 0; i < r.names.size(); ++i) {
    values[i] = 10.0 * static_cast<double>(i + 1);
  }
  values[1] = -1.0;  // CUPTI's "no value"
  values[2] = kNaN;
  const RangeValues v = decodeRange(r, values);
  EXPECT_DOUBLE_EQ(v[static_cast<size_t>(r.index[0])], 10.0);
  EXPECT_TRUE(std::isnan(v[static_cast<size_t>(r.index[1])]));
  EXPECT_TRUE(std::isnan(v[static_cast<size_t>(r.index[2])]));
  EXPECT_DOUBLE_EQ(v[static_cast<size_t>(r.index.back())], 10.0 * r.names.size());
  // Fewer values than names (a short evaluation): the rest stay NaN.
  const RangeValues shorter = decodeRange(r, {5.0});
  EXPECT_DOUBLE_EQ(shorter[static_cast<size_t>(r.index[0])], 5.0);
  EXPECT_TRUE(std::isnan(shorter[static_cast<size_t>(r.index[3])]));
}

TEST(HwCountersTest, TensorFlopsSumFloatingPathsWithTheOneFactor) {
  RangeValues v = empty();
  EXPECT_TRUE(std::isnan(tensorFlops(v)));  // no tensor path read
  v[idx(RangeMetric::TensorHgmmaFp16)] = 1000.0;
  v[idx(RangeMetric::TensorHmmaFp16)] = 24.0;
  v[idx(RangeMetric::TensorHgmmaBf16)] = 0.0;
  v[idx(RangeMetric::TensorIgmmaInt8)] = 7.0;   // integer: not FLOPs
  v[idx(RangeMetric::FmaInstructions)] = 99.0;  // instructions: not FLOPs
  EXPECT_DOUBLE_EQ(tensorFlops(v), 1024.0 * kTensorOpFlopsPerUnit);
  EXPECT_DOUBLE_EQ(tensorFlops(v, "float16"), 1024.0 * kTensorOpFlopsPerUnit);
  EXPECT_DOUBLE_EQ(tensorFlops(v, "bfloat16"), 0.0);
  EXPECT_TRUE(std::isnan(tensorFlops(v, "tf32")));
  EXPECT_DOUBLE_EQ(tensorIntOps(v), 7.0);
  // A 4096^3 GEMM counted exactly: ratio 1; a 3-channel first conv padded to 8: above 1.
  EXPECT_DOUBLE_EQ(hwRatio(2.0 * 4096 * 4096 * 4096, 2.0 * 4096 * 4096 * 4096), 1.0);
  EXPECT_DOUBLE_EQ(hwRatio(8.0, 3.0), 8.0 / 3.0);
  EXPECT_TRUE(std::isnan(hwRatio(1.0, 0.0)));
  EXPECT_TRUE(std::isnan(hwRatio(kNaN, 5.0)));
}

TEST(HwCountersTest, AggregateSumsCountsAndWeighsPercentagesByDuration) {
  HwKernel a{empty(), 100, 0}, b{empty(), 300, 0}, c{empty(), 600, 1};
  a.values[idx(RangeMetric::TensorHgmmaFp16)] = 4.0;
  b.values[idx(RangeMetric::TensorHgmmaFp16)] = 6.0;
  c.values[idx(RangeMetric::TensorHgmmaFp16)] = 10.0;
  a.values[idx(RangeMetric::SmThroughputPct)] = 90.0;
  b.values[idx(RangeMetric::SmThroughputPct)] = 10.0;
  c.values[idx(RangeMetric::SmThroughputPct)] = 50.0;
  // Only b read DRAM: its value, not a mean with NaN.
  b.values[idx(RangeMetric::DramThroughputPct)] = 33.0;

  const HwAggregate all = aggregate({a, b, c});
  EXPECT_EQ(all.kernels, 3u);
  EXPECT_EQ(all.durationNs, 1000u);
  EXPECT_DOUBLE_EQ(all.values[idx(RangeMetric::TensorHgmmaFp16)], 20.0);
  // (90*100 + 10*300 + 50*600) / 1000 = 42
  EXPECT_DOUBLE_EQ(all.values[idx(RangeMetric::SmThroughputPct)], 42.0);
  EXPECT_DOUBLE_EQ(all.values[idx(RangeMetric::DramThroughputPct)], 33.0);
  EXPECT_TRUE(std::isnan(all.values[idx(RangeMetric::AchievedOccupancyPct)]));

  const auto rows =
      aggregateByRow({a, b, c, HwKernel{empty(), 50, -1}, HwKernel{a.values, 5, 9}}, 3);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].values[idx(RangeMetric::TensorHgmmaFp16)], 10.0);
  // (90*100 + 10*300) / 400 = 30
  EXPECT_DOUBLE_EQ(rows[0].values[idx(RangeMetric::SmThroughputPct)], 30.0);
  EXPECT_EQ(rows[0].durationNs, 400u);
  EXPECT_DOUBLE_EQ(rows[1].values[idx(RangeMetric::SmThroughputPct)], 50.0);
  EXPECT_EQ(rows[2].kernels, 0u);  // no kernel: every value NaN
  EXPECT_TRUE(std::isnan(rows[2].values[idx(RangeMetric::TensorHgmmaFp16)]));

  // Zero durations (no activity record): a plain mean.
  HwKernel z1{empty(), 0, 0}, z2{empty(), 0, 0};
  z1.values[idx(RangeMetric::AchievedOccupancyPct)] = 20.0;
  z2.values[idx(RangeMetric::AchievedOccupancyPct)] = 40.0;
  EXPECT_DOUBLE_EQ(aggregate({z1, z2}).values[idx(RangeMetric::AchievedOccupancyPct)], 30.0);
}

TEST(HwCountersTest, RangesMatchKernelsOrKernelsAndMemsetsElseSayWhy) {
  // Records sorted by start: kernel, memset, kernel, memcpy, kernel.
  const std::vector<bool> isKernel{true, false, true, false, true};
  const std::vector<bool> isMemset{false, true, false, false, false};
  std::string why;
  EXPECT_EQ(matchRangesToRecords(3, isKernel, isMemset, &why), (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(matchRangesToRecords(4, isKernel, isMemset, &why), (std::vector<size_t>{0, 1, 2, 4}));
  EXPECT_TRUE(why.empty());
  EXPECT_TRUE(matchRangesToRecords(7, isKernel, isMemset, &why).empty());
  EXPECT_NE(why.find("profiled 7 kernels"), std::string::npos) << why;
  EXPECT_NE(why.find("launched 3"), std::string::npos) << why;
}

TEST(HwCountersTest, RangeOrderFollowsNumericAutoRangeNames) {
  EXPECT_EQ(rangeOrder({"0", "1", "2"}), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(rangeOrder({"2", "10", "1"}), (std::vector<size_t>{2, 0, 1}));
  EXPECT_EQ(rangeOrder({"b", "a"}), (std::vector<size_t>{0, 1}));  // not numeric: as stored
  EXPECT_TRUE(rangeOrder({}).empty());
}

TEST(HwCountersTest, PmOverWeighsSamplesByOverlap) {
  // Samples of 10 ns: [0,10) 100 %, [10,20) 50 %, [20,30) 0 %.
  const std::vector<PmSample> s{pmSample(0, 10, 100, 80), pmSample(10, 20, 50, kNaN),
                                pmSample(20, 30, 0, 20)};
  // [5, 25): 5 ns of 100, 10 of 50, 5 of 0 -> (500 + 500 + 0) / 20 = 50
  const PmAggregate a = pmOver(s, 0, 5, 25);
  EXPECT_EQ(a.samples, 3u);
  EXPECT_EQ(a.overlapNs, 20u);
  EXPECT_DOUBLE_EQ(a.values[idx(PmMetric::SmActivePct)], 50.0);
  // Tensor: the middle sample has none: (5*80 + 5*20) / 10 = 50
  EXPECT_DOUBLE_EQ(a.values[idx(PmMetric::TensorActivePct)], 50.0);
  EXPECT_TRUE(std::isnan(a.values[idx(PmMetric::DramThroughputPct)]));
  // Shifted by +100 ns, the same window sees nothing.
  EXPECT_EQ(pmOver(s, 100, 5, 25).samples, 0u);
  EXPECT_TRUE(std::isnan(pmOver(s, 100, 5, 25).values[0]));
  // Shifted by -10 ns onto the kernels' clock, [0, 10) is the 50 % sample.
  EXPECT_DOUBLE_EQ(pmOver(s, -10, 0, 10).values[0], 50.0);
  // Unsorted input gives the same answer.
  const std::vector<PmSample> shuffled{s[2], s[0], s[1]};
  EXPECT_DOUBLE_EQ(pmOver(shuffled, 0, 5, 25).values[0], 50.0);
}

TEST(HwCountersTest, PmByRowWeighsEachKernelsOverlap) {
  const std::vector<PmSample> s{pmSample(0, 10, 100), pmSample(10, 20, 50), pmSample(20, 30, 0)};
  // Row 0: kernels [0, 10) and [20, 30): (10*100 + 10*0) / 20 = 50.
  // Row 1: kernel [8, 14): (2*100 + 4*50) / 6 = 66.67.
  const std::vector<Span> kernels{{0, 10, 0}, {8, 14, 1}, {20, 30, 0}, {0, 30, -1}, {3, 3, 1}};
  const auto rows = pmByRow(s, 0, kernels, 3);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].values[0], 50.0);
  EXPECT_EQ(rows[0].overlapNs, 20u);
  EXPECT_NEAR(rows[1].values[0], 400.0 / 6.0, 1e-12);
  EXPECT_EQ(rows[2].samples, 0u);
  EXPECT_TRUE(std::isnan(rows[2].values[0]));
}

TEST(HwCountersTest, AlignmentFindsTheClockOffset) {
  // The GPU was busy over [1000, 1040) and [1100, 1120) on the kernels' clock. The sampler's
  // clock runs 30 ns behind: its samples of 10 ns see that activity at [970, 1010) and [1070,
  // 1090).
  std::vector<PmSample> s;
  for (uint64_t t = 900; t < 1200; t += 10) {
    const bool active = (t >= 970 && t < 1010) || (t >= 1070 && t < 1090);
    s.push_back(pmSample(t, t + 10, active ? 90.0 : 0.0));
  }
  const std::vector<Span> busy{{1000, 1040, -1}, {1100, 1120, -1}};
  const PmAlignment a = alignPmSamples(s, busy, 950, 1150, PmMetric::SmActivePct, 100, 10);
  EXPECT_EQ(a.guessNs, 0);  // the samples overlap the window: same clock assumed first
  EXPECT_EQ(a.offsetNs, 30);
  EXPECT_DOUBLE_EQ(a.score, 1.0);
  // The aligned samples say the busy window was 90 % active.
  EXPECT_DOUBLE_EQ(pmOver(s, a.offsetNs, 1000, 1040).values[0], 90.0);
}

TEST(HwCountersTest, AlignmentGuessesFromTheWindowWhenClocksDiffer) {
  // Samples on another clock entirely (starting at 5e9); the window is at 1000.
  std::vector<PmSample> s;
  for (uint64_t t = 0; t < 200; t += 10) {
    const bool active = t >= 40 && t < 80;
    s.push_back(pmSample(5000000000ull + t, 5000000000ull + t + 10, active ? 70.0 : 0.0));
  }
  const std::vector<Span> busy{{1040, 1080, -1}};
  const PmAlignment a = alignPmSamples(s, busy, 1000, 1200, PmMetric::SmActivePct, 50, 10);
  EXPECT_EQ(a.guessNs, 1000 - 5000000000ll);
  EXPECT_EQ(a.offsetNs, a.guessNs);
  EXPECT_DOUBLE_EQ(a.score, 1.0);
}

TEST(HwCountersTest, AlignmentWithoutActivityKeepsTheGuess) {
  const std::vector<PmSample> s{pmSample(0, 10, 0), pmSample(10, 20, kNaN)};
  const PmAlignment a = alignPmSamples(s, {{0, 20, -1}}, 0, 20, PmMetric::SmActivePct, 100, 1);
  EXPECT_EQ(a.offsetNs, 0);
  EXPECT_EQ(a.score, 0.0);
  EXPECT_EQ(alignPmSamples({}, {}, 0, 1, PmMetric::SmActivePct, 10, 1).offsetNs, 0);
}

}  // namespace
}  // namespace torchutil::hw
