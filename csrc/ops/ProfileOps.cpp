// The util:: operators. Schemas stand next to their implementations; private ops start with _.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "DevicePeak.h"
#include "OpCounter.h"
#include "Profile.h"
#include "core/FormulaRegistry.h"
#include "core/Metrics.h"

namespace torchutil {
namespace {

using FullResult = std::tuple<at::Tensor, at::Tensor, std::vector<std::string>,
                              std::vector<std::string>, std::vector<std::string>,
                              std::vector<std::string>, std::vector<std::string>,
                              std::vector<int64_t>, std::string, std::string, std::string,
                              std::string>;

constexpr const char* kFullResultSchema =
    "(Tensor summary, Tensor op_table, str[] op_names, str[] op_modules, str[] op_dtypes, "
    "str[] op_classes, str[] unknown_ops, int[] unknown_calls, str peak_source, str peak_dtype, "
    "str timing_mode, str device)";

at::Tensor toTensor(const std::vector<double>& values) {
  return at::tensor(values, at::TensorOptions().dtype(at::kDouble));
}

FullResult toFullResult(const ProfileOutput& out) {
  const auto& rows = out.table.rows();
  const int64_t nCols = static_cast<int64_t>(opFieldNames().size());
  at::Tensor table = at::empty({static_cast<int64_t>(rows.size()), nCols}, at::kDouble);
  auto acc = table.accessor<double, 2>();
  std::vector<std::string> names, modules, dtypes, classes;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<double> row = opRow(rows[i]);
    for (int64_t j = 0; j < nCols; ++j) {
      acc[static_cast<int64_t>(i)][j] = row[static_cast<size_t>(j)];
    }
    names.push_back(rows[i].op);
    modules.push_back(rows[i].module);
    dtypes.push_back(rows[i].dtype);
    classes.push_back(opClassName(rows[i].opClass));
  }
  std::vector<std::string> unknownNames;
  std::vector<int64_t> unknownCalls;
  for (const auto& u : out.table.unknown()) {
    unknownNames.push_back(u.first);
    unknownCalls.push_back(u.second);
  }
  return {toTensor(out.summary), table, names, modules, dtypes, classes, unknownNames,
          unknownCalls, out.peak.source, out.peak.dtype, out.timingMode, out.device};
}

ProfileOptions options(int64_t warmup, int64_t iters, bool cudaGraph, std::string peak,
                       std::optional<double> peakFlops) {
  ProfileOptions o;
  o.warmup = warmup;
  o.iters = iters;
  o.cudaGraph = cudaGraph;
  o.peak = std::move(peak);
  o.peakFlops = peakFlops;
  return o;
}

at::Tensor profileOp(const c10::IValue& model, const at::Tensor& x, int64_t warmup, int64_t iters,
                     bool cudaGraph, std::string peak, std::optional<double> peakFlops) {
  return toTensor(
      profileModel(model, {x}, options(warmup, iters, cudaGraph, std::move(peak), peakFlops))
          .summary);
}

FullResult profileFullOp(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
                         int64_t warmup, int64_t iters, bool cudaGraph, std::string peak,
                         std::optional<double> peakFlops) {
  return toFullResult(
      profileModel(model, inputs, options(warmup, iters, cudaGraph, std::move(peak), peakFlops)));
}

void countBeginOp() {
  OpCounter::begin();
}

void countAbortOp() {
  OpCounter::abort();
}

FullResult countEndOp(c10::Device device, int64_t batchSize, double seconds, std::string peak,
                      std::optional<double> peakFlops) {
  CountTable table = OpCounter::end();
  return toFullResult(summarizeCount(std::move(table), device, batchSize, seconds, peak, peakFlops));
}

std::tuple<double, std::string> peakFlopsOp(c10::Device device, std::string dtype,
                                            std::string source) {
  const auto d = parsePeakDtype(dtype);
  TORCH_CHECK_VALUE(d.has_value(), "torchutil: unknown dtype '", dtype,
                    "'; use float64, float32, tf32, float16, bfloat16, float8 or int8");
  Peak p = devicePeak(device, *d, source);
  return {p.flopsPerSecond, p.source};
}

at::Tensor utilizationOp(const at::Tensor& flops, const at::Tensor& seconds,
                         const at::Tensor& peak) {
  TORCH_CHECK_VALUE(flops.is_floating_point() && seconds.is_floating_point() &&
                        peak.is_floating_point(),
                    "torchutil: utilization takes floating-point tensors, got ",
                    flops.scalar_type(), ", ", seconds.scalar_type(), ", ", peak.scalar_type());
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
  m.def("profile(Any model, Tensor x, *, int warmup=3, int iters=10, bool cuda_graph=False, "
        "str peak=\"auto\", float? peak_flops=None) -> Tensor",
        &profileOp);
  static const std::string profileFull =
      std::string("_profile(Any model, Tensor[] inputs, int warmup=3, int iters=10, "
                  "bool cuda_graph=False, str peak=\"auto\", float? peak_flops=None) -> ") +
      kFullResultSchema;
  m.def(profileFull.c_str(), &profileFullOp);
  m.def("_count_begin() -> ()", &countBeginOp);
  static const std::string countEnd =
      std::string("_count_end(Device device, int batch_size, float seconds, str peak=\"auto\", "
                  "float? peak_flops=None) -> ") +
      kFullResultSchema;
  m.def(countEnd.c_str(), &countEndOp);
  m.def("_count_abort() -> ()", &countAbortOp);
  m.def("_counting() -> bool", &countingOp);
  m.def("_live_callbacks() -> int", &liveCallbacksOp);
  m.def("peak_flops(Device device, str dtype, str source=\"auto\") -> (float, str)",
        &peakFlopsOp);
  m.def("utilization(Tensor flops, Tensor seconds, Tensor peak_flops_per_second) -> Tensor",
        &utilizationOp);
  m.def("result_fields() -> str[]", [] { return fieldNames(); });
  m.def("op_fields() -> str[]", [] { return opFieldNames(); });
  m.def("formula_ops() -> str[]", [] { return FormulaRegistry::global().names(); });
}

}  // namespace torchutil
