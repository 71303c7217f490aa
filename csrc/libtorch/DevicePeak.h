#pragma once
// Peak FLOP/s of the device a profile ran on: the datasheet, the computed fallback
// (core/PeakTable.h) or a timed GEMM, as the caller asks.
#include <c10/core/Device.h>

#include <optional>
#include <string>
#include <string_view>

#include "core/CountSession.h"
#include "core/PeakTable.h"
#include "core/RateSpread.h"

namespace torchutil {

struct Peak {
  double flopsPerSecond;  // NaN when there is none (meta device)
  std::string source;
  std::string dtype;  // peakDtypeName()
};

// The source a user asked for by name ("auto", "datasheet", "computed", "measured"); throws
// c10::ValueError naming `argument` and the value for anything else.
RateSource rateSourceArgument(std::string_view source, std::string_view argument);

// Throws c10::ValueError when the asked source is unavailable on device.
Peak devicePeak(c10::Device device, PeakDtype dtype, RateSource source);

// Checks a user's peak against the peak_flops option's row (core/Options.h), for the ops that
// take it outside the options (_count_end, _check_peak_options).
void checkPeakOverride(std::optional<double> peakOverride);

// The peak for what a count ran: its dominant dtype (dominantPeakDtype) on device, or the
// user's number when peakOverride is set.
Peak peakForCount(c10::Device device, const CountTable& table, RateSource source,
                  std::optional<double> peakOverride);

// The device's name for people: the GPU's name on CUDA, else the device string.
std::string deviceName(c10::Device device);

// Times a square GEMM in dtype on device, repeatedly, and returns the FLOP/s of the repetitions
// (the peak is their best); cached per (device, dtype) for the life of the process. A wide
// spread (RateSpread::wide) is said in the peak's source text (devicePeak), not warned.
RateSpread measuredGemmPeak(c10::Device device, PeakDtype dtype);

}  // namespace torchutil
