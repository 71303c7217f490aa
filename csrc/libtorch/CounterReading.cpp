#include "libtorch/CounterReading.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <ctime>
#include <limits>
#include <utility>

#include "core/CounterConfig.h"
#include "core/EnergyWindows.h"
#include "core/PmSamplerController.h"
#include "core/RangeProfilerController.h"

namespace torchutil {

uint64_t realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

std::string joined(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) {
    out += (out.empty() ? "" : sep) + p;
  }
  return out;
}

std::string setNames(const std::vector<hw::CounterSet>& sets) {
  std::vector<std::string> names;
  for (hw::CounterSet s : sets) {
    names.emplace_back(hw::counterSetName(s));
  }
  return joined(names, ", ");
}

// PM-sample alignment: searched +-this far around the first guess, in steps of a fifth of the
// sampling interval, over the samples near the traced kernels only.
constexpr int64_t kAlignSearchNs = 2000000;
constexpr size_t kAlignMaxSamples = 20000;
constexpr int64_t kAlignStepsPerInterval = 5;
constexpr int64_t kAlignMinStepNs = 100;
// Below this mean busy share of the active samples, the alignment is loose (and the status says
// so).
constexpr double kLooseAlignmentScore = 0.5;

}  // namespace

struct CounterReading::Impl {
  c10::Device device;
  hw::CounterBackend& backend;
  std::vector<hw::CounterSet> sets;
  uint64_t pmIntervalNs = 0;  // the least interval
  uint64_t intervalNs = 0;    // the one sampled at
  hw::Replay replay = hw::Replay::User;
  std::string off;                    // why nothing is read ("" when something may be)
  std::vector<std::string> problems;  // what could not be read, for the status
  std::vector<std::string> notes;     // what was read only in part
  std::vector<std::string> absent;    // metrics this GPU has no counter for
  // Range counters.
  bool rangesRead = false;
  std::vector<hw::RangeValues> ranges;  // in execution order
  size_t passes = 0;
  double rangeSeconds = 0;  // the whole read
  // Its stages (hw::HwResult's): NaN where not completed.
  double setupSeconds = std::numeric_limits<double>::quiet_NaN();
  double passSeconds = std::numeric_limits<double>::quiet_NaN();
  double decodeSeconds = std::numeric_limits<double>::quiet_NaN();
  // Timeline.
  bool timelineStarted = false;
  bool timelineRead = false;
  std::vector<hw::PmSample> samples;
  uint64_t windowStartNs = 0;  // the sampled forwards
  uint64_t windowEndNs = 0;
  std::unique_ptr<hw::PmSamplerController> sampler;

  Impl(c10::Device d, hw::CounterBackend& b) : device(d), backend(b) {}

  bool wants(hw::CounterSet s) const { return off.empty() && hw::hasSet(sets, s); }
};

CounterReading::CounterReading(c10::Device device, std::vector<hw::CounterSet> sets, bool traced,
                               uint64_t pmIntervalNs, hw::Replay replay,
                               hw::CounterBackend& backend)
    : impl_(std::make_unique<Impl>(device, backend)) {
  Impl& m = *impl_;
  m.sets = std::move(sets);
  m.pmIntervalNs = pmIntervalNs;
  m.replay = replay;
  if (m.sets.empty()) {
    m.off = "off";
    return;
  }
  if (device.is_meta()) {
    m.off = "off: nothing runs on the meta device";
    return;
  }
  std::string why = backend.unavailableReason(hwDevice(device));
  if (why.empty()) {
    why = hw::counterReadBusyReason();
  }
  if (!why.empty()) {
    m.off = "off: " + why;
    return;
  }
  if (hw::needsRangeProfiler(m.sets) && !traced) {
    m.problems.emplace_back(
        "flops/throughput need kernel tracing (trace=True): the counters are matched to the "
        "traced kernels");
    m.sets.erase(std::remove_if(m.sets.begin(), m.sets.end(),
                                [](hw::CounterSet s) { return s != hw::CounterSet::Timeline; }),
                 m.sets.end());
    if (m.sets.empty()) {
      m.off = "off: " + m.problems.back();
    }
  }
}

