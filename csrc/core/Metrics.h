#pragma once
// The arithmetic that fills a result's summary and op rows (the fields are defined in
// core/ResultSchema.h). torch.ops.util.profile returns the summary, a float64 tensor with one
// element per field.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/CountSession.h"
#include "core/EnergyWindows.h"
#include "core/KernelTrace.h"
#include "core/NotANumber.h"
#include "core/PeakTable.h"
#include "core/Repetition.h"
#include "core/ResultSchema.h"

namespace torchutil {

struct SummaryInputs {
  CountTotals totals;
  double secondsPerForward = 0.0;   // NaN when nothing was timed
  MedianInterval secondsInterval;   // of secondsPerForward
  double peakFlopsPerSecond = 0.0;  // NaN when unknown
  double peakBytesPerSecond = 0.0;  // memory bandwidth; NaN when unknown
  int64_t batchSize = 0;
  int64_t iterations = 0;
  bool cudaGraph = false;
  const TraceStats* trace = nullptr;  // null when kernels were not traced
  int64_t tracedForwards = 0;
  const EnergyResult* energy = nullptr;  // null when energy was not asked for
  double params = kNaN;                  // the model's parameters; NaN where not counted
  // The forward ran work that could not be counted (ProfileOutput::flopsNote): every FLOP
  // field, and every figure made from one, is NaN.
  bool flopsUnknown = false;
};

// Values in Field order.
std::vector<double> summarize(const SummaryInputs& in);

// Appends one row to an "ops" table. kernels is null when nothing was traced (the kernel
// fields stay NaN).
void addOpRow(ResultTable& table, const OpStats& s, const OpKernelStats* kernels, double peak,
              double peakBytesPerSecond);

// Median of a sample (NaN when empty).
double median(std::vector<double> values);

}  // namespace torchutil

namespace torchutil {

// The peak dtype carrying the most matrix FLOPs (then the most FLOPs) in a count. float32
// counts as TF32 when the library that runs it may use TF32: cuDNN for convolutions
// (tf32Conv), cuBLAS for everything else (tf32Matmul). nullopt when nothing was counted.
std::optional<PeakDtype> dominantPeakDtype(const CountTable& table, bool tf32Matmul, bool tf32Conv);

}  // namespace torchutil
