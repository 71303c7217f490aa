"""The CNN utilization survey (RQ1): profiles classification models over batch sizes, dtypes
and timing modes, and writes what it measured as CSV, JSON, PNG plots and one HTML report.

    python -m torchutil survey --models resnet50 mobilenet_v3_large --batches 1 32 256 --out survey/

Resumable: every finished (model, batch, dtype, mode) is appended to OUT/survey.jsonl at once,
and a rerun skips what is there (failures included: they are recorded with their error;
retry_failed / --retry-failed runs them again, and the newer row of a configuration wins).
Plots need matplotlib (pip install matplotlib: the plot extra); the progress bar uses tqdm when present.
"""
from __future__ import annotations

import csv
import datetime
import gzip
import html
import itertools
import json
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from torchutil._json import json_safe
from torchutil._version import __version__
from torchutil.fields import FIELDS
from torchutil.models import build_classifier, classifier_image_size
from torchutil.profiler import profile
from torchutil.rooflines import memory_bandwidth, roofline
from torchutil.studies._common import TORCH_DTYPES, Progress, figure, tf32_flags, write_json

__all__ = ["DTYPES", "MODES", "SurveyConfig", "build_classifier", "imagenet_top1", "run_survey",
           "write_outputs"]

DTYPES = tuple(TORCH_DTYPES)  # float32, tf32 (float32 with TF32 allowed), float16, bfloat16
MODES = ("eager", "cuda_graph", "auto")
RESULTS = "survey.jsonl"
# What a row keeps of each op of its roofline, keyed by these torchutil.RooflineRow field names:
# FLOPs, bytes, intensity (FLOP/byte), achieved kernel FLOP/s (None without a kernel trace),
# attainable utilization and the bound class.
OP_KEYS = ("op", "module", "flops", "bytes", "intensity", "achieved_flops_per_second",
           "attainable_utilization", "bound")
PLOTS = ("util_vs_batch.png", "util_vs_throughput.png", "util_vs_top1.png")
LABELLED = 12  # models named in a panel of util_vs_batch.png when it has more


@dataclass
class SurveyConfig:
    """What a survey runs. models: torchvision names, or "timm:<name>" for timm models.
    image_size None: 299 for inception_v3, else 224. channels_last None: on for CUDA."""

    models: list[str]
    batches: list[int]
    dtypes: list[str]
    modes: list[str]
    device: str = "cpu"
    out: str = "survey"
    image_size: int | None = None
    channels_last: bool | None = None
    warmup: int = 3
    iters: int = 10
    peak: str = "auto"
    progress: bool = True
    retry_failed: bool = False  # run the configurations recorded as failed again
    # Hardware counters per configuration (torchutil.profile's counters=; None: none). The
    # summary then holds the hw_* / pm_* fields, and the row its counters_status.
    counters: list[str] | None = None
    skipped: list[str] = field(default_factory=list)  # filled by plan(): what cannot run here

    def plan(self) -> list[tuple[str, int, str, str]]:
        """The (model, batch, dtype, mode) configurations this device can run, in run order."""
        on_cuda = torch.device(self.device).type == "cuda"
        todo = []
        for model, batch, dtype, mode in itertools.product(self.models, self.batches, self.dtypes, self.modes):
            if not on_cuda and (mode != "eager" or dtype == "tf32"):
                what = {"eager": "tf32", "cuda_graph": "CUDA-graph mode"}.get(mode, f"timing {mode}")
                note = f"{what} runs on CUDA only: skipped on {self.device}"
                if note not in self.skipped:
                    self.skipped.append(note)
                continue
            todo.append((model, batch, dtype, mode))
        return todo


def default_models() -> list[str]:
    try:
        import torchvision
    except ImportError:
        raise ValueError("torchutil: the survey's default models are torchvision's; install the torchvision "
                         "release that matches your torch (the vision extra), or name timm:<name> models "
                         "with --models") from None

    return sorted(torchvision.models.list_models(module=torchvision.models))


