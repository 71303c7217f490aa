#include "libtorch/DevicePeak.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/_int_mm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <sched.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>

#include "core/CpuPeak.h"
#include "core/Metrics.h"
#include "core/NotANumber.h"
#include "core/Options.h"
#include "libtorch/Devices.h"
#include "libtorch/MeasuredRate.h"
#include "libtorch/ValueErrors.h"

#ifdef TORCHUTIL_WITH_CUDA
#include "cuda/CudaSupport.h"
#endif

namespace torchutil {
namespace {

std::optional<at::ScalarType> gemmType(PeakDtype d) {
  switch (d) {
    case PeakDtype::FP64: return at::kDouble;
    case PeakDtype::FP32:
    case PeakDtype::TF32: return at::kFloat;
    case PeakDtype::FP16: return at::kHalf;
    case PeakDtype::BF16: return at::kBFloat16;
    default: return std::nullopt;
  }
}

// Sets cuBLAS's TF32 permission for a scope and restores it.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool allow) : saved_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setAllowTF32CuBLAS(allow);
  }
  ~Tf32Scope() { at::globalContext().setAllowTF32CuBLAS(saved_); }

 private:
  bool saved_;
};

// The square GEMM a measured peak times: n x n in dtype, n by device.
int64_t gemmSize(c10::Device device, PeakDtype dtype) {
  const bool lowPrecisionCpu =
      device.is_cpu() && (dtype == PeakDtype::FP16 || dtype == PeakDtype::BF16);
  return device.is_cpu() ? (lowPrecisionCpu ? 512 : 1024) : 8192;
}

// Square GEMMs in the dtype, 2 n^3 operations each; int8 on the CPU as int8 x int8 -> int32
// (at::_int_mm, what quantized linear layers run), counted as the matrix FLOPs of int8 rows are.
RateSpread timeGemm(c10::Device device, PeakDtype dtype) {
  const bool int8 = dtype == PeakDtype::INT8 && device.is_cpu();
  const auto type = int8 ? std::optional<at::ScalarType>(at::kChar) : gemmType(dtype);
  TORCH_CHECK_VALUE(type.has_value(), "torchutil: a measured peak for ", peakDtypeName(dtype),
                    " on ", device.str(), " is not implemented; pass peak_flops= instead");
  c10::InferenceMode inference;
  Tf32Scope tf32(dtype == PeakDtype::TF32);
  const int64_t n = gemmSize(device, dtype);
  const auto opts = at::TensorOptions().device(device).dtype(*type);
  const at::Tensor a = int8 ? at::randint(-128, 128, {n, n}, opts) : at::randn({n, n}, opts);
  const at::Tensor b = int8 ? at::randint(-128, 128, {n, n}, opts) : at::randn({n, n}, opts);
  // A wide spread is not warned about: devicePeak's source text (describeSpread) says it, in
  // every result's peak_source and in peak_flops()'s answer, once.
  return summarizeRates(timedRates(
      device, [&] { int8 ? at::_int_mm(a, b) : at::mm(a, b); }, device.is_cpu() ? 1 : 10,
      2.0 * static_cast<double>(n) * n * n));
}

std::string fileText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// This process's CPUs (its affinity), /proc/cpuinfo read once, and the highest cpufreq limit
// among those CPUs (nullopt where the kernel gives none, as in many virtual machines).
struct ThisCpu {
  std::optional<CpuDescription> description;
  std::string unreadable;  // why there is no description
  std::optional<double> maxKHz;
};

const ThisCpu& thisCpu() {
  static const ThisCpu cpu = [] {
    ThisCpu out;
    std::set<int> allowed;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int i = 0; i < CPU_SETSIZE; ++i) {
        if (CPU_ISSET(i, &set)) {
          allowed.insert(i);
        }
      }
    }
    try {
      out.description = parseCpuinfo(fileText("/proc/cpuinfo"), allowed);
    } catch (const std::invalid_argument& e) {
      out.unreadable = e.what();
    }
    for (int i : allowed) {
      const std::string khz =
          fileText("/sys/devices/system/cpu/cpu" + std::to_string(i) + "/cpufreq/cpuinfo_max_freq");
      const double v = std::strtod(khz.c_str(), nullptr);
      if (v > 0 && (!out.maxKHz.has_value() || v > *out.maxKHz)) {
        out.maxKHz = v;
      }
    }
    return out;
  }();
  return cpu;
}

