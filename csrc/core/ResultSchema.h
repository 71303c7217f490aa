#pragma once
// Every field of a profile's result, defined once: the summary, the per-op, per-kernel,
// unknown-op and roofline tables, and the result's texts. Python builds its rows and attributes
// from these lists by name (torch.ops.util._schema), so a new field is one line here, the code
// that fills it, and its documentation. Torch-free.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torchutil {

// Real: a float (NaN where it does not exist). Count: an integer (NaN, None in Python, where
// it does not exist). Text: a string column, kept apart from the numeric tensor.
enum class ValueKind : uint8_t { Real, Count, Text };

const char* valueKindName(ValueKind k);  // "real", "count", "text"

struct FieldSpec {
  const char* name;
  ValueKind kind;
  const char* doc;
};

// The field tables stay one field to a line.
// clang-format off
// X(name, kind, doc). Times are seconds, rates per second, sizes bytes.
#define TORCHUTIL_RESULT_FIELDS(X)                                                            \
  X(utilization, Real, "achieved FLOP/s / peak FLOP/s (a fraction, 0..1)")                    \
  X(matrix_utilization, Real, "matrix FLOP/s / peak FLOP/s")                                  \
  X(flops, Real, "FLOPs per forward, matrix + vector (2 x multiply-accumulate)")              \
  X(matrix_flops, Real, "FLOPs of matrix products, convolutions and attention per forward")   \
  X(vector_flops, Real,                                                                       \
    "FLOPs of elementwise ops, normalization, pooling, reductions per forward")               \
  X(useful_flops, Real,                                                                      \
    "flops less those on attention scores a causal mask discards (= flops where none is "    \
    "masked); utilization uses flops")                                                         \
  X(bytes, Real, "bytes read and written by the ops of one forward (nominal)")                \
  X(arithmetic_intensity, Real, "flops / bytes")                                              \
  X(seconds, Real, "median seconds per forward")                                              \
  X(seconds_ci_low, Real, "95 % confidence interval of the median seconds: low end")          \
  X(seconds_ci_high, Real, "95 % confidence interval of the median seconds: high end")        \
  X(seconds_relative_ci, Real,                                                                \
    "half the interval's width / the median (0.005: the median is known to +-0.5 %)")         \
  X(inputs_per_second, Real, "batch size / seconds")                                          \
  X(achieved_flops_per_second, Real, "flops / seconds")                                       \
  X(peak_flops_per_second, Real, "peak FLOP/s of the device for the dominant dtype")          \
  X(bandwidth_utilization, Real,                                                              \
    "achieved bytes/s / peak memory bandwidth: bytes / seconds / peak_bytes_per_second")     \
  X(achieved_bytes_per_second, Real, "bytes / seconds")                                       \
  X(peak_bytes_per_second, Real, "memory bandwidth of the device (see bandwidth_source)")     \
  X(batch_size, Real, "size of the input's first dimension")                                  \
  X(params, Real,                                                                             \
    "parameters of the model (nn.Module.parameters(), a shared one once), counted by "         \
    "torchutil.profile; NaN where the model is no nn.Module (params_note says why)")           \
  X(iterations, Real, "timed forwards (with target_ci: as many as the interval needed)")      \
  X(counted_op_calls, Real, "op calls priced by a formula per forward")                       \
  X(unknown_op_calls, Real, "op calls with no formula per forward (see the unknown-op list)") \
  X(cuda_graph, Real, "1 if the timed forwards were CUDA-graph replays, else 0")              \
  X(traced, Real,                                                                             \
    "1 if GPU kernels were recorded with CUPTI, else 0 (then the kernel fields are NaN)")     \
  X(kernels_per_forward, Real, "GPU kernels, memcpys and memsets per forward")                \
  X(kernel_seconds, Real, "sum of kernel durations per forward")                              \
  X(gpu_busy_seconds, Real, "union of kernel intervals per forward")                          \
  X(gpu_busy_fraction, Real, "gpu_busy_seconds / seconds (what nvidia-smi calls utilization)") \
  X(kernel_utilization, Real, "flops / kernel_seconds / peak: utilization while kernels run")  \
  X(kernel_bandwidth_utilization, Real,                                                       \
    "bytes / kernel_seconds / peak_bytes_per_second: bandwidth utilization while kernels run") \
  X(traced_forwards, Real, "forwards after the counted one whose kernels were traced")          \
  X(unattributed_kernel_seconds, Real, "kernel time per forward that no counted op launched") \
  X(other_thread_op_calls, Real,                                                              \
    "op calls on other threads that could not be counted (forks while several counts run)")   \
  X(count_saturated, Real,                                                                    \
    "1 if a FLOP or byte count did not fit int64 and is held at 2^63-1 (a lower bound)")       \
  X(peak_exceeded, Real,                                                                      \
    "utilization (or kernel_utilization) when above 1: the peak is below what ran; else 0")   \
  X(hw_tensor_flops, Real,                                                                    \
    "FLOPs the tensor cores executed per forward, from the GPU's counters (counters='flops')") \
  X(hw_flops_ratio, Real,                                                                     \
    "hw_tensor_flops / matrix_flops: above 1 padded or wasted work, below 1 work done elsewhere") \
  X(hw_tensor_flops_fp16, Real, "hw_tensor_flops of the float16 tensor paths")               \
  X(hw_tensor_flops_bf16, Real, "hw_tensor_flops of the bfloat16 tensor paths")              \
  X(hw_tensor_flops_tf32, Real, "hw_tensor_flops of the tf32 tensor paths")                  \
  X(hw_tensor_flops_fp8, Real, "hw_tensor_flops of the float8 tensor paths")                 \
  X(hw_tensor_int8_ops, Real, "integer tensor-path operations per forward (not FLOPs)")      \
  X(hw_gmma_instructions, Real, "warp-group tensor instructions (gmma) per forward")         \
  X(hw_fma_instructions, Real, "FMA-pipe warp instructions per forward")                     \
  X(hw_alu_instructions, Real, "ALU-pipe warp instructions per forward")                     \
  X(sm_throughput_pct, Real,                                                                  \
    "SM throughput, % of peak, kernel-time-weighted mean over the forward (counters='throughput')") \
  X(dram_throughput_pct, Real, "DRAM throughput, % of peak, kernel-time-weighted mean")       \
  X(tensor_active_pct, Real, "tensor-pipe active cycles, % of peak, kernel-time-weighted mean") \
  X(achieved_occupancy_pct, Real, "active warps, % of the SM maximum, kernel-time-weighted mean") \
  X(counter_kernels, Real, "kernels whose counters were read and matched to the counted forward") \
  X(counter_passes, Real, "extra forwards the range profiler ran (one per replay pass)")      \
  X(counter_seconds, Real,                                                                    \
    "wall time of reading the range counters: set-up, passes, decoding and release")          \
  X(counter_setup_seconds, Real,                                                              \
    "part of counter_seconds: the range profiler opened, its metrics configured, enabled")    \
  X(counter_pass_seconds, Real,                                                               \
    "part of counter_seconds: the replay passes (each begun, a forward run, ended)")          \
  X(counter_decode_seconds, Real,                                                             \
    "part of counter_seconds: the passes' data decoded, each range's values read and "        \
    "decoded into metrics")                                                                   \
  X(pm_sm_active_pct, Real,                                                                   \
    "PM sampling: SM active cycles, % of elapsed, over the sampled forwards (counters='timeline')") \
  X(pm_tensor_active_pct, Real, "PM sampling: tensor-pipe active, % of peak, over the sampled forwards") \
  X(pm_dram_throughput_pct, Real, "PM sampling: DRAM throughput, % of peak, over the sampled forwards") \
  X(pm_samples, Real,                                                                         \
    "PM samples: over the traced forwards when traced, else over max(trace_forwards, 1) "       \
    "forwards after the timed ones")                                                            \
  X(pm_interval_us, Real,                                                                     \
    "microseconds between PM samples: 10, or longer where the sampled forwards would overfill " \
    "the sampler's buffer (forwards over 24 ms)")                                                                     \
  X(pm_clock_offset_us, Real,                                                                 \
    "microseconds added to PM sample times to line them up with the kernel records")          \
  X(joules, Real,                                                                             \
    "joules per forward (energy=True): the energy windows' joules over their forwards, the "   \
    "device's whole draw")                                                                    \
  X(joules_ci_low, Real,                                                                      \
    "95 % confidence interval of joules, low end (Student's t over the windows; NaN with one)") \
  X(joules_ci_high, Real, "95 % confidence interval of joules: high end")                    \
  X(watts, Real, "the device's mean power over the energy windows")                          \
  X(flops_per_joule, Real, "flops / joules")                                                 \
  X(inputs_per_joule, Real, "batch size / joules")                                           \
  X(energy_seconds, Real, "seconds of forwards the energy windows span")                     \
  X(energy_wait_seconds, Real,                                                                \
    "part of phase_energy_seconds: from the first forward queued to the counter's change "    \
    "that opens the first window")                                                            \
  X(energy_drain_seconds, Real,                                                               \
    "part of phase_energy_seconds: from the change that closes the last window to the last "  \
    "queued forward finished")                                                                \
  X(call_seconds, Real, "wall time of the profile call in C++; the phase_* fields add up to it") \
  X(phase_warmup_seconds, Real, "of call_seconds: the plain warm-up forwards")               \
  X(phase_count_seconds, Real,                                                                \
    "the eager counted forward (0 when the capture's forward was counted: phase_capture_seconds)") \
  X(phase_capture_seconds, Real, "capturing the CUDA graph, with the count when untraced")    \
  X(phase_trace_seconds, Real, "CUPTI's set-up and the traced forwards, with its tear-down")  \
  X(phase_time_seconds, Real, "graph warm-up replays and the timed forwards")                 \
  X(phase_counters_seconds, Real, "hardware-counter passes and sampled forwards")             \
  X(phase_energy_seconds, Real, "the energy windows' forwards (energy=True)")                 \
  X(phase_wait_seconds, Real, "waiting for gpu_lock (processes sharing one GPU)")             \
  X(phase_assemble_seconds, Real, "matching kernels to ops, the peak and the summary")

