#pragma once
// CUPTI's range profiler (cupti_range_profiler.h), one call per step of hw::RangeProfilerApi:
// auto ranges (one per kernel) in user or kernel replay on the current context, evaluated into
// metric values after the passes. The passes themselves are core/RangeProfilerController.h's.
// Built only with TORCHUTIL_WITH_CUPTI; torch-free.
#include <cuda.h>
#include <cupti_range_profiler.h>

#include <string>
#include <vector>

#include "cupti/ProfilerHost.h"

namespace torchutil::cupti {

class RangeProfiler final : public ProfilerHost<hw::RangeProfilerApi> {
 public:
  RangeProfiler();
  // Ends a pass a throwing forward left open and disables the profiler.
  ~RangeProfiler() override;

  // Also takes the thread's current CUDA context, which the profiler reads.
  bool open(int deviceIndex, std::string* why) override;
  bool enable(hw::Replay replay, size_t maxRanges, std::string* why) override;
  bool beginPass(std::string* why) override;
  bool endPass(bool* allSubmitted, std::string* why) override;
  bool decode(size_t* ranges, size_t* dropped, std::string* why) override;
  bool range(size_t i, std::string* name, std::vector<double>* values, std::string* why) override;

 private:
  CUcontext ctx_ = nullptr;
  CUpti_RangeProfiler_Object* profiler_ = nullptr;
  bool passOpen_ = false;
};

}  // namespace torchutil::cupti
