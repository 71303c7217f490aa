#include "ops/ProfileArgs.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "libtorch/DevicePeak.h"
#include "libtorch/ValueErrors.h"

namespace torchutil {
namespace {

const c10::IValue& value(const OptionValues& values, const char* name) {
  const auto it = values.find(name);
  TORCH_INTERNAL_ASSERT(it != values.end(), "the options table has no row ", name);
  return it->second;
}

template <class T>
std::optional<T> optional(const OptionValues& values, const char* name) {
  const c10::IValue& v = value(values, name);
  return v.isNone() ? std::nullopt : std::optional<T>(v.to<T>());
}

std::optional<std::vector<std::string>> strings(const OptionValues& values, const char* name) {
  const c10::IValue& v = value(values, name);
  if (v.isNone()) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const c10::IValue& s : v.toListRef()) {
    out.push_back(s.toStringRef());
  }
  return out;
}

}  // namespace

std::string profileSchema(std::string_view name, std::string_view leading, std::string_view returns,
                          bool summaryOp) {
  std::string s = std::string(name) + "(" + std::string(leading) + ", *";
  for (const OptionSpec& o : kProfileOptions) {
    if (o.summaryOp || !summaryOp) {
      s += std::string(", ") + o.type + " " + o.name + "=" + o.defaultValue;
    }
  }
  return s + ") -> " + std::string(returns);
}

ProfileOptions profileOptions(const OptionValues& values, bool summaryOp) {
  const auto get = [&](const char* name) -> const c10::IValue& { return value(values, name); };
  ProfileOptions o;
  o.warmup = get("warmup").toInt();
  o.trace = get("trace").toBool();
  o.traceForwards = get("trace_forwards").toInt();
  o.chromeTrace = !summaryOp && get("chrome_trace").toBool();
  // The summary has no per-op rows, so util::profile records no module paths.
  o.modulePaths = !summaryOp && get("module_paths").toBool();
  // cuda_graph=True is timing="cuda_graph"; with timing given too, they must agree.
  const std::optional<std::string> timing = optional<std::string>(values, "timing");
  const bool cudaGraph = get("cuda_graph").toBool();
  if (timing.has_value()) {
    o.timing = parseTimingMode(*timing);
  } else if (cudaGraph) {
    o.timing = TimingMode::CudaGraph;
  }
  TORCH_CHECK_VALUE(!cudaGraph || o.timing == TimingMode::CudaGraph,
                    "torchutil: cuda_graph=True contradicts timing='", timing.value_or(""),
                    "'; pass one of them");
  const int64_t iters = get("iters").toInt();
  const std::optional<double> targetCi = optional<double>(values, "target_ci");
  const std::optional<int64_t> maxIters = optional<int64_t>(values, "max_iters");
  const double maxTime = get("max_time").toDouble();
  o.repeat.minIters = iters;
  // Checked with or without target_ci (whose budget it is): 0 is no budget, not "no limit".
  TORCH_CHECK_VALUE(maxTime > 0.0, "torchutil: max_time must be a positive number of seconds ",
                    "(the budget of target_ci's repetition), got ", maxTime);
  if (targetCi.has_value()) {
    // 0 would never stop early: a fixed count is target_ci=None.
    TORCH_CHECK_VALUE(
        *targetCi > 0.0 && *targetCi < 1.0,
        "torchutil: target_ci is a relative half-width in (0, 1) (0.005 means +-0.5 %; ",
        "None times exactly iters forwards), got ", *targetCi);
    o.repeat.targetRelativeCi = *targetCi;
    o.repeat.maxIters = maxIters.value_or(std::max<int64_t>(iters, 100000));
    o.repeat.budgetSeconds = maxTime;
  } else {
    o.repeat.maxIters = maxIters.value_or(iters);
    TORCH_CHECK_VALUE(o.repeat.maxIters == iters,
                      "torchutil: max_iters applies with target_ci; without it exactly iters (",
                      iters, ") forwards are timed, got max_iters=", o.repeat.maxIters);
  }
  o.peak = rateSourceArgument(get("peak").toStringRef(), "peak");
  o.peakFlops = optional<double>(values, "peak_flops");
  o.batchSize = optional<int64_t>(values, "batch_size");
  if (const auto sets = strings(values, "counters")) {
    o.counters = valueErrors([&] { return hw::parseCounterSets(*sets); });
  }
  o.counterReplay =
      valueErrors([&] { return hw::parseReplay(get("counter_replay").toStringRef()); });
  o.gpuLock = optional<std::string>(values, "gpu_lock");
  o.energy = get("energy").toBool();
  o.energyPlan.windowSeconds = get("energy_window").toDouble();
  o.energyPlan.windows = get("energy_windows").toInt();
  return o;
}

}  // namespace torchutil
