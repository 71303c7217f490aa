#pragma once
// A simulated device and its cumulative energy counter in fake time, for tests of the energy
// windows (core/EnergyWindows.h) without hardware. The device draws idleWatts, and busyWatts
// while a forward runs; forwards queued by launch() run back to back. The counter steps the way
// NVML's does: its value is the energy up to its last update (every updateSeconds from
// firstUpdate), in mJ, plus startJoules, wrapping at wrap. Every read costs pollSeconds and
// every launch launchSeconds of host time; a synchronous queue runs the forward inside launch()
// (a CPU's eager forward). So a test knows the true joules per forward: busyWatts x
// forwardSeconds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/EnergyWindows.h"

namespace torchutil::testing {

struct FakeEnergyDevice {
  double now = 0.0;
  double idleWatts = 100.0;
  double busyWatts = 400.0;
  double forwardSeconds = 0.004;
  double pollSeconds = 20e-6;
  double launchSeconds = 10e-6;
  double updateSeconds = 0.1;
  double firstUpdate = 0.037;
  double startJoules = 0.0;
  double wrap = 0.0;
  bool synchronous = false;
  // Fake-time instants: the counter stops moving after frozenAfter, and is reset to 0 at resetAt.
  double frozenAfter = 1e300;
  double resetAt = 1e300;
  std::string failRead;  // non-empty: every read fails with it
  int64_t reads = 0;
  std::vector<std::pair<double, double>> busy;  // [start, end) of each forward, in order
  std::vector<double> busyBefore;               // busy seconds before each forward's start

  // Joules drawn from time 0 to t.
  double energy(double t) const {
    // The forwards that started before t: all but the last ran whole.
    const auto after = std::lower_bound(busy.begin(), busy.end(), t,
                                        [](const auto& f, double s) { return f.first < s; });
    double busySeconds = 0.0;
    if (after != busy.begin()) {
      const size_t last = static_cast<size_t>(after - busy.begin()) - 1;
      busySeconds = busyBefore[last] + std::min(busy[last].second, t) - busy[last].first;
    }
    return idleWatts * t + (busyWatts - idleWatts) * busySeconds;
  }

  // The counter's value at time t.
  double counter(double t) const {
    t = std::min(t, frozenAfter);
    const double last =
        t < firstUpdate
            ? 0.0
            : firstUpdate + updateSeconds * std::floor((t - firstUpdate) / updateSeconds);
    double joules = std::floor(energy(last) * 1e3) / 1e3;
    if (t >= resetAt) {
      joules -= std::floor(energy(resetAt) * 1e3) / 1e3;
    } else {
      joules += startJoules;
    }
    return wrap > 0.0 ? std::fmod(joules, wrap) : joules;
  }

  void launch() {
    now += launchSeconds;
    const double start = busy.empty() ? now : std::max(now, busy.back().second);
    busyBefore.push_back(busy.empty() ? 0.0 : busyBefore.back() + forwardSeconds);
    busy.push_back({start, start + forwardSeconds});
    if (synchronous) {
      now = busy.back().second;
    }
  }

  int64_t finished() const {
    return std::lower_bound(busy.begin(), busy.end(), now,
                            [](const auto& f, double s) { return f.second <= s; }) -
           busy.begin();
  }
};

class FakeCounter final : public EnergyCounter {
 public:
  explicit FakeCounter(FakeEnergyDevice& d, std::string notes = "") : d_(d), notes_(notes) {}
  std::string source() const override { return "fake counter"; }
  double wrapJoules() const override { return d_.wrap; }
  bool read(EnergyReading* out, std::string* why) override {
    d_.now += d_.pollSeconds;
    ++d_.reads;
    if (!d_.failRead.empty()) {
      *why = d_.failRead;
      return false;
    }
    *out = {d_.counter(d_.now), d_.now};
    return true;
  }
  std::string notes() override { return notes_; }

 private:
  FakeEnergyDevice& d_;
  std::string notes_;
};

class FakeQueue final : public ForwardQueue {
 public:
  explicit FakeQueue(FakeEnergyDevice& d) : d_(d) {}
  void launch() override { d_.launch(); }
  int64_t finished() override { return d_.finished(); }

 private:
  FakeEnergyDevice& d_;
};

}  // namespace torchutil::testing
