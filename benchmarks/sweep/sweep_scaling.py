"""A sweep over N GPUs against the one-GPU sweep of the same machine (run_gpu.sh sweepN): wall
time, scaling, cells and graph-timed cells of each, utilization's agreement, and issue #24's
targets (scaling >= 0.95 N, i.e. 1.9x on 2; Spearman >= 0.999; median level within 0.5 %).

    python benchmarks/sweep/sweep_scaling.py SWEEP_DIR N AGREEMENT_JSON [--json OUT]

SWEEP_DIR holds sweep1.sqlite and sweepN.sqlite, and sweep<k>.seconds, the wall time of a sweep
that finished in one go; AGREEMENT_JSON is sweep_agreement.py's --json of sweep1 against sweepN.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sqlite3
from pathlib import Path


def seconds(folder: Path, k: int) -> float:
    """The wall time of sweep<k>, NaN where it did not finish in one go."""
    f = folder / f"sweep{k}.seconds"
    return float(f.read_text()) if f.exists() else math.nan


def cells(folder: Path, k: int) -> tuple[int, int]:
    """(cells, graph-timed cells) of sweep<k>'s db."""
    with contextlib.closing(sqlite3.connect(folder / f"sweep{k}.sqlite")) as con:
        n, graph = con.execute("SELECT count(*), coalesce(sum(cuda_graph), 0) FROM results").fetchone()
    return int(n), int(graph)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("n", type=int)
    p.add_argument("agreement", type=Path)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    one, many = seconds(args.folder, 1), seconds(args.folder, args.n)
    scaling = one / many
    u = json.loads(args.agreement.read_text()).get("utilization", {})
    rho, level = u.get("spearman", math.nan), u.get("median_level_difference", math.nan)
    result = {"gpus": args.n, "seconds_1": one, "seconds_n": many, "scaling": scaling,
              "cells_1": cells(args.folder, 1), "cells_n": cells(args.folder, args.n),
              "spearman_utilization": rho, "median_level_difference": level,
              "scaling_met": scaling >= 0.95 * args.n, "agreement_met": rho >= 0.999 and abs(level) <= 0.005}
    print(f"{'':22} {'1 GPU':>14} {f'{args.n} GPUs':>14}")
    print(f"{'wall s':22} {one:14.1f} {many:14.1f}")
    print(f"{'cells, graph-timed':22} {'%d, %d' % result['cells_1']:>14} {'%d, %d' % result['cells_n']:>14}")
    print(f"scaling {scaling:.2f}x ({100 * scaling / args.n:.0f} % of linear; target >= {0.95 * args.n:.2f}x): "
          f"{'met' if result['scaling_met'] else 'NOT met'}")
    print(f"utilization against 1 GPU: Spearman {rho:.5f} (target >= 0.999), median level {100 * level:+.2f} % "
          f"(target within 0.5 %): {'met' if result['agreement_met'] else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
