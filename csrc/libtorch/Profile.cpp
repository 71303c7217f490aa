#include "libtorch/Profile.h"

#include <c10/core/InferenceMode.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "core/CompiledAttribution.h"
#include "core/ErrorText.h"
#include "core/HwResult.h"
#include "core/Metrics.h"
#include "core/NotANumber.h"
#include "core/OpTimes.h"
#include "libtorch/CounterReading.h"
#include "libtorch/Forward.h"
#include "libtorch/KernelTracing.h"
#include "libtorch/OpCounter.h"
#include "libtorch/ProfileInputs.h"
#include "libtorch/ProfilePhases.h"
#include "libtorch/ProfileSummary.h"
#include "libtorch/ValueErrors.h"

namespace torchutil {
namespace {

// One profile call: the route planned before anything runs (core/ProfilePlan.h), walked step
// by step. A step the hardware or the forward refuses goes on with the plan's fallback
// (refuse()); the run keeps no route flags of its own. Each step is timed into a phase
// (phase_*_seconds); docs/architecture.md describes them.
class ProfileRun {
 public:
  ProfileRun(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
             const ProfileOptions& options)
      : start_(Clock::now()), inputs_(inputs), o_(options), device_(checkInputs(inputs)) {
    // The options were checked once, where they were parsed (core/Options.h: parseOptions).
    shared_ = shareCapturesWithThreads(sharedGpu());
    TORCH_CHECK(!OpCounter::active(),
                "torchutil: a profile is already counting on this thread; profiles cannot be "
                "nested (finish the outer torchutil.profile / torchutil.Profiler first)");
    batch_ = batchOf(inputs, o_.batchSize);
    forward_ = makeForward(model);
    if (auto paramDevice = forward_->parameterDevice()) {
      TORCH_CHECK_VALUE(*paramDevice == device_, "torchutil: the input is on ", device_.str(),
                        " but the model's parameters are on ", paramDevice->str(),
                        "; move one of them (model.to(x.device))");
    }
    if (o_.timing == TimingMode::CudaGraph) {
      TORCH_CHECK_VALUE(device_.is_cuda(), "torchutil: timing='cuda_graph' needs CUDA inputs, got ",
                        device_.str());
    }
    plan_ = planProfile(planInputsOf(o_, device_, *forward_));
    cpuTimes_ = o_.trace && device_.is_cpu();  // per-op wall time on a CPU (core/OpTimes.h)
    side_ = plan_.onCaptureStream ? captureStream(device_, plan_.mode, o_.env.keepCapturePools)
                                  : std::nullopt;
    lock_ = std::make_unique<GpuLock>(o_.gpuLock, &out_.phases.wait);
  }

  ProfileOutput run() {
    c10::InferenceMode inference;
    if (plan_.traces) {
      forward_->recordGeneratedKernels();  // the warm-ups compile torch.compile'd code
    }
    for (Step step = Step::WarmUp; step != Step::Assemble; step = plan_.next(step)) {
      if (plan_.holdsGpuLock(step)) {
        lock_->hold();
      } else {
        lock_->release();
      }
      switch (step) {
        case Step::WarmUp: warmUp(); break;
        case Step::CountInCapture:
          if (plan_.counted == Counted::InTimedCapture) {
            countInTimedCapture();
          } else {
            countInThrowawayCapture();
          }
          break;
        case Step::CountEagerly: countEagerly(); break;
        case Step::CaptureForTiming: captureForTiming(); break;
        case Step::TraceForwards: traceForwards(); break;
        case Step::TimeForwards: timeForwards(); break;
        case Step::MeasureEnergy: measureEnergy(); break;
        case Step::ReadCounters: readCounters(); break;
        case Step::Assemble: break;
      }
      if (counted_ && !eager_ && (step == Step::CountInCapture || step == Step::CountEagerly)) {
        countEagerSelf();
      }
    }
    lock_->release();
    return assemble();
  }

 private:
  // A step refused: the run goes on with the plan's fallback, or fails where timing=
  // "cuda_graph" cannot take it.
  void refuse(Refusal refusal, const std::string& why) {
    plan_ = plan_.after(refusal, why);
    if (!plan_.failure.empty()) {
      if (plan_.failsAsValueError) {
        TORCH_CHECK_VALUE(false, plan_.failure);
      }
      TORCH_CHECK(false, plan_.failure);
    }
  }

