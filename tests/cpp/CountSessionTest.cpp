// The rules at the top of CountSession.h, one test each, driven the way OpCounter drives the
// session from RecordFunction: enter, then inputs (when counted), callees, exit.
#include "core/CountSession.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace torchutil {
namespace {

Arg t(std::vector<int64_t> sizes, int64_t elementSize = 4, const char* dtype = "float32") {
  return Arg::ofTensor(std::move(sizes), elementSize, dtype);
}

using Callees = std::function<void()>;

// One op call. name must outlive the session (RecordFunction names are static strings).
bool call(CountSession& s, const char* name, const Args& in, const Args& out,
          const Callees& callees = {}) {
  const bool counted = s.enter(name);
  if (counted) {
    s.setInputs(in);
  }
  if (callees) {
    callees();
  }
  s.exit(s.topIsCounted() ? out : Args{});
  return counted;
}

// A 2-d convolution: x [2, 3, 8, 8], weight [4, 3, 3, 3], no padding -> [2, 4, 6, 6].
const Args kConvIn = {t({2, 3, 8, 8}),     t({4, 3, 3, 3}),     Arg::none(),
                      Arg::ofInts({1, 1}), Arg::ofInts({0, 0}), Arg::ofInts({1, 1}),
                      Arg::ofBool(false),  Arg::ofInts({0, 0}), Arg::ofInt(1)};
const Args kConvOut = {t({2, 4, 6, 6})};
constexpr int64_t kConvFlops = 2 * 2 * (4 * 6 * 6) * (3 * 3 * 3);

const OpStats* row(const CountTable& table, const std::string& op) {
  for (const OpStats& r : table.rows()) {
    if (r.op == op) {
      return &r;
    }
  }
  return nullptr;
}

TEST(CountSessionTest, OnlyTheOutermostCountedOpIsCounted) {
  CountSession s;
  // conv2d -> convolution -> _convolution -> mkldnn_convolution, as the CPU dispatches it.
  const bool conv2dCounted = call(s, "aten::conv2d", kConvIn, kConvOut, [&] {
    EXPECT_TRUE(call(s, "aten::convolution", kConvIn, kConvOut, [&] {
      EXPECT_FALSE(call(s, "aten::_convolution", kConvIn, kConvOut, [&] {
        EXPECT_FALSE(call(s, "aten::mkldnn_convolution", kConvIn, kConvOut));
      }));
    }));
  });
  EXPECT_FALSE(conv2dCounted);
  EXPECT_EQ(s.depth(), 0u);

  ASSERT_EQ(s.table().rows().size(), 1u);
  const OpStats& r = s.table().rows()[0];
  EXPECT_EQ(r.op, "aten::convolution");
  EXPECT_EQ(r.opClass, OpClass::Matrix);
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(r.matrixFlops, kConvFlops);
  EXPECT_EQ(r.dtype, "float32");
  EXPECT_EQ(r.bytes, (2 * 3 * 8 * 8 + 4 * 3 * 3 * 3 + 2 * 4 * 6 * 6) * 4);
  EXPECT_TRUE(s.table().unknown().empty());
}

TEST(CountSessionTest, SameNameRedispatchReplacesItsCaller) {
  CountSession s;
  const Args floatIn = {t({4, 8}), t({8, 2})};
  const Args halfIn = {t({4, 8}, 2, "float16"), t({8, 2}, 2, "float16")};
  // Autocast: mm casts its inputs (ops inside it), then re-dispatches mm with the cast ones.
  call(s, "aten::mm", floatIn, {t({4, 2})}, [&] {
    EXPECT_FALSE(call(s, "aten::_to_copy", {floatIn[0]}, {halfIn[0]}));
    EXPECT_FALSE(call(s, "aten::_to_copy", {floatIn[1]}, {halfIn[1]}));
    EXPECT_TRUE(call(s, "aten::mm", halfIn, {t({4, 2}, 2, "float16")}));
  });

  ASSERT_EQ(s.table().rows().size(), 1u);
  const OpStats& r = s.table().rows()[0];
  EXPECT_EQ(r.op, "aten::mm");
  EXPECT_EQ(r.dtype, "float16");
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(r.matrixFlops, 2 * 4 * 8 * 2);
  EXPECT_EQ(r.bytes, (4 * 8 + 8 * 2 + 4 * 2) * 2);
}

TEST(CountSessionTest, OnlyADirectSameNameCalleeReplacesItsCaller) {
  CountSession s;
  // mm -> (inside) addmm -> mm: the inner mm is not a re-dispatch of the outer one.
  call(s, "aten::mm", {t({4, 8}), t({8, 2})}, {t({4, 2})}, [&] {
    call(s, "aten::addmm", {t({2}), t({4, 8}), t({8, 2})}, {t({4, 2})}, [&] {
      EXPECT_FALSE(call(s, "aten::mm", {t({4, 8}, 2, "float16"), t({8, 2}, 2, "float16")},
                        {t({4, 2}, 2, "float16")}));
    });
  });
  ASSERT_EQ(s.table().rows().size(), 1u);
  EXPECT_EQ(s.table().rows()[0].op, "aten::mm");
  EXPECT_EQ(s.table().rows()[0].dtype, "float32");
}

TEST(CountSessionTest, TransparentWrappersLetTheirCalleesCount) {
  CountSession s;
  // linear -> t (a view) and addmm; matmul -> reshape and mm.
  EXPECT_FALSE(call(s, "aten::linear", {}, {}, [&] {
    EXPECT_FALSE(call(s, "aten::t", {t({6, 10})}, {t({10, 6})}));
    EXPECT_TRUE(call(s, "aten::addmm", {t({6}), t({3, 10}), t({10, 6})}, {t({3, 6})}));
  }));
  EXPECT_FALSE(call(s, "aten::matmul", {}, {}, [&] {
    EXPECT_FALSE(call(s, "aten::reshape", {t({3, 10})}, {t({3, 10})}));
    EXPECT_TRUE(call(s, "aten::mm", {t({3, 10}), t({10, 6})}, {t({3, 6})}));
  }));

  ASSERT_EQ(s.table().rows().size(), 2u);
  const OpStats* addmm = row(s.table(), "aten::addmm");
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(addmm->matrixFlops, 2 * 3 * 10 * 6);
  EXPECT_EQ(addmm->vectorFlops, 3 * 6);
  ASSERT_NE(row(s.table(), "aten::mm"), nullptr);
  EXPECT_EQ(row(s.table(), "aten::linear"), nullptr);
  EXPECT_TRUE(s.table().unknown().empty());
}

TEST(CountSessionTest, UnknownOpIsReportedByNameAndCountWhenNoCalleeWasCounted) {
  CountSession s;
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(call(s, "custom::opaque_kernel", {t({5})}, {t({5})}));
  }
  EXPECT_FALSE(call(s, "aten::linalg_svd", {t({4, 4})}, {}));
  // An unknown op whose work was counted in a callee is not reported.
  call(s, "custom::fused_mlp", {t({3, 10})}, {}, [&] {
    call(s, "aten::mm", {t({3, 10}), t({10, 6})}, {t({3, 6})});
  });
  // Nor is an unknown op inside a counted one: it is that op's implementation.
  call(s, "aten::relu", {t({7})}, {t({7})}, [&] { call(s, "custom::relu_kernel", {}, {}); });

