// The util:: operators. Schemas stand next to their implementations; private ops start with _.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "core/FormulaRegistry.h"
#include "core/HwCounters.h"
#include "core/KernelTrace.h"
#include "core/Metrics.h"
#include "core/ResultSchema.h"
#include "libtorch/DevicePeak.h"
#include "libtorch/OpCounter.h"
#include "libtorch/Profile.h"
#include "libtorch/Timing.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace torchutil {
namespace {

at::Tensor toTensor(const std::vector<double>& values) {
  return at::tensor(values, at::TensorOptions().dtype(at::kDouble));
}

// A part of a result by name; the core names what is missing in std::invalid_argument, and
// Python gets it as a ValueError.
template <class Get>
auto lookup(const Get& get) -> decltype(*get()) {
  try {
    return *get();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
    throw;  // not reached: the check throws
  }
}

// util.ProfileOutput: a profile's result for Python, every part by name (core/ResultSchema.h).
// The dispatcher carries it as a script object; torchutil/profiler.py builds its rows from
// torch.ops.util._schema.
class ProfileOutputObject : public torch::CustomClassHolder {
 public:
  explicit ProfileOutputObject(NamedResult r) : result_(std::move(r)) {}

  at::Tensor summary() const { return toTensor(result_.summary); }

  // The numeric fields of a table, [rows, numeric fields] float64.
  at::Tensor numbers(const std::string& table) const {
    const ResultTable& t = lookup([&] { return &result_.table(table); });
    const std::vector<double> values = t.numbers();
    return toTensor(values).reshape(
        {static_cast<int64_t>(t.rows()), static_cast<int64_t>(t.numericWidth())});
  }

  std::vector<std::string> textColumn(const std::string& table, const std::string& field) const {
    return lookup([&] { return &result_.table(table).textColumn(field); });
  }

  std::string text(const std::string& name) const {
    return lookup([&] { return &result_.text(name); });
  }

