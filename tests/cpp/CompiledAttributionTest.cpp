// A compiled forward's kernel figures carried onto the rows of its eager count.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/CompiledAttribution.h"

namespace torchutil {
namespace {

OpStats row(std::string op, std::string module, int64_t matrix, int64_t vector, int64_t bytes,
            std::string dtype = "float16") {
  OpStats r;
  r.op = std::move(op);
  r.module = std::move(module);
  r.dtype = std::move(dtype);
  r.calls = 1;
  r.matrixFlops = matrix;
  r.vectorFlops = vector;
  r.bytes = bytes;
  return r;
}

OpEvent event(std::string op, int64_t row) {
  OpEvent e;
  e.op = std::move(op);
  e.row = row;
  return e;
}

TraceStats perRow(std::vector<OpKernelStats> rows, double unattributed) {
  TraceStats s;
  s.kernelSeconds = unattributed;
  for (const OpKernelStats& r : rows) {
    s.kernelSeconds += r.seconds;
  }
  s.perRow = std::move(rows);
  s.unattributedSeconds = unattributed;
  return s;
}

TEST(CompiledAttributionTest, AnOpsTimeIsSharedAmongItsEagerRowsByFlops) {
  // Eager: two Linear layers (addmm in fc1 and fc2, 3:1 FLOPs), a relu between. Compiled: one
  // addmm row (no module paths) that took 8 s in 2 kernels, and a relu row with 1 s.
  const std::vector<OpStats> eager{row("aten::addmm", "fc1", 300, 0, 10),
                                   row("aten::relu", "", 0, 5, 10),
                                   row("aten::addmm", "fc2", 100, 0, 10)};
  const std::vector<OpEvent> events{event("aten::linear", -1), event("aten::addmm", 0),
                                    event("aten::relu", 1), event("aten::addmm", 2)};
  const std::vector<OpStats> compiled{row("aten::addmm", "", 400, 0, 20),
                                      row("aten::relu", "", 0, 5, 10)};
  std::vector<int64_t> rowOf;
  const TraceStats out =
      shareOntoEagerRows(perRow({{2, 8.0}, {1, 1.0}}, 0.5), compiled, eager, events, &rowOf);
  ASSERT_EQ(out.perRow.size(), 3u);
  EXPECT_DOUBLE_EQ(out.perRow[0].seconds, 6.0);
  EXPECT_DOUBLE_EQ(out.perRow[2].seconds, 2.0);
  EXPECT_DOUBLE_EQ(out.perRow[0].kernels, 1.5);
  EXPECT_DOUBLE_EQ(out.perRow[1].seconds, 1.0);
  EXPECT_DOUBLE_EQ(out.unattributedSeconds, 0.5);
  EXPECT_DOUBLE_EQ(out.kernelSeconds, 9.5);  // the compiled forward's, unchanged
  EXPECT_EQ(rowOf, (std::vector<int64_t>{0, 1}));
}

TEST(CompiledAttributionTest, AnOpInsideAnEagerCountedOpFindsItsRow) {
  // Eager SDPA is counted at scaled_dot_product_attention; the compiled graph calls the flash
  // backend directly, which ran inside it eagerly.
  const std::vector<OpStats> eager{row("aten::scaled_dot_product_attention", "attn", 100, 10, 5)};
  const std::vector<OpEvent> events{event("aten::scaled_dot_product_attention", 0),
                                    event("aten::_scaled_dot_product_flash_attention", 0)};
  const std::vector<OpStats> compiled{
      row("aten::_scaled_dot_product_flash_attention", "", 100, 10, 5)};
  std::vector<int64_t> rowOf;
  const TraceStats out = shareOntoEagerRows(perRow({{1, 3.0}}, 0), compiled, eager, events, &rowOf);
  EXPECT_DOUBLE_EQ(out.perRow[0].seconds, 3.0);
  EXPECT_EQ(rowOf, (std::vector<int64_t>{0}));
}

TEST(CompiledAttributionTest, AnOpTheEagerForwardNeverRanIsUnattributed) {
  const std::vector<OpStats> eager{row("aten::mm", "", 10, 0, 1)};
  const std::vector<OpEvent> events{event("aten::mm", 0)};
  const std::vector<OpStats> compiled{row("aten::copy_", "", 0, 0, 8)};
  std::vector<int64_t> rowOf;
  const TraceStats out =
      shareOntoEagerRows(perRow({{1, 2.0}}, 1.0), compiled, eager, events, &rowOf);
  EXPECT_DOUBLE_EQ(out.perRow[0].seconds, 0.0);
  EXPECT_DOUBLE_EQ(out.unattributedSeconds, 3.0);
  EXPECT_EQ(rowOf, (std::vector<int64_t>{-1}));
}

TEST(CompiledAttributionTest, RowsWithoutFlopsShareByBytesAndTheirOwnDtypeFirst) {
  // Copies in two modules (bytes 1:3) and one in another dtype, which takes nothing while rows
  // of the compiled row's dtype exist.
  const std::vector<OpStats> eager{row("aten::copy_", "a", 0, 0, 100),
                                   row("aten::copy_", "b", 0, 0, 300),
                                   row("aten::copy_", "c", 0, 0, 900, "float32")};
  const std::vector<OpEvent> events{event("aten::copy_", 0), event("aten::copy_", 1),
                                    event("aten::copy_", 2)};
  const std::vector<OpStats> compiled{row("aten::copy_", "", 0, 0, 400)};
  std::vector<int64_t> rowOf;
  const TraceStats out = shareOntoEagerRows(perRow({{4, 4.0}}, 0), compiled, eager, events, &rowOf);
  EXPECT_DOUBLE_EQ(out.perRow[0].seconds, 1.0);
  EXPECT_DOUBLE_EQ(out.perRow[1].seconds, 3.0);
  EXPECT_DOUBLE_EQ(out.perRow[2].seconds, 0.0);
  EXPECT_EQ(rowOf, (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace torchutil
