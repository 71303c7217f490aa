"""What a survey keeps on disk: OUT/survey.jsonl, one row per (model, batch, dtype, mode),
appended as each finishes (a rerun reads it to resume), and the survey.csv and survey.json
written from the rows."""
from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import math
import os
import warnings
from typing import Any, BinaryIO

from torchutil._json import json_safe, loads
from torchutil.fields import FIELDS
from torchutil._files import open_regular
from torchutil.studies._common import atomic_open, named, write_json

__all__ = ["CSV_COLUMNS", "OP_KEYS", "RESULTS", "ResultsFile", "key", "load_results", "ok_rows", "ops_by_name",
           "write_tables"]

RESULTS = "survey.jsonl"
# What a row keeps of each op of its roofline, keyed by these torchutil.RooflineRow field names:
# FLOPs, bytes, intensity (FLOP/byte), achieved kernel FLOP/s (None without a kernel trace),
# attainable utilization and the bound class.
OP_KEYS = ("op", "module", "flops", "bytes", "intensity", "achieved_flops_per_second",
           "attainable_utilization", "bound")


def key(row: dict[str, Any]) -> tuple[str, int, str, str]:
    return (row["model"], int(row["batch"]), row["dtype"], row["mode"])


def ops_by_name(row: dict[str, Any]) -> bool:
    """Converts in place a row written before ops were stored by name (each op a list of the
    OP_KEYS values, in that order) to the current form; True if the row was in the old form."""
    ops = row.get("ops") or []
    if not any(isinstance(o, list) for o in ops):
        return False
    for o in ops:
        if not isinstance(o, list) or len(o) != len(OP_KEYS):
            raise ValueError(f"torchutil: survey row {key(row)} mixes op forms or holds an op that is "
                             f"neither a dict by name nor a list of {len(OP_KEYS)} values: {o!r}")
    row["ops"] = [dict(zip(OP_KEYS, o)) for o in ops]
    return True


def _row_problem(row: Any) -> str | None:
    """Why a line of survey.jsonl is not a usable row, or None."""
    if not isinstance(row, dict):
        return f"not a JSON object but {type(row).__name__}"
    missing = [k for k in ("model", "batch", "dtype", "mode", "status") if k not in row]
    if missing:
        return f"no {', '.join(missing)}"
    named = [k for k in ("model", "dtype", "mode") if not isinstance(row[k], str)]
    if named:
        return f"{named[0]} {row[named[0]]!r} is not a name"
    if not isinstance(row["batch"], int) or isinstance(row["batch"], bool) or row["batch"] < 1:
        return f"batch {row['batch']!r} is not an integer >= 1"
    if row["status"] not in ("ok", "error"):
        return f"status {row['status']!r} is neither ok nor error"
    if row["status"] == "ok" and not isinstance(row.get("summary"), dict):
        return "an ok row without its summary"
    if row["status"] == "ok":
        odd = [k for k, v in row["summary"].items()
               if k in FIELDS and v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool))]
        if odd:
            return f"summary field {odd[0]} is {row['summary'][odd[0]]!r}, not a number"
    return None


# The summary fields the report and plots read of every ok row.
REPORT_FIELDS = ("utilization", "inputs_per_second", "flops", "arithmetic_intensity", "peak_flops_per_second")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_report_rows(rows: list[dict[str, Any]], out: str) -> None:
    """A ValueError naming the file, the row and the field where an ok row lacks a number the
    report reads (a hand-made or foreign survey.jsonl), before anything is written."""
    for r in rows:
        if r.get("status") != "ok":
            continue
        missing = next((k for k in REPORT_FIELDS if not _finite(r["summary"].get(k))), None)
        if missing is not None:
            raise ValueError(f"torchutil: {os.path.join(out, RESULTS)}: the row of {r['model']} batch {r['batch']} "
                             f"{r['dtype']} {r['mode']} has no number for summary field {missing} (it has "
                             f"{r['summary'].get(missing)!r}); the report needs "
                             f"{', '.join(REPORT_FIELDS)}")


