#pragma once
// The parts of torchutil that need the CUDA runtime. Built only when TORCHUTIL_WITH_CUDA is
// defined (torch has CUDA and the CUDA toolkit headers were found at build time).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <string>
#include <vector>

#include "libtorch/Forward.h"

namespace torchutil::cuda {

struct DeviceInfo {
  std::string name;
  int major = 0;
  int minor = 0;
  int multiprocessors = 0;
  double clockHz = 0.0;              // maximum SM clock
  double memoryBytesPerSecond = 0.0; // 2 x memory clock x bus width
};

DeviceInfo deviceInfo(c10::DeviceIndex index);

// Captures one forward in a CUDA graph on a side stream and times `iters` replays with CUDA
// events after `warmup` replays; beforeTimed (if set) runs just before the timed replays, with
// the device idle.
std::vector<double> timeGraphReplays(Forward& forward, const std::vector<at::Tensor>& inputs,
                                     c10::Device device, int64_t warmup, int64_t iters,
                                     const std::function<void()>& beforeTimed);

}  // namespace torchutil::cuda