  const auto& unknown = s.table().unknown();
  ASSERT_EQ(unknown.size(), 2u);
  EXPECT_EQ(unknown[0], (std::pair<std::string, int64_t>{"custom::opaque_kernel", 3}));
  EXPECT_EQ(unknown[1], (std::pair<std::string, int64_t>{"aten::linalg_svd", 1}));
  EXPECT_EQ(s.table().totals().unknownCalls, 4);
  EXPECT_NE(row(s.table(), "aten::mm"), nullptr);
  EXPECT_NE(row(s.table(), "aten::relu"), nullptr);
}

TEST(CountSessionTest, ACountedCopyDoesNotHideItsUnknownCallersWork) {
  CountSession s;
  // sort copies its input, then sorts: the copy is counted (bytes), the sort is still reported.
  call(s, "aten::sort", {t({6, 6})}, {}, [&] {
    EXPECT_TRUE(call(s, "aten::copy_", {t({6, 6}), t({6, 6})}, {t({6, 6})}));
  });
  ASSERT_EQ(s.table().unknown().size(), 1u);
  EXPECT_EQ(s.table().unknown()[0].first, "aten::sort");
  const OpStats* copy = row(s.table(), "aten::copy_");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->opClass, OpClass::Memory);
  EXPECT_EQ(copy->flops(), 0);
  EXPECT_EQ(copy->bytes, 3 * 36 * 4);
}

