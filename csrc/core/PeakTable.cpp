#include "core/PeakTable.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

namespace torchutil {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

bool has(const std::string& hay, const char* needle) {
  return hay.find(needle) != std::string::npos;
}

// Dense (no sparsity) peaks in TFLOP/s (TOPS for int8) from NVIDIA's datasheets, columns
// FP64, FP32, TF32, FP16, BF16, FP8, INT8. FP64 is the tensor-core figure where the chip has one.
// Tensor-core rates are quoted at the boost clock of the datasheet.
const DatasheetEntry kV100Sxm{"NVIDIA V100 SXM2", {7.8, 15.7, 0, 125, 0, 0, 62}, 900};
const DatasheetEntry kV100Pcie{"NVIDIA V100 PCIe", {7.0, 14.0, 0, 112, 0, 0, 56}, 900};
const DatasheetEntry kT4{"NVIDIA T4", {0.25, 8.1, 0, 65, 0, 0, 130}, 320};
const DatasheetEntry kA10{"NVIDIA A10", {0.98, 31.2, 62.5, 125, 125, 0, 250}, 600};
const DatasheetEntry kA100{"NVIDIA A100", {19.5, 19.5, 156, 312, 312, 0, 624}, 2039};
const DatasheetEntry kA100_40{"NVIDIA A100 40GB", {19.5, 19.5, 156, 312, 312, 0, 624}, 1555};
const DatasheetEntry kL4{"NVIDIA L4", {0.49, 30.3, 60, 121, 121, 242, 242}, 300};
const DatasheetEntry kL40S{"NVIDIA L40S", {1.41, 91.6, 183, 362, 362, 733, 733}, 864};
const DatasheetEntry kH100Sxm{
    "NVIDIA H100 SXM", {67, 67, 494.7, 989.4, 989.4, 1978.9, 1978.9}, 3350};
const DatasheetEntry kH100Pcie{"NVIDIA H100 PCIe", {51, 51, 378, 756, 756, 1513, 1513}, 2000};
const DatasheetEntry kH100Nvl{
    "NVIDIA H100 NVL", {60, 60, 417.5, 835.5, 835.5, 1670.5, 1670.5}, 3900};
const DatasheetEntry kH200{"NVIDIA H200 SXM", {67, 67, 494.7, 989.4, 989.4, 1978.9, 1978.9}, 4800};
const DatasheetEntry kH200Nvl{
    "NVIDIA H200 NVL", {60, 60, 417.5, 835.5, 835.5, 1670.5, 1670.5}, 4800};
const DatasheetEntry kB200{"NVIDIA B200", {40, 80, 1100, 2250, 2250, 4500, 4500}, 8000};

constexpr size_t idx(PeakDtype d) {
  return static_cast<size_t>(d);
}

}  // namespace

const char* peakDtypeName(PeakDtype d) {
  static constexpr std::array<const char*, idx(PeakDtype::kCount)> names{
      "float64", "float32", "tf32", "float16", "bfloat16", "float8", "int8"};
  return d < PeakDtype::kCount ? names[idx(d)] : "?";
}

std::optional<PeakDtype> parsePeakDtype(std::string_view name) {
  const std::string n = upper(name);
  if (n == "FP64" || n == "FLOAT64" || n == "DOUBLE")
    return PeakDtype::FP64;
  if (n == "FP32" || n == "FLOAT32" || n == "FLOAT")
    return PeakDtype::FP32;
  if (n == "TF32")
    return PeakDtype::TF32;
  if (n == "FP16" || n == "FLOAT16" || n == "HALF")
    return PeakDtype::FP16;
  if (n == "BF16" || n == "BFLOAT16")
    return PeakDtype::BF16;
  if (n == "FP8" || n.rfind("FLOAT8", 0) == 0)
    return PeakDtype::FP8;
  if (n == "INT8" || n == "CHAR" || n == "UINT8" || n == "BYTE" || n == "QINT8" || n == "QUINT8")
    return PeakDtype::INT8;
  return std::nullopt;
}

std::optional<PeakDtype> peakDtypeOfTensorDtype(std::string_view c10Name, bool tf32Allowed) {
  auto d = parsePeakDtype(c10Name);
  if (d == PeakDtype::FP32 && tf32Allowed) {
    return PeakDtype::TF32;
  }
  return d;
}

