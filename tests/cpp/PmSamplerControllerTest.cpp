// The PM sampler's read (core/PmSamplerController.h) over a fake sampler: the metrics configured
// in one pass, the image sized from the samples expected, the buffer decoded image by image, an
// overflow flagged or the buffer lost, and what is released on every path
// (tests/cpp/FakeCounterBackend.h stands for CUPTI's steps).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "FakeCounterBackend.h"
#include "HwTestData.h"
#include "core/PmSamplerController.h"

namespace torchutil::hw {
namespace {

using testdata::pmSample;
using testing::FakeCounterBackend;

const std::vector<CounterSet> kTimeline{CounterSet::Timeline};

// n samples of 10 us from t0, SM-active i % 100.
std::vector<PmSample> samples(size_t n, uint64_t t0 = 1000000) {
  std::vector<PmSample> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(pmSample(t0 + 10000 * i, t0 + 10000 * (i + 1), static_cast<double>(i % 100)));
  }
  return out;
}

// Sets up, starts and stops sampling at 10 us, expecting `expected` samples.
bool sample(FakeCounterBackend& fake, PmTimeline* out, std::string* why, size_t expected = 0) {
  PmSamplerController sampler(fake.pmSampler());
  return sampler.setUp(/*deviceIndex=*/0, kTimeline, /*intervalNs=*/10000, expected, why) &&
         sampler.start(why) && sampler.stop(out, why);
}

TEST(PmSamplerControllerTest, DecodesImageByImageUntilTheBufferIsEmpty) {
  FakeCounterBackend fake;
  fake.samples = samples(600);
  PmTimeline t;
  std::string why;
  ASSERT_TRUE(sample(fake, &t, &why)) << why;
  // No window known: the image holds the slack alone (256), so 600 samples take three images.
  EXPECT_EQ(fake.imageSamples, 256u);
  EXPECT_EQ(fake.decodes, 3u);
  ASSERT_EQ(t.samples.size(), 600u);
  EXPECT_EQ(t.samples[599].startNs, fake.samples[599].startNs);
  EXPECT_EQ(t.samples[599].values[static_cast<size_t>(PmMetric::SmActivePct)], 99.0);
  EXPECT_FALSE(t.overflow || t.cutShort);
  EXPECT_EQ(t.intervalNs, 10000u);
  EXPECT_EQ(fake.intervalNs, 10000u);
  EXPECT_EQ(fake.bufferBytes, kPmHardwareBufferBytes);
  EXPECT_EQ(fake.alive, 0);
  EXPECT_FALSE(fake.samplerRunningAtRelease);
  EXPECT_EQ(counterReadBusyReason(), "");
}

TEST(PmSamplerControllerTest, TheImageHoldsTheSamplesExpectedWithAMarginUpToItsMost) {
  FakeCounterBackend fake;
  PmTimeline t;
  std::string why;
  ASSERT_TRUE(sample(fake, &t, &why, /*expected=*/1000)) << why;
  EXPECT_EQ(fake.imageSamples, 1000u + 500u + 256u);
  EXPECT_TRUE(t.samples.empty());  // an empty buffer decodes to no samples
  FakeCounterBackend big;
  ASSERT_TRUE(sample(big, &t, &why, /*expected=*/100000)) << why;
  EXPECT_EQ(big.imageSamples, kPmImageSamples);
}

TEST(PmSamplerControllerTest, MetricsNotInOnePassAreLeftOutLastFirst) {
  FakeCounterBackend fake;
  fake.pmMetricsPerPass = 2;
  fake.samples = samples(3);
  PmTimeline t;
  std::string why;
  ASSERT_TRUE(sample(fake, &t, &why)) << why;
  const std::string dram =
      pmMetricDefs()[static_cast<size_t>(PmMetric::DramThroughputPct)].candidates[0];
  EXPECT_EQ(t.leftOut, (std::vector<std::string>{dram + " (not in one pass with the rest)"}));
  EXPECT_EQ(fake.pmMetrics.size(), 2u);
  EXPECT_TRUE(std::isnan(t.samples[0].values[static_cast<size_t>(PmMetric::DramThroughputPct)]));
}

TEST(PmSamplerControllerTest, AnOverflowIsFlaggedOrTheLostBufferIsTheSentence) {
  FakeCounterBackend flagged;
  flagged.samples = samples(10);
  flagged.overflowFlag = true;
  PmTimeline t;
  std::string why;
  ASSERT_TRUE(sample(flagged, &t, &why)) << why;
  EXPECT_TRUE(t.overflow);  // the samples before it are kept
  EXPECT_EQ(t.samples.size(), 10u);

  FakeCounterBackend lost;
  lost.samples = samples(10);
  lost.bufferLost = true;
  EXPECT_FALSE(sample(lost, &t, &why));
  EXPECT_EQ(why,
            "the PM sampler's 32 MB hardware buffer overflowed at one sample per 10 us "
            "(cuptiPmSamplingDecodeData: CUPTI_ERROR_OUT_OF_MEMORY): the sampled forwards took "
            "longer than expected");
  EXPECT_EQ(lost.alive, 0);
  EXPECT_EQ(counterReadBusyReason(), "");
}

TEST(PmSamplerControllerTest, ATimelineIsCutShortAtTheMostSamplesKept) {
  FakeCounterBackend fake;
  fake.samples = samples(kPmMaxSamples + kPmImageSamples);
  PmTimeline t;
  std::string why;
  ASSERT_TRUE(sample(fake, &t, &why, /*expected=*/kPmMaxSamples)) << why;
  EXPECT_TRUE(t.cutShort);
  EXPECT_EQ(t.samples.size(), kPmMaxSamples);
}

TEST(PmSamplerControllerTest, StopWithoutStartSaysSoAndReleasesTheSampler) {
  FakeCounterBackend fake;
  PmSamplerController sampler(fake.pmSampler());
  std::string why;
  ASSERT_TRUE(sampler.setUp(0, kTimeline, 10000, 0, &why)) << why;
  EXPECT_EQ(counterReadBusyReason(),
            "another torchutil profile is reading hardware counters in this process");
  PmTimeline t;
  EXPECT_FALSE(sampler.stop(&t, &why));
  EXPECT_EQ(why, "PM sampling was not started");
  EXPECT_EQ(fake.alive, 0);
  EXPECT_EQ(counterReadBusyReason(), "");
}

// A controller destroyed while sampling (the model's forward threw) calls no stop step: it
// destroys the sampler still started, whose destructor stops and disables it (CounterBackend's
// contract; CUPTI's: cupti/PmSampler.cpp), while the process's claim is still held, and only
// then gives the claim back.
TEST(PmSamplerControllerTest,
     ASamplerDestroyedWhileSamplingIsLeftToItsDestructorBeforeTheClaimGoes) {
  FakeCounterBackend fake;
  {
    PmSamplerController sampler(fake.pmSampler());
    std::string why;
    ASSERT_TRUE(sampler.setUp(0, kTimeline, 10000, 0, &why) && sampler.start(&why)) << why;
  }
  EXPECT_EQ(fake.stops, 0u);
  EXPECT_TRUE(fake.samplerRunningAtRelease);
  EXPECT_TRUE(fake.claimHeldAtRelease);
  EXPECT_EQ(fake.alive, 0);
  EXPECT_EQ(counterReadBusyReason(), "");
}

TEST(PmSamplerControllerTest, AFailedStepIsItsSentenceAndReleasesTheSampler) {
  for (const char* step :
       {"pm.open", "pm.enable", "pm.start", "pm.stop", "pm.decode", "pm.sample"}) {
    FakeCounterBackend fake;
    fake.samples = samples(2);
    fake.failAt[step] = std::string("the ") + step + " step failed";
    PmTimeline t;
    std::string why;
    EXPECT_FALSE(sample(fake, &t, &why)) << step;
    EXPECT_EQ(why, std::string("the ") + step + " step failed");
    EXPECT_EQ(fake.alive, 0) << step;
  }
}

}  // namespace
}  // namespace torchutil::hw
