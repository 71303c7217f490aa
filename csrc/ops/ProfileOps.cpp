// The util:: operators. Schemas stand next to their implementations; private ops start with _.
#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include "core/FormulaRegistry.h"
#include "core/HwCounters.h"
#include "core/KernelTrace.h"
#include "core/Metrics.h"
#include "core/ResultSchema.h"
#include "libtorch/DevicePeak.h"
#include "libtorch/Forward.h"
#include "libtorch/OpCounter.h"
#include "libtorch/Profile.h"
#include "libtorch/Timing.h"
#include "libtorch/ValueErrors.h"
#include "ops/ProfileArgs.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
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
  return *valueErrors(get);
}

// util.ProfileOutput: a profile's result for Python, every part by name (core/ResultSchema.h).
// The dispatcher carries it as a script object; torchutil/result.py builds its rows from
// torch.ops.util._schema. The tables are named on first use: a caller that reads the summary
// and the texts alone pays nothing for hundreds of kernel rows.
class ProfileOutputObject : public torch::CustomClassHolder {
 public:
  explicit ProfileOutputObject(ProfileOutput out)
      : out_(std::move(out)), result_(nameResult(out_, /*tables=*/false)) {}

  at::Tensor summary() const { return toTensor(result_.summary); }

  // The numeric fields of a table, [rows, numeric fields] float64.
  at::Tensor numbers(const std::string& table) {
    const ResultTable& t = lookup([&] { return &named().table(table); });
    const std::vector<double> values = t.numbers();
    return toTensor(values).reshape(
        {static_cast<int64_t>(t.rows()), static_cast<int64_t>(t.numericWidth())});
  }

  std::vector<std::string> textColumn(const std::string& table, const std::string& field) {
    return lookup([&] { return &named().table(table).textColumn(field); });
  }

  std::string text(const std::string& name) const {
    return lookup([&] { return &result_.text(name); });
  }

 private:
  const NamedResult& named() {
    std::call_once(tablesNamed_, [this] { nameTables(out_, &result_); });
    return result_;
  }

  ProfileOutput out_;
  NamedResult result_;
  std::once_flag tablesNamed_;
};

using Output = c10::intrusive_ptr<ProfileOutputObject>;

Output wrap(ProfileOutput out) {
  return c10::make_intrusive<ProfileOutputObject>(std::move(out));
}

std::tuple<std::vector<std::string>, std::vector<std::string>, std::vector<std::string>> schemaOp(
    std::string table) {
  std::vector<std::string> names, kinds, docs;
  for (const FieldSpec& f : valueErrors([&]() -> decltype(auto) { return schema(table); })) {
    names.emplace_back(f.name);
    kinds.emplace_back(valueKindName(f.kind));
    docs.emplace_back(f.doc);
  }
  return {names, kinds, docs};
}

// The arguments of a profile op on the dispatcher's stack: the model, the inputs and the
// options by name (ops/ProfileArgs.h). Boxed, so that the options table is the only list.
struct StackArgs {
  c10::IValue model;
  std::vector<at::Tensor> inputs;
  OptionValues options;
};

StackArgs popArgs(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  auto values = torch::jit::last(*stack, arguments.size());
  StackArgs a;
  a.model = values[0];
  if (values[1].isTensor()) {
    a.inputs.push_back(values[1].toTensor());
  } else {
    a.inputs = values[1].toTensorVector();
  }
  for (size_t i = 2; i < arguments.size(); ++i) {
    a.options.emplace(arguments[i].name(), values[i]);
  }
  torch::jit::drop(*stack, arguments.size());
  return a;
}

// util::profile: the summary only, so no module paths are recorded.
void profileOp(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  StackArgs a = popArgs(op, stack);
  torch::jit::push(
      stack,
      toTensor(
          profileModel(a.model, a.inputs, profileOptions(a.options, /*summaryOp=*/true)).summary));
}

void profileFullOp(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  StackArgs a = popArgs(op, stack);
  torch::jit::push(
      stack, wrap(profileModel(a.model, a.inputs, profileOptions(a.options, /*summaryOp=*/false))));
}

// The metrics behind counter sets, as keys and their first (GH100) names: what the
// benchmarks hand to ncu to read the same metrics. The chip may know another candidate.
std::tuple<std::vector<std::string>, std::vector<std::string>> counterMetricsOp(
    std::vector<std::string> sets) {
  const std::vector<hw::CounterSet> parsed =
      valueErrors([&] { return hw::parseCounterSets(sets); });
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

// model: the Profiler's (an nn.Module boxed by torchutil/_ops.py), or None.
Output countEndOp(c10::Device device, int64_t batchSize, double seconds, const c10::IValue& model,
                  std::string peak, std::optional<double> peakFlops) {
  ModelFacts facts{"", kNaN, "no model was given to the Profiler"};
  if (!model.isNone()) {
    facts = makeForward(model)->modelFacts();
  }
  CountResult counted = OpCounter::end();
  return wrap(summarizeCount(std::move(counted.table), concreteDevice(device), batchSize, seconds,
                             rateSourceArgument(peak, "peak"), peakFlops, std::move(facts)));
}

// The checks _count_end makes of its peak options, for Profiler.__init__: a bad value is refused
// before the block runs, not after.
void checkPeakOptionsOp(std::string peak, std::optional<double> peakFlops) {
  rateSourceArgument(peak, "peak");
  checkPeakOverride(peakFlops);
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
  m.def(profileSchema("profile", "Any model, Tensor x", "Tensor", /*summaryOp=*/true).c_str(),
        torch::CppFunction::makeFromBoxedFunction<&profileOp>());
  m.def(profileSchema("_profile", "Any model, Tensor[] inputs",
                      "__torch__.torch.classes.util.ProfileOutput", /*summaryOp=*/false)
            .c_str(),
        torch::CppFunction::makeFromBoxedFunction<&profileFullOp>());
  m.def("_counter_metrics(str[] sets) -> (str[] keys, str[] names)", &counterMetricsOp);
  m.def("_count_begin() -> int", &countBeginOp);
  m.def("_count_abandon(int token) -> bool", &countAbandonOp);
  m.def(
      "_count_end(Device device, int batch_size, float seconds, Any model, str peak=\"auto\", "
      "float? peak_flops=None) -> __torch__.torch.classes.util.ProfileOutput",
      &countEndOp);
  m.def("_count_abort() -> ()", &countAbortOp);
  m.def("_check_peak_options(str peak, float? peak_flops) -> ()", &checkPeakOptionsOp);
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
