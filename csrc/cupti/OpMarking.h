#pragma once
// The op stack of a traced count, and what each change of its innermost op leaves behind, by
// the trace's correlation (core/HardwareBackends.h): with Markers a marker (a one-byte memset on
// the tracer's stream, correlateByMarkers later places each launch after the last marker before
// it); with CaptureNodes the capture's node count (and its nodes when the capture ends); with
// GraphNodes nothing, CUPTI's graph-node callbacks tying each node created to the innermost op.
// CUDA-free: what it asks of CUDA goes through MarkingCuda (cupti/CudaMarking.h; tests answer
// with canned values, tests/cpp/cupti/OpMarkingTest.cpp).
//
// Threads: the hooks are plain functions the dispatcher calls for every op on every thread, so
// the tracer keeps one OpMarking for the process, as CUPTI keeps one external-id stack. Only the
// thread that opened it marks (owns()): on() is atomic, and everything else is that thread's
// alone (the graph-node callbacks run on the thread creating the node, and check owns() too).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "core/HardwareBackends.h"
#include "core/KernelTrace.h"

namespace torchutil::cupti {

// The CUDA runtime calls the marking makes, one method each; handles are CUDA's, as void*.
class MarkingCuda {
 public:
  virtual ~MarkingCuda() = default;
  // One marker (a one-byte memset on the marker stream); false when CUDA refused it.
  virtual bool issueMarker() = 0;
  // The graph `stream` is capturing into; null when it is not capturing or CUDA fails.
  virtual void* capturingGraph(void* stream) = 0;
  // How many nodes `graph` holds; false when CUDA fails.
  virtual bool nodeCount(void* graph, size_t* count) = 0;
  // The nodes of `graph` in the order CUDA created them, with the kind of record each makes
  // when replayed and a kernel's name; false when a query failed (what was read is kept).
  virtual bool nodes(void* graph, std::vector<CapturedNode>* out) = 0;
};

class OpMarking {
 public:
  // Opens a fresh stack for the calling thread, keeping what `how` needs (Markers, CaptureNodes
  // or GraphNodes; any other correlation keeps the stack only); `cuda` outlives the marking.
  void open(Correlation how, MarkingCuda* cuda);
  // Ends the marking (the counted forward is over); what it kept stays until taken.
  void close() { on_ = false; }
  bool on() const { return on_; }
  // Whether the calling thread marks: open, and opened by this thread.
  bool owns() const { return on_ && std::this_thread::get_id() == owner_; }

  // An op begins / ends on the calling thread (ignored unless it owns() the marking).
  void push(uint64_t id);
  void pop();

  // CaptureNodes: the capture of the counted forward begins on `stream`; ends (still capturing:
  // its nodes are read now). Ignored for the other correlations.
  void captureBegins(void* stream);
  void captureEnds();
  CapturedForward takeCaptured() { return std::exchange(captured_, {}); }

  // GraphNodes, from CUPTI's callbacks: a node created (it belongs to the innermost open op) or
  // cloned into the executable graph. Ignored unless the calling thread owns() the marking.
  void nodeCreated(uint64_t node);
  void nodeCloned(uint64_t node, uint64_t original);
  GraphNodeOps takeGraphNodes() { return std::exchange(nodes_, {}); }

  // Markers: the external id each marker issued stands for, in issue order.
  const std::vector<uint64_t>& issued() const { return issued_; }

 private:
  void changeTo(uint64_t id);  // the innermost op is `id` (0: none) from now on
  void noteNodeCount();

  std::atomic<bool> on_{false};
  Correlation how_ = Correlation::Markers;
  std::thread::id owner_;
  MarkingCuda* cuda_ = nullptr;
  std::vector<uint64_t> issued_;  // Markers
  std::vector<uint64_t> open_;    // the external ids pushed and not popped
  uint64_t current_ = 0;          // the innermost op as last marked or noted
  GraphNodeOps nodes_;            // GraphNodes
  // CaptureNodes: the capturing stream (null: not capturing), the graph it captures into (asked
  // once, when the capture begins: null when that failed), and what the queries saw.
  void* captureStream_ = nullptr;
  void* captureGraph_ = nullptr;
  CapturedForward captured_;
};

}  // namespace torchutil::cupti
