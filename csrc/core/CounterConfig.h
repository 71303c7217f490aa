#pragma once
// What the two counter controllers share, torch-free: the one counter read a process runs at a
// time, and the configuration of the metrics a profile asks for on what the chip has.
#include <string>
#include <vector>

#include "core/HardwareBackends.h"

namespace torchutil::hw {

// One counter read at a time in the process (CUPTI's profiler is one per context): held from
// before the profiler is opened until after it is released.
class CounterClaim {
 public:
  CounterClaim();
  ~CounterClaim();
  CounterClaim(const CounterClaim&) = delete;
  CounterClaim& operator=(const CounterClaim&) = delete;
  bool owned() const { return owned_; }

 private:
  bool owned_ = false;
};

// Why counters cannot be read in this process now ("" when nothing is known against them): a
// read is already running (one at a time per process).
std::string counterReadBusyReason();

using ResolveMetrics = ResolvedMetrics (*)(const std::vector<CounterSet>&, const KnownMetric&);

// Resolves the metrics of `sets` against what the chip knows (resolveRangeMetrics or
// resolvePmMetrics) and configures them on `api`: *metrics are those configured, *passes the
// passes they need, *notOnChip the keys of those the chip has no name for and the names CUPTI
// refuses in a configuration (found by trying each alone; they are left out).
bool configureMetrics(CounterHostApi& api, const std::vector<CounterSet>& sets,
                      ResolveMetrics resolve, ResolvedMetrics* metrics, size_t* passes,
                      std::vector<std::string>* notOnChip, std::string* why);

}  // namespace torchutil::hw
