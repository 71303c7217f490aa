#pragma once
// The parts of torchutil that need the CUDA runtime. Built only when TORCHUTIL_WITH_CUDA is
// defined (torch has CUDA and the CUDA toolkit headers were found at build time).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "libtorch/Forward.h"
#include "libtorch/Timing.h"

namespace torchutil::cuda {

struct DeviceInfo {
  std::string name;
  int major = 0;
  int minor = 0;
  int multiprocessors = 0;
  double clockHz = 0.0;               // maximum SM clock
  double memoryBytesPerSecond = 0.0;  // 2 x memory clock x bus width
};

DeviceInfo deviceInfo(c10::DeviceIndex index);

// Captures one forward in a CUDA graph on `warmed`, a side stream (captureStream()) the caller
// has already run the forward on, so that lazy initialization stays out of the graph; run()
// replays it. Throws c10::Error, with the CUDA state cleaned up, when the forward cannot be
// captured.
std::unique_ptr<Runner> captureGraph(Forward& forward, const std::vector<at::Tensor>& inputs,
                                     c10::Device device, c10::Stream warmed);

}  // namespace torchutil::cuda
