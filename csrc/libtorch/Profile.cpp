#include "libtorch/Profile.h"

#include <c10/core/InferenceMode.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "core/CompiledAttribution.h"
#include "core/ErrorText.h"
#include "core/FileLock.h"
#include "core/HwResult.h"
#include "core/Metrics.h"
#include "core/OpTimes.h"
#include "libtorch/CounterReading.h"
#include "libtorch/Forward.h"
#include "libtorch/KernelTracing.h"
#include "libtorch/OpCounter.h"
#include "libtorch/ProfileInputs.h"
#include "libtorch/ValueErrors.h"

namespace torchutil {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t eventClockNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// Adds the wall time of its scope to one phase.
class PhaseTimer {
 public:
  explicit PhaseTimer(double* phase) : phase_(phase), start_(Clock::now()) {}
  ~PhaseTimer() { *phase_ += secondsSince(start_); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double* phase_;
  Clock::time_point start_;
};

// The memory bandwidth a result is measured against; none on the meta device.
Bandwidth bandwidthOf(c10::Device device) {
  if (device.is_meta()) {
    return {kNaN, "none: nothing runs on the meta device"};
  }
  return deviceBandwidth(device, RateSource::Auto);
}

// The summary inputs every result shares: its count, peak, bandwidth and batch.
SummaryInputs summaryBase(const CountTable& table, const ProfileOutput& out, int64_t batchSize) {
  SummaryInputs s;
  s.totals = table.totals();
  s.peakFlopsPerSecond = out.peak.flopsPerSecond;
  s.peakBytesPerSecond = out.bandwidth.bytesPerSecond;
  s.batchSize = batchSize;
  return s;
}

void setPhases(std::vector<double>& summary, const PhaseSeconds& p) {
  const auto set = [&](Field f, double v) { summary[static_cast<size_t>(f)] = v; };
  set(Field::call_seconds, p.call);
  set(Field::phase_warmup_seconds, p.warmup);
  set(Field::phase_count_seconds, p.count);
  set(Field::phase_capture_seconds, p.capture);
  set(Field::phase_trace_seconds, p.trace);
  set(Field::phase_time_seconds, p.time);
  set(Field::phase_counters_seconds, p.counters);
  set(Field::phase_wait_seconds, p.wait);
  set(Field::phase_assemble_seconds, p.assemble);
}

// gpu_lock: held by every phase that runs work on the GPU; waiting for it is a phase of its own.
class GpuLock {
 public:
  GpuLock(const std::optional<std::string>& path, double* wait) : wait_(wait) {
    if (path.has_value()) {
      lock_ = valueErrors([&] { return std::make_unique<FileLock>(*path); });
    }
  }
  void hold() {
    if (lock_ && !lock_->held()) {
      PhaseTimer t(wait_);
      valueErrors([&] { lock_->lock(); });
    }
  }
  void release() {
    if (lock_) {
      lock_->unlock();
    }
  }

 private:
  std::unique_ptr<FileLock> lock_;
  double* wait_;
};

// One profile call, phase by phase. The phases run in this order: warm-up (plain forwards),
// count (the counted forward; traced when tracing), capture (graph timing: the capture, which
// is the counted forward itself when nothing is traced), trace (the traced forwards), time
// (graph warm-up replays, then the timed forwards), counters (hardware counters after the
// timed forwards), assemble. docs/architecture.md describes each.
class ProfileRun {
 public:
  ProfileRun(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
             const ProfileOptions& options)
      : start_(Clock::now()), inputs_(inputs), o_(options), device_(checkInputs(inputs)) {
    shared_ = shareCapturesWithThreads(sharedGpu());
    valueErrors([&] { checkRepeatPolicy(o_.repeat); });
    checkForwardCount("warmup", o_.warmup);
    checkForwardCount("trace_forwards", o_.traceForwards);
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
    mode_ = o_.timing.value_or(device_.is_cuda() ? TimingMode::Auto : TimingMode::Eager);
    if (mode_ == TimingMode::CudaGraph) {
      TORCH_CHECK_VALUE(device_.is_cuda(), "torchutil: timing='cuda_graph' needs CUDA inputs, got ",
                        device_.str());
    }
    checkPeakOverride(o_.peakFlops);
    compiled_ = forward_->compiled();
    onMeta_ = device_.is_meta();
    traces_ = o_.trace && device_.is_cuda();
    cpuTimes_ = o_.trace && device_.is_cpu();  // per-op wall time on a CPU (core/OpTimes.h)
    side_ = captureStream(device_, mode_);
    // Untraced graph timing counts the capture's forward: one host forward fewer. So does a
    // traced one that correlates by graph nodes (opt-in, correlationFor), whose traced replays
    // are attributed through the nodes the capture made (so it needs one). With counters the
    // counted forward stays eager (the timeline times it), and so does one that may fork (its
    // ops run on other threads).
    const bool capturable = side_.has_value() && o_.counters.empty() && !forward_->mayFork();
    inCapture_ = correlationFor(false, /*inCapture=*/true);
    graphTrace_ =
        capturable && traces_ && o_.traceForwards > 0 &&
        (inCapture_ == Correlation::GraphNodes || inCapture_ == Correlation::CaptureNodes);
    fused_ = capturable && (!traces_ || graphTrace_);
    // Eager timing with capture nodes counts in a capture that is never replayed, and the
    // traced eager forwards are attributed against its nodes: no markers, no GPU work.
    countCapture_ = traces_ && mode_ == TimingMode::Eager && o_.counters.empty() &&
                    !forward_->mayFork() && o_.traceForwards > 0 &&
                    inCapture_ == Correlation::CaptureNodes;
    lock_ = std::make_unique<GpuLock>(o_.gpuLock, &out_.phases.wait);
  }

