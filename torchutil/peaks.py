"""Peak FLOP/s of a device (datasheet, computed from the architecture, or a timed GEMM)."""
from __future__ import annotations

import torch

from torchutil import _ops  # registers the ops

PEAK_SOURCES = _ops.CHOICES["peak"]


def peak_flops(
    device: torch.device | str = "cuda",
    dtype: torch.dtype | str = torch.float16,
    source: str = _ops.OPTION_DEFAULTS["peak"],
) -> tuple[float, str]:
    """Peak FLOP/s of `device` for arithmetic in `dtype`, and where the number comes from.

    dtype: a torch dtype or one of "float64", "float32", "tf32", "float16", "bfloat16",
    "float8", "int8". source: "auto" (datasheet, else computed as SMs x FLOP/clock/SM x clock,
    else measured), "datasheet", "computed" or "measured" (best of timed square GEMMs; the only
    source on a CPU). Same as torch.ops.util.peak_flops.
    """
    name = str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else dtype
    value, where = torch.ops.util.peak_flops(_ops.device_of("peak_flops", device), name, source)
    return value, where
