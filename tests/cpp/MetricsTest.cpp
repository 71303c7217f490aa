#include "core/Metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace torchutil {

// Readable failure messages (found by argument-dependent lookup, so outside the unnamed
// namespace; static, as other tests may print PeakDtype too).
static void PrintTo(PeakDtype d, std::ostream* os) {
  *os << peakDtypeName(d);
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A summary value by field name, so the test does not depend on the fields' order.
double field(const std::vector<double>& summary, const std::string& name) {
  const std::vector<std::string> names = fieldNames("summary");
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      return summary.at(i);
    }
  }
  ADD_FAILURE() << "no field " << name;
  return -1.0;
}

SummaryInputs exampleInputs() {
  SummaryInputs in;
  in.totals.matrixFlops = 3'000'000'000;
  in.totals.vectorFlops = 1'000'000'000;
  in.totals.bytes = 500'000'000;
  in.totals.countedCalls = 7;
  in.totals.unknownCalls = 2;
  in.secondsPerForward = 0.5;
  in.peakFlopsPerSecond = 32e9;
  in.batchSize = 8;
  in.iterations = 10;
  in.cudaGraph = true;
  return in;
}

TEST(MetricsTest, SummarizeArithmetic) {
  const std::vector<double> v = summarize(exampleInputs());
  ASSERT_EQ(v.size(), static_cast<size_t>(kNumFields));
  EXPECT_DOUBLE_EQ(field(v, "flops"), 4e9);
  EXPECT_DOUBLE_EQ(field(v, "matrix_flops"), 3e9);
  EXPECT_DOUBLE_EQ(field(v, "vector_flops"), 1e9);
  EXPECT_DOUBLE_EQ(field(v, "bytes"), 5e8);
  EXPECT_DOUBLE_EQ(field(v, "arithmetic_intensity"), 8.0);
  EXPECT_DOUBLE_EQ(field(v, "seconds"), 0.5);
  EXPECT_DOUBLE_EQ(field(v, "achieved_flops_per_second"), 8e9);
  EXPECT_DOUBLE_EQ(field(v, "peak_flops_per_second"), 32e9);
  EXPECT_DOUBLE_EQ(field(v, "utilization"), 0.25);           // 4e9 / 0.5 / 32e9
  EXPECT_DOUBLE_EQ(field(v, "matrix_utilization"), 0.1875);  // 3e9 / 0.5 / 32e9
  EXPECT_DOUBLE_EQ(field(v, "inputs_per_second"), 16.0);
  EXPECT_DOUBLE_EQ(field(v, "batch_size"), 8.0);
  EXPECT_DOUBLE_EQ(field(v, "iterations"), 10.0);
  EXPECT_DOUBLE_EQ(field(v, "counted_op_calls"), 7.0);
  EXPECT_DOUBLE_EQ(field(v, "unknown_op_calls"), 2.0);
  EXPECT_DOUBLE_EQ(field(v, "cuda_graph"), 1.0);
}

TEST(MetricsTest, RatesAreNaNWithoutTimeAndUtilizationWithoutPeak) {
  SummaryInputs untimed = exampleInputs();
  untimed.secondsPerForward = kNaN;  // a meta device: counted, never timed
  const std::vector<double> u = summarize(untimed);
  EXPECT_TRUE(std::isnan(field(u, "seconds")));
  EXPECT_TRUE(std::isnan(field(u, "achieved_flops_per_second")));
  EXPECT_TRUE(std::isnan(field(u, "inputs_per_second")));
  EXPECT_TRUE(std::isnan(field(u, "utilization")));
  EXPECT_TRUE(std::isnan(field(u, "matrix_utilization")));
  EXPECT_DOUBLE_EQ(field(u, "flops"), 4e9);  // the count does not need a clock
  EXPECT_DOUBLE_EQ(field(u, "arithmetic_intensity"), 8.0);

  for (double peak : {kNaN, 0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    SummaryInputs noPeak = exampleInputs();
    noPeak.peakFlopsPerSecond = peak;
    const std::vector<double> p = summarize(noPeak);
    EXPECT_TRUE(std::isnan(field(p, "utilization"))) << "peak " << peak;
    EXPECT_TRUE(std::isnan(field(p, "matrix_utilization"))) << "peak " << peak;
    EXPECT_DOUBLE_EQ(field(p, "achieved_flops_per_second"), 8e9) << "peak " << peak;
  }

  SummaryInputs zeroTime = exampleInputs();
  zeroTime.secondsPerForward = 0.0;
  EXPECT_TRUE(std::isnan(field(summarize(zeroTime), "achieved_flops_per_second")));

  SummaryInputs noBytes = exampleInputs();
  noBytes.totals.bytes = 0;
  EXPECT_TRUE(std::isnan(field(summarize(noBytes), "arithmetic_intensity")));
}

TEST(MetricsTest, BandwidthUtilizationAndTheInterval) {
  SummaryInputs in = exampleInputs();  // 5e8 bytes in 0.5 s: 1e9 bytes/s
  in.peakBytesPerSecond = 4e9;
  in.secondsInterval = MedianInterval{0.5, 0.49, 0.52};
  const std::vector<double> v = summarize(in);
  EXPECT_DOUBLE_EQ(field(v, "achieved_bytes_per_second"), 1e9);
  EXPECT_DOUBLE_EQ(field(v, "peak_bytes_per_second"), 4e9);
  EXPECT_DOUBLE_EQ(field(v, "bandwidth_utilization"), 0.25);
  EXPECT_DOUBLE_EQ(field(v, "seconds_ci_low"), 0.49);
  EXPECT_DOUBLE_EQ(field(v, "seconds_ci_high"), 0.52);
  EXPECT_NEAR(field(v, "seconds_relative_ci"), 0.03, 1e-12);          // (0.52 - 0.49) / 2 / 0.5
  EXPECT_TRUE(std::isnan(field(v, "kernel_bandwidth_utilization")));  // not traced
  in.peakBytesPerSecond = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(field(summarize(in), "bandwidth_utilization")));
}

