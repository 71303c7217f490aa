"""Numbers as torchutil's texts write them (the summary, the views, the roofline table): four
significant digits, a unit prefix that fits, and "n/a" for NaN (a figure without a value is
never written as 0)."""
from __future__ import annotations

__all__ = ["count", "percent", "rate", "scaled"]


def scaled(value: float, unit: float, digits: int = 4) -> str:
    """value / unit to `digits` significant digits, "n/a" where it is NaN."""
    return "n/a" if value != value else f"{value / unit:.{digits}g}"


def rate(value: float, unit: str = "FLOP/s") -> str:
    """A rate in the prefix that fits it (T, G, M, k), four significant digits; "n/a" for NaN:
    a CPU's peak reads 38.3 GFLOP/s, not 0.0383 TFLOP/s."""
    if value != value:
        return "n/a"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def percent(fraction: float, fmt: str = ".3g") -> str:
    """A fraction as a percentage ("n/a" for NaN)."""
    return "n/a" if fraction != fraction else f"{100 * fraction:{fmt}} %"


def count(value: float) -> str:
    return "n/a" if value != value else str(int(value))
