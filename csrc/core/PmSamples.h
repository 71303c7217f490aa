#pragma once
// PM sampling in a profile's terms, torch-free: the sampler's hardware buffer (its facts stated
// once, here), the interval that keeps a window within it, and the samples' overlap with kernel
// intervals: window and per-op means, and the alignment of the sampler's clock with the kernels'.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/MetricCatalog.h"

namespace torchutil::hw {

// ---- The PM sampler's buffer ----
// Measured on the H200 (benchmarks/pm_probe.cu, the pmprobe phase of benchmarks/run_gpu.sh, with
// a kernel keeping every SM busy; docs/results/counters/pm_probe.md):
// - CUPTI writes the samples to a hardware buffer, and one sample of the timeline metrics takes
//   some 6.7 KB of it (16 MB held 2,073 samples and overflowed at 3,028; 32 MB held 4,043 and
//   overflowed at 6,059), so 32 MB holds some 5,000 (kPmBufferHolds). Larger buffers held no
//   more (64 MB overflowed at 12,093 samples; 256 MB returned one image's worth).
// - CUPTI decodes it at 20-50 us of CPU per sample, so no thread decoding while sampling keeps up
//   with one sample per 10 us: the buffer is decoded once, after sampling, and the interval is
//   chosen so that the sampled window fits (pmIntervalNs with kPmBufferSamples).
// - A decoded sample takes some 30 KB of host memory (the counter data image).
constexpr size_t kPmHardwareBufferBytes = size_t{32} << 20;
constexpr size_t kPmBufferBytesPerSample = 6700;
constexpr size_t kPmBufferHolds = kPmHardwareBufferBytes / kPmBufferBytesPerSample;
// The most samples one sampled window may take: under half of what the buffer holds, since the
// busy-kernel probe is its best case (400 resnet50 forwards at a stretched 787 us overflowed it
// at some 2,340 samples).
constexpr size_t kPmBufferSamples = 2400;
static_assert(2 * kPmBufferSamples <= kPmBufferHolds,
              "a window's samples fill under half the buffer");
// One counter data image holds at most this many samples (some 150 MB of host memory); a decode
// that fills it continues into a fresh one.
constexpr size_t kPmImageSamples = 5000;
// The most samples a timeline keeps: then it is cut short (and says so).
constexpr size_t kPmMaxSamples = 200000;

// The PM interval for a window expected to last windowSeconds: leastNs, or longer where the
// window would take more than maxSamples samples (then rounded up to a whole microsecond).
uint64_t pmIntervalNs(uint64_t leastNs, double windowSeconds, size_t maxSamples);

struct PmSample {
  uint64_t startNs = 0;  // the sampler's clock
  uint64_t endNs = 0;
  PmValues values;
};

struct Span {
  uint64_t start = 0;
  uint64_t end = 0;
  int64_t row = -1;  // op-table row, for kernels
};

struct PmAggregate {
  PmValues values;  // overlap-weighted means, NaN where nothing overlapped
  uint64_t overlapNs = 0;
  size_t samples = 0;  // samples that overlapped
};

// Overlap-weighted means of the samples (shifted by offsetNs onto the kernels' clock) over
// [start, end).
PmAggregate pmOver(const std::vector<PmSample>& samples, int64_t offsetNs, uint64_t start,
                   uint64_t end);
// Per op-table row: each kernel takes the samples that overlap it, weighted by the overlap.
std::vector<PmAggregate> pmByRow(const std::vector<PmSample>& samples, int64_t offsetNs,
                                 const std::vector<Span>& kernels, size_t numRows);

// The offset (ns, added to sample times) that best lines the samples up with the kernels'
// clock: starts from a guess (0 when the samples overlap [windowStart, windowEnd], else the
// shift that puts the first sample at windowStart) and searches +-searchNs around it in steps
// of stepNs for the largest sum of activity x busy fraction, where activity is `metric` and the
// busy fraction is the share of the shifted sample that the union of `busy` covers. Ties go
// to the offset closest to the guess. Returns the guess when no sample has activity.
struct PmAlignment {
  int64_t offsetNs = 0;
  int64_t guessNs = 0;
  double score = 0;  // mean busy fraction of the active samples at the offset found (0..1)
};
PmAlignment alignPmSamples(const std::vector<PmSample>& samples, const std::vector<Span>& busy,
                           uint64_t windowStart, uint64_t windowEnd, PmMetric metric,
                           int64_t searchNs, int64_t stepNs);

}  // namespace torchutil::hw
