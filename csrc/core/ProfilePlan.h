#pragma once
// The route of one profile call, decided before anything runs: which steps run and how, as a
// torch-free function of what the call asks and what the forward and the build can do
// (planProfile). Like kineto's ConfigDerivedState, the plan is an immutable snapshot that answers
// every "what now" of the run: the run (csrc/libtorch/Profile.cpp) walks its steps in the order
// of `Step` (plan.next), and where the hardware or the forward refuses a step, it goes on with
// plan.after(refusal, why): the plan of the same inputs with that refusal among them, which
// continues at the step after the refused one. Nothing here reads the environment: the
// switches come in with the options (core/Options.h: readEnvSwitches).
//
// tests/cpp/ProfilePlanTest.cpp lists every route as a row; a new route is a new row there.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/EnumNames.h"
#include "core/HardwareBackends.h"  // Correlation

namespace torchutil {

enum class DeviceKind : uint8_t { Cpu, Cuda, Meta, Other };

extern const EnumNames<Correlation> kCorrelations;  // "markers", "api records", ...

// How the timed forwards run. Auto: CUDA-graph replays where the forward captures, else eager,
// saying why (the default on CUDA; eager elsewhere).
enum class TimingMode : uint8_t { Eager, CudaGraph, Auto };
extern const EnumNames<TimingMode> kTimingModes;  // "eager", "cuda_graph", "auto"
const char* timingModeName(TimingMode m);

// TORCHUTIL_CUPTI_CORRELATION, read once per call with the other environment switches
// (core/Options.h: readEnvSwitches). A switch of measurements and oracle tests
// (benchmarks/trace_cost.py, tests/test_kernel_trace.py); the default serves users: =api: the
// API records always; =markers: markers always; =graph: graph nodes in a capture, whose CUPTI
// callback subscriber leaves the process's later eager launches slower (~1.3x on an H200,
// docs/results/reward/), as API records do, so it is opt-in; =0: kernel records only.
enum class CorrelationSwitch : uint8_t {
  Capture,  // unset, "" or "capture": capture nodes where the counted forward is captured
  Markers,  // "markers" (and any value not named here, as always): markers, never capture nodes
  Api,      // "api": CUPTI's API records always
  Graph,    // "graph": graph nodes where the counted forward is captured (opt-in)
  Off,      // "0": kernel records only, attributed to no op
};
extern const EnumNames<CorrelationSwitch> kCorrelationSwitches;
// value: the variable's value, or null when unset.
CorrelationSwitch parseCorrelationSwitch(const char* value);

// What a profile call asks and what its forward and the build can do.
struct PlanInputs {
  DeviceKind device = DeviceKind::Cpu;
  std::string deviceName = "cpu";    // as the timing note names it ("cpu", "cuda:0")
  std::optional<TimingMode> timing;  // nullopt: Auto on CUDA, Eager elsewhere
  bool cudaGraphs = false;           // the build captures CUDA graphs (TORCHUTIL_WITH_CUDA)
  bool trace = true;
  int64_t traceForwards = 1;
  int64_t warmup = 3;
  bool counters = false;  // counters= asked for a set
  bool timeline = false;  // counters= asked for the timeline (PM sampling)
  bool energy = false;    // energy=True: windows of the timed forwards on the energy counter
  bool mayFork = false;   // Forward::mayFork: its ops may run on other threads (TorchScript)
  bool compiled = false;  // Forward::compiled: compiled code, its ops out of sight of modules
  // Forward::settlingForwards: plain forwards before the counted one, whatever warmup says
  // (TorchScript's profiling runs).
  int64_t settlingForwards = 0;
  // A compiled forward that can run as its eager self (torch.compiler.set_stance("force_eager"))
  // and name the ops its kernels fused (Inductor's provenance): counted eagerly, timed compiled.
  // No Forward offers that yet (issue 36): false.
  bool eagerSelf = false;
  bool modulePaths = true;  // name the module of every op of the counted forward
  CorrelationSwitch correlation = CorrelationSwitch::Capture;
  // TORCHUTIL_CUPTI_TEARDOWN=1: detach CUPTI when the trace ends. Off by default: on an H200 a
  // detach made every trace pay ~20 ms to attach again (tracing's cost budget is 5 ms a call).
  // What it was for, the process's eager launches running 28-35 % slower after a trace with
  // CUPTI's API records (docs/results/reward/), Correlation::Markers avoids by recording none.
  bool teardown = false;
};

// The steps of a run, in the order they run; a route runs some of them (ProfilePlan::steps).
enum class Step : uint8_t {
  WarmUp,            // plainWarmups forwards (lazy initialization, torch.compile's compile)
  CountInCapture,    // the counted forward inside a capture (ProfilePlan::counted)
  CountEagerly,      // the counted forward, eager
  CaptureForTiming,  // graph timing: the capture of a forward that does not count
  TraceForwards,     // graph warm-up replays, then the traced forwards (eager or replays)
  TimeForwards,      // the timed forwards; then the timeline's forwards if sampled after them
  MeasureEnergy,     // energy=True: the timed forwards again, in windows of the energy counter
  ReadCounters,      // the range profiler's passes (nothing when no counters were asked for)
  Assemble,          // the result; always last
};
extern const EnumNames<Step> kSteps;

// A step refused by the hardware or the forward: the run goes on with plan.after(refusal, why).
enum class Refusal : uint8_t {
  Trace,       // the counted forward's trace did not start (the backend said why)
  GraphTrace,  // the graph- or capture-node trace of a counting capture did not start
  Throwaway,   // eager timing's capture that counts (or its trace) failed
  Capture,     // the forward could not be captured in a CUDA graph
  Forked,      // the counted forward ran ops on other threads, which a capture would not hold
};
extern const EnumNames<Refusal> kRefusals;

// Where the counted forward runs.
enum class Counted : uint8_t {
  Eager,               // an eager forward (on the capture stream under graph timing)
  InTimedCapture,      // the capture whose replays are timed: one host forward fewer
  InThrowawayCapture,  // a capture never replayed, under eager timing: its nodes are what the
                       // traced eager forwards are matched against; no markers, no GPU work
};
extern const EnumNames<Counted> kCountedForwards;

// How the traced forwards' kernels are tied to the ops that launched them.
enum class Attribution : uint8_t {
  None,              // nothing is traced
  CountedForward,    // the counted forward's kernels carry their op (markers, API records), and
                     // the traced forwards take them by position where they repeat its sequence
  GraphNodes,        // each replayed kernel through its graph node (attributeByGraphNodes)
  CapturedSequence,  // by position against the nodes the counting capture made
  Provenance,        // a compiled forward's kernels by the ops Inductor fused into them
};
extern const EnumNames<Attribution> kAttributions;

// Where the timeline's PM samples are taken.
enum class TimelineWindow : uint8_t { None, TracedForwards, AfterTimedForwards };
extern const EnumNames<TimelineWindow> kTimelineWindows;

// Which forward is timed alone to choose the timeline's sampling interval.
enum class IntervalProbe : uint8_t { None, LastWarmUp, CountedForward };
extern const EnumNames<IntervalProbe> kIntervalProbes;

struct ProfilePlan {
  PlanInputs in;
  std::vector<Refusal> refused;  // what refused so far, in order

