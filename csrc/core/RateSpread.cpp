#include "core/RateSpread.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

namespace torchutil {
namespace {

// The p-quantile of sorted values, interpolated between the order statistics around rank
// p * (n - 1) (numpy's default).
double quantile(const std::vector<double>& sorted, double p) {
  const double rank = p * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// value in the unit scale (a power of 1000) chosen by formatRate, three significant digits.
std::string digits(double value) {
  std::ostringstream out;
  // The thresholds are where rounding adds a digit (99.96 is "100", not "100.0").
  out << std::fixed << std::setprecision(value >= 99.95 ? 0 : value >= 9.995 ? 1 : 2) << value;
  return out.str();
}

struct Scale {
  double factor;
  const char* prefix;
};

Scale scaleOf(double perSecond) {
  static constexpr Scale kScales[] = {{1e15, "P"}, {1e12, "T"}, {1e9, "G"},
                                      {1e6, "M"},  {1e3, "k"},  {1.0, ""}};
  for (const Scale& s : kScales) {
    // 999.6 G rounds to "1000 G": written as 1.00 T instead.
    if (perSecond >= s.factor * (1.0 - 5e-4)) {
      return s;
    }
  }
  return {1.0, ""};
}

}  // namespace

double RateSpread::relativeSpread() const {
  if (repetitions == 0 || !(median > 0)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return (q3 - q1) / median;
}

bool RateSpread::wide() const {
  const double s = relativeSpread();
  return std::isfinite(s) && s > kWideRateSpread;
}

RateSpread summarizeRates(std::vector<double> rates) {
  RateSpread s;
  if (rates.empty()) {
    return s;
  }
  std::sort(rates.begin(), rates.end());
  s.repetitions = static_cast<int64_t>(rates.size());
  s.min = rates.front();
  s.best = rates.back();
  s.q1 = quantile(rates, 0.25);
  s.median = quantile(rates, 0.5);
  s.q3 = quantile(rates, 0.75);
  return s;
}

std::string formatRate(double perSecond, std::string_view unit) {
  if (!std::isfinite(perSecond) || perSecond < 0) {
    std::ostringstream out;
    out << perSecond << " " << unit;
    return out.str();
  }
  const Scale s = scaleOf(perSecond);
  return digits(perSecond / s.factor) + " " + s.prefix + std::string(unit);
}

std::string describeSpread(const RateSpread& s, std::string_view unit) {
  if (s.repetitions == 0) {
    return "no repetitions";
  }
  const Scale scale = scaleOf(s.best);
  auto in = [&](double v) { return digits(v / scale.factor); };
  const std::string scaled = std::string(scale.prefix) + std::string(unit);
  std::ostringstream out;
  out << "best " << in(s.best) << " " << scaled << " of " << s.repetitions
      << " repetitions; median " << in(s.median) << ", quartiles " << in(s.q1) << "-" << in(s.q3)
      << ", min " << in(s.min) << " " << scaled << " (spread "
      << std::lround(100.0 * s.relativeSpread()) << " %)";
  if (s.wide()) {
    out << ". The spread is wide: the rate moved while it was measured (a loaded machine?), "
           "so a peak built on it can move between runs and utilization with it; pass "
           "peak_flops= for a fixed peak";
  }
  return out.str();
}

}  // namespace torchutil
