// Per-op time on a CPU: each op row takes the wall time of its counted calls, from a counted
// forward's events timed on a fake clock.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/CountSession.h"
#include "core/OpTimes.h"

namespace torchutil {
namespace {

uint64_t gNow = 0;
uint64_t fakeClock() {
  return gNow;
}

Args matrix(int64_t n) {
  return {Arg::ofTensor({n, n}), Arg::ofTensor({n, n})};
}

TEST(OpTimesTest, EachRowTakesTheWallTimeOfItsCountedCallsInclusiveOfTheirCallees) {
  CountSession s;
  s.recordEvents(&fakeClock);
  // aten::linear (transparent) -> aten::mm (counted, 100..400 ns) -> an inside helper; then a
  // second aten::mm (500..600 ns) and an unknown op around nothing (700..900 ns).
  gNow = 0;
  s.enter("aten::linear");
  gNow = 100;
  ASSERT_TRUE(s.enter("aten::mm"));
  s.setInputs(matrix(4));
  gNow = 150;
  s.enter("aten::resolve_conj");
  gNow = 200;
  s.exit({});
  gNow = 400;
  s.exit(matrix(4));
  gNow = 450;
  s.exit({});
  gNow = 500;
  ASSERT_TRUE(s.enter("aten::mm"));
  s.setInputs(matrix(4));
  gNow = 600;
  s.exit(matrix(4));
  gNow = 700;
  s.enter("torchutil_test::no_formula");
  s.setInputs({});
  gNow = 900;
  s.exit({});

  ASSERT_EQ(s.table().rows().size(), 1u);
  const std::vector<OpKernelStats> times = cpuOpSeconds(s.events(), 1);
  ASSERT_EQ(times.size(), 1u);
  EXPECT_DOUBLE_EQ(times[0].seconds, (300 + 100) * 1e-9);  // the helper's 50 ns inside the first
  EXPECT_TRUE(std::isnan(times[0].kernels));
}

TEST(OpTimesTest, RowsWithoutCallsTakeZeroAndTheClockAdvances) {
  const std::vector<OpKernelStats> times = cpuOpSeconds({}, 2);
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times[1].seconds, 0.0);
  const TraceHooks* hooks = cpuOpClock();
  ASSERT_NE(hooks->clock, nullptr);
  EXPECT_EQ(hooks->push, nullptr);
  EXPECT_EQ(hooks->pop, nullptr);
  const uint64_t t0 = hooks->clock();
  EXPECT_GE(hooks->clock(), t0);
}

}  // namespace
}  // namespace torchutil
