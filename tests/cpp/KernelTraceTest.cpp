// Kernel records, attribution and interval arithmetic against synthetic CUPTI-like records.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "TraceTestData.h"
#include "core/CountSession.h"
#include "core/KernelTrace.h"

namespace torchutil {
namespace {

using testdata::kernel;

TEST(KernelTraceTest, UnionLengthMergesOverlapsAndSkipsEmpty) {
  EXPECT_EQ(unionLength({}), 0u);
  EXPECT_EQ(unionLength({{0, 10}}), 10u);
  EXPECT_EQ(unionLength({{0, 10}, {5, 15}}), 15u);               // overlap
  EXPECT_EQ(unionLength({{20, 30}, {0, 10}}), 20u);              // unsorted, disjoint
  EXPECT_EQ(unionLength({{0, 10}, {10, 20}}), 20u);              // touching
  EXPECT_EQ(unionLength({{0, 100}, {10, 20}, {30, 40}}), 100u);  // nested
  EXPECT_EQ(unionLength({{5, 5}, {9, 3}}), 0u);                  // empty and inverted
}

TEST(KernelTraceTest, AttributeCountedUsesExternalIds) {
  std::vector<KernelRecord> ks{kernel("a", 0, 1, 100), kernel("b", 2, 3, 101),
                               kernel("c", 4, 5, 102)};
  // External id = event index + 1; 0 means none.
  attributeCounted(ks, {{100, 1}, {101, 3}, {102, 0}});
  EXPECT_EQ(ks[0].opEvent, 0);
  EXPECT_EQ(ks[1].opEvent, 2);
  EXPECT_EQ(ks[2].opEvent, -1);
  for (const auto& k : ks) {
    EXPECT_FALSE(k.timed);
    EXPECT_FALSE(k.forward.has_value());
  }
}

// A marker as CUPTI records it: a one-byte memset on the marker stream (device 0, stream 3).
KernelRecord marker(uint32_t correlationId) {
  KernelRecord m = testdata::record(KernelRecord::Kind::Memset, "Memset (Device)", 0, 1);
  m.correlationId = correlationId;
  m.stream = 3;
  m.bytes = 1;
  return m;
}

TEST(KernelTraceTest, MarkersGiveEachLaunchTheOpOfTheLastMarkerBeforeIt) {
  // Issued: op 1 (correlation 10), op 2 nested in it (20), back to op 1 (30), no op (40).
  // Launches by correlation id: 5 before any marker, 11-12 in op 1, 21 in op 2, 31 in op 1
  // again, 41 after the op; the records arrive out of order, as CUPTI's buffers deliver them.
  std::vector<KernelRecord> records{kernel("late", 9, 10, 41),
                                    marker(30),
                                    kernel("gemm", 1, 2, 11),
                                    marker(10),
                                    kernel("copy", 3, 4, 12),
                                    kernel("relu", 5, 6, 21),
                                    marker(20),
                                    kernel("before", 0, 1, 5),
                                    kernel("add", 7, 8, 31),
                                    marker(40)};
  // A memset of the model's own on the marker's stream number but another device is no marker.
  KernelRecord own = marker(13);
  own.device = 1;
  records.push_back(own);
  std::string problem;
  const auto ids = correlateByMarkers(records, MarkerStream{0, 3}, {1, 2, 1, 0}, &problem);
  EXPECT_EQ(problem, "");
  ASSERT_EQ(records.size(), 7u);  // the four markers are gone
  for (const KernelRecord& r : records) {
    EXPECT_FALSE(r.kind == KernelRecord::Kind::Memset && r.device == 0) << r.correlationId;
  }
  const std::unordered_map<uint32_t, uint64_t> want{{11, 1}, {12, 1}, {13, 1}, {21, 2}, {31, 1}};
  EXPECT_EQ(ids, want);  // 5 (before the first marker) and 41 (after "no op"): none
  attributeCounted(records, ids);
  for (const KernelRecord& r : records) {
    const int64_t expected = r.correlationId == 21                             ? 1
                             : (r.correlationId == 5 || r.correlationId == 41) ? -1
                                                                               : 0;
    EXPECT_EQ(r.opEvent, expected) << r.name;
  }
}

TEST(KernelTraceTest, MarkersThatWereLostAttributeNothingAndSaySo) {
  std::vector<KernelRecord> records{marker(10), kernel("gemm", 1, 2, 11), marker(20),
                                    kernel("relu", 3, 4, 21)};
  std::string problem;
  // Three issued, two recorded (a buffer dropped one): no launch can be placed with certainty.
  const auto ids = correlateByMarkers(records, MarkerStream{0, 3}, {1, 2, 0}, &problem);
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(problem, "the trace holds 2 of the 3 op markers issued");
  EXPECT_EQ(records.size(), 2u);  // the markers still leave the records
}

// Records of `launches` graph replays, one per (launch, executable node), nodes 100 + i.
std::vector<KernelRecord> replays(std::vector<uint32_t> launches, size_t nodes) {
  std::vector<KernelRecord> out;
  uint64_t t = 1000;
  for (uint32_t launch : launches) {
    for (size_t i = 0; i < nodes; ++i, t += 10) {
      KernelRecord k = kernel("k" + std::to_string(i), t, t + 5, launch);
      k.graphNodeId = 100 + i;
      k.timed = true;
      out.push_back(k);
    }
  }
  return out;
}

TEST(KernelTraceTest, GraphNodesGiveEachReplayedKernelTheOpOfItsCapturedNode) {
  // Captured nodes 1..3 made under external ids 4, 0 (no op) and 6; instantiation cloned them
  // into executable nodes 100..102. Launches are numbered in launch order, whatever the
  // records' order.
  GraphNodeOps nodes;
  nodes.created = {{1, 4}, {2, 0}, {3, 6}};
  nodes.cloned = {{100, 1}, {101, 2}, {102, 3}};
  std::vector<KernelRecord> timed = replays({72, 71}, 3);
  std::string problem;
  ASSERT_TRUE(attributeByGraphNodes(timed, nodes, 2, &problem)) << problem;
  for (const KernelRecord& k : timed) {
    EXPECT_EQ(k.opEvent, k.graphNodeId == 100 ? 3 : k.graphNodeId == 101 ? -1 : 5);
    EXPECT_EQ(k.forward, k.correlationId == 71 ? 0 : 1);
  }
  // A record naming the captured node itself (no clone reported) resolves too.
  std::vector<KernelRecord> direct = replays({9}, 1);
  direct[0].graphNodeId = 3;
  ASSERT_TRUE(attributeByGraphNodes(direct, nodes, 1, &problem)) << problem;
  EXPECT_EQ(direct[0].opEvent, 5);
}

TEST(KernelTraceTest, GraphNodesRefuseUnknownNodesAndOtherLaunchCounts) {
  GraphNodeOps nodes;
  nodes.created = {{1, 4}};
  nodes.cloned = {{100, 1}};
  std::string problem;
  std::vector<KernelRecord> timed = replays({5, 6}, 2);  // node 101 was never captured
  EXPECT_FALSE(attributeByGraphNodes(timed, nodes, 2, &problem));
  EXPECT_EQ(problem, "2 of 4 records name no graph node the capture created");
  for (const KernelRecord& k : timed) {
    EXPECT_EQ(k.opEvent, -1);
    EXPECT_FALSE(k.forward.has_value());
  }
  timed = replays({5, 6}, 1);
  EXPECT_FALSE(attributeByGraphNodes(timed, nodes, 3, &problem));
  EXPECT_EQ(problem, "the trace holds 2 graph launches, not 3");
  timed = replays({5, 6}, 1);
  timed.push_back(timed.back());
  EXPECT_FALSE(attributeByGraphNodes(timed, nodes, 2, &problem));
  EXPECT_EQ(problem, "graph launches of 1 and 2 records");
}

TEST(KernelTraceTest, CapturedSequenceGivesEachNodeThatRunsTheOpOpenWhenItWasCreated) {
  // Nodes 0..4: a kernel before any op, a memset and a kernel under external id 3, an event
  // node (runs nothing) and a kernel under 7. The change at 4 nodes comes after a change at 4
  // (an op with no node): the later one wins.
  CapturedForward f;
  f.nodes = {{true, KernelRecord::Kind::Kernel, "pre"},
             {true, KernelRecord::Kind::Memset, ""},
             {true, KernelRecord::Kind::Kernel, "gemm"},
             {false, KernelRecord::Kind::Kernel, ""},
             {true, KernelRecord::Kind::Kernel, ""}};
  f.opChanges = {{1, 3}, {4, 5}, {4, 7}};
  const std::vector<KernelRecord> seq = capturedSequence(f);
  ASSERT_EQ(seq.size(), 4u);
  EXPECT_EQ(seq[0].opEvent, -1);
  EXPECT_EQ(seq[1].opEvent, 2);
  EXPECT_EQ(seq[1].kind, KernelRecord::Kind::Memset);
  EXPECT_EQ(seq[2].opEvent, 2);
  EXPECT_EQ(seq[2].name, "gemm");
  EXPECT_EQ(seq[3].opEvent, 6);
  for (size_t i = 0; i < seq.size(); ++i) {
    EXPECT_EQ(seq[i].startNs, i);  // its position, which attributeByPosition sorts by
  }
  // Replays repeat it: a reference with no name takes any kernel's name, never another kind.
  std::vector<KernelRecord> timed;
  for (uint32_t launch : {1u, 2u}) {
    const uint64_t t = launch * 100;
    timed.push_back(kernel("pre", t, t + 1, launch));
    KernelRecord m = kernel("Memset (Device)", t + 2, t + 3, launch);
    m.kind = KernelRecord::Kind::Memset;
    timed.push_back(m);
    timed.push_back(kernel("gemm", t + 4, t + 5, launch));
    timed.push_back(kernel("cutlass_whatever", t + 6, t + 7, launch));
  }
  ASSERT_TRUE(attributeByPosition(seq, timed, 2));
  EXPECT_EQ(timed[3].opEvent, 6);
  EXPECT_EQ(timed[5].opEvent, 2);
  EXPECT_EQ(timed[7].forward, 1);
  timed[2].name = "not_gemm";  // a named node must match its name
  EXPECT_FALSE(attributeByPosition(seq, timed, 2));
}

TEST(KernelTraceTest, AttributeByPositionCopiesOpsPerForward) {
  std::vector<KernelRecord> counted{kernel("gemm", 0, 10, 1), kernel("relu", 10, 12, 2)};
  counted[0].opEvent = 4;
  counted[1].opEvent = 9;
  // Two timed forwards, delivered out of order.
  std::vector<KernelRecord> timed{kernel("relu", 130, 132, 0), kernel("gemm", 100, 110, 0),
                                  kernel("gemm", 200, 210, 0), kernel("relu", 230, 232, 0)};
  ASSERT_TRUE(attributeByPosition(counted, timed, 2));
  ASSERT_EQ(timed.size(), 4u);
  EXPECT_EQ(timed[0].name, "gemm");
  EXPECT_EQ(timed[0].opEvent, 4);
  EXPECT_EQ(timed[0].forward.value_or(-1), 0);
  EXPECT_EQ(timed[1].opEvent, 9);
  EXPECT_EQ(timed[3].forward.value_or(-1), 1);
  EXPECT_EQ(timed[3].opEvent, 9);
}

TEST(KernelTraceTest, AttributeByPositionRefusesADifferentSequence) {
  std::vector<KernelRecord> counted{kernel("gemm", 0, 10, 1), kernel("relu", 10, 12, 2)};
  std::vector<KernelRecord> wrongCount{kernel("gemm", 100, 110, 0)};
  EXPECT_FALSE(attributeByPosition(counted, wrongCount, 1));
  std::vector<KernelRecord> wrongName{kernel("gemm", 100, 110, 0), kernel("gelu", 110, 112, 0)};
  EXPECT_FALSE(attributeByPosition(counted, wrongName, 1));
  EXPECT_EQ(wrongName[1].opEvent, -1);  // nothing attributed on refusal
  EXPECT_FALSE(wrongName[1].forward.has_value());
  std::vector<KernelRecord> none;
  EXPECT_FALSE(attributeByPosition({}, none, 1));
}

// Events as CountSession records them: two counted ops (rows 0 and 1) and an op inside the
// first, plus an unknown op.
std::vector<OpEvent> events() {
  std::vector<OpEvent> e(4);
  e[0].op = "aten::convolution";
  e[0].kind = OpEvent::Kind::Counted;
  e[0].row = 0;
  e[0].owner = 0;
  e[1].op = "aten::cudnn_convolution";
  e[1].kind = OpEvent::Kind::Inside;
  e[1].row = 0;  // resolved through its owner
  e[1].owner = 0;
  e[2].op = "aten::relu";
  e[2].kind = OpEvent::Kind::Counted;
  e[2].row = 1;
  e[2].owner = 2;
  e[3].op = "aten::linalg_inv";
  e[3].kind = OpEvent::Kind::Unknown;
  return e;
}

TEST(KernelTraceTest, SummarizeTimedForwardsPerForward) {
  std::vector<KernelRecord> counted{kernel("conv", 0, 10, 1), kernel("relu", 12, 14, 2)};
  counted[0].opEvent = 1;  // launched inside the convolution
  counted[1].opEvent = 2;
  std::vector<KernelRecord> timed{kernel("conv", 100, 110, 0), kernel("relu", 110, 112, 0),
                                  kernel("conv", 200, 210, 0), kernel("relu", 215, 217, 0)};
  ASSERT_TRUE(attributeByPosition(counted, timed, 2));
  TraceStats s = summarizeTrace(counted, timed, 2, true, events(), 2);
  EXPECT_TRUE(s.perOpFromTimed);
  EXPECT_DOUBLE_EQ(s.kernelsPerForward, 2.0);
  EXPECT_DOUBLE_EQ(s.kernelSeconds, 12e-9);  // (10 + 2 + 10 + 2) ns over 2 forwards
  EXPECT_DOUBLE_EQ(s.busySeconds, 12e-9);
  ASSERT_EQ(s.perRow.size(), 2u);
  EXPECT_DOUBLE_EQ(s.perRow[0].seconds, 10e-9);
  EXPECT_DOUBLE_EQ(s.perRow[0].kernels, 1.0);
  EXPECT_DOUBLE_EQ(s.perRow[1].seconds, 2e-9);
  EXPECT_DOUBLE_EQ(s.unattributedSeconds, 0.0);
}

TEST(KernelTraceTest, SummarizeFallsBackToTheCountedForward) {
  std::vector<KernelRecord> counted{kernel("conv", 0, 10, 1), kernel("inv", 10, 40, 2),
                                    kernel("triton_fused", 40, 45, 3)};
  counted[0].opEvent = 0;
  counted[1].opEvent = 3;  // an op without a formula: no row
  // Overlapping timed kernels on two streams: busy time is their union.
  std::vector<KernelRecord> timed{kernel("x", 100, 150, 0, 1), kernel("y", 120, 160, 0, 2)};
  TraceStats s = summarizeTrace(counted, timed, 1, false, events(), 2);
  EXPECT_FALSE(s.perOpFromTimed);
  EXPECT_DOUBLE_EQ(s.kernelSeconds, 90e-9);
  EXPECT_DOUBLE_EQ(s.busySeconds, 60e-9);
  EXPECT_DOUBLE_EQ(s.perRow[0].seconds, 10e-9);
  EXPECT_DOUBLE_EQ(s.perRow[1].seconds, 0.0);
  EXPECT_DOUBLE_EQ(s.unattributedSeconds, 35e-9);  // the unknown op's and the unlaunched kernel
}

TEST(KernelTraceTest, SummarizeWithoutTimedForwardsUsesCounted) {
  std::vector<KernelRecord> counted{kernel("conv", 0, 10, 1)};
  counted[0].opEvent = 0;
  TraceStats s = summarizeTrace(counted, {}, 5, false, events(), 2);
  EXPECT_DOUBLE_EQ(s.kernelsPerForward, 1.0);
  EXPECT_DOUBLE_EQ(s.kernelSeconds, 10e-9);
}

TEST(KernelTraceTest, CountSessionEventsResolveRowsThroughOwners) {
  CountSession session;
  static uint64_t now = 0;
  session.recordEvents([] { return now += 10; });
  Args x{Arg::ofTensor({1, 3, 8, 8}), Arg::ofTensor({4, 3, 3, 3}), Arg::none(),
         Arg::ofInts({1, 1}),         Arg::ofInts({0, 0}),         Arg::ofInts({1, 1}),
         Arg::ofBool(false),          Arg::ofInts({0, 0}),         Arg::ofInt(1)};
  ASSERT_TRUE(session.enter("aten::convolution"));
  EXPECT_EQ(session.currentEvent(), 0);
  EXPECT_EQ(session.attributionEvent(), 0);
  session.setInputs(x);
  EXPECT_FALSE(session.enter("aten::_convolution"));
  EXPECT_EQ(session.currentEvent(), 1);
  EXPECT_EQ(session.attributionEvent(), 0);  // inside the counted op: its owner's
  session.exit({});
  EXPECT_EQ(session.attributionEvent(), 0);
  session.exit({Arg::ofTensor({1, 4, 6, 6})});
  EXPECT_EQ(session.attributionEvent(), -1);
  EXPECT_FALSE(session.enter("aten::linalg_inv"));
  EXPECT_EQ(session.attributionEvent(), 2);  // outside any counted op: its own
  session.exit({});
  const auto ev = session.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kind, OpEvent::Kind::Counted);
  EXPECT_EQ(ev[0].row, 0);
  EXPECT_EQ(ev[1].kind, OpEvent::Kind::Inside);
  EXPECT_EQ(ev[1].row, 0);
  EXPECT_EQ(ev[1].owner, 0);
  EXPECT_EQ(ev[1].parent, 0);
  EXPECT_EQ(ev[2].kind, OpEvent::Kind::Unknown);
  EXPECT_EQ(ev[2].row, -1);
  EXPECT_LT(ev[0].startNs, ev[1].startNs);
  EXPECT_LT(ev[1].endNs, ev[0].endNs);
}

TEST(KernelTraceTest, ChromeTraceHasOpAndKernelEvents) {
  std::vector<OpStats> rows(2);
  rows[0].op = "aten::convolution";
  rows[0].calls = 1;
  rows[0].matrixFlops = 1000;
  rows[0].bytes = 100;
  rows[1].op = "aten::relu";
  rows[1].calls = 1;
  auto ev = events();
  const uint64_t times[4][2] = {{1000, 3000}, {1500, 2500}, {3000, 3500}, {3500, 4000}};
  for (size_t i = 0; i < ev.size(); ++i) {
    ev[i].startNs = times[i][0];
    ev[i].endNs = times[i][1];
  }
  ev[0].module = "layer1.\"0\"";  // must be escaped
  std::vector<KernelRecord> ks{kernel("implicit_gemm<128, 64>", 2000, 4500, 1)};
  ks[0].opEvent = 1;  // inside the convolution: accounted to it
  ks[0].grid[0] = 80;
  ks[0].block[0] = 256;
  const std::string json = chromeTrace(ev, rows, ks, "NVIDIA H200");
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"aten::convolution\",\"ts\":0.000,\"dur\":2.000"),
            std::string::npos);
  EXPECT_NE(json.find("\"flops_per_call\":1000"), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"implicit_gemm<128, 64>\",\"ts\":1.000,\"dur\":2.500"),
            std::string::npos);
  EXPECT_NE(json.find("\"op\":\"aten::convolution\",\"module\":\"layer1.\\\"0\\\"\""),
            std::string::npos);
  EXPECT_NE(json.find("\"grid\":[80,0,0]"), std::string::npos);
  EXPECT_NE(json.find("\"tid\":7"), std::string::npos);
  EXPECT_EQ(json.find("aten::cudnn_convolution"), std::string::npos);  // inside ops are not drawn
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(std::count(json.begin(), json.end(), '['), std::count(json.begin(), json.end(), ']'));
}

