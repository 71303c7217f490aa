"""The roofline of a profile: for each op, the FLOP/s its arithmetic intensity allows on the
device (min(peak, intensity x memory bandwidth)), the utilization that allows, and whether the
op is compute-, memory- or overhead-bound. The arithmetic and the classification are C++
(csrc/core/Roofline.h, torch.ops.util._roofline_points); docs/roofline.md defines them.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from torchutil import _ops  # registers the ops
from torchutil.fields import build_rows, row_class
from torchutil._format import cut_middle, number, percent, rate, seconds, si
from torchutil.result import ProfileResult
from torchutil.views import text_table

__all__ = ["BANDWIDTH_SOURCES", "RooflineResult", "RooflineRow", "memory_bandwidth", "roofline",
           "roofline_utilization"]

BANDWIDTH_SOURCES = _ops.CHOICES["peak"]  # parsed in C++ as the peak FLOP/s source is


def memory_bandwidth(device: torch.device | str = "cuda", source: str = "auto") -> tuple[float, str]:
    """Memory bandwidth of `device` in bytes/s, and where the number comes from.

    source: "auto" (datasheet, else computed, else measured), "datasheet" (NVIDIA's figure for
    the GPUs of csrc/core/PeakTable.cpp), "computed" (2 x memory clock x bus width, CUDA) or
    "measured" (best read + write rate of a large tensor copy; the only source on a CPU).
    Same as torch.ops.util.memory_bandwidth.
    """
    return torch.ops.util.memory_bandwidth(_ops.device_of("memory_bandwidth", device), source)


def roofline_utilization(flops: torch.Tensor, bytes: torch.Tensor, peak_flops: float,
                         bandwidth: float) -> torch.Tensor:
    """min(1, flops / bytes x bandwidth / peak_flops), elementwise: the utilization the
    roofline allows (torch.ops.util.roofline). Units: FLOPs, bytes, FLOP/s, bytes/s."""
    return torch.ops.util.roofline(flops, bytes, peak_flops, bandwidth)


RooflineRow = row_class(
    "RooflineRow", "roofline",
    "One op of a profile on the roofline (FLOPs, bytes and times per forward): the op's name,\n"
    "module, dtype, FLOPs and bytes, then its roofline point.",
    prefix=[("op", str), ("module", str), ("dtype", str), ("flops", int), ("bytes", int)],
)


@dataclass(repr=False)
class RooflineResult:
    """The device's roofline and every op of a profile on it. print() it for a table (format());
    rows, to_dict() for the data."""

    peak_flops_per_second: float
    bandwidth: float          # bytes/s
    bandwidth_source: str
    ridge_intensity: float    # FLOPs per byte where the roofs meet: peak / bandwidth
    rows: list[RooflineRow]

    def counts(self) -> dict[str, int]:
        """How many ops fall in each class."""
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.bound] = out.get(r.bound, 0) + 1
        return out

    def format(self, top: int | None = 20) -> str:
        """The roofline and its `top` ops by roofline time (None: every op), as a table."""
        rows = sorted(self.rows, key=lambda r: -r.roofline_seconds if r.roofline_seconds == r.roofline_seconds
                      else math.inf)
        shown = rows if top is None else rows[:top]
        counts = ", ".join(f"{n} {bound}" for bound, n in sorted(self.counts().items()))
        lines = [f"peak {rate(self.peak_flops_per_second)}, bandwidth {rate(self.bandwidth, 'B/s')} "
                 f"({self.bandwidth_source}); ridge {number(self.ridge_intensity)} FLOP/B",
                 f"{len(self.rows)} ops: {counts}",
                 f"ops by roofline time{'' if top is None or len(rows) <= top else f' (top {top})'}:",
                 text_table(["op", "module", "dtype", "FLOPs", "bytes", "FLOP/B", "attainable", "roofline time",
                             "achieved", "bound"],
                            [[r.op, cut_middle(r.module, 28), r.dtype, si(r.flops, "FLOP"), si(r.bytes, "B"),
                              number(r.intensity), percent(r.attainable_utilization),
                              seconds(r.roofline_seconds), rate(r.achieved_flops_per_second),
                              r.bound] for r in shown], left=3)]
        if len(shown) < len(rows):
            lines.append(f"... {len(rows) - len(shown)} more (format(top=None) shows every op)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {bound}" for bound, n in sorted(self.counts().items()))
        return (f"RooflineResult(peak {rate(self.peak_flops_per_second)}, bandwidth "
                f"{rate(self.bandwidth, 'B/s')}, ridge {number(self.ridge_intensity)} FLOP/B; "
                f"{len(self.rows)} ops: {counts})")

    def to_dict(self) -> dict[str, Any]:
        return {"peak_flops_per_second": self.peak_flops_per_second, "bandwidth": self.bandwidth,
                "bandwidth_source": self.bandwidth_source, "ridge_intensity": self.ridge_intensity,
                "rows": [asdict(r) for r in self.rows]}


def roofline(result: ProfileResult, *, bandwidth: float | None = None,
             source: str = "auto") -> RooflineResult:
    """Places every op of `result` on the roofline of the device it ran on.

    The peak is the profile's (result.peak_flops_per_second); the bandwidth is `bandwidth`
    (bytes/s) when given, else memory_bandwidth(result.device, source). Ops whose measured
    kernel time (CUDA with kernel tracing) is more than twice their roofline time are
    overhead-bound; without a trace ops are classified by intensity alone.
    """
    if not isinstance(result, ProfileResult):
        raise TypeError(f"torchutil: roofline takes the ProfileResult of torchutil.profile or a Profiler, got "
                        f"{type(result).__name__}")
    peak = float(result.peak_flops_per_second)
    if not (peak > 0 and math.isfinite(peak)):
        raise ValueError(f"torchutil: this profile has no peak FLOP/s ({peak}); profile on a "
                         "real device or pass peak_flops= to torchutil.profile")
    if bandwidth is None:
        bandwidth, bw_source = memory_bandwidth(result.device, source)
    else:
        bw_source = "given by the caller"
    flops = torch.tensor([float(r.flops) for r in result.ops], dtype=torch.float64)
    nbytes = torch.tensor([float(r.bytes) for r in result.ops], dtype=torch.float64)
    seconds = torch.tensor([r.kernel_seconds for r in result.ops], dtype=torch.float64)
    # Kernel time only: a CPU op's wall time (kernel_attribution "cpu") holds the dispatcher's
    # and the counting callback's own time, which the overhead class would take for the op's.
    traced = bool(result.ops) and result.traced == 1 and not bool(torch.isnan(seconds).all())
    table, bounds = torch.ops.util._roofline_points(flops, nbytes, peak, float(bandwidth),
                                                    seconds if traced else None)
    ops = result.ops
    rows = build_rows(RooflineRow, "roofline", table, {"bound": bounds},
                      op=[r.op for r in ops], module=[r.module for r in ops],
                      dtype=[r.dtype for r in ops], flops=[r.flops for r in ops],
                      bytes=[r.bytes for r in ops])
    return RooflineResult(peak, float(bandwidth), bw_source, peak / float(bandwidth), rows)
