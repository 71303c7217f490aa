#include "core/EnergyWindows.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/NotANumber.h"
#include "core/Options.h"
#include "core/Repetition.h"

namespace torchutil {
namespace {

// Seconds for people: "100 ms", "1.02 ms", "0.52 s".
std::string duration(double seconds) {
  return seconds < 1.0 ? threeDigits(seconds * 1e3) + " ms" : threeDigits(seconds) + " s";
}

// How many forwards had finished at the first launch (none) and at each poll where that number
// grew, and between two such instants, linearly interpolated: the forwards run back to back,
// so they finish at an even pace.
class Completions {
 public:
  void add(double seconds, int64_t finished) { points_.push_back({seconds, finished}); }

  // Forwards finished at time t; NaN outside the polls seen.
  double at(double t) const {
    const auto after = std::lower_bound(points_.begin(), points_.end(), t,
                                        [](const Point& p, double s) { return p.seconds < s; });
    if (after == points_.end()) {
      return kNaN;
    }
    if (after->seconds == t) {
      return static_cast<double>(after->finished);
    }
    if (after == points_.begin()) {
      return kNaN;
    }
    const Point& before = *(after - 1);
    const double share = (t - before.seconds) / (after->seconds - before.seconds);
    return static_cast<double>(before.finished) +
           share * static_cast<double>(after->finished - before.finished);
  }

