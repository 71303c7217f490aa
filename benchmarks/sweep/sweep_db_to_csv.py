"""Writes a `nas evaluate` results db as the gzipped CSV committed under docs/results/nas
(the inverse of sweep_csv_to_db.py), one row per cell in index order:

    python benchmarks/sweep/sweep_db_to_csv.py sweep.sqlite docs/results/nas/sweep_auto_a.csv.gz
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import sqlite3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("db", help="a `nas evaluate` results db")
    p.add_argument("csv", help="the CSV to write (gzipped when the name ends in .gz)")
    args = p.parse_args()
    with contextlib.closing(sqlite3.connect(args.db)) as con:
        cur = con.execute("SELECT * FROM results ORDER BY idx, dataset, batch, dtype, device, mode")
        header = [d[0] for d in cur.description]
        rows = cur.fetchall()
    with contextlib.ExitStack() as stack:
        if args.csv.endswith(".gz"):
            # mtime=0: the same db gives the same bytes.
            raw = stack.enter_context(gzip.GzipFile(args.csv, "wb", mtime=0))
            f = stack.enter_context(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
        else:
            f = stack.enter_context(open(args.csv, "w", encoding="utf-8", newline=""))
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(["nan" if v is None else repr(v) if isinstance(v, float) else v for v in r] for r in rows)
    print(f"{len(rows)} rows -> {args.csv}")


if __name__ == "__main__":
    main()