  ProfileOutput run() {
    c10::InferenceMode inference;
    if (!fused_ || plainForwards() > 0) {
      lock_->hold();  // else the GPU's first work is the timed phase's (a capture runs nothing)
    }
    if (traces_) {
      forward_->recordGeneratedKernels();  // the warm-ups compile torch.compile'd code
    }
    warmUp();
    if (fused_) {
      lock_->release();  // the capture runs nothing on the GPU
      if (graphTrace_) {
        startTrace(inCapture_);
        if (!tracing_) {
          graphRefusal_ = out_.traceStatus.substr(out_.traceStatus.find(':') + 1);
        }
      }
      // Where graph nodes cannot be traced (CUPTI refused the subscriber), count() traces an
      // eager counted forward with markers, and the capture follows it.
      if (!graphTrace_ || tracing_) {
        capture(/*counting=*/true);
      }
      if (tracing_) {
        if (counted_.has_value()) {
          tracing_->countedDone();  // the graph is instantiated: its nodes are known
        } else {
          tracing_.reset();  // the capture failed: count() traces its eager forward instead
        }
      }
      lock_->hold();
    }
    if (!counted_) {
      count();
      if (side_.has_value() && !onMeta_ && !captureTried_) {
        if (counted_->otherThreads == 0) {
          capture(/*counting=*/false);
        } else {
          // A capture records this thread's stream only: forked work would be missing from it
          // (and CUDA refuses the other threads' launches while it runs).
          const std::string why = "the forward runs ops on " +
                                  std::to_string(counted_->otherThreads) +
                                  " other thread(s) (torch.jit.fork), which a CUDA graph of this "
                                  "thread's stream would not hold";
          TORCH_CHECK_VALUE(mode_ != TimingMode::CudaGraph,
                            "torchutil: timing='cuda_graph' cannot time this forward: ", why,
                            "; use timing='eager' or 'auto'");
          out_.timingNote = "auto: eager, since " + why;
        }
      }
    }
    countEagerly();
    if (!onMeta_) {
      if (!runner_) {
        runner_ = eagerRunner(*forward_, inputs_, device_);
      }
      traceForwards();
      timeForwards();
      readCounters();
    }
    lock_->release();
    return assemble();
  }

 private:
  // Plain forwards, so that lazy initialization and torch.compile's tracing stay out of the
  // count. Traced eager forwards count as warm-ups (they run after the counted forward), so
  // tracing adds no forward while warmup - 1 >= trace_forwards; so does the capture's forward. A
  // torch.compile'd forward compiles on its first call: that call is never the counted one. With
  // graph timing they run on the capture's stream, as its warm-up.
  void warmUp() {
    PhaseTimer t(&out_.phases.warmup);
    const int64_t plain = plainForwards();
    c10::OptionalStreamGuard onSide(side_);
    for (int64_t i = 0; i < plain; ++i) {
      if (estimate() && i == plain - 1) {
        timeOne();
      } else {
        forward_->run(inputs_);
      }
      checkInterrupt();
    }
    plainWarmups_ = plain;
  }

