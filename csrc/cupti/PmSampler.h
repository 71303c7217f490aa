#pragma once
// CUPTI's PM sampler (cupti_pmsampling.h), one call per step of hw::PmSamplerApi: GPU-wide
// sampling at a fixed interval into a hardware buffer, decoded into counter data images after
// the stop. The decode loop and the buffer's facts are core's (core/PmSamplerController.h,
// core/PmSamples.h). Built only with TORCHUTIL_WITH_CUPTI; torch-free.
#include <cupti_pmsampling.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cupti/CuptiStatus.h"
#include "cupti/ProfilerHost.h"

namespace torchutil::cupti {

class PmSampler final : public ProfilerHost<hw::PmSamplerApi> {
 public:
  PmSampler();
  // Stops the sampler where it still runs and disables it.
  ~PmSampler() override;

  bool open(int deviceIndex, std::string* why) override;
  bool enable(uint64_t intervalNs, size_t bufferBytes, size_t imageSamples,
              std::string* why) override;
  bool start(std::string* why) override;
  bool stop(std::string* why) override;
  bool decode(hw::PmDecoded* out, std::string* why) override;
  bool sample(size_t i, uint64_t* startNs, uint64_t* endNs, std::vector<double>* values,
              std::string* why) override;

 private:
  // CUPTI's parameters for a call on the sampler: zeroed, sized, the sampler set.
  template <class Params>
  Params onSampler(size_t structSize) const {
    Params p = params<Params>(structSize);
    p.pPmSamplingObject = sampler_;
    return p;
  }

  CUpti_PmSampling_Object* sampler_ = nullptr;
  bool started_ = false;
  int deviceIndex_ = 0;  // the device open() took
};

}  // namespace torchutil::cupti
