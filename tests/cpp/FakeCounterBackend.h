#pragma once
// A CounterBackend fed hand-built counter data, for tests of the counter orchestration without a
// GPU (as kineto tests its range profiler with a MockCuptiRBProfilerSession that counts passes
// and ranges): the metrics the chip knows and those CUPTI refuses, the passes a configuration
// needs, ranges with metric values, PM samples, a flagged or a lost PM buffer, dropped ranges,
// and any step failing with the sentence CUPTI's would (explainFailure). It records what the
// orchestration asked of it: passes begun and ended, what was configured, what is still alive.
// Its clock (`now`, read through clock()) advances by stepSeconds[step] in each step, so that a
// test can tell what the orchestration timed.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/CounterConfig.h"
#include "core/HardwareBackends.h"

namespace torchutil::testing {

// The first candidate name of every metric of both tables: a chip that has them all knows them.
inline std::set<std::string> firstCandidates() {
  std::set<std::string> names;
  for (const auto* defs : {&hw::rangeMetricDefs(), &hw::pmMetricDefs()}) {
    for (const hw::MetricDef& d : *defs) {
      names.insert(d.candidates.front());
    }
  }
  return names;
}

// The table row a configured name reads (-1: none).
inline int rowOfName(const std::vector<hw::MetricDef>& defs, const std::string& name) {
  for (size_t i = 0; i < defs.size(); ++i) {
    for (const std::string& c : defs[i].candidates) {
      if (c == name) {
        return static_cast<int>(i);
      }
    }
  }
  return -1;
}

// Values by table row into the order of the configured names, as CUPTI evaluates them.
template <size_t N>
std::vector<double> inConfiguredOrder(const std::vector<hw::MetricDef>& defs,
                                      const std::vector<std::string>& configured,
                                      const std::array<double, N>& byRow) {
  std::vector<double> out;
  for (const std::string& name : configured) {
    const int row = rowOfName(defs, name);
    out.push_back(row >= 0 ? byRow[static_cast<size_t>(row)] : -1.0);
  }
  return out;
}

class FakeCounterBackend final : public hw::CounterBackend {
 public:
  // ---- What the fake reports ----
  std::string unavailable;  // unavailableReason()'s answer
  std::string chip = "GH100";
  std::set<std::string> known = firstCandidates();  // the names the chip has
  std::set<std::string> refused;  // names it has that CUPTI refuses in a configuration
  // A step to fail ("open", "enable", "beginPass", "endPass", "decode", "range" of the range
  // profiler; "pm.open", "pm.enable", "pm.start", "pm.stop", "pm.decode", "pm.sample" of the
  // sampler) -> the sentence it fails with.
  std::map<std::string, std::string> failAt;
  // A step (the names of failAt, and "buildConfig", "pm.buildConfig", "release" and
  // "pm.release" for the destructors) -> the seconds it advances the fake clock, failing or not.
  std::map<std::string, double> stepSeconds;
  double now = 1000;  // the fake clock, seconds
  // Range profiler.
  size_t passes = 1;          // the configuration's passes (buildConfig)
  size_t submittedAfter = 0;  // passes after which every pass is submitted (0: `passes`)
  std::vector<std::pair<std::string, hw::RangeValues>> ranges;  // name, values by RangeMetric
  size_t droppedRanges = 0;
  std::function<void(FakeCounterBackend&)> beforeDecode;  // may fill `ranges` late
  // PM sampler.
  size_t pmMetricsPerPass = 16;       // more configured metrics than this need two passes
  std::vector<hw::PmSample> samples;  // the hardware buffer, values by PmMetric
  bool overflowFlag = false;          // decoding flags an overflow
  bool bufferLost = false;            // decoding finds the buffer lost (CUPTI's OUT_OF_MEMORY)