 private:
  struct Point {
    double seconds;
    int64_t finished;
  };
  std::vector<Point> points_;
};

EnergyResult refused(std::string why) {
  EnergyResult r;
  r.refusal = std::move(why);
  return r;
}

double medianOf(std::vector<double> v) {
  return v.empty() ? kNaN : medianInterval(std::move(v)).median;
}

}  // namespace

EnergyResult::EnergyResult()
    : perForward{kNaN, kNaN, kNaN},
      watts(kNaN),
      seconds(kNaN),
      forwards(kNaN),
      waitSeconds(kNaN),
      drainSeconds(kNaN),
      updateSeconds(kNaN) {}

double steadyClockSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double counterDelta(double before, double after, double wrap) {
  const double delta = after - before;
  return delta < 0.0 && wrap > 0.0 ? delta + wrap : delta;
}

void checkEnergyPlan(const EnergyPlan& p) {
  // energy_window and energy_windows are options: their rows' ranges (core/Options.h).
  checkRange("energy_window", p.windowSeconds);
  checkRange("energy_windows", static_cast<double>(p.windows));
  if (p.inFlight < 1) {
    throw std::invalid_argument("torchutil: energy needs at least one forward in flight, got " +
                                std::to_string(p.inFlight));
  }
  if (!(p.forwardSeconds >= 0.0 && std::isfinite(p.forwardSeconds)) ||
      !(p.endAheadSeconds > 0.0 && p.endAheadSeconds <= p.aheadSeconds &&
        std::isfinite(p.aheadSeconds))) {
    throw std::invalid_argument(
        "torchutil: the energy queue needs a known forward time (>= 0 s) and 0 < end-ahead <= "
        "ahead seconds of work, got " +
        threeDigits(p.forwardSeconds) + ", " + threeDigits(p.endAheadSeconds) + " and " +
        threeDigits(p.aheadSeconds));
  }
  if (!(p.stallSeconds > 0.0 && std::isfinite(p.stallSeconds))) {
    throw std::invalid_argument(
        "torchutil: the energy counter's stall limit must be a positive "
        "number of seconds, got " +
        threeDigits(p.stallSeconds));
  }
}

double studentT975(int64_t dof) {
  // Published two-sided 95 % quantiles for 1-30 degrees of freedom; beyond, the Cornish-Fisher
  // expansion around the normal's 1.959964 (within 1e-4 of the table at 30).
  static constexpr double kTable[] = {
      12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
      2.2010,  2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
      2.0796,  2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  if (dof < 1) {
    return kNaN;
  }
  if (dof <= 30) {
    return kTable[dof - 1];
  }
  const double z = 1.959964, v = static_cast<double>(dof);
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

Estimate pooledPerForward(const std::vector<double>& joules, const std::vector<double>& forwards) {
  const size_t k = joules.size();
  if (k == 0 || forwards.size() != k) {
    return {kNaN, kNaN, kNaN};
  }
  double energy = 0.0, count = 0.0;
  for (size_t i = 0; i < k; ++i) {
    energy += joules[i];
    count += forwards[i];
  }
  const double pooled = energy / count;
  if (k == 1) {
    return {pooled, kNaN, kNaN};
  }
  // A ratio estimator's standard error: the windows' residuals from the pooled figure, each in
  // joules, over the mean window's forwards.
  double squares = 0.0;
  for (size_t i = 0; i < k; ++i) {
    const double residual = joules[i] - pooled * forwards[i];
    squares += residual * residual;
  }
  const double n = static_cast<double>(k);
  const double error = std::sqrt(squares / (n * (n - 1.0))) / (count / n);
  const double half = studentT975(static_cast<int64_t>(k) - 1) * error;
  return {pooled, pooled - half, pooled + half};
}

EnergyResult measureEnergy(EnergyCounter& counter, ForwardQueue& queue, const EnergyPlan& plan) {
  checkEnergyPlan(plan);
  std::string why;
  EnergyReading now;
  if (!counter.read(&now, &why)) {
    return refused(why);
  }
  const double wrap = counter.wrapJoules();
  const double target = plan.windowSeconds / static_cast<double>(plan.windows);
  const size_t bounds = static_cast<size_t>(plan.windows) + 1;
  // Forwards to keep queued for `seconds` of work.
  constexpr int64_t kMostQueued = 256;
  const auto queuedFor = [&](double seconds) {
    if (!(plan.forwardSeconds > 0.0)) {
      return plan.inFlight;
    }
    const double n = std::ceil(seconds / plan.forwardSeconds);
    return std::max(plan.inFlight,
                    static_cast<int64_t>(std::min<double>(n, static_cast<double>(kMostQueued))));
  };
  const int64_t ahead = queuedFor(plan.aheadSeconds);
  double raw = now.joules, total = 0.0, lastMove = now.seconds;
  double period = std::numeric_limits<double>::infinity();  // the shortest change-to-change gap
  int64_t launched = 0, finished = 0, reads = 0;
  // The device was idle at the first reading (the caller's promise) and busy from the first
  // launch, just after it: no forward finished then.
  const double begun = now.seconds;
  Completions done;
  done.add(begun, 0);
  // The counter's changes seen while the device was busy, as (joules since the first reading,
  // seconds), and the changes that bound the windows.
  std::vector<EnergyReading> changes;
  std::vector<size_t> edges;
  // How many forwards to keep queued now: aheadSeconds of work, and only endAheadSeconds once
  // the change that closes the last window is due (a window closes at the first change at
  // least target - period / 2 after it opened).
  const auto depth = [&]() {
    if (edges.empty() || edges.size() + 1 != bounds || !std::isfinite(period)) {
      return ahead;
    }
    const double updates = std::max(1.0, std::ceil(target / period - 0.5));
    const double due = changes[edges.back()].seconds + updates * period;
    const double wanted = std::clamp(due + plan.endAheadSeconds - now.seconds, plan.endAheadSeconds,
                                     plan.aheadSeconds);
    return std::min(ahead, queuedFor(wanted));
  };
  bool started = false;
  while (edges.size() < bounds || finished < launched) {
    // A forward that finished inside launch() (a CPU's) hands back to the poll at once.
    for (int64_t f = finished, want = depth(); edges.size() < bounds && launched - f < want;) {
      queue.launch();
      if ((f = queue.finished()) == ++launched) {
        break;
      }
    }
    if (!started) {
      started = true;
      counter.started();
    }
    if (!counter.read(&now, &why)) {
      return refused(why);
    }
    ++reads;
    if (const int64_t f = queue.finished(); f > finished) {
      finished = f;
      done.add(now.seconds, f);
    }
    // Polls come far more often than a wrap: at most one between two.
    const double delta = counterDelta(raw, now.joules, wrap);
    if (delta < 0.0) {
      return refused("the counter went backwards, from " + threeDigits(raw) + " J to " +
                     threeDigits(now.joules) + " J (reset while it was read?)");
    }
    if (delta == 0.0) {
      if (edges.size() < bounds && now.seconds - lastMove > plan.stallSeconds) {
        return refused("the counter did not move in " + threeDigits(now.seconds - lastMove) +
                       " s of forwards (this device does not update it)");
      }
      continue;
    }
    raw = now.joules;
    total += delta;
    lastMove = now.seconds;
    // The first read after the launch may hold a change from before it; any later change came
    // after that read began, the device busy.
    if (edges.size() == bounds || reads < 2) {
      continue;
    }
    if (!changes.empty()) {
      period = std::min(period, now.seconds - changes.back().seconds);
      if (target < period / 2) {
        return refused("windows of " + duration(target) + " (energy_window " +
                       threeDigits(plan.windowSeconds) + " s over " + std::to_string(plan.windows) +
                       ") are shorter than half the time between the counter's changes (" +
                       duration(period) +
                       ": its updates, or the forwards between two polls where longer); pass "
                       "energy_window >= " +
                       threeDigits(period * static_cast<double>(plan.windows)));
      }
    }
    changes.push_back({total, now.seconds});
    // A window ends at the change nearest its target length, or later.
    if (edges.empty() || now.seconds - changes[edges.back()].seconds >= target - period / 2) {
      edges.push_back(changes.size() - 1);
    }
  }

  EnergyResult r;
  std::vector<double> energies;
  for (size_t k = 0; k + 1 < edges.size(); ++k) {
    const EnergyReading& a = changes[edges[k]];
    const EnergyReading& b = changes[edges[k + 1]];
    const double forwards = done.at(b.seconds) - done.at(a.seconds);
    if (!(forwards >= 1.0)) {
      return refused("a window of " + duration(b.seconds - a.seconds) + " held " +
                     threeDigits(forwards) +
                     " forwards, less than one (a forward is longer than a window); pass "
                     "energy_window >= " +
                     threeDigits(2.0 * plan.windowSeconds / forwards));
    }
    energies.push_back(b.joules - a.joules);
    r.windowForwards.push_back(forwards);
    r.joulesPerForward.push_back(energies.back() / forwards);
  }
  const EnergyReading& first = changes[edges.front()];
  const EnergyReading& last = changes[edges.back()];
  r.perForward = pooledPerForward(energies, r.windowForwards);
  r.seconds = last.seconds - first.seconds;
  r.watts = (last.joules - first.joules) / r.seconds;
  r.forwards = done.at(last.seconds) - done.at(first.seconds);
  r.waitSeconds = first.seconds - begun;
  r.drainSeconds = now.seconds - last.seconds;
  std::vector<double> gaps;
  for (size_t i = 1; i < changes.size(); ++i) {
    gaps.push_back(changes[i].seconds - changes[i - 1].seconds);
  }
  r.updateSeconds = medianOf(std::move(gaps));
  r.notes = counter.notes();
  return r;
}

std::string paceNote(const EnergyResult& r, double secondsPerForward, double tolerance) {
  if (!r.measured() || !(secondsPerForward > 0.0) || !(r.forwards > 0.0)) {
    return "";
  }
  const double pace = r.seconds / r.forwards;
  if (!(pace > secondsPerForward * (1.0 + tolerance))) {
    return "";
  }
  return "the windows' forwards took " + threeDigits(pace / secondsPerForward) + "x the timed " +
         duration(secondsPerForward) + " each (" + duration(pace) +
         "): the device idled or ran slower, and that time's draw is in the figure";
}

std::string describeEnergy(const EnergyResult& r, const std::string& source,
                           const std::string& what) {
  if (!r.measured()) {
    return "off: " + (source.empty() ? "" : source + ": ") + r.refusal;
  }
  std::string text = source + ", changes every " + threeDigits(r.updateSeconds * 1e3) + " ms, " +
                     threeDigits(r.seconds) + " s of " + what + " in " +
                     std::to_string(r.joulesPerForward.size()) + " windows (" +
                     std::to_string(std::lround(r.forwards)) + " forwards)";
  return r.notes.empty() ? text : text + "; " + r.notes;
}

}  // namespace torchutil
