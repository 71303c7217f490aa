#pragma once
// The hardware backends a profile uses by default: CUPTI's activity tracer and counter
// profilers where the build has CUPTI (TORCHUTIL_WITH_CUPTI), else backends that say the build
// lacks it. What they know beyond CUPTI is torch's: whether torch.profiler is running (it holds
// CUPTI meanwhile). A caller passes other backends (tests: fakes) through
// ProfileOptions::backends; the interfaces are core/HardwareBackends.h.
#include <c10/core/Device.h>

#include "core/HardwareBackends.h"

namespace torchutil {

// backends->trace / backends->counters where given, else the default.
TraceBackend& traceBackend(const HardwareBackends* backends = nullptr);
hw::CounterBackend& counterBackend(const HardwareBackends* backends = nullptr);

HwDevice hwDevice(c10::Device device);

// Whether torch.profiler (Kineto) is running in this process.
bool torchProfilerRunning();

}  // namespace torchutil
