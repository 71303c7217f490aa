#pragma once
// Peak FLOP/s of devices, torch-free: a datasheet table of the GPUs researchers use, and a
// computed fallback (SMs x FLOP per clock per SM of the architecture x clock) for any other
// NVIDIA GPU. Measured peaks (a timed GEMM) live in the torch layer (DevicePeak.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/EnumNames.h"

namespace torchutil {

// The arithmetic a peak is quoted for. FP32 is plain (CUDA-core) float32; TF32 is float32 on
// tensor cores.
enum class PeakDtype : uint8_t { FP64, FP32, TF32, FP16, BF16, FP8, INT8, kCount };

// The torch spelling ("float16", "bfloat16", "tf32", "float8"), as every result says it.
const char* peakDtypeName(PeakDtype d);
// Accepts torch names ("float16", "bfloat16", "float32"), short names ("fp16", "bf16", "tf32",
// "fp8", "int8") and c10 names ("Half", "BFloat16", "Float", "Float8_e4m3fn", "Char").
std::optional<PeakDtype> parsePeakDtype(std::string_view name);
// The peak that applies to ops running in a torch dtype: float32 counts as TF32 when the matmul
// units may use it (torch.backends.cuda.matmul.allow_tf32 or a float32 matmul precision below
// "highest").
std::optional<PeakDtype> peakDtypeOfTensorDtype(std::string_view c10Name, bool tf32Allowed);

// Where a peak FLOP/s or a memory bandwidth comes from. Auto: the datasheet, else computed,
// else measured.
enum class RateSource : uint8_t { Auto, Datasheet, Computed, Measured };

// "auto", "datasheet", "computed", "measured": kRateSources.parse(name, "peak") names the
// argument in the message of a name it does not know.
extern const EnumNames<RateSource> kRateSources;
const char* rateSourceName(RateSource s);

struct DatasheetEntry {
  const char* name;                                    // as in the vendor's datasheet
  double tflops[static_cast<int>(PeakDtype::kCount)];  // dense; 0 = not supported
  double memoryGBps;                                   // DRAM bandwidth, GB/s
};

// The datasheet entry for a device name as CUDA reports it ("NVIDIA H100 80GB HBM3",
// "Tesla T4"), or nullptr.
const DatasheetEntry* findDatasheet(std::string_view deviceName);

struct PeakValue {
  double flopsPerSecond = 0.0;
  std::string source;  // how the value was obtained, for the user
};

std::optional<PeakValue> datasheetPeak(std::string_view deviceName, PeakDtype dtype);

// Dense FLOP per clock per SM for a compute capability, 0 if unknown or unsupported.
int64_t flopsPerClockPerSm(int ccMajor, int ccMinor, PeakDtype dtype);

std::optional<PeakValue> computedPeak(int ccMajor, int ccMinor, int multiprocessors, double clockHz,
                                      PeakDtype dtype);

}  // namespace torchutil
