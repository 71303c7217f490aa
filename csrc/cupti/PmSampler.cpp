#include "cupti/PmSampler.h"

#include <cupti.h>

#include <utility>

#include "cupti/CuptiStatus.h"

namespace torchutil::cupti {

PmSampler::PmSampler() : ProfilerHost(CUPTI_PROFILER_TYPE_PM_SAMPLING) {}

PmSampler::~PmSampler() {
  if (sampler_ == nullptr) {
    return;
  }
  if (started_) {
    auto p = onSampler<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
    cuptiPmSamplingStop(&p);
  }
  auto p = onSampler<CUpti_PmSampling_Disable_Params>(CUpti_PmSampling_Disable_Params_STRUCT_SIZE);
  cuptiPmSamplingDisable(&p);
}

bool PmSampler::open(int deviceIndex, std::string* why) {
  if (!initialize(deviceIndex, why)) {
    return false;
  }
  deviceIndex_ = deviceIndex;
  auto p = params<CUpti_PmSampling_GetCounterAvailability_Params>(
      CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
  p.deviceIndex = static_cast<size_t>(deviceIndex);
  TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingGetCounterAvailability(&p), why);
  std::vector<uint8_t> avail(p.counterAvailabilityImageSize, 0);
  p.pCounterAvailabilityImage = avail.data();
  TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingGetCounterAvailability(&p), why);
  return openHost(std::move(avail), why);
}

bool PmSampler::enable(uint64_t intervalNs, size_t bufferBytes, size_t imageSamples,
                       std::string* why) {
  {
    auto p = params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
    p.deviceIndex = static_cast<size_t>(deviceIndex_);
    TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingEnable(&p), why);
    sampler_ = p.pPmSamplingObject;
  }
  if (sampler_ == nullptr) {
    *why = "cuptiPmSamplingEnable returned no sampler object";
    return false;
  }
  {
    auto p =
        onSampler<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
    p.configSize = config().size();
    p.pConfig = config().data();
    p.hardwareBufferSize = bufferBytes;
    p.samplingInterval = intervalNs;
    p.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    // KEEP_OLDEST: an overflow is an error at decoding, never records silently overwritten.
    p.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingSetConfig(&p), why);
  }
  auto p = onSampler<CUpti_PmSampling_GetCounterDataSize_Params>(
      CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
  p.maxSamples = static_cast<uint32_t>(imageSamples);
  std::vector<const char*> names = cStrings(metrics());
  p.pMetricNames = names.data();
  p.numMetrics = names.size();
  TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingGetCounterDataSize(&p), why);
  counterData().assign(p.counterDataSize, 0);
  return true;
}

bool PmSampler::start(std::string* why) {
  auto p = onSampler<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
  TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingStart(&p), why);
  started_ = true;
  return true;
}

bool PmSampler::stop(std::string* why) {
  auto p = onSampler<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
  started_ = false;
  TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingStop(&p), why);
  return true;
}

bool PmSampler::decode(hw::PmDecoded* out, std::string* why) {
  *out = hw::PmDecoded();
  std::vector<uint8_t>& data = counterData();
  // Each decode starts a fresh image: the samples of the one before are evaluated already.
  auto init = onSampler<CUpti_PmSampling_CounterDataImage_Initialize_Params>(
      CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pCounterData = data.data();
  init.counterDataSize = data.size();
  TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingCounterDataImageInitialize(&init), why);
  auto d =
      onSampler<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
  d.pCounterDataImage = data.data();
  d.counterDataImageSize = data.size();
  // CUPTI_ERROR_OUT_OF_MEMORY is not a failure of the call but what it found
  // (cupti_pmsampling.h: "record overflow in the hardware buffer"), so it is checked here.
  const CUptiResult decoded = cuptiPmSamplingDecodeData(&d);
  if (decoded == CUPTI_ERROR_OUT_OF_MEMORY) {
    out->bufferLost = true;
    return true;
  }
  if (decoded != CUPTI_SUCCESS) {
    *why = failure("cuptiPmSamplingDecodeData(&d)", decoded);
    return false;
  }
  out->overflow = d.overflow != 0;
  out->imageFull = d.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
  auto info = params<CUpti_PmSampling_GetCounterDataInfo_Params>(
      CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = data.data();
  info.counterDataImageSize = data.size();
  TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingGetCounterDataInfo(&info), why);
  out->samples = info.numCompletedSamples;
  return true;
}

bool PmSampler::sample(size_t i, uint64_t* startNs, uint64_t* endNs, std::vector<double>* values,
                       std::string* why) {
  auto p = onSampler<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(
      CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
  p.pCounterDataImage = counterData().data();
  p.counterDataImageSize = counterData().size();
  p.sampleIndex = i;
  TORCHUTIL_CUPTI_CHECK(cuptiPmSamplingCounterDataGetSampleInfo(&p), why);
  *startNs = p.startTimestamp;
  *endNs = p.endTimestamp;
  return evaluate(i, values, why);
}

}  // namespace torchutil::cupti