  bool sharedGpu() const { return o_.gpuLock.has_value() && device_.is_cuda(); }

  // Plain forwards, so that lazy initialization and torch.compile's compile stay out of the
  // count; with graph timing on the capture's stream, as its warm-up. The timeline's sampling
  // interval is chosen from one forward timed alone: the last of these, or the counted one.
  void warmUp() {
    PhaseTimer t(&out_.phases.warmup);
    const int64_t plain = plan_.plainWarmups;
    c10::OptionalStreamGuard onSide(side_);
    for (int64_t i = 0; i < plain; ++i) {
      if (plan_.probe == IntervalProbe::LastWarmUp && i == plain - 1) {
        timeOne();
      } else {
        forward_->run(inputs_);
      }
      checkInterrupt();
    }
  }

  void timeOne() {
    synchronizeDevice(device_);
    const auto t0 = Clock::now();
    forward_->run(inputs_);
    synchronizeDevice(device_);
    forwardSeconds_ = secondsSince(t0);
  }

  // Counts one forward, naming each op's module where the plan says.
  void countedForward(const std::function<void()>& forward) {
    std::unique_ptr<Forward::ModuleScope> modules =
        plan_.namesModules ? forward_->trackModules() : nullptr;
    CountingScope counting(tracing_ ? tracing_->hooks() : cpuTimes_ ? cpuOpClock() : nullptr);
    forward();
    counted_ = counting.finish();
    if (modules) {
      modules->close();
    }
  }

  // A forward that ran torch.compile'd code is counted again as its eager self (Forward::
  // runEager), with its module paths: Inductor's generated kernels run ops the dispatcher never
  // sees. The compiled forward's count stays, for the kernels its trace attributed to its ops
  // (shareOntoEagerRows). Synchronized, so that no kernel of it falls in the traced forwards.
  void countEagerSelf() {
    if (counted_->compiledRegions == 0 && !forward_->compiled()) {
      return;
    }
    PhaseTimer t(&out_.phases.count);
    lock_->hold();  // it runs on the GPU; the next step's hold or release follows the plan
    c10::OptionalStreamGuard onSide(side_);
    std::unique_ptr<Forward::ModuleScope> modules =
        o_.modulePaths ? forward_->trackModules() : nullptr;
    CountingScope counting(cpuOpClock());  // its op events, for the kernels' sharing
    forward_->runEager(inputs_);
    eager_ = counting.finish();
    if (modules) {
      modules->close();
    }
    synchronizeDevice(device_);
  }

  // Starts the kernel trace (phases.trace) as the plan correlates it: false, with the status
  // and *why saying why not.
  bool startTrace(std::string* why) {
    PhaseTimer t(&out_.phases.trace);
    tracing_ = KernelTracing::start(device_, why, traceBackend(o_.backends), plan_.correlation,
                                    o_.env.recordCapture);
    if (!tracing_) {
      out_.traceStatus = "off: " + *why;
      return false;
    }
    out_.traceStatus = "on" + plan_.traceNote;
    // Detached when the trace ends where asked (TORCHUTIL_CUPTI_TEARDOWN=1), so that the timed
    // forwards and the caller's own work after the call run as if nothing had traced them; the
    // counters' passes after the timed forwards want CUPTI.
    tracing_->detachWhenDone(plan_.detachAfterTrace);
    return true;
  }

  // The trace of a counting step, or the status that says why there is none; false when the
  // trace was refused.
  bool traceCount(Refusal refusal) {
    if (!plan_.traces) {
      out_.traceStatus = "off: " + plan_.traceOff;
      return true;
    }
    std::string why;
    if (startTrace(&why)) {
      return true;
    }
    refuse(refusal, why);
    return false;
  }

  // The counted forward, eager (on the capture's stream under graph timing), traced when the
  // plan traces, its launches correlated with the ops that made them.
  void countEagerly() {
    traceCount(Refusal::Trace);
    PhaseTimer t(&out_.phases.count);
    c10::OptionalStreamGuard onSide(side_);
    countedForward([&] {
      if (plan_.probe == IntervalProbe::CountedForward) {
        timeOne();
      } else {
        forward_->run(inputs_);
      }
    });
    if (tracing_) {
      tracing_->countedDone();
    }
  }

