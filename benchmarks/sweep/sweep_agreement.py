"""How well two NATS-Bench sweeps of the same config agree, cell by cell: the reward-grade test
of docs/results/nas (two independent runs of `nas evaluate`).

    python benchmarks/sweep/sweep_agreement.py sweep_a.sqlite sweep_b.sqlite
    python benchmarks/sweep/sweep_agreement.py docs/results/nas/sweep_auto_a.csv.gz docs/results/nas/sweep_auto_b.csv.gz

Inputs are result dbs or the committed CSVs (.csv or .csv.gz). Cells are matched on their key
(index, dataset, batch, dtype, device, mode); only cells in both count. Per metric: Spearman
and Kendall tau-b between the runs (scipy.stats), and the level difference, the median over
cells of b / a - 1, with its 2.5/97.5 % quantiles. --by-index matches on the index alone. Also each run's wall time per cell.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from torchutil.studies import nas_evaluate as ev

METRICS = ("utilization", "bandwidth_utilization", "inputs_per_second", "seconds")


def load(path: str, by_index: bool = False) -> dict[tuple, dict[str, object]]:
    if path.endswith((".csv", ".csv.gz")):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            rows = list(csv.DictReader(f))
    else:
        try:
            rows = ev.read_rows(path)
        except ValueError as e:  # nas_error: no such db, not a results db
            sys.exit(f"sweep_agreement: {e}")
    key = ev.KEY_COLUMNS[:1] if by_index else ev.KEY_COLUMNS
    return {tuple(str(r[k]) for k in key): r for r in rows}


def number(v: object) -> float:
    return math.nan if v is None or v == "" else float(v)


def agreement(a: dict, b: dict) -> dict[str, object]:
    keys = sorted(set(a) & set(b), key=lambda k: (int(k[0]),) + k[1:])
    result: dict[str, object] = {"cells": len(keys), "only_a": len(set(a) - set(b)),
                                 "only_b": len(set(b) - set(a))}
    for m in METRICS:
        x = np.array([number(a[k].get(m)) for k in keys])
        y = np.array([number(b[k].get(m)) for k in keys])
        ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
        if not ok.any():
            continue
        x, y = x[ok], y[ok]
        rho = stats.spearmanr(x, y)
        tau = stats.kendalltau(x, y)
        ratio = y / x - 1.0
        result[m] = {"cells": int(ok.sum()), "spearman": float(rho.statistic), "kendall": float(tau.statistic),
                     "median_level_difference": float(np.median(ratio)),
                     "level_difference_q025": float(np.quantile(ratio, 0.025)),
                     "level_difference_q975": float(np.quantile(ratio, 0.975)),
                     "median_abs_cell_difference": float(np.median(np.abs(ratio)))}
    for name, run in (("a", a), ("b", b)):
        e = np.array([number(run[k].get("eval_seconds")) for k in keys])
        g = np.array([number(run[k].get("cuda_graph")) for k in keys])
        result[f"eval_seconds_per_cell_{name}"] = float(np.nanmean(e)) if np.isfinite(e).any() else math.nan
        result[f"graph_timed_{name}"] = int(np.nansum(g)) if np.isfinite(g).any() else None
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--by-index", action="store_true",
                   help="match cells on their index alone (to compare sweeps of two timing modes)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    r = agreement(load(args.a, args.by_index), load(args.b, args.by_index))
    if not r["cells"]:
        sys.exit("sweep_agreement: no cell is in both sweeps (different configs? --by-index matches on "
                 "the index alone)")
    print(f"{r['cells']} cells in both ({r['only_a']} only in a, {r['only_b']} only in b); "
          f"graph-timed: {r['graph_timed_a']} / {r['graph_timed_b']}; "
          f"evaluation {1e3 * r['eval_seconds_per_cell_a']:.1f} / {1e3 * r['eval_seconds_per_cell_b']:.1f} ms per cell")
    print(f"{'metric':24} {'Spearman':>9} {'Kendall':>8} {'median b/a-1':>13} {'95 % of cells':>20} {'median |b/a-1|':>15}")
    for m in METRICS:
        if m in r:
            s = r[m]
            print(f"{m:24} {s['spearman']:9.5f} {s['kendall']:8.4f} {100 * s['median_level_difference']:+12.2f}% "
                  f"[{100 * s['level_difference_q025']:+7.2f}, {100 * s['level_difference_q975']:+7.2f}]% "
                  f"{100 * s['median_abs_cell_difference']:14.2f}%")
    if args.json:
        Path(args.json).write_text(json.dumps({"a": args.a, "b": args.b, **r}, indent=1) + "\n")


if __name__ == "__main__":
    main()
