#pragma once
// Hardware counters in a profile's result, torch-free: the counter readings matched to the
// counted forward's kernels and ops (core/HwCounters.h), and the result fields they fill
// (summary, op and kernel rows of core/ResultSchema.h, the Chrome trace's counter tracks), each
// metric into the fields its row of the catalog names (core/MetricCatalog.h).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/CountSession.h"
#include "core/HwCounters.h"
#include "core/KernelTrace.h"
#include "core/ResultSchema.h"

namespace torchutil::hw {

// What the range profiler and the PM sampler read, in the profile's terms.
struct HwResult {
  // Range counters, matched to kernel records.
  bool ranges = false;
  std::vector<HwKernel> kernels;    // one per matched kernel
  std::vector<size_t> kernelIndex;  // its index into the profile's kernel list
  size_t passes = 0;
  // Wall time of the whole read (the claim, the profiler's creation, set-up, passes, decoding,
  // release, and the ranges decoded into metric values), and of three of its stages
  // (RangeProfile's; decodeSeconds with the ranges decoded into metric values): the three add up
  // to at most `seconds`.
  double seconds = 0;
  double setupSeconds = std::numeric_limits<double>::quiet_NaN();
  double passSeconds = std::numeric_limits<double>::quiet_NaN();
  double decodeSeconds = std::numeric_limits<double>::quiet_NaN();
  // PM sampling.
  bool timeline = false;
  std::vector<PmSample> samples;  // the sampler's clock
  int64_t offsetNs = 0;           // added to a sample's time to put it on the kernels' clock
  uint64_t intervalNs = 0;        // between samples
  // The sampled forwards (the traced ones when traced, else the timed ones), kernels' clock.
  uint64_t windowStartNs = 0;
  uint64_t windowEndNs = 0;
  std::vector<Span> kernelSpans;  // traced kernels attributed to op rows (kernels' clock)
};

// Matches the range profiler's ranges (values in execution order) to the counted forward's
// kernel records: `kernels` is the profile's kernel list, whose counted-forward records
// (timed == false) are sorted by start and matched by position (matchRangesToRecords). Each
// matched kernel takes its duration and the op-table row of the op that launched it. Returns
// false and sets *why when the counts differ.
bool matchRanges(const std::vector<RangeValues>& ranges, const std::vector<KernelRecord>& kernels,
                 const std::vector<OpEvent>& events, HwResult* out, std::string* why);

// The traced forwards' kernels (timed == true, attributed by position) as op-row spans.
std::vector<Span> attributedSpans(const std::vector<KernelRecord>& kernels,
                                  const std::vector<OpEvent>& events);

// Fills the hardware fields of a summary (values in Field order); matrixFlops is the counted
// forward's.
void fillSummary(std::vector<double>& summary, const HwResult& hw, double matrixFlops);
// Fills the hardware fields of the op table (rows in CountTable order). A row whose matrix work
// ran in a dtype with no tensor path read (tensorPathDtype; GH100 has no fp8 path) gets NaN
// hw_tensor_flops and hw_flops_ratio: its kernels' zeros on the other paths say nothing of it.
void fillOpRows(ResultTable& ops, const HwResult& hw, const std::vector<OpStats>& rows);

// The same for the forward: where some of the counted matrix work ran in a dtype whose tensor
// paths were not read, the summary's hw_tensor_flops and hw_flops_ratio are NaN (the per-dtype
// fields of the paths read stay), and *status ("on" or "on, partial: ...") says which dtype and
// ops. Nothing changes where no range counters were read.
void markUncountedTensorWork(std::vector<double>& summary, std::string* status, const HwResult& hw,
                             const std::vector<OpStats>& rows);
// Fills the hardware fields of the kernel rows of the matched kernels.
void fillKernelRows(ResultTable& kernels, const HwResult& hw);

// The PM samples as Chrome-trace counter tracks, on the kernels' clock.
std::vector<CounterTrack> counterTracks(const HwResult& hw);

}  // namespace torchutil::hw
