// PM sampling probe (issue #11): how CUPTI's PM sampler behaves on this GPU over a long window,
// outside torchutil. A kernel that keeps the SMs busy runs for run_ms while PM sampling records
// every interval_ns; the hardware buffer is decoded at the end only (period_ms=0) or by a thread
// every period_ms, into counter data images of image_samples samples (copied from an initialized
// blank image, or initialized by CUPTI before each decode with init=1). Prints, per decode that
// returned something other than success, the status, and at the end: samples decoded against
// run_ms / interval, overflow flags, decode calls and their stop reasons.
//
//   nvcc -std=c++17 -O2 benchmarks/results/pm_probe.cu -o pm_probe -lcupti \
//     -L/usr/local/cuda/extras/CUPTI/lib64
//   ./pm_probe buffer_mb=16 interval_ns=10000 period_ms=5 image_samples=1000 run_ms=500 mode=0
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define CHECK(call)                                                               \
  do {                                                                            \
    CUptiResult r_ = (call);                                                      \
    if (r_ != CUPTI_SUCCESS) {                                                    \
      const char* m_ = nullptr;                                                   \
      cuptiGetResultString(r_, &m_);                                              \
      std::printf("FAILED %s: %s (line %d)\n", #call, m_ ? m_ : "?", __LINE__); \
      std::exit(2);                                                               \
    }                                                                             \
  } while (0)

__global__ void spin(long long cycles, float* out) {
  long long start = clock64();
  float x = threadIdx.x;
  while (clock64() - start < cycles) {
    x = x * 1.0000001f + 0.5f;
  }
  if (x == -1.0f) {
    out[0] = x;
  }
}

struct Args {
  size_t bufferMb = 16;
  uint64_t intervalNs = 10000;
  int periodMs = 5;
  uint32_t imageSamples = 1000;
  int runMs = 500;
  int mode = 0;  // 0 keep oldest, 1 keep latest
  int init = 0;  // 1: initialize each image through CUPTI instead of copying a blank one
};

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto eq = s.find('=');
    std::string k = s.substr(0, eq);
    long long v = std::atoll(s.c_str() + eq + 1);
    if (k == "buffer_mb") a.bufferMb = v;
    else if (k == "interval_ns") a.intervalNs = v;
    else if (k == "period_ms") a.periodMs = static_cast<int>(v);
    else if (k == "image_samples") a.imageSamples = static_cast<uint32_t>(v);
    else if (k == "run_ms") a.runMs = static_cast<int>(v);
    else if (k == "mode") a.mode = static_cast<int>(v);
    else if (k == "init") a.init = static_cast<int>(v);
    else {
      std::printf("unknown argument %s\n", s.c_str());
      return 1;
    }
  }
  float* out = nullptr;
  cudaMalloc(&out, sizeof(float));
  CUpti_Profiler_Initialize_Params ip{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  CHECK(cuptiProfilerInitialize(&ip));
  CUpti_Device_GetChipName_Params cp{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  cp.deviceIndex = 0;
  CHECK(cuptiDeviceGetChipName(&cp));
  std::vector<uint8_t> avail;
  CUpti_PmSampling_GetCounterAvailability_Params ap{
      CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
  ap.deviceIndex = 0;
  CHECK(cuptiPmSamplingGetCounterAvailability(&ap));
  avail.resize(ap.counterAvailabilityImageSize);
  ap.pCounterAvailabilityImage = avail.data();
  CHECK(cuptiPmSamplingGetCounterAvailability(&ap));
  CUpti_Profiler_Host_Initialize_Params hp{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  hp.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
  hp.pChipName = cp.pChipName;
  hp.pCounterAvailabilityImage = avail.data();
  CHECK(cuptiProfilerHostInitialize(&hp));
  // torchutil's timeline metrics (csrc/core/HwCounters.cpp, pmMetricDefs).
  std::vector<const char*> metrics = {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
                                      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                                      "dram__throughput.avg.pct_of_peak_sustained_elapsed"};
  CUpti_Profiler_Host_ConfigAddMetrics_Params am{
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  am.pHostObject = hp.pHostObject;
  am.ppMetricNames = metrics.data();
  am.numMetrics = metrics.size();
  CHECK(cuptiProfilerHostConfigAddMetrics(&am));
  CUpti_Profiler_Host_GetConfigImageSize_Params cs{
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  cs.pHostObject = hp.pHostObject;
  CHECK(cuptiProfilerHostGetConfigImageSize(&cs));
  std::vector<uint8_t> config(cs.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params ci{CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  ci.pHostObject = hp.pHostObject;
  ci.pConfigImage = config.data();
  ci.configImageSize = config.size();
  CHECK(cuptiProfilerHostGetConfigImage(&ci));

  CUpti_PmSampling_Enable_Params ep{CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
  ep.deviceIndex = 0;
  CHECK(cuptiPmSamplingEnable(&ep));
  CUpti_PmSampling_Object* sampler = ep.pPmSamplingObject;
  CUpti_PmSampling_SetConfig_Params sc{CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
  sc.pPmSamplingObject = sampler;
  sc.configSize = config.size();
  sc.pConfig = config.data();
  sc.hardwareBufferSize = a.bufferMb << 20;
  sc.samplingInterval = a.intervalNs;
  sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  sc.hwBufferAppendMode = a.mode == 0 ? CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST
                                      : CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
  CHECK(cuptiPmSamplingSetConfig(&sc));
  CUpti_PmSampling_GetCounterDataSize_Params ds{
      CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
  ds.pPmSamplingObject = sampler;
  ds.pMetricNames = metrics.data();
  ds.numMetrics = metrics.size();
  ds.maxSamples = a.imageSamples;
  CHECK(cuptiPmSamplingGetCounterDataSize(&ds));
  std::vector<uint8_t> blank(ds.counterDataSize);
  auto initialize = [&](std::vector<uint8_t>& image) {
    CUpti_PmSampling_CounterDataImage_Initialize_Params in{
        CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    in.pPmSamplingObject = sampler;
    in.counterDataSize = image.size();
    in.pCounterData = image.data();
    CHECK(cuptiPmSamplingCounterDataImageInitialize(&in));
  };
  initialize(blank);

  std::mutex mu;
  size_t decodes = 0, samples = 0, overflowFlags = 0;
  double copyMs = 0, decodeMs = 0;  // time in image copies and in cuptiPmSamplingDecodeData
  std::map<std::string, size_t> outcomes;
  std::string firstError;
  double firstErrorMs = -1;
  auto t0 = std::chrono::steady_clock::now();
  // One drain: decode until the buffer is empty (a new image whenever one fills).
  auto drain = [&]() -> bool {
    while (true) {
      const auto c0 = std::chrono::steady_clock::now();
      std::vector<uint8_t> image = blank;
      if (a.init) {
        initialize(image);
      }
      const auto c1 = std::chrono::steady_clock::now();
      CUpti_PmSampling_DecodeData_Params dd{CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
      dd.pPmSamplingObject = sampler;
      dd.pCounterDataImage = image.data();
      dd.counterDataImageSize = image.size();
      CUptiResult r = cuptiPmSamplingDecodeData(&dd);
      const auto c2 = std::chrono::steady_clock::now();
      std::lock_guard<std::mutex> lock(mu);
      ++decodes;
      copyMs += std::chrono::duration<double, std::milli>(c1 - c0).count();
      decodeMs += std::chrono::duration<double, std::milli>(c2 - c1).count();
      if (r != CUPTI_SUCCESS) {
        const char* m = nullptr;
        cuptiGetResultString(r, &m);
        outcomes[std::string("error ") + (m ? m : "?")] += 1;
        if (firstError.empty()) {
          firstError = m ? m : "?";
          firstErrorMs = std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
        }
        return false;
      }
      overflowFlags += dd.overflow != 0;
      CUpti_PmSampling_GetCounterDataInfo_Params gi{
          CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
      gi.pCounterDataImage = image.data();
      gi.counterDataImageSize = image.size();
      CHECK(cuptiPmSamplingGetCounterDataInfo(&gi));
      samples += gi.numCompletedSamples;
      const char* why = dd.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
                            ? "image full"
                        : dd.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS
                            ? "end of records"
                            : "other";
      outcomes[why] += 1;
      if (dd.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL ||
          gi.numCompletedSamples == 0) {
        return true;
      }
    }
  };

  int clockKhz = 0;
  cudaDeviceGetAttribute(&clockKhz, cudaDevAttrClockRate, 0);
  const long long cycles = static_cast<long long>(clockKhz) * 100 / 1000;  // ~100 us per kernel
  spin<<<132 * 4, 256>>>(cycles, out);  // loads the module before the sampled window
  cudaDeviceSynchronize();
  CUpti_PmSampling_Start_Params st{CUpti_PmSampling_Start_Params_STRUCT_SIZE};
  st.pPmSamplingObject = sampler;
  CHECK(cuptiPmSamplingStart(&st));
  t0 = std::chrono::steady_clock::now();
  std::atomic<bool> stop{false};
  std::thread decoder;
  if (a.periodMs > 0) {
    decoder = std::thread([&] {
      while (!stop.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(a.periodMs));
        if (!drain()) {
          return;
        }
      }
    });
  }
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(a.runMs)) {
    for (int i = 0; i < 10; ++i) {
      spin<<<132 * 4, 256>>>(cycles, out);
    }
    cudaDeviceSynchronize();
  }
  const double ranMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  if (decoder.joinable()) {
    decoder.join();
  }
  CUpti_PmSampling_Stop_Params sp{CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
  sp.pPmSamplingObject = sampler;
  CHECK(cuptiPmSamplingStop(&sp));
  const bool finalOk = drain();
  std::printf(
      "buffer_mb=%zu interval_ns=%llu period_ms=%d image_samples=%u (image %zu bytes) run_ms=%d "
      "mode=%s init=%d: ran %.0f ms, decoded %zu samples (%.0f expected), %zu decode calls, "
      "overflow flags %zu, final drain %s, %.1f ms in image copies, %.1f ms in decode calls",
      a.bufferMb, static_cast<unsigned long long>(a.intervalNs), a.periodMs, a.imageSamples,
      blank.size(), a.runMs, a.mode == 0 ? "keep_oldest" : "keep_latest", a.init, ranMs, samples,
      ranMs * 1e6 / a.intervalNs, decodes, overflowFlags, finalOk ? "ok" : "failed", copyMs, decodeMs);
  if (!firstError.empty()) {
    std::printf(", first error '%s' at %.1f ms", firstError.c_str(), firstErrorMs);
  }
  std::printf("; outcomes:");
  for (const auto& [k, v] : outcomes) {
    std::printf(" %s x%zu", k.c_str(), v);
  }
  std::printf("\n");
  CUpti_PmSampling_Disable_Params dp{CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
  dp.pPmSamplingObject = sampler;
  cuptiPmSamplingDisable(&dp);
  CUpti_Profiler_Host_Deinitialize_Params hd{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
  hd.pHostObject = hp.pHostObject;
  cuptiProfilerHostDeinitialize(&hd);
  CUpti_Profiler_DeInitialize_Params dip{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
  cuptiProfilerDeInitialize(&dip);
  return 0;
}
