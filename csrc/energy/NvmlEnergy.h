#pragma once
// NVML's total-energy counter of one GPU (nvmlDeviceGetTotalEnergyConsumption: mJ since the
// driver loaded, updated every 100 ms on an H200) behind core's EnergyCounter. libnvidia-ml is
// loaded at run time: the driver ships it, and torchutil links nothing of NVML. Torch-free and
// CUDA-free; the torch layer finds the GPU's PCI bus id (libtorch/EnergyReading.cpp).
#include <memory>
#include <set>
#include <string>

#include "core/EnergyWindows.h"
#include "energy/NvmlApi.h"

namespace torchutil::nvml {

// The name the driver's library is found by.
inline constexpr const char* kLibraryName = "libnvidia-ml.so.1";

// libnvidia-ml opened and initialized (nvmlInit_v2), with the entry points torchutil calls,
// named as NVML names them so that TORCHUTIL_NVML_CHECK names the call.
class Library {
 public:
  // The library at `path` (a name the loader searches for, or a path), opened and initialized
  // once per process and path and kept for the process; null with *why when it cannot be.
  static std::shared_ptr<Library> open(const std::string& path, std::string* why);

  // A failed call's sentence, with NVML's text for the status (nvmlErrorString).
  std::string failure(const char* call, Return status) const;

  HandleByPciBusIdFn nvmlDeviceGetHandleByPciBusId_v2 = nullptr;
  TotalEnergyFn nvmlDeviceGetTotalEnergyConsumption = nullptr;
  // Null in a library older than the call (then the processes on the GPU are not listed).
  RunningProcessesFn nvmlDeviceGetComputeRunningProcesses_v3 = nullptr;

 private:
  ErrorStringFn errorString_ = nullptr;
};

// The energy counter of the GPU at pciBusId (cudaDeviceGetPCIBusId's: NVML and CUDA may number
// the GPUs differently, the bus id names one device to both), `name` for its source text
// ("cuda:0"). Reads it once, so that a GPU without the counter or without permission is refused
// here: null with *why. Its notes() name the other processes seen on the GPU once the forwards
// started (started()) and after the windows.
std::unique_ptr<EnergyCounter> openEnergyCounter(std::shared_ptr<Library> library,
                                                 const std::string& pciBusId,
                                                 const std::string& name, std::string* why);

// The note on the processes NVML listed on the GPU (pids) for the process `self`: "" when it is
// alone, "1 other process on the GPU (pid 4242)", or what NVML's list could not tell (in a
// container it may list host pids, or none).
std::string otherProcessesNote(const std::set<unsigned>& pids, unsigned self);

}  // namespace torchutil::nvml
