"""Utilization as a reward term for a NAS loop.

    r = torchutil.nas.reward(model, x, accuracy=0.91, weight=0.5)     # 0-dim float64 tensor
    loss = -log_prob * (r - baseline)

reward = accuracy + weight x utilization + throughput_weight x inputs_per_second / throughput_scale,
with utilization and inputs/s from one torch.ops.util.profile call (or from a `summary` tensor
already measured). Utilization is a fraction of the peak (0..1), accuracy whatever scale the
caller uses (a fraction in [0, 1] keeps the terms comparable).
"""
from __future__ import annotations

from typing import Any

import torch

from torchutil.fields import FIELDS

__all__ = ["reward"]

_UTILIZATION = FIELDS.index("utilization")
_THROUGHPUT = FIELDS.index("inputs_per_second")


def reward(
    model: Any,
    x: torch.Tensor,
    *,
    accuracy: float | torch.Tensor | None = None,
    weight: float = 1.0,
    throughput_weight: float = 0.0,
    throughput_scale: float = 1.0,
    summary: torch.Tensor | None = None,
    warmup: int = 1,
    iters: int = 3,
    timing: str = "auto",
    cuda_graph: bool = False,
    trace: bool = False,
    peak_flops: float | None = None,
) -> torch.Tensor:
    """A 0-dim float64 tensor: accuracy (0 if None) + weight x utilization
    + throughput_weight x inputs_per_second / throughput_scale.

    model, x: what torch.ops.util.profile(model, x, warmup=, iters=, timing=, trace=,
    peak_flops=) measures; pass summary (that call's tensor) instead to reuse a measurement, and
    model / x are then not run. timing="auto" by default: CUDA-graph replays where the forward
    captures, so that the reward measures the network and not the host's launch path (eager
    utilization of small networks varies by tens of percent from call to call);
    cuda_graph=True is timing="cuda_graph". trace=False by default: a reward needs no kernel
    trace.
    throughput_scale: inputs/s that count as 1 (e.g. the throughput of a reference network).
    A NaN utilization (the meta device has no timing) gives a NaN reward: it is not hidden.
    """
    if summary is None:
        summary = torch.ops.util.profile(model, x, warmup=warmup, iters=iters,
                                         timing="cuda_graph" if cuda_graph else timing,
                                         peak_flops=peak_flops, trace=trace)
    if summary.dim() != 1 or summary.numel() != len(FIELDS):
        raise ValueError(f"torchutil.nas: summary must be a 1-d tensor of {len(FIELDS)} values "
                         f"(torchutil.FIELDS), got shape {tuple(summary.shape)}")
    if throughput_scale <= 0:
        raise ValueError(f"torchutil.nas: throughput_scale must be > 0, got {throughput_scale}")
    summary = summary.to(torch.float64)
    r = weight * summary[_UTILIZATION]
    if throughput_weight:
        r = r + throughput_weight * summary[_THROUGHPUT] / throughput_scale
    if accuracy is not None:
        r = r + torch.as_tensor(accuracy, dtype=torch.float64, device=r.device)
    return r
