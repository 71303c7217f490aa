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
