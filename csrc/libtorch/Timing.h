#pragma once
// Times forwards: a steady clock on the CPU, device events on accelerators (one pair per
// forward, read after one synchronization), and CUDA-graph replays.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <string>
#include <vector>

#include "libtorch/Devices.h"
#include "libtorch/Forward.h"

namespace torchutil {

enum class TimingMode { Eager, CudaGraph };
const char* timingModeName(TimingMode m);

// Seconds per forward, one entry per timed forward. warmup forwards (or replays) run first;
// then, with the device idle, beforeTimed (if set) runs, and then the timed forwards.
std::vector<double> timeForwards(Forward& forward, const std::vector<at::Tensor>& inputs,
                                 c10::Device device, TimingMode mode, int64_t warmup,
                                 int64_t iters, const std::function<void()>& beforeTimed = {});

}  // namespace torchutil