def load_results(out: str) -> list[dict[str, Any]]:
    """The rows of OUT/survey.jsonl, one per configuration (a later row of a configuration, from
    --retry-failed, replaces the earlier). A line that is not a usable row (cut short by a kill,
    not an object, missing keys, batch < 1) is skipped with a warning, and its configuration is
    run again. Rows of the old form (ops as positional lists) are converted on reading, with a
    warning."""
    path = os.path.join(out, RESULTS)
    by_key: dict[tuple[str, int, str, str], dict[str, Any]] = {}
    bad = []
    # A published survey keeps its rows gzipped (docs/results/survey): they are read first, and
    # a plain survey.jsonl beside them (where a survey appends) after, its rows the newer.
    sources = [p for p in (path + ".gz", path) if os.path.lexists(p)]
    for source in sources:
        # Not through a link someone planted, nor blocking on a FIFO: a regular file or an error.
        raw = open(open_regular(source, os.O_RDONLY), "rb")
        with raw, (gzip.open(raw, "rt") if source.endswith(".gz") else io.TextIOWrapper(raw)) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = loads(line)
                except ValueError as e:
                    problem = f"not JSON (cut short?): {e}"
                else:
                    problem = _row_problem(row)
                if problem:
                    bad.append(f"{os.path.basename(source)} line {number}: {problem}")
                    continue
                by_key.pop(key(row), None)  # the newer row goes to the end, in run order
                by_key[key(row)] = row
    if bad:
        warnings.warn(f"torchutil: skipped {len(bad)} unusable line(s) of {path} ({'; '.join(bad[:5])}"
                      f"{'; ...' if len(bad) > 5 else ''}); their configurations run again", stacklevel=2)
    rows = list(by_key.values())
    old = sum(ops_by_name(r) for r in rows)
    if old:
        warnings.warn(f"torchutil: {old} row(s) of {path} store each op as a positional list (surveys "
                      f"written before ops were stored by name); read as {', '.join(OP_KEYS)}. "
                      "benchmarks/results/survey_ops_by_name.py rewrites the file by name.", stacklevel=2)
    return rows


class ResultsFile:
    """OUT/survey.jsonl opened for appending rows (a context manager). A row is a whole line or
    nothing: a write that fails (a full disk) is cut back off the file and raised as an OSError
    naming it."""

    def __init__(self, out: str) -> None:
        self.path = os.path.join(out, RESULTS)
        self._sink: BinaryIO | None = None

    def __enter__(self) -> "ResultsFile":
        # A link planted at survey.jsonl is not followed (the row would be appended to its target).
        fd = open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        self._sink = open(fd, "a+b", buffering=0)  # unbuffered: a failed write is seen at once
        # A last line cut short by a kill must not swallow the first row appended after it.
        if self._sink.seek(0, os.SEEK_END):
            self._sink.seek(-1, os.SEEK_END)
            if self._sink.read(1) != b"\n":
                self._write(b"\n")
        return self

    def append(self, row: dict[str, Any]) -> None:
        """One row as one line, on disk when this returns."""
        self._write((json.dumps(json_safe(row)) + "\n").encode())

    def _write(self, data: bytes) -> None:
        assert self._sink is not None, "ResultsFile written outside its with-block"
        end = self._sink.seek(0, os.SEEK_END)
        try:
            done = 0
            while done < len(data):
                done += self._sink.write(data[done:])
        except OSError as e:
            with contextlib.suppress(OSError):
                self._sink.truncate(end)
            raise named(e, self.path) from None

    def __exit__(self, *exc: Any) -> None:
        if self._sink is not None:
            self._sink.close()
            self._sink = None


def ok_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows measured without error, with a utilization: what the plots and the report show."""
    return [r for r in rows if r.get("status") == "ok" and r["summary"].get("utilization") is not None]


CSV_COLUMNS = ["model", "batch", "dtype", "mode", "device", "device_name", "image_size", "status",
               "error", "top1", *FIELDS, "peak_source", "peak_dtype", "bandwidth",
               "bandwidth_source", "ridge_intensity", "compute_bound_ops", "memory_bound_ops",
               "overhead_bound_ops", "config_seconds"]


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row.get(k) for k in CSV_COLUMNS}
    out.update(row.get("summary") or {})
    bounds = row.get("bounds") or {}
    out["compute_bound_ops"] = bounds.get("compute-bound", 0)
    out["memory_bound_ops"] = bounds.get("memory-bound", 0)
    out["overhead_bound_ops"] = bounds.get("overhead-bound", 0)
    return out


def write_tables(rows: list[dict[str, Any]], out: str) -> list[str]:
    """OUT/survey.csv (one line per row, the summary's fields as columns) and OUT/survey.json."""
    with atomic_open(os.path.join(out, "survey.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow(_flat(r))
    write_json(os.path.join(out, "survey.json"), rows)
    return ["survey.csv", "survey.json"]
