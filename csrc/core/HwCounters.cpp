#include "core/HwCounters.h"

#include <algorithm>
#include <stdexcept>

namespace torchutil::hw {

const EnumNames<CounterSet> kCounterSets{{CounterSet::Flops, "flops"},
                                         {CounterSet::Throughput, "throughput"},
                                         {CounterSet::Timeline, "timeline"}};

const char* counterSetName(CounterSet s) {
  return kCounterSets.name(s);
}

std::vector<CounterSet> parseCounterSets(const std::vector<std::string>& names) {
  std::vector<CounterSet> sets;
  const auto add = [&](CounterSet s) {
    if (!hasSet(sets, s)) {
      sets.push_back(s);
    }
  };
  for (const std::string& name : names) {
    if (name == "all") {
      for (const auto& [s, n] : kCounterSets.entries()) {
        add(s);
      }
    } else if (const std::optional<CounterSet> s = kCounterSets.find(name)) {
      add(*s);
    } else {
      throw std::invalid_argument("torchutil: unknown counter set '" + name +
                                  "'; counters= takes None, " + kCounterSets.listed(", ") +
                                  ", 'all' or a list of them");
    }
  }
  return sets;
}

const EnumNames<Replay> kReplays{{Replay::User, "user"}, {Replay::Kernel, "kernel"}};

const char* replayName(Replay r) {
  return kReplays.name(r);
}

Replay parseReplay(std::string_view name) {
  return kReplays.parse(name, "counter_replay");
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
