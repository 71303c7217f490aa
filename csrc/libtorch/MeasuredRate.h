#pragma once
// Measured device rates (the "measured" peak FLOP/s and copy bandwidth): a best-of timing loop
// and a per-process cache.
#include <c10/core/Device.h>

#include <functional>
#include <string>

namespace torchutil {

// The best rate of `call` on device, in `unitsPerCall` per second: repetitions of `perRep` calls,
// each synchronized at both ends, the first left out (library initialization, page faults),
// at most 12 and about 1.5 s. For the measured peaks (GEMM FLOP/s, copy bytes/s).
double bestRate(c10::Device device, const std::function<void()>& call, int perRep,
                double unitsPerCall);

// A measured value kept for the life of the process under key; measure runs once per key.
double memoized(const std::string& key, const std::function<double()>& measure);

}  // namespace torchutil
