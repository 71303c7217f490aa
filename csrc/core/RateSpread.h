#pragma once
// A measured rate (a timed GEMM's FLOP/s) is a sample, not a number: its repetitions summarized
// (best, quartiles), how wide they spread, and rates written for people ("45.2 GFLOP/s").
// Torch-free; the timing itself is libtorch/MeasuredRate.h.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace torchutil {

struct RateSpread {
  int64_t repetitions = 0;
  double best = 0.0;  // the rate a measured peak uses
  double min = 0.0;
  double q1 = 0.0;  // quartiles, linearly interpolated between order statistics
  double median = 0.0;
  double q3 = 0.0;

  // (q3 - q1) / median: 0.1 means the middle half of the repetitions lies within 10 % of the
  // median. NaN without repetitions.
  double relativeSpread() const;
  // Whether the repetitions disagree enough that a peak built on them would move between runs
  // (relativeSpread() above kWideRateSpread).
  bool wide() const;
};

// Spreads above this are wide: on an idle CPU a timed GEMM's quartiles lie within a few %.
inline constexpr double kWideRateSpread = 0.2;

// Summarizes one rate per repetition; all zero for none.
RateSpread summarizeRates(std::vector<double> rates);

// A rate with an SI prefix and three significant digits: "989 TFLOP/s", "45.2 GFLOP/s",
// "812 MFLOP/s" for unit "FLOP/s". Non-finite or negative rates are written as they are.
std::string formatRate(double perSecond, std::string_view unit);

// "best 45.2 GFLOP/s of 11 repetitions; median 40.1, quartiles 38.0-43.3, min 20.1 GFLOP/s
// (spread 13 %)", and when wide, a sentence that says the figure moved while it was measured.
std::string describeSpread(const RateSpread& s, std::string_view unit);

}  // namespace torchutil
