#pragma once
// Times forwards: a steady clock on the CPU, device events on accelerators (one pair per
// forward, read after one synchronization), and CUDA-graph replays.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <string>
#include <vector>

#include "Forward.h"

namespace torchutil {

enum class TimingMode { Eager, CudaGraph };
const char* timingModeName(TimingMode m);

// Seconds per forward, one entry per timed forward. warmup forwards (or replays) run first;
// then, with the device idle, beforeTimed (if set) runs, and then the timed forwards.
std::vector<double> timeForwards(Forward& forward, const std::vector<at::Tensor>& inputs,
                                 c10::Device device, TimingMode mode, int64_t warmup,
                                 int64_t iters, const std::function<void()>& beforeTimed = {});

// Blocks until the device has finished all queued work (no-op on the CPU).
void synchronizeDevice(c10::Device device);

// The best rate of `call` on device, in `unitsPerCall` per second: repetitions of `perRep` calls,
// each synchronized at both ends, the first left out (library initialization, page faults),
// at most 12 and about 1.5 s. For the measured peaks (GEMM FLOP/s, copy bytes/s).
double bestRate(c10::Device device, const std::function<void()>& call, int perRep,
                double unitsPerCall);

// A measured value kept for the life of the process under key; measure runs once per key.
double memoized(const std::string& key, const std::function<double()>& measure);

// The device with its index: torch.device("cuda") has none and means the current device.
c10::Device concreteDevice(c10::Device device);

}  // namespace torchutil
