#include "cupti/CounterProfiler.h"

#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <utility>

namespace torchutil::cupti {
namespace {

// A CUPTI parameter struct: zeroed, with its size set (as every CUPTI call requires).
template <class Params>
Params params(size_t structSize) {
  Params p{};
  p.structSize = structSize;
  return p;
}

// What a failed CUPTI call means for the user, with the call named.
std::string failure(const char* call, CUptiResult status) {
  const char* msg = nullptr;
  if (cuptiGetResultString(status, &msg) != CUPTI_SUCCESS) {
    msg = nullptr;
  }
  std::string text =
      std::string(call) + " failed (" + (msg != nullptr ? msg : "unknown error") + ")";
  switch (status) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "no permission to read GPU performance counters: the NVIDIA driver restricts them "
             "to administrators (NVreg_RestrictProfilingToAdminUsers=1); run as root or load "
             "the driver with NVreg_RestrictProfilingToAdminUsers=0. " +
             text;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_INVALID_CHIP_NAME:
    case CUPTI_ERROR_API_NOT_IMPLEMENTED:
      return "hardware counters are not supported on this GPU, driver or sandbox (gVisor and "
             "some virtual machines hide them). " +
             text;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
      return "another profiler holds the GPU's counters (ncu, nsys, torch.profiler or DCGM "
             "profiling). " +
             text;
    default: return text;
  }
}

// Checks a CUPTI call: on failure sets *why and returns false from the enclosing function.
#define TORCHUTIL_COUNTERS_CHECK(call)  \
  do {                                  \
    const CUptiResult status_ = (call); \
    if (status_ != CUPTI_SUCCESS) {     \
      *why = failure(#call, status_);   \
      return false;                     \
    }                                   \
  } while (0)

// Runs its function when it goes out of scope, exceptions included; never throws.
class Cleanup {
 public:
  explicit Cleanup(std::function<void()> f) : f_(std::move(f)) {}
  ~Cleanup() {
    if (f_) {
      try {
        f_();
      } catch (...) {  // a cleanup must not throw; CUPTI's calls do not
      }
    }
  }
  Cleanup(const Cleanup&) = delete;
  Cleanup& operator=(const Cleanup&) = delete;

 private:
  std::function<void()> f_;
};

// The C strings CUPTI's metric-name arrays take; they point into `names`, which must outlive them.
std::vector<const char*> cStrings(const std::vector<std::string>& names) {
  std::vector<const char*> out;
  out.reserve(names.size());
  for (const std::string& n : names) {
    out.push_back(n.c_str());
  }
  return out;
}

// One counter read at a time in the process: CUPTI's profiler is one per context.
std::atomic<bool> gBusy{false};

class BusyClaim {
 public:
  BusyClaim() {
    bool expected = false;
    owned_ = gBusy.compare_exchange_strong(expected, true);
  }
  ~BusyClaim() {
    if (owned_) {
      gBusy.store(false);
    }
  }
  bool owned() const { return owned_; }

 private:
  bool owned_ = false;
};

// The profiler library of CUPTI (cuptiProfilerInitialize), released on scope exit.
bool initializeProfiler(std::string* why) {
  auto p = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  TORCHUTIL_COUNTERS_CHECK(cuptiProfilerInitialize(&p));
  return true;
}

void deinitializeProfiler() {
  auto p =
      params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
  cuptiProfilerDeInitialize(&p);
}

bool chipName(int deviceIndex, std::string* name, std::string* why) {
  auto p = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  p.deviceIndex = static_cast<size_t>(deviceIndex);
  TORCHUTIL_COUNTERS_CHECK(cuptiDeviceGetChipName(&p));
  if (p.pChipName == nullptr) {
    *why = "cuptiDeviceGetChipName returned no name";
    return false;
  }
  *name = p.pChipName;
  return true;
}

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

// The host object that builds config images and evaluates counter data.
class HostObject {
 public:
  ~HostObject() { release(); }
  bool init(CUpti_ProfilerType type, const std::string& chip, const std::vector<uint8_t>& avail,
            std::string* why) {
    release();
    auto p = params<CUpti_Profiler_Host_Initialize_Params>(
        CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    p.profilerType = type;
    p.pChipName = chip.c_str();
    p.pCounterAvailabilityImage = avail.empty() ? nullptr : avail.data();
    TORCHUTIL_COUNTERS_CHECK(cuptiProfilerHostInitialize(&p));
    host_ = p.pHostObject;
    if (host_ == nullptr) {
      *why = "cuptiProfilerHostInitialize returned no host object";
      return false;
    }
    return true;
  }
  void release() {
    if (host_ != nullptr) {
      auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(
          CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      p.pHostObject = host_;
      cuptiProfilerHostDeinitialize(&p);
      host_ = nullptr;
    }
  }
  CUpti_Profiler_Host_Object* get() const { return host_; }

  bool knows(const std::string& metric) const {
    auto p = params<CUpti_Profiler_Host_GetMetricProperties_Params>(
        CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
    p.pHostObject = host_;
    p.pMetricName = metric.c_str();
    return cuptiProfilerHostGetMetricProperties(&p) == CUPTI_SUCCESS;
  }

  bool addMetrics(const std::vector<std::string>& names, std::string* why) {
    std::vector<const char*> ptrs = cStrings(names);
    auto p = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    p.pHostObject = host_;
    p.ppMetricNames = ptrs.data();
    p.numMetrics = ptrs.size();
    TORCHUTIL_COUNTERS_CHECK(cuptiProfilerHostConfigAddMetrics(&p));
    return true;
  }

  bool configImage(std::vector<uint8_t>* image, size_t* passes, std::string* why) {
    auto s = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    s.pHostObject = host_;
    TORCHUTIL_COUNTERS_CHECK(cuptiProfilerHostGetConfigImageSize(&s));
    if (s.configImageSize == 0) {
      *why = "CUPTI built an empty config image";
      return false;
    }
    image->assign(s.configImageSize, 0);
    auto g = params<CUpti_Profiler_Host_GetConfigImage_Params>(
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    g.pHostObject = host_;
    g.configImageSize = image->size();
    g.pConfigImage = image->data();
    TORCHUTIL_COUNTERS_CHECK(cuptiProfilerHostGetConfigImage(&g));
    auto n = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    n.configImageSize = image->size();
    n.pConfigImage = image->data();
    TORCHUTIL_COUNTERS_CHECK(cuptiProfilerHostGetNumOfPasses(&n));
    *passes = n.numOfPasses;
    return true;
  }

  bool evaluate(const std::vector<uint8_t>& counterData, size_t index,
                const std::vector<std::string>& names, std::vector<double>* values,
                std::string* why) const {
    std::vector<const char*> ptrs = cStrings(names);
    values->assign(names.size(), -1.0);
    auto p = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    p.pHostObject = host_;
    p.pCounterDataImage = counterData.data();
    p.counterDataImageSize = counterData.size();
    p.rangeIndex = index;
    p.ppMetricNames = ptrs.data();
    p.numMetrics = ptrs.size();
    p.pMetricValues = values->data();
    TORCHUTIL_COUNTERS_CHECK(cuptiProfilerHostEvaluateToGpuValues(&p));
    return true;
  }

 private:
  CUpti_Profiler_Host_Object* host_ = nullptr;
};

// Resolves the metrics of `sets` against what the chip knows and builds the config image on
// `host`. A name the chip lists but CUPTI still refuses in a configuration is found by adding
// the metrics one at a time to a scratch host object; those are left out and named.
template <class Resolve>
bool buildConfig(HostObject& host, CUpti_ProfilerType type, const std::string& chip,
                 const std::vector<uint8_t>& avail, const std::vector<hw::CounterSet>& sets,
                 const Resolve& resolve, hw::ResolvedMetrics* metrics, std::vector<uint8_t>* image,
                 size_t* passes, std::vector<std::string>* notOnChip, std::string* why) {
  *metrics = resolve(sets, [&](const std::string& n) { return host.knows(n); });
  *notOnChip = metrics->missing;
  if (metrics->empty()) {
    *why = "the chip " + chip + " has none of the metrics of the counter sets asked for";
    return false;
  }
  std::string addWhy;
  if (!host.addMetrics(metrics->names, &addWhy)) {
    // Find the names CUPTI refuses, one at a time on a scratch object.
    hw::ResolvedMetrics kept;
    for (size_t i = 0; i < metrics->names.size(); ++i) {
      HostObject scratch;
      std::string ignored;
      if (scratch.init(type, chip, avail, why) &&
          scratch.addMetrics({metrics->names[i]}, &ignored)) {
        kept.index.push_back(metrics->index[i]);
        kept.names.push_back(metrics->names[i]);
      } else {
        notOnChip->push_back(metrics->names[i]);
      }
    }
    if (kept.empty()) {
      *why = "CUPTI refused every metric of the counter sets: " + addWhy;
      return false;
    }
    kept.missing = *notOnChip;
    *metrics = std::move(kept);
    if (!host.init(type, chip, avail, why) || !host.addMetrics(metrics->names, why)) {
      return false;
    }
  }
  return host.configImage(image, passes, why);
}

hw::ResolvedMetrics resolveRange(const std::vector<hw::CounterSet>& sets,
                                 const hw::KnownMetric& known) {
  return hw::resolveRangeMetrics(sets, known);
}

hw::ResolvedMetrics resolvePm(const std::vector<hw::CounterSet>& sets,
                              const hw::KnownMetric& known) {
  return hw::resolvePmMetrics(sets, known);
}

// The most passes torchutil will run: a configuration needing more is refused up front.
constexpr size_t kMaxPasses = 64;

}  // namespace

std::string counterReadBusyReason() {
  return gBusy.load() ? "another torchutil profile is reading hardware counters in this process"
                      : "";
}

bool RangeProfiler::run(int deviceIndex, const std::vector<hw::CounterSet>& sets, hw::Replay replay,
                        size_t maxRanges, const Forward& forward, RangeProfile* out,
                        std::string* why) {
  BusyClaim claim;
  if (!claim.owned()) {
    *why = counterReadBusyReason();
    return false;
  }
  *out = RangeProfile();
  maxRanges = std::max<size_t>(maxRanges, 1);
  if (!initializeProfiler(why)) {
    return false;
  }
  Cleanup profilerInitialized(deinitializeProfiler);
  std::string chip;
  CUcontext ctx = nullptr;
  if (!chipName(deviceIndex, &chip, why) || !currentContext(&ctx, why)) {
    return false;
  }
  // The counter availability image (where a missing permission shows first).
  std::vector<uint8_t> avail;
  {
    auto p = params<CUpti_Profiler_GetCounterAvailability_Params>(
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
    p.ctx = ctx;
    TORCHUTIL_COUNTERS_CHECK(cuptiProfilerGetCounterAvailability(&p));
    avail.assign(p.counterAvailabilityImageSize, 0);
    p.pCounterAvailabilityImage = avail.data();
    TORCHUTIL_COUNTERS_CHECK(cuptiProfilerGetCounterAvailability(&p));
  }
  HostObject host;
  if (!host.init(CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, avail, why)) {
    return false;
  }
  std::vector<uint8_t> config;
  size_t passes = 0;
  if (!buildConfig(host, CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, avail, sets, resolveRange,
                   &out->metrics, &config, &passes, &out->notOnThisChip, why)) {
    return false;
  }
  if (passes == 0 || passes > kMaxPasses) {
    *why = "the counter sets need " + std::to_string(passes) + " replay passes (at most " +
           std::to_string(kMaxPasses) + " are run)";
    return false;
  }

  // Declared before the profiler is enabled, so that it outlives the profiler (CUPTI holds a
  // pointer to it from SetConfig until Disable).
  std::vector<uint8_t> counterData;
  CUpti_RangeProfiler_Object* profiler = nullptr;
  {
    auto p =
        params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    p.ctx = ctx;
    TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerEnable(&p));
    profiler = p.pRangeProfilerObject;
  }
  Cleanup enabled([profiler] {
    auto p =
        params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler;
    cuptiRangeProfilerDisable(&p);
  });
  if (profiler == nullptr) {
    *why = "cuptiRangeProfilerEnable returned no profiler object";
    return false;
  }
  std::vector<const char*> names = cStrings(out->metrics.names);
  {
    auto p = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler;
    p.pMetricNames = names.data();
    p.numMetrics = names.size();
    p.maxNumOfRanges = maxRanges;
    p.maxNumRangeTreeNodes = static_cast<uint32_t>(maxRanges);
    TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerGetCounterDataSize(&p));
    counterData.assign(p.counterDataSize, 0);
    auto i = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    i.pRangeProfilerObject = profiler;
    i.counterDataSize = counterData.size();
    i.pCounterData = counterData.data();
    TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&i));
  }
  {
    auto p = params<CUpti_RangeProfiler_SetConfig_Params>(
        CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler;
    p.configSize = config.size();
    p.pConfig = config.data();
    p.counterDataImageSize = counterData.size();
    p.pCounterDataImage = counterData.data();
    p.range = CUPTI_AutoRange;
    p.replayMode = replay == hw::Replay::Kernel ? CUPTI_KernelReplay : CUPTI_UserReplay;
    p.maxRangesPerPass = maxRanges;
    p.numNestingLevels = 1;
    p.minNestingLevel = 1;
    p.passIndex = 0;
    p.targetNestingLevel = 1;
    TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerSetConfig(&p));
  }
  // User replay: one forward per pass, between start and stop, until CUPTI says every pass
  // was submitted. A few passes beyond the count CUPTI predicted are allowed, no more. Kernel
  // replay: CUPTI replays each kernel for its passes, so one forward submits them all.
  bool allSubmitted = false;
  for (size_t pass = 0; pass < passes + 2 && !allSubmitted; ++pass) {
    auto start =
        params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    start.pRangeProfilerObject = profiler;
    TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerStart(&start));
    bool stopped = false;
    auto stop =
        params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    stop.pRangeProfilerObject = profiler;
    {
      // Stops the pass if the forward throws, before the profiler is disabled.
      Cleanup stopOnThrow([&] {
        if (!stopped) {
          cuptiRangeProfilerStop(&stop);
        }
      });
      forward();
      stopped = true;
      TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerStop(&stop));
    }
    out->passes += 1;
    allSubmitted = stop.isAllPassSubmitted != 0;
  }
  if (!allSubmitted) {
    *why = "CUPTI had not collected every pass after " + std::to_string(out->passes) +
           " forwards (it asked for " + std::to_string(passes) + ")";
    return false;
  }
  {
    auto p = params<CUpti_RangeProfiler_DecodeData_Params>(
        CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = profiler;
    TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerDecodeData(&p));
    out->droppedRanges = p.numOfRangeDropped;
  }
  size_t ranges = 0;
  {
    auto p = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
    p.pCounterDataImage = counterData.data();
    p.counterDataImageSize = counterData.size();
    TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerGetCounterDataInfo(&p));
    ranges = p.numTotalRanges;
  }
  for (size_t r = 0; r < ranges; ++r) {
    auto p = params<CUpti_RangeProfiler_CounterData_GetRangeInfo_Params>(
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE);
    p.pCounterDataImage = counterData.data();
    p.counterDataImageSize = counterData.size();
    p.rangeIndex = r;
    p.rangeDelimiter = "/";
    TORCHUTIL_COUNTERS_CHECK(cuptiRangeProfilerCounterDataGetRangeInfo(&p));
    out->rangeNames.emplace_back(p.rangeName != nullptr ? p.rangeName : "");
    std::vector<double> values;
    if (!host.evaluate(counterData, r, out->metrics.names, &values, why)) {
      return false;
    }
    out->values.push_back(std::move(values));
  }
  return true;
}

