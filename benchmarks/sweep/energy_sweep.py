"""An energy sweep of NATS-Bench cells (issue 39): `nas evaluate --energy` over every --every-th
cell (CIFAR-10 networks, batch 256, float16, channels_last, timing auto, as the packaged H200
sweep), then how images per joule ranks the cells against utilization and against throughput:
Spearman's rho, the cells where the ranks disagree most, and a plot.

What it costs: each cell pays its energy windows (by default 0.5 s of replays in five windows
aligned to NVML's 100 ms updates; --energy-window 0.3 --energy-windows 3 for 0.3 s) plus the wait for the counter's first change (~50 ms on average) on top of
the ~13 ms of an untraced call (the sweep's threads build and capture the next cells meanwhile),
so about 0.6 s a cell: 1,042 cells (every 15th) take ~11 min, every 75th (209 cells) ~2.2 min.
--max-cells caps the count; a rerun with the same --out resumes.

    python benchmarks/sweep/energy_sweep.py --out $OUT/sweep --every 75
    python benchmarks/sweep/energy_sweep.py --out docs/results/nas/energy --every 15      # ~11 min

Writes results.sqlite, summary.json (time, cells, Spearman, disagreeing cells) and
energy_ranks.png under --out.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from torchutil.nas import natsbench as nb
from torchutil.studies import nas_correlate as co
from torchutil.studies import nas_evaluate as ev
from torchutil.studies.nas_cells import device_name


def plot(rows: list[dict], agreement: list[dict], path: Path) -> None:
    from torchutil.studies._common import figure, save_figure

    ipj = np.array([r["inputs_per_joule"] for r in rows])
    connected = np.array([nb.is_connected(nb.arch_of_index(r["idx"])) for r in rows])
    colors = np.where(connected, "tab:blue", "tab:red")
    fig = figure(figsize=(10, 4))
    for ax, (metric, column, scale) in zip(fig.subplots(1, 2), (("utilization", "utilization", 100),
                                                                ("throughput", "inputs_per_second", 1))):
        x = scale * np.array([r[column] for r in rows])
        ax.scatter(x, ipj, s=4, c=colors, alpha=0.6)
        rho = next((a["spearman"] for a in agreement if {a["a"], a["b"]} == {metric, "images_per_joule"}), math.nan)
        worst = next((a["disagree"] for a in agreement if {a["a"], a["b"]} == {metric, "images_per_joule"}), [])
        for cell in worst[:3]:
            i = next(k for k, r in enumerate(rows) if r["idx"] == cell["index"])
            ax.annotate(str(cell["index"]), (x[i], ipj[i]), fontsize=7)
        ax.set_xlabel("utilization (%)" if metric == "utilization" else "throughput (images/s)")
        ax.set_ylabel("images per joule")
        ax.set_title(f"images/J vs {metric}: Spearman {rho:+.3f}", fontsize=9)
        if metric == "throughput":
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{len(rows)} NATS-Bench cells, CIFAR-10 b256 fp16, graph replays, NVML energy "
                 "(red: no input-output path; labels: cells whose ranks differ most)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=int, default=15, help="every N-th cell of the 15,625 (default 15: 1,042 cells)")
    ap.add_argument("--max-cells", type=int, default=None, help="at most this many of them")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--energy-window", type=float, default=0.5)
    ap.add_argument("--energy-windows", type=int, default=5,
                    help="windows per cell (0.3 s in 3 is the cheapest setting with an interval)")
    ap.add_argument("--out", default="energy-sweep")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    indices = list(range(0, nb.num_archs(), args.every))[:args.max_cells]
    on_cuda = torch.device(args.device).type == "cuda"
    config = ev.EvalConfig(dataset="cifar10", batch=args.batch, dtype=args.dtype, device=args.device,
                           channels_last=on_cuda, energy=True, energy_window=args.energy_window,
                           energy_windows=args.energy_windows)
    db = out / "results.sqlite"
    started = time.perf_counter()
    stats = ev.sweep(config, indices, db, progress=False)
    seconds = time.perf_counter() - started
    rows = [r for r in ev.read_rows(db) if r["idx"] in set(indices)]
    _, joined = co.correlate(db)
    agreement = co.rank_agreement(joined, worst=10)
    text = co.format_agreement(agreement)
    print(text)
    per_cell = stats.seconds_per_arch if stats.evaluated else math.nan
    summary = {"cells": len(rows), "every": args.every, "evaluated_now": stats.evaluated, "sweep_seconds": seconds,
               "seconds_per_cell": per_cell, "energy_window": args.energy_window,
               "energy_windows": args.energy_windows, "projected_1000_cells_minutes": 1000 * per_cell / 60,
               "device": device_name(torch.device(args.device)), "agreement": agreement}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"{stats.evaluated} cells measured in {seconds:.0f} s ({per_cell:.3f} s a cell; 1,000 cells: "
          f"{summary['projected_1000_cells_minutes']:.1f} min); {len(rows)} cells in {db}")
    try:
        plot(rows, agreement, out / "energy_ranks.png")
        print(f"wrote {out / 'energy_ranks.png'}")
    except ImportError as e:
        print(f"no plot: {e}")


if __name__ == "__main__":
    main()
