// A compiled forward's kernel figures carried onto the rows of its eager count.
#include <gtest/gtest.h>

#include <cmath>
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

// ---- Inductor's generated kernels, tied by what they fused ----------------------------------

FusedOp fused(std::string node, std::vector<std::string> ops, std::string module, int64_t matrix,
              int64_t vector, int64_t bytes, bool priced = true) {
  return FusedOp{std::move(node), std::move(ops), std::move(module), matrix, vector, bytes, priced};
}

KernelRecord launch(std::string name, uint64_t startNs, uint64_t ns, int64_t opEvent = -1) {
  KernelRecord k;
  k.name = std::move(name);
  k.startNs = startNs;
  k.endNs = startNs + ns;
  k.opEvent = opEvent;
  return k;
}

// Eager rows of a conv + batch norm + relu block and a Linear: what a compiled resnet's rows are.
const std::vector<OpStats>& blockRows() {
  static const std::vector<OpStats> rows{
      row("aten::convolution", "layer1.0.conv1", 1000, 0, 400),    // 0
      row("aten::cudnn_batch_norm", "layer1.0.bn1", 0, 200, 300),  // 1
      row("aten::relu", "layer1.0.relu", 0, 100, 200),             // 2
      row("aten::relu", "layer1.1.relu", 0, 100, 200),             // 3
      row("aten::addmm", "fc", 800, 10, 100),                      // 4
  };
  return rows;
}

TEST(CompiledAttributionTest, AFusedOpFindsItsRowByNameAndModuleThenByModuleThenByName) {
  const auto& rows = blockRows();
  // relu of layer1.0: its own row, not layer1.1's
  EXPECT_EQ(rowsOfFusedOp(fused("relu", {"aten::relu"}, "layer1.0.relu", 0, 1, 1), rows, {}),
            (std::vector<int64_t>{2}));
  // a piece of the batch norm Inductor decomposed (sub, from _native_batch_norm_legit_no_training):
  // no row of those names in bn1, so bn1's row
  EXPECT_EQ(rowsOfFusedOp(fused("sub", {"aten::sub", "aten::_native_batch_norm_legit_no_training"},
                                "layer1.0.bn1", 0, 1, 1),
                          rows, {}),
            (std::vector<int64_t>{1}));
  // compiled code below the profiled root: paths relative to it
  EXPECT_EQ(rowsOfFusedOp(fused("relu", {"aten::relu"}, "1.relu", 0, 1, 1), rows, {}),
            (std::vector<int64_t>{3}));
  // no module (a compiled function): rows of its names anywhere, shared by their weights
  EXPECT_EQ(rowsOfFusedOp(fused("relu", {"aten::relu"}, "", 0, 1, 1), rows, {}),
            (std::vector<int64_t>{2, 3}));
  // an op the eager forward ran inside a counted op (mean inside adaptive_avg_pool2d) finds
  // that op's row
  const std::vector<OpStats> pooled{row("aten::adaptive_avg_pool2d", "", 0, 10, 10)};
  const std::vector<OpEvent> events{event("aten::adaptive_avg_pool2d", 0), event("aten::mean", 0)};
  EXPECT_EQ(rowsOfFusedOp(fused("mean", {"aten::mean"}, "", 0, 1, 1), pooled, events),
            (std::vector<int64_t>{0}));
  // nothing of its names or module: none
  EXPECT_TRUE(rowsOfFusedOp(fused("x", {"aten::cumsum"}, "head", 0, 1, 1), rows, {}).empty());
  // a module path is matched whole, not by its last characters
  EXPECT_TRUE(rowsOfFusedOp(fused("x", {"aten::cumsum"}, "elu", 0, 1, 1), rows, {}).empty());
}

