#include "cupti/CuptiStatus.h"

#include <cstdio>

#include "core/HardwareBackends.h"

namespace torchutil::cupti {
namespace {

HwFailure kindOf(CUptiResult status) {
  switch (status) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES: return HwFailure::NoPermission;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_INVALID_CHIP_NAME:
    case CUPTI_ERROR_API_NOT_IMPLEMENTED: return HwFailure::NotSupported;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED: return HwFailure::OtherProfiler;
    default: return HwFailure::Other;
  }
}

void toStderr(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
}

std::atomic<WarningSink> gSink{&toStderr};

}  // namespace

std::string failure(const char* call, CUptiResult status) {
  const char* msg = nullptr;
  if (cuptiGetResultString(status, &msg) != CUPTI_SUCCESS) {
    msg = nullptr;
  }
  return explainFailure(kindOf(status), call, msg != nullptr ? msg : "");
}

void setWarningSink(WarningSink sink) {
  gSink.store(sink != nullptr ? sink : &toStderr);
}

void warn(const std::string& message) {
  gSink.load()(message);
}

}  // namespace torchutil::cupti
