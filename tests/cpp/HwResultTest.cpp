// Hardware counters in a result: ranges matched to the counted forward's kernels, the summary,
// op and kernel fields they fill, and the Chrome trace's counter tracks, on synthetic data.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "HwTestData.h"
#include "TraceTestData.h"
#include "core/HwResult.h"

namespace torchutil::hw {
namespace {

using testdata::idx;
using testdata::kNaN;
using testdata::pmSample;
using ::torchutil::testdata::attributed;

RangeValues range(double fp16Ops, double smPct) {
  RangeValues v;
  v.fill(kNaN);
  v[idx(RangeMetric::TensorHgmmaFp16)] = fp16Ops;
  v[idx(RangeMetric::SmThroughputPct)] = smPct;
  v[idx(RangeMetric::FmaInstructions)] = 1.0;
  return v;
}

double field(const std::vector<double>& s, Field f) {
  return s[static_cast<size_t>(f)];
}

// A counted forward of two ops: op row 0 (a GEMM: kernels at 100-200 and 300-400 ns, with a
// memset between them) and op row 1 (a kernel at 500-700 ns). Then one traced forward.
struct Forward {
  std::vector<KernelRecord> kernels;
  std::vector<OpEvent> events;
  std::vector<OpStats> rows;
  Forward() {
    events = ::torchutil::testdata::opEvents({"aten::mm", "aten::add"});
    OpStats r0, r1;
    r0.op = "aten::mm";
    r0.matrixFlops = 1000;
    r1.op = "aten::add";
    r1.matrixFlops = 0;
    rows = {r0, r1};
    // Stored out of start order, as CUPTI's buffers may deliver them.
    kernels = {attributed(KernelRecord::Kind::Kernel, 500, 700, 1),
               attributed(KernelRecord::Kind::Kernel, 100, 200, 0),
               attributed(KernelRecord::Kind::Memset, 250, 260, 0),
               attributed(KernelRecord::Kind::Kernel, 300, 400, 0),
               attributed(KernelRecord::Kind::Kernel, 1100, 1200, 0, true),
               attributed(KernelRecord::Kind::Kernel, 1300, 1400, 0, true),
               attributed(KernelRecord::Kind::Kernel, 1500, 1700, 1, true)};
  }
};

TEST(HwResultTest, RangesMatchTheCountedKernelsInStartOrder) {
  Forward f;
  HwResult hw;
  std::string why;
  ASSERT_TRUE(
      matchRanges({range(600, 90), range(500, 70), range(0, 20)}, f.kernels, f.events, &hw, &why))
      << why;
  EXPECT_TRUE(hw.ranges);
  EXPECT_EQ(hw.kernelIndex, (std::vector<size_t>{1, 3, 0}));
  EXPECT_EQ(hw.kernels[0].row, 0);
  EXPECT_EQ(hw.kernels[2].row, 1);
  EXPECT_EQ(hw.kernels[2].durationNs, 200u);

  HwResult bad;
  EXPECT_FALSE(matchRanges({range(1, 1), range(1, 1)}, f.kernels, f.events, &bad, &why));
  EXPECT_FALSE(bad.ranges);
  EXPECT_NE(why.find("profiled 2 kernels"), std::string::npos) << why;
  EXPECT_FALSE(matchRanges({}, f.kernels, f.events, &bad, &why));
}

TEST(HwResultTest, SummaryOpAndKernelFields) {
  Forward f;
  HwResult hw;
  std::string why;
  ASSERT_TRUE(
      matchRanges({range(600, 90), range(500, 70), range(0, 20)}, f.kernels, f.events, &hw, &why));
  hw.passes = 3;
  hw.seconds = 0.25;
  hw.setupSeconds = 0.125;
  hw.passSeconds = 0.0625;
  std::vector<double> summary(kNumFields, kNaN);
  fillSummary(summary, hw, 1000.0);
  EXPECT_DOUBLE_EQ(field(summary, Field::hw_tensor_flops), 1100.0 * kTensorOpFlopsPerUnit);
  EXPECT_DOUBLE_EQ(field(summary, Field::hw_flops_ratio), 1.1 * kTensorOpFlopsPerUnit);
  EXPECT_DOUBLE_EQ(field(summary, Field::hw_tensor_flops_fp16), 1100.0 * kTensorOpFlopsPerUnit);
  EXPECT_TRUE(std::isnan(field(summary, Field::hw_tensor_flops_bf16)));
  EXPECT_DOUBLE_EQ(field(summary, Field::hw_fma_instructions), 3.0);
  // (90*100 + 70*100 + 20*200) / 400 = 50
  EXPECT_DOUBLE_EQ(field(summary, Field::sm_throughput_pct), 50.0);
  EXPECT_DOUBLE_EQ(field(summary, Field::counter_kernels), 3.0);
  EXPECT_DOUBLE_EQ(field(summary, Field::counter_passes), 3.0);
  EXPECT_DOUBLE_EQ(field(summary, Field::counter_seconds), 0.25);
  EXPECT_DOUBLE_EQ(field(summary, Field::counter_setup_seconds), 0.125);
  EXPECT_DOUBLE_EQ(field(summary, Field::counter_pass_seconds), 0.0625);
  EXPECT_TRUE(std::isnan(field(summary, Field::counter_decode_seconds)));  // not measured: NaN
  EXPECT_TRUE(std::isnan(field(summary, Field::pm_sm_active_pct)));        // no timeline

  ResultTable ops("ops");
  ops.addRow();
  ops.addRow();
  fillOpRows(ops, hw, f.rows);
  const auto& flops = ops.numberColumn("hw_tensor_flops");
  EXPECT_DOUBLE_EQ(flops[0], 1100.0 * kTensorOpFlopsPerUnit);
  EXPECT_DOUBLE_EQ(flops[1], 0.0);
  EXPECT_DOUBLE_EQ(ops.numberColumn("hw_flops_ratio")[0], 1.1 * kTensorOpFlopsPerUnit);
  EXPECT_TRUE(std::isnan(ops.numberColumn("hw_flops_ratio")[1]));  // no matrix FLOPs counted
  EXPECT_DOUBLE_EQ(ops.numberColumn("sm_throughput_pct")[0], 80.0);
  EXPECT_DOUBLE_EQ(ops.numberColumn("sm_throughput_pct")[1], 20.0);
  EXPECT_DOUBLE_EQ(ops.numberColumn("hw_fma_instructions")[0], 2.0);  // one per kernel
  EXPECT_TRUE(std::isnan(ops.numberColumn("hw_alu_instructions")[0]));

  ResultTable kernels("kernels");
  for (size_t i = 0; i < f.kernels.size(); ++i) {
    kernels.addRow();
  }
  fillKernelRows(kernels, hw);
  const auto& kflops = kernels.numberColumn("hw_tensor_flops");
  EXPECT_DOUBLE_EQ(kflops[1], 600.0 * kTensorOpFlopsPerUnit);
  EXPECT_DOUBLE_EQ(kflops[3], 500.0 * kTensorOpFlopsPerUnit);
  EXPECT_DOUBLE_EQ(kflops[0], 0.0);
  EXPECT_TRUE(std::isnan(kflops[2]));  // the memset: no range
  EXPECT_TRUE(std::isnan(kflops[4]));  // traced forward: counters are the counted forward's
  EXPECT_DOUBLE_EQ(kernels.numberColumn("hw_fma_instructions")[0], 1.0);
}

TEST(HwResultTest, MatrixWorkInADtypeWithNoTensorPathReadIsNaNWithAReason) {
  // The GEMM runs in fp8, whose tensor path GH100 has no counter for: the paths read (fp16 here)
  // say 0, which is no measure of the fp8 work. Its row and the forward are NaN, and the
  // status says why; the fields of the paths read stay.
  Forward f;
  f.rows[0].op = "aten::_scaled_mm";
  f.rows[0].dtype = "float8_e4m3fn";
  HwResult hw;
  std::string why;
  ASSERT_TRUE(
      matchRanges({range(0, 90), range(0, 70), range(0, 20)}, f.kernels, f.events, &hw, &why));
  std::vector<double> summary(kNumFields, kNaN);
  fillSummary(summary, hw, 1000.0);
  EXPECT_DOUBLE_EQ(field(summary, Field::hw_tensor_flops), 0.0);  // what it said before
  std::string status = "on";
  markUncountedTensorWork(summary, &status, hw, f.rows);
  EXPECT_TRUE(std::isnan(field(summary, Field::hw_tensor_flops)));
  EXPECT_TRUE(std::isnan(field(summary, Field::hw_flops_ratio)));
  EXPECT_TRUE(std::isnan(field(summary, Field::hw_tensor_flops_fp8)));
  EXPECT_DOUBLE_EQ(field(summary, Field::hw_tensor_flops_fp16), 0.0);
  EXPECT_EQ(status,
            "on, partial: flops: this GPU has no tensor-path counter for float8, the dtype of 1000 "
            "counted matrix FLOPs (aten::_scaled_mm): hw_tensor_flops and hw_flops_ratio are NaN "
            "for those ops and for the forward");
  ResultTable ops("ops");
  ops.addRow();
  ops.addRow();
  fillOpRows(ops, hw, f.rows);
  EXPECT_TRUE(std::isnan(ops.numberColumn("hw_tensor_flops")[0]));
  EXPECT_TRUE(std::isnan(ops.numberColumn("hw_flops_ratio")[0]));
  EXPECT_DOUBLE_EQ(ops.numberColumn("hw_tensor_flops")[1], 0.0);  // no matrix work: nothing missed
  EXPECT_DOUBLE_EQ(ops.numberColumn("sm_throughput_pct")[0], 80.0);

  // A partial status keeps what it said; a dtype whose path was read changes nothing.
  status = "on, partial: timeline: loose";
  markUncountedTensorWork(summary, &status, hw, f.rows);
  EXPECT_EQ(status.rfind("on, partial: timeline: loose; flops: this GPU has no", 0), 0u) << status;
  f.rows[0].dtype = "float16";
  std::vector<double> read(kNumFields, kNaN);
  fillSummary(read, hw, 1000.0);
  status = "on";
  markUncountedTensorWork(read, &status, hw, f.rows);
  EXPECT_EQ(status, "on");
  EXPECT_DOUBLE_EQ(field(read, Field::hw_tensor_flops), 0.0);
  EXPECT_EQ(tensorPathDtype("float8_e5m2"), "float8");
  EXPECT_EQ(tensorPathDtype("bfloat16"), "bfloat16");
  EXPECT_EQ(tensorPathDtype("float32"), "");  // tf32 or the FMA pipe: not certain
}

TEST(HwResultTest, TimelineFillsSummaryOpsAndCounterTracks) {
  Forward f;
  HwResult hw;
  hw.timeline = true;
  // The sampler's clock is 1000 ns behind the kernels': samples of 100 ns over [0, 800).
  for (uint64_t t = 0; t < 800; t += 100) {
    const bool busy = (t >= 100 && t < 400) || (t >= 500 && t < 700);
    hw.samples.push_back(pmSample(t, t + 100, busy ? 80.0 : 0.0, busy ? 40.0 : 0.0));
  }
  hw.kernelSpans = attributedSpans(f.kernels, f.events);
  ASSERT_EQ(hw.kernelSpans.size(), 3u);
  const PmAlignment a =
      alignPmSamples(hw.samples, hw.kernelSpans, 1100, 1700, PmMetric::SmActivePct, 2000, 100);
  EXPECT_EQ(a.offsetNs, 1000);
  hw.offsetNs = a.offsetNs;
  hw.windowStartNs = 1000;
  hw.windowEndNs = 1800;
  std::vector<double> summary(kNumFields, kNaN);
  fillSummary(summary, hw, 1000.0);
  // Busy 500 of 800 ns at 80 %: 50 %.
  EXPECT_DOUBLE_EQ(field(summary, Field::pm_sm_active_pct), 50.0);
  EXPECT_DOUBLE_EQ(field(summary, Field::pm_tensor_active_pct), 25.0);
  EXPECT_TRUE(std::isnan(field(summary, Field::pm_dram_throughput_pct)));
  EXPECT_DOUBLE_EQ(field(summary, Field::pm_samples), 8.0);
  EXPECT_DOUBLE_EQ(field(summary, Field::pm_clock_offset_us), 1.0);
  EXPECT_TRUE(std::isnan(field(summary, Field::hw_tensor_flops)));  // no range counters

  ResultTable ops("ops");
  ops.addRow();
  ops.addRow();
  fillOpRows(ops, hw, f.rows);
  EXPECT_DOUBLE_EQ(ops.numberColumn("pm_sm_active_pct")[0], 80.0);
  EXPECT_DOUBLE_EQ(ops.numberColumn("pm_tensor_active_pct")[1], 40.0);
  EXPECT_TRUE(std::isnan(ops.numberColumn("hw_tensor_flops")[0]));

  const std::vector<CounterTrack> tracks = counterTracks(hw);
  ASSERT_EQ(tracks.size(), 2u);  // DRAM was not read
  EXPECT_EQ(tracks[0].name, "PM: SM active %");
  EXPECT_EQ(tracks[0].points.front().first, 1000u);
  // Times from the first op event (at 0 ns here): the sample at 1100 ns is at 1.1 us.
  const std::string trace = chromeTrace(f.events, f.rows, f.kernels, "GPU", tracks);
  EXPECT_NE(trace.find(R"({"ph":"C","pid":1,"cat":"counter","name":"PM: SM active %","ts":1.100,)"
                       R"("args":{"value":80}})"),
            std::string::npos)
      << trace;
}

}  // namespace
}  // namespace torchutil::hw
