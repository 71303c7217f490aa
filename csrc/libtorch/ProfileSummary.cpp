#include "libtorch/ProfileSummary.h"

#include <limits>
#include <utility>

namespace torchutil {

Bandwidth bandwidthOf(c10::Device device) {
  if (device.is_meta()) {
    return {std::numeric_limits<double>::quiet_NaN(), "none: nothing runs on the meta device"};
  }
  return deviceBandwidth(device, RateSource::Auto);
}

SummaryInputs summaryBase(const CountTable& table, const ProfileOutput& out, int64_t batchSize) {
  SummaryInputs s;
  s.totals = table.totals();
  s.peakFlopsPerSecond = out.peak.flopsPerSecond;
  s.peakBytesPerSecond = out.bandwidth.bytesPerSecond;
  s.batchSize = batchSize;
  return s;
}

ProfileOutput summarizeCount(CountTable table, c10::Device device, int64_t batchSize,
                             double seconds, RateSource peakSource, std::optional<double> peakFlops,
                             ModelFacts model) {
  ProfileOutput out;
  out.model = std::move(model);
  out.peak = peakForCount(device, table, peakSource, peakFlops);
  out.bandwidth = bandwidthOf(device);
  SummaryInputs s = summaryBase(table, out, batchSize);
  s.secondsPerForward = seconds;
  s.secondsInterval = MedianInterval{seconds, seconds, seconds};
  s.iterations = 1;
  s.params = out.model.params;
  out.summary = summarize(s);
  out.table = std::move(table);
  out.device = device.str();
  out.timingMode = "wall";
  out.repetition = "one timed block";
  return out;
}

}  // namespace torchutil
