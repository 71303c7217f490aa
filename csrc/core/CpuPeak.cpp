#include "core/CpuPeak.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace torchutil {
namespace {

std::string_view trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

int toInt(std::string_view s) {
  int v = -1;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

bool has(const CpuDescription& cpu, const char* flag) {
  return cpu.flags.count(flag) > 0;
}

// The vector datapath of one FMA unit in bits, and how many FMA units a core has. AMD's Zen 1
// splits 256-bit work over 128-bit units; Zen 4 runs AVX-512 on 256-bit units (double-pumped);
// Zen 5 and Intel's AVX-512 cores have 512-bit units. Two FMA units a core is the rule for
// every x86 core with FMA since Haswell and Zen 1 (some Xeon Bronze/Silver parts have one
// 512-bit unit: the source text says what was assumed).
struct VectorUnits {
  int bits = 0;
  int units = 0;
  std::string isa;
};

VectorUnits vectorUnits(const CpuDescription& cpu) {
  const bool amd = cpu.vendor == "AuthenticAMD" || cpu.vendor == "HygonGenuine";
  if (has(cpu, "avx512f")) {
    const bool halfWidth = amd && cpu.family <= 0x19;  // Zen 4
    return {halfWidth ? 256 : 512, 2, halfWidth ? "AVX-512 on 256-bit units" : "AVX-512"};
  }
  if (has(cpu, "fma") && has(cpu, "avx2")) {
    const bool zen1 = amd && cpu.family == 0x17 && cpu.model < 0x30;
    return {zen1 ? 128 : 256, 2, zen1 ? "AVX2 on 128-bit units" : "AVX2"};
  }
  if (has(cpu, "avx")) {
    return {256, 1, "AVX, one multiply and one add unit"};  // counted as one FMA's two FLOPs
  }
  if (has(cpu, "sse2")) {
    return {128, 1, "SSE2, one multiply and one add unit"};
  }
  return {};
}

}  // namespace

CpuDescription parseCpuinfo(std::string_view text, const std::set<int>& allowed) {
  CpuDescription cpu;
  std::set<std::pair<int, int>> cores;
  int processor = -1;
  int physicalId = 0;
  int coreId = -1;
  bool first = true;
  int processors = 0;
  auto closeProcessor = [&] {
    if (processor >= 0 && (allowed.empty() || allowed.count(processor) > 0)) {
      ++processors;
      cores.insert({physicalId, coreId >= 0 ? coreId : processor});
    }
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      continue;
    }
    const std::string_view key = trimmed(line.substr(0, colon));
    const std::string_view value = trimmed(line.substr(colon + 1));
    if (key == "processor") {
      closeProcessor();
      if (processor >= 0) {
        first = false;
      }
      processor = toInt(value);
      physicalId = 0;
      coreId = -1;
    } else if (key == "physical id") {
      physicalId = toInt(value);
    } else if (key == "core id") {
      coreId = toInt(value);
    } else if (!first) {
      continue;
    } else if (key == "vendor_id") {
      cpu.vendor = value;
    } else if (key == "model name") {
      cpu.modelName = value;
    } else if (key == "cpu family") {
      cpu.family = toInt(value);
    } else if (key == "model") {
      cpu.model = toInt(value);
    } else if (key == "cpu MHz") {
      cpu.cpuinfoMHz = std::strtod(std::string(value).c_str(), nullptr);
    } else if (key == "flags") {
      std::istringstream words{std::string(value)};
      for (std::string w; words >> w;) {
        cpu.flags.insert(w);
      }
    }
    if (end == text.size()) {
      break;
    }
  }
  closeProcessor();
  if (processor < 0) {
    throw std::invalid_argument("no 'processor' line in the CPU description (/proc/cpuinfo)");
  }
  cpu.physicalCores = static_cast<int>(cores.size());
  return cpu;
}

