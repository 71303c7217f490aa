// The range profiler's read (core/RangeProfilerController.h) over a fake profiler: the passes run,
// the metrics configured, the ranges decoded, and what is released on every path. The fake's
// steps stand for CUPTI's (tests/cpp/FakeCounterBackend.h).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "FakeCounterBackend.h"
#include "core/CounterConfig.h"
#include "core/RangeProfilerController.h"

namespace torchutil::hw {
namespace {

using testing::FakeCounterBackend;
using testing::rangeValues;

const std::vector<CounterSet> kFlops{CounterSet::Flops};

// Reads kFlops through the fake, counting the forwards it runs.
bool read(FakeCounterBackend& fake, RangeProfile* out, std::string* why, int* forwards,
          Replay replay = Replay::User) {
  return readRangeCounters(
      fake.rangeProfiler(), /*deviceIndex=*/0, kFlops, replay,
      /*maxRanges=*/8, [&] { *forwards += 1; }, out, why);
}

TEST(RangeProfilerControllerTest, UserReplayRunsOneForwardPerPassThenDecodesEveryRange) {
  FakeCounterBackend fake;
  fake.passes = 3;
  fake.ranges = {{"0", rangeValues({{RangeMetric::TensorHgmmaFp16, 600}})},
                 {"1", rangeValues({{RangeMetric::FmaInstructions, 7}})}};
  RangeProfile out;
  std::string why;
  int forwards = 0;
  ASSERT_TRUE(read(fake, &out, &why, &forwards)) << why;
  EXPECT_EQ(forwards, 3);
  EXPECT_EQ(out.passes, 3u);
  EXPECT_EQ(fake.passesBegun, 3u);
  EXPECT_EQ(fake.passesEnded, 3u);
  EXPECT_EQ(fake.maxRanges, 8u);
  EXPECT_EQ(out.rangeNames, (std::vector<std::string>{"0", "1"}));
  // Values come back in the configured order, which is the catalog's order for the flops set.
  ASSERT_EQ(out.metrics.names, fake.rangeMetrics);
  ASSERT_EQ(out.values.size(), 2u);
  const RangeValues first = decodeRange(out.metrics, out.values[0]);
  EXPECT_EQ(first[static_cast<size_t>(RangeMetric::TensorHgmmaFp16)], 600);
  EXPECT_EQ(
      decodeRange(out.metrics, out.values[1])[static_cast<size_t>(RangeMetric::FmaInstructions)],
      7);
  EXPECT_EQ(fake.alive, 0);                // the profiler is released
  EXPECT_EQ(counterReadBusyReason(), "");  // and so is the process's claim
}

TEST(RangeProfilerControllerTest, KernelReplaySubmitsEveryPassInOneForward) {
  FakeCounterBackend fake;
  fake.passes = 5;
  fake.ranges = {{"0", rangeValues({})}};
  RangeProfile out;
  std::string why;
  int forwards = 0;
  ASSERT_TRUE(read(fake, &out, &why, &forwards, Replay::Kernel)) << why;
  EXPECT_EQ(fake.replay, Replay::Kernel);
  EXPECT_EQ(forwards, 1);
  EXPECT_EQ(out.passes, 1u);
}

TEST(RangeProfilerControllerTest, GivesUpWhenCuptiWantsMorePassesThanItSaid) {
  FakeCounterBackend fake;
  fake.passes = 2;
  fake.submittedAfter = 100;
  RangeProfile out;
  std::string why;
  int forwards = 0;
  EXPECT_FALSE(read(fake, &out, &why, &forwards));
  EXPECT_EQ(forwards, static_cast<int>(2 + kExtraPasses));
  EXPECT_EQ(why, "CUPTI had not collected every pass after 4 forwards (it asked for 2)");
  EXPECT_EQ(fake.alive, 0);
}

TEST(RangeProfilerControllerTest, RefusesMorePassesThanItRunsBeforeRunningAny) {
  FakeCounterBackend fake;
  fake.passes = kMaxPasses + 1;
  RangeProfile out;
  std::string why;
  int forwards = 0;
  EXPECT_FALSE(read(fake, &out, &why, &forwards));
  EXPECT_EQ(forwards, 0);
  EXPECT_EQ(why, "the counter sets need 65 replay passes (at most 64 are run)");
}

TEST(RangeProfilerControllerTest, AThrowingForwardPropagatesAndTheOpenPassIsReleased) {
  FakeCounterBackend fake;
  fake.passes = 2;
  RangeProfile out;
  std::string why;
  EXPECT_THROW(readRangeCounters(
                   fake.rangeProfiler(), 0, kFlops, Replay::User, 8,
                   [] { throw std::runtime_error("the model failed"); }, &out, &why),
               std::runtime_error);
  EXPECT_EQ(fake.passesBegun, 1u);
  EXPECT_EQ(fake.passesEnded, 0u);
  // The controller ends no pass: it destroys the profiler with its pass open, whose destructor
  // ends it (CounterBackend's contract; CUPTI's: cupti/RangeProfiler.cpp), while the process's
  // claim is still held.
  EXPECT_TRUE(fake.passOpenAtRelease);
  EXPECT_TRUE(fake.claimHeldAtRelease);
  EXPECT_EQ(fake.alive, 0);
  EXPECT_EQ(counterReadBusyReason(), "");
}

TEST(RangeProfilerControllerTest, MetricsTheChipLacksOrCuptiRefusesAreLeftOutAndNamed) {
  FakeCounterBackend fake;
  for (const std::string& name :
       rangeMetricDefs()[static_cast<size_t>(RangeMetric::TensorHgmmaFp8)].candidates) {
    fake.known.erase(name);
  }
  const std::string alu =
      rangeMetricDefs()[static_cast<size_t>(RangeMetric::AluInstructions)].candidates[0];
  fake.refused = {alu};
  fake.ranges = {{"0", rangeValues({})}};
  RangeProfile out;
  std::string why;
  int forwards = 0;
  ASSERT_TRUE(read(fake, &out, &why, &forwards)) << why;
  EXPECT_EQ(out.notOnThisChip, (std::vector<std::string>{"tensor_hgmma_fp8", alu}));
  EXPECT_EQ(fake.rangeMetrics, out.metrics.names);
  for (const std::string& name : fake.rangeMetrics) {
    EXPECT_NE(name, alu);
  }
  EXPECT_EQ(fake.rangeMetrics.size(), 10u);  // the 12 metrics of the flops set, less those two
}

TEST(RangeProfilerControllerTest, AChipWithoutAnyMetricOfTheSetsSaysSo) {
  FakeCounterBackend fake;
  fake.known.clear();
  RangeProfile out;
  std::string why;
  int forwards = 0;
  EXPECT_FALSE(read(fake, &out, &why, &forwards));
  EXPECT_EQ(why, "the chip GH100 has none of the metrics of the counter sets asked for");
}

TEST(RangeProfilerControllerTest, OneReadAtATimeInTheProcess) {
  FakeCounterBackend fake;
  const CounterClaim other;
  RangeProfile out;
  std::string why;
  int forwards = 0;
  EXPECT_FALSE(read(fake, &out, &why, &forwards));
  EXPECT_EQ(why, "another torchutil profile is reading hardware counters in this process");
  EXPECT_EQ(fake.passesBegun, 0u);
}

TEST(RangeProfilerControllerTest, AFailedStepIsItsSentenceAndReleasesTheProfiler) {
  for (const char* step : {"open", "enable", "beginPass", "endPass", "decode", "range"}) {
    FakeCounterBackend fake;
    fake.ranges = {{"0", rangeValues({})}};
    fake.failAt[step] = std::string("the ") + step + " step failed";
    RangeProfile out;
    std::string why;
    int forwards = 0;
    EXPECT_FALSE(read(fake, &out, &why, &forwards)) << step;
    EXPECT_EQ(why, std::string("the ") + step + " step failed");
    EXPECT_EQ(fake.alive, 0) << step;
  }
}

// Every step of the fake takes its own time (powers of two, so that every sum is exact).
void timeSteps(FakeCounterBackend& fake) {
  fake.stepSeconds = {{"open", 1},     {"buildConfig", 2}, {"enable", 4},  {"beginPass", 8},
                      {"endPass", 16}, {"decode", 64},     {"range", 128}, {"release", 512}};
}
constexpr double kForwardSeconds = 32;
constexpr double kSetupSeconds = 1 + 2 + 4;                // open, buildConfig, enable
constexpr double kPassSeconds = 8 + kForwardSeconds + 16;  // per pass
constexpr double kDecodeSeconds = 64 + 2 * 128;            // decode, two ranges read

// Reads kFlops through the fake on its clock; each forward takes kForwardSeconds.
bool readTimed(FakeCounterBackend& fake, RangeProfile* out, std::string* why,
               Replay replay = Replay::User) {
  return readRangeCounters(
      fake.rangeProfiler(), 0, kFlops, replay, 8, [&] { fake.now += kForwardSeconds; }, out, why,
      fake.clock());
}

TEST(RangeProfilerControllerTest, EachStageTakesExactlyItsOwnSteps) {
  FakeCounterBackend fake;
  timeSteps(fake);
  fake.passes = 3;
  fake.ranges = {{"0", rangeValues({})}, {"1", rangeValues({})}};
  RangeProfile out;
  std::string why;
  ASSERT_TRUE(readTimed(fake, &out, &why)) << why;
  EXPECT_EQ(out.setupSeconds, kSetupSeconds);
  EXPECT_EQ(out.passSeconds, 3 * kPassSeconds);
  EXPECT_EQ(out.decodeSeconds, kDecodeSeconds);
  // The release is in none of them: the clock moved by the stages and the release only.
  EXPECT_EQ(fake.now, 1000 + kSetupSeconds + 3 * kPassSeconds + kDecodeSeconds + 512);

  FakeCounterBackend kernel;  // kernel replay: one pass, one forward
  timeSteps(kernel);
  kernel.passes = 5;
  kernel.ranges = fake.ranges;
  ASSERT_TRUE(readTimed(kernel, &out, &why, Replay::Kernel)) << why;
  EXPECT_EQ(out.setupSeconds, kSetupSeconds);
  EXPECT_EQ(out.passSeconds, kPassSeconds);
  EXPECT_EQ(out.decodeSeconds, kDecodeSeconds);
}

TEST(RangeProfilerControllerTest, AFailedStageAndEveryLaterOneStayNaN) {
  struct Case {
    const char* step;
    bool setup, passes, decode;  // the stages measured
  };
  for (const Case& c : {Case{"open", false, false, false}, Case{"enable", false, false, false},
                        Case{"beginPass", true, false, false}, Case{"endPass", true, false, false},
                        Case{"decode", true, true, false}, Case{"range", true, true, false}}) {
    FakeCounterBackend fake;
    timeSteps(fake);
    fake.passes = 2;
    fake.ranges = {{"0", rangeValues({})}, {"1", rangeValues({})}};
    fake.failAt[c.step] = "failed";
    RangeProfile out;
    std::string why;
    EXPECT_FALSE(readTimed(fake, &out, &why)) << c.step;
    // A stage measured has exactly its own time; one not measured is NaN, never 0.
    const auto expect = [&](double got, bool measured, double seconds, const char* stage) {
      if (measured) {
        EXPECT_EQ(got, seconds) << c.step << ": " << stage;
      } else {
        EXPECT_TRUE(std::isnan(got)) << c.step << ": " << stage << " " << got;
      }
    };
    expect(out.setupSeconds, c.setup, kSetupSeconds, "setup");
    expect(out.passSeconds, c.passes, 2 * kPassSeconds, "passes");
    expect(out.decodeSeconds, c.decode, kDecodeSeconds, "decode");
  }
  // Passes CUPTI never finished collecting: the passes stage failed.
  FakeCounterBackend fake;
  timeSteps(fake);
  fake.passes = 2;
  fake.submittedAfter = 100;
  RangeProfile out;
  std::string why;
  EXPECT_FALSE(readTimed(fake, &out, &why));
  EXPECT_EQ(out.setupSeconds, kSetupSeconds);
  EXPECT_TRUE(std::isnan(out.passSeconds));
  EXPECT_TRUE(std::isnan(out.decodeSeconds));
  // Too many passes: refused within the set-up.
  FakeCounterBackend many;
  many.passes = kMaxPasses + 1;
  EXPECT_FALSE(readTimed(many, &out, &why));
  EXPECT_TRUE(std::isnan(out.setupSeconds));
}

}  // namespace
}  // namespace torchutil::hw
