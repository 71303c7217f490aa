"""The survey's plots (PNG, matplotlib without pyplot): utilization against batch size,
throughput and ImageNet top-1, and each model's ops on the device's roofline; what each shows
(CAPTIONS), and the numbers as the plots and the report write them."""
from __future__ import annotations

import hashlib
import math
import os
from typing import Any

from torchutil.studies._common import figure, save_figure
from torchutil.studies.survey.run import DTYPES, MODES
from torchutil.studies.survey.store import ok_rows

__all__ = ["CAPTIONS", "LABELLED", "PLOTS", "ROOFLINE_CAPTION", "format_number", "rate", "roofline_plot_name",
           "roofline_row", "write_plots"]

PLOTS = ("util_vs_batch.png", "util_vs_throughput.png", "util_vs_top1.png")
LABELLED = 12  # models named in a panel of util_vs_batch.png when it has more


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


# Bytes of a model's name kept in its plot's file name: a file name is at most 255 bytes.
_NAME_BYTES = 120


def roofline_plot_name(model: str) -> str:
    """roofline_<model>.png, the model's name made safe for a file name; a name longer than
    _NAME_BYTES bytes is cut there, and a hash of the whole name keeps two cut names apart."""
    name = _safe_name(model)
    if len(name.encode()) > _NAME_BYTES:
        digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        name = f"{name.encode()[:_NAME_BYTES].decode(errors='ignore')}-{digest}"
    return f"roofline_{name}.png"


def _spread(values: list[float], gap: float) -> list[float]:
    """Label positions near `values` (in their order) with at least `gap` between sorted
    neighbours: each label is pushed up past the one below it, then the stack is centred on the
    values again, so labels at one spot fan out instead of overprinting."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    placed = [values[i] for i in order]
    for k in range(1, len(placed)):
        placed[k] = max(placed[k], placed[k - 1] + gap)
    shift = (sum(placed) - sum(values[i] for i in order)) / max(1, len(placed))
    out = [0.0] * len(values)
    for k, i in enumerate(order):
        out[i] = placed[k] - shift
    return out


def _labels(ax: Any, points: dict[str, tuple[float, float]], fontsize: float = 7) -> None:
    """Names beside their points (right of them, left near the right edge), spread apart
    vertically and tied to their points by a thin line. points: name -> (x, y) in data units;
    call it once the axes' scales and limits are final."""
    if not points:
        return
    ax.autoscale_view()
    to_axes = ax.transData + ax.transAxes.inverted()
    names = list(points)
    xy = [tuple(to_axes.transform(points[n])) for n in names]
    for right in (True, False):  # the two sides are spread apart separately
        side = [i for i, (x, _) in enumerate(xy) if (x <= 0.75) == right]
        ys = _spread([xy[i][1] for i in side], gap=fontsize / 260)
        for i, ly in zip(side, ys):
            x, y = xy[i]
            ax.annotate(names[i], xy=(x, y), xycoords="axes fraction",
                        xytext=(x + 0.04 if right else x - 0.04, ly), textcoords="axes fraction",
                        fontsize=fontsize, va="center", ha="left" if right else "right",
                        arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "0.5"})


def _extremes(values: dict[str, float], n: int) -> list[str]:
    """The n highest and the n lowest of `values` by value: the names worth labelling."""
    ranked = sorted(values, key=values.get)
    return list(dict.fromkeys(ranked[-n:][::-1] + ranked[:n]))


def _grid(n: int, width: float, height: float, cols: int = 2) -> tuple[Any, list[Any]]:
    """A figure of n panels, `cols` wide, and its axes in reading order (spare ones hidden)."""
    cols = max(1, min(cols, n))
    rows_n = math.ceil(max(n, 1) / cols)
    fig = figure(figsize=(width * cols, height * rows_n))
    axes = list(fig.subplots(rows_n, cols, squeeze=False).flat)
    for ax in axes[n:]:
        ax.axis("off")
    return fig, axes


def _panels(ok: list[dict[str, Any]]) -> list[str]:
    """The dtypes measured, one panel each, in DTYPES order."""
    found = {r["dtype"] for r in ok}
    return [d for d in DTYPES if d in found] + sorted(found - set(DTYPES))


MODE_STYLE = {"eager": ("o", "tab:blue"), "cuda_graph": ("^", "tab:orange"), "auto": ("s", "tab:green")}

