#include "core/PmSamplerController.h"

#include <algorithm>
#include <utility>

namespace torchutil::hw {
namespace {

// Room in the image for the samples expected, with a margin: half as many again, and this many.
constexpr size_t kPmImageSlackSamples = 256;

}  // namespace

PmSamplerController::PmSamplerController(std::unique_ptr<PmSamplerApi> api)
    : api_(std::move(api)) {}

PmSamplerController::~PmSamplerController() {
  release();
}

void PmSamplerController::release() {
  api_.reset();  // stops and disables the sampler, before the claim goes
  claim_.reset();
  enabled_ = false;
  started_ = false;
}

bool PmSamplerController::setUp(int deviceIndex, const std::vector<CounterSet>& sets,
                                uint64_t intervalNs, size_t expectedSamples, std::string* why) {
  claim_.emplace();
  if (!claim_->owned()) {
    *why = counterReadBusyReason();
    release();
    return false;
  }
  if (!api_) {
    *why = "no PM sampler in this build";
    release();
    return false;
  }
  const auto fail = [&] {
    release();
    return false;
  };
  timeline_ = PmTimeline();
  size_t passes = 0;
  if (!api_->open(deviceIndex, why) ||
      !configureMetrics(*api_, sets, &resolvePmMetrics, &timeline_.metrics, &passes,
                        &timeline_.notOnThisChip, why)) {
    return fail();
  }
  // PM sampling reads one pass: while the metrics need more, the last (the least important:
  // the table lists SM activity first) is left out and named.
  ResolvedMetrics& metrics = timeline_.metrics;
  while (passes > 1 && metrics.names.size() > 1) {
    timeline_.leftOut.push_back(metrics.names.back() + " (not in one pass with the rest)");
    metrics.names.pop_back();
    metrics.index.pop_back();
    if (!api_->addMetrics(metrics.names, why) || !api_->buildConfig(&passes, why)) {
      return fail();
    }
  }
  if (passes != 1) {
    *why = "the timeline metrics need " + std::to_string(passes) + " passes; PM sampling reads one";
    return fail();
  }
  const size_t imageSamples =
      std::min(kPmImageSamples, expectedSamples + expectedSamples / 2 + kPmImageSlackSamples);
  if (!api_->enable(intervalNs, kPmHardwareBufferBytes, imageSamples, why)) {
    return fail();
  }
  enabled_ = true;
  timeline_.intervalNs = intervalNs;
  return true;
}

bool PmSamplerController::start(std::string* why) {
  if (!enabled_) {
    *why = "PM sampling was not set up";
    return false;
  }
  if (!api_->start(why)) {
    release();
    return false;
  }
  started_ = true;
  return true;
}

bool PmSamplerController::stop(PmTimeline* out, std::string* why) {
  bool ok = false;
  if (!started_) {
    *why = "PM sampling was not started";
  } else {
    started_ = false;
    ok = api_->stop(why) && decodeBuffer(why);
  }
  release();
  if (ok) {
    *out = std::move(timeline_);
  }
  return ok;
}

bool PmSamplerController::decodeBuffer(std::string* why) {
  // Decode until the hardware buffer is empty, into a fresh image whenever one fills up.
  bool done = false;
  while (!done) {
    PmDecoded d;
    if (!api_->decode(&d, why)) {
      return false;
    }
    if (d.bufferLost) {
      *why = "the PM sampler's " + std::to_string(kPmHardwareBufferBytes >> 20) +
             " MB hardware buffer overflowed at one sample per " +
             std::to_string(timeline_.intervalNs / 1000) +
             " us (cuptiPmSamplingDecodeData: CUPTI_ERROR_OUT_OF_MEMORY): the sampled forwards "
             "took longer than expected";
      return false;
    }
    timeline_.overflow = timeline_.overflow || d.overflow;
    for (size_t i = 0; i < d.samples; ++i) {
      PmSample sample;
      std::vector<double> values;
      if (!api_->sample(i, &sample.startNs, &sample.endNs, &values, why)) {
        return false;
      }
      sample.values = decodePmSample(timeline_.metrics, values);
      timeline_.samples.push_back(std::move(sample));
    }
    timeline_.cutShort = timeline_.samples.size() >= kPmMaxSamples;
    done = !d.imageFull || d.samples == 0 || timeline_.cutShort;
  }
  return true;
}

}  // namespace torchutil::hw