// ---- PM sampling ----

namespace {

// The hardware buffer for raw samples. On the H200 one sample of the timeline metrics takes
// some 6.7 KB there (benchmarks/pm_probe.cu: 32 MB held 4,043 samples and overflowed at 6,059;
// 16 MB held 2,073 and overflowed at 3,028), and CUPTI decodes about 30 us of CPU per sample
// (so no decoding thread keeps up with one sample per 10 us). So the buffer is decoded once,
// after sampling, and the caller chooses the interval so that the window fits
// (hw::pmIntervalNs with kPmBufferSamples).
constexpr size_t kPmHardwareBufferBytes = 32u << 20;
// Counter data images take some 30 KB per sample on the H200: one holds at most this many, and a
// decode that fills it continues into a fresh one.
constexpr uint32_t kPmImageSamples = 5000;
constexpr size_t kPmMaxSamples = 200000;  // then the timeline is cut short (and says so)

}  // namespace

struct PmSampler::State {
  BusyClaim claim;
  bool profilerInitialized = false;
  HostObject host;
  CUpti_PmSampling_Object* sampler = nullptr;
  bool started = false;
  std::vector<uint8_t> config;
  std::vector<uint8_t> counterData;
  PmTimeline timeline;

  ~State() { release(); }
  void release() {
    if (sampler != nullptr) {
      if (started) {
        auto p = params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
        p.pPmSamplingObject = sampler;
        cuptiPmSamplingStop(&p);
        started = false;
      }
      auto p = params<CUpti_PmSampling_Disable_Params>(CUpti_PmSampling_Disable_Params_STRUCT_SIZE);
      p.pPmSamplingObject = sampler;
      cuptiPmSamplingDisable(&p);
      sampler = nullptr;
    }
    host.release();
    if (profilerInitialized) {
      deinitializeProfiler();
      profilerInitialized = false;
    }
  }
};

