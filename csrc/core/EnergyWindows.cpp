#include "core/EnergyWindows.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace torchutil {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Seconds for people: "100 ms", "1.02 ms", "0.52 s".
std::string duration(double seconds) {
  return seconds < 1.0 ? threeDigits(seconds * 1e3) + " ms" : threeDigits(seconds) + " s";
}

// How many forwards had finished at each poll where that number grew, and between two such
// polls, linearly interpolated: the forwards run back to back, so they finish at an even pace.
class Completions {
 public:
  void add(double seconds, int64_t finished) { points_.push_back({seconds, finished}); }
  bool empty() const { return points_.empty(); }
  double first() const { return points_.front().seconds; }

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
      updateSeconds(kNaN) {}

double steadyClockSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double counterDelta(double before, double after, double wrap) {
  const double delta = after - before;
  return delta < 0.0 && wrap > 0.0 ? delta + wrap : delta;
}

void checkEnergyPlan(const EnergyPlan& p) {
  if (!(p.windowSeconds > 0.0 && p.windowSeconds <= 3600.0)) {
    throw std::invalid_argument(
        "torchutil: energy_window is the seconds of forwards the energy windows span, in "
        "(0, 3600], got " +
        threeDigits(p.windowSeconds));
  }
  if (p.windows < 1 || p.windows > kMostEnergyWindows) {
    throw std::invalid_argument(
        "torchutil: energy_windows is how many windows energy_window is "
        "split into, in [1, " +
        std::to_string(kMostEnergyWindows) + "], got " + std::to_string(p.windows));
  }
  if (p.inFlight < 1) {
    throw std::invalid_argument("torchutil: energy needs at least one forward in flight, got " +
                                std::to_string(p.inFlight));
  }
  if (!(p.stallSeconds > 0.0 && std::isfinite(p.stallSeconds))) {
    throw std::invalid_argument(
        "torchutil: the energy counter's stall limit must be a positive "
        "number of seconds, got " +
        threeDigits(p.stallSeconds));
  }
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
  double raw = now.joules, total = 0.0, lastMove = now.seconds;
  double period = std::numeric_limits<double>::infinity();  // the shortest change-to-change gap
  int64_t launched = 0, finished = 0;
  Completions done;
  // The counter's changes seen after the first forward finished (the device busy since), as
  // (joules since the first reading, seconds), and the changes that bound the windows.
  std::vector<EnergyReading> changes;
  std::vector<size_t> edges;
  while (edges.size() < bounds || finished < launched) {
    // A forward that finished inside launch() (a CPU's) hands back to the poll at once.
    for (int64_t f = finished; edges.size() < bounds && launched - f < plan.inFlight;) {
      queue.launch();
      if ((f = queue.finished()) == ++launched) {
        break;
      }
    }
    if (!counter.read(&now, &why)) {
      return refused(why);
    }
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
    if (edges.size() == bounds || done.empty() || !(done.first() < now.seconds)) {
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
    r.joulesPerForward.push_back((b.joules - a.joules) / forwards);
  }
  const EnergyReading& first = changes[edges.front()];
  const EnergyReading& last = changes[edges.back()];
  r.perForward = medianInterval(r.joulesPerForward);
  r.seconds = last.seconds - first.seconds;
  r.watts = (last.joules - first.joules) / r.seconds;
  r.forwards = done.at(last.seconds) - done.at(first.seconds);
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
