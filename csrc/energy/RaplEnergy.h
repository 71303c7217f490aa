#pragma once
// A CPU's energy from RAPL (Running Average Power Limit) through Linux's powercap files: each
// package's top-level domain (<root>/intel-rapl:N, AMD's too) counts microjoules in energy_uj
// and wraps at max_energy_range_uj. Behind core's EnergyCounter: the packages' counters summed,
// each unwrapped as it is read. Torch-free; tests point it at a fake sysfs folder.
#include <memory>
#include <string>

#include "core/EnergyWindows.h"

namespace torchutil::rapl {

inline constexpr const char* kPowercapRoot = "/sys/class/powercap";

// The packages' counter under root, read once; null with *why where there is none or it cannot
// be read (Linux lets only root read energy_uj since 5.10).
std::unique_ptr<EnergyCounter> openEnergyCounter(const std::string& root, std::string* why);

}  // namespace torchutil::rapl