def imagenet_top1(name: str) -> float | None:
    """ImageNet-1K top-1 (%) of the default torchvision weights, from torchvision's metadata
    (nothing is downloaded); None for timm models and models without it."""
    if name.startswith("timm:"):
        return None
    try:
        import torchvision

        return float(torchvision.models.get_model_weights(name).DEFAULT.meta["_metrics"]["ImageNet-1K"]["acc@1"])
    except (KeyError, ValueError, AttributeError, ImportError):
        return None


def _key(row: dict[str, Any]) -> tuple[str, int, str, str]:
    return (row["model"], int(row["batch"]), row["dtype"], row["mode"])


def ops_by_name(row: dict[str, Any]) -> bool:
    """Converts in place a row written before ops were stored by name (each op a list of the
    OP_KEYS values, in that order) to the current form; True if the row was in the old form."""
    ops = row.get("ops") or []
    if not any(isinstance(o, list) for o in ops):
        return False
    for o in ops:
        if not isinstance(o, list) or len(o) != len(OP_KEYS):
            raise ValueError(f"torchutil: survey row {_key(row)} mixes op forms or holds an op that is "
                             f"neither a dict by name nor a list of {len(OP_KEYS)} values: {o!r}")
    row["ops"] = [dict(zip(OP_KEYS, o)) for o in ops]
    return True


def _row_problem(row: Any) -> str | None:
    """Why a line of survey.jsonl is not a usable row, or None."""
    if not isinstance(row, dict):
        return f"not a JSON object but {type(row).__name__}"
    missing = [k for k in ("model", "batch", "dtype", "mode", "status") if k not in row]
    if missing:
        return f"no {', '.join(missing)}"
    if not isinstance(row["batch"], int) or isinstance(row["batch"], bool) or row["batch"] < 1:
        return f"batch {row['batch']!r} is not an integer >= 1"
    if row["status"] not in ("ok", "error"):
        return f"status {row['status']!r} is neither ok nor error"
    if row["status"] == "ok" and not isinstance(row.get("summary"), dict):
        return "an ok row without its summary"
    return None


def load_results(out: str) -> list[dict[str, Any]]:
    """The rows of OUT/survey.jsonl, one per configuration (a later row of a configuration, from
    --retry-failed, replaces the earlier). A line that is not a usable row (cut short by a kill,
    not an object, missing keys, batch < 1) is skipped with a warning, and its configuration is
    run again. Rows of the old form (ops as positional lists) are converted on reading, with a
    warning."""
    path = os.path.join(out, RESULTS)
    by_key: dict[tuple[str, int, str, str], dict[str, Any]] = {}
    bad = []
    # A published survey keeps its rows gzipped (docs/results/survey): they are read first, and
    # a plain survey.jsonl beside them (where a survey appends) after, its rows the newer.
    sources = [(p, opener) for p, opener in ((path + ".gz", gzip.open), (path, open)) if os.path.exists(p)]
    for source, opener in sources:
        with opener(source, "rt") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    problem = "not JSON (cut short?)"
                else:
                    problem = _row_problem(row)
                if problem:
                    bad.append(f"{os.path.basename(source)} line {number}: {problem}")
                    continue
                by_key.pop(_key(row), None)  # the newer row goes to the end, in run order
                by_key[_key(row)] = row
    if bad:
        warnings.warn(f"torchutil: skipped {len(bad)} unusable line(s) of {path} ({'; '.join(bad[:5])}"
                      f"{'; ...' if len(bad) > 5 else ''}); their configurations run again", stacklevel=2)
    rows = list(by_key.values())
    old = sum(ops_by_name(r) for r in rows)
    if old:
        warnings.warn(f"torchutil: {old} row(s) of {path} store each op as a positional list (surveys "
                      f"written before ops were stored by name); read as {', '.join(OP_KEYS)}. "
                      "benchmarks/survey_ops_by_name.py rewrites the file by name.", stacklevel=2)
    return rows


def _channels_last(config: SurveyConfig) -> bool:
    if config.channels_last is None:
        return torch.device(config.device).type == "cuda"
    return config.channels_last


