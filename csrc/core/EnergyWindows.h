#pragma once
// Joules per forward from a cumulative energy counter (NVML's total energy of a GPU, RAPL's
// powercap files of a CPU), torch-free. Such counters move in steps (NVML's every 100 ms on an
// H200, docs/energy.md), so a window read at arbitrary times is off by up to a step at each end.
// The windows here are aligned to the counter's own updates: each starts and ends at a change of
// the counter, and the forwards it holds are counted at those instants, interpolated between the
// forwards' completions (the poll loop sees both). The counter and the forwards are interfaces,
// so the logic is tested with a fake counter and fake time (tests/cpp/FakeEnergy.h).
#include <cstdint>
#include <string>
#include <vector>

namespace torchutil {

// A figure and its 95 % confidence interval (NaN ends where there is none).
struct Estimate {
  double value = 0.0;
  double low = 0.0;
  double high = 0.0;
};

// One reading of a cumulative energy counter.
struct EnergyReading {
  double joules = 0.0;   // since the counter's origin; wraps at EnergyCounter::wrapJoules()
  double seconds = 0.0;  // when it was read: a steady clock, any origin
};

// The clock real counters stamp their readings with (steady, seconds).
double steadyClockSeconds();

// How far a cumulative counter moved from `before` to `after` with at most one wrap at `wrap`
// (0: it does not wrap) between them; negative where it went backwards without wrapping.
double counterDelta(double before, double after, double wrap);

// A cumulative energy counter (csrc/energy: NVML, RAPL).
class EnergyCounter {
 public:
  virtual ~EnergyCounter() = default;
  // What it measures, for people: "NVML total energy of cuda:0 (PCI 00000000:19:00.0)".
  virtual std::string source() const = 0;
  // Where it wraps to 0 (RAPL's max_energy_range_uj); 0 when it does not wrap, and a decrease
  // is a reset.
  virtual double wrapJoules() const = 0;
  // Reads it now; false with *why (a sentence) when the read fails.
  virtual bool read(EnergyReading* out, std::string* why) = 0;
  // Called once the first forwards are queued, so that slow bookkeeping (NVML's list of the
  // processes on the GPU) runs while the device works rather than before it starts.
  virtual void started() {}
  // What the source adds after the windows ("1 other process on the GPU"), "" for nothing.
  virtual std::string notes() { return ""; }
};

// The forwards whose energy is measured. launch() queues one forward (it may return before the
// device ran it); finished() says, without waiting, how many launched forwards the device has
// finished.
class ForwardQueue {
 public:
  virtual ~ForwardQueue() = default;
  virtual void launch() = 0;
  virtual int64_t finished() = 0;
};

struct EnergyPlan {
  // The windows together, in seconds (energy_window); each is windowSeconds / windows, rounded
  // to the counter's updates.
  double windowSeconds = 1.0;
  int64_t windows = 5;
  // Forwards queued ahead of the device, so that it never idles while the host polls: at least
  // inFlight, and aheadSeconds of work where forwardSeconds (the timed pace; 0: unknown) says
  // how many forwards that is. Once the change that closes the last window is due, only
  // endAheadSeconds of work: what is queued when it comes is waited for. An NVML read takes
  // 3 ms on an H200 (16 ms the longest of 200); with 2 ms queued the device idled for a quarter
  // of the windows (mobilenet_v3_large b64: 2.78 ms a forward against 2.06 timed).
  int64_t inFlight = 2;
  double forwardSeconds = 0.0;
  double aheadSeconds = 0.02;
  double endAheadSeconds = 0.01;
  // A counter that does not move for this long while forwards run is refused as frozen.
  double stallSeconds = 2.0;
};

inline constexpr int64_t kMostEnergyWindows = 100;

// Throws std::invalid_argument naming the value when the plan cannot be run.
void checkEnergyPlan(const EnergyPlan& plan);

struct EnergyResult {
  // Empty when measured; else why not (the fields below are then NaN, never 0).
  std::string refusal;
  std::vector<double> joulesPerForward;  // one per window
  std::vector<double> windowForwards;    // the forwards in each (fractions at the ends)
  // The windows' joules over their forwards, and its 95 % interval: Student's t over the
  // windows, each weighted by its forwards (a ratio estimator's standard error); NaN ends with
  // one window.
  Estimate perForward;
  double watts;     // the windows' joules / their seconds
  double seconds;   // the windows' span
  double forwards;  // forwards in it (fractions at the ends)
  // What the windows cost beyond their span: from the first forward queued to the change that
  // opens the first window, and from the change that closes the last one to the last queued
  // forward finished.
  double waitSeconds;
  double drainSeconds;
  // The median time between the counter's changes as the polls saw them: its update period, or
  // the time between polls where that is longer (a CPU's eager forward).
  double updateSeconds;
  std::string notes;  // EnergyCounter::notes()
  EnergyResult();
  bool measured() const { return refusal.empty(); }
};

// The two-sided 95 % quantile of Student's t with `dof` degrees of freedom (>= 1).
double studentT975(int64_t dof);

// The pooled joules per forward of windows holding `forwards` forwards and `joules` joules, and
// its interval (EnergyResult::perForward).
Estimate pooledPerForward(const std::vector<double>& joules, const std::vector<double>& forwards);

// Runs forwards from `queue` back to back (EnergyPlan says how many queued) while polling
// `counter`, until plan.windows aligned windows are full, then waits for the queued forwards by
// polling. The device must be idle when it is called: the first window may open at any change
// the counter makes after the first forward was queued, the device busy since. Every
// failure (a read that fails, a frozen counter, a counter that goes backwards, windows shorter
// than the counter's updates, a window that holds less than one forward) is a refusal, not an
// exception.
EnergyResult measureEnergy(EnergyCounter& counter, ForwardQueue& queue, const EnergyPlan& plan);

// What to add to the notes when the windows' forwards ran slower than the timed ones: the device
// then idled (the host fell behind) or slowed, and that time's draw is in the figure. "" when
// their pace is within `tolerance` (relative) of secondsPerForward, or either is unknown.
std::string paceNote(const EnergyResult& r, double secondsPerForward, double tolerance = 0.05);

// The result's text: "<source>, changes every 100 ms, 0.52 s of <what> in 5 windows (148
// forwards)[; <notes>]", or
// "off: <source>: <refusal>".
std::string describeEnergy(const EnergyResult& r, const std::string& source,
                           const std::string& what);

}  // namespace torchutil
