#include "libtorch/KernelTracing.h"

#include <c10/util/Exception.h>

#include <unordered_map>
#include <utility>
#include <vector>

#include "core/TraceStages.h"
#include "libtorch/Devices.h"

namespace torchutil {

KernelTracing::KernelTracing(c10::Device device, TraceHooks hooks, Correlation how)
    : device_(device), how_(how), hooks_(hooks) {}

KernelTracing::~KernelTracing() = default;

std::unique_ptr<KernelTracing> KernelTracing::start(c10::Device device, std::string* why,
                                                    TraceBackend& backend, Correlation how,
                                                    bool recordFromStart) {
  *why = backend.unavailableReason(hwDevice(device));
  if (!why->empty()) {
    return nullptr;
  }
  try {
    std::unique_ptr<KernelTracing> tracing(new KernelTracing(device, backend.hooks(), how));
    {
      TraceStageTimer t(TraceStage::Sync);
      synchronizeDevice(device);
    }
    {
      TraceStageTimer t(TraceStage::Start);
      tracing->trace_ = backend.start(why, how);
    }
    if (!tracing->trace_) {
      return nullptr;
    }
    if (recordFromStart) {
      tracing->trace_->recordFromNow();  // a no-op for traces that record from their start
    }
    tracing->begin_ = tracing->hooks_.clock();
    return tracing;
  } catch (const c10::Error& e) {
    *why = e.what_without_backtrace();
    return nullptr;
  }
}

void KernelTracing::countedDone() {
  {
    TraceStageTimer t(TraceStage::Sync);
    synchronizeDevice(device_);
  }
  trace_->stopCorrelating();
  countedEnd_ = hooks_.clock();
}

void KernelTracing::timedStart() {
  {
    TraceStageTimer t(TraceStage::RecordsOn);
    trace_->recordFromNow();
  }
  timedBegin_ = hooks_.clock();
}

FinishedTrace KernelTracing::finish(std::vector<KernelRecord>* counted,
                                    std::vector<KernelRecord>* timed, int64_t forwards) {
  {
    TraceStageTimer t(TraceStage::Sync);
    synchronizeDevice(device_);
  }
  std::vector<KernelRecord> all;
  std::unordered_map<uint32_t, uint64_t> external;
  GraphNodeOps nodes;
  CapturedForward captured;
  {
    TraceStageTimer t(TraceStage::Flush);
    trace_->flush();
    all = trace_->takeKernels();
    external = trace_->takeExternalIds();  // after takeKernels (ActivityTrace)
    nodes = trace_->takeGraphNodes();
    captured = trace_->takeCapturedForward();
    dropped_ = trace_->dropped();
  }
  {
    TraceStageTimer t(TraceStage::Release);
    trace_.reset();  // releases the backend now, not at the end of the call
  }
  TraceStageTimer t(TraceStage::Attribute);
  const bool graph = how_ == Correlation::GraphNodes || how_ == Correlation::CaptureNodes;
  for (KernelRecord& k : all) {
    // With graph nodes the counted forward ran nothing (it was captured): what ran before the
    // traced replays is warm-up.
    if (!graph && k.startNs >= begin_ && k.startNs < countedEnd_) {
      counted->push_back(std::move(k));
    } else if (timedBegin_ != 0 && k.startNs >= timedBegin_) {
      k.timed = true;
      timed->push_back(std::move(k));
    }
  }
  FinishedTrace out;
  if (!graph) {
    attributeCounted(*counted, external);
    out.ops = attributeByPosition(*counted, *timed, forwards) ? TracedOps::ByPosition
                                                              : TracedOps::CountedOnly;
    return out;
  }
  out.ops = TracedOps::Unattributed;
  if (timed->empty()) {
    out.problem = "the traced forwards left no record";
  } else if (how_ == Correlation::GraphNodes) {
    if (attributeByGraphNodes(*timed, nodes, forwards, &out.problem)) {
      out.ops = TracedOps::ByGraphNodes;
    }
  } else if (!captured.complete) {
    out.problem = "a query of the capture's nodes failed";
  } else if (const std::vector<KernelRecord> sequence = capturedSequence(captured);
             attributeByPosition(sequence, *timed, forwards)) {
    out.ops = TracedOps::ByPosition;
  } else {
    out.problem = "the traced forwards' " + std::to_string(timed->size()) +
                  " records do not repeat the captured sequence of " +
                  std::to_string(sequence.size()) + " nodes " + std::to_string(forwards) +
                  " time(s)";
  }
  return out;
}

}  // namespace torchutil