TEST(KernelTraceTest, JsonEscapeControlCharacters) {
  EXPECT_EQ(jsonEscape("a\"b\\c\n\x01"), "a\\\"b\\\\c\\n\\u0001");
}

TEST(KernelTraceTest, KernelRowsByFieldWithTheirOp) {
  // Event 0 is a counted conv; event 1 runs inside it (its owner is event 0, row 4).
  std::vector<OpEvent> conv(2);
  conv[0].op = "aten::convolution";
  conv[0].module = "layer1";
  conv[0].row = 4;
  conv[0].owner = 0;
  conv[1].op = "aten::cudnn_convolution";
  conv[1].row = 4;
  conv[1].owner = 0;
  KernelRecord counted = kernel("k", 1000, 1500, 1, 3);
  counted.opEvent = 1;
  KernelRecord timed = kernel("m", 5000, 7000, 2, 3);
  timed.timed = true;
  timed.forward = 2;
  timed.kind = KernelRecord::Kind::Memcpy;
  timed.bytes = 64;
  KernelRecord unsplit = kernel("n", 8000, 8100, 3, 3);
  unsplit.timed = true;
  ResultTable t("kernels");
  addKernelRows(t, {counted, timed, unsplit}, conv);
  ASSERT_EQ(t.rows(), 3u);
  EXPECT_EQ(t.textColumn("name"), (std::vector<std::string>{"k", "m", "n"}));
  EXPECT_EQ(t.textColumn("op")[0], "aten::convolution");  // the owner, not the inside op
  EXPECT_EQ(t.textColumn("module")[0], "layer1");
  EXPECT_EQ(t.textColumn("op")[1], "");
  EXPECT_DOUBLE_EQ(t.numberColumn("op_row")[0], 4);
  EXPECT_TRUE(std::isnan(t.numberColumn("op_row")[1]));  // launched by no op
  const auto& timedCol = t.numberColumn("timed");
  const auto& forward = t.numberColumn("forward");
  EXPECT_DOUBLE_EQ(timedCol[0], 0);
  EXPECT_TRUE(std::isnan(forward[0]));  // the counted forward has no timed index
  EXPECT_DOUBLE_EQ(timedCol[1], 1);
  EXPECT_DOUBLE_EQ(forward[1], 2);
  EXPECT_DOUBLE_EQ(timedCol[2], 1);
  EXPECT_TRUE(std::isnan(forward[2]));  // timed, but not split by forward
  EXPECT_DOUBLE_EQ(t.numberColumn("kind")[1], 1);
  EXPECT_DOUBLE_EQ(t.numberColumn("start_us")[1], 4.0);  // from the first kernel's start
  EXPECT_DOUBLE_EQ(t.numberColumn("duration_us")[1], 2.0);
  EXPECT_DOUBLE_EQ(t.numberColumn("stream")[1], 3);
  EXPECT_DOUBLE_EQ(t.numberColumn("bytes")[1], 64);
}

}  // namespace
}  // namespace torchutil
