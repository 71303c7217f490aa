"""Rewrites survey results written before the survey stored each op by name (a positional list
per op) in the current form (a dict keyed by torchutil.studies.survey.OP_KEYS); every other
field of every row is left as it is. Plain .jsonl or gzipped .jsonl.gz, in place:

    python benchmarks/results/survey_ops_by_name.py docs/results/survey/survey.jsonl.gz
"""
from __future__ import annotations

import argparse
import gzip
import json
import os

from torchutil.studies.survey import ops_by_name


def convert(path: str) -> int:
    """Rewrites `path` with its ops by name; returns the number of rows converted."""
    gz = path.endswith(".gz")
    with (gzip.open(path, "rt") if gz else open(path)) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    converted = sum(ops_by_name(r) for r in rows)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    tmp = path + ".tmp"
    if gz:
        # The name inside the archive stays that of the plain file; mtime 0 keeps it reproducible.
        with open(tmp, "wb") as raw, gzip.GzipFile(os.path.basename(path)[:-3], "wb", fileobj=raw, mtime=0) as f:
            f.write(text.encode())
    else:
        with open(tmp, "w") as f:
            f.write(text)
    os.replace(tmp, path)
    return converted


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", help="survey.jsonl or survey.jsonl.gz files")
    for path in p.parse_args().paths:
        print(f"{path}: {convert(path)} row(s) converted")


if __name__ == "__main__":
    main()
