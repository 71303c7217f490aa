// profileModel (libtorch/Profile.h) with fake hardware on the CPU, passed through
// ProfileOptions::backends: a TorchScript model's counted forward traced by a fake GPU that runs
// one kernel per innermost op, the kernels attributed to the ops that launched them, dropped
// records making the trace incomplete, a refused trace, and counters read through the fakes and
// matched to the traced kernels. What a profile on a GPU does between the hardware calls, and
// the trace_status and counters_status a user reads, checked without one.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <algorithm>
#include <string>
#include <vector>

#include "FakeCounterBackend.h"
#include "FakeTraceBackend.h"
#include "libtorch/Profile.h"

namespace torchutil {
namespace {

using hw::RangeMetric;
using testing::FakeCounterBackend;
using testing::FakeTraceBackend;
using testing::rangeValues;

// relu(x @ x): two ops that compute, aten::mm and aten::relu.
c10::IValue model() {
  torch::jit::Module m("FakeHardwareModel");
  m.define(R"(
    def forward(self, x):
        return torch.relu(torch.mm(x, x))
  )");
  return c10::IValue(m._ivalue());
}

ProfileOptions options(const HardwareBackends* backends) {
  ProfileOptions o;
  o.warmup = 1;
  o.repeat.minIters = 2;
  o.repeat.maxIters = 2;
  o.backends = backends;
  return o;
}

double field(const ProfileOutput& out, Field f) {
  return out.summary[static_cast<size_t>(f)];
}

TEST(ProfileFakeHardwareTest, AFakeGpusKernelsAreAttributedToTheOpsThatLaunchedThem) {
  FakeTraceBackend trace;
  trace.kernelPerOp = true;
  HardwareBackends backends;
  backends.trace = &trace;
  const ProfileOutput out = profileModel(model(), {at::randn({4, 4})}, options(&backends));
  EXPECT_EQ(out.traceStatus, "on");
  ASSERT_TRUE(out.traced);
  // A TorchScript forward may fork ops onto other threads, whose launches markers on this
  // thread could not place: it is correlated through API records.
  EXPECT_EQ(trace.correlation, Correlation::ApiRecords);
  EXPECT_EQ(trace.alive, 0);
  EXPECT_EQ(trace.popped, static_cast<int>(trace.pushed.size()));  // every op pushed was popped
  ASSERT_FALSE(trace.launched.empty());
  ASSERT_EQ(out.kernels.size(), trace.launched.size());
  // Ops inside a counted op (aten::mm's resolve_conj, aten::relu's clamp_min on the CPU) push
  // the counted op's event: the hooks see a change only where a counted op or an op outside one
  // begins or ends. So each kernel takes the event of the op that owns its launch, and so the
  // op row of the counted op that owns it.
  for (uint64_t id : trace.pushed) {
    ASSERT_GE(id, 1u);
    ASSERT_LE(id, out.events.size());
    EXPECT_NE(out.events[id - 1].kind, OpEvent::Kind::Inside) << out.events[id - 1].op;
  }
  EXPECT_TRUE(std::any_of(out.events.begin(), out.events.end(),
                          [](const OpEvent& e) { return e.kind == OpEvent::Kind::Inside; }));
  const auto& rows = out.table.rows();
  std::vector<std::string> ops;
  for (const KernelRecord& k : out.kernels) {
    ASSERT_GE(k.opEvent, 0) << k.name;
    EXPECT_EQ(k.name, "kernel_of_event_" + std::to_string(k.opEvent));
    const OpEvent& launcher = out.events[static_cast<size_t>(k.opEvent)];
    ASSERT_GE(launcher.row, 0) << launcher.op;
    ops.push_back(rows[static_cast<size_t>(launcher.row)].op);
  }
  EXPECT_NE(std::find(ops.begin(), ops.end(), "aten::mm"), ops.end());
  EXPECT_NE(std::find(ops.begin(), ops.end(), "aten::relu"), ops.end());
  ASSERT_EQ(out.trace.perRow.size(), rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(out.trace.perRow[r].kernels,
              static_cast<double>(std::count(ops.begin(), ops.end(), rows[r].op)))
        << rows[r].op;
  }
  EXPECT_EQ(field(out, Field::traced), 1.0);
  EXPECT_EQ(field(out, Field::kernels_per_forward), static_cast<double>(out.kernels.size()));
  EXPECT_EQ(field(out, Field::unattributed_kernel_seconds), 0.0);
  EXPECT_EQ(out.countersStatus, "off");
}

TEST(ProfileFakeHardwareTest, DroppedRecordsMakeTheTraceIncomplete) {
  FakeTraceBackend trace;
  trace.kernelPerOp = true;
  trace.dropped = 3;
  HardwareBackends backends;
  backends.trace = &trace;
  const ProfileOutput out = profileModel(model(), {at::randn({4, 4})}, options(&backends));
  EXPECT_EQ(out.traceStatus, "on, incomplete: CUPTI dropped 3 records");
  EXPECT_TRUE(out.traced);
}

TEST(ProfileFakeHardwareTest, ARefusedTraceLeavesAProfileWithoutKernels) {
  FakeTraceBackend trace;
  trace.refusal = explainFailure(HwFailure::OtherProfiler, "cuptiActivityEnable(kind)",
                                 "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
  HardwareBackends backends;
  backends.trace = &trace;
  const ProfileOutput out = profileModel(model(), {at::randn({4, 4})}, options(&backends));
  EXPECT_EQ(out.traceStatus,
            "off: another profiler holds the GPU's counters (ncu, nsys, torch.profiler or DCGM "
            "profiling). cuptiActivityEnable(kind) failed "
            "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)");
  EXPECT_FALSE(out.traced);
  EXPECT_TRUE(out.kernels.empty());
  EXPECT_EQ(field(out, Field::traced), 0.0);
}

TEST(ProfileFakeHardwareTest, CountersThroughTheFakesAreMatchedToTheTracedKernels) {
  FakeTraceBackend trace;
  trace.kernelPerOp = true;
  FakeCounterBackend counters;
  counters.passes = 2;
  // One range per kernel the counted forward launched, 10 FMA instructions each.
  counters.beforeDecode = [&](FakeCounterBackend& c) {
    c.ranges.clear();
    for (size_t i = 0; i < trace.launched.size(); ++i) {
      c.ranges.push_back({std::to_string(i), rangeValues({{RangeMetric::FmaInstructions, 10}})});
    }
  };
  counters.samples = {hw::PmSample{1000, 2000, {50.0, 0.0, 10.0}},
                      hw::PmSample{2000, 3000, {70.0, 0.0, 30.0}}};
  HardwareBackends backends;
  backends.trace = &trace;
  backends.counters = &counters;
  ProfileOptions o = options(&backends);
  o.counters = {hw::CounterSet::Flops, hw::CounterSet::Timeline};
  const ProfileOutput out = profileModel(model(), {at::randn({4, 4})}, o);
  EXPECT_EQ(out.traceStatus, "on");
  EXPECT_EQ(out.countersStatus, "on");
  EXPECT_EQ(out.countersNotOnGpu, "");
  EXPECT_EQ(counters.passesEnded, 2u);  // two more forwards of the model, one per pass
  const double kernels = static_cast<double>(trace.launched.size());
  EXPECT_EQ(field(out, Field::counter_kernels), kernels);
  EXPECT_EQ(field(out, Field::counter_passes), 2.0);
  EXPECT_EQ(field(out, Field::hw_fma_instructions), 10.0 * kernels);
  EXPECT_EQ(field(out, Field::pm_samples), 2.0);
  EXPECT_EQ(field(out, Field::pm_interval_us), 10.0);
  EXPECT_EQ(counters.alive, 0);
}

// torch._scaled_mm of two fp8 matrices: matrix work in float8, the arithmetic GH100 has no
// tensor-path counter for. (Dtypes by number: TorchScript compiled without Python knows no
// torch.float32; 6 is float32, 15 bfloat16.)
c10::IValue fp8Model() {
  torch::jit::Module m("Fp8Model");
  m.define(R"(
    def forward(self, a, b):
        s = torch.ones([], dtype=6)
        return torch._scaled_mm(a, b, s, s, out_dtype=15)
  )");
  return c10::IValue(m._ivalue());
}

TEST(ProfileFakeHardwareTest, Fp8MatrixWorkWithNoTensorCounterIsNaNWithAReasonNotZero) {
  FakeTraceBackend trace;
  trace.kernelPerOp = true;
  FakeCounterBackend counters;
  for (const std::string& name :  // a GH100: no fp8 tensor path
       hw::rangeMetricDefs()[static_cast<size_t>(RangeMetric::TensorHgmmaFp8)].candidates) {
    counters.known.erase(name);
  }
  // Every kernel reads 0 on the paths the chip has, as the H200's fp8 GEMM kernels do.
  counters.beforeDecode = [&](FakeCounterBackend& c) {
    c.ranges.clear();
    for (size_t i = 0; i < trace.launched.size(); ++i) {
      c.ranges.push_back({std::to_string(i), rangeValues({{RangeMetric::TensorHgmmaFp16, 0},
                                                          {RangeMetric::TensorHgmmaBf16, 0},
                                                          {RangeMetric::TensorHgmmaTf32, 0},
                                                          {RangeMetric::TensorHmmaFp16, 0},
                                                          {RangeMetric::TensorHmmaBf16, 0},
                                                          {RangeMetric::TensorHmmaTf32, 0},
                                                          {RangeMetric::FmaInstructions, 10}})});
    }
  };
  HardwareBackends backends;
  backends.trace = &trace;
  backends.counters = &counters;
  ProfileOptions o = options(&backends);
  o.counters = {hw::CounterSet::Flops};
  o.peakFlops = 1e12;  // no measured fp8 peak on a CPU
  const at::Tensor a = at::randn({16, 32}).to(at::kFloat8_e4m3fn);
  const at::Tensor b = at::randn({16, 32}).to(at::kFloat8_e4m3fn).t();
  const ProfileOutput out = profileModel(fp8Model(), {a, b}, o);
  ASSERT_EQ(out.traceStatus, "on");
  EXPECT_EQ(out.countersNotOnGpu, "tensor_hgmma_fp8");
  EXPECT_EQ(out.countersStatus,
            "on, partial: flops: this GPU has no tensor-path counter for float8, the dtype of "
            "16384 counted matrix FLOPs (aten::_scaled_mm): hw_tensor_flops and hw_flops_ratio "
            "are NaN for those ops and for the forward");
  EXPECT_TRUE(std::isnan(field(out, Field::hw_tensor_flops)));
  EXPECT_TRUE(std::isnan(field(out, Field::hw_flops_ratio)));
  EXPECT_TRUE(std::isnan(field(out, Field::hw_tensor_flops_fp8)));
  EXPECT_EQ(field(out, Field::hw_tensor_flops_bf16), 0.0);  // read, and zero
  const NamedResult named = nameResult(out);
  const auto& ops = named.ops.textColumn("op");
  const auto row = std::find(ops.begin(), ops.end(), "aten::_scaled_mm") - ops.begin();
  ASSERT_LT(static_cast<size_t>(row), ops.size());
  EXPECT_EQ(named.ops.textColumn("dtype")[row], "float8_e4m3fn");
  EXPECT_TRUE(std::isnan(named.ops.numberColumn("hw_tensor_flops")[row]));
  EXPECT_TRUE(std::isnan(named.ops.numberColumn("hw_flops_ratio")[row]));
  EXPECT_EQ(counters.alive, 0);
}

TEST(ProfileFakeHardwareTest, ACpuProfileTimesEveryCountedOpAndTracesThem) {
  ProfileOptions o = options(nullptr);
  o.chromeTrace = true;
  const ProfileOutput out = profileModel(model(), {at::randn({64, 64})}, o);
  EXPECT_FALSE(out.traced);
  const auto& rows = out.table.rows();
  ASSERT_EQ(out.cpuOpTimes.size(), rows.size());
  double total = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_GT(out.cpuOpTimes[r].seconds, 0.0) << rows[r].op;
    total += out.cpuOpTimes[r].seconds;
  }
  EXPECT_LE(total, out.phases.count);  // counted ops never nest: at most the counted forward
  const NamedResult named = nameResult(out);
  EXPECT_EQ(named.text("kernel_attribution"), "cpu");
  EXPECT_DOUBLE_EQ(named.ops.numberColumn("kernel_seconds")[0], out.cpuOpTimes[0].seconds);
  EXPECT_TRUE(std::isnan(named.ops.numberColumn("kernels")[0]));
  // One trace event per counted op call, and no GPU process.
  size_t counted = 0;
  for (size_t at = out.chromeTrace.find("\"counted\""); at != std::string::npos;
       at = out.chromeTrace.find("\"counted\"", at + 1)) {
    ++counted;
  }
  EXPECT_EQ(counted, 2u);  // aten::mm, aten::relu
  EXPECT_EQ(out.chromeTrace.find("GPU:"), std::string::npos);
}

TEST(ProfileFakeHardwareTest, WithoutBackendsACpuProfileSaysWhatItAlwaysSaid) {
  ProfileOptions o = options(nullptr);
  o.counters = {hw::CounterSet::Flops};
  const ProfileOutput out = profileModel(model(), {at::randn({4, 4})}, o);
  EXPECT_EQ(out.traceStatus, "off: kernel tracing needs a CUDA device, got cpu");
  EXPECT_EQ(out.countersStatus, "off: hardware counters need a CUDA device, got cpu");
  EXPECT_FALSE(out.traced);
}

}  // namespace
}  // namespace torchutil
