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

// How a profile's trace correlates the counted forward's launches with its ops: capture nodes
// where the counted forward is captured (inCapture; Correlation::CaptureNodes, no CUPTI
// callback), markers for an eager counted forward, CUPTI's API records where the forward may run
// ops on other threads. The switch TORCHUTIL_CUPTI_CORRELATION (benchmarks/trace_cost.py, the
// oracle tests) takes =api: the API records always; =markers: markers always; =graph: graph
// nodes in a capture, whose CUPTI callback subscriber leaves the process's later eager launches
// slower (~1.3x on an H200, docs/results/reward/), as API records do, so it is opt-in.
Correlation correlationFor(bool forwardMayFork, bool inCapture);

}  // namespace torchutil