def _measure(config: SurveyConfig, model_name: str, model: torch.nn.Module, batch: int, dtype: str,
             mode: str, bandwidth: float) -> dict[str, Any]:
    device = torch.device(config.device)
    size = config.image_size or classifier_image_size(model_name)
    channels_last = _channels_last(config)
    x = torch.randn(batch, 3, size, size, device=device, dtype=TORCH_DTYPES[dtype])
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    with tf32_flags(dtype):
        result = profile(model, x, warmup=config.warmup, iters=config.iters,
                         timing=mode, peak=config.peak, counters=config.counters)
    roof = roofline(result, bandwidth=bandwidth)
    return {
        "image_size": size,
        "channels_last": channels_last,
        "summary": dict(zip(FIELDS, result.summary.tolist())),
        "peak_source": result.peak_source,
        "timing_mode": result.timing_mode,
        "timing_note": result.timing_note,
        "peak_dtype": result.peak_dtype,
        "counters_status": result.counters_status,
        "ridge_intensity": roof.ridge_intensity,
        "bounds": roof.counts(),
        "ops": [{k: getattr(r, k) for k in OP_KEYS} for r in roof.rows],
    }


def _build_on(name: str, device: torch.device) -> torch.nn.Module:
    """build_classifier with its parameters created and initialized on `device` (seconds for the
    largest models on a GPU, where a CPU takes minutes); on the CPU if that fails."""
    if device.type == "cpu":
        return build_classifier(name)
    try:
        with device:
            return build_classifier(name)
    except (RuntimeError, NotImplementedError):
        return build_classifier(name)


def run_survey(config: SurveyConfig) -> list[dict[str, Any]]:
    """Runs every configuration of `config` not yet in OUT/survey.jsonl, appending each as it
    finishes, and returns all rows (old and new). Models are built once per (model, dtype)."""
    os.makedirs(config.out, exist_ok=True)
    rows = load_results(config.out)
    done = {_key(r) for r in rows if r["status"] == "ok" or not config.retry_failed}
    todo = [c for c in config.plan() if c not in done]
    device = torch.device(config.device)
    if not todo:
        return rows
    rerun = set(todo)
    rows = [r for r in rows if _key(r) not in rerun]  # failed rows being retried: the new row replaces them
    bandwidth, bandwidth_source = memory_bandwidth(device)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    progress = Progress(len(todo), "survey", "config", enabled=config.progress, in_place=True)
    built: tuple[tuple[str, str], torch.nn.Module | Exception] | None = None
    path = os.path.join(config.out, RESULTS)
    try:
        with open(path, "a+b") as sink:
            # A last line cut short by a kill must not swallow the first row appended after it.
            if sink.tell():
                sink.seek(-1, os.SEEK_END)
                if sink.read(1) != b"\n":
                    sink.write(b"\n")
            for model_name, batch, dtype, mode in todo:
                row: dict[str, Any] = {
                    "model": model_name, "batch": batch, "dtype": dtype, "mode": mode,
                    "device": str(device), "device_name": device_name,
                    "top1": imagenet_top1(model_name), "bandwidth": bandwidth,
                    "bandwidth_source": bandwidth_source,
                    # What measured it, for the report's header.
                    "torch_version": torch.__version__, "torchutil_version": __version__,
                    "measured_at": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
                }
                t0 = time.perf_counter()
                try:
                    if built is None or built[0] != (model_name, dtype):
                        built = None  # free the last model before building the next
                        try:
                            m = _build_on(model_name, device).eval().to(device=device, dtype=TORCH_DTYPES[dtype])
                            if _channels_last(config):
                                m = m.to(memory_format=torch.channels_last)
                            built = ((model_name, dtype), m)
                        except Exception as e:  # noqa: BLE001  (recorded; every batch fails alike)
                            built = ((model_name, dtype), e)
                    if isinstance(built[1], Exception):
                        raise built[1]
                    row.update(_measure(config, model_name, built[1], batch, dtype, mode, bandwidth))
                    row["status"] = "ok"
                except Exception as e:  # noqa: BLE001  (one failure must not end the survey)
                    row["status"] = "error"
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                row["config_seconds"] = time.perf_counter() - t0
                sink.write((json.dumps(json_safe(row)) + "\n").encode())
                sink.flush()
                rows.append(json_safe(row))
                progress.update(f"{model_name} b{batch} {dtype} {mode}")
    finally:
        progress.close()
    return rows