TEST(CompiledAttributionTest, GeneratedKernelsAreSharedByBytesOrByFlopsAndLeaveUnattributed) {
  const auto& rows = blockRows();
  GeneratedKernels generated;
  generated.status = "from provenance";
  // A pointwise kernel: batch norm, decomposed (sub 300 B and mul 100 B: one op of 300 B, its
  // heaviest piece), a view (0 B) and relu (200 B): 300 : 200.
  generated.kernels.push_back(
      {"triton_poi_fused_bn_relu_0",
       "",
       {fused("sub", {"aten::sub", "aten::_native_batch_norm_legit_no_training"}, "layer1.0.bn1", 0,
              10, 300),
        fused("mul", {"aten::mul", "aten::_native_batch_norm_legit_no_training"}, "layer1.0.bn1", 0,
              10, 100),
        fused("unsqueeze", {"aten::unsqueeze"}, "layer1.0.bn1", 0, 0, 0),
        fused("relu", {"aten::relu"}, "layer1.0.relu", 0, 5, 200)}});
  // A template: addmm (matrix FLOPs 800) with its bias and a relu epilogue of 200 FLOPs whose
  // op the eager forward never ran in that module or by that name: its share stays unattributed.
  generated.kernels.push_back({"triton_tem_fused_addmm_0",
                               "",
                               {fused("addmm", {"aten::addmm"}, "fc", 800, 0, 100),
                                fused("gelu", {"aten::gelu"}, "head", 0, 200, 50)}});
  // A name two graphs define with different ops: refused.
  generated.kernels.push_back({"triton_poi_fused_add_1", "defined twice", {}});

  std::vector<KernelRecord> counted{launch("triton_poi_fused_bn_relu_0", 0, 600),
                                    launch("nvjet_gemm", 1000, 50, /*opEvent=*/0)};
  // Two timed forwards: the pointwise kernel (600 ns each), the template (1000 ns each), the
  // refused one (100 ns each) and a kernel no one knows (300 ns each).
  std::vector<KernelRecord> timed;
  for (uint64_t f = 0; f < 2; ++f) {
    const uint64_t t = 10000 * (f + 1);
    timed.push_back(launch("triton_poi_fused_bn_relu_0", t, 600));
    timed.push_back(launch("triton_tem_fused_addmm_0", t + 1000, 1000));
    timed.push_back(launch("triton_poi_fused_add_1", t + 3000, 100));
    timed.push_back(launch("mystery", t + 4000, 300));
  }
  TraceStats stats;
  stats.perOpFromTimed = true;
  stats.perRow.assign(rows.size(), OpKernelStats{});
  stats.unattributedSeconds = 2000e-9;  // per forward: 600 + 1000 + 100 + 300 ns
  std::string status = "on";
  const std::vector<GeneratedKernelRow> table =
      attributeGenerated(&stats, counted, timed, /*forwards=*/2, generated, rows, {}, &status);

  // batch norm: 300/500 of 600 ns; relu: 200/500
  EXPECT_NEAR(stats.perRow[1].seconds, 360e-9, 1e-15);
  EXPECT_NEAR(stats.perRow[2].seconds, 240e-9, 1e-15);
  EXPECT_DOUBLE_EQ(stats.perRow[3].seconds, 0.0);
  EXPECT_NEAR(stats.perRow[1].kernels, 0.6, 1e-12);
  // the template: 800/1000 of 1000 ns to fc's addmm, the gelu's 200 unattributed
  EXPECT_NEAR(stats.perRow[4].seconds, 800e-9, 1e-15);
  EXPECT_NEAR(stats.unattributedSeconds, 200e-9 + 100e-9 + 300e-9, 1e-15);
  EXPECT_EQ(status,
            "on; from provenance; 70 % of the time of kernels no op launched tied to the ops "
            "they fused");

  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].ops, "aten::_native_batch_norm_legit_no_training + aten::relu");
  EXPECT_EQ(table[0].modules, "layer1.0.bn1 + layer1.0.relu");
  EXPECT_EQ(table[0].row, 1);
  EXPECT_DOUBLE_EQ(table[0].flops, 25.0);
  EXPECT_DOUBLE_EQ(table[0].bytes, 600.0);
  EXPECT_EQ(table[1].ops, "aten::addmm + aten::gelu");
  EXPECT_EQ(table[1].row, 4);
  EXPECT_DOUBLE_EQ(table[1].flops, 1000.0);
  // every record of a generated kernel points at its row; others, and the refused, at none
  EXPECT_EQ(counted[0].generated, 0);
  EXPECT_EQ(counted[1].generated, -1);
  EXPECT_EQ(timed[5].generated, 1);
  EXPECT_EQ(timed[6].generated, -1);
  EXPECT_EQ(timed[7].generated, -1);
}

TEST(CompiledAttributionTest, AnUnpricedFusedOpMakesTheSharesEqualAndTheFiguresNaN) {
  const auto& rows = blockRows();
  GeneratedKernels generated{"",
                             {{"k",
                               "",
                               {fused("conv", {"aten::convolution"}, "layer1.0.conv1", 0, 0, 0,
                                      /*priced=*/false),
                                fused("relu", {"aten::relu"}, "layer1.0.relu", 0, 5, 200),
                                fused("getitem", {}, "", 0, 0, 0)}}}};  // takes nothing
  std::vector<KernelRecord> counted{launch("k", 0, 1000)};
  std::vector<KernelRecord> timed;
  TraceStats stats;
  stats.perRow.assign(rows.size(), OpKernelStats{});
  stats.unattributedSeconds = 1000e-9;
  std::string status;
  const auto table = attributeGenerated(&stats, counted, timed, 0, generated, rows, {}, &status);
  EXPECT_NEAR(stats.perRow[0].seconds, 500e-9, 1e-15);
  EXPECT_NEAR(stats.perRow[2].seconds, 500e-9, 1e-15);
  EXPECT_NEAR(stats.unattributedSeconds, 0.0, 1e-15);
  EXPECT_TRUE(std::isnan(table[0].flops) && std::isnan(table[0].bytes));
}

}  // namespace
}  // namespace torchutil
