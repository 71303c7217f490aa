#pragma once
// Peak FLOP/s of a CPU computed from the CPU itself, as the datasheet row does for a GPU:
// cores x clock x FLOPs per clock of one core's widest vector (or matrix) unit in a dtype. It
// does not move with the machine's load, as a timed GEMM does (a measured peak moved 2-10x
// between runs of one loaded machine). Torch-free: it reads /proc/cpuinfo's text and the
// cpufreq limit handed to it, so GoogleTest covers every rule on any machine.
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/PeakTable.h"

namespace torchutil {

// What the peak needs from /proc/cpuinfo (the first processor's lines, and the count of
// physical cores among the processors this process may run on).
struct CpuDescription {
  std::string vendor;  // vendor_id: "GenuineIntel", "AuthenticAMD"
  std::string modelName;
  int family = -1;  // "cpu family"
  int model = -1;
  std::set<std::string> flags;
  double cpuinfoMHz = 0.0;  // "cpu MHz" of the first processor: the current clock
  int physicalCores = 0;    // distinct (physical id, core id) among the allowed processors
};

// Parses /proc/cpuinfo's text. allowed: the processor numbers this process may run on (its
// affinity); empty: all. Throws std::invalid_argument when the text holds no processor.
CpuDescription parseCpuinfo(std::string_view text, const std::set<int>& allowed = {});

// One core's arithmetic per clock in a dtype, and what it comes from ("2 FMA units x 256-bit
// (AVX2)"), or nullopt where no rule is known (float8 anywhere; int8 without VNNI or AMX).
struct CoreRate {
  double flopsPerClock = 0.0;
  std::string unit;
};
std::optional<CoreRate> cpuFlopsPerClock(const CpuDescription& cpu, PeakDtype dtype);

// The clock a peak is quoted at: the cpufreq limit (cpuinfo_max_freq, kHz) where the kernel
// gives one, else the nominal clock in the model name ("@ 2.60GHz"), else cpuinfo's "cpu MHz".
struct CpuClock {
  double hz = 0.0;
  std::string source;
};
std::optional<CpuClock> cpuClock(const CpuDescription& cpu, std::optional<double> cpufreqMaxKHz);

// cores x clock x FLOPs per clock per core, with its source text; nullopt where a part is
// missing. threads: the threads the process's GEMMs run on (torch's intra-op threads); the cores
// counted are min(threads, physical cores allowed): two threads of one core share its units.
std::optional<PeakValue> computedCpuPeak(const CpuDescription& cpu,
                                         std::optional<double> cpufreqMaxKHz, int threads,
                                         PeakDtype dtype);

}  // namespace torchutil
