#pragma once
// What the GPU's own counters saw, torch-free. This header holds what a profile asks for: the
// named counter sets (counters="flops" | "throughput" | "timeline") and how the range profiler
// gets its passes; it includes the rest of the counters' core, one job per header:
//   core/MetricCatalog.h  the metrics behind each set, the result fields each fills, decoding
//                         and the FLOP conversion (stated once, kTensorOpFlopsPerUnit);
//   core/HwAggregate.h    per-kernel values over ops and forwards, ranges matched to records;
//   core/PmSamples.h      the PM sampler's buffer, interval, overlap weighting and alignment.
// The controllers that drive a read (passes, decoding, statuses) are core/RangeProfilerController.h
// and core/PmSamplerController.h, over the interfaces of core/HardwareBackends.h; CUPTI's side is
// csrc/cupti/RangeProfiler.cpp and csrc/cupti/PmSampler.cpp. Everything here is tested on
// synthetic counter data (tests/cpp/HwCountersTest.cpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/EnumNames.h"
#include "core/HwAggregate.h"
#include "core/MetricCatalog.h"
#include "core/PmSamples.h"

namespace torchutil::hw {

extern const EnumNames<CounterSet> kCounterSets;  // "flops", "throughput", "timeline"
const char* counterSetName(CounterSet s);

// Names -> sets, in first-mention order without repeats. "all" is every set. Throws
// std::invalid_argument naming the value and the valid names for anything else (and for "").
std::vector<CounterSet> parseCounterSets(const std::vector<std::string>& names);
bool hasSet(const std::vector<CounterSet>& sets, CounterSet s);
// Whether the sets need the range profiler (flops, throughput) / PM sampling (timeline).
bool needsRangeProfiler(const std::vector<CounterSet>& sets);
bool needsPmSampling(const std::vector<CounterSet>& sets);

// How the range profiler gets its passes: "user" (one more forward of the model per pass, the
// default: each pass is a forward torchutil runs anyway) or "kernel" (CUPTI replays each kernel
// itself, saving and restoring device memory, within one forward, as ncu does: for forwards
// that cannot be run again unchanged).
enum class Replay : uint8_t { User, Kernel };
extern const EnumNames<Replay> kReplays;  // "user", "kernel"
const char* replayName(Replay r);
// Throws std::invalid_argument naming the value and the table's names for another.
Replay parseReplay(std::string_view name);

}  // namespace torchutil::hw