CounterReading::~CounterReading() = default;

void CounterReading::startTimeline(double windowSeconds) {
  Impl& m = *impl_;
  if (!m.wants(hw::CounterSet::Timeline) || m.timelineStarted) {
    return;
  }
  m.timelineStarted = true;
  m.intervalNs = hw::pmIntervalNs(m.pmIntervalNs, windowSeconds, hw::kPmBufferSamples);
  const size_t expected =
      windowSeconds > 0
          ? static_cast<size_t>(windowSeconds * 1e9 / static_cast<double>(m.intervalNs))
          : hw::kPmBufferSamples;
  m.sampler = std::make_unique<hw::PmSamplerController>(m.backend.pmSampler());
  std::string why;
  if (!m.sampler->setUp(static_cast<int>(m.device.index()), m.sets, m.intervalNs, expected, &why) ||
      !m.sampler->start(&why)) {
    m.problems.push_back("timeline: " + why);
    m.sampler.reset();
    return;
  }
  m.windowStartNs = realtimeNs();
}

void CounterReading::stopTimeline() {
  Impl& m = *impl_;
  if (!m.sampler) {
    return;
  }
  m.windowEndNs = realtimeNs();
  hw::PmTimeline timeline;
  std::string why;
  if (m.sampler->stop(&timeline, &why)) {
    m.samples = std::move(timeline.samples);
    m.timelineRead = true;
    if (timeline.overflow) {
      m.notes.emplace_back("timeline: the hardware buffer overflowed, later samples are lost");
    }
    if (timeline.cutShort) {
      m.notes.push_back("timeline: more samples than are kept (" +
                        std::to_string(m.samples.size()) + "); the last are left out");
    }
    if (!timeline.leftOut.empty()) {
      m.notes.push_back("timeline metrics left out: " + joined(timeline.leftOut, ", "));
    }
    m.absent.insert(m.absent.end(), timeline.notOnThisChip.begin(), timeline.notOnThisChip.end());
    if (m.samples.empty()) {
      m.problems.emplace_back("timeline: PM sampling returned no samples");
      m.timelineRead = false;
    }
  } else {
    m.problems.push_back("timeline: " + why);
  }
  m.sampler.reset();
}

void CounterReading::readRanges(const std::function<void()>& forward, size_t maxRanges) {
  Impl& m = *impl_;
  if (!m.wants(hw::CounterSet::Flops) && !m.wants(hw::CounterSet::Throughput)) {
    return;
  }
  std::vector<hw::CounterSet> rangeSets;
  for (hw::CounterSet s : m.sets) {
    if (s != hw::CounterSet::Timeline) {
      rangeSets.push_back(s);
    }
  }
  // The range profiler reads the current context: the device's (its primary context).
  c10::DeviceGuard guard(m.device);
  const double t0 = steadyClockSeconds();
  hw::RangeProfile profile;
  std::string why;
  const bool ok =
      hw::readRangeCounters(m.backend.rangeProfiler(), static_cast<int>(m.device.index()),
                            rangeSets, m.replay, maxRanges, forward, &profile, &why);
  m.rangeSeconds = steadyClockSeconds() - t0;
  m.passes = profile.passes;
  m.setupSeconds = profile.setupSeconds;
  m.passSeconds = profile.passSeconds;
  if (!ok) {
    m.problems.push_back(setNames(rangeSets) + ": " + why);
    return;
  }
  m.absent.insert(m.absent.end(), profile.notOnThisChip.begin(), profile.notOnThisChip.end());
  if (profile.droppedRanges > 0) {
    m.problems.push_back(setNames(rangeSets) + ": CUPTI dropped " +
                         std::to_string(profile.droppedRanges) + " ranges");
    return;
  }
  // The ranges decoded into metric values: part of the decode stage, and of the whole read.
  const double decodeStart = steadyClockSeconds();
  for (size_t r : hw::rangeOrder(profile.rangeNames)) {
    m.ranges.push_back(hw::decodeRange(profile.metrics, profile.values[r]));
  }
  const double end = steadyClockSeconds();
  m.decodeSeconds = profile.decodeSeconds + (end - decodeStart);
  m.rangeSeconds = end - t0;
  m.rangesRead = true;
}

