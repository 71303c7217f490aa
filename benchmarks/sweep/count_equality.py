"""Do two NATS-Bench sweeps count every cell alike? The counted columns (flops, matrix_flops,
bytes, params) of the cells in both, compared exactly; prints how many cells differ and the
first few.

    python benchmarks/sweep/count_equality.py docs/results/nas/sweep_auto_a.csv.gz sweep.sqlite
"""
from __future__ import annotations

import argparse
import sys

from sweep_agreement import load, number  # beside this script

COLUMNS = ("flops", "matrix_flops", "bytes", "params")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args()
    a, b = load(args.a), load(args.b)
    keys = sorted(set(a) & set(b), key=lambda k: (int(k[0]),) + k[1:])
    differ = [(k[0], c, number(a[k][c]), number(b[k][c])) for k in keys for c in COLUMNS
              if number(a[k][c]) != number(b[k][c])]
    print(f"counted columns {', '.join(COLUMNS)}: {len(keys)} cells in both, "
          f"{len({d[0] for d in differ})} differ" + (f"; first: {differ[:5]}" if differ else " (all equal)"))
    sys.exit(1 if differ or not keys else 0)


if __name__ == "__main__":
    main()
