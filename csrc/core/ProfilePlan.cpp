#include "core/ProfilePlan.h"

#include <algorithm>

namespace torchutil {

const EnumNames<Correlation> kCorrelations{{Correlation::Markers, "markers"},
                                           {Correlation::ApiRecords, "api records"},
                                           {Correlation::GraphNodes, "graph nodes"},
                                           {Correlation::CaptureNodes, "capture nodes"},
                                           {Correlation::None, "none"}};

const EnumNames<TimingMode> kTimingModes{{TimingMode::Eager, "eager"},
                                         {TimingMode::CudaGraph, "cuda_graph"},
                                         {TimingMode::Auto, "auto"}};

const char* timingModeName(TimingMode m) {
  return kTimingModes.name(m);
}

const EnumNames<CorrelationSwitch> kCorrelationSwitches{{CorrelationSwitch::Capture, "capture"},
                                                        {CorrelationSwitch::Markers, "markers"},
                                                        {CorrelationSwitch::Api, "api"},
                                                        {CorrelationSwitch::Graph, "graph"},
                                                        {CorrelationSwitch::Off, "0"}};

CorrelationSwitch parseCorrelationSwitch(const char* value) {
  if (value == nullptr || *value == '\0') {
    return CorrelationSwitch::Capture;
  }
  return kCorrelationSwitches.find(value).value_or(CorrelationSwitch::Markers);
}

const EnumNames<Step> kSteps{{Step::WarmUp, "warm-up"},
                             {Step::CountInCapture, "count in capture"},
                             {Step::CountEagerly, "count eagerly"},
                             {Step::CaptureForTiming, "capture for timing"},
                             {Step::TraceForwards, "trace forwards"},
                             {Step::TimeForwards, "time forwards"},
                             {Step::MeasureEnergy, "measure energy"},
                             {Step::ReadCounters, "read counters"},
                             {Step::Assemble, "assemble"}};

const EnumNames<Refusal> kRefusals{{Refusal::Trace, "trace"},
                                   {Refusal::GraphTrace, "graph trace"},
                                   {Refusal::Throwaway, "throwaway capture"},
                                   {Refusal::Capture, "capture"},
                                   {Refusal::Forked, "forked"}};

const EnumNames<Counted> kCountedForwards{{Counted::Eager, "eager"},
                                          {Counted::InTimedCapture, "in the timed capture"},
                                          {Counted::InThrowawayCapture, "in a throwaway capture"}};

const EnumNames<Attribution> kAttributions{{Attribution::None, "none"},
                                           {Attribution::CountedForward, "counted forward"},
                                           {Attribution::GraphNodes, "graph nodes"},
                                           {Attribution::CapturedSequence, "captured sequence"},
                                           {Attribution::Provenance, "provenance"}};

const EnumNames<TimelineWindow> kTimelineWindows{
    {TimelineWindow::None, "none"},
    {TimelineWindow::TracedForwards, "traced forwards"},
    {TimelineWindow::AfterTimedForwards, "after the timed forwards"}};

const EnumNames<IntervalProbe> kIntervalProbes{{IntervalProbe::None, "none"},
                                               {IntervalProbe::LastWarmUp, "last warm-up"},
                                               {IntervalProbe::CountedForward, "counted forward"}};

namespace {

bool has(const std::vector<Refusal>& refused, Refusal r) {
  return std::find(refused.begin(), refused.end(), r) != refused.end();
}

// An eager counted forward: markers where its ops run on this thread, CUPTI's API records
// (external correlation) where they may run on others.
Correlation eagerCorrelation(const PlanInputs& in) {
  if (in.correlation == CorrelationSwitch::Off) {
    return Correlation::None;
  }
  return in.mayFork || in.correlation == CorrelationSwitch::Api ? Correlation::ApiRecords
                                                                : Correlation::Markers;
}

// A counted forward inside a capture: capture nodes by default, graph nodes where asked for
// (their CUPTI callback subscriber leaves the process's later eager launches slower); none for
// the other switches, which then count eagerly.
std::optional<Correlation> captureCorrelation(CorrelationSwitch s) {
  switch (s) {
    case CorrelationSwitch::Capture: return Correlation::CaptureNodes;
    case CorrelationSwitch::Graph: return Correlation::GraphNodes;
    default: return std::nullopt;
  }
}

Attribution attributionOf(Correlation c) {
  switch (c) {
    case Correlation::GraphNodes: return Attribution::GraphNodes;
    case Correlation::CaptureNodes: return Attribution::CapturedSequence;
    default: return Attribution::CountedForward;
  }
}

ProfilePlan plan(const PlanInputs& in, std::vector<Refusal> refused) {
  ProfilePlan p;
  p.in = in;
  const bool cuda = in.device == DeviceKind::Cuda;
  const bool meta = in.device == DeviceKind::Meta;
  p.mode = in.timing.value_or(cuda ? TimingMode::Auto : TimingMode::Eager);
  p.onCaptureStream = in.cudaGraphs && cuda && p.mode != TimingMode::Eager;
  p.countEagerly = in.compiled && in.eagerSelf;
  p.namesModules = in.modulePaths && (!in.compiled || p.countEagerly);

  // The counted forward inside a capture: not with counters (the timeline times the counted
  // forward, and the range profiler's kernels are the counted forward's), nor for a forward that
  // may fork (a capture holds this thread's stream only), nor for one counted as its eager self.
  const bool tracesCuda = in.trace && cuda;
  const bool capturable = !in.counters && !in.mayFork && !p.countEagerly;
  const std::optional<Correlation> inCapture = captureCorrelation(in.correlation);
  // Graph timing: the capture whose replays are timed counts, one host forward fewer; traced,
  // where the replays can be attributed through the capture's nodes.
  const bool inTimedCapture = p.onCaptureStream && capturable &&
                              (!tracesCuda || (in.traceForwards > 0 && inCapture.has_value()));
  // Eager timing with capture nodes: the count is a capture never replayed.
  const bool inThrowawayCapture = tracesCuda && p.mode == TimingMode::Eager && capturable &&
                                  in.traceForwards > 0 &&
                                  in.correlation == CorrelationSwitch::Capture;

  // The host forwards before the timed ones are `warmup` in all: the plain ones, the counted
  // one, the traced eager ones and the capture's (when it does not count). A counting capture
  // needs one before it (lazy initialization cannot be captured), and a compiled forward
  // compiles on its first call, which is never the counted one; nor is one of the forwards
  // before a TorchScript model's steady state. Planned before any refusal.
  const int64_t tracedEager = tracesCuda && p.mode == TimingMode::Eager ? in.traceForwards : 0;
  const int64_t captureForward = p.onCaptureStream && !inTimedCapture ? 1 : 0;
  p.plainWarmups =
      std::max({in.warmup - 1 - tracedEager - captureForward,
                in.compiled || inThrowawayCapture ? int64_t{1} : int64_t{0}, in.settlingForwards});
  if (in.timeline && cuda) {
    p.probe = p.plainWarmups > 0 ? IntervalProbe::LastWarmUp : IntervalProbe::CountedForward;
  }

  if (inTimedCapture && !has(refused, Refusal::Capture) && !has(refused, Refusal::GraphTrace)) {
    p.counted = Counted::InTimedCapture;
  } else if (inThrowawayCapture && !has(refused, Refusal::Throwaway)) {
    p.counted = Counted::InThrowawayCapture;
  }
  p.traces = in.trace && !meta && !has(refused, Refusal::Trace);
  p.traceOff = meta ? "nothing runs on the meta device" : !in.trace ? "trace=False" : "";
  p.correlation = p.countEagerly                         ? Correlation::None
                  : p.counted == Counted::InTimedCapture ? inCapture.value_or(Correlation::Markers)
                  : p.counted == Counted::InThrowawayCapture ? Correlation::CaptureNodes
                                                             : eagerCorrelation(in);
  p.attribution = !p.traces        ? Attribution::None
                  : p.countEagerly ? Attribution::Provenance
                                   : attributionOf(p.correlation);
  // CUPTI's API records stay hooked into the driver after their activity is disabled: after
  // one such trace (a TorchScript model's, TORCHUTIL_CUPTI_CORRELATION=api) the process's graph
  // replays of resnet50 b64 ran 1.6x slower on an H200. So that trace detaches CUPTI
  // (cuptiFinalize, ~20 ms), as every trace does with TORCHUTIL_CUPTI_TEARDOWN=1.
  p.detachAfterTrace =
      (in.teardown || (p.traces && p.correlation == Correlation::ApiRecords)) && !in.counters;

  const bool captured =
      p.onCaptureStream && !has(refused, Refusal::Capture) && !has(refused, Refusal::Forked);
  p.captureForTiming = captured && p.counted == Counted::Eager;
  p.replays = captured;
  p.tracedForwards = p.traces ? in.traceForwards : 0;
  p.graphWarmUpReplays = p.replays ? std::max<int64_t>(in.warmup - p.tracedForwards, 0) : 0;
  if (in.timeline && !meta) {
    p.timeline =
        p.tracedForwards > 0 ? TimelineWindow::TracedForwards : TimelineWindow::AfterTimedForwards;
  }
  // The default on a CPU is eager, not a fallback; an explicit "auto" there says why.
  if (p.mode == TimingMode::Auto && !p.onCaptureStream && !meta &&
      (in.timing.has_value() || cuda)) {
    p.timingNote = cuda ? "auto: eager, since torchutil was built without CUDA"
                        : "auto: eager, since CUDA graphs need a CUDA device, not " + in.deviceName;
  }
  p.refused = std::move(refused);
  return p;
}

}  // namespace

ProfilePlan planProfile(const PlanInputs& in) {
  return plan(in, {});
}

std::vector<Step> ProfilePlan::steps() const {
  std::vector<Step> s{Step::WarmUp};
  s.push_back(counted == Counted::Eager ? Step::CountEagerly : Step::CountInCapture);
  if (captureForTiming) {
    s.push_back(Step::CaptureForTiming);
  }
  if (in.device != DeviceKind::Meta) {
    s.insert(s.end(), {Step::TraceForwards, Step::TimeForwards});
    if (in.energy) {
      s.push_back(Step::MeasureEnergy);
    }
    s.push_back(Step::ReadCounters);
  }
  s.push_back(Step::Assemble);
  return s;
}

Step ProfilePlan::next(Step done) const {
  for (Step s : steps()) {
    if (s > done) {
      return s;
    }
  }
  return Step::Assemble;
}

bool ProfilePlan::holdsGpuLock(Step step) const {
  switch (step) {
    case Step::WarmUp: return plainWarmups > 0;
    case Step::CountInCapture: return counted != Counted::InTimedCapture;
    case Step::Assemble: return false;
    default: return true;
  }
}

ProfilePlan ProfilePlan::after(Refusal refusal, const std::string& why) const {
  std::vector<Refusal> more = refused;
  more.push_back(refusal);
  ProfilePlan p = plan(in, std::move(more));
  p.traceOff = traceOff;
  p.traceNote = traceNote;
  p.timingNote = timingNote;
  const bool mustCapture = mode == TimingMode::CudaGraph;
  switch (refusal) {
    case Refusal::Trace:
      p.traceOff = why;
      p.traceNote.clear();
      break;
    case Refusal::GraphTrace:
      p.traceNote = "; an eager counted forward traced, since graph nodes could not be: " + why;
      break;
    case Refusal::Throwaway: break;  // an eager counted forward, traced with markers
    case Refusal::Capture:
      if (mustCapture) {
        p.failure =
            "torchutil: the model could not be captured in a CUDA graph; its forward failed "
            "during capture: " +
            why;
      } else {
        p.timingNote =
            "auto: eager, since the forward could not be captured in a CUDA graph: " + why;
      }
      break;
    case Refusal::Forked: {
      const std::string forked = "the forward runs ops on " + why +
                                 " other thread(s) (torch.jit.fork), which a CUDA graph of this "
                                 "thread's stream would not hold";
      if (mustCapture) {
        p.failure = "torchutil: timing='cuda_graph' cannot time this forward: " + forked +
                    "; use timing='eager' or 'auto'";
        p.failsAsValueError = true;
      } else {
        p.timingNote = "auto: eager, since " + forked;
      }
      break;
    }
  }
  return p;
}

std::string describeRoute(const ProfilePlan& p) {
  std::string out;
  for (Step s : p.steps()) {
    if (s != Step::Assemble) {
      out += std::string(out.empty() ? "" : " > ") + kSteps.name(s);
    }
  }
  out += std::string(" | counted ") + kCountedForwards.name(p.counted);
  out += p.traces ? std::string(" | ") + kCorrelations.name(p.correlation) + " -> " +
                        kAttributions.name(p.attribution)
                  : std::string(" | untraced");
  out += " | " + std::to_string(p.plainWarmups) + " plain";
  out += p.replays ? " | replays after " + std::to_string(p.graphWarmUpReplays) + " warm-up replays"
                   : std::string(" | eager");
  out += " | " + std::to_string(p.tracedForwards) + " traced";
  out += std::string(" | timeline ") + kTimelineWindows.name(p.timeline);
  return out;
}

}  // namespace torchutil
