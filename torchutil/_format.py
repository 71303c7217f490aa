"""Numbers as torchutil's texts write them (the summary, the views, the roofline table): four
significant digits and never an exponent, a unit prefix that keeps the figure between 1 and 1000
(204.8 MFLOP, 13.39 MB, 151.2 µs, 2.048 ms), and "n/a" for NaN (a figure without a value is
never written as 0). A column of a table is written by one of these functions, so its cells
read alike."""
from __future__ import annotations

import math

__all__ = ["count", "cut_middle", "number", "percent", "rate", "scaled", "seconds", "si"]

_PREFIXES = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def number(value: float) -> str:
    """value to four significant digits without an exponent (0.0006436, 2.048, 139.6, 12350),
    trailing zeros dropped; "n/a" for NaN."""
    if value != value:
        return "n/a"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    rounded = float(f"{value:.4g}")
    decimals = max(0, 3 - math.floor(math.log10(abs(rounded))))
    text = f"{rounded:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def si(value: float, unit: str) -> str:
    """value in `unit` with the SI prefix (k, M, G, T, P) that keeps it below 1000: 204.8 MFLOP,
    13.39 MB, 520 FLOP; "n/a" for NaN."""
    if value != value:
        return "n/a"
    rounded = float(f"{value:.4g}")
    for prefix, scale in _PREFIXES:
        if abs(rounded) >= scale:
            return f"{number(rounded / scale)} {prefix}{unit}"
    return f"{number(rounded)} {unit}"


def rate(value: float, unit: str = "FLOP/s") -> str:
    """A rate in the prefix that fits it: a CPU's peak reads 38.3 GFLOP/s, not 0.0383 TFLOP/s."""
    return si(value, unit)


def seconds(value: float) -> str:
    """A time in the unit that keeps it between 1 and 1000: 151.2 µs, 2.048 ms, 1.2 s (ns below a
    microsecond); "n/a" for NaN."""
    if value != value:
        return "n/a"
    rounded = float(f"{value:.4g}")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(rounded) >= scale:
            return f"{number(rounded / scale)} {unit}"
    return "0 s" if rounded == 0 else f"{number(rounded / 1e-9)} ns"


def scaled(value: float, unit: float, digits: int = 4) -> str:
    """value / unit to `digits` significant digits, "n/a" where it is NaN (for a figure whose
    unit is fixed by its label; tables use si(), seconds() and number())."""
    return "n/a" if value != value else f"{value / unit:.{digits}g}"


def percent(fraction: float, fmt: str = ".3g") -> str:
    """A fraction as a percentage ("n/a" for NaN)."""
    return "n/a" if fraction != fraction else f"{100 * fraction:{fmt}} %"


def count(value: float) -> str:
    return "n/a" if value != value else str(int(value))


def cut_middle(path: str, width: int) -> str:
    """A dotted module path in at most `width` characters, cut in the middle: the first name and
    as many of the innermost as fit, the names between them one "…"
    (features.denseblock4.denselayer16.conv2 -> features.….denselayer16.conv2); a path whose
    first and last names alone do not fit keeps the characters at both ends."""
    if len(path) <= width:
        return path
    parts = path.split(".")
    head, tail = parts[0], [parts[-1]]
    for name in reversed(parts[1:-1]):
        if len(head) + len(".….") + len(".".join([name, *tail])) > width:
            break
        tail.insert(0, name)
    text = f"{head}.….{'.'.join(tail)}"
    if len(parts) > 2 and len(text) <= width:
        return text
    keep = width - 1
    return f"{path[:keep // 2]}…{path[len(path) - (keep - keep // 2):]}"