// Rule 4 with the caller's inputs, as OpCounter hands them for ops with no entry: one priced
// bias add inside oneDNN's LSTM layer does not account for the layer (its input and weights).
TEST(CountSessionTest, APricedTrivialCalleeDoesNotHideAnUnpricedHeavyCaller) {
  CountSession s;
  const Args layerIn{t({32, 4, 128}), t({1024, 128}), t({1024, 256}), t({1024}), t({1024})};
  s.enter("test::rnn_layer");
  s.setInputs(layerIn);
  call(s, "aten::add", {t({1024}), t({1024})}, {t({1024})});
  s.exit({});
  ASSERT_EQ(s.table().unknown().size(), 1u);
  EXPECT_EQ(s.table().unknown()[0].first, "test::rnn_layer");
  // Its caller, covered by nothing else, is reported too.
  CountSession s2;
  s2.enter("test::lstm");
  s2.setInputs({t({32, 4, 128})});
  s2.enter("test::rnn_layer");
  s2.setInputs(layerIn);
  call(s2, "aten::add", {t({1024}), t({1024})}, {t({1024})});
  s2.exit({});
  s2.exit({});
  EXPECT_EQ(s2.table().totals().unknownCalls, 2);
}

TEST(CountSessionTest, CalleesThatReadTheCallersInputsCoverIt) {
  CountSession s;
  // A composite with no entry whose products read its input and weights (a native LSTM step).
  s.enter("test::composite");
  s.setInputs({t({3, 10}), t({6, 10})});
  call(s, "aten::mm", {t({3, 10}), t({10, 6})}, {t({3, 6})});
  s.exit({});
  EXPECT_TRUE(s.table().unknown().empty());
}

TEST(CountSessionTest, AMatrixOpOnANestedTensorIsPricedByItsCallees) {
  CountSession s;
  Arg nested = t({17, 64});
  nested.tensor.nested = true;
  // _native_multi_head_attention on a nested batch: its formula needs a dense [B, L, D].
  EXPECT_TRUE(s.enter("aten::_native_multi_head_attention"));
  s.setInputs({nested, nested, nested, Arg::ofInt(64), Arg::ofInt(4), t({192, 64})});
  EXPECT_FALSE(s.topIsCounted());
  call(s, "aten::mm", {t({17, 64}), t({64, 192})}, {t({17, 192})});
  s.exit({});
  EXPECT_TRUE(s.table().unknown().empty());
  EXPECT_EQ(s.table().totals().matrixFlops, 2 * 17 * 64 * 192);
  // A vector op prices its components' elements.
  call(s, "aten::relu", {nested}, {nested});
  EXPECT_EQ(s.table().totals().vectorFlops, 17 * 64);
}

// A forked task's count joins its forward's: rows by (op, module, dtype), calls and unknowns.
TEST(CountSessionTest, MergingATableAddsItsRowsAndUnknownOps) {
  CountSession main, forked;
  call(main, "aten::mm", {t({3, 10}), t({10, 6})}, {t({3, 6})});
  call(forked, "aten::mm", {t({3, 10}), t({10, 6})}, {t({3, 6})});
  call(forked, "aten::mm", {t({3, 10}), t({10, 6})}, {t({3, 6})});
  call(forked, "custom::kernel", {t({5})}, {t({5})});
  CountTable table = main.table();
  table.merge(forked.table());
  ASSERT_EQ(table.rows().size(), 1u);
  EXPECT_EQ(table.rows()[0].calls, 3);
  EXPECT_EQ(table.totals().matrixFlops, 3 * 2 * 3 * 10 * 6);
  EXPECT_EQ(table.totals().unknownCalls, 1);
}

