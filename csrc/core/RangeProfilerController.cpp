#include "core/RangeProfilerController.h"

#include <algorithm>
#include <utility>

#include "core/CounterConfig.h"

namespace torchutil::hw {

bool readRangeCounters(std::unique_ptr<RangeProfilerApi> api, int deviceIndex,
                       const std::vector<CounterSet>& sets, Replay replay, size_t maxRanges,
                       const std::function<void()>& forward, RangeProfile* out, std::string* why,
                       const std::function<double()>& clock) {
  *out = RangeProfile();
  CounterClaim claim;
  if (!claim.owned()) {
    *why = counterReadBusyReason();
    return false;
  }
  // Released before the claim, on every path out of here.
  const std::unique_ptr<RangeProfilerApi> profiler = std::move(api);
  maxRanges = std::max<size_t>(maxRanges, 1);
  if (!profiler) {
    *why = "no range profiler in this build";
    return false;
  }
  const double setupStart = clock();
  size_t passes = 0;
  if (!profiler->open(deviceIndex, why) ||
      !configureMetrics(*profiler, sets, &resolveRangeMetrics, &out->metrics, &passes,
                        &out->notOnThisChip, why)) {
    return false;
  }
  if (passes == 0 || passes > kMaxPasses) {
    *why = "the counter sets need " + std::to_string(passes) + " replay passes (at most " +
           std::to_string(kMaxPasses) + " are run)";
    return false;
  }
  if (!profiler->enable(replay, maxRanges, why)) {
    return false;
  }
  const double passStart = clock();
  out->setupSeconds = passStart - setupStart;
  // User replay: one forward per pass, until CUPTI says every pass was submitted. Kernel
  // replay: CUPTI replays each kernel for its passes, so one forward submits them all. A pass
  // left open by a throwing forward is ended by the profiler's destructor.
  bool allSubmitted = false;
  for (size_t pass = 0; pass < passes + kExtraPasses && !allSubmitted; ++pass) {
    if (!profiler->beginPass(why)) {
      return false;
    }
    forward();
    if (!profiler->endPass(&allSubmitted, why)) {
      return false;
    }
    out->passes += 1;
  }
  if (!allSubmitted) {
    *why = "CUPTI had not collected every pass after " + std::to_string(out->passes) +
           " forwards (it asked for " + std::to_string(passes) + ")";
    return false;
  }
  const double decodeStart = clock();
  out->passSeconds = decodeStart - passStart;
  size_t ranges = 0;
  if (!profiler->decode(&ranges, &out->droppedRanges, why)) {
    return false;
  }
  for (size_t r = 0; r < ranges; ++r) {
    std::string name;
    std::vector<double> values;
    if (!profiler->range(r, &name, &values, why)) {
      return false;
    }
    out->rangeNames.push_back(std::move(name));
    out->values.push_back(std::move(values));
  }
  out->decodeSeconds = clock() - decodeStart;
  return true;
}

}  // namespace torchutil::hw
