#include "cupti/RangeProfiler.h"

#include <cupti.h>
#include <dlfcn.h>

#include <cstdint>
#include <utility>

#include "cupti/CuptiStatus.h"

namespace torchutil::cupti {
namespace {

// Auto ranges are not nested: one level, the kernel's.
constexpr uint16_t kRangeNestingLevels = 1;
// Separates the levels of a range's name (there is one level).
constexpr const char* kRangeDelimiter = "/";

// The current thread's CUDA context, through the driver torch has loaded (libcuda is not a
// link dependency of torchutil).
bool currentContext(CUcontext* ctx, std::string* why) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) {
    *why = "the CUDA driver (libcuda.so.1) is not loaded in this process";
    return false;
  }
  using GetCurrent = CUresult (*)(CUcontext*);
  auto fn = reinterpret_cast<GetCurrent>(dlsym(lib, "cuCtxGetCurrent"));
  CUresult r = fn != nullptr ? fn(ctx) : CUDA_ERROR_NOT_FOUND;
  dlclose(lib);  // drops the reference NOLOAD took; the driver stays loaded
  if (r != CUDA_SUCCESS || *ctx == nullptr) {
    *why = "no current CUDA context on this thread (cuCtxGetCurrent: " + std::to_string(r) + ")";
    return false;
  }
  return true;
}

}  // namespace

RangeProfiler::RangeProfiler() : ProfilerHost(CUPTI_PROFILER_TYPE_RANGE_PROFILER) {}

RangeProfiler::~RangeProfiler() {
  if (passOpen_) {
    auto p = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler_;
    cuptiRangeProfilerStop(&p);
  }
  if (profiler_ != nullptr) {
    auto p =
        params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler_;
    cuptiRangeProfilerDisable(&p);
  }
}

bool RangeProfiler::open(int deviceIndex, std::string* why) {
  if (!initialize(deviceIndex, why) || !currentContext(&ctx_, why)) {
    return false;
  }
  // The counter availability image (where a missing permission shows first).
  auto p = params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  p.ctx = ctx_;
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&p), why);
  std::vector<uint8_t> avail(p.counterAvailabilityImageSize, 0);
  p.pCounterAvailabilityImage = avail.data();
  TORCHUTIL_CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&p), why);
  return openHost(std::move(avail), why);
}

bool RangeProfiler::enable(hw::Replay replay, size_t maxRanges, std::string* why) {
  {
    auto p =
        params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    p.ctx = ctx_;
    TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerEnable(&p), why);
    profiler_ = p.pRangeProfilerObject;
  }
  if (profiler_ == nullptr) {
    *why = "cuptiRangeProfilerEnable returned no profiler object";
    return false;
  }
  std::vector<uint8_t>& data = counterData();
  {
    auto p = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler_;
    p.maxNumOfRanges = maxRanges;
    p.maxNumRangeTreeNodes = static_cast<uint32_t>(maxRanges);
    std::vector<const char*> names = cStrings(metrics());
    p.pMetricNames = names.data();
    p.numMetrics = names.size();
    TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerGetCounterDataSize(&p), why);
    data.assign(p.counterDataSize, 0);
  }
  {
    auto p = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler_;
    p.counterDataSize = data.size();
    p.pCounterData = data.data();
    TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&p), why);
  }
  // CUPTI holds pointers into config() and the counter data from here until Disable.
  auto p = params<CUpti_RangeProfiler_SetConfig_Params>(
      CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = profiler_;
  p.configSize = config().size();
  p.pConfig = config().data();
  p.counterDataImageSize = data.size();
  p.pCounterDataImage = data.data();
  p.range = CUPTI_AutoRange;
  p.replayMode = replay == hw::Replay::Kernel ? CUPTI_KernelReplay : CUPTI_UserReplay;
  p.maxRangesPerPass = maxRanges;
  p.numNestingLevels = kRangeNestingLevels;
  p.minNestingLevel = kRangeNestingLevels;
  p.passIndex = 0;
  p.targetNestingLevel = kRangeNestingLevels;
  TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerSetConfig(&p), why);
  return true;
}

bool RangeProfiler::beginPass(std::string* why) {
  auto p = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = profiler_;
  TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerStart(&p), why);
  passOpen_ = true;
  return true;
}

bool RangeProfiler::endPass(bool* allSubmitted, std::string* why) {
  auto p = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = profiler_;
  passOpen_ = false;
  TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerStop(&p), why);
  *allSubmitted = p.isAllPassSubmitted != 0;
  return true;
}

bool RangeProfiler::decode(size_t* ranges, size_t* dropped, std::string* why) {
  {
    auto p = params<CUpti_RangeProfiler_DecodeData_Params>(
        CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler_;
    TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerDecodeData(&p), why);
    *dropped = p.numOfRangeDropped;
  }
  auto p = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  p.pCounterDataImage = counterData().data();
  p.counterDataImageSize = counterData().size();
  TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerGetCounterDataInfo(&p), why);
  *ranges = p.numTotalRanges;
  return true;
}

bool RangeProfiler::range(size_t i, std::string* name, std::vector<double>* values,
                          std::string* why) {
  auto p = params<CUpti_RangeProfiler_CounterData_GetRangeInfo_Params>(
      CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE);
  p.rangeIndex = i;
  p.rangeDelimiter = kRangeDelimiter;
  p.pCounterDataImage = counterData().data();
  p.counterDataImageSize = counterData().size();
  TORCHUTIL_CUPTI_CHECK(cuptiRangeProfilerCounterDataGetRangeInfo(&p), why);
  *name = p.rangeName != nullptr ? p.rangeName : "";
  return evaluate(i, values, why);
}

}  // namespace torchutil::cupti