TEST(CountSessionTest, TotalsSaturate) {
  CountSession s;
  const int64_t big = int64_t{1} << 31;
  call(s, "aten::mm", {t({big, big}), t({big, big})}, {t({big, big})});
  const CountTotals totals = s.table().totals();
  EXPECT_EQ(totals.matrixFlops, kSaturatedCount);
  EXPECT_TRUE(totals.saturated);
}

TEST(CountSessionTest, UnboxableInputsFallBackToCalleesOrToUnknown) {
  CountSession s;
  // No callee: reported as unknown, not counted with made-up inputs.
  ASSERT_TRUE(s.enter("aten::mm"));
  s.inputsUnavailable();
  EXPECT_FALSE(s.topIsCounted());
  s.exit({});
  // A callee that is counted prices the call instead.
  ASSERT_TRUE(s.enter("aten::addmm"));
  s.inputsUnavailable();
  EXPECT_TRUE(call(s, "aten::mm", {t({3, 10}), t({10, 6})}, {t({3, 6})}));
  s.exit({});

  ASSERT_EQ(s.table().unknown().size(), 1u);
  EXPECT_EQ(s.table().unknown()[0].first, "aten::mm");
  ASSERT_EQ(s.table().rows().size(), 1u);
  EXPECT_EQ(s.table().rows()[0].op, "aten::mm");
  EXPECT_EQ(s.table().rows()[0].matrixFlops, 2 * 3 * 10 * 6);
  EXPECT_EQ(row(s.table(), "aten::addmm"), nullptr);
}

TEST(CountSessionTest, AnUnboxableRedispatchLeavesTheCallToItsCaller) {
  CountSession s;
  const Args in = {t({4, 8}), t({8, 2})};
  ASSERT_TRUE(s.enter("aten::mm"));
  s.setInputs(in);
  ASSERT_TRUE(s.enter("aten::mm"));  // re-dispatch whose inputs cannot be boxed
  s.inputsUnavailable();
  EXPECT_FALSE(call(s, "aten::addmm", {}, {}));  // the kernel's callees are inside the caller
  s.exit({});
  ASSERT_TRUE(s.topIsCounted());
  s.exit({t({4, 2})});

  ASSERT_EQ(s.table().rows().size(), 1u);
  EXPECT_EQ(s.table().rows()[0].op, "aten::mm");
  EXPECT_EQ(s.table().rows()[0].calls, 1);
  EXPECT_EQ(s.table().rows()[0].matrixFlops, 2 * 4 * 8 * 2);
  // The call is priced once, by its caller: it is not also unknown.
  EXPECT_TRUE(s.table().unknown().empty());
  EXPECT_EQ(s.table().totals().unknownCalls, 0);
}

uint64_t fakeClock() {
  static uint64_t now = 0;
  return now += 10;
}

TEST(CountSessionTest, AnUnboxableRedispatchsEventBelongsToItsCaller) {
  CountSession s;
  s.recordEvents(&fakeClock);
  ASSERT_TRUE(s.enter("aten::mm"));
  s.setInputs({t({4, 8}), t({8, 2})});
  ASSERT_TRUE(s.enter("aten::mm"));
  s.inputsUnavailable();
  s.exit({});
  s.exit({t({4, 2})});

  const std::vector<OpEvent> events = s.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, OpEvent::Kind::Counted);
  EXPECT_EQ(events[0].row, 0);
  // Kernels the re-dispatch launches are accounted to the caller's row.
  EXPECT_EQ(events[1].kind, OpEvent::Kind::Inside) << opEventKindName(events[1].kind);
  EXPECT_EQ(events[1].parent, 0);
  EXPECT_EQ(events[1].row, 0);
}

