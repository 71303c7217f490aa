// Adaptive repetition (core/Repetition.h) against a fake clock and synthetic forward times.
// Oracle for the interval: the order-statistic ranks of the distribution-free median CI
// (Conover, Practical Nonparametric Statistics, 3rd ed., sec. 3.2), worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/Repetition.h"

namespace torchutil {
namespace {

TEST(RepetitionTest, MedianIntervalRanks) {
  // n = 100: ranks floor(50 - 9.8) = 40 and ceil(50 + 9.8 + 1) = 61 of 1..100.
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) {
    v.push_back(i);
  }
  MedianInterval m = medianInterval(v);
  EXPECT_DOUBLE_EQ(m.median, 50.5);
  EXPECT_DOUBLE_EQ(m.low, 40);
  EXPECT_DOUBLE_EQ(m.high, 61);
  EXPECT_DOUBLE_EQ(m.relativeHalfWidth(), 10.5 / 50.5);
  // n = 10: the interval is the whole sample (ranks 1 and 10).
  m = medianInterval({3, 1, 2, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_DOUBLE_EQ(m.median, 5.5);
  EXPECT_DOUBLE_EQ(m.low, 1);
  EXPECT_DOUBLE_EQ(m.high, 10);
  EXPECT_TRUE(std::isnan(medianInterval({}).median));
}

// A fake device: forward i takes times[i % times.size()] seconds, and the clock advances by
// that much per forward.
struct FakeDevice {
  std::vector<double> times;
  double now = 0.0;
  int64_t forwards = 0;
  std::vector<int64_t> batches;

  std::vector<double> run(int64_t n) {
    batches.push_back(n);
    std::vector<double> out;
    for (int64_t i = 0; i < n; ++i) {
      const double t = times[static_cast<size_t>(forwards++) % times.size()];
      now += t;
      out.push_back(t);
    }
    return out;
  }
};

RepeatResult repeat(FakeDevice& d, const RepeatPolicy& p) {
  return repeatTimed([&](int64_t n) { return d.run(n); }, [&] { return d.now; }, p);
}

TEST(RepetitionTest, FixedCountRunsExactlyIters) {
  FakeDevice d{{1.0, 2.0, 3.0}};
  RepeatPolicy p;
  p.minIters = p.maxIters = 7;
  RepeatResult r = repeat(d, p);
  EXPECT_EQ(r.seconds.size(), 7u);
  EXPECT_EQ(d.batches, (std::vector<int64_t>{7}));
  EXPECT_EQ(r.stop, "fixed count of 7");
}

TEST(RepetitionTest, StopsOnceTheIntervalIsTight) {
  // Alternating 1.000 / 1.004 s: the interval of the median spans both values (+-0.2 %) until
  // it is sampled densely enough to sit on one of them.
  FakeDevice d{{1.000, 1.004, 1.000, 1.001}};
  RepeatPolicy p;
  p.minIters = 10;
  p.maxIters = 10000;
  p.targetRelativeCi = 0.001;
  p.budgetSeconds = 0.0;  // no time budget: the fake's forwards take a second each
  RepeatResult r = repeat(d, p);
  EXPECT_LE(r.interval.relativeHalfWidth(), 0.001);
  EXPECT_GT(r.seconds.size(), 10u);
  EXPECT_LT(r.seconds.size(), 100u);
  EXPECT_EQ(d.batches.front(), 10);  // the minimum first
  EXPECT_EQ(d.batches.at(1), 5);     // then half the forwards so far
  EXPECT_NE(r.stop.find("converged"), std::string::npos) << r.stop;
}

TEST(RepetitionTest, NoisyForwardsStopAtTheBudgetOrTheCap) {
  FakeDevice d{{0.01, 0.02, 0.03, 0.04, 0.05}};  // never within +-0.1 %
  RepeatPolicy p;
  p.minIters = 10;
  p.maxIters = 1'000'000;
  p.targetRelativeCi = 0.001;
  p.budgetSeconds = 2.0;
  RepeatResult r = repeat(d, p);
  EXPECT_GE(d.now, 2.0);
  EXPECT_LT(d.now, 2.0 * 1.5 + 0.1);  // the last batch is at most half of what ran before
  EXPECT_NE(r.stop.find("time budget of 2 s"), std::string::npos) << r.stop;

  FakeDevice capped{{0.01, 0.02, 0.03, 0.04, 0.05}};
  p.budgetSeconds = 0.0;
  p.maxIters = 64;
  r = repeat(capped, p);
  EXPECT_EQ(r.seconds.size(), 64u);
  EXPECT_NE(r.stop.find("max_iters 64"), std::string::npos) << r.stop;
}

TEST(RepetitionTest, BadPoliciesAreNamed) {
  FakeDevice d{{1.0}};
  RepeatPolicy p;
  p.minIters = 0;
  EXPECT_THROW(repeat(d, p), std::invalid_argument);
  p.minIters = 10;
  p.maxIters = 5;
  try {
    repeat(d, p);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_iters must be >= iters (10), got 5"),
              std::string::npos)
        << e.what();
  }
  p.maxIters = 10;
  p.targetRelativeCi = -0.1;
  EXPECT_THROW(repeat(d, p), std::invalid_argument);
  EXPECT_TRUE(d.batches.empty());  // nothing ran
}

}  // namespace
}  // namespace torchutil
