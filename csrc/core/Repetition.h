#pragma once
// How many timed forwards a profile runs, torch-free: a fixed count, or adaptive repetition
// that stops once the median's confidence interval is tight enough (the idea of
// torch.utils.benchmark.Timer.adaptive_autorange and triton.testing.do_bench), or a time budget
// or an iteration cap is reached. The clock and the forwards are passed in, so the rule is
// tested with a fake clock.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace torchutil {

// The median of a sample and a distribution-free 95 % confidence interval for it: the order
// statistics at ranks n/2 -+ 1.96 sqrt(n)/2 (normal approximation of the binomial), clipped to
// the sample. NaN for an empty sample.
struct MedianInterval {
  double median = 0.0;
  double low = 0.0;
  double high = 0.0;
  // Half the interval's width over the median: +-0.005 is "within 0.5 %".
  double relativeHalfWidth() const;
};
MedianInterval medianInterval(std::vector<double> samples);

// x to three significant digits ("0.52", "2.47", "1.23e+03"), as the result's texts write numbers.
std::string threeDigits(double x);

// More timed forwards than anyone waits for; the check runs before anything does.
constexpr int64_t kMaxIters = 10'000'000;

struct RepeatPolicy {
  int64_t minIters = 10;          // always run at least this many
  int64_t maxIters = 10;          // never more (== minIters: a fixed count)
  double targetRelativeCi = 0.0;  // stop when relativeHalfWidth() <= this; 0: fixed count
  double budgetSeconds = 2.0;     // stop when the clock has run this long (0: no budget)
};

// Throws std::invalid_argument naming the value when the policy cannot be run.
void checkRepeatPolicy(const RepeatPolicy& p);

struct RepeatResult {
  std::vector<double> seconds;  // one per timed forward
  MedianInterval interval;
  std::string stop;  // why it stopped, for people ("fixed count of 10", "converged ...")
};

// Times forwards in batches: runBatch(n) runs n forwards and returns their seconds. The first
// batch is minIters; each later one is half the forwards so far (at least 1, at most what
// maxIters leaves), until the interval is tight enough, the clock (seconds, any origin) has run
// budgetSeconds since the start, or maxIters are done.
RepeatResult repeatTimed(const std::function<std::vector<double>(int64_t)>& runBatch,
                         const std::function<double()>& clock, const RepeatPolicy& policy);

}  // namespace torchutil
