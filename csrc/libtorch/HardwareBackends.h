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

// Whether a trace detaches its tracer from the process when it ends (ActivityTrace::
// detachWhenDone): TORCHUTIL_CUPTI_TEARDOWN=1. Off by default: on an H200 a detach made every
// trace pay ~20 ms to attach again (tracing's cost budget is 5 ms a call). What it was for, the
// process's eager launches running 28-35 % slower after a trace with CUPTI's API records
// (docs/results/reward/), Correlation::Markers avoids by recording no API call.
bool teardownWanted();

// How a profile's trace correlates the counted forward's launches with its ops: markers (an
// eager counted forward), or CUPTI's API records where the forward may run ops on other threads.
// The switch TORCHUTIL_CUPTI_CORRELATION (benchmarks/trace_cost.py, the oracle tests) takes
// =api: the API records always; =graph: graph nodes where the counted forward can be the one a
// CUDA graph captures (inCapture): tracing then costs no eager forward, but CUPTI's callback
// subscriber it needs leaves the process's later eager launches slower (~1.33x on an H200,
// docs/results/reward/), as API records do, so it is not the default; =capture: the same
// attribution without CUPTI's callbacks (Correlation::CaptureNodes), until it has run on a GPU.
Correlation correlationFor(bool forwardMayFork, bool inCapture);

}  // namespace torchutil