# ---------------------------------------------------------------------------------- outputs

CSV_COLUMNS = ["model", "batch", "dtype", "mode", "device", "device_name", "image_size", "status",
               "error", "top1", *FIELDS, "peak_source", "peak_dtype", "bandwidth",
               "bandwidth_source", "ridge_intensity", "compute_bound_ops", "memory_bound_ops",
               "overhead_bound_ops", "config_seconds"]


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row.get(k) for k in CSV_COLUMNS}
    out.update(row.get("summary") or {})
    bounds = row.get("bounds") or {}
    out["compute_bound_ops"] = bounds.get("compute-bound", 0)
    out["memory_bound_ops"] = bounds.get("memory-bound", 0)
    out["overhead_bound_ops"] = bounds.get("overhead-bound", 0)
    return out


def _ok(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok" and r["summary"].get("utilization") is not None]


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def roofline_plot_name(model: str) -> str:
    return f"roofline_{_safe_name(model)}.png"


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


def _plots(rows: list[dict[str, Any]], out: str) -> list[str]:
    ok = _ok(rows)
    written = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
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
        r = _roofline_row(ok, model)
        peak = r["summary"]["peak_flops_per_second"]
        bandwidth = r["bandwidth"]
        ops = [o for o in r["ops"] if o["intensity"] is not None and o["intensity"] > 0]
        fig = figure(figsize=(7, 5))
        ax = fig.subplots()
        lo = min([o["intensity"] for o in ops] + [r["ridge_intensity"] / 100])
        hi = max([o["intensity"] for o in ops] + [r["ridge_intensity"] * 100])
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak, x * bandwidth) for x in xs], color="black", lw=1.5,
                label=f"roofline: {_rate(peak, 'FLOP/s')}, {_rate(bandwidth, 'B/s')}")
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


def _roofline_row(ok: list[dict[str, Any]], model: str) -> dict[str, Any]:
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


