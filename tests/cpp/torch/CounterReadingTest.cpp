// CounterReading (libtorch/CounterReading.h) over a fake counter backend on the CPU: what one
// profile reads and the counters_status a user sees, for a full read, a PM buffer that overflowed
// or was lost, a refused permission, another profiler holding the GPU, dropped ranges, another
// read in the process, and ranges that do not match the kernels. Each status is the exact text.
#include <c10/core/Device.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "FakeCounterBackend.h"
#include "HwTestData.h"
#include "TraceTestData.h"
#include "core/CounterConfig.h"
#include "libtorch/CounterReading.h"

namespace torchutil {
namespace {

using hw::CounterSet;
using hw::RangeMetric;
using testdata::attributed;
using testing::FakeCounterBackend;
using testing::rangeValues;

const c10::Device kCpu(c10::kCPU);
const std::vector<CounterSet> kAll{CounterSet::Flops, CounterSet::Throughput, CounterSet::Timeline};

// A counted forward of two ops, one kernel each (100-200 ns and 300-500 ns), and a traced
// forward of the same two kernels at 10,000-10,100 and 10,300-10,500 ns.
struct Trace {
  std::vector<KernelRecord> kernels;
  std::vector<OpEvent> events;
  Trace() {
    events = testdata::opEvents({"aten::mm", "aten::relu"});
    kernels = {attributed(KernelRecord::Kind::Kernel, 100, 200, 0),
               attributed(KernelRecord::Kind::Kernel, 300, 500, 1),
               attributed(KernelRecord::Kind::Kernel, 10000, 10100, 0, /*timed=*/true),
               attributed(KernelRecord::Kind::Kernel, 10300, 10500, 1, /*timed=*/true)};
  }
};

// A backend whose ranges are the two counted kernels' and whose samples cover the traced ones.
FakeCounterBackend readable() {
  FakeCounterBackend fake;
  fake.passes = 2;
  fake.ranges = {
      {"0",
       rangeValues({{RangeMetric::TensorHgmmaFp16, 2000}, {RangeMetric::SmThroughputPct, 90}})},
      {"1", rangeValues({{RangeMetric::FmaInstructions, 30}, {RangeMetric::SmThroughputPct, 30}})}};
  for (uint64_t t = 9900; t < 10600; t += 100) {
    const bool busy = (t >= 10000 && t < 10100) || (t >= 10300 && t < 10500);
    fake.samples.push_back(hw::testdata::pmSample(t, t + 100, busy ? 80.0 : 0.0));
  }
  return fake;
}

// One profile's read: timeline around the traced forward, then the range passes (each pass one
// call of the forward), then the matching.
std::string readAll(FakeCounterBackend& fake, const std::vector<CounterSet>& sets,
                    hw::HwResult* out, int* forwards = nullptr, bool traced = true) {
  CounterReading counters(kCpu, sets, traced, /*pmIntervalNs=*/10000, hw::Replay::User, fake);
  counters.startTimeline(/*windowSeconds=*/0.001);
  counters.stopTimeline();
  int ran = 0;
  counters.readRanges([&] { ran += 1; }, /*maxRanges=*/66);
  if (forwards != nullptr) {
    *forwards = ran;
  }
  const Trace trace;
  return counters.finish(trace.kernels, trace.events, out);
}

const char* const kNoPermission =
    "no permission to read GPU performance counters: the NVIDIA driver restricts them to "
    "administrators (NVreg_RestrictProfilingToAdminUsers=1); run as root or load the driver "
    "with NVreg_RestrictProfilingToAdminUsers=0.";

TEST(CounterReadingTest, RangesAndSamplesReadThroughTheBackendAreOnAndMatchTheKernels) {
  FakeCounterBackend fake = readable();
  hw::HwResult hw;
  int forwards = 0;
  EXPECT_EQ(readAll(fake, kAll, &hw, &forwards), "on");
  EXPECT_EQ(forwards, 2);  // one per pass
  ASSERT_TRUE(hw.ranges);
  EXPECT_EQ(hw.passes, 2u);
  // The read's stages, on the steady clock: each measured, together within the whole read.
  for (double s : {hw.setupSeconds, hw.passSeconds, hw.decodeSeconds}) {
    EXPECT_GE(s, 0.0);  // NaN fails too
  }
  EXPECT_LE(hw.setupSeconds + hw.passSeconds + hw.decodeSeconds, hw.seconds);
  ASSERT_EQ(hw.kernels.size(), 2u);
  EXPECT_EQ(hw.kernelIndex, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(hw.kernels[0].values[static_cast<size_t>(RangeMetric::TensorHgmmaFp16)], 2000);
  EXPECT_EQ(hw.kernels[1].row, 1);
  EXPECT_EQ(hw.kernels[1].durationNs, 200u);
  ASSERT_TRUE(hw.timeline);
  EXPECT_EQ(hw.samples.size(), 7u);
  EXPECT_EQ(hw.intervalNs, 10000u);  // a 1 ms window fits the buffer at the least interval
  EXPECT_EQ(hw.offsetNs, 0);         // the samples line up with the traced kernels as they are
  EXPECT_EQ(hw.kernelSpans.size(), 2u);
  EXPECT_EQ(fake.alive, 0);
  EXPECT_EQ(fake.maxRanges, 66u);
}

TEST(CounterReadingTest, AFlaggedPmOverflowIsAPartialRead) {
  FakeCounterBackend fake = readable();
  fake.overflowFlag = true;
  hw::HwResult hw;
  EXPECT_EQ(readAll(fake, kAll, &hw),
            "on, partial: timeline: the hardware buffer overflowed, later samples are lost");
}

TEST(CounterReadingTest, ALostPmBufferLeavesTheTimelineOutAndNamesTheBuffer) {
  FakeCounterBackend fake = readable();
  fake.bufferLost = true;
  hw::HwResult hw;
  EXPECT_EQ(readAll(fake, {CounterSet::Timeline}, &hw),
            "off: timeline: the PM sampler's 32 MB hardware buffer overflowed at one sample per "
            "10 us (cuptiPmSamplingDecodeData: CUPTI_ERROR_OUT_OF_MEMORY): the sampled forwards "
            "took longer than expected");
  EXPECT_FALSE(hw.timeline);
}

TEST(CounterReadingTest, ARefusedPermissionReadsAsTheDriverRestrictionWithTheCall) {
  FakeCounterBackend fake = readable();
  fake.failAt["open"] =
      explainFailure(HwFailure::NoPermission, "cuptiProfilerGetCounterAvailability(&p)",
                     "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  hw::HwResult hw;
  int forwards = 0;
  EXPECT_EQ(readAll(fake, {CounterSet::Flops}, &hw, &forwards),
            std::string("off: flops: ") + kNoPermission +
                " cuptiProfilerGetCounterAvailability(&p) failed "
                "(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)");
  EXPECT_EQ(forwards, 0);
  EXPECT_FALSE(hw.ranges);
}

TEST(CounterReadingTest, AnotherProfilerHoldingTheGpuIsNamedWhileTheTimelineReads) {
  FakeCounterBackend fake = readable();
  fake.failAt["enable"] = explainFailure(HwFailure::OtherProfiler, "cuptiRangeProfilerEnable(&p)",
                                         "CUPTI_ERROR_HARDWARE_BUSY");
  hw::HwResult hw;
  EXPECT_EQ(readAll(fake, kAll, &hw),
            "on, partial: flops, throughput: another profiler holds the GPU's counters (ncu, "
            "nsys, torch.profiler or DCGM profiling). cuptiRangeProfilerEnable(&p) failed "
            "(CUPTI_ERROR_HARDWARE_BUSY)");
  EXPECT_FALSE(hw.ranges);
  EXPECT_TRUE(hw.timeline);
}

TEST(CounterReadingTest, DroppedRangesAreNotMatchedToKernels) {
  FakeCounterBackend fake = readable();
  fake.droppedRanges = 2;
  hw::HwResult hw;
  EXPECT_EQ(readAll(fake, {CounterSet::Flops}, &hw), "off: flops: CUPTI dropped 2 ranges");
  EXPECT_FALSE(hw.ranges);
}

TEST(CounterReadingTest, RangesThatDoNotMatchTheCountedKernelsAreNotMatched) {
  FakeCounterBackend fake = readable();
  fake.ranges.push_back({"2", rangeValues({})});
  hw::HwResult hw;
  EXPECT_EQ(readAll(fake, {CounterSet::Flops}, &hw),
            "off: flops: the counter passes profiled 3 kernels but the counted forward launched 2 "
            "(and 0 memsets): the forwards do not repeat one kernel sequence, so counters cannot "
            "be matched to kernels");
}

TEST(CounterReadingTest, AnotherReadInTheProcessTurnsCountersOffBeforeAnythingRuns) {
  FakeCounterBackend fake = readable();
  const hw::CounterClaim other;
  hw::HwResult hw;
  int forwards = 0;
  EXPECT_EQ(readAll(fake, kAll, &hw, &forwards),
            "off: another torchutil profile is reading hardware counters in this process");
  EXPECT_EQ(forwards, 0);
  EXPECT_EQ(fake.decodes, 0u);
}

TEST(CounterReadingTest, TheBackendsReasonTurnsCountersOff) {
  FakeCounterBackend fake = readable();
  fake.unavailable = "torch.profiler is running and holds CUPTI; hardware counters need it alone";
  hw::HwResult hw;
  EXPECT_EQ(readAll(fake, kAll, &hw),
            "off: torch.profiler is running and holds CUPTI; hardware counters need it alone");
}

TEST(CounterReadingTest, RangeCountersNeedTracingWhileTheTimelineDoesNot) {
  FakeCounterBackend fake = readable();
  hw::HwResult hw;
  int forwards = 0;
  EXPECT_EQ(readAll(fake, {CounterSet::Flops, CounterSet::Timeline}, &hw, &forwards,
                    /*traced=*/false),
            "on, partial: flops/throughput need kernel tracing (trace=True): the counters are "
            "matched to the traced kernels");
  EXPECT_EQ(forwards, 0);
  EXPECT_TRUE(hw.timeline);
  FakeCounterBackend alone = readable();
  hw::HwResult none;
  EXPECT_EQ(readAll(alone, {CounterSet::Flops}, &none, nullptr, /*traced=*/false),
            "off: flops/throughput need kernel tracing (trace=True): the counters are matched to "
            "the traced kernels");
}

TEST(CounterReadingTest, MetricsTheGpuLacksAreNamedApartAndDoNotMakeTheReadPartial) {
  FakeCounterBackend fake = readable();
  for (const std::string& name :
       hw::rangeMetricDefs()[static_cast<size_t>(RangeMetric::TensorHgmmaFp8)].candidates) {
    fake.known.erase(name);
  }
  CounterReading counters(kCpu, {CounterSet::Flops}, true, 10000, hw::Replay::User, fake);
  counters.readRanges([] {}, 8);
  const Trace trace;
  hw::HwResult hw;
  EXPECT_EQ(counters.finish(trace.kernels, trace.events, &hw), "on");
  EXPECT_EQ(counters.notOnGpu(), "tensor_hgmma_fp8");
}

TEST(CounterReadingTest, AForwardThatThrowsPropagatesAndTheNextReadWorks) {
  FakeCounterBackend fake = readable();
  {
    CounterReading counters(kCpu, {CounterSet::Flops}, true, 10000, hw::Replay::User, fake);
    EXPECT_THROW(counters.readRanges([] { throw std::runtime_error("model failed"); }, 8),
                 std::runtime_error);
  }
  EXPECT_EQ(fake.alive, 0);
  hw::HwResult hw;
  EXPECT_EQ(readAll(fake, kAll, &hw), "on");
}

TEST(CounterReadingTest, WithoutAFakeTheCpuAndMetaSayWhatTheyAlwaysSaid) {
  const Trace trace;
  hw::HwResult hw;
  EXPECT_EQ(CounterReading(kCpu, kAll, true, 10000).finish(trace.kernels, trace.events, &hw),
            "off: hardware counters need a CUDA device, got cpu");
  EXPECT_EQ(CounterReading(c10::Device(c10::kMeta), kAll, true, 10000)
                .finish(trace.kernels, trace.events, &hw),
            "off: nothing runs on the meta device");
  EXPECT_EQ(CounterReading(kCpu, {}, true, 10000).finish(trace.kernels, trace.events, &hw), "off");
  EXPECT_FALSE(hw.ranges || hw.timeline);
}

}  // namespace
}  // namespace torchutil
