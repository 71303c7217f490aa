#include "core/HardwareBackends.h"

namespace torchutil {

std::string explainFailure(HwFailure kind, std::string_view call, std::string_view message) {
  const std::string text = std::string(call) + " failed (" +
                           std::string(message.empty() ? "unknown error" : message) + ")";
  switch (kind) {
    case HwFailure::NoPermission:
      return "no permission to read GPU performance counters: the NVIDIA driver restricts them "
             "to administrators (NVreg_RestrictProfilingToAdminUsers=1); run as root or load "
             "the driver with NVreg_RestrictProfilingToAdminUsers=0. " +
             text;
    case HwFailure::NotSupported:
      return "hardware counters are not supported on this GPU, driver or sandbox (gVisor and "
             "some virtual machines hide them). " +
             text;
    case HwFailure::OtherProfiler:
      return "another profiler holds the GPU's counters (ncu, nsys, torch.profiler or DCGM "
             "profiling). " +
             text;
    case HwFailure::Other: break;
  }
  return text;
}

}  // namespace torchutil