TEST(MetricsTest, SummaryHasOneValuePerField) {
  EXPECT_EQ(summarize(exampleInputs()).size(), schema("summary").size());
  EXPECT_EQ(fieldNames("summary").at(static_cast<size_t>(Field::utilization)), "utilization");
  EXPECT_EQ(fieldNames("summary").at(static_cast<size_t>(Field::seconds)), "seconds");
}

TEST(MetricsTest, OpRowWithoutKernels) {
  OpStats s;
  s.op = "aten::mm";
  s.module = "fc";
  s.dtype = "Float";
  s.opClass = OpClass::Matrix;
  s.calls = 3;
  s.matrixFlops = 600;
  s.vectorFlops = 200;
  s.bytes = 400;
  ResultTable t("ops");
  addOpRow(t, s, /*kernels=*/nullptr, /*peak=*/1e12, /*peakBytesPerSecond=*/1e11);
  ASSERT_EQ(t.rows(), 1u);
  EXPECT_EQ(t.textColumn("op")[0], "aten::mm");
  EXPECT_EQ(t.textColumn("module")[0], "fc");
  EXPECT_EQ(t.textColumn("dtype")[0], "Float");
  EXPECT_EQ(t.textColumn("op_class")[0], "matrix");
  EXPECT_DOUBLE_EQ(t.numberColumn("calls")[0], 3.0);
  EXPECT_DOUBLE_EQ(t.numberColumn("matrix_flops")[0], 600.0);
  EXPECT_DOUBLE_EQ(t.numberColumn("vector_flops")[0], 200.0);
  EXPECT_DOUBLE_EQ(t.numberColumn("bytes")[0], 400.0);
  EXPECT_DOUBLE_EQ(t.numberColumn("arithmetic_intensity")[0], 2.0);  // (600 + 200) / 400
  for (const char* name : {"kernels", "kernel_seconds", "kernel_flops_per_second",
                           "kernel_utilization", "kernel_bandwidth_utilization", "lost_seconds"}) {
    EXPECT_TRUE(std::isnan(t.numberColumn(name)[0])) << name << " without kernel records";
  }
}

TEST(MetricsTest, OpRowWithKernels) {
  OpStats s;
  s.calls = 1;
  s.matrixFlops = 4'000'000;
  s.bytes = 1000;
  OpKernelStats k;
  k.kernels = 2;
  k.seconds = 1e-6;  // 4e12 FLOP/s
  ResultTable t("ops");
  addOpRow(t, s, &k, /*peak=*/8e12, /*peakBytesPerSecond=*/2e9);
  EXPECT_DOUBLE_EQ(t.numberColumn("kernels")[0], 2.0);
  EXPECT_DOUBLE_EQ(t.numberColumn("kernel_seconds")[0], 1e-6);
  EXPECT_DOUBLE_EQ(t.numberColumn("kernel_flops_per_second")[0], 4e12);
  EXPECT_DOUBLE_EQ(t.numberColumn("kernel_utilization")[0], 0.5);
  EXPECT_DOUBLE_EQ(t.numberColumn("lost_seconds")[0], 0.5e-6);  // 1 us - 4e6 / 8e12 s
  // 1000 bytes in 1 us is 1e9 bytes/s, half of 2e9.
  EXPECT_DOUBLE_EQ(t.numberColumn("kernel_bandwidth_utilization")[0], 0.5);
}

