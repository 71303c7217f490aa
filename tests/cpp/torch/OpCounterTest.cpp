// OpCounter through the real dispatcher: RecordFunction callbacks, boxed inputs converted by
// IValueArgs, CountSession's rules applied to torch's own op nesting.
#include "libtorch/OpCounter.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace torchutil {
namespace {

const OpStats* findRow(const CountTable& table, const std::string& op) {
  for (const OpStats& r : table.rows()) {
    if (r.op == op) {
      return &r;
    }
  }
  return nullptr;
}

TEST(OpCounterTest, PricesAMatrixProductFromItsBoxedInputs) {
  const at::Tensor a = at::ones({8, 16});
  const at::Tensor b = at::ones({16, 4});
  CountingScope scope;
  at::mm(a, b);
  const CountTable table = scope.finish().table;

  ASSERT_EQ(table.rows().size(), 1u);
  const OpStats& row = table.rows()[0];
  EXPECT_EQ(row.op, "aten::mm");
  EXPECT_EQ(row.dtype, "float32");
  EXPECT_EQ(row.module, "");
  EXPECT_EQ(row.calls, 1);
  EXPECT_EQ(row.matrixFlops, 2 * 8 * 16 * 4);
  EXPECT_EQ(row.vectorFlops, 0);
  EXPECT_EQ(row.bytes, (8 * 16 + 16 * 4 + 8 * 4) * 4);
  EXPECT_TRUE(table.unknown().empty());
}

TEST(OpCounterTest, CountsTheOutermostOpOfALinearLayer) {
  const int64_t n = 3, in = 10, out = 6;
  const at::Tensor x = at::ones({n, in});
  const at::Tensor w = at::ones({out, in});
  const at::Tensor bias = at::ones({out});
  CountingScope scope;
  at::linear(x, w, bias);
  const CountTable table = scope.finish().table;

  // aten::linear and aten::t are transparent; aten::addmm prices the layer.
  ASSERT_EQ(table.rows().size(), 1u);
  const OpStats* addmm = findRow(table, "aten::addmm");
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(addmm->calls, 1);
  EXPECT_EQ(addmm->matrixFlops, 2 * n * in * out);
  EXPECT_EQ(addmm->vectorFlops, n * out);
}

TEST(OpCounterTest, CountsAConvolutionOnceAtItsOutermostLevel) {
  const int64_t n = 2, cin = 3, cout = 8, h = 10, w = 12, k = 3;
  const at::Tensor x = at::ones({n, cin, h, w});
  const at::Tensor weight = at::ones({cout, cin, k, k});
  const at::Tensor bias = at::ones({cout});
  CountingScope scope;
  at::conv2d(x, weight, bias);
  const CountTable table = scope.finish().table;

  // conv2d -> convolution -> _convolution -> a backend kernel: counted once, as convolution.
  ASSERT_EQ(table.rows().size(), 1u);
  const OpStats& row = table.rows()[0];
  EXPECT_EQ(row.op, "aten::convolution");
  EXPECT_EQ(row.calls, 1);
  const int64_t outPositions = (h - k + 1) * (w - k + 1);
  EXPECT_EQ(row.matrixFlops, 2 * n * cout * cin * k * k * outPositions);
  EXPECT_EQ(row.vectorFlops, n * cout * outPositions);
}

TEST(OpCounterTest, AutocastCountsTheDtypeTheKernelRanIn) {
  const at::Tensor a = at::ones({4, 8});
  const at::Tensor b = at::ones({8, 2});
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCPU, true);
  CountTable table;
  {
    CountingScope scope;
    at::mm(a, b);
    table = scope.finish().table;
  }
  at::autocast::set_autocast_enabled(at::kCPU, false);
  at::autocast::clear_cache();

  ASSERT_EQ(table.rows().size(), 1u);
  EXPECT_EQ(table.rows()[0].op, "aten::mm");
  EXPECT_EQ(table.rows()[0].dtype, "bfloat16");
  EXPECT_EQ(table.rows()[0].calls, 1);
  EXPECT_EQ(table.rows()[0].matrixFlops, 2 * 4 * 8 * 2);
}

TEST(OpCounterTest, RecordsTheModulePath) {
  const at::Tensor x = at::ones({5});
  CountingScope scope;
  OpCounter::enterModule("encoder.layer0");
  EXPECT_EQ(OpCounter::currentModule(), "encoder.layer0");
  at::relu(x);
  OpCounter::exitModule();
  at::relu(x);
  const CountTable table = scope.finish().table;

  ASSERT_EQ(table.rows().size(), 2u);
  EXPECT_EQ(table.rows()[0].module, "encoder.layer0");
  EXPECT_EQ(table.rows()[1].module, "");
  EXPECT_EQ(table.rows()[0].vectorFlops, 5);
}

TEST(OpCounterTest, RefusesNestedCountsAndRemovesItsCallback) {
  const int64_t before = OpCounter::liveCallbacks();
  {
    CountingScope scope;
    EXPECT_TRUE(OpCounter::active());
    EXPECT_EQ(OpCounter::liveCallbacks(), before + 1);
    EXPECT_THROW(OpCounter::begin(), c10::Error);
  }
  EXPECT_FALSE(OpCounter::active());
  EXPECT_EQ(OpCounter::liveCallbacks(), before);
  EXPECT_THROW(OpCounter::end(), c10::Error);
}

// A thread that ends while it counts (a Profiler block never exited): its thread state drops
// the count, so no callback is left over (std::thread::join returns after the thread's
// thread-locals are destroyed).
TEST(OpCounterTest, AThreadThatEndsWhileCountingLeavesNoCallback) {
  const int64_t before = OpCounter::liveCallbacks();
  int64_t during = 0;
  std::thread counting([&] {
    OpCounter::begin();
    at::mm(at::ones({2, 3}), at::ones({3, 4}));
    during = OpCounter::liveCallbacks();
  });
  counting.join();
  EXPECT_EQ(during, before + 1);
  EXPECT_EQ(OpCounter::liveCallbacks(), before);
  CountingScope scope;  // this thread counts as usual
  at::mm(at::ones({2, 3}), at::ones({3, 4}));
  EXPECT_EQ(scope.finish().table.totals().matrixFlops, 2 * 2 * 3 * 4);
}

}  // namespace
}  // namespace torchutil
