"""The columns of a NATS-Bench results row: what torchutil.nas.cells.evaluate_arch measures into a
row, what the search engines (torchutil.nas.engines) may reward, and what `nas evaluate`'s SQLite
table `results` stores (the studies' nas_db.py opens, reads and writes it)."""
from __future__ import annotations

from torchutil._ops import CHOICES

__all__ = ["CONFIG_COLUMNS", "KEY_COLUMNS", "METRIC_COLUMNS", "SUMMARY_COLUMNS", "TIMINGS"]

# A row's identity. `device` is the device type ("cuda", "cpu"): the shards of one sweep run on
# cuda:0..cuda:7 and are one measurement; the GPU's name is in `device_name`.
KEY_COLUMNS = ("idx", "dataset", "batch", "dtype", "device", "mode")
TIMINGS = CHOICES["timing"]  # a row's mode
# One measurement config: a row's key without the arch index.
CONFIG_COLUMNS = KEY_COLUMNS[1:]
# Copied from the profile summary (torchutil.FIELDS); kernel figures are NaN (NULL) untraced.
# cuda_graph: 1 where the forward was timed as graph replays (timing "auto" falls back to
# eager for a cell that cannot be captured); seconds_relative_ci: how tight its median is.
SUMMARY_COLUMNS = ("utilization", "matrix_utilization", "flops", "matrix_flops", "bytes",
                   "seconds", "inputs_per_second", "achieved_flops_per_second",
                   "peak_flops_per_second", "kernels_per_forward", "kernel_seconds",
                   "gpu_busy_fraction", "kernel_utilization", "bandwidth_utilization",
                   "peak_bytes_per_second", "seconds_relative_ci", "cuda_graph",
                   # nas evaluate --energy (docs/energy.md); NULL without it.
                   "joules", "joules_ci_low", "joules_ci_high", "watts", "flops_per_joule", "inputs_per_joule")
# params: trainable parameters of the network; eval_seconds: wall time of the whole
# evaluation of the arch (construction + profile), what a sweep pays per arch.
METRIC_COLUMNS = (*SUMMARY_COLUMNS, "params", "build_seconds", "eval_seconds")
