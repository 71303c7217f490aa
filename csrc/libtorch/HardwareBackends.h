#pragma once
// The hardware backends a profile uses by default: CUPTI's activity tracer and counter
// profilers where the build has CUPTI (TORCHUTIL_WITH_CUPTI), else backends that say the build
// lacks it. What they know beyond CUPTI is torch's: whether torch.profiler is running (it holds
// CUPTI meanwhile). A caller passes other backends (tests: fakes) through
// ProfileOptions::backends; the interfaces are core/HardwareBackends.h.
#include <c10/core/Device.h>

#include "core/HardwareBackends.h"
#include "core/ProfilePlan.h"

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

// TORCHUTIL_CUPTI_CORRELATION, read and parsed once per profile call; the plan
// (core/ProfilePlan.h) chooses the correlation from it. =api: the API records always;
// =markers: markers always; =graph: graph nodes in a capture, whose CUPTI callback subscriber
// leaves the process's later eager launches slower (~1.3x on an H200, docs/results/reward/), as
// API records do, so it is opt-in; =0: kernel records only (benchmarks/trace_cost.py).
CorrelationSwitch correlationSwitch();

}  // namespace torchutil
