#pragma once
// The PM sampler's read, torch-free, over the steps of a PmSamplerApi: the timeline metrics
// configured (in one pass: those that do not fit are left out, and named), sampling between
// start() and stop(), and the hardware buffer decoded after the stop, image by image, into timed
// samples. CUPTI's steps are csrc/cupti/PmSampler.cpp; a fake's are
// tests/cpp/FakeCounterBackend.h.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/CounterConfig.h"
#include "core/HardwareBackends.h"

namespace torchutil::hw {

struct PmTimeline {
  ResolvedMetrics metrics;
  std::vector<PmSample> samples;  // sampler clock (ns)
  bool overflow = false;          // the hardware buffer filled up: later samples are lost
  bool cutShort = false;          // more samples than torchutil keeps: the last are left out
  std::vector<std::string> notOnThisChip;  // metrics the chip has no counter for
  std::vector<std::string> leftOut;        // metrics the chip has, left out (not in one pass)
  uint64_t intervalNs = 0;
};

class PmSamplerController {
 public:
  explicit PmSamplerController(std::unique_ptr<PmSamplerApi> api);
  ~PmSamplerController();  // releases whatever is still enabled
  PmSamplerController(const PmSamplerController&) = delete;
  PmSamplerController& operator=(const PmSamplerController&) = delete;

  // Configures sampling of the timeline metrics every intervalNs on device deviceIndex (in a
  // hardware buffer of kPmHardwareBufferBytes); expectedSamples sizes the decoding image.
  bool setUp(int deviceIndex, const std::vector<CounterSet>& sets, uint64_t intervalNs,
             size_t expectedSamples, std::string* why);
  bool start(std::string* why);
  // Stops sampling and decodes every sample; the sampler is released afterwards either way.
  bool stop(PmTimeline* out, std::string* why);

 private:
  // Drains the hardware buffer into timeline_ (sampling has stopped).
  bool decodeBuffer(std::string* why);
  void release();

  std::optional<CounterClaim> claim_;  // from setUp until the sampler is released
  std::unique_ptr<PmSamplerApi> api_;
  bool enabled_ = false;
  bool started_ = false;
  PmTimeline timeline_;
};

}  // namespace torchutil::hw
