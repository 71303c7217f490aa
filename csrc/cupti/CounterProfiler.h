#pragma once
// CUPTI's hardware counters (CUDA 13: cupti_range_profiler.h, cupti_pmsampling.h and
// cupti_profiler_host.h) behind two small classes that never throw and never leave anything
// enabled: every CUPTI call is checked, and a failure ends the read with a sentence saying why
// (no permission, not supported, another profiler, ...). Built only with TORCHUTIL_WITH_CUPTI;
// torch-free. What the values mean is core/HwCounters.h.
//
// RangeProfiler: auto ranges (one per kernel) in user replay: the caller's forward runs once
// per pass until CUPTI has collected every pass, then each range is evaluated into metric values.
// PmSampler: GPU-wide PM sampling between start() and stop(), decoded into timed samples after
// the stop (the hardware buffer holds kPmBufferSamples; the caller chooses the interval).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/HwCounters.h"

namespace torchutil::cupti {

// Why CUPTI's counters cannot be read in this process now ("" when nothing is known against
// them): a read is already running (one at a time per process).
std::string counterReadBusyReason();

struct RangeProfile {
  hw::ResolvedMetrics metrics;              // the metrics read (names, table indices)
  std::vector<std::string> rangeNames;      // per range, as stored
  std::vector<std::vector<double>> values;  // per range, in metrics.names order
  size_t passes = 0;                        // forwards run (one per pass)
  size_t droppedRanges = 0;                 // ranges CUPTI could not store
  std::vector<std::string> notOnThisChip;   // metrics of the sets the chip does not have
};

class RangeProfiler {
 public:
  // forward(): one forward of the model on the device, returning after the device finished it.
  // Exceptions from forward() propagate after CUPTI is released.
  using Forward = std::function<void()>;
  // Reads the range metrics of `sets` on device deviceIndex (whose primary context must be
  // current: the caller has run CUDA work on it from this thread). maxRanges: the most kernels
  // one forward launches. Returns false and sets *why on failure.
  // replay: User runs forward() once per pass; Kernel runs it once and CUPTI replays each
  // kernel for its passes.
  static bool run(int deviceIndex, const std::vector<hw::CounterSet>& sets, hw::Replay replay,
                  size_t maxRanges, const Forward& forward, RangeProfile* out, std::string* why);
};

struct PmTimeline {
  hw::ResolvedMetrics metrics;
  std::vector<hw::PmSample> samples;  // sampler clock (ns)
  bool overflow = false;              // the hardware buffer filled up: later samples are lost
  bool cutShort = false;              // more samples than torchutil keeps: the last are left out
  std::vector<std::string> notOnThisChip;  // metrics the chip has no counter for
  std::vector<std::string> leftOut;        // metrics the chip has, left out (not in one pass)
  uint64_t intervalNs = 0;
};

class PmSampler {
 public:
  PmSampler();
  ~PmSampler();  // stops and releases whatever is still enabled
  PmSampler(const PmSampler&) = delete;
  PmSampler& operator=(const PmSampler&) = delete;

  // Configures sampling of the timeline metrics every intervalNs on device deviceIndex;
  // expectedSamples sizes the decoding buffer.
  bool setUp(int deviceIndex, const std::vector<hw::CounterSet>& sets, uint64_t intervalNs,
             size_t expectedSamples, std::string* why);
  bool start(std::string* why);
  // Stops sampling and decodes every sample; the sampler is released afterwards either way.
  bool stop(PmTimeline* out, std::string* why);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace torchutil::cupti
