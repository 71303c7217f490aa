// The energy windows (core/EnergyWindows.h) on a simulated device whose counter steps every
// 100 ms (tests/cpp/FakeEnergy.h). Oracle: the simulation's own power model, busyWatts x
// forwardSeconds joules per forward, which a window read at arbitrary times misses by up to a
// counter step at each end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "FakeEnergy.h"
#include "core/EnergyWindows.h"

namespace torchutil {
namespace {

using testing::FakeCounter;
using testing::FakeEnergyDevice;
using testing::FakeQueue;

// The plan these tests' figures were worked out for: energy_window 0.5 s (the option's default
// is 1 s; core/Options.h).
EnergyPlan halfSecondPlan() {
  EnergyPlan plan;
  plan.windowSeconds = 0.5;
  return plan;
}

EnergyResult measure(FakeEnergyDevice& d, const EnergyPlan& plan = halfSecondPlan(),
                     std::string notes = "") {
  FakeCounter counter(d, std::move(notes));
  FakeQueue queue(d);
  return measureEnergy(counter, queue, plan);
}

TEST(EnergyWindowsTest, JoulesPerForwardWhateverThePhaseOfTheCounter) {
  for (const double phase : {0.0, 0.013, 0.05, 0.0999}) {
    FakeEnergyDevice d;
    d.firstUpdate = phase;
    const EnergyResult r = measure(d);
    ASSERT_TRUE(r.measured()) << r.refusal;
    const double truth = d.busyWatts * d.forwardSeconds;  // 1.6 J
    EXPECT_NEAR(r.perForward.value, truth, 1e-3 * truth) << "phase " << phase;
    EXPECT_NEAR(r.watts, d.busyWatts, 1e-3 * d.busyWatts);
    ASSERT_EQ(r.joulesPerForward.size(), 5u);
    for (double j : r.joulesPerForward) {
      EXPECT_NEAR(j, truth, 2e-3 * truth);
    }
    // Five windows of one 100 ms update each, 125 forwards of 4 ms in them.
    EXPECT_NEAR(r.seconds, 0.5, 1e-3);
    EXPECT_NEAR(r.updateSeconds, 0.1, 1e-3);
    EXPECT_NEAR(r.forwards, 125.0, 0.2);
    // The figure is the windows' joules over their forwards, inside their interval.
    double joules = 0.0, forwards = 0.0;
    for (size_t i = 0; i < 5; ++i) {
      joules += r.joulesPerForward[i] * r.windowForwards[i];
      forwards += r.windowForwards[i];
    }
    EXPECT_NEAR(r.perForward.value, joules / forwards, 1e-12);
    EXPECT_NEAR(forwards, r.forwards, 1e-9);
    EXPECT_LE(r.perForward.low, r.perForward.value);
    EXPECT_GE(r.perForward.high, r.perForward.value);
    // What it cost: the wait for the first change (< one update from the first launch), the
    // windows, the drain (the plan knows no forward time here: two forwards queued).
    EXPECT_GT(r.waitSeconds, 0.0);
    EXPECT_LT(r.waitSeconds, 0.1 + 1e-3);
    EXPECT_LT(r.drainSeconds, 2 * d.forwardSeconds + 1e-3);
    EXPECT_LT(d.now, 0.5 + 0.1 + 3 * d.forwardSeconds);
  }
}

// Oracle: the textbook interval of a mean, x-bar +- t(0.975, k - 1) s / sqrt(k), which the
// pooled figure is when every window holds as many forwards.
TEST(EnergyWindowsTest, PooledFigureAndItsInterval) {
  // Windows of 5 forwards at 2.0, 2.4 and 2.2 J each: mean 2.2, s 0.2, t(2) 4.3027.
  const Estimate equal = pooledPerForward({10.0, 12.0, 11.0}, {5.0, 5.0, 5.0});
  EXPECT_DOUBLE_EQ(equal.value, 2.2);
  EXPECT_NEAR(equal.high - equal.value, 4.3027 * 0.2 / std::sqrt(3.0), 1e-9);
  EXPECT_NEAR(equal.value - equal.low, 4.3027 * 0.2 / std::sqrt(3.0), 1e-9);
  // Uneven windows weigh by their forwards: (10 + 24) / (5 + 10), not the mean of 2 and 2.4.
  EXPECT_DOUBLE_EQ(pooledPerForward({10.0, 24.0}, {5.0, 10.0}).value, 34.0 / 15.0);
  // Identical windows: no spread. One window: a figure, no interval.
  const Estimate same = pooledPerForward({4.0, 4.0, 4.0}, {2.0, 2.0, 2.0});
  EXPECT_DOUBLE_EQ(same.low, 2.0);
  EXPECT_DOUBLE_EQ(same.high, 2.0);
  const Estimate one = pooledPerForward({3.0}, {2.0});
  EXPECT_DOUBLE_EQ(one.value, 1.5);
  EXPECT_TRUE(std::isnan(one.low) && std::isnan(one.high));
  EXPECT_TRUE(std::isnan(pooledPerForward({}, {}).value));
}

// Oracle: published quantiles of Student's t (two-sided 95 %).
TEST(EnergyWindowsTest, StudentQuantiles) {
  EXPECT_DOUBLE_EQ(studentT975(1), 12.7062);
  EXPECT_DOUBLE_EQ(studentT975(4), 2.7764);
  EXPECT_NEAR(studentT975(40), 2.0211, 1e-4);
  EXPECT_NEAR(studentT975(60), 2.0003, 1e-4);
  EXPECT_NEAR(studentT975(99), 1.9842, 1e-4);
  EXPECT_NEAR(studentT975(1000000), 1.959964, 1e-5);
  EXPECT_TRUE(std::isnan(studentT975(0)));
}

// The first window may open at a change that comes before any forward has finished, as long as
// the device was busy since: a change 0.5 ms after the first launch opens it.
TEST(EnergyWindowsTest, FirstWindowOpensAtTheFirstChangeOnceForwardsRun) {
  FakeEnergyDevice d;
  d.firstUpdate = 0.0005;
  const EnergyResult r = measure(d);
  ASSERT_TRUE(r.measured()) << r.refusal;
  EXPECT_LT(r.waitSeconds, 1e-3);
  EXPECT_NEAR(r.perForward.value, d.busyWatts * d.forwardSeconds, 2e-3);
  EXPECT_NEAR(r.seconds, 0.5, 1e-3);
}

// With the forward time known, the queue holds aheadSeconds of work, and once the change that
// closes the last window is due only endAheadSeconds: the drain is about that.
TEST(EnergyWindowsTest, QueueShrinksBeforeTheLastChange) {
  for (const double phase : {0.0, 0.021, 0.063}) {
    FakeEnergyDevice d;
    d.firstUpdate = phase;
    d.forwardSeconds = 0.002;
    EnergyPlan plan = halfSecondPlan();
    plan.forwardSeconds = d.forwardSeconds;
    const EnergyResult r = measure(d, plan);
    ASSERT_TRUE(r.measured()) << r.refusal;
    EXPECT_NEAR(r.perForward.value, d.busyWatts * d.forwardSeconds, 1e-3 * 0.8);
    EXPECT_GT(r.drainSeconds, 0.0);
    EXPECT_LE(r.drainSeconds, plan.endAheadSeconds + d.forwardSeconds + 1e-3) << phase;
    // No idle time crept in: the windows' forwards ran back to back.
    EXPECT_NEAR(r.seconds / r.forwards, d.forwardSeconds, 1e-6);
    // Keeping 20 ms queued to the end drains about that.
    FakeEnergyDevice full;
    full.firstUpdate = phase;
    full.forwardSeconds = d.forwardSeconds;
    plan.endAheadSeconds = plan.aheadSeconds;
    const EnergyResult f = measure(full, plan);
    ASSERT_TRUE(f.measured()) << f.refusal;
    EXPECT_GT(f.drainSeconds, plan.aheadSeconds - d.forwardSeconds) << phase;
  }
}

TEST(EnergyWindowsTest, UnevenForwardsAndLongerWindows) {
  // Forwards of 7.3 ms against 100 ms updates: windows end inside forwards, counted in fractions.
  FakeEnergyDevice d;
  d.forwardSeconds = 0.0073;
  EnergyPlan plan;
  plan.windowSeconds = 1.0;
  plan.windows = 4;  // 250 ms: the nearest update boundary, 200 or 300 ms
  const EnergyResult r = measure(d, plan);
  ASSERT_TRUE(r.measured()) << r.refusal;
  EXPECT_NEAR(r.perForward.value, d.busyWatts * d.forwardSeconds, 1e-3 * 2.92);
  EXPECT_EQ(r.joulesPerForward.size(), 4u);
  EXPECT_GE(r.seconds, 0.8 - 1e-3);
  EXPECT_LE(r.seconds, 1.2 + 1e-3);
}

TEST(EnergyWindowsTest, FastCounterAndSynchronousForwards) {
  // RAPL-like: 1 ms updates; a CPU's forward runs inside launch().
  FakeEnergyDevice d;
  d.updateSeconds = 0.001;
  d.firstUpdate = 0.0004;
  d.forwardSeconds = 0.0025;
  d.synchronous = true;
  const EnergyResult r = measure(d);
  ASSERT_TRUE(r.measured()) << r.refusal;
  // The host's launch and poll time between forwards is idle: a little less than busy power.
  const double perForward =
      d.busyWatts * d.forwardSeconds + d.idleWatts * (d.launchSeconds + d.pollSeconds);
  EXPECT_NEAR(r.perForward.value, perForward, 5e-3 * perForward);
  // Changes are seen between forwards (one per poll: it finished inside launch()), so no
  // closer than that.
  EXPECT_GE(r.updateSeconds, d.forwardSeconds);
  EXPECT_LT(r.updateSeconds, d.forwardSeconds + d.launchSeconds + d.pollSeconds + 1e-9);
  EXPECT_NEAR(r.seconds, 0.5, 0.01);
}

TEST(EnergyWindowsTest, CounterThatWrapsIsUnwrapped) {
  FakeEnergyDevice d;
  d.wrap = 262.143328;    // a RAPL package domain's max_energy_range_uj / 1e6
  d.startJoules = 250.0;  // wraps in the first window, and again later
  const EnergyResult r = measure(d);
  ASSERT_TRUE(r.measured()) << r.refusal;
  EXPECT_NEAR(r.perForward.value, 1.6, 1.6e-3);
  EXPECT_NEAR(r.watts, 400.0, 0.4);
}

TEST(EnergyWindowsTest, FrozenCounterIsRefused) {
  FakeEnergyDevice d;
  d.frozenAfter = 0.0;
  const EnergyResult r = measure(d);
  EXPECT_FALSE(r.measured());
  EXPECT_NE(r.refusal.find("did not move in 2"), std::string::npos) << r.refusal;
  EXPECT_TRUE(std::isnan(r.perForward.value));
  EXPECT_TRUE(std::isnan(r.perForward.low));
  EXPECT_TRUE(std::isnan(r.watts));
  EXPECT_LT(d.now, 2.2);
  // Frozen midway (after two windows) is refused the same way.
  FakeEnergyDevice later;
  later.frozenAfter = 0.25;
  EXPECT_NE(measure(later).refusal.find("did not move"), std::string::npos);
}

TEST(EnergyWindowsTest, CounterGoingBackwardsIsRefusedWhereItDoesNotWrap) {
  FakeEnergyDevice d;
  d.startJoules = 5000.0;
  d.resetAt = 0.3;
  const EnergyResult r = measure(d);
  EXPECT_NE(r.refusal.find("went backwards"), std::string::npos) << r.refusal;
  EXPECT_TRUE(std::isnan(r.perForward.value));
}

TEST(EnergyWindowsTest, FailedReadIsRefusedWithItsReason) {
  FakeEnergyDevice d;
  d.failRead = "nvmlDeviceGetTotalEnergyConsumption failed (Insufficient Permissions)";
  const EnergyResult r = measure(d);
  EXPECT_EQ(r.refusal, d.failRead);
  EXPECT_EQ(d.busy.size(), 0u);  // nothing ran
  EXPECT_EQ(describeEnergy(r, "fake counter", "replays"), "off: fake counter: " + d.failRead);
}

TEST(EnergyWindowsTest, WindowsShorterThanTheUpdatesAreRefused) {
  FakeEnergyDevice d;
  EnergyPlan plan;
  plan.windowSeconds = 0.1;  // five windows of 20 ms against 100 ms updates
  const EnergyResult r = measure(d, plan);
  EXPECT_NE(r.refusal.find("shorter than half the time between the counter's changes (100 ms"),
            std::string::npos)
      << r.refusal;
  EXPECT_NE(r.refusal.find("energy_window >= 0.5"), std::string::npos) << r.refusal;
  EXPECT_TRUE(std::isnan(r.watts));
}

TEST(EnergyWindowsTest, ForwardLongerThanAWindowIsRefused) {
  FakeEnergyDevice d;
  d.forwardSeconds = 0.35;
  const EnergyResult r = measure(d);
  EXPECT_NE(r.refusal.find("less than one"), std::string::npos) << r.refusal;
  EXPECT_TRUE(std::isnan(r.perForward.value));
}

TEST(EnergyWindowsTest, DescribeNamesSourceWindowAndNotes) {
  FakeEnergyDevice d;
  const EnergyResult r = measure(d, halfSecondPlan(), "1 other process on the GPU");
  ASSERT_TRUE(r.measured());
  EXPECT_EQ(
      describeEnergy(r, "fake counter", "graph replays"),
      "fake counter, changes every 100 ms, 0.5 s of graph replays in 5 windows (125 forwards); "
      "1 other process on the GPU");
}

TEST(EnergyWindowsTest, PlanIsChecked) {
  FakeEnergyDevice d;
  for (const double bad : {0.0, -1.0, std::nan(""), 1e9}) {
    EnergyPlan plan;
    plan.windowSeconds = bad;
    EXPECT_THROW(measure(d, plan), std::invalid_argument) << bad;
  }
  for (const int64_t bad : {int64_t{0}, int64_t{-3}, kMostEnergyWindows + 1}) {
    EnergyPlan plan;
    plan.windows = bad;
    try {
      checkEnergyPlan(plan);
      ADD_FAILURE() << bad << " windows were taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("energy_windows"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("got " + std::to_string(bad)), std::string::npos);
    }
  }
  EXPECT_EQ(d.reads, 0);
}

TEST(EnergyWindowsTest, ThreeWindowsSpanTheirWindowAtTheSameFigure) {
  FakeEnergyDevice d;
  EnergyPlan plan;
  plan.windowSeconds = 0.3;
  plan.windows = 3;
  const EnergyResult r = measure(d, plan);
  ASSERT_TRUE(r.measured()) << r.refusal;
  EXPECT_EQ(r.joulesPerForward.size(), 3u);
  EXPECT_NEAR(r.seconds, 0.3, 1e-4);  // to a poll
  EXPECT_NEAR(r.perForward.value, d.busyWatts * d.forwardSeconds, 2e-3);
}

// Oracle: the result's own span and forwards, against a timed pace given by hand.
TEST(EnergyWindowsTest, PaceNoteSaysWhenTheForwardsRanSlowerThanTimed) {
  FakeEnergyDevice d;  // 4 ms forwards back to back
  const EnergyResult r = measure(d);
  ASSERT_TRUE(r.measured());
  EXPECT_EQ(paceNote(r, 0.004), "");
  EXPECT_EQ(paceNote(r, 0.0039), "");  // 2.6 % slower: within the 5 %
  EXPECT_EQ(paceNote(r, 0.003),
            "the windows' forwards took 1.33x the timed 3 ms each (4 ms): the device idled or "
            "ran slower, and that time's draw is in the figure");
  EXPECT_EQ(paceNote(r, std::nan("")), "");
  EXPECT_EQ(paceNote(EnergyResult(), 0.003), "");  // nothing measured
}

}  // namespace
}  // namespace torchutil