TEST(MetricsTest, Median) {
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({5.0}), 5.0);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(median({10.0, 0.0}), 5.0);
  EXPECT_DOUBLE_EQ(median({7.0, 7.0, 1.0, 9.0, 7.0, 2.0}), 7.0);
  EXPECT_DOUBLE_EQ(median({9.0, 8.0, 1.0, 2.0, 100.0}), 8.0);
  EXPECT_TRUE(std::isnan(median({})));
}

CountTable tableOf(std::initializer_list<std::tuple<const char*, const char*, int64_t>> rows) {
  CountTable t;
  for (const auto& [op, dtype, matrix] : rows) {
    t.add(op, "", dtype, OpClass::Matrix, Cost{matrix, 0}, 0);
  }
  return t;
}

TEST(MetricsTest, DominantPeakDtypeFollowsTheTf32Flags) {
  // float32 matmuls only.
  const CountTable mm = tableOf({{"aten::mm", "Float", 100}, {"aten::mm", "Half", 60}});
  EXPECT_EQ(dominantPeakDtype(mm, /*tf32Matmul=*/false, /*tf32Conv=*/true), PeakDtype::FP32);
  EXPECT_EQ(dominantPeakDtype(mm, /*tf32Matmul=*/true, /*tf32Conv=*/false), PeakDtype::TF32);

  // Convolution rows follow the cuDNN flag, the others the cuBLAS flag.
  const CountTable conv = tableOf({{"aten::convolution", "Float", 100}});
  EXPECT_EQ(dominantPeakDtype(conv, /*tf32Matmul=*/false, /*tf32Conv=*/true), PeakDtype::TF32);
  EXPECT_EQ(dominantPeakDtype(conv, /*tf32Matmul=*/true, /*tf32Conv=*/false), PeakDtype::FP32);
  const CountTable mkldnn = tableOf({{"mkldnn::_convolution_pointwise", "Float", 100}});
  EXPECT_EQ(dominantPeakDtype(mkldnn, /*tf32Matmul=*/true, /*tf32Conv=*/false), PeakDtype::FP32);

  // A float32 model with both: the flags decide which of its FLOPs count as TF32.
  const CountTable both =
      tableOf({{"aten::convolution", "Float", 100}, {"aten::addmm", "Float", 80}});
  EXPECT_EQ(dominantPeakDtype(both, /*tf32Matmul=*/false, /*tf32Conv=*/true), PeakDtype::TF32);
  EXPECT_EQ(dominantPeakDtype(both, /*tf32Matmul=*/true, /*tf32Conv=*/false), PeakDtype::FP32);
  EXPECT_EQ(dominantPeakDtype(both, /*tf32Matmul=*/true, /*tf32Conv=*/true), PeakDtype::TF32);

  // Mixed precision: the dtype with the most matrix FLOPs.
  const CountTable amp = tableOf({{"aten::mm", "BFloat16", 500}, {"aten::mm", "Float", 20}});
  EXPECT_EQ(dominantPeakDtype(amp, true, true), PeakDtype::BF16);
}

TEST(MetricsTest, DominantPeakDtypeBreaksMatrixTiesByAllFlops) {
  CountTable t;
  t.add("aten::mm", "", "Half", OpClass::Matrix, Cost{100, 0}, 0);
  t.add("aten::mm", "", "BFloat16", OpClass::Matrix, Cost{100, 0}, 0);
  t.add("aten::gelu", "", "BFloat16", OpClass::Vector, Cost{0, 5}, 0);
  EXPECT_EQ(dominantPeakDtype(t, false, false), PeakDtype::BF16);
}

TEST(MetricsTest, DominantPeakDtypeIsADtypeThatWasCounted) {
  EXPECT_FALSE(dominantPeakDtype(CountTable(), true, true).has_value());
  // No peak applies to integer or dtype-less rows.
  CountTable noPeak;
  noPeak.add("aten::embedding", "", "Long", OpClass::Memory, Cost{}, 64);
  noPeak.add("aten::zeros", "", "", OpClass::Memory, Cost{}, 64);
  EXPECT_FALSE(dominantPeakDtype(noPeak, true, true).has_value());
  // Rows without FLOPs still name their dtype (a model that only moves bfloat16 data is not an
  // fp64 model).
  CountTable copies;
  copies.add("aten::copy_", "", "BFloat16", OpClass::Memory, Cost{}, 128);
  EXPECT_EQ(dominantPeakDtype(copies, true, true), PeakDtype::BF16);
}

}  // namespace
}  // namespace torchutil
