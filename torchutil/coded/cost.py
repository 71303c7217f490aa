"""What the redundancy of a code costs, measured with torchutil.profile.

Each part of coded inference is profiled on its own (timing="auto": CUDA-graph replays where the
part captures, else eager; on the CPU, eager): the base model F on `batch` queries, the encoder
on `batch` groups of k queries, the parity model on the `batch` parity queries they make, and
the decoder on `batch` groups. Per query, F's cost is divided by batch and the others' by
batch * k (the encoder and the parity model serve k queries at once; the decoder is charged as
if every group needed one reconstruction, an upper bound: it runs only when a prediction is
missing). Replication at equal resources (r = 1 extra copy of F per k queries) costs F / k per
query; the code costs encoder + parity model + decoder per query.
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import torch
from torch import nn

from torchutil._ops import OPTION_DEFAULTS as _D
from torchutil.coded.codes import Code
from torchutil.profiler import profile

__all__ = ["COMPONENTS", "ComponentCost", "measure_cost", "redundancy_summary"]

COMPONENTS = ("base model", "encoder", "parity model", "decoder")


@dataclass
class ComponentCost:
    """One part, profiled at `batch` calls' worth of inputs; seconds are the median time of one
    call and its 95 % interval."""

    component: str
    batch: int
    queries_per_call: int
    flops: float
    seconds: float
    seconds_ci_low: float
    seconds_ci_high: float
    utilization: float
    timing_mode: str
    device: str

    @property
    def flops_per_query(self) -> float:
        return self.flops / self.queries_per_call

    @property
    def seconds_per_query(self) -> float:
        return self.seconds / self.queries_per_call

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "flops_per_query": self.flops_per_query, "seconds_per_query": self.seconds_per_query}


class _Decode(nn.Module):
    """The decoder as a module of tensors alone (what profile calls)."""

    def __init__(self, code: Code) -> None:
        super().__init__()
        self.decoder = code.decoder

    def forward(self, masked: torch.Tensor, parity: torch.Tensor, erased: torch.Tensor) -> torch.Tensor:
        return self.decoder(masked, parity, erased)


def measure_cost(code: Code, base_model: nn.Module, shape: Sequence[int], classes: int, *, batch: int = 1,
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32, warmup: int = _D["warmup"],
                 iters: int = _D["iters"], timing: str = "auto", target_ci: float | None = None,
                 max_time: float = _D["max_time"]) -> list[ComponentCost]:
    """Profiles F, the encoder, the parity model and the decoder (COMPONENTS, in that order) on
    copies of them moved to `device` and `dtype`."""
    if batch < 1:
        raise ValueError(f"torchutil.coded: batch must be >= 1, got {batch}")
    k = code.k
    dev = torch.device(device)

    def moved(module: nn.Module) -> nn.Module:
        return copy.deepcopy(module).eval().to(device=dev, dtype=dtype)

    def x(*size: int) -> torch.Tensor:
        return torch.randn(*size, device=dev, dtype=dtype)

    parts = [
        ("base model", moved(base_model), [x(batch, *shape)], batch),
        ("encoder", moved(code.encoder), [x(batch, k, *shape)], batch * k),
        ("parity model", moved(code.parity_model), [x(batch, *shape)], batch * k),
        ("decoder", moved(_Decode(code)),
         [x(batch, k, classes), x(batch, classes), torch.zeros(batch, dtype=torch.long, device=dev)], batch * k),
    ]
    rows = []
    for name, module, inputs, queries in parts:
        r = profile(module, inputs, warmup=warmup, iters=iters, timing=timing, target_ci=target_ci,
                    max_time=max_time, trace=dev.type == "cuda", module_paths=False)
        rows.append(ComponentCost(name, batch, queries, r.flops, r.seconds, r.seconds_ci_low, r.seconds_ci_high,
                                  r.utilization, r.timing_mode, r.device))
    return rows


def redundancy_summary(rows: Sequence[ComponentCost], k: int) -> dict[str, float]:
    """Per query, relative to the base model F: the code's extra FLOPs and time (encoder +
    parity model + decoder) and equal-resources replication's (F / k)."""
    by = {r.component: r for r in rows}
    base = by["base model"]
    extra = [by[c] for c in COMPONENTS[1:]]
    coded_flops = sum(r.flops_per_query for r in extra)
    coded_seconds = sum(r.seconds_per_query for r in extra)
    return {
        "k": k,
        "base_flops_per_query": base.flops_per_query,
        "base_seconds_per_query": base.seconds_per_query,
        "coded_extra_flops_per_query": coded_flops,
        "coded_extra_seconds_per_query": coded_seconds,
        "replication_extra_flops_per_query": base.flops_per_query / k,
        "replication_extra_seconds_per_query": base.seconds_per_query / k,
        "coded_extra_flops_ratio": coded_flops / base.flops_per_query if base.flops_per_query else float("nan"),
        "coded_extra_seconds_ratio": coded_seconds / base.seconds_per_query,
        "replication_extra_ratio": 1 / k,
    }
