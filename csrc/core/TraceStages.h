#pragma once
// Where a kernel trace's host time goes, stage by stage, summed over every trace in the process
// since the last take (benchmarks/trace_cost.py reads it through torchutil._C._trace_stages).
// A stage costs two clock reads; the sums are atomics, so traces on several threads add up.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace torchutil {

enum class TraceStage : uint8_t {
  Start,      // the backend's start: CUPTI's callbacks registered, records enabled, correlation
  Sync,       // the tracer's own device synchronizations (start, counted, finish)
  Query,      // capture nodes: one node-count query at a change of the innermost op
  ReadNodes,  // capture nodes: the capture's nodes read at its end (kinds, kernel names)
  RecordsOn,  // capture nodes: the kernel records enabled before the traced forwards
  Flush,      // the buffers flushed and decoded after the traced forwards
  Attribute,  // the records split and attributed to ops
  Release,    // records disabled, buffers flushed again, the trace released
  kCount
};

const char* traceStageName(TraceStage stage);
void addTraceStage(TraceStage stage, uint64_t ns);

struct TraceStageTotal {
  std::string stage;
  uint64_t times = 0;  // how many times it ran
  double seconds = 0;  // in all
};
// Every stage's sum since the last take, in enum order; the sums start again from zero.
std::vector<TraceStageTotal> takeTraceStages();

// Adds its scope's wall time to one stage.
class TraceStageTimer {
 public:
  explicit TraceStageTimer(TraceStage stage)
      : stage_(stage), t0_(std::chrono::steady_clock::now()) {}
  ~TraceStageTimer() {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - t0_);
    addTraceStage(stage_, static_cast<uint64_t>(ns.count()));
  }
  TraceStageTimer(const TraceStageTimer&) = delete;
  TraceStageTimer& operator=(const TraceStageTimer&) = delete;

 private:
  TraceStage stage_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace torchutil
