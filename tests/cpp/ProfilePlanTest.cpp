// Every route a profile call takes (core/ProfilePlan.h), one row each: what the call asks, what
// refused on the way, and the route the plan gives: its steps, where the counted forward runs,
// how its kernels are tied to ops, what is timed and traced, and what the call says. This table
// is the description of the routes (docs/architecture.md points here); a new route is a new row.
// The oracle is the route profileModel took before the plan existed (csrc/libtorch/Profile.cpp
// at the commit before this file), read off its flags branch by branch.
#include "core/ProfilePlan.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace torchutil {
namespace {

using S = Step;

// A CUDA call with the defaults of ProfileOptions (warmup=3, trace_forwards=1, trace=True,
// timing unset), in a build that captures CUDA graphs, edited by the row.
PlanInputs cuda(const std::function<void(PlanInputs&)>& edit = {}) {
  PlanInputs in;
  in.device = DeviceKind::Cuda;
  in.deviceName = "cuda:0";
  in.cudaGraphs = true;
  if (edit) {
    edit(in);
  }
  return in;
}

PlanInputs cpu(const std::function<void(PlanInputs&)>& edit = {}) {
  return cuda([&](PlanInputs& in) {
    in.device = DeviceKind::Cpu;
    in.deviceName = "cpu";
    if (edit) {
      edit(in);
    }
  });
}

struct Route {
  const char* name;
  PlanInputs in;
  std::vector<std::pair<Refusal, std::string>> refused;  // in order, with what they said
  std::string route;  // describeRoute: steps | counted | correlation -> attribution | ...
  std::string says;   // the timing note, the trace note or the failure
};

const std::string kGraphRefusal = "CUPTI has one callback subscriber per process";

// The steps of the routes, and the rest of a line.
const std::string kEager =
    "warm-up > count eagerly > trace forwards > time forwards > read counters";
const std::string kCaptured =
    "warm-up > count in capture > trace forwards > time forwards > read counters";
const std::string kThenCapture =
    "warm-up > count eagerly > capture for timing > trace forwards > time forwards > read counters";

std::vector<Route> routes() {
  const auto eager = [](PlanInputs& in) { in.timing = TimingMode::Eager; };
  const auto untraced = [](PlanInputs& in) { in.trace = false; };
  const auto correlation = [](CorrelationSwitch s) {
    return [s](PlanInputs& in) { in.correlation = s; };
  };
  return {
      {"cpu: eager; the backend refuses the trace",
       cpu(),
       {{Refusal::Trace, "kernel tracing needs a CUDA device, got cpu"}},
       kEager + " | counted eager | untraced | 2 plain | eager | 0 traced | timeline none",
       ""},
      {"cpu, timing='auto' asked for",
       cpu([](PlanInputs& in) {
         in.timing = TimingMode::Auto;
         in.trace = false;
       }),
       {},
       kEager + " | counted eager | untraced | 2 plain | eager | 0 traced | timeline none",
       "auto: eager, since CUDA graphs need a CUDA device, not cpu"},
      {"meta: only the count runs",
       cpu([](PlanInputs& in) { in.device = DeviceKind::Meta; }),
       {},
       "warm-up > count eagerly | counted eager | untraced | 2 plain | eager | 0 traced | "
       "timeline none",
       ""},
      {"cuda eager, markers: the traced eager forward is a warm-up",
       cuda([&](PlanInputs& in) {
         eager(in);
         in.correlation = CorrelationSwitch::Markers;
       }),
       {},
       kEager + " | counted eager | markers -> counted forward | 1 plain | eager | 1 traced | "
                "timeline none",
       ""},
      {"cuda eager, capture nodes (default): counted in a capture never replayed",
       cuda(eager),
       {},
       kCaptured + " | counted in a throwaway capture | capture nodes -> captured sequence | "
                   "1 plain | eager | 1 traced | timeline none",
       ""},
      {"cuda eager, capture nodes, the throwaway capture refused: markers",
       cuda(eager),
       {{Refusal::Throwaway, "operation not permitted when stream is capturing"}},
       kEager + " | counted eager | markers -> counted forward | 1 plain | eager | 1 traced | "
                "timeline none",
       ""},
      {"cuda auto, untraced: the capture is the counted forward",
       cuda(untraced),
       {},
       kCaptured + " | counted in the timed capture | untraced | 2 plain | replays after 3 "
                   "warm-up replays | 0 traced | timeline none",
       ""},
      {"cuda auto, traced (default): capture nodes in the timed capture",
       cuda(),
       {},
       kCaptured + " | counted in the timed capture | capture nodes -> captured sequence | "
                   "2 plain | replays after 2 warm-up replays | 1 traced | timeline none",
       ""},
      {"energy: the timed forwards again, in windows of the energy counter, before the counters",
       cuda([](PlanInputs& in) { in.energy = true; }),
       {},
       "warm-up > count in capture > trace forwards > time forwards > measure energy > read "
       "counters | counted in the timed capture | capture nodes -> captured sequence | 2 plain | "
       "replays after 2 warm-up replays | 1 traced | timeline none",
       ""},
      {"cuda auto, graph nodes (opt-in)",
       cuda(correlation(CorrelationSwitch::Graph)),
       {},
       kCaptured + " | counted in the timed capture | graph nodes -> graph nodes | 2 plain | "
                   "replays after 2 warm-up replays | 1 traced | timeline none",
       ""},
      {"cuda auto, graph nodes refused: an eager counted forward with markers, then the capture "
       "(the warm-ups ran as first planned)",
       cuda(correlation(CorrelationSwitch::Graph)),
       {{Refusal::GraphTrace, kGraphRefusal}},
       kThenCapture + " | counted eager | markers -> counted forward | 2 plain | replays after 2 "
                      "warm-up replays | 1 traced | timeline none",
       "; an eager counted forward traced, since graph nodes could not be: " + kGraphRefusal},
      {"cuda auto, markers asked for: the capture's forward is a warm-up",
       cuda(correlation(CorrelationSwitch::Markers)),
       {},
       kThenCapture + " | counted eager | markers -> counted forward | 1 plain | replays after 2 "
                      "warm-up replays | 1 traced | timeline none",
       ""},
      {"cuda auto, API records asked for",
       cuda(correlation(CorrelationSwitch::Api)),
       {},
       kThenCapture + " | counted eager | api records -> counted forward | 1 plain | replays "
                      "after 2 warm-up replays | 1 traced | timeline none",
       ""},
      {"cuda auto, records only (TORCHUTIL_CUPTI_CORRELATION=0)",
       cuda(correlation(CorrelationSwitch::Off)),
       {},
       kThenCapture + " | counted eager | none -> counted forward | 1 plain | replays after 2 "
                      "warm-up replays | 1 traced | timeline none",
       ""},
      {"may fork (TorchScript): API records, the count eager",
       cuda([](PlanInputs& in) { in.mayFork = true; }),
       {},
       kThenCapture + " | counted eager | api records -> counted forward | 1 plain | replays "
                      "after 2 warm-up replays | 1 traced | timeline none",
       ""},
      {"may fork, and forked: timed eagerly",
       cuda([](PlanInputs& in) { in.mayFork = true; }),
       {{Refusal::Forked, "2"}},
       kEager + " | counted eager | api records -> counted forward | 1 plain | eager | 1 traced | "
                "timeline none",
       "auto: eager, since the forward runs ops on 2 other thread(s) (torch.jit.fork), which a "
       "CUDA graph of this thread's stream would not hold"},
      {"counters and the timeline: the counted forward stays eager, sampled while traced",
       cuda([](PlanInputs& in) { in.counters = in.timeline = true; }),
       {},
       kThenCapture + " | counted eager | markers -> counted forward | 1 plain | replays after 2 "
                      "warm-up replays | 1 traced | timeline traced forwards",
       ""},
      {"the timeline untraced: sampled after the timed forwards",
       cuda([](PlanInputs& in) {
         in.counters = in.timeline = true;
         in.trace = false;
       }),
       {},
       kThenCapture + " | counted eager | untraced | 1 plain | replays after 3 warm-up replays | "
                      "0 traced | timeline after the timed forwards",
       ""},
      {"auto, the counting capture refused: eager, with a note",
       cuda(untraced),
       {{Refusal::Capture, "out of memory"}},
       kEager + " | counted eager | untraced | 2 plain | eager | 0 traced | timeline none",
       "auto: eager, since the forward could not be captured in a CUDA graph: out of memory"},
      {"auto, traced, the counting capture refused: an eager counted forward with markers",
       cuda(),
       {{Refusal::Capture, "out of memory"}},
       kEager + " | counted eager | markers -> counted forward | 2 plain | eager | 1 traced | "
                "timeline none",
       "auto: eager, since the forward could not be captured in a CUDA graph: out of memory"},
      {"a build without CUDA: auto times eagerly, saying why",
       cuda([](PlanInputs& in) {
         in.cudaGraphs = false;
         in.correlation = CorrelationSwitch::Markers;
       }),
       {},
       kEager + " | counted eager | markers -> counted forward | 2 plain | eager | 1 traced | "
                "timeline none",
       "auto: eager, since torchutil was built without CUDA"},
      {"compiled, warmup=1: one plain forward compiles it, then the timed capture counts",
       cuda([](PlanInputs& in) {
         in.compiled = true;
         in.warmup = 1;
       }),
       {},
       kCaptured + " | counted in the timed capture | capture nodes -> captured sequence | "
                   "1 plain | replays after 0 warm-up replays | 1 traced | timeline none",
       ""},
      {"compiled with an eager self (issue 36): counted eagerly, timed compiled, by provenance",
       cuda([](PlanInputs& in) { in.compiled = in.eagerSelf = true; }),
       {},
       kThenCapture + " | counted eager | none -> provenance | 1 plain | replays after 2 warm-up "
                      "replays | 1 traced | timeline none",
       ""},
  };
}

ProfilePlan planned(const Route& r) {
  ProfilePlan p = planProfile(r.in);
  for (const auto& [refusal, why] : r.refused) {
    p = p.after(refusal, why);
  }
  return p;
}

TEST(ProfilePlanTest, EveryRoute) {
  for (const Route& r : routes()) {
    SCOPED_TRACE(r.name);
    const ProfilePlan p = planned(r);
    EXPECT_EQ(describeRoute(p), r.route);
    EXPECT_EQ(p.timingNote + p.traceNote + p.failure, r.says);
  }
}

// The two refusals that timing="cuda_graph" cannot take fail the call, each with its own error.
TEST(ProfilePlanTest, CudaGraphTimingFailsWhereAutoFallsBack) {
  const PlanInputs in = cuda([](PlanInputs& i) { i.timing = TimingMode::CudaGraph; });
  const ProfilePlan capture = planProfile(in).after(Refusal::Capture, "out of memory");
  EXPECT_EQ(capture.failure,
            "torchutil: the model could not be captured in a CUDA graph; its forward failed "
            "during capture: out of memory");
  EXPECT_FALSE(capture.failsAsValueError);
  const ProfilePlan forked = planProfile(in).after(Refusal::Forked, "1");
  EXPECT_EQ(forked.failure,
            "torchutil: timing='cuda_graph' cannot time this forward: the forward runs ops on 1 "
            "other thread(s) (torch.jit.fork), which a CUDA graph of this thread's stream would "
            "not hold; use timing='eager' or 'auto'");
  EXPECT_TRUE(forked.failsAsValueError);
  EXPECT_EQ(forked.timingNote, "");
}

// After a refusal the run goes on at the step after the refused one, in the fallback route.
TEST(ProfilePlanTest, ARefusedStepContinuesInTheFallbackRoute) {
  const ProfilePlan fused = planProfile(cuda());
  EXPECT_EQ(fused.next(S::WarmUp), S::CountInCapture);
  EXPECT_EQ(fused.next(S::CountInCapture), S::TraceForwards);
  const ProfilePlan refused = fused.after(Refusal::GraphTrace, kGraphRefusal);
  EXPECT_EQ(refused.next(S::CountInCapture), S::CountEagerly);
  EXPECT_EQ(refused.next(S::CountEagerly), S::CaptureForTiming);
  // Its eager trace refused in turn: nothing is traced, and the note goes with it.
  const ProfilePlan untraced = refused.after(Refusal::Trace, "torch.profiler is running");
  EXPECT_FALSE(untraced.traces);
  EXPECT_EQ(untraced.traceOff, "torch.profiler is running");
  EXPECT_EQ(untraced.traceNote, "");
  EXPECT_EQ(untraced.graphWarmUpReplays, 3);
  EXPECT_EQ(untraced.next(S::CountEagerly), S::CaptureForTiming);
  EXPECT_EQ(untraced.refused, (std::vector<Refusal>{Refusal::GraphTrace, Refusal::Trace}));
  EXPECT_EQ(
      planProfile(cpu([](PlanInputs& in) { in.device = DeviceKind::Meta; })).next(S::CountEagerly),
      S::Assemble);
}

// The gpu_lock is held by every step that runs work on the GPU: not by a counting capture of
// the timed graph (it runs none), nor by a warm-up of no forward.
TEST(ProfilePlanTest, TheGpuLockIsHeldWhereTheGpuWorks) {
  const ProfilePlan fused = planProfile(cuda([](PlanInputs& in) { in.warmup = 1; }));
  ASSERT_EQ(fused.plainWarmups, 0);
  EXPECT_FALSE(fused.holdsGpuLock(S::WarmUp));
  EXPECT_FALSE(fused.holdsGpuLock(S::CountInCapture));
  EXPECT_TRUE(fused.holdsGpuLock(S::TraceForwards));
  EXPECT_FALSE(fused.holdsGpuLock(S::Assemble));
  const ProfilePlan throwaway =
      planProfile(cuda([](PlanInputs& in) { in.timing = TimingMode::Eager; }));
  ASSERT_EQ(throwaway.counted, Counted::InThrowawayCapture);
  EXPECT_TRUE(throwaway.holdsGpuLock(S::WarmUp));
  EXPECT_TRUE(throwaway.holdsGpuLock(S::CountInCapture));
  EXPECT_TRUE(fused.after(Refusal::Capture, "x").holdsGpuLock(S::CountEagerly));
}

// Smaller answers of the plan: the timeline's probe, module names, CUPTI's detach.
TEST(ProfilePlanTest, TheTimelinesProbeModulesAndDetach) {
  const auto timeline = [](int64_t warmup) {
    return planProfile(cuda([&](PlanInputs& in) {
      in.counters = in.timeline = true;
      in.warmup = warmup;
    }));
  };
  EXPECT_EQ(timeline(3).probe, IntervalProbe::LastWarmUp);
  EXPECT_EQ(timeline(1).probe, IntervalProbe::CountedForward);  // no plain warm-up to time
  EXPECT_FALSE(timeline(3).detachAfterTrace);                   // the counters' passes want CUPTI
  EXPECT_TRUE(planProfile(cuda([](PlanInputs& in) { in.teardown = true; })).detachAfterTrace);
  // API records slow the process's later work down until CUPTI detaches: a trace that used
  // them (a model that may fork, or the switch) detaches; markers and capture nodes do not.
  EXPECT_TRUE(planProfile(cuda([](PlanInputs& in) { in.mayFork = true; })).detachAfterTrace);
  EXPECT_TRUE(planProfile(cuda([](PlanInputs& in) {
                in.correlation = CorrelationSwitch::Api;
              })).detachAfterTrace);
  EXPECT_FALSE(planProfile(cuda()).detachAfterTrace);
  EXPECT_FALSE(
      planProfile(cuda([](PlanInputs& in) { in.mayFork = in.counters = true; })).detachAfterTrace);
  EXPECT_EQ(planProfile(cpu()).probe, IntervalProbe::None);
  EXPECT_TRUE(planProfile(cpu()).namesModules);
  EXPECT_FALSE(planProfile(cpu([](PlanInputs& in) { in.modulePaths = false; })).namesModules);
  EXPECT_FALSE(planProfile(cpu([](PlanInputs& in) { in.compiled = true; })).namesModules);
}

TEST(ProfilePlanTest, TheCorrelationSwitchIsParsedAsItAlwaysWas) {
  EXPECT_EQ(parseCorrelationSwitch(nullptr), CorrelationSwitch::Capture);
  EXPECT_EQ(parseCorrelationSwitch(""), CorrelationSwitch::Capture);
  EXPECT_EQ(parseCorrelationSwitch("capture"), CorrelationSwitch::Capture);
  EXPECT_EQ(parseCorrelationSwitch("markers"), CorrelationSwitch::Markers);
  EXPECT_EQ(parseCorrelationSwitch("api"), CorrelationSwitch::Api);
  EXPECT_EQ(parseCorrelationSwitch("graph"), CorrelationSwitch::Graph);
  EXPECT_EQ(parseCorrelationSwitch("0"), CorrelationSwitch::Off);
  EXPECT_EQ(parseCorrelationSwitch("bogus"), CorrelationSwitch::Markers);
}

TEST(ProfilePlanTest, TimingModesParseAndListFromOneTable) {
  EXPECT_EQ(kTimingModes.parse("cuda_graph", "timing"), TimingMode::CudaGraph);
  EXPECT_STREQ(timingModeName(TimingMode::Auto), "auto");
  try {
    kTimingModes.parse("graph", "timing");
    FAIL() << "parsed 'graph'";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "torchutil: timing must be 'eager', 'cuda_graph' or 'auto', got 'graph'");
  }
}

// A TorchScript model's profiling runs are never the counted forward: at warmup=1 the plain
// forwards are its settling ones (the count is of the steady state), at a larger warmup the
// same as without them once warmup covers them.
TEST(ProfilePlanTest, TorchScriptSettlesBeforeTheCountedForward) {
  for (const auto& [warmup, plain] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {0, 2}, {5, 4}}) {
    const ProfilePlan p = planProfile(cpu([&, w = warmup](PlanInputs& i) {
      i.warmup = w;
      i.settlingForwards = 2;
    }));
    EXPECT_EQ(p.plainWarmups, plain) << "warmup=" << warmup;
  }
  EXPECT_EQ(planProfile(cpu([](PlanInputs& i) { i.warmup = 1; })).plainWarmups, 0);
}

}  // namespace
}  // namespace torchutil