// One row per (op, module, dtype) of the counted forward; totals over its calls.
#define TORCHUTIL_OP_FIELDS(X)                                                          \
  X(op, Text, "operator name (aten::conv2d)")                                           \
  X(module, Text, "dotted path of the module that called it (\"\" at top level)")       \
  X(dtype, Text, "dtype of its first tensor input")                                     \
  X(op_class, Text, "\"matrix\", \"vector\" or \"memory\"")                             \
  X(calls, Count, "calls per forward")                                                  \
  X(matrix_flops, Count, "matrix FLOPs")                                                \
  X(vector_flops, Count, "vector FLOPs")                                                \
  X(useful_flops, Count, "FLOPs less those on scores a causal mask discards")           \
  X(bytes, Count, "bytes read and written")                                             \
  X(arithmetic_intensity, Real, "FLOPs per byte")                                       \
  X(kernels, Real, "GPU kernels per forward")                                           \
  X(kernel_seconds, Real,                                                               \
    "kernel time per forward; on a CPU the wall time of its calls (kernel_attribution \"cpu\")") \
  X(kernel_flops_per_second, Real, "FLOPs / kernel_seconds")                            \
  X(kernel_utilization, Real, "kernel_flops_per_second / peak")                         \
  X(kernel_bandwidth_utilization, Real, "bytes / kernel_seconds / peak bandwidth")      \
  X(lost_seconds, Real, "kernel_seconds - FLOPs / peak: time above running at peak")   \
  X(hw_tensor_flops, Real, "FLOPs its kernels ran on the tensor cores (counters='flops')") \
  X(hw_flops_ratio, Real, "hw_tensor_flops / matrix_flops")                             \
  X(hw_fma_instructions, Real, "FMA-pipe warp instructions of its kernels")              \
  X(hw_alu_instructions, Real, "ALU-pipe warp instructions of its kernels")              \
  X(sm_throughput_pct, Real, "SM throughput %, mean weighted by kernel time")           \
  X(dram_throughput_pct, Real, "DRAM throughput %, mean weighted by kernel time")       \
  X(tensor_active_pct, Real, "tensor-pipe active %, mean weighted by kernel time")      \
  X(achieved_occupancy_pct, Real, "achieved occupancy %, mean weighted by kernel time") \
  X(pm_sm_active_pct, Real, "PM sampling: SM active % while its kernels ran")           \
  X(pm_tensor_active_pct, Real, "PM sampling: tensor-pipe active % while its kernels ran") \
  X(pm_dram_throughput_pct, Real, "PM sampling: DRAM throughput % while its kernels ran")

