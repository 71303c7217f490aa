#include "libtorch/HardwareBackends.h"

#include <cstdlib>
#include <string_view>

#include <c10/util/Exception.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <string>

#ifdef TORCHUTIL_WITH_CUPTI
#include "cupti/CuptiStatus.h"
#include "cupti/CuptiTracer.h"
#include "cupti/PmSampler.h"
#include "cupti/RangeProfiler.h"
#endif

namespace torchutil {
namespace {

#ifndef TORCHUTIL_WITH_CUPTI
constexpr const char* kNoCupti = "torchutil was built without CUPTI (see torchutil.build_info())";
#else
// CUPTI's warnings as Python's (TORCH_WARN), like every other warning of the extension.
void torchWarning(const std::string& message) {
  TORCH_WARN(message);
}
#endif

class DefaultTraceBackend final : public TraceBackend {
 public:
  DefaultTraceBackend() {
#ifdef TORCHUTIL_WITH_CUPTI
    cupti::setWarningSink(&torchWarning);
#endif
  }

  std::string unavailableReason(const HwDevice& device) const override {
    if (!device.cuda) {
      return "kernel tracing needs a CUDA device, got " + device.name;
    }
#ifdef TORCHUTIL_WITH_CUPTI
    if (torchProfilerRunning()) {
      return "torch.profiler is running; CUPTI serves one client at a time, so this profile "
             "reports FLOPs and event timing without kernel records";
    }
    return cupti::CuptiTracer::busyReason();
#else
    return kNoCupti;
#endif
  }

  std::unique_ptr<ActivityTrace> start(std::string* why, Correlation how) override {
#ifdef TORCHUTIL_WITH_CUPTI
    return cupti::CuptiTracer::start(why, how);
#else
    (void)how;
    *why = kNoCupti;
    return nullptr;
#endif
  }

  TraceHooks hooks() const override {
    TraceHooks h;
#ifdef TORCHUTIL_WITH_CUPTI
    h.clock = &cupti::CuptiTracer::timestamp;
    h.push = &cupti::CuptiTracer::pushExternalId;
    h.pop = &cupti::CuptiTracer::popExternalId;
#endif
    return h;
  }
};

class DefaultCounterBackend final : public hw::CounterBackend {
 public:
  std::string unavailableReason(const HwDevice& device) const override {
    if (!device.cuda) {
      return "hardware counters need a CUDA device, got " + device.name;
    }
#ifdef TORCHUTIL_WITH_CUPTI
    if (torchProfilerRunning()) {
      return "torch.profiler is running and holds CUPTI; hardware counters need it alone";
    }
    return "";
#else
    return kNoCupti;
#endif
  }

#ifdef TORCHUTIL_WITH_CUPTI
  std::unique_ptr<hw::RangeProfilerApi> rangeProfiler() override {
    return std::make_unique<cupti::RangeProfiler>();
  }
  std::unique_ptr<hw::PmSamplerApi> pmSampler() override {
    return std::make_unique<cupti::PmSampler>();
  }
#else  // never asked for: unavailableReason is never empty
  std::unique_ptr<hw::RangeProfilerApi> rangeProfiler() override {
    return nullptr;
  }
  std::unique_ptr<hw::PmSamplerApi> pmSampler() override {
    return nullptr;
  }
#endif
};

}  // namespace

TraceBackend& traceBackend(const HardwareBackends* backends) {
  static DefaultTraceBackend cuptiOrNone;
  return backends != nullptr && backends->trace != nullptr ? *backends->trace : cuptiOrNone;
}

hw::CounterBackend& counterBackend(const HardwareBackends* backends) {
  static DefaultCounterBackend cuptiOrNone;
  return backends != nullptr && backends->counters != nullptr ? *backends->counters : cuptiOrNone;
}

HwDevice hwDevice(c10::Device device) {
  HwDevice d;
  d.cuda = device.is_cuda();
  d.index = device.index();
  d.name = device.str();
  return d;
}

bool torchProfilerRunning() {
  return torch::profiler::impl::profilerEnabled() ||
         torch::autograd::profiler::isProfilerEnabledInMainThread();
}

}  // namespace torchutil