def _rate(v: float, unit: str) -> str:
    """A rate with its SI prefix: 989 TFLOP/s, 19.7 GFLOP/s, 4.8 TB/s."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(v) >= scale:
            return f"{format_number(v / scale)} {prefix}{unit}"
    return f"{format_number(v)} {unit}"


# Peak dtypes as rows written before the torch spelling say them.
_OLD_DTYPE_NAMES = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8"}

# (header, value of a row, numeric?) for each column of the report's table.
_COLUMNS: list[tuple[str, Any, bool]] = [
    ("model", lambda r, s: r["model"], False),
    ("batch", lambda r, s: r["batch"], True),
    ("dtype", lambda r, s: r["dtype"], False),
    ("mode", lambda r, s: r["mode"], False),
    ("utilization %", lambda r, s: 100 * s["utilization"], True),
    ("kernel utilization %", lambda r, s: None if s.get("kernel_utilization") is None else 100 * s["kernel_utilization"], True),
    ("GPU busy %", lambda r, s: None if s.get("gpu_busy_fraction") is None else 100 * s["gpu_busy_fraction"], True),
    ("images/s", lambda r, s: s["inputs_per_second"], True),
    ("GFLOP/image", lambda r, s: s["flops"] / r["batch"] / 1e9, True),
    ("FLOP/B", lambda r, s: s["arithmetic_intensity"], True),
    ("ms/forward", lambda r, s: None if s.get("seconds") is None else 1e3 * s["seconds"], True),
    ("top-1 %", lambda r, s: r.get("top1"), True),
    ("compute-bound ops", lambda r, s: (r.get("bounds") or {}).get("compute-bound", 0), True),
    ("memory-bound ops", lambda r, s: (r.get("bounds") or {}).get("memory-bound", 0), True),
    ("overhead-bound ops", lambda r, s: (r.get("bounds") or {}).get("overhead-bound", 0), True),
]

_SCRIPT = """
const table = document.getElementById('results'), body = table.tBodies[0];
const rows = Array.from(body.rows), filter = document.getElementById('filter');
filter.addEventListener('input', () => {
  const words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
  let shown = 0;
  for (const r of rows) {
    const text = r.textContent.toLowerCase();
    r.hidden = !words.every(w => text.includes(w));
    shown += !r.hidden;
  }
  document.getElementById('shown').textContent = shown;
});
table.tHead.querySelectorAll('th').forEach((th, i) => th.addEventListener('click', () => {
  const up = th.dataset.dir !== 'up';
  table.tHead.querySelectorAll('th').forEach(h => delete h.dataset.dir);
  th.dataset.dir = up ? 'up' : 'down';
  const key = r => { const c = r.cells[i]; return c.dataset.v === undefined ? c.textContent : (c.dataset.v === '' ? NaN : +c.dataset.v); };
  const cmp = (a, b) => {
    const x = key(a), y = key(b);
    if (typeof x === 'number') { if (isNaN(x)) return 1; if (isNaN(y)) return -1; return up ? x - y : y - x; }
    return up ? x.localeCompare(y) : y.localeCompare(x);
  };
  rows.sort(cmp).forEach(r => body.appendChild(r));
}));
"""


def _header(rows: list[dict[str, Any]], config: SurveyConfig) -> str:
    """The report's header: device, peaks, bandwidth, versions and date, as a definition list."""
    import datetime


    e = html.escape
    ok = _ok(rows)
    devices = sorted({r.get("device_name") or r.get("device") or "" for r in rows}) or [config.device]
    peaks = {}
    for r in ok:
        dtype = _OLD_DTYPE_NAMES.get(r.get("peak_dtype", ""), r.get("peak_dtype", ""))
        peaks.setdefault(r["dtype"], (dtype, r["summary"]["peak_flops_per_second"], r.get("peak_source", "")))
    peak_text = "\n".join(
        f"{d}: {_rate(p, 'FLOP/s')}{'' if pd == d else f' {pd}'} ({s})" if p is not None else f"{d}: –"
        for d, (pd, p, s) in peaks.items()) or "–"
    bandwidths = {(r.get("bandwidth"), r.get("bandwidth_source", "")) for r in rows if r.get("bandwidth")}
    bw_text = "; ".join(f"{_rate(b, 'B/s')} ({s})" for b, s in sorted(bandwidths)) or "–"
    measured_with = sorted({f"torch {r['torch_version']}, torchutil {r.get('torchutil_version', '?')}"
                            for r in rows if r.get("torch_version")})
    items = [
        ("device", ", ".join(devices)),
        ("peak FLOP/s", peak_text),
        ("memory bandwidth", bw_text),
        ("measured with", "; ".join(measured_with) or "not recorded in these rows"),
        ("report written", f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by torchutil "
                           f"{__version__} with torch {torch.__version__}"),
        ("configurations", f"{len(ok)} measured, {sum(r.get('status') == 'error' for r in rows)} failed"),
    ]
    return "<dl>" + "".join(f"<dt>{e(k)}</dt><dd>{e(v).replace(chr(10), '<br>')}</dd>" for k, v in items) + "</dl>"


def _figure_html(name: str, caption: str) -> str:
    e = html.escape
    return (f'<figure><a href="{e(name)}"><img src="{e(name)}" alt="{e(caption)}" loading="lazy"></a>'
            f"<figcaption>{e(caption)}</figcaption></figure>")