// A trace's hooks push attributionEvent() instead of currentEvent(): for every op open when a
// kernel could launch, the two events must resolve to the same row, and the kernel table's op
// and module (the owner's) must be the same. Autocast's re-dispatch (the caller superseded by a
// same-named callee) and an unboxable re-dispatch (the callee inside its caller) are the cases
// where owners change after an event begins.
TEST(CountSessionTest, TheAttributionEventResolvesAsTheInnermostEventDoes) {
  CountSession s;
  s.recordEvents(&fakeClock);
  std::vector<std::pair<int64_t, int64_t>> seen;  // (currentEvent, attributionEvent)
  const auto note = [&] { seen.emplace_back(s.currentEvent(), s.attributionEvent()); };
  const Args floatIn = {t({4, 8}), t({8, 2})};
  const Args halfIn = {t({4, 8}, 2, "float16"), t({8, 2}, 2, "float16")};
  call(s, "aten::mm", floatIn, {t({4, 2})}, [&] {
    note();
    call(s, "aten::_to_copy", {floatIn[0]}, {halfIn[0]}, [&] { note(); });
    call(s, "aten::mm", halfIn, {t({4, 2}, 2, "float16")}, [&] {
      note();
      call(s, "aten::empty", {}, {}, [&] { note(); });
    });
    note();
  });
  ASSERT_TRUE(s.enter("aten::mm"));
  s.setInputs(floatIn);
  note();
  ASSERT_TRUE(s.enter("aten::mm"));
  s.inputsUnavailable();
  note();
  EXPECT_FALSE(call(s, "aten::addmm", {}, {}, [&] { note(); }));
  s.exit({});
  s.exit({t({4, 2})});
  call(s, "aten::linalg_inv", {}, {}, [&] { note(); });

  const std::vector<OpEvent> ev = s.events();
  const auto owner = [&](int64_t e) {
    const OpEvent& x = ev[static_cast<size_t>(e)];
    return x.owner >= 0 ? ev[static_cast<size_t>(x.owner)] : x;
  };
  ASSERT_EQ(seen.size(), 9u);
  size_t differ = 0;
  for (const auto& [current, attribution] : seen) {
    ASSERT_GE(attribution, 0);
    differ += current != attribution ? 1 : 0;
    EXPECT_EQ(ev[static_cast<size_t>(current)].row, ev[static_cast<size_t>(attribution)].row)
        << ev[static_cast<size_t>(current)].op;
    EXPECT_EQ(owner(current).op, owner(attribution).op);
    EXPECT_EQ(owner(current).module, owner(attribution).module);
  }
  EXPECT_GE(differ, 3u);  // _to_copy, empty and addmm pushed their counted op's event
}

TEST(CountSessionTest, OpaqueOpsAreNeitherCountedNorReported) {
  CountSession s;
  ASSERT_TRUE(s.enter("aten::mm"));
  s.markOpaque();
  EXPECT_FALSE(s.topIsCounted());
  s.exit({});
  ASSERT_FALSE(s.enter("custom::fake_kernel"));
  s.markOpaque();
  s.exit({});
  EXPECT_TRUE(s.table().rows().empty());
  EXPECT_TRUE(s.table().unknown().empty());

  // Its callees follow the rules.
  ASSERT_FALSE(s.enter("custom::subclass_op"));
  s.markOpaque();
  EXPECT_TRUE(call(s, "aten::add", {t({5}), t({5})}, {t({5})}));
  EXPECT_FALSE(call(s, "custom::other", {}, {}));
  s.exit({});
  ASSERT_EQ(s.table().rows().size(), 1u);
  EXPECT_EQ(s.table().rows()[0].op, "aten::add");
  ASSERT_EQ(s.table().unknown().size(), 1u);
  EXPECT_EQ(s.table().unknown()[0].first, "custom::other");
}

TEST(CountSessionTest, ModulePathsAreRecordedPerRow) {
  CountSession s;
  EXPECT_EQ(s.currentModule(), "");
  s.enterModule("encoder");
  s.enterModule("encoder.layer0");  // pushed whole, not joined
  EXPECT_EQ(s.currentModule(), "encoder.layer0");
  call(s, "aten::relu", {t({4})}, {t({4})});
  s.exitModule();
  EXPECT_EQ(s.currentModule(), "encoder");
  call(s, "aten::relu", {t({4})}, {t({4})});
  s.exitModule();
  call(s, "aten::relu", {t({4})}, {t({4})});
  s.exitModule();  // one exit too many stays at the top level
  EXPECT_EQ(s.currentModule(), "");

  // A depth entered again reuses its slot: a shorter path there is that path, not a mix.
  s.enterModule("decoder.layers.11.cross_attention");
  s.exitModule();
  s.enterModule("head");
  EXPECT_EQ(s.currentModule(), "head");
  call(s, "aten::relu", {t({4})}, {t({4})});
  s.exitModule();

  const auto& rows = s.table().rows();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].module, "encoder.layer0");
  EXPECT_EQ(rows[1].module, "encoder");
  EXPECT_EQ(rows[2].module, "");
  EXPECT_EQ(rows[3].module, "head");
}

