"""RQ3: how measured utilization (and, for comparison, bandwidth utilization, throughput, FLOPs,
parameters and, from `nas evaluate --energy`, images per joule) ranks the NATS-Bench cells
against their accuracy, and how utilization, throughput and images per joule rank the same
cells against each other (rank_agreement).

For every measurement config in a `nas evaluate` db (dataset of the measured network, batch,
dtype, device, mode), every accuracy dataset of the table (cifar10, cifar100, ImageNet16-120)
and every metric, Spearman's rho and Kendall's tau-b (ties handled; torchutil.nas.stats) with
their two-sided p-values (NaN without scipy), over
all measured cells and over the connected ones only (the 341 cells with no path from input to
output train to chance level and would dominate the ranks of the cheapest cells).
"""
from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from torchutil.nas import natsbench as nb
from torchutil.nas.stats import kendall_test, rankdata, spearman_test
from torchutil.studies._common import atomic_open, figure, nas_error, save_figure, write_json
from torchutil.studies.nas_evaluate import CONFIG_COLUMNS, read_rows

__all__ = ["ACCURACY_DATASETS", "METRICS", "RANKED", "correlate", "format_agreement", "format_table", "rank_agreement",
           "write_outputs"]

# The datasets of the accuracy table (natsbench.AccuracyRow.test_accuracy).
ACCURACY_DATASETS = tuple(nb.DATASETS)
# Metric name -> db column.
METRICS = {"utilization": "utilization", "bandwidth_utilization": "bandwidth_utilization",
           "throughput": "inputs_per_second", "flops": "flops", "params": "params",
           "images_per_joule": "inputs_per_joule"}  # NULL (left out) without nas evaluate --energy
# The measured figures a search could reward, compared with each other by rank_agreement.
RANKED = ("utilization", "throughput", "images_per_joule")
PERCENT = ("utilization", "bandwidth_utilization")  # plotted in %


def _config_name(config: tuple[Any, ...]) -> str:
    dataset, batch, dtype, device, mode = config
    return f"{dataset} b{batch} {dtype} {device} {mode}"


def correlate(db: str | os.PathLike[str], table_csv: str | None = None,
              metrics: Sequence[str] = tuple(METRICS)) -> tuple[list[dict[str, Any]], dict[tuple, dict[str, np.ndarray]]]:
    """Correlation rows (one per config x subset x accuracy dataset x metric) and, per config,
    the joined arrays (index, metrics, accuracies) the plots use."""
    rows = read_rows(db)
    if not rows:
        raise nas_error(f"no measurements in {db}; run `nas evaluate` first")
    table = nb.load_accuracy_table(table_csv)
    connected = np.array([nb.is_connected(r.arch) for r in table])
    by_config: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:  # read_rows checked each row's index and arch; the table's archs are arch_of_index's
        by_config.setdefault(tuple(r[k] for k in CONFIG_COLUMNS), []).append(r)
    results: list[dict[str, Any]] = []
    joined: dict[tuple, dict[str, np.ndarray]] = {}
    for config, crow in sorted(by_config.items()):
        idx = np.array([r["idx"] for r in crow])
        data = {"index": idx, "connected": connected[idx]}
        for m in metrics:
            values = np.array([math.nan if r.get(METRICS[m]) is None else r[METRICS[m]] for r in crow], dtype=float)
            if np.isfinite(values).any():  # none in a db from before bandwidth utilization
                data[m] = values
        for ds in ACCURACY_DATASETS:
            data[ds] = np.array([table[i].test_accuracy(ds) for i in idx])
        joined[config] = data
        for subset in ("all", "connected"):
            keep = np.ones(idx.size, dtype=bool) if subset == "all" else data["connected"]
            for ds in ACCURACY_DATASETS:
                for m in (m for m in metrics if m in data):
                    ok = keep & np.isfinite(data[m])
                    x, y = data[m][ok], data[ds][ok]
                    rho, rho_p = spearman_test(x, y)
                    tau, tau_p = kendall_test(x, y)
                    results.append({
                        "config": _config_name(config), **dict(zip(CONFIG_COLUMNS, config)),
                        "subset": subset, "accuracy_dataset": ds, "metric": m, "n": int(ok.sum()),
                        "spearman": rho, "spearman_p": rho_p, "kendall": tau, "kendall_p": tau_p,
                    })
    if not results:
        raise nas_error(f"{db}: none of its {len(rows):,} rows has a value of "
                        f"{', '.join(METRICS[m] for m in metrics)} (all NULL); nothing to correlate")
    return results, joined