def _report(rows: list[dict[str, Any]], plots: list[str], config: SurveyConfig) -> str:
    e = html.escape
    ok = _ok(rows)
    errors = [r for r in rows if r.get("status") == "error"]
    device = e(", ".join(sorted({r.get("device_name") or "" for r in rows})) if rows else config.device)
    main = "\n".join(_figure_html(p, CAPTIONS[p]) for p in plots if p in CAPTIONS)
    rooflines = []
    for p in plots:
        if p in CAPTIONS:
            continue
        model = next((m for m in {r["model"] for r in ok} if roofline_plot_name(m) == p), None)
        r = _roofline_row(ok, model) if model else None
        caption = (ROOFLINE_CAPTION.format(model=model, batch=r["batch"], dtype=r["dtype"], mode=r["mode"])
                   if r else p)
        rooflines.append(_figure_html(p, caption))
    head = "".join(f"<th title='click to sort'>{e(h)}</th>" for h, _, _ in _COLUMNS)
    body = []
    for r in sorted(ok, key=_key):
        s = r["summary"]
        cells = []
        for _, get, numeric in _COLUMNS:
            v = get(r, s)
            if numeric:
                raw = "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else repr(v)
                cells.append(f'<td data-v="{raw}">{format_number(v)}</td>')
            else:
                cells.append(f"<td>{e(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    notes = "".join(f"<li>{e(n)}</li>" for n in config.skipped)
    err = "".join(f"<li>{e(r['model'])} b{r['batch']} {r['dtype']} {r['mode']}: {e(r.get('error', ''))}</li>"
                  for r in errors)
    roofline_section = (f"<details><summary>Rooflines: {len(rooflines)} models (click to open)</summary>"
                        f"<div class='grid small'>{''.join(rooflines)}</div></details>" if rooflines else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>torchutil survey: {device}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
dl {{ display: grid; grid-template-columns: max-content auto; gap: 2px 1em; font-size: 14px; }}
dt {{ font-weight: 600; }} dd {{ margin: 0; }}
.grid {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 1em; align-items: start; }}
.grid.small {{ grid-template-columns: repeat(auto-fill, minmax(380px, 1fr)); }}
figure {{ margin: 0; }} img {{ width: 100%; border: 1px solid #ddd; }}
figcaption {{ font-size: 13px; color: #444; margin-top: 4px; }}
table {{ border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }}
th, td {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
th {{ background: #eef; cursor: pointer; position: sticky; top: 0; }}
th[data-dir=up]::after {{ content: " ▲"; }} th[data-dir=down]::after {{ content: " ▼"; }}
td:nth-child(-n+4), th:nth-child(-n+4) {{ text-align: left; }}
tbody tr:nth-child(even) {{ background: #f7f7fb; }}
input {{ font-size: 14px; padding: 3px 6px; width: 24em; }}
</style></head><body>
<h1>CNN utilization survey: {device}</h1>
{_header(rows, config)}
<p>Utilization = achieved FLOP/s ÷ peak FLOP/s of the dtype in use (FLOPs = 2 × multiply-accumulates,
counted by torchutil); every percentage below is of that peak.</p>
{f"<ul>{notes}</ul>" if notes else ""}
<h2>Plots</h2>
<div class="grid">{main}</div>
{roofline_section}
<h2>Results</h2>
<p><input id="filter" type="search" placeholder="filter: words that must all appear, e.g. resnet float16 eager">
<span id="shown">{len(body)}</span> of {len(body)} rows shown; click a column header to sort.</p>
<table id="results"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>
{f"<h2>Failed configurations</h2><ul>{err}</ul>" if err else ""}
<script>{_SCRIPT}</script>
</body></html>
"""


def write_outputs(rows: list[dict[str, Any]], config: SurveyConfig, plots: bool = True) -> list[str]:
    """Writes OUT/survey.csv, survey.json, the PNG plots (matplotlib) and report.html; returns
    the file names written."""
    out = config.out
    with open(os.path.join(out, "survey.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow(_flat(r))
    write_json(os.path.join(out, "survey.json"), rows)
    written = ["survey.csv", "survey.json"]
    pngs = _plots(rows, out) if plots else []
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write(_report(rows, pngs, config))
    return written + pngs + ["report.html"]