// One row per traced GPU kernel, memcpy and memset: the counted forward's, then the timed
// forwards'.
#define TORCHUTIL_KERNEL_FIELDS(X)                                                            \
  X(name, Text, "kernel name as torch.profiler shows it")                                     \
  X(op, Text,                                                                                 \
    "the counted op that accounts for it (\"\" when none); for a kernel Inductor generated, "   \
    "the ops it fused (\" + \"-joined)")                                                        \
  X(module, Text, "that op's module (a generated kernel: its ops' modules)")                   \
  X(timed, Count, "0: launched by the counted forward; 1: by a timed forward")                \
  X(forward, Count,                                                                           \
    "index of the timed forward that launched it; none for the counted forward and for "     \
    "timed kernels that could not be split by forward (see kernel_attribution)")              \
  X(kind, Count, "0 kernel, 1 memcpy, 2 memset")                                              \
  X(start_us, Real, "start, microseconds from the first record")                              \
  X(duration_us, Real, "duration in microseconds")                                            \
  X(device, Count, "CUDA device")                                                             \
  X(stream, Count, "CUDA stream")                                                             \
  X(grid_x, Count, "grid size")                                                               \
  X(grid_y, Count, "")                                                                        \
  X(grid_z, Count, "")                                                                        \
  X(block_x, Count, "block size")                                                             \
  X(block_y, Count, "")                                                                       \
  X(block_z, Count, "")                                                                       \
  X(registers_per_thread, Count, "")                                                          \
  X(static_shared_bytes, Count, "")                                                           \
  X(dynamic_shared_bytes, Count, "")                                                          \
  X(bytes, Count, "bytes copied or set (memcpy, memset)")                                     \
  X(op_row, Count, "row of the op table that accounts for it, none when no op does")          \
  X(graph_id, Count, "CUDA graph id, 0 outside graphs")                                      \
  X(fused_flops, Real,                                                                        \
    "a generated kernel's nominal FLOPs: those of the ops it fused (NaN for other kernels, "  \
    "and where an op it fused has no price)")                                                 \
  X(fused_bytes, Real, "its nominal bytes: what the ops it fused read and write, each alone") \
  X(hw_tensor_flops, Real, "FLOPs it ran on the tensor cores (counted forward; counters='flops')") \
  X(hw_gmma_instructions, Real, "warp-group tensor instructions")                             \
  X(hw_fma_instructions, Real, "FMA-pipe warp instructions")                                  \
  X(hw_alu_instructions, Real, "ALU-pipe warp instructions")                                  \
  X(sm_throughput_pct, Real, "SM throughput, % of peak (counters='throughput')")             \
  X(dram_throughput_pct, Real, "DRAM throughput, % of peak")                                  \
  X(tensor_active_pct, Real, "tensor-pipe active cycles, % of peak")                          \
  X(achieved_occupancy_pct, Real, "active warps, % of the SM maximum")