std::string CounterReading::finish(const std::vector<KernelRecord>& kernels,
                                   const std::vector<OpEvent>& events, hw::HwResult* out) {
  Impl& m = *impl_;
  if (!m.off.empty()) {
    return m.off;
  }
  bool anyRead = false;
  if (m.rangesRead) {
    std::string why;
    if (hw::matchRanges(m.ranges, kernels, events, out, &why)) {
      out->passes = m.passes;
      out->seconds = m.rangeSeconds;
      out->setupSeconds = m.setupSeconds;
      out->passSeconds = m.passSeconds;
      out->decodeSeconds = m.decodeSeconds;
      anyRead = true;
    } else {
      m.problems.push_back(setNames(m.sets) + ": " + why);
    }
  }
  if (m.timelineRead) {
    out->timeline = true;
    out->samples = std::move(m.samples);
    out->windowStartNs = m.windowStartNs;
    out->windowEndNs = m.windowEndNs;
    out->intervalNs = m.intervalNs;
    out->kernelSpans = hw::attributedSpans(kernels, events);
    // Align the samples with the kernels' clock over the traced forwards (else over the sampled
    // window, where there is nothing to line up with but the window itself).
    uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
    for (const hw::Span& s : out->kernelSpans) {
      lo = std::min(lo, s.start);
      hi = std::max(hi, s.end);
    }
    if (out->kernelSpans.empty()) {
      lo = m.windowStartNs;
      hi = m.windowEndNs;
    }
    std::vector<hw::PmSample> near;
    for (const hw::PmSample& s : out->samples) {
      if (s.endNs + 2 * kAlignSearchNs > lo && s.startNs < hi + 2 * kAlignSearchNs) {
        near.push_back(s);
      }
    }
    if (near.empty()) {  // another clock: the first samples
      near.assign(out->samples.begin(),
                  out->samples.begin() +
                      static_cast<std::ptrdiff_t>(std::min(out->samples.size(), kAlignMaxSamples)));
    }
    if (near.size() > kAlignMaxSamples) {
      near.resize(kAlignMaxSamples);
    }
    const hw::PmAlignment a = hw::alignPmSamples(
        near, out->kernelSpans, lo, hi, hw::PmMetric::SmActivePct, kAlignSearchNs,
        std::max(static_cast<int64_t>(m.intervalNs) / kAlignStepsPerInterval, kAlignMinStepNs));
    out->offsetNs = a.offsetNs;
    if (!out->kernelSpans.empty() && a.score < kLooseAlignmentScore) {
      m.notes.push_back(
          "timeline: samples line up with the kernels only loosely (mean busy "
          "share of active samples " +
          std::to_string(a.score) + ")");
    }
    anyRead = true;
  }
  if (!anyRead) {
    return "off: " +
           (m.problems.empty() ? std::string("nothing was read") : joined(m.problems, "; "));
  }
  std::vector<std::string> partial = m.problems;
  partial.insert(partial.end(), m.notes.begin(), m.notes.end());
  return partial.empty() ? "on" : "on, partial: " + joined(partial, "; ");
}

bool CounterReading::wantsTimeline() const {
  return impl_->wants(hw::CounterSet::Timeline);
}

std::string CounterReading::notOnGpu() const {
  return joined(impl_->absent, ", ");
}

}  // namespace torchutil
