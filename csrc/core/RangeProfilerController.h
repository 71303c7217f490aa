#pragma once
// The range profiler's read, torch-free, over the steps of a RangeProfilerApi: the metrics
// configured, the replay passes run (the caller's forward once per pass), and each range decoded
// into metric values. CUPTI's steps are csrc/cupti/RangeProfiler.cpp; a fake's are
// tests/cpp/FakeCounterBackend.h.
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/EnergyWindows.h"
#include "core/HardwareBackends.h"

namespace torchutil::hw {

struct RangeProfile {
  ResolvedMetrics metrics;                  // the metrics read (names, table indices)
  std::vector<std::string> rangeNames;      // per range, as stored
  std::vector<std::vector<double>> values;  // per range, in metrics.names order
  size_t passes = 0;                        // forwards run (one per pass)
  size_t droppedRanges = 0;                 // ranges CUPTI could not store
  std::vector<std::string> notOnThisChip;   // metrics of the sets the chip does not have
  // Wall time of each stage of the read, seconds; NaN until the stage completed (a failed stage
  // and every one after it stay NaN). The claim, the profiler's creation and its release (the
  // profiler disabled, CUPTI's session ended) fall in none of them.
  //   setup: the profiler opened (CUPTI initialized, counter availability), the metrics
  //     configured (passes asked for), and enabled (config and counter data image set up);
  //   passes: every replay pass, begun, its forward run, ended, until CUPTI has them all;
  //   decode: what the passes collected decoded, and every range's name and values read.
  double setupSeconds = std::numeric_limits<double>::quiet_NaN();
  double passSeconds = std::numeric_limits<double>::quiet_NaN();
  double decodeSeconds = std::numeric_limits<double>::quiet_NaN();
};

// The most passes torchutil will run: a configuration needing more is refused up front.
constexpr size_t kMaxPasses = 64;
// User replay runs up to this many passes beyond the count CUPTI predicted before giving up.
constexpr size_t kExtraPasses = 2;

// Reads the range metrics of `sets` on device deviceIndex through `api`, which it releases
// before returning. maxRanges: the most kernels one forward launches. forward(): one forward of
// the model on the device, returning after the device finished it; Replay::User runs it once per
// pass, Replay::Kernel once (CUPTI replays each kernel for its passes). Returns false and sets
// *why on failure; an exception of forward() propagates after everything is released.
// clock(): seconds on a steady clock, read at each stage's start and end (tests pass a fake).
bool readRangeCounters(std::unique_ptr<RangeProfilerApi> api, int deviceIndex,
                       const std::vector<CounterSet>& sets, Replay replay, size_t maxRanges,
                       const std::function<void()>& forward, RangeProfile* out, std::string* why,
                       const std::function<double()>& clock = steadyClockSeconds);

}  // namespace torchutil::hw
