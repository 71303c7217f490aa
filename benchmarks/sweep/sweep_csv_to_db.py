"""Rebuilds a `nas evaluate` results db from a committed sweep CSV, so `nas correlate` and
`nas search` can be rerun without a GPU:

    python benchmarks/sweep/sweep_csv_to_db.py docs/results/nas/sweep_auto_a.csv.gz auto_a.sqlite
    python -m torchutil nas correlate --db auto_a.sqlite --out docs/results/nas
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import math

from torchutil.studies.nas_evaluate import connect

TEXT = ("dataset", "dtype", "device", "mode", "arch", "device_name")


def _value(column: str, text: str) -> object:
    if column in ("idx", "batch"):
        return int(text)
    if column in TEXT:
        return text
    x = float(text)
    return None if math.isnan(x) else x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", help="a sweep CSV, gzipped or not")
    p.add_argument("db", help="the SQLite db to write (rows replace those of the same key)")
    args = p.parse_args()
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt") as f:
        rows = list(csv.DictReader(f))
    with contextlib.closing(connect(args.db)) as con:
        have = {r[1] for r in con.execute("PRAGMA table_info(results)")}
        columns = [c for c in rows[0] if c in have]
        con.executemany(f"INSERT OR REPLACE INTO results ({', '.join(columns)}) "
                        f"VALUES ({', '.join('?' * len(columns))})",
                        [[_value(c, r[c]) for c in columns] for r in rows])
        con.commit()
    print(f"{args.db}: {len(rows)} rows, {len(columns)} columns from {args.csv}")


if __name__ == "__main__":
    main()