  // Graph timing: the capture whose replays are timed counts its forward, traced with graph or
  // capture nodes (the trace starts before it).
  void countInTimedCapture() {
    if (!traceCount(Refusal::GraphTrace)) {
      return;
    }
    if (!capture(/*counting=*/true)) {
      tracing_.reset();  // the eager counted forward is traced afresh
      return;
    }
    if (tracing_) {
      tracing_->countedDone();  // the graph is instantiated: its nodes are known
    }
  }

  // Eager timing with capture nodes: the count is a capture never replayed, whose nodes the
  // traced eager forwards are attributed against.
  void countInThrowawayCapture() {
    if (!traceCount(Refusal::Throwaway)) {
      return;
    }
    const std::optional<c10::Stream> stream =
        captureStream(device_, TimingMode::Auto, o_.env.keepCapturePools);
    PhaseTimer t(&out_.phases.count);
    std::string failure;
    const bool captured =
        stream.has_value() && captureWithoutReplay(
                                  [&] {
                                    tracing_->captureBegins(*stream);
                                    countedForward([&] { forward_->run(inputs_); });
                                    tracing_->captureEnds();
                                  },
                                  device_, *stream, sharedGpu(), o_.env.keepCapturePools, &failure);
    if (!captured) {
      counted_.reset();
      tracing_.reset();
      refuse(Refusal::Throwaway, failure);
      return;
    }
    tracing_->countedDone();
  }

  // Graph timing after an eager count: a capture holds this thread's stream only, so a forward
  // that ran ops on other threads (torch.jit.fork) is timed eagerly.
  void captureForTiming() {
    if (counted_->otherThreads > 0) {
      refuse(Refusal::Forked, std::to_string(counted_->otherThreads));
      return;
    }
    capture(/*counting=*/false);
  }

  // Captures the forward on the side stream, counting it when `counting`; false when the
  // capture failed (the plan's fallback then times eagerly, or the call fails).
  bool capture(bool counting) {
    PhaseTimer t(&out_.phases.capture);
    const std::function<void()> forward = [&] {
      if (counting) {
        if (tracing_) {
          tracing_->captureBegins(*side_);  // capture nodes: the capture is on
        }
        countedForward([&] { forward_->run(inputs_); });
        if (tracing_) {
          tracing_->captureEnds();  // still capturing: its nodes are read now
        }
      } else {
        forward_->run(inputs_);
      }
    };
    // A capture that counts is the call's first forward on the stream when warmup <= 1: a
    // failed one gets one eager warm-up before its second try. Otherwise the counted forward
    // ran on the stream already.
    const std::function<void()> warmUp = [&] {
      lock_->hold();
      forward_->run(inputs_);
      synchronizeDevice(device_);
      lock_->release();
    };
    Capture c = captureForward(forward, counting ? warmUp : std::function<void()>(), device_,
                               *side_, sharedGpu(), o_.env.keepCapturePools);
    if (c.runner) {
      runner_ = std::move(c.runner);
      return true;
    }
    if (counting) {
      counted_.reset();  // a count inside a failed capture may be partial: counted again
    }
    // The note is one line; the whole error (a Python traceback, say) is the note's detail, and
    // the error of timing="cuda_graph".
    out_.timingNoteDetail = c.failure;
    refuse(Refusal::Capture,
           plan_.mode == TimingMode::CudaGraph ? c.failure : errorHeadline(c.failure));
    return false;
  }