def rank_agreement(joined: dict[tuple, dict[str, np.ndarray]], worst: int = 5) -> list[dict[str, Any]]:
    """Per config and pair of RANKED metrics the db holds: Spearman's rho over the cells that
    have both, and the `worst` cells that break the pair's trend most: rank_gap is a's rank less
    b's (b's reversed where rho < 0), as a fraction of the cells, so +0.9 is a cell a puts near
    the top and b, against the trend, near the bottom."""
    out = []
    for config, data in joined.items():
        have = [m for m in RANKED if m in data]
        for k, a in enumerate(have):
            for b in have[k + 1:]:
                ok = np.isfinite(data[a]) & np.isfinite(data[b])
                if ok.sum() < 3:
                    continue
                rho, p = spearman_test(data[a][ok], data[b][ok])
                rank_b = rankdata(data[b][ok]) if not rho < 0 else ok.sum() + 1 - rankdata(data[b][ok])
                gap = (rankdata(data[a][ok]) - rank_b) / ok.sum()
                order = np.argsort(-np.abs(gap), kind="stable")[:worst]
                cells = [{"index": int(data["index"][ok][i]), a: float(data[a][ok][i]), b: float(data[b][ok][i]),
                          "rank_gap": float(gap[i])} for i in order]
                out.append({"config": _config_name(config), "a": a, "b": b, "n": int(ok.sum()), "spearman": rho,
                            "spearman_p": p, "disagree": cells})
    return out


def format_agreement(rows: Sequence[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        worst = ", ".join(f"{c['index']} ({c['rank_gap']:+.2f})" for c in r["disagree"])
        lines.append(f"{r['config']}: {r['a']} vs {r['b']}: Spearman {r['spearman']:+.3f} over {r['n']} cells; "
                     f"ranks differ most at cells {worst}")
    return "\n".join(lines)


def format_table(results: Sequence[dict[str, Any]]) -> str:
    lines = []
    for config in dict.fromkeys(r["config"] for r in results):
        for subset in ("all", "connected"):
            mine = [r for r in results if r["config"] == config and r["subset"] == subset]
            if not mine:
                continue
            lines.append(f"{config}, {subset} cells (n = {mine[0]['n']}): Spearman / Kendall tau-b with accuracy")
            metrics = list(dict.fromkeys(r["metric"] for r in mine))
            lines.append(f"  {'accuracy':<16}" + "".join(f"{m:>22}" for m in metrics))
            for ds in dict.fromkeys(r["accuracy_dataset"] for r in mine):
                cells = {r["metric"]: r for r in mine if r["accuracy_dataset"] == ds}
                lines.append(f"  {ds:<16}" + "".join(
                    f"{cells[m]['spearman']:>+11.3f} / {cells[m]['kendall']:<+7.3f}" for m in metrics))
    return "\n".join(lines)


def write_outputs(out: str | os.PathLike[str], results: Sequence[dict[str, Any]],
                  joined: dict[tuple, dict[str, np.ndarray]], plots: bool = True) -> list[Path]:
    """correlations.csv, correlations.json and (with plots) one scatter grid per config,
    scatter_<config>.png: rows = metrics, columns = accuracy datasets."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "correlations.csv", out / "correlations.json"]
    with atomic_open(written[0], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    write_json(written[1], results, indent=2)
    if not plots:
        return written
    for config, data in joined.items():
        metrics = [m for m in METRICS if m in data]
        fig = figure(figsize=(4 * len(ACCURACY_DATASETS), 3 * len(metrics)))
        axes = fig.subplots(len(metrics), len(ACCURACY_DATASETS), squeeze=False)
        colors = np.where(data["connected"], "tab:blue", "tab:red")
        for r, m in enumerate(metrics):
            for c, ds in enumerate(ACCURACY_DATASETS):
                ax = axes[r][c]
                x = 100 * data[m] if m in PERCENT else data[m]
                ax.scatter(x, data[ds], s=2, c=colors, alpha=0.5)
                rho = [x for x in results if x["config"] == _config_name(config) and x["subset"] == "all"
                       and x["metric"] == m and x["accuracy_dataset"] == ds]
                ax.set_title(f"{m} vs {ds}: rho {rho[0]['spearman']:+.3f}" if rho else ds, fontsize=8)
                ax.set_xlabel(f"{m} (%)" if m in PERCENT else m, fontsize=8)
                ax.set_ylabel(f"{ds} acc (%)", fontsize=8)
                if m == "throughput":
                    ax.set_xscale("log")
        fig.suptitle(f"{_config_name(config)} (red: no input-output path)", fontsize=9)
        fig.tight_layout()
        path = out / f"scatter_{_config_name(config).replace(' ', '_')}.png"
        save_figure(fig, path, dpi=110)
        written.append(path)
    return written