TEST(CountSessionTest, RowsAggregateByOpModuleAndDtype) {
  CountSession s;
  const Args floatIn = {t({3, 4}), t({3, 4})};
  const Args halfIn = {t({3, 4}, 2, "float16"), t({3, 4}, 2, "float16")};
  call(s, "aten::add", floatIn, {t({3, 4})});
  call(s, "aten::mul", floatIn, {t({3, 4})});
  call(s, "aten::add", floatIn, {t({3, 4})});
  call(s, "aten::add", halfIn, {t({3, 4}, 2, "float16")});
  s.enterModule("block");
  call(s, "aten::add", floatIn, {t({3, 4})});
  s.exitModule();

  const auto& rows = s.table().rows();
  ASSERT_EQ(rows.size(), 4u);
  // First-seen order: add/Float, mul/Float, add/Half, add/Float in block.
  EXPECT_EQ(rows[0].op, "aten::add");
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_EQ(rows[0].vectorFlops, 2 * 12);
  EXPECT_EQ(rows[0].bytes, 2 * 3 * 12 * 4);
  EXPECT_EQ(rows[1].op, "aten::mul");
  EXPECT_EQ(rows[1].calls, 1);
  EXPECT_EQ(rows[2].op, "aten::add");
  EXPECT_EQ(rows[2].dtype, "float16");
  EXPECT_EQ(rows[2].calls, 1);
  EXPECT_EQ(rows[2].bytes, 3 * 12 * 2);
  EXPECT_EQ(rows[3].module, "block");
  EXPECT_EQ(rows[3].calls, 1);
}

TEST(CountSessionTest, OpsWithoutTensorInputsHaveNoDtype) {
  CountSession s;
  call(s, "aten::zeros", {Arg::ofInts({2, 3})}, {t({2, 3})});
  ASSERT_EQ(s.table().rows().size(), 1u);
  EXPECT_EQ(s.table().rows()[0].dtype, "");
  EXPECT_EQ(s.table().rows()[0].bytes, 2 * 3 * 4);
}

TEST(CountSessionTest, ExitWithoutEnterIsIgnored) {
  CountSession s;
  s.exit({t({3})});  // an op that began before the session did
  EXPECT_EQ(s.depth(), 0u);
  EXPECT_FALSE(s.topIsCounted());
  EXPECT_TRUE(s.table().rows().empty());
  EXPECT_TRUE(s.table().unknown().empty());
}

TEST(CountTableTest, TotalsSumRowsAndUnknownCalls) {
  CountTable table;
  table.add("aten::mm", "", "float32", OpClass::Matrix, Cost{100, 0}, 40);
  table.add("aten::addmm", "fc", "float32", OpClass::Matrix, Cost{200, 7}, 60);
  table.add("aten::mm", "", "float32", OpClass::Matrix, Cost{100, 0}, 40);
  table.add("aten::copy_", "", "float32", OpClass::Memory, Cost{}, 16);
  table.addUnknown("custom::a");
  table.addUnknown("custom::b", 4);
  table.addUnknown("custom::a", 2);

  const CountTotals totals = table.totals();
  EXPECT_EQ(totals.matrixFlops, 400);
  EXPECT_EQ(totals.vectorFlops, 7);
  EXPECT_EQ(totals.flops(), 407);
  EXPECT_EQ(totals.bytes, 156);
  EXPECT_EQ(totals.countedCalls, 4);
  EXPECT_EQ(totals.unknownCalls, 7);
  ASSERT_EQ(table.unknown().size(), 2u);
  EXPECT_EQ(table.unknown()[0], (std::pair<std::string, int64_t>{"custom::a", 3}));
  EXPECT_EQ(table.rows().size(), 3u);
  EXPECT_EQ(CountTable().totals().flops(), 0);
}

