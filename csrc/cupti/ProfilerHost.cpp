#include "cupti/ProfilerHost.h"

#include <cupti.h>
#include <cupti_target.h>

#include "cupti/CuptiStatus.h"

namespace torchutil::cupti {

ProfilerLibrary::~ProfilerLibrary() {
  if (initialized_) {
    auto p =
        params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
    cuptiProfilerDeInitialize(&p);
  }
}

bool ProfilerLibrary::initialize(std::string* why) {
  auto p = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerInitialize(&p), why);
  initialized_ = true;
  return true;
}

bool chipName(int deviceIndex, std::string* name, std::string* why) {
  auto p = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  p.deviceIndex = static_cast<size_t>(deviceIndex);
  TORCHUTIL_CUPTI_CHECK(cuptiDeviceGetChipName(&p), why);
  if (p.pChipName == nullptr) {
    *why = "cuptiDeviceGetChipName returned no name";
    return false;
  }
  *name = p.pChipName;
  return true;
}

std::vector<const char*> cStrings(const std::vector<std::string>& names) {
  std::vector<const char*> out;
  out.reserve(names.size());
  for (const std::string& n : names) {
    out.push_back(n.c_str());
  }
  return out;
}

void HostObject::Deinitialize::operator()(CUpti_Profiler_Host_Object* host) const noexcept {
  auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(
      CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
  p.pHostObject = host;
  cuptiProfilerHostDeinitialize(&p);
}

bool HostObject::init(CUpti_ProfilerType type, const std::string& chip,
                      const std::vector<uint8_t>& avail, std::string* why) {
  host_.reset();
  auto p = params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  p.profilerType = type;
  p.pChipName = chip.c_str();
  p.pCounterAvailabilityImage = avail.empty() ? nullptr : avail.data();
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerHostInitialize(&p), why);
  host_.reset(p.pHostObject);
  if (!host_) {
    *why = "cuptiProfilerHostInitialize returned no host object";
    return false;
  }
  return true;
}

bool HostObject::knows(const std::string& metric) const {
  auto p = params<CUpti_Profiler_Host_GetMetricProperties_Params>(
      CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
  p.pHostObject = host_.get();
  p.pMetricName = metric.c_str();
  return cuptiProfilerHostGetMetricProperties(&p) == CUPTI_SUCCESS;
}

bool HostObject::addMetrics(const std::vector<std::string>& names, std::string* why) {
  auto p = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  p.pHostObject = host_.get();
  std::vector<const char*> ptrs = cStrings(names);
  p.ppMetricNames = ptrs.data();
  p.numMetrics = ptrs.size();
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerHostConfigAddMetrics(&p), why);
  return true;
}

bool HostObject::configImage(std::vector<uint8_t>* image, size_t* passes, std::string* why) {
  auto s = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  s.pHostObject = host_.get();
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerHostGetConfigImageSize(&s), why);
  if (s.configImageSize == 0) {
    *why = "CUPTI built an empty config image";
    return false;
  }
  image->assign(s.configImageSize, 0);
  auto g = params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  g.pHostObject = host_.get();
  g.configImageSize = image->size();
  g.pConfigImage = image->data();
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerHostGetConfigImage(&g), why);
  auto n = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  n.configImageSize = image->size();
  n.pConfigImage = image->data();
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerHostGetNumOfPasses(&n), why);
  *passes = n.numOfPasses;
  return true;
}

bool HostObject::evaluate(const std::vector<uint8_t>& counterData, size_t index,
                          const std::vector<std::string>& names, std::vector<double>* values,
                          std::string* why) const {
  std::vector<const char*> ptrs = cStrings(names);
  values->assign(names.size(), -1.0);
  auto p = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  p.pHostObject = host_.get();
  p.pCounterDataImage = counterData.data();
  p.counterDataImageSize = counterData.size();
  p.rangeIndex = index;
  p.ppMetricNames = ptrs.data();
  p.numMetrics = ptrs.size();
  p.pMetricValues = values->data();
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerHostEvaluateToGpuValues(&p), why);
  return true;
}

}  // namespace torchutil::cupti
