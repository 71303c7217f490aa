#include "core/CounterConfig.h"

#include <atomic>
#include <utility>

namespace torchutil::hw {
namespace {

std::atomic<bool> gBusy{false};

}  // namespace

CounterClaim::CounterClaim() {
  bool expected = false;
  owned_ = gBusy.compare_exchange_strong(expected, true);
}

CounterClaim::~CounterClaim() {
  if (owned_) {
    gBusy.store(false);
  }
}

std::string counterReadBusyReason() {
  return gBusy.load() ? "another torchutil profile is reading hardware counters in this process"
                      : "";
}

bool configureMetrics(CounterHostApi& api, const std::vector<CounterSet>& sets,
                      ResolveMetrics resolve, ResolvedMetrics* metrics, size_t* passes,
                      std::vector<std::string>* notOnChip, std::string* why) {
  *metrics = resolve(sets, [&](const std::string& n) { return api.knows(n); });
  *notOnChip = metrics->missing;
  if (metrics->empty()) {
    *why = "the chip " + api.chip() + " has none of the metrics of the counter sets asked for";
    return false;
  }
  std::string addWhy;
  if (!api.addMetrics(metrics->names, &addWhy)) {
    // One refused name makes CUPTI refuse the whole configuration: find those it refuses.
    ResolvedMetrics kept;
    for (size_t i = 0; i < metrics->names.size(); ++i) {
      if (api.accepts(metrics->names[i])) {
        kept.index.push_back(metrics->index[i]);
        kept.names.push_back(metrics->names[i]);
      } else {
        notOnChip->push_back(metrics->names[i]);
      }
    }
    if (kept.empty()) {
      *why = "CUPTI refused every metric of the counter sets: " + addWhy;
      return false;
    }
    kept.missing = *notOnChip;
    *metrics = std::move(kept);
    if (!api.addMetrics(metrics->names, why)) {
      return false;
    }
  }
  return api.buildConfig(passes, why);
}

}  // namespace torchutil::hw
