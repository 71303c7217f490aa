// OpMarking (cupti/OpMarking.h), the op stack of a traced count, driven off the GPU: its CUDA
// calls answered by a fake with canned values (as kineto drives its buffer callbacks with mocked
// activities). What each correlation leaves at a change of the innermost op, what a refused
// CUDA call leaves, and that only the thread that opened the marking marks.
#include "cupti/OpMarking.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <thread>
#include <utility>
#include <vector>

namespace torchutil::cupti {
namespace {

// CUDA with canned answers: markers succeed unless refused, a node-count query answers `count`
// as the test sets it, and the capture's nodes are `listed`.
struct FakeCuda final : MarkingCuda {
  int markers = 0;
  bool refuseMarkers = false;
  void* graph = reinterpret_cast<void*>(0x6a);  // what the capturing stream captures into
  size_t count = 0;
  bool refuseCount = false;
  std::vector<CapturedNode> listed;
  bool listComplete = true;

  bool issueMarker() override {
    if (refuseMarkers) {
      return false;
    }
    markers += 1;
    return true;
  }
  void* capturingGraph(void* /*stream*/) override { return graph; }
  bool nodeCount(void* g, size_t* n) override {
    EXPECT_EQ(g, graph);
    *n = count;
    return !refuseCount;
  }
  bool nodes(void* g, std::vector<CapturedNode>* out) override {
    EXPECT_EQ(g, graph);
    out->insert(out->end(), listed.begin(), listed.end());
    return listComplete;
  }
};

void* const kStream = reinterpret_cast<void*>(0x5);

TEST(OpMarkingTest, MarkersAreIssuedOnlyWhereTheInnermostOpChanges) {
  FakeCuda cuda;
  OpMarking m;
  m.open(Correlation::Markers, &cuda);
  EXPECT_TRUE(m.owns());
  m.push(1);  // op 1
  m.push(1);  // an op inside it pushes its id again: no change
  m.pop();
  m.push(2);  // op 2 inside op 1
  m.pop();    // back to op 1
  m.pop();    // no op open
  EXPECT_EQ(m.issued(), (std::vector<uint64_t>{1, 2, 1, 0}));
  EXPECT_EQ(cuda.markers, 4);
  m.close();
  EXPECT_FALSE(m.on());
  m.push(3);  // after the counted forward: nothing
  EXPECT_EQ(cuda.markers, 4);
}

TEST(OpMarkingTest, AMarkerCudaRefusesIsNotRecordedAndTheNextChangeTriesAgain) {
  FakeCuda cuda;
  OpMarking m;
  m.open(Correlation::Markers, &cuda);
  cuda.refuseMarkers = true;
  m.push(1);
  EXPECT_TRUE(m.issued().empty());
  cuda.refuseMarkers = false;
  m.push(1);  // still a change: the refused marker was not issued
  EXPECT_EQ(m.issued(), (std::vector<uint64_t>{1}));
}

TEST(OpMarkingTest, CaptureNodesNoteTheNodeCountAtEveryChangeAndReadTheNodesAtTheEnd) {
  FakeCuda cuda;
  OpMarking m;
  m.open(Correlation::CaptureNodes, &cuda);
  m.push(7);  // before the capture: nothing is noted
  m.pop();
  m.captureBegins(kStream);
  m.push(1);
  cuda.count = 2;  // op 1 made two nodes
  m.push(2);
  cuda.count = 3;
  m.pop();
  m.pop();
  cuda.listed = {{true, KernelRecord::Kind::Kernel, "gemm"},
                 {true, KernelRecord::Kind::Memset, ""},
                 {true, KernelRecord::Kind::Kernel, "relu"}};
  m.captureEnds();
  EXPECT_EQ(cuda.markers, 0);  // no marker with capture nodes
  const CapturedForward c = m.takeCaptured();
  EXPECT_TRUE(c.complete);
  EXPECT_EQ(c.opChanges,
            (std::vector<std::pair<size_t, uint64_t>>{{0, 0}, {0, 1}, {2, 2}, {3, 1}, {3, 0}}));
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[1].kind, KernelRecord::Kind::Memset);
  // Nodes 0 and 1 were made under op 1 (event 0), node 2 under op 2.
  const std::vector<KernelRecord> sequence = capturedSequence(c);
  ASSERT_EQ(sequence.size(), 3u);
  EXPECT_EQ(sequence[0].opEvent, 0);
  EXPECT_EQ(sequence[1].opEvent, 0);
  EXPECT_EQ(sequence[2].opEvent, 1);
}

TEST(OpMarkingTest, AFailedCaptureQueryMakesTheCaptureIncomplete) {
  FakeCuda cuda;
  OpMarking m;
  m.open(Correlation::CaptureNodes, &cuda);
  m.captureBegins(kStream);
  cuda.refuseCount = true;
  m.push(1);
  m.pop();
  m.captureEnds();
  EXPECT_FALSE(m.takeCaptured().complete);
  // A stream that is not capturing (CUDA answers no graph): incomplete too, and nothing read.
  cuda.refuseCount = false;
  cuda.graph = nullptr;
  m.captureBegins(kStream);
  m.captureEnds();
  const CapturedForward c = m.takeCaptured();
  EXPECT_FALSE(c.complete);
  EXPECT_TRUE(c.nodes.empty());
  // A node whose kind CUDA would not give.
  cuda.graph = reinterpret_cast<void*>(0x6a);
  cuda.listComplete = false;
  m.captureBegins(kStream);
  m.captureEnds();
  EXPECT_FALSE(m.takeCaptured().complete);
}

TEST(OpMarkingTest, GraphNodesTakeTheInnermostOpOpenWhenTheyAreCreated) {
  OpMarking m;
  m.open(Correlation::GraphNodes, nullptr);  // no CUDA call: CUPTI's callbacks report the nodes
  m.nodeCreated(10);                         // no op open
  m.push(4);
  m.nodeCreated(11);
  m.pop();
  m.nodeCloned(110, 11);
  const GraphNodeOps nodes = m.takeGraphNodes();
  EXPECT_EQ(nodes.created.at(10), 0u);
  EXPECT_EQ(nodes.created.at(11), 4u);
  EXPECT_EQ(nodes.cloned.at(110), 11u);
  EXPECT_TRUE(m.issued().empty());
}

TEST(OpMarkingTest, OnlyTheThreadThatOpenedItMarks) {
  FakeCuda cuda;
  OpMarking m;
  m.open(Correlation::Markers, &cuda);
  std::thread other([&] {
    EXPECT_TRUE(m.on());
    EXPECT_FALSE(m.owns());
    m.push(9);  // a forked op's launches are not this marking's to place
    m.pop();
    m.nodeCreated(1);
  });
  other.join();
  EXPECT_TRUE(m.issued().empty());
  EXPECT_EQ(cuda.markers, 0);
  m.push(1);
  EXPECT_EQ(m.issued(), (std::vector<uint64_t>{1}));
}

TEST(OpMarkingTest, OpeningAgainStartsAFreshStack) {
  FakeCuda cuda;
  OpMarking m;
  m.open(Correlation::Markers, &cuda);
  m.push(1);
  m.close();
  m.open(Correlation::Markers, &cuda);
  EXPECT_TRUE(m.issued().empty());
  m.push(1);  // a change again: the stack and the current op were reset
  EXPECT_EQ(m.issued(), (std::vector<uint64_t>{1}));
}

}  // namespace
}  // namespace torchutil::cupti