TEST(CountTableTest, DominantDtypeCarriesTheMostMatrixThenTheMostFlops) {
  CountTable table;
  EXPECT_EQ(table.dominantDtype(), "");
  table.add("aten::add", "", "float32", OpClass::Vector, Cost{0, 1000000}, 0);
  table.add("aten::mm", "", "float16", OpClass::Matrix, Cost{10, 0}, 0);
  EXPECT_EQ(table.dominantDtype(), "float16");  // matrix FLOPs first, however many vector ones
  table.add("aten::mm", "", "bfloat16", OpClass::Matrix, Cost{6, 0}, 0);
  table.add("aten::mm", "x", "bfloat16", OpClass::Matrix, Cost{6, 0}, 0);
  EXPECT_EQ(table.dominantDtype(), "bfloat16");  // summed over rows: 12 > 10

  CountTable tie;
  tie.add("aten::mm", "", "float16", OpClass::Matrix, Cost{10, 1}, 0);
  tie.add("aten::mm", "", "float32", OpClass::Matrix, Cost{10, 5}, 0);
  EXPECT_EQ(tie.dominantDtype(), "float32");  // equal matrix FLOPs: the most FLOPs

  CountTable noDtype;
  noDtype.add("aten::zeros", "", "", OpClass::Memory, Cost{}, 8);
  EXPECT_EQ(noDtype.dominantDtype(), "");
}

// Integer elementwise arithmetic (BatchNorm's num_batches_tracked += 1) moves bytes but does
// no floating-point work.
TEST(CountSessionTest, IntegerVectorOpsCostBytesButNoFlops) {
  CountSession s;
  call(s, "aten::add_", {t({}, 8, "int64"), Arg::ofInt(1)}, {t({}, 8, "int64")});
  call(s, "aten::add_", {t({4}), t({4})}, {t({4})});
  // A boolean condition among floating-point operands is still floating-point work.
  call(s, "aten::where", {t({4}, 1, "Bool"), t({4}), t({4})}, {t({4})});
  ASSERT_EQ(s.table().rows().size(), 3u);
  EXPECT_EQ(s.table().rows()[2].vectorFlops, 4);
  const OpStats& integer = s.table().rows()[0];
  EXPECT_EQ(integer.dtype, "int64");
  EXPECT_EQ(integer.vectorFlops, 0);
  EXPECT_EQ(integer.bytes, 16);
  EXPECT_EQ(s.table().rows()[1].vectorFlops, 4);
}

// Boolean masks (Hugging Face's attention masks: &, |, ~ on bool tensors) are elementwise work
// on integers: bytes, no FLOPs, and not unknown; broadcast_to and meshgrid are views.
TEST(CountSessionTest, BooleanMaskOpsCostBytesButNoFlops) {
  CountSession s;
  const Arg mask = t({2, 8}, 1, "bool");
  call(s, "aten::__and__", {mask, mask}, {mask}, [&] {
    call(s, "aten::bitwise_and", {mask, mask}, {mask});
  });
  call(s, "aten::bitwise_or_", {mask, mask}, {mask});
  call(s, "aten::__ior__", {mask, mask}, {mask});
  call(s, "aten::bitwise_not", {mask}, {mask});
  call(s, "aten::broadcast_to", {t({1, 8}), Arg::ofInts({4, 8})}, {t({4, 8})}, [&] {
    call(s, "aten::expand", {t({1, 8}), Arg::ofInts({4, 8})}, {t({4, 8})});
  });
  call(s, "aten::meshgrid", {}, {});
  const CountTotals totals = s.table().totals();
  EXPECT_EQ(totals.unknownCalls, 0);
  EXPECT_EQ(totals.countedCalls, 4);
  EXPECT_EQ(totals.flops(), 0);
  EXPECT_EQ(totals.bytes, 3 * 16 + 3 * 16 + 3 * 16 + 2 * 16);
  EXPECT_EQ(s.table().rows()[0].op, "aten::__and__");  // its callee is its implementation
}

