#pragma once
// Hardware counters for one profile (counters="flops" | "throughput" | "timeline"): PM sampling
// around the traced forwards (forwards after the timed ones when nothing is traced),
// range-profiler passes after the timed forwards, and the matching of
// both to the kernel records and ops (core/HwResult.h). The counters come from a CounterBackend
// (CUPTI by default: libtorch/HardwareBackends.h) through the controllers of
// core/RangeProfilerController.h and core/PmSamplerController.h. Every failure is a sentence in
// the status, never an exception (but for an exception of the model's own forward); where the
// backend cannot read (no CUDA device, a build without CUPTI), the status says so and nothing
// runs.
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/HardwareBackends.h"
#include "core/HwCounters.h"
#include "core/HwResult.h"
#include "core/KernelTrace.h"
#include "libtorch/HardwareBackends.h"

namespace torchutil {

class CounterReading {
 public:
  // traced: the profile records kernels (the range counters are matched to them, so the
  // flops and throughput sets need it).
  CounterReading(c10::Device device, std::vector<hw::CounterSet> sets, bool traced,
                 uint64_t pmIntervalNs, hw::Replay replay = hw::Replay::User,
                 hw::CounterBackend& backend = counterBackend());
  ~CounterReading();
  CounterReading(const CounterReading&) = delete;
  CounterReading& operator=(const CounterReading&) = delete;

  // Whether the timeline was asked for and may be read.
  bool wantsTimeline() const;
  // Starts PM sampling when the timeline was asked for (the device is idle); once per profile.
  // windowSeconds: how long the sampled forwards are expected to take (<= 0: unknown), from
  // which the interval is chosen so that their samples fit the sampler's buffer.
  void startTimeline(double windowSeconds);
  // Stops PM sampling and decodes the samples (the device is idle); a no-op when not sampling.
  void stopTimeline();
  // The range profiler's passes: forward() runs one forward and waits for the device.
  // maxRanges: the most kernels one forward launches.
  void readRanges(const std::function<void()>& forward, size_t maxRanges);
  // Matches what was read to the profile's kernels (the counted forward's and the traced
  // ones) and ops; returns the status ("off", "off: <why>", "on", "on, partial: <what>").
  std::string finish(const std::vector<KernelRecord>& kernels, const std::vector<OpEvent>& events,
                     hw::HwResult* out);
  // The metrics of the sets asked for that this GPU has no counter for (comma-separated; ""
  // when none): permanent for the chip, so they do not make a read partial.
  std::string notOnGpu() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The wall clock of kernel records (CLOCK_REALTIME, ns).
uint64_t realtimeNs();

}  // namespace torchutil
