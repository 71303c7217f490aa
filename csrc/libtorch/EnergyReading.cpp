#include "libtorch/EnergyReading.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "energy/NvmlEnergy.h"
#include "energy/RaplEnergy.h"
#include "libtorch/Devices.h"
#include "libtorch/HardwareBackends.h"

#ifdef TORCHUTIL_WITH_CUDA
#include "cuda/CudaSupport.h"
#endif

namespace torchutil {
namespace {

class DefaultEnergyBackend final : public EnergyBackend {
 public:
  std::unique_ptr<EnergyCounter> open(const HwDevice& device, std::string* why) override {
    if (device.cuda) {
#ifdef TORCHUTIL_WITH_CUDA
      std::shared_ptr<nvml::Library> lib = nvml::Library::open(nvml::kLibraryName, why);
      if (!lib) {
        return nullptr;
      }
      const std::string busId =
          cuda::deviceInfo(static_cast<c10::DeviceIndex>(device.index)).pciBusId;
      return nvml::openEnergyCounter(std::move(lib), busId, device.name, why);
#else
      *why = "torchutil was built without CUDA (see torchutil.build_info())";
      return nullptr;
#endif
    }
    if (device.name == "cpu") {
      return rapl::openEnergyCounter(rapl::kPowercapRoot, why);
    }
    *why = "energy is read on CUDA devices (NVML) and CPUs (RAPL), not " + device.name;
    return nullptr;
  }
};

// The runner's forwards as the windows drive them: on a device each launch records an event on
// the runner's stream, and the events that have completed are the forwards finished; on the CPU
// a forward finishes inside launch().
class RunnerQueue final : public ForwardQueue {
 public:
  RunnerQueue(Runner& runner, c10::Device device)
      : runner_(runner), device_(device), stream_(runner.stream()) {}

  void launch() override {
    runner_.run();
    checkInterrupt();
    if (stream_.has_value()) {
      pending_.emplace_back(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
      pending_.back().record(*stream_);
    } else {
      ++finished_;
    }
  }

  int64_t finished() override {
    while (!pending_.empty() && pending_.front().query()) {
      pending_.pop_front();
      ++finished_;
    }
    return finished_;
  }

 private:
  Runner& runner_;
  c10::Device device_;
  std::optional<c10::Stream> stream_;
  std::deque<c10::Event> pending_;
  int64_t finished_ = 0;
};

}  // namespace

EnergyBackend& energyBackend(const HardwareBackends* backends) {
  static DefaultEnergyBackend defaultBackend;
  return backends != nullptr && backends->energy != nullptr ? *backends->energy : defaultBackend;
}

EnergyOutput measureEnergy(Runner& runner, c10::Device device, EnergyPlan plan,
                           const std::string& what, EnergyBackend& backend,
                           double secondsPerForward) {
  // The timed pace says how many forwards make EnergyPlan::aheadSeconds of work.
  if (secondsPerForward > 0.0 && std::isfinite(secondsPerForward)) {
    plan.forwardSeconds = secondsPerForward;
  }
  EnergyOutput out;
  std::string why;
  std::unique_ptr<EnergyCounter> counter = backend.open(hwDevice(device), &why);
  if (!counter) {
    out.result.refusal = why;
    out.text = describeEnergy(out.result, "", what);
    return out;
  }
  c10::DeviceGuard guard(device);
  synchronizeDevice(device);
  RunnerQueue queue(runner, device);
  out.result = torchutil::measureEnergy(*counter, queue, plan);
  synchronizeDevice(device);  // a refusal may leave forwards queued
  if (const std::string pace = paceNote(out.result, secondsPerForward); !pace.empty()) {
    out.result.notes += (out.result.notes.empty() ? "" : "; ") + pace;
  }
  out.text = describeEnergy(out.result, counter->source(), what);
  return out;
}

}  // namespace torchutil