// The computed peak of this CPU for the threads torch's GEMMs run on, or why there is none.
std::optional<PeakValue> thisCpuPeak(PeakDtype dtype, std::string* whyNot) {
  const ThisCpu& cpu = thisCpu();
  if (!cpu.description.has_value()) {
    *whyNot = cpu.unreadable;
    return std::nullopt;
  }
  auto peak = computedCpuPeak(*cpu.description, cpu.maxKHz, at::get_num_threads(), dtype);
  if (!peak.has_value()) {
    *whyNot = "no rule for " + std::string(peakDtypeName(dtype)) + " on " +
              (cpu.description->modelName.empty() ? "this CPU" : cpu.description->modelName) +
              " (its flags name no unit for it, or no clock was found)";
  }
  return peak;
}

}  // namespace

RateSpread measuredGemmPeak(c10::Device device, PeakDtype dtype) {
  return memoized("gemm " + device.str() + " " + peakDtypeName(dtype),
                  [&] { return timeGemm(device, dtype); });
}

std::string deviceName(c10::Device device) {
#ifdef TORCHUTIL_WITH_CUDA
  if (device.is_cuda()) {
    return cuda::deviceInfo(concreteDevice(device).index()).name;
  }
#endif
  return device.str();
}

RateSource rateSourceArgument(std::string_view source, std::string_view argument) {
  return valueErrors([&] { return kRateSources.parse(source, argument); });
}

void checkPeakOverride(std::optional<double> peakOverride) {
  if (peakOverride.has_value()) {
    valueErrors([&] { checkRange("peak_flops", *peakOverride); });  // the option's row
  }
}

Peak devicePeak(c10::Device device, PeakDtype dtype, RateSource source) {
  const std::string dtypeName = peakDtypeName(dtype);
  if (device.is_meta()) {
    return {kNaN, "none: nothing runs on the meta device", dtypeName};
  }
#ifdef TORCHUTIL_WITH_CUDA
  if (device.is_cuda()) {
    const cuda::DeviceInfo info = cuda::deviceInfo(device.index());
    if (source == RateSource::Auto || source == RateSource::Datasheet) {
      if (auto p = datasheetPeak(info.name, dtype)) {
        return {p->flopsPerSecond, p->source, dtypeName};
      }
      TORCH_CHECK_VALUE(source == RateSource::Auto, "torchutil: no datasheet peak for ", info.name,
                        " in ", dtypeName, "; use peak='computed' or 'measured'");
    }
    if (source == RateSource::Auto || source == RateSource::Computed) {
      if (auto p =
              computedPeak(info.major, info.minor, info.multiprocessors, info.clockHz, dtype)) {
        return {p->flopsPerSecond, p->source, dtypeName};
      }
      TORCH_CHECK_VALUE(source == RateSource::Auto, "torchutil: no FLOP/clock figure for sm_",
                        info.major, info.minor, " in ", dtypeName, "; use peak='measured'");
    }
  }
#endif
  if (device.is_cpu() && (source == RateSource::Auto || source == RateSource::Computed)) {
    std::string whyNot;
    if (auto p = thisCpuPeak(dtype, &whyNot)) {
      return {p->flopsPerSecond, p->source, dtypeName};
    }
    TORCH_CHECK_VALUE(source == RateSource::Auto,
                      "torchutil: no computed peak for this CPU: ", whyNot,
                      "; use peak='measured'");
  }
  if (source == RateSource::Datasheet || source == RateSource::Computed) {
    TORCH_CHECK_VALUE(false, "torchutil: a ", rateSourceName(source),
                      " peak exists only for CUDA GPUs",
                      source == RateSource::Computed ? " and CPUs" : "", ", not for ", device.str(),
                      "; use peak='measured' or 'auto'");
  }
  const RateSpread measured = measuredGemmPeak(device, dtype);
  const int64_t n = gemmSize(device, dtype);
  std::ostringstream src;
  src << "measured: square " << dtypeName << " GEMMs (" << n << "x" << n << "x" << n << ") on "
      << device.str() << ", " << describeSpread(measured, "FLOP/s");
  return {measured.best, src.str(), dtypeName};
}

Peak peakForCount(c10::Device device, const CountTable& table, RateSource source,
                  std::optional<double> peakOverride) {
  auto& ctx = at::globalContext();
  const bool tf32Matmul = device.is_cuda() && ctx.allowTF32CuBLAS();
  const bool tf32Conv = device.is_cuda() && ctx.allowTF32CuDNN();
  const PeakDtype dtype = dominantPeakDtype(table, tf32Matmul, tf32Conv).value_or(PeakDtype::FP32);
  checkPeakOverride(peakOverride);
  if (peakOverride.has_value()) {
    return {*peakOverride, "given by the caller", peakDtypeName(dtype)};
  }
  return devicePeak(device, dtype, source);
}

}  // namespace torchutil