  // The host forwards before the timed ones are `warmup` in all: these, the counted one (a
  // counting capture's too, which needs one of these before it: lazy initialization cannot be
  // captured), the traced eager ones, and the capture's (when it is not the counted one).
  int64_t plainForwards() const {
    const int64_t tracedEager = traces_ && mode_ == TimingMode::Eager ? o_.traceForwards : 0;
    const int64_t capture = side_.has_value() && !fused_ ? 1 : 0;
    return std::max<int64_t>(o_.warmup - 1 - tracedEager - capture,
                             compiled_ || countCapture_ ? 1 : 0);
  }

  bool sharedGpu() const { return o_.gpuLock.has_value() && device_.is_cuda(); }

  // The timeline's sampling interval is chosen from how long the sampled forwards will take:
  // one forward is timed for that, the last warm-up (else the counted forward).
  bool estimate() const {
    return hw::hasSet(o_.counters, hw::CounterSet::Timeline) && device_.is_cuda();
  }
  void timeOne() {
    synchronizeDevice(device_);
    const auto t0 = Clock::now();
    forward_->run(inputs_);
    synchronizeDevice(device_);
    forwardSeconds_ = secondsSince(t0);
  }

  // Counts one forward, naming each op's module unless the forward is compiled code.
  void countedForward(const std::function<void()>& forward) {
    std::unique_ptr<Forward::ModuleScope> modules =
        o_.modulePaths && !compiled_ ? forward_->trackModules() : nullptr;
    CountingScope counting(tracing_ ? tracing_->hooks() : cpuTimes_ ? cpuOpClock() : nullptr);
    forward();
    counted_ = counting.finish();
    if (modules) {
      modules->close();
    }
  }

  // The counted forward, eager, traced when tracing, its launches correlated with the ops that
  // made them (markers, or CUPTI's API records for forwards that may fork: correlationFor).
  void count() {
    if (countCapture_ && countInCapture()) {
      return;
    }
    if (o_.trace && !onMeta_) {
      startTrace(correlationFor(forward_->mayFork(), /*inCapture=*/false));
    } else {
      out_.traceStatus = onMeta_ ? "off: nothing runs on the meta device" : "off: trace=False";
    }
    PhaseTimer t(&out_.phases.count);
    c10::OptionalStreamGuard onSide(side_);
    countedForward([&] {
      if (estimate() && plainWarmups_ == 0) {
        timeOne();
      } else {
        forward_->run(inputs_);
      }
    });
    if (tracing_) {
      tracing_->countedDone();
      if (!graphRefusal_.empty()) {
        out_.traceStatus +=
            "; an eager counted forward traced, since graph nodes could not be:" + graphRefusal_;
      }
    }
  }

  // A forward that ran torch.compile'd code is counted again as its eager self (Forward::
  // runEager), with its module paths: Inductor's generated kernels run ops the dispatcher never
  // sees. The compiled forward's count stays, for the kernels its trace attributed to its ops
  // (shareOntoEagerRows). Synchronized, so that no kernel of it falls in the traced forwards.
  void countEagerly() {
    if (!compiled_ && counted_->compiledRegions == 0) {
      return;
    }
    PhaseTimer t(&out_.phases.count);
    c10::OptionalStreamGuard onSide(side_);
    std::unique_ptr<Forward::ModuleScope> modules =
        o_.modulePaths ? forward_->trackModules() : nullptr;
    static const TraceHooks eventsOnly{&eventClockNs, nullptr, nullptr};
    CountingScope counting(&eventsOnly);
    forward_->runEager(inputs_);
    eager_ = counting.finish();
    if (modules) {
      modules->close();
    }
    synchronizeDevice(device_);
  }

  // Eager timing, capture nodes: counts in a capture never replayed, whose nodes the traced
  // eager forwards are attributed against. False (nothing counted, no trace) when the trace or
  // the capture fails: count() then traces an eager counted forward with markers.
  bool countInCapture() {
    startTrace(Correlation::CaptureNodes);
    if (!tracing_) {
      return false;
    }
    const std::optional<c10::Stream> stream = captureStream(device_, TimingMode::Auto);
    PhaseTimer t(&out_.phases.count);
    std::string failure;
    const bool captured =
        stream.has_value() && captureWithoutReplay(
                                  [&] {
                                    tracing_->captureBegins(*stream);
                                    countedForward([&] { forward_->run(inputs_); });
                                    tracing_->captureEnds();
                                  },
                                  device_, *stream, sharedGpu(), &failure);
    if (!captured) {
      counted_.reset();
      tracing_.reset();
      return false;
    }
    tracing_->countedDone();
    return true;
  }

