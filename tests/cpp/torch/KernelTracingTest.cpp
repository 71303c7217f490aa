// KernelTracing (libtorch/KernelTracing.h) over a fake trace backend on the CPU: records split
// by time into the counted forward's and the traced forwards', the counted ones attributed to op
// events through the external ids of their launches, dropped records counted, and the
// trace_status a user sees when the backend cannot or will not trace.
#include <c10/core/Device.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "FakeTraceBackend.h"
#include "TraceTestData.h"
#include "libtorch/KernelTracing.h"

namespace torchutil {
namespace {

using testdata::kernel;
using testing::FakeTraceBackend;

const c10::Device kCpu(c10::kCPU);

// A trace with `how`, past its counted forward and at the start of its timed ones (null, with
// why in the failure message, when it did not start).
std::unique_ptr<KernelTracing> inTimedForwards(FakeTraceBackend& fake, Correlation how) {
  std::string why;
  auto tracing = KernelTracing::start(kCpu, &why, fake, how);
  EXPECT_NE(tracing, nullptr) << why;
  if (tracing) {
    tracing->countedDone();
    tracing->timedStart();
  }
  return tracing;
}

TEST(KernelTracingTest, RecordsSplitByTimeAndCountedOnesTakeTheirLaunchersOpEvent) {
  FakeTraceBackend fake;
  std::string why;
  auto tracing = KernelTracing::start(kCpu, &why, fake);
  ASSERT_NE(tracing, nullptr) << why;
  EXPECT_EQ(why, "");
  EXPECT_TRUE(fake.correlating);
  EXPECT_EQ(fake.correlation, Correlation::Markers);  // unless asked for API records
  const uint64_t begin = FakeTraceBackend::now();     // read by start()
  // The counted forward: two kernels launched under external ids 1 and 2 (op events 0 and 1),
  // and one launched by no op.
  fake.kernels = {kernel("gemm", begin + 10, begin + 20, /*correlationId=*/7),
                  kernel("relu", begin + 30, begin + 40, 8),
                  kernel("copy", begin + 50, begin + 60, 9)};
  fake.externalIds = {{7, 1}, {8, 2}};
  tracing->countedDone();
  EXPECT_FALSE(fake.correlating);
  const uint64_t countedEnd = FakeTraceBackend::now();
  // Between the counted and the traced forwards (warm-up): neither.
  fake.kernels.push_back(kernel("warmup", countedEnd + 10, countedEnd + 20, 10));
  tracing->timedStart();
  const uint64_t timedBegin = FakeTraceBackend::now();
  fake.kernels.push_back(kernel("gemm", timedBegin + 10, timedBegin + 20, 11));

  std::vector<KernelRecord> counted, timed;
  // The traced forward does not repeat the counted one's three kernels: it keeps no op.
  EXPECT_EQ(tracing->finish(&counted, &timed, 1).ops, TracedOps::CountedOnly);
  EXPECT_EQ(fake.flushes, 1);
  EXPECT_EQ(fake.alive, 0);  // released at finish, not at the end of the profile
  ASSERT_EQ(counted.size(), 3u);
  EXPECT_EQ(counted[0].opEvent, 0);
  EXPECT_EQ(counted[1].opEvent, 1);
  EXPECT_EQ(counted[2].opEvent, -1);
  EXPECT_FALSE(counted[0].timed);
  ASSERT_EQ(timed.size(), 1u);
  EXPECT_TRUE(timed[0].timed);
  EXPECT_EQ(timed[0].correlationId, 11u);
  EXPECT_EQ(tracing->dropped(), 0u);
}

TEST(KernelTracingTest, WithGraphNodesTheReplaysAreAttributedAndNothingIsCounted) {
  FakeTraceBackend fake;
  std::string why;
  auto tracing = KernelTracing::start(kCpu, &why, fake, Correlation::GraphNodes);
  ASSERT_NE(tracing, nullptr) << why;
  EXPECT_EQ(fake.correlation, Correlation::GraphNodes);
  EXPECT_EQ(tracing->correlation(), Correlation::GraphNodes);
  const uint64_t begin = FakeTraceBackend::now();
  // A capture runs nothing; a kernel inside the counted window (a warm-up after a failed
  // capture) is not the counted forward's.
  fake.kernels = {kernel("warmup", begin + 10, begin + 20, 5)};
  tracing->countedDone();
  tracing->timedStart();
  const uint64_t t = FakeTraceBackend::now();
  // Two replays (launches 30 and 31) of a graph whose executable nodes 101 and 102 clone the
  // captured nodes 1 (op event 0) and 2 (launched by no op).
  for (uint32_t launch : {30u, 31u}) {
    for (uint64_t node : {101u, 102u}) {
      KernelRecord k = kernel("k" + std::to_string(node), t + 10 * node + launch,
                              t + 10 * node + launch + 5, launch);
      k.graphNodeId = node;
      fake.kernels.push_back(k);
    }
  }
  fake.graphNodes.created = {{1, 1}, {2, 0}};
  fake.graphNodes.cloned = {{101, 1}, {102, 2}};
  std::vector<KernelRecord> counted, timed;
  const FinishedTrace done = tracing->finish(&counted, &timed, 2);
  EXPECT_EQ(done.ops, TracedOps::ByGraphNodes) << done.problem;
  EXPECT_TRUE(counted.empty());
  ASSERT_EQ(timed.size(), 4u);
  for (const KernelRecord& k : timed) {
    EXPECT_TRUE(k.timed);
    EXPECT_EQ(k.opEvent, k.graphNodeId == 101 ? 0 : -1) << k.name;
    ASSERT_TRUE(k.forward.has_value());
    EXPECT_EQ(*k.forward, k.correlationId == 30 ? 0 : 1);
  }
}

// TORCHUTIL_CUPTI_RECORD_CAPTURE=1 reaches the trace as recordFromStart: its records are on from
// the start, through the capture; by default they come on with the traced forwards.
TEST(KernelTracingTest, RecordsFromTheStartOnlyWhenAskedTo) {
  for (const bool fromStart : {false, true}) {
    FakeTraceBackend fake;
    std::string why;
    auto tracing = KernelTracing::start(kCpu, &why, fake, Correlation::CaptureNodes, fromStart);
    ASSERT_NE(tracing, nullptr) << why;
    EXPECT_EQ(fake.recordsTurnedOn, fromStart ? 1 : 0);
    tracing->countedDone();
    tracing->timedStart();
    EXPECT_EQ(fake.recordsTurnedOn, fromStart ? 2 : 1);  // the second a no-op for CUPTI's
  }
}

TEST(KernelTracingTest, WithCaptureNodesTheReplaysAreAttributedByTheCapturedSequence) {
  FakeTraceBackend fake;
  std::string why;
  auto tracing = KernelTracing::start(kCpu, &why, fake, Correlation::CaptureNodes);
  ASSERT_NE(tracing, nullptr) << why;
  tracing->captureEnds();  // (captureBegins needs a CUDA stream's handle)
  EXPECT_EQ(fake.captureEnds, 1);
  tracing->countedDone();
  tracing->timedStart();
  const uint64_t t = FakeTraceBackend::now();
  // One replay of a captured sequence: gemm under external id 2 (op event 1), then relu under
  // none.
  fake.kernels = {kernel("gemm", t + 10, t + 20, 40), kernel("relu", t + 30, t + 40, 40)};
  fake.captured.nodes = {{true, KernelRecord::Kind::Kernel, "gemm"},
                         {true, KernelRecord::Kind::Kernel, ""}};
  fake.captured.opChanges = {{0, 2}, {1, 0}};
  std::vector<KernelRecord> counted, timed;
  const FinishedTrace done = tracing->finish(&counted, &timed, 1);
  ASSERT_EQ(done.ops, TracedOps::ByPosition) << done.problem;
  ASSERT_TRUE(counted.empty() && timed.size() == 2u);
  EXPECT_EQ(timed[0].opEvent, 1);
  EXPECT_EQ(timed[1].opEvent, -1);
  EXPECT_EQ(timed[1].forward, 0);
}

TEST(KernelTracingTest, CaptureNodesThatDoNotMatchTheReplaysAttributeNothingAndSayWhy) {
  FakeTraceBackend fake;
  auto tracing = inTimedForwards(fake, Correlation::CaptureNodes);
  ASSERT_NE(tracing, nullptr);
  const uint64_t t = FakeTraceBackend::now();
  fake.kernels = {kernel("gemm", t + 10, t + 20, 40)};
  fake.captured.nodes = {{true, KernelRecord::Kind::Kernel, "conv"}};
  std::vector<KernelRecord> counted, timed;
  FinishedTrace done = tracing->finish(&counted, &timed, 1);
  EXPECT_EQ(done.ops, TracedOps::Unattributed);
  EXPECT_EQ(
      done.problem,
      "the traced forwards' 1 records do not repeat the captured sequence of 1 nodes 1 time(s)");
  EXPECT_EQ(timed[0].opEvent, -1);
  fake.captured = CapturedForward();
  auto again = inTimedForwards(fake, Correlation::CaptureNodes);
  ASSERT_NE(again, nullptr);
  fake.captured.complete = false;
  const uint64_t t2 = FakeTraceBackend::now();
  fake.kernels = {kernel("gemm", t2 + 10, t2 + 20, 40)};
  timed.clear();
  done = again->finish(&counted, &timed, 1);
  EXPECT_EQ(done.ops, TracedOps::Unattributed);
  EXPECT_EQ(done.problem, "a query of the capture's nodes failed");
}

TEST(KernelTracingTest, GraphNodesWithNoReplayedRecordSayWhy) {
  FakeTraceBackend fake;
  auto tracing = inTimedForwards(fake, Correlation::GraphNodes);
  ASSERT_NE(tracing, nullptr);
  std::vector<KernelRecord> counted, timed;
  const FinishedTrace done = tracing->finish(&counted, &timed, 1);
  EXPECT_EQ(done.ops, TracedOps::Unattributed);
  EXPECT_EQ(done.problem, "the traced forwards left no record");
}

TEST(KernelTracingTest, TheHooksAreTheBackendsAndPushOnlyWhileCorrelating) {
  FakeTraceBackend fake;
  std::string why;
  auto tracing = KernelTracing::start(kCpu, &why, fake);
  ASSERT_NE(tracing, nullptr) << why;
  const TraceHooks* hooks = tracing->hooks();
  hooks->push(1);
  hooks->pop();
  tracing->countedDone();
  hooks->push(2);  // after the counted forward: not correlated
  EXPECT_EQ(fake.pushed, (std::vector<uint64_t>{1}));
  EXPECT_EQ(fake.popped, 1);
  const uint64_t t = hooks->clock();
  EXPECT_EQ(t, FakeTraceBackend::now());
}

TEST(KernelTracingTest, DroppedRecordsAreCounted) {
  FakeTraceBackend fake;
  fake.dropped = 3;
  std::string why;
  auto tracing = KernelTracing::start(kCpu, &why, fake);
  ASSERT_NE(tracing, nullptr) << why;
  tracing->countedDone();
  std::vector<KernelRecord> counted, timed;
  tracing->finish(&counted, &timed, 1);
  EXPECT_EQ(tracing->dropped(), 3u);
}

TEST(KernelTracingTest, ARefusedTraceIsOffWithTheSentenceOfTheRefusedCall) {
  FakeTraceBackend fake;
  fake.refusal = explainFailure(HwFailure::NoPermission, "cuptiActivityEnable(kind)",
                                "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  std::string why;
  EXPECT_EQ(KernelTracing::start(kCpu, &why, fake), nullptr);
  EXPECT_EQ(why,
            "no permission to read GPU performance counters: the NVIDIA driver restricts "
            "them to administrators (NVreg_RestrictProfilingToAdminUsers=1); run as root or load "
            "the driver with NVreg_RestrictProfilingToAdminUsers=0. cuptiActivityEnable(kind) "
            "failed (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)");
  EXPECT_EQ(fake.alive, 0);
}

TEST(KernelTracingTest, TheBackendsReasonTurnsTracingOffBeforeAnythingStarts) {
  FakeTraceBackend fake;
  fake.unavailable = "another torchutil profile is tracing kernels in this process";
  std::string why;
  EXPECT_EQ(KernelTracing::start(kCpu, &why, fake), nullptr);
  EXPECT_EQ(why, "another torchutil profile is tracing kernels in this process");
  EXPECT_EQ(fake.traces, 0);
}

TEST(KernelTracingTest, WithoutAFakeTheCpuSaysTracingNeedsCuda) {
  std::string why;
  EXPECT_EQ(KernelTracing::start(kCpu, &why), nullptr);
  EXPECT_EQ(why, "kernel tracing needs a CUDA device, got cpu");
}

}  // namespace
}  // namespace torchutil
