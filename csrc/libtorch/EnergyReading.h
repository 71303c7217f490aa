#pragma once
// Energy per forward for a profile (energy=True): the device's counter (NVML's for a CUDA
// device, RAPL's for the CPU, or a backend's: ProfileOptions::backends) read over windows of the
// call's own forwards, graph replays or eager (core/EnergyWindows.h). Never throws for the
// hardware: a counter that cannot be read is the text's "off: <why>" and NaN fields.
#include <c10/core/Device.h>

#include <string>

#include "core/EnergyWindows.h"
#include "core/HardwareBackends.h"
#include "libtorch/Timing.h"

namespace torchutil {

struct EnergyOutput {
  EnergyResult result;
  std::string text = "off: energy=False";  // the energy_source text
};

// backends->energy where given, else NVML's and RAPL's (or what a build without CUDA says).
EnergyBackend& energyBackend(const HardwareBackends* backends = nullptr);

// Runs the windows over runner's forwards on device (`what` names them in the text: "graph
// replays", "eager forwards"), then waits for the device. secondsPerForward (the timed median)
// sets how many forwards are queued ahead (EnergyPlan::aheadSeconds of work, at least
// plan.inFlight), so that the device never waits for the host's polls of the counter.
EnergyOutput measureEnergy(Runner& runner, c10::Device device, EnergyPlan plan,
                           const std::string& what, EnergyBackend& backend,
                           double secondsPerForward);

}  // namespace torchutil