  // Starts the kernel trace (phases.trace), or sets the status that says why not.
  void startTrace(Correlation how) {
    PhaseTimer t(&out_.phases.trace);
    tracing_ = KernelTracing::start(device_, &out_.traceStatus, traceBackend(o_.backends), how);
    if (tracing_) {
      // With TORCHUTIL_CUPTI_TEARDOWN=1, detached when the trace ends, so that the timed
      // forwards (eager ones above all) and the caller's own work after the call run as if
      // nothing had traced them; the counters' passes after the timed forwards want CUPTI.
      tracing_->detachWhenDone(teardownWanted() && o_.counters.empty());
    }
  }

  // Graph timing: captures the forward on the side stream, counting it when `counting`. Auto
  // falls back to eager timing, saying why; cuda_graph throws.
  void capture(bool counting) {
    PhaseTimer t(&out_.phases.capture);
    captureTried_ = true;
    if (counting && !tracing_) {
      out_.traceStatus = "off: trace=False";
    }
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
                               *side_, sharedGpu());
    if (c.runner) {
      runner_ = std::move(c.runner);
      usedGraph_ = true;
      return;
    }
    if (counting) {
      counted_.reset();  // a count inside a failed capture may be partial: counted again
    }
    TORCH_CHECK(mode_ != TimingMode::CudaGraph,
                "torchutil: the model could not be captured in a CUDA graph; its forward failed "
                "during capture: ",
                c.failure);
    // The note is one line; the whole error (a Python traceback, say) is the note's detail.
    out_.timingNote = "auto: eager, since the forward could not be captured in a CUDA graph: " +
                      errorHeadline(c.failure);
    out_.timingNoteDetail = c.failure;
  }

  // The traced forwards (eager, or graph replays after the graph's warm-up replays), with PM
  // sampling around them when the timeline was asked for. The trace ends before the timed
  // forwards, which run without CUPTI.
  void traceForwards() {
    counters_ =
        std::make_unique<CounterReading>(device_, o_.counters, tracing_ != nullptr, o_.pmIntervalNs,
                                         o_.counterReplay, counterBackend(o_.backends));
    {
      // The first replay uploads the graph: graph timing warms up with replays.
      PhaseTimer t(&out_.phases.time);
      const int64_t traced = tracing_ ? o_.traceForwards : 0;
      runForwards(*runner_, device_, usedGraph_ ? std::max<int64_t>(o_.warmup - traced, 0) : 0);
    }
    if (!tracing_) {
      return;
    }
    PhaseTimer t(&out_.phases.trace);
    const bool sample = o_.traceForwards > 0;
    if (sample) {
      counters_->startTimeline(forwardSeconds_ * static_cast<double>(o_.traceForwards));
    }
    tracing_->timedStart();
    runForwards(*runner_, device_, o_.traceForwards);
    std::string problem;
    graphTraced_ = tracing_->correlation() == Correlation::GraphNodes ||
                   tracing_->correlation() == Correlation::CaptureNodes;
    const bool attributed =
        tracing_->finish(&countedKernels_, &timedKernels_, o_.traceForwards, &problem);
    if (graphTraced_ && !attributed) {
      out_.traceStatus = "on, unattributed: " + problem;
    }
    if (sample) {
      counters_->stopTimeline();
    }
  }