PmSampler::PmSampler() = default;
PmSampler::~PmSampler() = default;

bool PmSampler::setUp(int deviceIndex, const std::vector<hw::CounterSet>& sets, uint64_t intervalNs,
                      size_t expectedSamples, std::string* why) {
  state_ = std::make_unique<State>();
  State& s = *state_;
  if (!s.claim.owned()) {
    *why = counterReadBusyReason();
    state_.reset();
    return false;
  }
  const auto fail = [&] {
    state_.reset();  // releases everything set up so far
    return false;
  };
  if (!initializeProfiler(why)) {
    return fail();
  }
  s.profilerInitialized = true;
  std::string chip;
  if (!chipName(deviceIndex, &chip, why)) {
    return fail();
  }
  std::vector<uint8_t> avail;
  {
    auto p = params<CUpti_PmSampling_GetCounterAvailability_Params>(
        CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
    p.deviceIndex = static_cast<size_t>(deviceIndex);
    const CUptiResult r1 = cuptiPmSamplingGetCounterAvailability(&p);
    if (r1 != CUPTI_SUCCESS) {
      *why = failure("cuptiPmSamplingGetCounterAvailability", r1);
      return fail();
    }
    avail.assign(p.counterAvailabilityImageSize, 0);
    p.pCounterAvailabilityImage = avail.data();
    const CUptiResult r2 = cuptiPmSamplingGetCounterAvailability(&p);
    if (r2 != CUPTI_SUCCESS) {
      *why = failure("cuptiPmSamplingGetCounterAvailability", r2);
      return fail();
    }
  }
  if (!s.host.init(CUPTI_PROFILER_TYPE_PM_SAMPLING, chip, avail, why)) {
    return fail();
  }
  size_t passes = 0;
  if (!buildConfig(s.host, CUPTI_PROFILER_TYPE_PM_SAMPLING, chip, avail, sets, resolvePm,
                   &s.timeline.metrics, &s.config, &passes, &s.timeline.notOnThisChip, why)) {
    return fail();
  }
  // PM sampling reads one pass: while the metrics need more, the last (the least important:
  // the table lists SM activity first) is left out and named.
  hw::ResolvedMetrics& metrics = s.timeline.metrics;
  while (passes > 1 && metrics.names.size() > 1) {
    s.timeline.leftOut.push_back(metrics.names.back() + " (not in one pass with the rest)");
    metrics.names.pop_back();
    metrics.index.pop_back();
    if (!s.host.init(CUPTI_PROFILER_TYPE_PM_SAMPLING, chip, avail, why) ||
        !s.host.addMetrics(metrics.names, why) || !s.host.configImage(&s.config, &passes, why)) {
      return fail();
    }
  }
  if (passes != 1) {
    *why = "the timeline metrics need " + std::to_string(passes) + " passes; PM sampling reads one";
    return fail();
  }
  {
    auto p = params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
    p.deviceIndex = static_cast<size_t>(deviceIndex);
    const CUptiResult r = cuptiPmSamplingEnable(&p);
    if (r != CUPTI_SUCCESS) {
      *why = failure("cuptiPmSamplingEnable", r);
      return fail();
    }
    s.sampler = p.pPmSamplingObject;
    if (s.sampler == nullptr) {
      *why = "cuptiPmSamplingEnable returned no sampler object";
      return fail();
    }
  }
  {
    auto p =
        params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
    p.pPmSamplingObject = s.sampler;
    p.configSize = s.config.size();
    p.pConfig = s.config.data();
    p.hardwareBufferSize = kPmHardwareBufferBytes;
    p.samplingInterval = intervalNs;
    p.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    p.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    const CUptiResult r = cuptiPmSamplingSetConfig(&p);
    if (r != CUPTI_SUCCESS) {
      *why = failure("cuptiPmSamplingSetConfig", r);
      return fail();
    }
  }
  {
    std::vector<const char*> names = cStrings(s.timeline.metrics.names);
    auto p = params<CUpti_PmSampling_GetCounterDataSize_Params>(
        CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
    p.pPmSamplingObject = s.sampler;
    p.pMetricNames = names.data();
    p.numMetrics = names.size();
    // Room for what is expected, with a margin, in one image where it fits.
    p.maxSamples = static_cast<uint32_t>(
        std::min<size_t>(kPmImageSamples, expectedSamples + expectedSamples / 2 + 256));
    const CUptiResult r = cuptiPmSamplingGetCounterDataSize(&p);
    if (r != CUPTI_SUCCESS) {
      *why = failure("cuptiPmSamplingGetCounterDataSize", r);
      return fail();
    }
    s.counterData.assign(p.counterDataSize, 0);
  }
  s.timeline.intervalNs = intervalNs;
  return true;
}

bool PmSampler::start(std::string* why) {
  if (!state_ || state_->sampler == nullptr) {
    *why = "PM sampling was not set up";
    return false;
  }
  auto p = params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
  p.pPmSamplingObject = state_->sampler;
  const CUptiResult r = cuptiPmSamplingStart(&p);
  if (r != CUPTI_SUCCESS) {
    *why = failure("cuptiPmSamplingStart", r);
    state_.reset();
    return false;
  }
  state_->started = true;
  return true;
}

namespace {

bool initializeCounterData(CUpti_PmSampling_Object* sampler, std::vector<uint8_t>& data,
                           std::string* why) {
  auto p = params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(
      CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  p.pPmSamplingObject = sampler;
  p.counterDataSize = data.size();
  p.pCounterData = data.data();
  TORCHUTIL_COUNTERS_CHECK(cuptiPmSamplingCounterDataImageInitialize(&p));
  return true;
}

}  // namespace

bool PmSampler::stop(PmTimeline* out, std::string* why) {
  if (!state_ || !state_->started) {
    *why = "PM sampling was not started";
    state_.reset();
    return false;
  }
  State& s = *state_;
  // Released on every path out of here.
  Cleanup released([this] { state_.reset(); });
  {
    auto p = params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
    p.pPmSamplingObject = s.sampler;
    s.started = false;
    TORCHUTIL_COUNTERS_CHECK(cuptiPmSamplingStop(&p));
  }
  // Decode until the hardware buffer is empty, emptying the counter data image whenever it
  // fills up.
  bool done = false;
  while (!done) {
    if (!initializeCounterData(s.sampler, s.counterData, why)) {
      return false;
    }
    auto d =
        params<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
    d.pPmSamplingObject = s.sampler;
    d.pCounterDataImage = s.counterData.data();
    d.counterDataImageSize = s.counterData.size();
    const CUptiResult decoded = cuptiPmSamplingDecodeData(&d);
    if (decoded == CUPTI_ERROR_OUT_OF_MEMORY) {
      // cupti_pmsampling.h: "record overflow in the hardware buffer".
      *why = "the PM sampler's " + std::to_string(kPmHardwareBufferBytes >> 20) +
             " MB hardware buffer overflowed at one sample per " +
             std::to_string(s.timeline.intervalNs / 1000) +
             " us (cuptiPmSamplingDecodeData: CUPTI_ERROR_OUT_OF_MEMORY): the sampled forwards "
             "took longer than expected";
      return false;
    }
    TORCHUTIL_COUNTERS_CHECK(decoded);
    s.timeline.overflow = s.timeline.overflow || d.overflow != 0;
    auto info = params<CUpti_PmSampling_GetCounterDataInfo_Params>(
        CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
    info.pCounterDataImage = s.counterData.data();
    info.counterDataImageSize = s.counterData.size();
    TORCHUTIL_COUNTERS_CHECK(cuptiPmSamplingGetCounterDataInfo(&info));
    for (size_t i = 0; i < info.numCompletedSamples; ++i) {
      auto p = params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(
          CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
      p.pPmSamplingObject = s.sampler;
      p.pCounterDataImage = s.counterData.data();
      p.counterDataImageSize = s.counterData.size();
      p.sampleIndex = i;
      TORCHUTIL_COUNTERS_CHECK(cuptiPmSamplingCounterDataGetSampleInfo(&p));
      std::vector<double> values;
      if (!s.host.evaluate(s.counterData, i, s.timeline.metrics.names, &values, why)) {
        return false;
      }
      hw::PmSample sample;
      sample.startNs = p.startTimestamp;
      sample.endNs = p.endTimestamp;
      sample.values = hw::decodePmSample(s.timeline.metrics, values);
      s.timeline.samples.push_back(std::move(sample));
    }
    s.timeline.cutShort = s.timeline.samples.size() >= kPmMaxSamples;
    done = d.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL ||
           info.numCompletedSamples == 0 || s.timeline.cutShort;
  }
  *out = std::move(s.timeline);
  return true;
}

}  // namespace torchutil::cupti
