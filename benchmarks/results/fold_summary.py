"""Collects fold-bench runs (one folder per variant/repeat, each with fold_bench.csv) into one
CSV and one plot: utilization gain against the folding factor, per model, per variant.

    python benchmarks/results/fold_summary.py h200-work/fold h200-work/fold_all h200-work/fold_tuned \
        --out docs/results/fold

A folder's name is <variant>_rep<k> (as benchmarks/gpu/h200_results.sh writes them); repeats of a
variant are listed apart in the CSV and shown as their median in the plot.
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
from collections import defaultdict
from pathlib import Path


def collect(roots: list[str]) -> list[dict[str, str]]:
    rows = []
    for root in roots:
        for run in sorted(Path(root).iterdir()):
            table = run / "fold_bench.csv"
            if not table.exists():
                continue
            variant, _, rep = run.name.rpartition("_rep")
            for r in csv.DictReader(open(table)):
                rows.append({"source": f"{Path(root).name}/{run.name}", "variant": variant or run.name,
                             "repeat": rep, **r})
    return rows


def plot(rows: list[dict[str, str]], path: str, variants: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))  # one colour per model in every panel
    colors = {m: f"C{i}" for i, m in enumerate(models)}
    cols = min(3, len(variants))
    nrows = -(-len(variants) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.0 * nrows), squeeze=False, sharey=True)
    for ax in axes.flat[len(variants):]:
        ax.axis("off")
    for ax, variant in zip(axes.flat, variants):
        gains: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in rows:
            if r["variant"] == variant:
                gains[r["model"]][int(r["f"])].append(float(r["utilization_gain"]))
        for model, by_f in gains.items():
            fs = sorted(by_f)
            ax.plot(fs, [statistics.median(by_f[f]) for f in fs], marker="o", label=model, color=colors[model])
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.axhline(1.5, color="red", lw=0.8, ls="--")
        ax.set_xticks([1, 2, 3, 4])
        ax.set_xlabel("folding factor f")
        ax.set_title(variant, fontsize=10)
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("utilization gain over f = 1")
    axes.flat[len(variants) - 1].legend(fontsize=7)
    fig.suptitle("FoldedCNN utilization gain, batch 1024, float16 (median of repeats; dashed: 1.5x)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("roots", nargs="+", help="folders holding one folder per fold-bench run")
    p.add_argument("--out", required=True)
    p.add_argument("--variants", nargs="+", default=["eager", "graph", "graph_m8", "graph_tuned", "graph_tuned_m8"])
    args = p.parse_args()
    rows = collect(args.roots)
    if not rows:
        raise SystemExit(f"no fold_bench.csv under {args.roots}")
    os.makedirs(args.out, exist_ok=True)
    # Runs made before fold-bench had --cudnn-benchmark ran with torch's default (off).
    for r in rows:
        r.setdefault("cudnn_benchmark", "False")
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(os.path.join(args.out, "fold_runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    variants = [v for v in args.variants if any(r["variant"] == v for r in rows)]
    plot(rows, os.path.join(args.out, "fold_gain.png"), variants)
    print(f"{len(rows)} rows from {len({r['source'] for r in rows})} runs -> {args.out}/fold_runs.csv, fold_gain.png")


if __name__ == "__main__":
    main()
