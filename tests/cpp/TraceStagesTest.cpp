// The sums of where kernel traces' host time goes (benchmarks/trace_cost.py prints them).
#include "core/TraceStages.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace torchutil {
namespace {

const TraceStageTotal& find(const std::vector<TraceStageTotal>& all, const std::string& stage) {
  for (const TraceStageTotal& t : all) {
    if (t.stage == stage) {
      return t;
    }
  }
  throw std::runtime_error("no stage " + stage);
}

TEST(TraceStagesTest, EveryStageIsListedOnceInOrderWithItsName) {
  takeTraceStages();
  const std::vector<TraceStageTotal> all = takeTraceStages();
  ASSERT_EQ(all.size(), static_cast<size_t>(TraceStage::kCount));
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].stage, traceStageName(static_cast<TraceStage>(i)));
    EXPECT_EQ(all[i].times, 0u);
    EXPECT_EQ(all[i].seconds, 0.0);
  }
  EXPECT_EQ(find(all, "query").stage, "query");
}

TEST(TraceStagesTest, SumsAddUpAndATakeStartsThemFromZero) {
  takeTraceStages();
  addTraceStage(TraceStage::Query, 1500);
  addTraceStage(TraceStage::Query, 2500);
  addTraceStage(TraceStage::Flush, 1000000);
  const std::vector<TraceStageTotal> first = takeTraceStages();
  EXPECT_EQ(find(first, "query").times, 2u);
  EXPECT_DOUBLE_EQ(find(first, "query").seconds, 4e-6);
  EXPECT_EQ(find(first, "flush").times, 1u);
  EXPECT_DOUBLE_EQ(find(first, "flush").seconds, 1e-3);
  EXPECT_EQ(find(first, "start").times, 0u);
  const std::vector<TraceStageTotal> second = takeTraceStages();
  EXPECT_EQ(find(second, "query").times, 0u);
  EXPECT_EQ(find(second, "flush").seconds, 0.0);
}

TEST(TraceStagesTest, ATimerAddsItsScopesWallTimeOnce) {
  takeTraceStages();
  const auto t0 = std::chrono::steady_clock::now();
  {
    TraceStageTimer t(TraceStage::ReadNodes);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double outer = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const TraceStageTotal read = find(takeTraceStages(), "read_nodes");
  EXPECT_EQ(read.times, 1u);
  EXPECT_GE(read.seconds, 2e-3);
  EXPECT_LE(read.seconds, outer);
}

TEST(TraceStagesTest, ThreadsAddToTheSameSums) {
  takeTraceStages();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([] {
      for (int j = 0; j < 1000; ++j) {
        addTraceStage(TraceStage::Attribute, 3);
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  const TraceStageTotal a = find(takeTraceStages(), "attribute");
  EXPECT_EQ(a.times, 4000u);
  EXPECT_DOUBLE_EQ(a.seconds, 12000e-9);
}

}  // namespace
}  // namespace torchutil
