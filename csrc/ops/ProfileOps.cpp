// The util:: operators. Schemas stand next to their implementations; private ops start with _.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "libtorch/DevicePeak.h"
#include "libtorch/OpCounter.h"
#include "libtorch/Profile.h"
#include "libtorch/Timing.h"
#include "core/FormulaRegistry.h"
#include "core/KernelTrace.h"
#include "core/Metrics.h"

#include <algorithm>
#include <cstdint>

namespace torchutil {
namespace {

using Strings = std::vector<std::string>;
using FullResult =
    std::tuple<at::Tensor, at::Tensor, Strings, Strings, Strings, Strings, Strings,
               std::vector<int64_t>, std::string, std::string, std::string, std::string,
               at::Tensor, Strings, Strings, Strings, std::string, std::string>;

constexpr const char* kFullResultSchema =
    "(Tensor summary, Tensor op_table, str[] op_names, str[] op_modules, str[] op_dtypes, "
    "str[] op_classes, str[] unknown_ops, int[] unknown_calls, str peak_source, str peak_dtype, "
    "str timing_mode, str device, Tensor kernel_table, str[] kernel_names, str[] kernel_ops, "
    "str[] kernel_modules, str trace_status, str chrome_trace)";

at::Tensor toTensor(const std::vector<double>& values) {
  return at::tensor(values, at::TensorOptions().dtype(at::kDouble));
}

at::Tensor toMatrix(const std::vector<std::vector<double>>& rows, size_t cols) {
  at::Tensor t = at::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)},
                           at::kDouble);
  auto acc = t.accessor<double, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < cols; ++j) {
      acc[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = rows[i][j];
    }
  }
  return t;
}

FullResult toFullResult(const ProfileOutput& out) {
  const auto& rows = out.table.rows();
  const double peak = out.peak.flopsPerSecond;
  std::vector<std::vector<double>> opRows;
  std::vector<std::string> names, modules, dtypes, classes;
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpKernelStats* k = out.traced && i < out.trace.perRow.size() ? &out.trace.perRow[i] : nullptr;
    opRows.push_back(opRow(rows[i], k, peak));
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
  // Kernels, each with the op that accounts for it (its counted owner, else the op itself).
  uint64_t origin = UINT64_MAX;
  for (const KernelRecord& k : out.kernels) {
    origin = std::min(origin, k.startNs);
  }
  std::vector<std::vector<double>> kernelRows;
  std::vector<std::string> kernelNames, kernelOps, kernelModules;
  for (const KernelRecord& k : out.kernels) {
    int64_t row = -1;
    std::string op, module;
    if (k.opEvent >= 0 && static_cast<size_t>(k.opEvent) < out.events.size()) {
      const OpEvent* e = &out.events[static_cast<size_t>(k.opEvent)];
      row = e->row;
      if (e->owner >= 0 && static_cast<size_t>(e->owner) < out.events.size()) {
        e = &out.events[static_cast<size_t>(e->owner)];
      }
      op = e->op;
      module = e->module;
    }
    kernelRows.push_back(kernelRow(k, origin, row));
    kernelNames.push_back(k.name);
    kernelOps.push_back(op);
    kernelModules.push_back(module);
  }
  return {toTensor(out.summary), toMatrix(opRows, opFieldNames().size()), names, modules,
          dtypes, classes, unknownNames, unknownCalls, out.peak.source, out.peak.dtype,
          out.timingMode, out.device, toMatrix(kernelRows, kernelFieldNames().size()),
          kernelNames, kernelOps, kernelModules, out.traceStatus, out.chromeTrace};
}

ProfileOptions options(int64_t warmup, int64_t iters, bool cudaGraph, std::string peak,
                       std::optional<double> peakFlops, bool trace, bool chromeTrace,
                       bool modulePaths) {
  ProfileOptions o;
  o.modulePaths = modulePaths;
  o.trace = trace;
  o.chromeTrace = chromeTrace;
  o.warmup = warmup;
  o.iters = iters;
  o.cudaGraph = cudaGraph;
  o.peak = rateSourceArgument(peak, "peak");
  o.peakFlops = peakFlops;
  return o;
}

at::Tensor profileOp(const c10::IValue& model, const at::Tensor& x, int64_t warmup, int64_t iters,
                     bool cudaGraph, std::string peak, std::optional<double> peakFlops,
                     bool trace) {
  // The summary has no per-op rows, so no module paths are recorded.
  return toTensor(profileModel(model, {x},
                               options(warmup, iters, cudaGraph, std::move(peak), peakFlops, trace,
                                       /*chromeTrace=*/false, /*modulePaths=*/false))
                      .summary);
}

FullResult profileFullOp(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
                         int64_t warmup, int64_t iters, bool cudaGraph, std::string peak,
                         std::optional<double> peakFlops, bool trace, bool chromeTrace,
                         bool modulePaths) {
  return toFullResult(profileModel(model, inputs,
                                   options(warmup, iters, cudaGraph, std::move(peak), peakFlops,
                                           trace, chromeTrace, modulePaths)));
}

void countBeginOp() {
  OpCounter::begin();
}

void countAbortOp() {
  OpCounter::abort();
}

FullResult countEndOp(c10::Device device, int64_t batchSize, double seconds, std::string peak,
                      std::optional<double> peakFlops) {
  CountResult counted = OpCounter::end();
  return toFullResult(summarizeCount(std::move(counted.table), concreteDevice(device), batchSize,
                                     seconds, rateSourceArgument(peak, "peak"), peakFlops));
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
        "str peak=\"auto\", float? peak_flops=None, bool trace=True) -> Tensor",
        &profileOp);
  static const std::string profileFull =
      std::string("_profile(Any model, Tensor[] inputs, int warmup=3, int iters=10, "
                  "bool cuda_graph=False, str peak=\"auto\", float? peak_flops=None, "
                  "bool trace=True, bool chrome_trace=False, bool module_paths=True) -> ") +
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
  m.def("kernel_fields() -> str[]", [] { return kernelFieldNames(); });
  m.def("formula_ops() -> str[]", [] { return FormulaRegistry::global().names(); });
}

}  // namespace torchutil