 private:
  NamedResult result_;
};

using Output = c10::intrusive_ptr<ProfileOutputObject>;

Output wrap(const ProfileOutput& out) {
  return c10::make_intrusive<ProfileOutputObject>(nameResult(out));
}

std::tuple<std::vector<std::string>, std::vector<std::string>, std::vector<std::string>> schemaOp(
    std::string table) {
  std::vector<std::string> names, kinds, docs;
  try {
    for (const FieldSpec& f : schema(table)) {
      names.emplace_back(f.name);
      kinds.emplace_back(valueKindName(f.kind));
      docs.emplace_back(f.doc);
    }
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  return {names, kinds, docs};
}

// The options both profile ops build from their arguments, as the dispatcher passes them.
ProfileOptions options(int64_t warmup, int64_t iters, bool cudaGraph, const std::string& peak,
                       std::optional<double> peakFlops, bool trace, bool chromeTrace,
                       bool modulePaths, const std::optional<std::string>& timing,
                       std::optional<double> targetCi, double maxTime,
                       std::optional<int64_t> maxIters, int64_t traceForwards,
                       const std::optional<std::vector<std::string>>& counters,
                       const std::string& counterReplay) {
  ProfileOptions o;
  o.modulePaths = modulePaths;
  o.trace = trace;
  o.traceForwards = traceForwards;
  o.chromeTrace = chromeTrace;
  o.warmup = warmup;
  // cuda_graph=True is timing="cuda_graph"; with timing given too, they must agree.
  o.timing = timing.has_value() ? parseTimingMode(*timing)
             : cudaGraph        ? TimingMode::CudaGraph
                                : TimingMode::Eager;
  TORCH_CHECK_VALUE(!cudaGraph || o.timing == TimingMode::CudaGraph,
                    "torchutil: cuda_graph=True contradicts timing='", timing.value_or(""),
                    "'; pass one of them");
  o.repeat.minIters = iters;
  if (targetCi.has_value()) {
    o.repeat.targetRelativeCi = *targetCi;
    o.repeat.maxIters = maxIters.value_or(std::max<int64_t>(iters, 100000));
    o.repeat.budgetSeconds = maxTime;
  } else {
    o.repeat.maxIters = maxIters.value_or(iters);
    TORCH_CHECK_VALUE(o.repeat.maxIters == iters,
                      "torchutil: max_iters applies with target_ci; without it exactly iters (",
                      iters, ") forwards are timed, got max_iters=", o.repeat.maxIters);
  }
  o.peak = rateSourceArgument(peak, "peak");
  o.peakFlops = peakFlops;
  if (counters.has_value()) {
    try {
      o.counters = hw::parseCounterSets(*counters);
    } catch (const std::invalid_argument& e) {
      TORCH_CHECK_VALUE(false, e.what());
    }
  }
  try {
    o.counterReplay = hw::parseReplay(counterReplay);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  return o;
}

at::Tensor profileOp(const c10::IValue& model, const at::Tensor& x, int64_t warmup, int64_t iters,
                     bool cudaGraph, std::string peak, std::optional<double> peakFlops, bool trace,
                     std::optional<std::string> timing, std::optional<double> targetCi,
                     double maxTime, std::optional<int64_t> maxIters, int64_t traceForwards,
                     std::optional<std::vector<std::string>> counters, std::string counterReplay) {
  // The summary has no per-op rows, so no module paths are recorded.
  return toTensor(
      profileModel(model, {x},
                   options(warmup, iters, cudaGraph, peak, peakFlops, trace, /*chromeTrace=*/false,
                           /*modulePaths=*/false, timing, targetCi, maxTime, maxIters,
                           traceForwards, counters, counterReplay))
          .summary);
}

Output profileFullOp(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
                     int64_t warmup, int64_t iters, bool cudaGraph, std::string peak,
                     std::optional<double> peakFlops, bool trace, bool chromeTrace,
                     bool modulePaths, std::optional<std::string> timing,
                     std::optional<double> targetCi, double maxTime,
                     std::optional<int64_t> maxIters, int64_t traceForwards,
                     std::optional<std::vector<std::string>> counters, std::string counterReplay) {
  return wrap(profileModel(
      model, inputs,
      options(warmup, iters, cudaGraph, peak, peakFlops, trace, chromeTrace, modulePaths, timing,
              targetCi, maxTime, maxIters, traceForwards, counters, counterReplay)));
}

// The metrics behind counter sets, as keys and their first (GH100) names: what the
// benchmarks hand to ncu to read the same metrics. The chip may know another candidate.
std::tuple<std::vector<std::string>, std::vector<std::string>> counterMetricsOp(
    std::vector<std::string> sets) {
  std::vector<hw::CounterSet> parsed;
  try {
    parsed = hw::parseCounterSets(sets);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  std::vector<std::string> keys, names;
  for (const auto* defs : {&hw::rangeMetricDefs(), &hw::pmMetricDefs()}) {
    for (const hw::MetricDef& d : *defs) {
      if (hw::hasSet(parsed, d.set)) {
        keys.emplace_back(d.key);
        names.push_back(d.candidates.front());
      }
    }
  }
  return {keys, names};
}

int64_t countBeginOp() {
  return OpCounter::begin();
}

bool countAbandonOp(int64_t token) {
  return OpCounter::abandon(token);
}

void countAbortOp() {
  OpCounter::abort();
}

Output countEndOp(c10::Device device, int64_t batchSize, double seconds, std::string peak,
                  std::optional<double> peakFlops) {
  CountResult counted = OpCounter::end();
  return wrap(summarizeCount(std::move(counted.table), concreteDevice(device), batchSize, seconds,
                             rateSourceArgument(peak, "peak"), peakFlops));
}

std::tuple<double, std::string> peakFlopsOp(c10::Device device, std::string dtype,
                                            std::string source) {
  const auto d = parsePeakDtype(dtype);
  TORCH_CHECK_VALUE(d.has_value(), "torchutil: unknown dtype '", dtype,
                    "'; use float64, float32, tf32, float16, bfloat16, float8 or int8");
  Peak p = devicePeak(concreteDevice(device), *d, rateSourceArgument(source, "source"));
  return {p.flopsPerSecond, p.source};
}

at::Tensor utilizationOp(const at::Tensor& flops, const at::Tensor& seconds,
                         const at::Tensor& peak) {
  TORCH_CHECK_VALUE(
      flops.is_floating_point() && seconds.is_floating_point() && peak.is_floating_point(),
      "torchutil: utilization takes floating-point tensors, got ", flops.scalar_type(), ", ",
      seconds.scalar_type(), ", ", peak.scalar_type());
  return flops / seconds / peak;
}

int64_t liveCallbacksOp() {
  return OpCounter::liveCallbacks();
}

bool countingOp() {
  return OpCounter::active();
}

}  // namespace

TORCH_LIBRARY(util, m) {
  m.class_<ProfileOutputObject>("ProfileOutput")
      .def("summary", &ProfileOutputObject::summary)
      .def("numbers", &ProfileOutputObject::numbers)
      .def("text_column", &ProfileOutputObject::textColumn)
      .def("text", &ProfileOutputObject::text);
  m.def(
      "profile(Any model, Tensor x, *, int warmup=3, int iters=10, bool cuda_graph=False, "
      "str peak=\"auto\", float? peak_flops=None, bool trace=True, str? timing=None, "
      "float? target_ci=None, float max_time=2.0, int? max_iters=None, int trace_forwards=1, "
      "str[]? counters=None, str counter_replay=\"user\") -> Tensor",
      &profileOp);
  m.def(
      "_profile(Any model, Tensor[] inputs, int warmup=3, int iters=10, bool cuda_graph=False, "
      "str peak=\"auto\", float? peak_flops=None, bool trace=True, bool chrome_trace=False, "
      "bool module_paths=True, str? timing=None, float? target_ci=None, float max_time=2.0, "
      "int? max_iters=None, int trace_forwards=1, str[]? counters=None, "
      "str counter_replay=\"user\") "
      "-> __torch__.torch.classes.util.ProfileOutput",
      &profileFullOp);
  m.def("_counter_metrics(str[] sets) -> (str[] keys, str[] names)", &counterMetricsOp);
  m.def("_count_begin() -> int", &countBeginOp);
  m.def("_count_abandon(int token) -> bool", &countAbandonOp);
  m.def(
      "_count_end(Device device, int batch_size, float seconds, str peak=\"auto\", "
      "float? peak_flops=None) -> __torch__.torch.classes.util.ProfileOutput",
      &countEndOp);
  m.def("_count_abort() -> ()", &countAbortOp);
  m.def("_counting() -> bool", &countingOp);
  m.def("_live_callbacks() -> int", &liveCallbacksOp);
  m.def("peak_flops(Device device, str dtype, str source=\"auto\") -> (float, str)", &peakFlopsOp);
  m.def("utilization(Tensor flops, Tensor seconds, Tensor peak_flops_per_second) -> Tensor",
        &utilizationOp);
  // Every field of a result by table: (names, kinds "real"/"count"/"text", descriptions).
  m.def("_schema(str table) -> (str[] names, str[] kinds, str[] docs)", &schemaOp);
  m.def("_schema_tables() -> str[]", [] { return schemaNames(); });
  m.def("result_fields() -> str[]", [] { return fieldNames("summary"); });
  m.def("op_fields() -> str[]", [] { return numericFieldNames("ops"); });
  m.def("kernel_fields() -> str[]", [] { return numericFieldNames("kernels"); });
  m.def("formula_ops() -> str[]", [] { return FormulaRegistry::global().names(); });
}

}  // namespace torchutil
