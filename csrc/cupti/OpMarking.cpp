#include "cupti/OpMarking.h"

#include "core/TraceStages.h"

namespace torchutil::cupti {

void OpMarking::open(Correlation how, MarkingCuda* cuda) {
  how_ = how;
  cuda_ = cuda;
  owner_ = std::this_thread::get_id();
  issued_.clear();
  open_.clear();
  current_ = 0;
  nodes_ = GraphNodeOps();
  captureStream_ = nullptr;
  captureGraph_ = nullptr;
  captured_ = CapturedForward();
  on_ = true;
}

// A change only where the innermost open op changes: the ops nested in a counted op push its id
// again (CountSession::attributionEvent) and leave nothing.
void OpMarking::push(uint64_t id) {
  if (!owns()) {
    return;
  }
  open_.push_back(id);
  if (id != current_) {
    changeTo(id);
  }
}

void OpMarking::pop() {
  if (!owns() || open_.empty()) {
    return;
  }
  open_.pop_back();
  const uint64_t next = open_.empty() ? 0 : open_.back();
  if (next != current_) {
    changeTo(next);
  }
}

void OpMarking::changeTo(uint64_t id) {
  if (how_ == Correlation::Markers) {
    // A marker CUDA refused is not issued: the op's kernels go to the marker before it, and the
    // next change tries again.
    if (cuda_->issueMarker()) {
      issued_.push_back(id);
      current_ = id;
    }
  } else if (how_ == Correlation::CaptureNodes) {
    current_ = id;
    noteNodeCount();
  }
}

// One query per change (the node count): a resnet50 b1 forward makes 467 changes, 0.5-0.6 ms of
// queries on an H200 host (the "query" stage of torchutil._C._trace_stages,
// benchmarks/trace_cost.py); the graph was asked for when the capture began.
void OpMarking::noteNodeCount() {
  if (captureStream_ == nullptr) {
    return;  // before the capture began: nothing to attribute
  }
  TraceStageTimer t(TraceStage::Query);
  size_t count = 0;
  if (captureGraph_ == nullptr || !cuda_->nodeCount(captureGraph_, &count)) {
    captured_.complete = false;
    return;
  }
  captured_.opChanges.emplace_back(count, current_);
}

void OpMarking::captureBegins(void* stream) {
  if (how_ != Correlation::CaptureNodes || !owns()) {
    return;
  }
  captureStream_ = stream;
  captured_ = CapturedForward();
  captureGraph_ = cuda_->capturingGraph(stream);
  if (captureGraph_ == nullptr) {
    captured_.complete = false;
  }
  noteNodeCount();  // the op open when the capture begins (none, in a profile)
}

void OpMarking::captureEnds() {
  if (how_ != Correlation::CaptureNodes || !owns() || captureStream_ == nullptr) {
    return;
  }
  {
    TraceStageTimer t(TraceStage::ReadNodes);
    if (captureGraph_ == nullptr || !cuda_->nodes(captureGraph_, &captured_.nodes)) {
      captured_.complete = false;
    }
  }
  captureStream_ = nullptr;
  captureGraph_ = nullptr;
}

void OpMarking::nodeCreated(uint64_t node) {
  if (how_ == Correlation::GraphNodes && owns()) {
    nodes_.created.emplace(node, open_.empty() ? 0 : open_.back());
  }
}

void OpMarking::nodeCloned(uint64_t node, uint64_t original) {
  if (how_ == Correlation::GraphNodes && owns()) {
    nodes_.cloned[node] = original;
  }
}

}  // namespace torchutil::cupti