  // The graph's warm-up replays (the first uploads it), then the traced forwards, with PM
  // sampling around them where the timeline samples there. The trace ends before the timed
  // forwards, which run without CUPTI.
  void traceForwards() {
    TORCH_INTERNAL_ASSERT((tracing_ != nullptr) == plan_.traces,
                          "torchutil: the trace and the plan disagree");
    if (!runner_) {
      runner_ = eagerRunner(*forward_, inputs_, device_);
    }
    counters_ =
        std::make_unique<CounterReading>(device_, o_.counters, tracing_ != nullptr, o_.pmIntervalNs,
                                         o_.counterReplay, counterBackend(o_.backends));
    {
      PhaseTimer t(&out_.phases.time);
      runForwards(*runner_, device_, plan_.graphWarmUpReplays);
    }
    if (!tracing_) {
      return;
    }
    PhaseTimer t(&out_.phases.trace);
    const bool sample = plan_.timeline == TimelineWindow::TracedForwards;
    if (sample) {
      counters_->startTimeline(forwardSeconds_ * static_cast<double>(plan_.tracedForwards));
    }
    tracing_->timedStart();
    runForwards(*runner_, device_, plan_.tracedForwards);
    traced_ = tracing_->finish(&countedKernels_, &timedKernels_, plan_.tracedForwards);
    if (traced_.ops == TracedOps::Unattributed) {
      out_.traceStatus = "on, unattributed: " + traced_.problem;
    }
    if (sample) {
      counters_->stopTimeline();
    }
  }

  void timeForwards() {
    {
      PhaseTimer t(&out_.phases.time);
      timing_ = torchutil::timeForwards(*runner_, device_, o_.repeat, o_.env.idleBeforeTimingUs);
    }
    // The timeline when nothing is traced: forwards after the timed ones are sampled (the
    // sampler's buffer holds a few thousand samples, not a whole timing).
    if (plan_.timeline == TimelineWindow::AfterTimedForwards && counters_->wantsTimeline()) {
      PhaseTimer t(&out_.phases.counters);
      const int64_t sampled = std::max<int64_t>(o_.traceForwards, 1);
      synchronizeDevice(device_);
      counters_->startTimeline(forwardSeconds_ * static_cast<double>(sampled));
      runForwards(*runner_, device_, sampled);
      counters_->stopTimeline();
    }
  }

  // Energy per forward (energy=True): windows of the forwards as they were timed, after them and
  // before the counters' passes, under the same gpu_lock.
  void measureEnergy() {
    PhaseTimer t(&out_.phases.energy);
    out_.energy = torchutil::measureEnergy(*runner_, device_, o_.energyPlan,
                                           plan_.replays ? "graph replays" : "eager forwards",
                                           energyBackend(o_.backends), timing_.interval.median);
  }

  // The range profiler's passes: each user-replay pass is one more eager forward, waited for
  // (kernel replay: one in all).
  void readCounters() {
    PhaseTimer t(&out_.phases.counters);
    counters_->readRanges(
        [&] {
          forward_->run(inputs_);
          synchronizeDevice(device_);
        },
        countedKernels_.size() + 64);
  }

