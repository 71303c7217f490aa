#pragma once
// The few NVML declarations torchutil uses, and the one sentence a failed NVML call becomes.
// NVML is loaded at run time (dlopen of the driver's libnvidia-ml.so.1, NvmlEnergy.cpp), so the
// build needs neither the library nor nvml.h, which CUDA toolkits ship only in an optional
// package (cuda-nvml-dev); these are copied from nvml.h (driver 580), whose ABI NVIDIA keeps
// for versioned entry points (the _v2/_v3 suffixes). Torch-free and CUDA-free.
//
//   TORCHUTIL_NVML_CHECK(lib, call, (args), why)  calls lib.call(args); on failure sets *why and
//                                                 returns false from the enclosing function.
#include <string>
#include <string_view>

namespace torchutil::nvml {

// nvmlReturn_t's values used here (nvml.h's enum).
enum Return : int {
  kSuccess = 0,
  kUninitialized = 1,
  kNotSupported = 3,
  kNoPermission = 4,
  kNotFound = 6,
  kInsufficientSize = 7,
  kDriverNotLoaded = 9,
  kLibraryNotFound = 12,
  kFunctionNotFound = 13,
  kGpuIsLost = 15,
  kLibRmVersionMismatch = 18,
  kUnknown = 999,
};

struct DeviceStruct;  // nvml.h's struct nvmlDevice_st
using Device = DeviceStruct*;

// nvmlProcessInfo_t (nvmlProcessInfo_v2_t), what nvmlDeviceGetComputeRunningProcesses_v3 fills.
struct ProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// The entry points, as nvml.h declares them.
using InitFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using HandleByPciBusIdFn = Return (*)(const char* pciBusId, Device* device);
using TotalEnergyFn = Return (*)(Device device, unsigned long long* millijoules);
using RunningProcessesFn = Return (*)(Device device, unsigned int* count, ProcessInfo* infos);

// What a failed call means for the user, with the call named and NVML's own text: "<meaning>.
// <call> failed (<message>)", or only "<call> failed (<message>)".
inline std::string failure(std::string_view call, Return status, std::string_view message) {
  const std::string text = std::string(call) + " failed (" +
                           std::string(message.empty() ? "unknown error" : message) + ")";
  switch (status) {
    case kNotSupported:
      return "this GPU has no total-energy counter (NVML's needs a Volta or newer GPU; virtual "
             "GPUs and some MIG slices hide it). " +
             text;
    case kNoPermission: return "no permission to read the GPU's energy through NVML. " + text;
    case kDriverNotLoaded:
    case kLibRmVersionMismatch:
      return "the NVIDIA driver is not loaded, or does not match its libnvidia-ml. " + text;
    case kGpuIsLost: return "the GPU has fallen off the bus. " + text;
    default: return text;
  }
}

}  // namespace torchutil::nvml

#define TORCHUTIL_NVML_CHECK(lib, call, args, why)             \
  do {                                                         \
    const ::torchutil::nvml::Return status_ = (lib).call args; \
    if (status_ != ::torchutil::nvml::kSuccess) {              \
      *(why) = (lib).failure(#call, status_);                  \
      return false;                                            \
    }                                                          \
  } while (0)