// Ops of the counted forward that have no FLOP formula and no counted callee.
#define TORCHUTIL_UNKNOWN_OP_FIELDS(X)                      \
  X(op, Text, "operator name")                              \
  X(calls, Count, "calls per forward")

// Each op on the device's roofline (core/Roofline.h, docs/roofline.md).
#define TORCHUTIL_ROOFLINE_FIELDS(X)                                                        \
  X(intensity, Real, "FLOPs per byte")                                                      \
  X(attainable_flops_per_second, Real, "min(peak, intensity x bandwidth)")                  \
  X(attainable_utilization, Real, "attainable / peak")                                      \
  X(roofline_seconds, Real, "max(flops / peak, bytes / bandwidth)")                         \
  X(achieved_flops_per_second, Real, "flops / kernel seconds (NaN without a kernel trace)") \
  X(roofline_share, Real, "roofline_seconds / kernel seconds (NaN without one)")            \
  X(bound, Text, "\"compute-bound\", \"memory-bound\", \"overhead-bound\" or \"unknown\"")

// The texts of a result.
#define TORCHUTIL_RESULT_TEXTS(X)                                                             \
  X(peak_source, Text, "where the peak FLOP/s came from (datasheet, computed, measured, given)") \
  X(peak_dtype, Text, "the arithmetic the peak is quoted for (float16, tf32, ...)")           \
  X(timing_mode, Text,                                                                        \
    "how the timed forwards ran: \"eager\", \"cuda_graph\", \"wall\" (a Profiler block) or "  \
    "\"none\" (meta)")                                                                          \
  X(timing_note, Text, "why timing=\"auto\" timed eagerly (\"\" when it did not), one line")   \
  X(timing_note_detail, Text,                                                                 \
    "the whole error behind timing_note (a failed capture's traceback), \"\" when none")       \
  X(repetition, Text, "how many timed forwards ran and why that many")                        \
  X(bandwidth_source, Text, "where the memory bandwidth came from")                           \
  X(device, Text, "the device the forward ran on")                                            \
  X(model, Text, "the model's class name (torchutil.profile, a Profiler given a model)")       \
  X(params_note, Text, "why params is NaN (\"\" when it is not)")                               \
  X(flops_note, Text,                                                                         \
    "why the FLOP fields are NaN: work the forward ran out of the dispatcher's sight that "   \
    "could not be priced (\"\" when they are not)")                                           \
  X(trace_status, Text, "\"on\", or \"off: <why>\" / \"on, incomplete: <why>\"")              \
  X(kernel_attribution, Text,                                                                 \
    "where per-op kernel figures come from: \"timed\" (the timed forwards, kernels matched to " \
    "ops by position), \"counted\" (the counted forward alone: the timed forwards launched "  \
    "another kernel sequence), \"cpu\" (the wall time of each op's calls in the counted "     \
    "forward, on a CPU) or \"none\" (nothing traced)")                                        \
  X(chrome_trace, Text, "the Chrome/Perfetto trace JSON (profile(..., chrome_trace=True))")    \
  X(counters_status, Text,                                                                    \
    "hardware counters: \"off\" (not asked for), \"off: <why>\", \"on\" or \"on, partial: <what is missing>\"") \
  X(counters_not_on_gpu, Text,                                                                \
    "metrics of the counter sets asked for that this GPU has no counter for (comma-separated, "  \
    "\"\" when none); they do not make counters_status partial")                             \
  X(energy_source, Text,                                                                      \
    "where joules came from: the counter, how often it changed, the windows' seconds and "     \
    "forwards, other processes seen on the GPU; \"off: <why>\" when not measured")

