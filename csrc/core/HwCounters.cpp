#include "core/HwCounters.h"

#include <algorithm>
#include <stdexcept>

namespace torchutil::hw {

const char* counterSetName(CounterSet s) {
  switch (s) {
    case CounterSet::Flops: return "flops";
    case CounterSet::Throughput: return "throughput";
    case CounterSet::Timeline: return "timeline";
  }
  return "?";
}

std::vector<CounterSet> parseCounterSets(const std::vector<std::string>& names) {
  constexpr CounterSet kAll[] = {CounterSet::Flops, CounterSet::Throughput, CounterSet::Timeline};
  std::vector<CounterSet> sets;
  const auto add = [&](CounterSet s) {
    if (!hasSet(sets, s)) {
      sets.push_back(s);
    }
  };
  for (const std::string& name : names) {
    if (name == "all") {
      for (CounterSet s : kAll) {
        add(s);
      }
      continue;
    }
    bool found = false;
    for (CounterSet s : kAll) {
      if (name == counterSetName(s)) {
        add(s);
        found = true;
      }
    }
    if (!found) {
      throw std::invalid_argument("torchutil: unknown counter set '" + name +
                                  "'; counters= takes None, 'flops', 'throughput', 'timeline', "
                                  "'all' or a list of them");
    }
  }
  return sets;
}

const char* replayName(Replay r) {
  return r == Replay::Kernel ? "kernel" : "user";
}

Replay parseReplay(std::string_view name) {
  for (Replay r : {Replay::User, Replay::Kernel}) {
    if (name == replayName(r)) {
      return r;
    }
  }
  throw std::invalid_argument("torchutil: counter_replay must be 'user' or 'kernel', got '" +
                              std::string(name) + "'");
}

bool hasSet(const std::vector<CounterSet>& sets, CounterSet s) {
  return std::find(sets.begin(), sets.end(), s) != sets.end();
}

bool needsRangeProfiler(const std::vector<CounterSet>& sets) {
  return hasSet(sets, CounterSet::Flops) || hasSet(sets, CounterSet::Throughput);
}

bool needsPmSampling(const std::vector<CounterSet>& sets) {
  return hasSet(sets, CounterSet::Timeline);
}

}  // namespace torchutil::hw