const DatasheetEntry* findDatasheet(std::string_view deviceName) {
  const std::string n = upper(deviceName);
  // Order matters: "A100" contains "A10", "L40S" contains "L4", "GB200" contains "B200".
  if (has(n, "H200"))
    return has(n, "NVL") ? &kH200Nvl : &kH200;
  if (has(n, "H100")) {
    if (has(n, "PCIE"))
      return &kH100Pcie;
    if (has(n, "NVL"))
      return &kH100Nvl;
    return &kH100Sxm;
  }
  if (has(n, "B200"))
    return &kB200;
  if (has(n, "A100"))
    return has(n, "40GB") ? &kA100_40 : &kA100;
  if (has(n, "A10G"))
    return nullptr;  // a different chip configuration: use the computed peak
  if (has(n, "A10"))
    return &kA10;
  if (has(n, "L40S"))
    return &kL40S;
  if (has(n, "L40"))
    return nullptr;
  if (has(n, "L4"))
    return &kL4;
  if (has(n, "V100"))
    return has(n, "PCIE") ? &kV100Pcie : &kV100Sxm;
  if (has(n, "T4"))
    return &kT4;
  return nullptr;
}

std::optional<PeakValue> datasheetPeak(std::string_view deviceName, PeakDtype dtype) {
  const DatasheetEntry* e = findDatasheet(deviceName);
  if (e == nullptr || dtype >= PeakDtype::kCount || e->tflops[idx(dtype)] <= 0) {
    return std::nullopt;
  }
  std::ostringstream src;
  src << "datasheet: " << e->name << " dense " << peakDtypeName(dtype) << " "
      << e->tflops[idx(dtype)] << " TFLOP/s";
  return PeakValue{e->tflops[idx(dtype)] * 1e12, src.str()};
}

int64_t flopsPerClockPerSm(int major, int minor, PeakDtype d) {
  const int cc = major * 10 + minor;
  using P = PeakDtype;
  // Dense tensor-core FLOP/clk/SM (CUDA cores for FP32, and FP64 where no tensor core has it).
  struct Row {
    int cc;
    int64_t fp64, fp32, tf32, fp16, bf16, fp8, int8;
  };
  static constexpr Row rows[] = {
      {70, 64, 128, 0, 1024, 0, 0, 512},                // Volta (V100)
      {72, 4, 128, 0, 1024, 0, 0, 512},                 // Xavier
      {75, 4, 128, 0, 1024, 0, 0, 2048},                // Turing (T4)
      {80, 128, 128, 1024, 2048, 2048, 0, 4096},        // A100
      {86, 4, 256, 512, 1024, 1024, 0, 2048},           // GA10x (A10, RTX 30)
      {87, 4, 256, 512, 1024, 1024, 0, 2048},           // Orin
      {89, 4, 256, 512, 1024, 1024, 2048, 2048},        // Ada (L4, L40S, RTX 40)
      {90, 256, 256, 2048, 4096, 4096, 8192, 8192},     // Hopper (H100, H200)
      {100, 128, 256, 4096, 8192, 8192, 16384, 16384},  // Blackwell (B200)
      {103, 128, 256, 4096, 8192, 8192, 16384, 16384},  // Blackwell Ultra
  };
  for (const Row& r : rows) {
    if (r.cc != cc) {
      continue;
    }
    switch (d) {
      case P::FP64: return r.fp64;
      case P::FP32: return r.fp32;
      case P::TF32: return r.tf32;
      case P::FP16: return r.fp16;
      case P::BF16: return r.bf16;
      case P::FP8: return r.fp8;
      case P::INT8: return r.int8;
      default: return 0;
    }
  }
  return 0;
}

std::optional<PeakValue> computedPeak(int major, int minor, int multiprocessors, double clockHz,
                                      PeakDtype dtype) {
  const int64_t perClock = flopsPerClockPerSm(major, minor, dtype);
  if (perClock <= 0 || multiprocessors <= 0 || clockHz <= 0) {
    return std::nullopt;
  }
  const double peak = static_cast<double>(perClock) * multiprocessors * clockHz;
  std::ostringstream src;
  src << "computed: sm_" << major << minor << " " << multiprocessors << " SMs x " << perClock << " "
      << peakDtypeName(dtype) << " FLOP/clock/SM x " << clockHz / 1e9 << " GHz";
  return PeakValue{peak, src.str()};
}

const EnumNames<RateSource> kRateSources{{RateSource::Auto, "auto"},
                                         {RateSource::Datasheet, "datasheet"},
                                         {RateSource::Computed, "computed"},
                                         {RateSource::Measured, "measured"}};

const char* rateSourceName(RateSource s) {
  return kRateSources.name(s);
}

}  // namespace torchutil
