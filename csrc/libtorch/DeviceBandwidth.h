#pragma once
// Memory bandwidth (bytes/s) of the device a profile ran on, for the roofline
// (core/Roofline.h): the datasheet, the device's memory clock x bus width, or a timed copy.
#include <c10/core/Device.h>

#include <string>
#include <string_view>

#include "core/PeakTable.h"

namespace torchutil {

struct Bandwidth {
  double bytesPerSecond;
  std::string source;
};

// Datasheet, computed (CUDA: 2 x memory clock x bus width) or measured (the only source on a
// CPU); Auto takes the first that exists. Throws c10::ValueError when the asked one is
// unavailable on device.
Bandwidth deviceBandwidth(c10::Device device, RateSource source);

// Times copies of a large tensor (256 MiB on CPUs, 2 GiB on GPUs: far beyond the caches) and
// returns the best read + write bytes/s; cached per device for the life of the process.
double measuredCopyBandwidth(c10::Device device);

}  // namespace torchutil