  ProfileOutput assemble() {
    auto t = std::make_unique<PhaseTimer>(&out_.phases.assemble);
    TORCH_INTERNAL_ASSERT(counted_.has_value(),
                          "torchutil: a profile reached its summary without a count");
    CountTable& table = eager_ ? eager_->table : counted_->table;
    const bool onMeta = device_.is_meta();
    Forward::Unseen unseen = forward_->unseenWork(inputs_);
    countUnseenCalls(unseen.calls, FormulaRegistry::global(), &table);
    out_.flopsNote = std::move(unseen.uncounted);
    if (tracing_) {
      if (tracing_->dropped() > 0) {
        out_.traceStatus =
            "on, incomplete: CUPTI dropped " + std::to_string(tracing_->dropped()) + " records";
      }
      tracing_.reset();
      out_.trace = summarizeTrace(countedKernels_, timedKernels_, plan_.tracedForwards,
                                  traced_.perOpFromTraced(), counted_->events,
                                  counted_->table.rows().size());
      if (eager_) {
        out_.generated =
            tieCompiledTrace(&out_.trace, counted_->events, counted_->table.rows(), table.rows(),
                             eager_->events, countedKernels_, timedKernels_, plan_.tracedForwards,
                             forward_->generatedKernels(), &out_.traceStatus);
      }
      out_.traced = true;
      out_.kernels = std::move(countedKernels_);
      out_.kernels.insert(out_.kernels.end(), std::make_move_iterator(timedKernels_.begin()),
                          std::make_move_iterator(timedKernels_.end()));
      out_.events = std::move(counted_->events);
    } else if (cpuTimes_) {
      out_.cpuOpTimes = cpuOpSeconds(counted_->events, table.rows().size());
      out_.events = std::move(counted_->events);
    }
    if (counters_) {
      out_.countersStatus = counters_->finish(out_.kernels, out_.events, &out_.hw);
      out_.countersNotOnGpu = counters_->notOnGpu();
    } else if (!o_.counters.empty()) {
      out_.countersStatus = "off: nothing runs on the meta device";
    }
    if ((out_.traced || cpuTimes_) && o_.chromeTrace) {
      out_.chromeTrace = chromeTrace(out_.events, table.rows(), out_.kernels, deviceName(device_),
                                     hw::counterTracks(out_.hw));
    }
    out_.peak = peakForCount(device_, table, o_.peak, o_.peakFlops);
    out_.bandwidth = bandwidthOf(device_);
    SummaryInputs s = summaryBase(table, out_, batch_);
    s.secondsPerForward = onMeta ? kNaN : timing_.interval.median;
    s.secondsInterval = onMeta ? MedianInterval{kNaN, kNaN, kNaN} : timing_.interval;
    s.iterations = static_cast<int64_t>(timing_.seconds.size());
    s.cudaGraph = plan_.replays;
    s.trace = out_.traced ? &out_.trace : nullptr;
    s.tracedForwards = out_.traced ? o_.traceForwards : 0;
    if (o_.energy && onMeta) {
      out_.energy.text = "off: nothing runs on the meta device";
    }
    s.energy = o_.energy ? &out_.energy.result : nullptr;
    out_.model = forward_->modelFacts();
    s.params = out_.model.params;
    s.flopsUnknown = !out_.flopsNote.empty();
    out_.summary = summarize(s);
    hw::fillSummary(out_.summary, out_.hw, static_cast<double>(s.totals.matrixFlops));
    hw::markUncountedTensorWork(out_.summary, &out_.countersStatus, out_.hw, table.rows());
    out_.table = std::move(table);
    out_.timingMode =
        onMeta ? "none" : timingModeName(plan_.replays ? TimingMode::CudaGraph : TimingMode::Eager);
    out_.timingNote = plan_.timingNote;
    out_.repetition = timing_.stop;
    out_.device = device_.str();
    t.reset();
    out_.phases.call = secondsSince(start_);
    setPhases(out_.summary, out_.phases);
    return std::move(out_);
  }

  Clock::time_point start_;
  const std::vector<at::Tensor>& inputs_;
  const ProfileOptions& o_;
  c10::Device device_;
  std::shared_ptr<void> shared_;  // shareCapturesWithThreads, outliving the CUDA objects below
  int64_t batch_ = 0;
  std::unique_ptr<Forward> forward_;
  ProfilePlan plan_;
  std::optional<c10::Stream> side_;  // the capture's stream (plan_.onCaptureStream)
  std::unique_ptr<GpuLock> lock_;
  double forwardSeconds_ = 0;
  std::optional<CountResult> counted_;
  std::optional<CountResult> eager_;  // a compiled forward's eager count (countEagerSelf)
  bool cpuTimes_ = false;             // per-op wall time on a CPU
  std::unique_ptr<KernelTracing> tracing_;
  FinishedTrace traced_;
  std::unique_ptr<CounterReading> counters_;
  std::unique_ptr<Runner> runner_;
  std::vector<KernelRecord> countedKernels_, timedKernels_;
  RepeatResult timing_;
  ProfileOutput out_;
};

}  // namespace

ProfileOutput profileModel(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
                           const ProfileOptions& options) {
  try {
    return ProfileRun(model, inputs, options).run();
  } catch (const std::exception& e) {
    // torch's own refusal of an op that cannot run in inference mode, where every forward of a
    // profile runs: torch.mm(dense, sparse COO) raises it in torch.inference_mode() alone.
    constexpr std::string_view kInferenceOnly = "Cannot set version_counter for inference tensor";
    if (std::string_view(e.what()).find(kInferenceOnly) == std::string_view::npos) {
      throw;
    }
    TORCH_CHECK(false,
                "torchutil: the model cannot run in inference mode, where a profile runs "
                "it: torch raised '",
                kInferenceOnly,
                "' (torch.mm(dense, sparse COO) does "
                "so in torch.inference_mode() alone, transposing the COO matrix; keep it "
                "as CSR, S.to_sparse_csr(), or count it with torchutil.Profiler under "
                "torch.no_grad())");
  }
}

}  // namespace torchutil