# What each plot shows, for the report's captions and the results README.
CAPTIONS = {
    PLOTS[0]: "Utilization (achieved FLOP/s as % of the dtype's peak) against batch size, one panel "
              "per dtype and timing mode, one line per model. With many models the highest and "
              "lowest at the largest batch are drawn bold and named; the rest are faint.",
    PLOTS[1]: "Utilization against throughput (images/s), every model and batch, one panel per "
              "dtype; marker and colour give the timing mode. Throughput is log-scaled.",
    PLOTS[2]: "Utilization at each model's largest batch (the better timing mode) against the "
              "ImageNet-1K top-1 of its torchvision weights, one panel per dtype. The most and "
              "least utilized and the most and least accurate models are named.",
}
ROOFLINE_CAPTION = ("{model}: each op of the forward on the device's roofline (log-log; FLOP/s "
                    "on the left axis, % of peak on the right) at batch {batch}, {dtype}, {mode}. "
                    "Dot area grows with the op's FLOPs; colour is its bound class; the star is "
                    "the whole forward.")


def write_plots(rows: list[dict[str, Any]], out: str) -> list[str]:
    """Draws every plot of `rows` into OUT (matplotlib) and returns the file names written."""
    ok = ok_rows(rows)
    written = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        save_figure(fig, os.path.join(out, name), dpi=110)
        written.append(name)

    dtypes = _panels(ok)

    # Utilization vs batch size: one panel per (dtype, mode), one line per model. With many
    # models only the LABELLED extremes at the largest batch are bold and named.
    panels = [(d, m) for d in dtypes for m in MODES if any((r["dtype"], r["mode"]) == (d, m) for r in ok)]
    fig, axes = _grid(len(panels), 7, 4.6)
    for ax, (dtype, mode) in zip(axes, panels):
        series: dict[str, list[tuple[int, float]]] = {}
        for r in ok:
            if (r["dtype"], r["mode"]) == (dtype, mode):
                series.setdefault(r["model"], []).append((r["batch"], 100 * r["summary"]["utilization"]))
        for points in series.values():
            points.sort()
        many = len(series) > LABELLED
        named = _extremes({m: p[-1][1] for m, p in series.items()}, LABELLED // 2) if many else list(series)
        for model, points in sorted(series.items()):
            bold = model in named
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", ms=3 if bold else 2,
                    lw=1.4 if bold else 0.6, alpha=1.0 if bold else 0.3,
                    color=None if bold else "0.5", label=model if bold and not many else None)
        ax.set_xscale("log", base=2)
        if many:
            batches = [p[0] for s in series.values() for p in s]
            ax.set_xlim(min(batches) / 1.3, max(batches) * 12)  # room for the names on the right
            _labels(ax, {m: series[m][-1] for m in named}, fontsize=6.5)
        elif series:
            ax.legend(fontsize=6.5, ncol=2 if len(series) > 6 else 1, loc="best")
        ax.set_xlabel("batch size")
        ax.set_ylabel("utilization (% of peak FLOP/s)")
        ax.set_title(f"{dtype}, {mode}" + (f": {len(series)} models, highest and lowest {LABELLED // 2} named"
                                           if many else ""), fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle("Utilization vs batch size")
    save(fig, PLOTS[0])

    # Utilization vs throughput, every configuration: one panel per dtype, marker = mode.
    fig, axes = _grid(len(dtypes), 6, 4.2)
    for ax, dtype in zip(axes, dtypes):
        for mode, (marker, color) in MODE_STYLE.items():
            pts = [r for r in ok if (r["dtype"], r["mode"]) == (dtype, mode)]
            if pts:
                ax.scatter([r["summary"]["inputs_per_second"] for r in pts],
                           [100 * r["summary"]["utilization"] for r in pts], s=14, marker=marker,
                           color=color, alpha=0.6, label=f"{mode} ({len(pts)})")
        ax.set_xscale("log")
        ax.set_xlabel("throughput (images/s)")
        ax.set_ylabel("utilization (% of peak FLOP/s)")
        ax.set_title(f"{dtype}: {len({r['model'] for r in ok if r['dtype'] == dtype})} models, all batches",
                     fontsize=9)
        ax.legend(fontsize=8, title="timing", title_fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("Utilization vs throughput")
    save(fig, PLOTS[1])

    # Utilization vs ImageNet top-1: per dtype, each model's best utilization at its largest batch.
    fig, axes = _grid(len(dtypes), 6.5, 4.6)
    with_top1 = False
    for ax, dtype in zip(axes, dtypes):
        best: dict[str, dict[str, Any]] = {}
        for r in ok:
            if r["dtype"] != dtype or r.get("top1") is None:
                continue
            b = best.get(r["model"])
            if b is None or (r["batch"], r["summary"]["utilization"]) > (b["batch"], b["summary"]["utilization"]):
                best[r["model"]] = r
        points = {m: (r["top1"], 100 * r["summary"]["utilization"]) for m, r in best.items()}
        if not points:
            ax.text(0.5, 0.5, "no model with ImageNet top-1 metadata", ha="center", transform=ax.transAxes)
        with_top1 = with_top1 or bool(points)
        ax.scatter([p[0] for p in points.values()], [p[1] for p in points.values()], s=18, color="tab:blue")
        if len(points) > LABELLED:
            names = list(dict.fromkeys(_extremes({m: p[1] for m, p in points.items()}, 4)
                                       + _extremes({m: p[0] for m, p in points.items()}, 2)))
        else:
            names = list(points)
        _labels(ax, {m: points[m] for m in names}, fontsize=6.5)
        ax.set_xlabel("ImageNet-1K top-1 (%) of the torchvision weights")
        ax.set_ylabel("utilization (% of peak) at the largest batch")
        ax.set_title(f"{dtype}: {len(points)} models" + (f", {len(names)} named" if len(names) < len(points) else ""),
                     fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle("Utilization vs accuracy")
    save(fig, PLOTS[2])

    # Each model's ops on the device's roofline, at its largest batch (first dtype and mode).
    for model in sorted({r["model"] for r in ok}):
        r = roofline_row(ok, model)
        peak = r["summary"]["peak_flops_per_second"]
        bandwidth = r["bandwidth"]
        ops = [o for o in r["ops"] if o["intensity"] is not None and o["intensity"] > 0]
        fig = figure(figsize=(7, 5))
        ax = fig.subplots()
        lo = min([o["intensity"] for o in ops] + [r["ridge_intensity"] / 100])
        hi = max([o["intensity"] for o in ops] + [r["ridge_intensity"] * 100])
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak, x * bandwidth) for x in xs], color="black", lw=1.5,
                label=f"roofline: {rate(peak, 'FLOP/s')}, {rate(bandwidth, 'B/s')}")
        colors = {"compute-bound": "tab:blue", "memory-bound": "tab:orange", "overhead-bound": "tab:red", "unknown": "gray"}
        traced = any(o["achieved_flops_per_second"] is not None for o in ops)
        for bound, color in colors.items():
            sel = [o for o in ops if o["bound"] == bound]
            if not sel:
                continue
            # With a kernel trace, each op at its achieved kernel FLOP/s; without, at the roof.
            ys = [o["achieved_flops_per_second"] if traced and o["achieved_flops_per_second"] is not None
                  else o["attainable_utilization"] * peak for o in sel]
            sizes = [8 + 60 * math.sqrt(o["flops"] / max(1, max(p["flops"] for p in ops))) for o in sel]
            ax.scatter([o["intensity"] for o in sel], ys, s=sizes, color=color, alpha=0.6, label=f"{bound} ops ({len(sel)})")
        s = r["summary"]
        if s.get("arithmetic_intensity") and s.get("achieved_flops_per_second"):
            ax.scatter([s["arithmetic_intensity"]], [s["achieved_flops_per_second"]], marker="*", s=160,
                       color="green", label=f"whole forward: {format_number(100 * s['utilization'])} % of peak",
                       zorder=5)
        ax.set_xscale("log")
        ax.set_yscale("log")
        if peak and peak > 0:
            right = ax.secondary_yaxis("right", functions=(lambda y, p=peak: 100 * y / p,
                                                           lambda u, p=peak: u * p / 100))
            right.set_ylabel("% of peak FLOP/s")
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("FLOP/s")
        where = "achieved kernel FLOP/s" if traced else "attainable FLOP/s (no kernel trace)"
        ax.set_title(f"{model}, batch {r['batch']}, {r['dtype']}, {r['mode']}: ops at {where}", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3, which="both")
        save(fig, roofline_plot_name(model))
    return written


def roofline_row(ok: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """The row a model's roofline plot shows: its largest batch, first dtype and mode."""
    return max((x for x in ok if x["model"] == model), key=lambda x: x["batch"])


def format_number(v: Any) -> str:
    """The one number format of the report: three significant digits, no exponent, thousands
    separated (0.0712, 3.07, 45.1, 1,792); an en dash where there is no value."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{round(v):,}"
    digits = max(0, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{digits}f}"


def rate(v: float, unit: str) -> str:
    """A rate with its SI prefix: 989 TFLOP/s, 19.7 GFLOP/s, 4.8 TB/s."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(v) >= scale:
            return f"{format_number(v / scale)} {prefix}{unit}"
    return f"{format_number(v)} {unit}"
