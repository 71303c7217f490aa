#include "core/Repetition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "core/Options.h"

namespace torchutil {
namespace {

constexpr double kZ95 = 1.959963984540054;

std::string percent(double fraction) {
  return threeDigits(100.0 * fraction) + " %";
}

}  // namespace

std::string threeDigits(double x) {
  std::ostringstream o;
  o.precision(3);
  o << x;
  return o.str();
}

double MedianInterval::relativeHalfWidth() const {
  return median > 0.0 ? 0.5 * (high - low) / median : std::numeric_limits<double>::quiet_NaN();
}

MedianInterval medianInterval(std::vector<double> v) {
  MedianInterval m;
  if (v.empty()) {
    m.median = m.low = m.high = std::numeric_limits<double>::quiet_NaN();
    return m;
  }
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  m.median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  const double half = kZ95 * std::sqrt(static_cast<double>(n)) / 2.0;
  // 1-based ranks j = floor(n/2 - half), k = ceil(n/2 + half + 1), clipped to [1, n].
  const double j = std::floor(static_cast<double>(n) / 2.0 - half);
  const double k = std::ceil(static_cast<double>(n) / 2.0 + half + 1.0);
  m.low = v[static_cast<size_t>(std::clamp(j, 1.0, static_cast<double>(n))) - 1];
  m.high = v[static_cast<size_t>(std::clamp(k, 1.0, static_cast<double>(n))) - 1];
  return m;
}

void checkRepeatPolicy(const RepeatPolicy& p) {
  // The options' own rows and rules (core/Options.h), so that each has one message; 0 is a
  // policy's "fixed count" and "no budget", which the options say as target_ci=None.
  checkRange("iters", static_cast<double>(p.minIters));
  checkMaxIters(p.minIters, p.maxIters);
  checkRange("max_iters", static_cast<double>(p.maxIters));
  if (p.targetRelativeCi != 0.0) {
    checkRange("target_ci", p.targetRelativeCi);
  }
  if (p.budgetSeconds != 0.0) {
    checkRange("max_time", p.budgetSeconds);
  }
}

RepeatResult repeatTimed(const std::function<std::vector<double>(int64_t)>& runBatch,
                         const std::function<double()>& clock, const RepeatPolicy& p) {
  checkRepeatPolicy(p);
  RepeatResult r;
  const double start = clock();
  const bool adaptive = p.targetRelativeCi > 0.0 && p.maxIters > p.minIters;
  int64_t next = p.minIters;
  while (true) {
    std::vector<double> batch = runBatch(next);
    r.seconds.insert(r.seconds.end(), batch.begin(), batch.end());
    r.interval = medianInterval(r.seconds);
    const int64_t n = static_cast<int64_t>(r.seconds.size());
    if (!adaptive) {
      r.stop = "fixed count of " + std::to_string(n);
      break;
    }
    const double width = r.interval.relativeHalfWidth();
    if (width <= p.targetRelativeCi) {
      r.stop = "converged: median within +-" + percent(width) + " (95 %) after " +
               std::to_string(n) + " forwards";
      break;
    }
    if (n >= p.maxIters) {
      r.stop = "max_iters " + std::to_string(p.maxIters) + " reached at +-" + percent(width);
      break;
    }
    if (p.budgetSeconds > 0.0 && clock() - start >= p.budgetSeconds) {
      r.stop = "time budget of " + threeDigits(p.budgetSeconds) + " s reached at +-" +
               percent(width) + " after " + std::to_string(n) + " forwards";
      break;
    }
    next = std::clamp<int64_t>(n / 2, 1, p.maxIters - n);
  }
  return r;
}

}  // namespace torchutil
