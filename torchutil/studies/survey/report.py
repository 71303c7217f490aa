"""The survey's HTML report (one page: header, plots, a sortable and filterable table, the
failed configurations) and write_outputs, which writes every output of a survey."""
from __future__ import annotations

import html
import math
import os
from typing import Any

import torch

from torchutil._version import __version__
from torchutil.studies._common import atomic_open
from torchutil.studies.survey.plots import (CAPTIONS, ROOFLINE_CAPTION, format_number, rate, roofline_plot_name,
                                            roofline_row, write_plots)
from torchutil.studies.survey.run import SurveyConfig
from torchutil.studies.survey.store import check_report_rows, key, ok_rows, write_tables

__all__ = ["write_outputs"]


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
    ok = ok_rows(rows)
    devices = sorted({r.get("device_name") or r.get("device") or "" for r in rows}) or [config.device]
    peaks = {}
    for r in ok:
        dtype = _OLD_DTYPE_NAMES.get(r.get("peak_dtype", ""), r.get("peak_dtype", ""))
        peaks.setdefault(r["dtype"], (dtype, r["summary"]["peak_flops_per_second"], r.get("peak_source", "")))
    peak_text = "\n".join(
        f"{d}: {rate(p, 'FLOP/s')}{'' if pd == d else f' {pd}'} ({s})" if p is not None else f"{d}: –"
        for d, (pd, p, s) in peaks.items()) or "–"
    bandwidths = {(r.get("bandwidth"), r.get("bandwidth_source", "")) for r in rows if r.get("bandwidth")}
    bw_text = "; ".join(f"{rate(b, 'B/s')} ({s})" for b, s in sorted(bandwidths)) or "–"
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
    ok = ok_rows(rows)
    errors = [r for r in rows if r.get("status") == "error"]
    device = e(", ".join(sorted({r.get("device_name") or "" for r in rows})) if rows else config.device)
    main = "\n".join(_figure_html(p, CAPTIONS[p]) for p in plots if p in CAPTIONS)
    rooflines = []
    for p in plots:
        if p in CAPTIONS:
            continue
        model = next((m for m in {r["model"] for r in ok} if roofline_plot_name(m) == p), None)
        r = roofline_row(ok, model) if model else None
        caption = (ROOFLINE_CAPTION.format(model=model, batch=r["batch"], dtype=r["dtype"], mode=r["mode"])
                   if r else p)
        rooflines.append(_figure_html(p, caption))
    head = "".join(f"<th title='click to sort'>{e(h)}</th>" for h, _, _ in _COLUMNS)
    body = []
    for r in sorted(ok, key=key):
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
    check_report_rows(rows, out)
    written = write_tables(rows, out)
    pngs = write_plots(rows, out) if plots else []
    with atomic_open(os.path.join(out, "report.html")) as f:
        f.write(_report(rows, pngs, config))
    return written + pngs + ["report.html"]
