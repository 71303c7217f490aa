"""FoldedCNN benchmark (RQ2): utilization and throughput of each model of
torchutil.models.FOLD_BENCH_MODELS, original (f = 1) and folded (f = 2, 3, 4), at one batch.

    python -m torchutil fold-bench --device cuda --dtype float16 --batch 1024 --out fold-bench/

Writes OUT/fold_bench.csv and OUT/fold_bench.json. The folded networks have random weights:
this measures speed, not accuracy. Variants, each applied to the original and the folded
network alike: cuda_graph (time CUDA-graph replays: no host launch cost), fuse_bn (fold each
eval-mode BatchNorm into the conv before it, as inference engines such as TensorRT do;
torch.fx's fuse), multiple_of (round folded widths, see torchutil.folding) and cudnn_benchmark
(let cuDNN time its algorithms for each shape, as TensorRT tunes its kernels; the warm-up
forwards absorb the tuning).
"""
from __future__ import annotations

import csv
import os
from typing import Any, Sequence

import torch

from torchutil._ops import OPTION_DEFAULTS
from torchutil.folding import FoldedModel, fold
from torchutil.models import FOLD_BENCH_MODELS, build
from torchutil.profiler import profile
from torchutil.studies._common import TORCH_DTYPES, Setup, atomic_open, cudnn_autotune, tf32_flags, write_json

__all__ = ["COLUMNS", "COUNTER_COLUMNS", "format_table", "fuse_batchnorm", "run_fold_bench", "write_outputs"]

COLUMNS = ["model", "f", "batch", "dtype", "device", "mode", "fuse_bn", "multiple_of", "cudnn_benchmark",
           "image_size", "utilization", "kernel_utilization", "inputs_per_second", "throughput_gain", "utilization_gain",
           "flops_per_image", "matrix_flops_per_image", "arithmetic_intensity", "seconds",
           "peak_flops_per_second", "peak_source"]
# With counters= (hardware counters), these follow: tensor-core FLOPs per image as the GPU
# counted them, and their ratio to the counted matrix FLOPs (docs/counters.md).
COUNTER_COLUMNS = ["hw_tensor_flops_per_image", "hw_flops_ratio", "sm_throughput_pct", "dram_throughput_pct",
                   "tensor_active_pct", "pm_sm_active_pct", "counters_status"]


def run_fold_bench(models: Sequence[str] = tuple(FOLD_BENCH_MODELS), factors: Sequence[int] = (2, 3, 4),
                   *, device: str = "cpu", batch: int = 1024, dtype: str = "float32",
                   warmup: int = OPTION_DEFAULTS["warmup"], iters: int = OPTION_DEFAULTS["iters"], channels_last: bool | None = None,
                   cuda_graph: bool = False, fuse_bn: bool = False,
                   multiple_of: int = 1, cudnn_benchmark: bool = False,
                   counters: str | Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One row per (model, f), f = 1 (the original) first; gains are relative to f = 1.

    A folded model takes a batch that f divides: each f runs at the largest such batch not
    above `batch` (1023 for f = 3 at batch 1024; the row's `batch` says which), and every figure
    compared is per image.
    """
    dev = torch.device(device)
    if any(f < 1 for f in factors) or batch < max((1, *factors)):
        raise ValueError(f"torchutil: need folding factors >= 1 and batch >= every factor, got "
                         f"factors {list(factors)} and batch {batch}")
    setup = Setup.on(dev, TORCH_DTYPES[dtype], channels_last)
    rows = []
    for name in models:
        original, size, _classes = build(name)
        base: dict[str, Any] | None = None
        for f in (1, *[f for f in factors if f != 1]):
            model = original if f == 1 else fold(original, f, multiple_of).eval()
            if fuse_bn:
                model = fuse_batchnorm(model)
            model = setup.model(model)
            n = batch - batch % f
            x = setup.input(n, 3, size, size)
            with tf32_flags(dtype), cudnn_autotune(cudnn_benchmark):
                r = profile(model, x, warmup=warmup, iters=iters, cuda_graph=cuda_graph, counters=counters)
            row = {
                "model": name, "f": f, "batch": n, "dtype": dtype, "device": str(dev),
                "mode": "cuda_graph" if cuda_graph else "eager", "fuse_bn": fuse_bn,
                "multiple_of": multiple_of, "cudnn_benchmark": cudnn_benchmark,
                "image_size": size, "utilization": r.utilization,
                "kernel_utilization": r.kernel_utilization,
                "inputs_per_second": r.inputs_per_second,
                "flops_per_image": r.flops / n, "matrix_flops_per_image": r.matrix_flops / n,
                "arithmetic_intensity": r.arithmetic_intensity, "seconds": r.seconds,
                "peak_flops_per_second": r.peak_flops_per_second, "peak_source": r.peak_source,
            }
            if counters is not None:
                row.update({"hw_tensor_flops_per_image": r.hw_tensor_flops / n, "hw_flops_ratio": r.hw_flops_ratio,
                            "sm_throughput_pct": r.sm_throughput_pct, "dram_throughput_pct": r.dram_throughput_pct,
                            "tensor_active_pct": r.tensor_active_pct, "pm_sm_active_pct": r.pm_sm_active_pct,
                            "counters_status": r.counters_status})
            base = base or row
            row["throughput_gain"] = row["inputs_per_second"] / base["inputs_per_second"]
            row["utilization_gain"] = row["utilization"] / base["utilization"]
            rows.append(row)
    return rows


def fuse_batchnorm(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of an eval-mode model with each Conv2d -> BatchNorm2d pair fused into one Conv2d
    (torch.fx.experimental.optimization.fuse); a FoldedModel keeps its wrapper and has its
    folded network fused."""
    from torch.fx.experimental.optimization import fuse

    if isinstance(model, FoldedModel):
        return FoldedModel(fuse(model.folded), model.f, model.in_channels, model.classes)
    return fuse(model)


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'model':<16} {'f':>2} {'util %':>8} {'x util':>7} {'images/s':>11} {'x thru':>7} "
             f"{'MFLOP/img':>10} {'FLOP/B':>7}"]
    for r in rows:
        lines.append(f"{r['model']:<16} {r['f']:>2} {100 * r['utilization']:>8.3f} {r['utilization_gain']:>7.2f} "
                     f"{r['inputs_per_second']:>11.1f} {r['throughput_gain']:>7.2f} "
                     f"{r['flops_per_image'] / 1e6:>10.2f} {r['arithmetic_intensity']:>7.1f}")
    return "\n".join(lines)


def write_outputs(rows: list[dict[str, Any]], out: str) -> list[str]:
    """OUT/fold_bench.csv and OUT/fold_bench.json (NaN written as null)."""
    os.makedirs(out, exist_ok=True)
    with atomic_open(os.path.join(out, "fold_bench.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS + [c for c in COUNTER_COLUMNS if any(c in r for r in rows)])
        w.writeheader()
        w.writerows(rows)
    write_json(os.path.join(out, "fold_bench.json"), rows, indent=1)
    return ["fold_bench.csv", "fold_bench.json"]
