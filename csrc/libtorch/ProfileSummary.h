#pragma once
// What every profile result's summary starts from: its count's totals, the peak and the memory
// bandwidth it is measured against, and the batch (a profile call's, or a Profiler block's).
#include <c10/core/Device.h>

#include <cstdint>

#include "core/Metrics.h"
#include "libtorch/Profile.h"

namespace torchutil {

// The memory bandwidth a result is measured against; none on the meta device.
Bandwidth bandwidthOf(c10::Device device);

// The summary inputs every result shares: its count, peak, bandwidth and batch.
SummaryInputs summaryBase(const CountTable& table, const ProfileOutput& out, int64_t batchSize);

}  // namespace torchutil