// roi_align with an adaptive sampling ratio (<= 0) samples as often as each box is large: the
// shapes do not say, so the call is reported, and does not cover an unknown caller either.
TEST(CountSessionTest, AnOpWhoseShapesDoNotSayItsCostIsReported) {
  CountSession s;
  const Args fixed = {t({1, 4, 16, 16}), t({3, 5}),     Arg::ofDouble(0.5), Arg::ofInt(2),
                      Arg::ofInt(2),     Arg::ofInt(2), Arg::ofBool(false)};
  Args adaptive = fixed;
  adaptive[5] = Arg::ofInt(-1);
  const Args out = {t({3, 4, 2, 2})};
  EXPECT_TRUE(call(s, "torchvision::roi_align", fixed, out));
  EXPECT_TRUE(call(s, "torchvision::roi_align", adaptive, out));
  call(s, "custom::pooler", {t({1, 4, 16, 16})}, out,
       [&] { call(s, "torchvision::roi_align", adaptive, out); });
  const CountTable& table = s.table();
  ASSERT_EQ(table.rows().size(), 1u);
  EXPECT_EQ(table.rows()[0].calls, 1);
  EXPECT_GT(table.rows()[0].vectorFlops, 0);
  ASSERT_EQ(table.unknown().size(), 2u);
  EXPECT_EQ(table.unknown()[0], (std::pair<std::string, int64_t>{"torchvision::roi_align", 2}));
  EXPECT_EQ(table.unknown()[1], (std::pair<std::string, int64_t>{"custom::pooler", 1}));
}

// What a causal mask discards is kept apart from the nominal FLOPs, per row and in the totals,
// and survives a merge.
TEST(CountSessionTest, MaskedFlopsAreCountedBesideTheNominalOnes) {
  const int64_t l = 6, e = 8;
  const Args q = {t({1, 2, l, e}), t({1, 2, l, e}), t({1, 2, l, e}), Arg::none(),
                  Arg::ofDouble(0.0)};
  Args causal = q;
  causal.push_back(Arg::ofBool(true));
  Args full = q;
  full.push_back(Arg::ofBool(false));
  const Args out = {t({1, 2, l, e})};
  CountSession s, forked;
  call(s, "aten::scaled_dot_product_attention", causal, out);
  call(s, "aten::scaled_dot_product_attention", full, out);
  call(forked, "aten::scaled_dot_product_attention", causal, out);
  const int64_t nominal = 2 * (2 * l * l * e + 2 * l * l * e + 5 * l * l);
  // Causal: each of the 2 heads keeps l(l+1)/2 of the l*l scores.
  const int64_t masked = 2 * (l * l - l * (l + 1) / 2) * (2 * e + 2 * e + 5);
  const OpStats& r = s.table().rows()[0];
  EXPECT_EQ(r.flops(), 2 * nominal);
  EXPECT_EQ(r.maskedFlops, masked);
  EXPECT_EQ(r.usefulFlops(), 2 * nominal - masked);
  CountTable merged = s.table();
  merged.merge(forked.table());
  EXPECT_EQ(merged.totals().flops(), 3 * nominal);
  EXPECT_EQ(merged.totals().usefulFlops(), 3 * nominal - 2 * masked);
}

// Calls run out of the dispatcher's sight (optimize_for_inference's prim::mkldnn_convolution)
// are priced by the registry's formula for their name, at the top level; one without a formula
// is reported, never priced at 0.
TEST(CountSessionTest, UnseenCallsArePricedByTheirNameOrReported) {
  CountTable table;
  const Args in = {t({2, 3, 8, 8}),     t({4, 3, 3, 3}),     t({4}),       Arg::ofInts({1, 1}),
                   Arg::ofInts({0, 0}), Arg::ofInts({1, 1}), Arg::ofInt(1)};
  countUnseenCalls({{"prim::mkldnn_convolution", in, kConvOut},
                    {"prim::mkldnn_convolution", in, kConvOut},
                    {"prim::mkldnn_mystery", in, kConvOut}},
                   FormulaRegistry::global(), &table);
  const OpStats* conv = row(table, "prim::mkldnn_convolution");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->calls, 2);
  EXPECT_EQ(conv->opClass, OpClass::Matrix);
  EXPECT_EQ(conv->matrixFlops, 2 * kConvFlops);
  EXPECT_EQ(conv->vectorFlops, 2 * (2 * 4 * 6 * 6));  // the bias, once per output element
  EXPECT_EQ(conv->module, "");
  EXPECT_EQ(table.unknown(),
            (std::vector<std::pair<std::string, int64_t>>{{"prim::mkldnn_mystery", 1}}));
}

}  // namespace
}  // namespace torchutil
