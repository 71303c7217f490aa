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
from torchutil.fields import FIELDS
from torchutil.models import build_classifier, classifier_image_size
from torchutil.profiler import profile
from torchutil.rooflines import memory_bandwidth, roofline
from torchutil.studies._common import TORCH_DTYPES, Progress, pyplot, tf32_flags, write_json

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
    if os.path.exists(path):
        with open(path) as f:
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
                    bad.append(f"line {number}: {problem}")
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
                         timing=mode, peak=config.peak)
    roof = roofline(result, bandwidth=bandwidth)
    return {
        "image_size": size,
        "channels_last": channels_last,
        "summary": dict(zip(FIELDS, result.summary.tolist())),
        "peak_source": result.peak_source,
        "timing_mode": result.timing_mode,
        "timing_note": result.timing_note,
        "peak_dtype": result.peak_dtype,
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


def _plots(rows: list[dict[str, Any]], out: str) -> list[str]:
    plt = pyplot()
    ok = _ok(rows)
    written = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)
        written.append(name)

    # Utilization vs batch size: one panel per (dtype, mode), one line per model. With many
    # models only the LABELLED best at the largest batch are named (at their line's end).
    panels = sorted({(r["dtype"], r["mode"]) for r in ok}) or [("", "")]
    cols = min(2, len(panels))
    rows_n = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(7 * cols, 4.2 * rows_n), squeeze=False)
    for ax, (dtype, mode) in zip(axes.flat, panels):
        series: dict[str, list[tuple[int, float]]] = {}
        for r in ok:
            if (r["dtype"], r["mode"]) == (dtype, mode):
                series.setdefault(r["model"], []).append((r["batch"], 100 * r["summary"]["utilization"]))
        for points in series.values():
            points.sort()
        many = len(series) > LABELLED
        named = sorted(series, key=lambda m: series[m][-1][1], reverse=True)[:LABELLED]
        for model, points in sorted(series.items()):
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", ms=3,
                    lw=1.6 if model in named or not many else 0.7, alpha=1.0 if model in named or not many else 0.35,
                    label=model if (model in named or not many) else None)
        if many:
            for model in named:
                b, u = series[model][-1]
                ax.annotate(model, (b, u), fontsize=6, xytext=(3, 0), textcoords="offset points")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_ylabel("utilization (% of peak FLOP/s)")
        ax.set_title(f"{dtype} {mode}" + (f" ({len(series)} models, best {LABELLED} named)" if many else ""), fontsize=9)
        if series and not many:
            ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("Utilization vs batch size")
    save(fig, PLOTS[0])

    # Utilization vs throughput, every configuration: colour = dtype, marker = mode.
    fig, ax = plt.subplots(figsize=(8, 5))
    markers = {"eager": "o", "cuda_graph": "^", "auto": "s"}
    for dtype, mode in sorted({(r["dtype"], r["mode"]) for r in ok}):
        pts = [r for r in ok if (r["dtype"], r["mode"]) == (dtype, mode)]
        ax.scatter([r["summary"]["inputs_per_second"] for r in pts],
                   [100 * r["summary"]["utilization"] for r in pts], label=f"{dtype} {mode}", s=14,
                   marker=markers.get(mode, "o"), alpha=0.7)
    ax.set_xscale("log")
    ax.set_xlabel("throughput (images/s)")
    ax.set_ylabel("utilization (%)")
    ax.set_title(f"Utilization vs throughput ({len({r['model'] for r in ok})} models, all batches)")
    if ok:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    save(fig, PLOTS[1])

    # Utilization vs ImageNet top-1: each model's best utilization at its largest batch.
    fig, ax = plt.subplots(figsize=(8, 5))
    best: dict[str, dict[str, Any]] = {}
    for r in ok:
        if r.get("top1") is None:
            continue
        b = best.get(r["model"])
        if b is None or (r["batch"], r["summary"]["utilization"]) > (b["batch"], b["summary"]["utilization"]):
            best[r["model"]] = r
    for model, r in sorted(best.items()):
        ax.scatter(r["top1"], 100 * r["summary"]["utilization"], s=22)
        ax.annotate(model, (r["top1"], 100 * r["summary"]["utilization"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    if not best:
        ax.text(0.5, 0.5, "no model with ImageNet top-1 metadata", ha="center", transform=ax.transAxes)
    ax.set_xlabel("ImageNet-1K top-1 (%) of the torchvision weights")
    ax.set_ylabel("utilization (%) at the largest batch")
    ax.set_title("Utilization vs accuracy")
    ax.grid(alpha=0.3)
    save(fig, PLOTS[2])

    # Each model's ops on the device's roofline, at its largest batch (first dtype and mode).
    for model in sorted({r["model"] for r in ok}):
        r = max((x for x in ok if x["model"] == model), key=lambda x: x["batch"])
        peak = r["summary"]["peak_flops_per_second"]
        bandwidth = r["bandwidth"]
        ops = [o for o in r["ops"] if o["intensity"] is not None and o["intensity"] > 0]
        fig, ax = plt.subplots(figsize=(7, 5))
        lo = min([o["intensity"] for o in ops] + [r["ridge_intensity"] / 100])
        hi = max([o["intensity"] for o in ops] + [r["ridge_intensity"] * 100])
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak, x * bandwidth) for x in xs], color="black", lw=1.5,
                label=f"roofline: {peak / 1e12:.3g} TFLOP/s, {bandwidth / 1e9:.3g} GB/s")
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
                       color="green", label="whole forward (achieved)", zorder=5)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("FLOP/s")
        where = "achieved kernel FLOP/s" if traced else "attainable FLOP/s (no kernel trace)"
        ax.set_title(f"{model}, batch {r['batch']}, {r['dtype']}, {r['mode']}: ops at {where}", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
        save(fig, roofline_plot_name(model))
    return written


def _fmt(v: Any, scale: float = 1.0, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v * scale:.{digits}g}" if isinstance(v, float) else html.escape(str(v))


def _report(rows: list[dict[str, Any]], plots: list[str], config: SurveyConfig) -> str:
    ok = _ok(rows)
    errors = [r for r in rows if r.get("status") == "error"]
    device = html.escape(rows[0]["device_name"] if rows else config.device)
    head = ("<tr><th>model</th><th>batch</th><th>dtype</th><th>mode</th><th>utilization %</th>"
            "<th>kernel util. %</th><th>images/s</th><th>GFLOP/image</th><th>FLOP/B</th>"
            "<th>ms/forward</th><th>top-1 %</th><th>ops compute / memory / overhead</th></tr>")
    body = []
    for r in sorted(ok, key=_key):
        s = r["summary"]
        b = r.get("bounds") or {}
        body.append(
            f"<tr><td>{html.escape(r['model'])}</td><td>{r['batch']}</td><td>{r['dtype']}</td><td>{r['mode']}</td>"
            f"<td>{_fmt(s['utilization'], 100)}</td><td>{_fmt(s.get('kernel_utilization'), 100)}</td>"
            f"<td>{_fmt(s['inputs_per_second'], 1, 4)}</td><td>{_fmt(s['flops'] / r['batch'], 1e-9)}</td>"
            f"<td>{_fmt(s['arithmetic_intensity'])}</td><td>{_fmt(s['seconds'], 1e3)}</td>"
            f"<td>{_fmt(r.get('top1'))}</td><td>{b.get('compute-bound', 0)} / {b.get('memory-bound', 0)} / "
            f"{b.get('overhead-bound', 0)}</td></tr>")
    figures = "\n".join(f'<figure><img src="{html.escape(p)}" alt="{html.escape(p)}"><figcaption>{html.escape(p)}</figcaption></figure>'
                        for p in plots)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in config.skipped)
    err = "".join(f"<li>{html.escape(r['model'])} b{r['batch']} {r['dtype']} {r['mode']}: {html.escape(r.get('error', ''))}</li>"
                  for r in errors)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>torchutil survey: {device}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
th {{ background: #eef; }} td:first-child {{ text-align: left; }}
figure {{ display: inline-block; margin: 0.5em; }} img {{ max-width: 760px; border: 1px solid #ddd; }}
</style></head><body>
<h1>CNN utilization survey</h1>
<p>Device: {device}. Utilization = achieved FLOP/s ÷ peak FLOP/s of the dtype in use
(FLOPs = 2 × multiply-accumulates, counted by torchutil). {len(ok)} configurations measured,
{len(errors)} failed.</p>
{f"<ul>{notes}</ul>" if notes else ""}
<h2>Results</h2>
<table>{head}{"".join(body)}</table>
<h2>Plots</h2>
{figures}
{f"<h2>Failed configurations</h2><ul>{err}</ul>" if err else ""}
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