// clang-format on

#define TORCHUTIL_SCHEMA_ENUM(name, kind, doc) name,
enum class Field : int { TORCHUTIL_RESULT_FIELDS(TORCHUTIL_SCHEMA_ENUM) kCount };
enum class OpField : int { TORCHUTIL_OP_FIELDS(TORCHUTIL_SCHEMA_ENUM) kCount };
enum class KernelField : int { TORCHUTIL_KERNEL_FIELDS(TORCHUTIL_SCHEMA_ENUM) kCount };
enum class UnknownOpField : int { TORCHUTIL_UNKNOWN_OP_FIELDS(TORCHUTIL_SCHEMA_ENUM) kCount };
enum class RooflineField : int { TORCHUTIL_ROOFLINE_FIELDS(TORCHUTIL_SCHEMA_ENUM) kCount };
enum class TextField : int { TORCHUTIL_RESULT_TEXTS(TORCHUTIL_SCHEMA_ENUM) kCount };
#undef TORCHUTIL_SCHEMA_ENUM

constexpr int kNumFields = static_cast<int>(Field::kCount);

// The schema of each table by name: "summary", "ops", "kernels", "unknown_ops", "roofline",
// "texts". Fields in column order.
const std::vector<FieldSpec>& schema(std::string_view table);
std::vector<std::string> schemaNames();

// Names of a schema's fields, all of them or those of one numeric-or-text side.
std::vector<std::string> fieldNames(std::string_view table);
std::vector<std::string> numericFieldNames(std::string_view table);

// A table of one schema, filled by field: numeric fields start NaN, text fields "".
class ResultTable {
 public:
  explicit ResultTable(std::string_view table);

  const std::string& table() const { return table_; }
  const std::vector<FieldSpec>& fields() const { return *fields_; }
  size_t rows() const { return rows_; }
  size_t addRow();

  template <class E>
  void set(size_t row, E field, double value) {
    setNumber(row, static_cast<size_t>(field), value);
  }
  template <class E>
  void setText(size_t row, E field, std::string value) {
    setString(row, static_cast<size_t>(field), std::move(value));
  }
  void setNumber(size_t row, size_t field, double value);
  void setString(size_t row, size_t field, std::string value);

  // The numeric fields, in field order, row-major: rows() x numericWidth().
  std::vector<double> numbers() const;
  size_t numericWidth() const;
  // One field's column (a text field, or a numeric one as numbers).
  const std::vector<std::string>& textColumn(std::string_view field) const;
  const std::vector<double>& numberColumn(std::string_view field) const;

 private:
  size_t index(std::string_view field, ValueKind want) const;

  std::string table_;
  const std::vector<FieldSpec>* fields_;
  size_t rows_ = 0;
  std::vector<std::vector<double>> numbers_;     // per field; empty for text fields
  std::vector<std::vector<std::string>> texts_;  // per field; empty for numeric fields
};

// What a profile returns across the C++/Python boundary (util.ProfileOutput in Python): the
// summary values in Field order, the tables and the texts, each by name.
struct NamedResult {
  std::vector<double> summary;
  ResultTable ops{"ops"};
  ResultTable kernels{"kernels"};
  ResultTable unknownOps{"unknown_ops"};
  std::vector<std::string> texts = std::vector<std::string>(static_cast<size_t>(TextField::kCount));

  const ResultTable& table(std::string_view name) const;  // "ops", "kernels", "unknown_ops"
  void setText(TextField f, std::string value) { texts[static_cast<size_t>(f)] = std::move(value); }
  const std::string& text(std::string_view name) const;
};

}  // namespace torchutil