std::optional<CoreRate> cpuFlopsPerClock(const CpuDescription& cpu, PeakDtype dtype) {
  const VectorUnits v = vectorUnits(cpu);
  if (v.units == 0) {
    return std::nullopt;
  }
  // FP32 lanes x 2 FLOPs an FMA x units: the rate every other dtype is stated against.
  const double fp32 = 2.0 * (v.bits / 32) * v.units;
  std::ostringstream unit;
  unit << v.units << " FMA unit" << (v.units > 1 ? "s" : "") << " x " << v.bits << "-bit (" << v.isa
       << ")";
  const std::string vector = unit.str();
  switch (dtype) {
    case PeakDtype::FP64: return CoreRate{fp32 / 2, vector};
    case PeakDtype::FP32:
    case PeakDtype::TF32: return CoreRate{fp32, vector};
    case PeakDtype::BF16:
      if (has(cpu, "amx_bf16")) {
        return CoreRate{1024.0, "AMX-BF16 tiles"};
      }
      if (has(cpu, "avx512_bf16")) {  // a dot product of two bf16 pairs per 32-bit lane
        return CoreRate{2 * fp32, vector + ", bf16 dot products (AVX512_BF16)"};
      }
      return CoreRate{fp32, vector + ", bf16 computed as float32"};
    case PeakDtype::FP16:
      if (has(cpu, "amx_fp16")) {
        return CoreRate{1024.0, "AMX-FP16 tiles"};
      }
      if (has(cpu, "avx512_fp16")) {  // 16-bit lanes: twice float32's
        return CoreRate{2 * fp32, vector + ", fp16 arithmetic (AVX512_FP16)"};
      }
      return CoreRate{fp32, vector + ", fp16 computed as float32"};
    case PeakDtype::INT8:
      if (has(cpu, "amx_int8")) {
        return CoreRate{2048.0, "AMX-INT8 tiles"};
      }
      if (has(cpu, "avx512_vnni") || has(cpu, "avx_vnni")) {  // four int8 products per lane
        return CoreRate{4 * fp32, vector + ", int8 dot products (VNNI)"};
      }
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::optional<CpuClock> cpuClock(const CpuDescription& cpu, std::optional<double> cpufreqMaxKHz) {
  if (cpufreqMaxKHz.has_value() && *cpufreqMaxKHz > 0) {
    return CpuClock{*cpufreqMaxKHz * 1e3, "cpufreq's cpuinfo_max_freq"};
  }
  static const std::regex nominal(R"(@\s*([0-9]+(\.[0-9]+)?)\s*GHz)");
  std::smatch m;
  if (std::regex_search(cpu.modelName, m, nominal)) {
    return CpuClock{std::stod(m[1].str()) * 1e9, "the model name's nominal clock"};
  }
  if (cpu.cpuinfoMHz > 0) {
    return CpuClock{cpu.cpuinfoMHz * 1e6, "/proc/cpuinfo's cpu MHz"};
  }
  return std::nullopt;
}

std::optional<PeakValue> computedCpuPeak(const CpuDescription& cpu,
                                         std::optional<double> cpufreqMaxKHz, int threads,
                                         PeakDtype dtype) {
  const auto rate = cpuFlopsPerClock(cpu, dtype);
  const auto clock = cpuClock(cpu, cpufreqMaxKHz);
  const int cores = std::min(threads, cpu.physicalCores);
  if (!rate.has_value() || !clock.has_value() || cores <= 0) {
    return std::nullopt;
  }
  std::ostringstream src;
  src << "computed: " << cores << " core" << (cores > 1 ? "s" : "") << " x " << clock->hz / 1e9
      << " GHz (" << clock->source << ") x " << rate->flopsPerClock << " " << peakDtypeName(dtype)
      << " FLOP/clock (" << rate->unit << ")";
  return PeakValue{cores * clock->hz * rate->flopsPerClock, src.str()};
}

}  // namespace torchutil