  // ---- What happened ----
  int alive = 0;  // profiler and sampler objects not yet destroyed
  size_t passesBegun = 0;
  size_t passesEnded = 0;
  bool passOpenAtRelease = false;  // a profiler was destroyed with a pass open
  size_t stops = 0;                // sampler stop() calls
  hw::Replay replay = hw::Replay::User;
  size_t maxRanges = 0;
  std::vector<std::string> rangeMetrics;  // the range profiler's configuration
  std::vector<std::string> pmMetrics;     // the sampler's configuration
  uint64_t intervalNs = 0;
  size_t bufferBytes = 0;
  size_t imageSamples = 0;
  size_t decodes = 0;
  bool samplerRunningAtRelease = false;  // a sampler was destroyed while started
  // Whether this process's counter claim (core/CounterConfig.h) was still held when the last
  // profiler or sampler object was destroyed: CUPTI's destructors stop and disable what is still
  // on, which must happen before another read may begin.
  bool claimHeldAtRelease = false;

  std::string unavailableReason(const HwDevice&) const override { return unavailable; }
  std::unique_ptr<hw::RangeProfilerApi> rangeProfiler() override;
  std::unique_ptr<hw::PmSamplerApi> pmSampler() override;

  // The fake clock, for readRangeCounters(..., clock).
  std::function<double()> clock() {
    return [this] { return now; };
  }
  // Advances the fake clock by the step's seconds.
  void advance(const std::string& step) {
    const auto it = stepSeconds.find(step);
    if (it != stepSeconds.end()) {
      now += it->second;
    }
  }

  // Advances the clock by the step's seconds, then fails the step when failAt names it.
  bool fails(const std::string& step, std::string* why) {
    advance(step);
    const auto it = failAt.find(step);
    if (it == failAt.end()) {
      return false;
    }
    *why = it->second;
    return true;
  }
};

// The CounterHostApi part of both fakes; `prefix` names their steps in failAt ("" or "pm."),
// and each configuration built is recorded in *configured.
template <class Api>
class FakeHost : public Api {
 public:
  FakeHost(FakeCounterBackend& b, std::string prefix, std::vector<std::string>* configured)
      : b_(b), prefix_(std::move(prefix)), record_(configured) {
    b_.alive += 1;
  }
  ~FakeHost() override {
    b_.advance(prefix_ + "release");
    b_.alive -= 1;
  }

  bool open(int, std::string* why) override { return !b_.fails(prefix_ + "open", why); }
  std::string chip() const override { return b_.chip; }
  bool knows(const std::string& metric) const override { return b_.known.count(metric) > 0; }
  bool accepts(const std::string& metric) override { return b_.refused.count(metric) == 0; }
  bool addMetrics(const std::vector<std::string>& metrics, std::string* why) override {
    for (const std::string& m : metrics) {
      if (b_.refused.count(m) > 0) {
        *why = explainFailure(HwFailure::Other, "cuptiProfilerHostConfigAddMetrics(&p)",
                              "CUPTI_ERROR_INVALID_METRIC_NAME");
        return false;
      }
    }
    configured_ = metrics;
    return true;
  }
  bool buildConfig(size_t* passes, std::string*) override {
    b_.advance(prefix_ + "buildConfig");
    *passes = passesNeeded();
    *record_ = configured_;
    return true;
  }

 protected:
  virtual size_t passesNeeded() const = 0;

  FakeCounterBackend& b_;
  std::string prefix_;
  std::vector<std::string>* record_;
  std::vector<std::string> configured_;
};

class FakeRangeProfiler final : public FakeHost<hw::RangeProfilerApi> {
 public:
  explicit FakeRangeProfiler(FakeCounterBackend& b) : FakeHost(b, "", &b.rangeMetrics) {}
  ~FakeRangeProfiler() override {
    if (passOpen_) {
      b_.passOpenAtRelease = true;
    }
    b_.claimHeldAtRelease = !hw::counterReadBusyReason().empty();
  }

