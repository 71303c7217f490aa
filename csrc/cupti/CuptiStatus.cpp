#include "cupti/CuptiStatus.h"

#include <cstdio>

namespace torchutil::cupti {
namespace {

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
  return explainFailure(failureKind(status), call, msg != nullptr ? msg : "");
}

std::string cudaFailure(const char* call, cudaError_t error) {
  return std::string(call) + " failed (" + cudaGetErrorString(error) + ")";
}

void setWarningSink(WarningSink sink) {
  gSink.store(sink != nullptr ? sink : &toStderr);
}

void warn(const std::string& message) {
  gSink.load()(message);
}

}  // namespace torchutil::cupti