  void timeForwards() {
    {
      PhaseTimer t(&out_.phases.time);
      timing_ = torchutil::timeForwards(*runner_, device_, o_.repeat);
    }
    // The timeline when nothing is traced: forwards after the timed ones are sampled (the
    // sampler's buffer holds a few thousand samples, not a whole timing).
    if (counters_->wantsTimeline() && (!tracing_ || o_.traceForwards == 0)) {
      PhaseTimer t(&out_.phases.counters);
      const int64_t sampled = std::max<int64_t>(o_.traceForwards, 1);
      synchronizeDevice(device_);
      counters_->startTimeline(forwardSeconds_ * static_cast<double>(sampled));
      runForwards(*runner_, device_, sampled);
      counters_->stopTimeline();
    }
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
    if (tracing_) {
      if (tracing_->dropped() > 0) {
        out_.traceStatus =
            "on, incomplete: CUPTI dropped " + std::to_string(tracing_->dropped()) + " records";
      }
      tracing_.reset();
      const int64_t traced = o_.traceForwards;
      // Graph nodes attributed the timed kernels already (those they could not are
      // unattributed time, and the status says why).
      const bool byPosition =
          graphTraced_ || attributeByPosition(countedKernels_, timedKernels_, traced);
      out_.trace = summarizeTrace(countedKernels_, timedKernels_, traced, byPosition,
                                  counted_->events, counted_->table.rows().size());
      if (eager_) {
        std::vector<int64_t> rowOf;
        out_.trace = shareOntoEagerRows(out_.trace, counted_->table.rows(), table.rows(),
                                        eager_->events, &rowOf);
        for (OpEvent& e : counted_->events) {
          e.row = e.row >= 0 ? rowOf[static_cast<size_t>(e.row)] : -1;
        }
      }
      if (eager_ || counted_->compiledRegions > 0) {
        out_.generated = attributeGenerated(
            &out_.trace, countedKernels_, timedKernels_, traced, forward_->generatedKernels(),
            table.rows(), eager_ ? eager_->events : counted_->events, &out_.traceStatus);
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
    s.secondsPerForward = onMeta_ ? kNaN : timing_.interval.median;
    s.secondsInterval = onMeta_ ? MedianInterval{kNaN, kNaN, kNaN} : timing_.interval;
    s.iterations = static_cast<int64_t>(timing_.seconds.size());
    s.cudaGraph = usedGraph_;
    s.trace = out_.traced ? &out_.trace : nullptr;
    s.tracedForwards = out_.traced ? o_.traceForwards : 0;
    out_.summary = summarize(s);
    hw::fillSummary(out_.summary, out_.hw, static_cast<double>(s.totals.matrixFlops));
    hw::markUncountedTensorWork(out_.summary, &out_.countersStatus, out_.hw, table.rows());
    out_.table = std::move(table);
    out_.timingMode =
        onMeta_ ? "none" : timingModeName(usedGraph_ ? TimingMode::CudaGraph : TimingMode::Eager);
    out_.repetition = timing_.stop;
    out_.device = device_.str();
    // The default on a CPU is eager, not a fallback; an explicit "auto" there says why.
    if (mode_ == TimingMode::Auto && !usedGraph_ && out_.timingNote.empty() && !onMeta_ &&
        (o_.timing.has_value() || device_.is_cuda())) {
      out_.timingNote =
          device_.is_cuda()
              ? "auto: eager, since torchutil was built without CUDA"
              : "auto: eager, since CUDA graphs need a CUDA device, not " + device_.str();
    }
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
  TimingMode mode_ = TimingMode::Eager;
  bool compiled_ = false, onMeta_ = false, traces_ = false, cpuTimes_ = false, fused_ = false,
       usedGraph_ = false, captureTried_ = false, graphTrace_ = false, graphTraced_ = false;
  Correlation inCapture_ = Correlation::Markers;  // how a counted capture would be traced
  bool countCapture_ = false;                     // eager timing counts in a capture
  std::string graphRefusal_;                      // why a graph-node trace could not start
  std::optional<c10::Stream> side_;
  std::unique_ptr<GpuLock> lock_;
  int64_t plainWarmups_ = 0;
  double forwardSeconds_ = 0;
  std::optional<CountResult> counted_;
  std::optional<CountResult> eager_;  // a compiled forward's eager count (countEagerly)
  std::unique_ptr<KernelTracing> tracing_;
  std::unique_ptr<CounterReading> counters_;
  std::unique_ptr<Runner> runner_;
  std::vector<KernelRecord> countedKernels_, timedKernels_;
  RepeatResult timing_;
  ProfileOutput out_;
};

}  // namespace

ProfileOutput summarizeCount(CountTable table, c10::Device device, int64_t batchSize,
                             double seconds, RateSource peakSource,
                             std::optional<double> peakFlops) {
  ProfileOutput out;
  out.peak = peakForCount(device, table, peakSource, peakFlops);
  out.bandwidth = bandwidthOf(device);
  SummaryInputs s = summaryBase(table, out, batchSize);
  s.secondsPerForward = seconds;
  s.secondsInterval = MedianInterval{seconds, seconds, seconds};
  s.iterations = 1;
  out.summary = summarize(s);
  out.table = std::move(table);
  out.device = device.str();
  out.timingMode = "wall";
  out.repetition = "one timed block";
  return out;
}

ProfileOutput profileModel(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
                           const ProfileOptions& options) {
  return ProfileRun(model, inputs, options).run();
}

}  // namespace torchutil
