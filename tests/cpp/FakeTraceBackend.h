#pragma once
// A TraceBackend fed hand-built records, for tests of the tracing orchestration without a GPU
// (as kineto's MockCuptiActivities builds kernel records by hand): the kernel records a trace
// returns with the external ids of their launches, dropped records, a refused start, a reason not
// to start. With kernelPerOp it is a GPU that runs one kernel for each innermost op the counted
// forward pushes, attributed to it as CUPTI's external correlation would.
//
// Its clock advances 1 us at every reading, so that every boundary KernelTracing takes (start,
// counted forward done, traced forwards start) is a distinct, known time. The hooks are plain
// functions (TraceHooks), so they reach the fake that is tracing through a static: one trace at
// a time, as with CUPTI.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "TraceTestData.h"
#include "core/HardwareBackends.h"

namespace torchutil::testing {

class FakeTraceBackend final : public TraceBackend {
 public:
  // ---- What the fake reports ----
  std::string unavailable;                             // unavailableReason()'s answer
  std::string refusal;                                 // when set, start() fails with it
  std::vector<KernelRecord> kernels;                   // the records a trace returns
  std::unordered_map<uint32_t, uint64_t> externalIds;  // correlation id -> external id
  uint64_t dropped = 0;                                // records the trace lost
  GraphNodeOps graphNodes;                             // Correlation::GraphNodes' answer
  CapturedForward captured;                            // Correlation::CaptureNodes' answer
  void* captureStream = nullptr;                       // what captureBegins was given
  int captureEnds = 0;
  bool kernelPerOp = false;  // see the header comment

  // ---- What happened ----
  int traces = 0;  // started
  int alive = 0;   // started and not released
  int flushes = 0;
  int recordsTurnedOn = 0;  // recordFromNow() calls
  bool correlating = false;
  Correlation correlation = Correlation::ApiRecords;  // how the last start() was asked to correlate
  std::vector<uint64_t> pushed;                       // external ids, in push order
  int popped = 0;
  std::vector<KernelRecord> launched;  // kernelPerOp's kernels

  ~FakeTraceBackend() override {
    if (tracing() == this) {
      tracing() = nullptr;
    }
  }

  // The clock's next reading (1 us after the last one).
  static uint64_t tick() { return now() += 1000; }
  static uint64_t& now() {
    static uint64_t ns = 1000000;
    return ns;
  }

  std::string unavailableReason(const HwDevice&) const override { return unavailable; }

  std::unique_ptr<ActivityTrace> start(std::string* why, Correlation how) override {
    correlation = how;
    if (!refusal.empty()) {
      *why = refusal;
      return nullptr;
    }
    return std::make_unique<Trace>(*this);
  }

  TraceHooks hooks() const override {
    TraceHooks h;
    h.clock = &tick;
    h.push = &push;
    h.pop = &pop;
    return h;
  }

 private:
  class Trace final : public ActivityTrace {
   public:
    explicit Trace(FakeTraceBackend& b) : b_(b) {
      b_.traces += 1;
      b_.alive += 1;
      b_.correlating = true;
      tracing() = &b_;
    }
    ~Trace() override {
      b_.alive -= 1;
      b_.correlating = false;
      tracing() = nullptr;
    }
    void stopCorrelating() override { b_.correlating = false; }
    void flush() override { b_.flushes += 1; }
    std::vector<KernelRecord> takeKernels() override {
      std::vector<KernelRecord> all = std::exchange(b_.kernels, {});
      all.insert(all.end(), b_.launched.begin(), b_.launched.end());
      return all;
    }
    std::unordered_map<uint32_t, uint64_t> takeExternalIds() override {
      return std::exchange(b_.externalIds, {});
    }
    GraphNodeOps takeGraphNodes() override { return std::exchange(b_.graphNodes, {}); }
    void captureBegins(void* stream) override { b_.captureStream = stream; }
    void captureEnds() override { b_.captureEnds += 1; }
    void recordFromNow() override { b_.recordsTurnedOn += 1; }
    CapturedForward takeCapturedForward() override { return std::exchange(b_.captured, {}); }
    uint64_t dropped() const override { return b_.dropped; }

   private:
    FakeTraceBackend& b_;
  };

  struct OpenOp {
    uint64_t externalId;
    bool launchedInside = false;  // a nested op pushed: this op launches nothing itself
  };

  static FakeTraceBackend*& tracing() {
    static FakeTraceBackend* active = nullptr;
    return active;
  }

  static void push(uint64_t externalId) {
    FakeTraceBackend* b = tracing();
    if (b == nullptr || !b->correlating) {
      return;
    }
    b->pushed.push_back(externalId);
    if (!b->open_.empty()) {
      b->open_.back().launchedInside = true;
    }
    b->open_.push_back(OpenOp{externalId});
  }

  static void pop() {
    FakeTraceBackend* b = tracing();
    if (b == nullptr || b->open_.empty()) {
      return;
    }
    b->popped += 1;
    const OpenOp op = b->open_.back();
    b->open_.pop_back();
    if (b->kernelPerOp && !op.launchedInside) {
      const auto correlation = static_cast<uint32_t>(1000 + b->launched.size());
      const uint64_t start = tick();
      b->launched.push_back(testdata::kernel("kernel_of_event_" + std::to_string(op.externalId - 1),
                                             start, start + 500, correlation));
      b->externalIds[correlation] = op.externalId;
    }
  }

  std::vector<OpenOp> open_;
};

}  // namespace torchutil::testing
