#pragma once
// The fields of the result tensor, defined once, and the arithmetic that fills them.
// torch.ops.util.profile returns a float64 tensor with one element per field, in this order;
// torch.ops.util.result_fields() returns the names.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/CountSession.h"
#include "core/KernelTrace.h"
#include "core/PeakTable.h"

namespace torchutil {

// X(name, description). Times are seconds, rates per second, sizes bytes; NaN where a value
// does not exist (nothing timed on a meta device, no peak known).
#define TORCHUTIL_RESULT_FIELDS(X)                                                           \
  X(utilization, "achieved FLOP/s / peak FLOP/s (a fraction, 0..1)")                         \
  X(matrix_utilization, "matrix FLOP/s / peak FLOP/s")                                       \
  X(flops, "FLOPs per forward, matrix + vector (2 x multiply-accumulate)")                   \
  X(matrix_flops, "FLOPs of matrix products, convolutions and attention per forward")        \
  X(vector_flops, "FLOPs of elementwise ops, normalization, pooling, reductions per forward") \
  X(bytes, "bytes read and written by the ops of one forward (nominal)")                     \
  X(arithmetic_intensity, "flops / bytes")                                                   \
  X(seconds, "median seconds per forward")                                                   \
  X(inputs_per_second, "batch size / seconds")                                               \
  X(achieved_flops_per_second, "flops / seconds")                                            \
  X(peak_flops_per_second, "peak FLOP/s of the device for the dominant dtype")               \
  X(batch_size, "size of the input's first dimension")                                       \
  X(iterations, "timed forwards")                                                            \
  X(counted_op_calls, "op calls priced by a formula per forward")                            \
  X(unknown_op_calls, "op calls with no formula per forward (see the unknown-op list)")      \
  X(cuda_graph, "1 if the timed forwards were CUDA-graph replays, else 0")                   \
  X(traced, "1 if GPU kernels were recorded with CUPTI, else 0 (then the kernel fields are NaN)") \
  X(kernels_per_forward, "GPU kernels, memcpys and memsets per forward")                    \
  X(kernel_seconds, "sum of kernel durations per forward")                                  \
  X(gpu_busy_seconds, "union of kernel intervals per forward")                              \
  X(gpu_busy_fraction, "gpu_busy_seconds / seconds (what nvidia-smi calls utilization)")    \
  X(kernel_utilization, "flops / kernel_seconds / peak: utilization while kernels run")     \
  X(unattributed_kernel_seconds, "kernel time per forward that no counted op launched")

enum class Field : int {
#define TORCHUTIL_FIELD_ENUM(name, doc) name,
  TORCHUTIL_RESULT_FIELDS(TORCHUTIL_FIELD_ENUM)
#undef TORCHUTIL_FIELD_ENUM
      kCount
};

constexpr int kNumFields = static_cast<int>(Field::kCount);

std::vector<std::string> fieldNames();
std::vector<std::string> fieldDescriptions();

struct SummaryInputs {
  CountTotals totals;
  double secondsPerForward = 0.0;  // NaN when nothing was timed
  double peakFlopsPerSecond = 0.0; // NaN when unknown
  int64_t batchSize = 0;
  int64_t iterations = 0;
  bool cudaGraph = false;
  const TraceStats* trace = nullptr;  // null when kernels were not traced
};

// Values in Field order.
std::vector<double> summarize(const SummaryInputs& in);

// Per-op columns of the op table tensor, in this order.
#define TORCHUTIL_OP_FIELDS(X)                 \
  X(calls, "calls per forward")                \
  X(matrix_flops, "matrix FLOPs")              \
  X(vector_flops, "vector FLOPs")              \
  X(bytes, "bytes read and written")           \
  X(arithmetic_intensity, "FLOPs per byte")  \
  X(kernels, "GPU kernels per forward")        \
  X(kernel_seconds, "kernel time per forward") \
  X(kernel_flops_per_second, "FLOPs / kernel_seconds") \
  X(kernel_utilization, "kernel_flops_per_second / peak") \
  X(lost_seconds, "kernel_seconds - FLOPs / peak: time above running at peak")

std::vector<std::string> opFieldNames();
// kernels is null when nothing was traced (the kernel columns are then NaN).
std::vector<double> opRow(const OpStats& s, const OpKernelStats* kernels, double peak);

// Median of a sample (NaN when empty).
double median(std::vector<double> values);

}  // namespace torchutil

namespace torchutil {

// The peak dtype carrying the most matrix FLOPs (then the most FLOPs) in a count. float32
// counts as TF32 when the library that runs it may use TF32: cuDNN for convolutions
// (tf32Conv), cuBLAS for everything else (tf32Matmul). nullopt when nothing was counted.
std::optional<PeakDtype> dominantPeakDtype(const CountTable& table, bool tf32Matmul,
                                           bool tf32Conv);

}  // namespace torchutil