  bool enable(hw::Replay replay, size_t maxRanges, std::string* why) override {
    b_.replay = replay;
    b_.maxRanges = maxRanges;
    return !b_.fails("enable", why);
  }
  bool beginPass(std::string* why) override {
    if (b_.fails("beginPass", why)) {
      return false;
    }
    b_.passesBegun += 1;
    passOpen_ = true;
    return true;
  }
  bool endPass(bool* allSubmitted, std::string* why) override {
    passOpen_ = false;
    if (b_.fails("endPass", why)) {
      return false;
    }
    b_.passesEnded += 1;
    ended_ += 1;
    const size_t needed = b_.submittedAfter > 0 ? b_.submittedAfter : b_.passes;
    *allSubmitted = b_.replay == hw::Replay::Kernel || ended_ >= needed;
    return true;
  }
  bool decode(size_t* ranges, size_t* dropped, std::string* why) override {
    if (b_.beforeDecode) {
      b_.beforeDecode(b_);
    }
    *ranges = b_.ranges.size();
    *dropped = b_.droppedRanges;
    return !b_.fails("decode", why);
  }
  bool range(size_t i, std::string* name, std::vector<double>* values, std::string* why) override {
    if (b_.fails("range", why)) {
      return false;
    }
    *name = b_.ranges[i].first;
    *values = inConfiguredOrder(hw::rangeMetricDefs(), configured_, b_.ranges[i].second);
    return true;
  }

 private:
  size_t passesNeeded() const override { return b_.passes; }

  bool passOpen_ = false;
  size_t ended_ = 0;  // passes this profiler ended
};

class FakePmSampler final : public FakeHost<hw::PmSamplerApi> {
 public:
  explicit FakePmSampler(FakeCounterBackend& b) : FakeHost(b, "pm.", &b.pmMetrics) {}
  ~FakePmSampler() override {
    b_.samplerRunningAtRelease = b_.samplerRunningAtRelease || started_;
    b_.claimHeldAtRelease = !hw::counterReadBusyReason().empty();
  }

  bool enable(uint64_t intervalNs, size_t bufferBytes, size_t imageSamples,
              std::string* why) override {
    b_.intervalNs = intervalNs;
    b_.bufferBytes = bufferBytes;
    b_.imageSamples = imageSamples;
    return !b_.fails("pm.enable", why);
  }
  bool start(std::string* why) override {
    started_ = !b_.fails("pm.start", why);
    return started_;
  }
  bool stop(std::string* why) override {
    b_.stops += 1;
    started_ = false;
    return !b_.fails("pm.stop", why);
  }
  // Each decode fills a fresh image with up to imageSamples of the samples left.
  bool decode(hw::PmDecoded* out, std::string* why) override {
    if (b_.fails("pm.decode", why)) {
      return false;
    }
    b_.decodes += 1;
    *out = hw::PmDecoded();
    if (b_.bufferLost) {
      out->bufferLost = true;
      return true;
    }
    imageStart_ = next_;
    const size_t left = b_.samples.size() - next_;
    out->samples = std::min(left, b_.imageSamples);
    out->imageFull = left > b_.imageSamples;
    out->overflow = b_.overflowFlag;
    next_ += out->samples;
    return true;
  }
  bool sample(size_t i, uint64_t* startNs, uint64_t* endNs, std::vector<double>* values,
              std::string* why) override {
    if (b_.fails("pm.sample", why)) {
      return false;
    }
    const hw::PmSample& s = b_.samples[imageStart_ + i];
    *startNs = s.startNs;
    *endNs = s.endNs;
    *values = inConfiguredOrder(hw::pmMetricDefs(), configured_, s.values);
    return true;
  }

 private:
  size_t passesNeeded() const override { return configured_.size() > b_.pmMetricsPerPass ? 2 : 1; }

  bool started_ = false;
  size_t next_ = 0;        // the first sample not decoded yet
  size_t imageStart_ = 0;  // the first sample of the image decoded last
};

inline std::unique_ptr<hw::RangeProfilerApi> FakeCounterBackend::rangeProfiler() {
  return std::make_unique<FakeRangeProfiler>(*this);
}

inline std::unique_ptr<hw::PmSamplerApi> FakeCounterBackend::pmSampler() {
  return std::make_unique<FakePmSampler>(*this);
}

// Range values with everything NaN (not read) but the given metrics.
inline hw::RangeValues rangeValues(std::initializer_list<std::pair<hw::RangeMetric, double>> set) {
  hw::RangeValues v;
  v.fill(std::nan(""));
  for (const auto& [metric, value] : set) {
    v[static_cast<size_t>(metric)] = value;
  }
  return v;
}

}  // namespace torchutil::testing