  TimingMode mode = TimingMode::Eager;  // in.timing resolved
  // Warm-ups, the counted forward and the captures run on the capture's side stream.
  bool onCaptureStream = false;
  int64_t plainWarmups = 0;
  IntervalProbe probe = IntervalProbe::None;

  Counted counted = Counted::Eager;
  bool countEagerly = false;  // compiled, counted as its eager self (in.eagerSelf)
  bool namesModules = false;  // the counted forward names each op's module
  // The counted forward's trace: started (else traceOff says why not), correlated as
  // `correlation` says; traceNote follows "on" when it starts (a fallback says why).
  bool traces = false;
  std::string traceOff;
  Correlation correlation = Correlation::Markers;
  std::string traceNote;
  Attribution attribution = Attribution::None;
  bool detachAfterTrace = false;  // cuptiFinalize when the trace ends

  bool captureForTiming = false;  // a capture after the eager counted forward
  bool replays = false;           // the traced and timed forwards are graph replays
  int64_t graphWarmUpReplays = 0;
  int64_t tracedForwards = 0;  // after the counted forward, traced (0: no trace)
  TimelineWindow timeline = TimelineWindow::None;
  std::string timingNote;  // why timing="auto" times eagerly

  // A refusal timing="cuda_graph" cannot take: the call fails with this message, as a
  // ValueError where failsAsValueError, else a RuntimeError.
  std::string failure;
  bool failsAsValueError = false;

  std::vector<Step> steps() const;  // the steps this route runs, Assemble last
  // The step after `done` (the first one of steps() after it in Step's order).
  Step next(Step done) const;
  // Whether `step` holds the gpu_lock: every step that runs work on the GPU does; a counting
  // capture of the timed graph runs none (its retry's warm-up takes the lock itself).
  bool holdsGpuLock(Step step) const;
  // The route after `refusal` (why: what refused, as the notes quote it; Forked: the number of
  // other threads the forward ran ops on).
  ProfilePlan after(Refusal refusal, const std::string& why) const;
};

ProfilePlan planProfile(const PlanInputs& in);

// The route in one line, as tests/cpp/ProfilePlanTest.cpp lists it: "warm-up > count in capture
// > trace forwards > time forwards > read counters | counted in the timed capture | capture
// nodes -> captured sequence | 2 plain | replays after 2 warm-up replays | 1 traced | timeline
// none".
std::string describeRoute(const ProfilePlan& plan);

}  // namespace torchutil
