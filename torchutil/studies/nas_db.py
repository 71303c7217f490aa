"""The results db of `nas evaluate`: one row per (index, dataset, batch, dtype, device, mode) in
the SQLite table `results`, its columns, opening it (created, or read-only for readers), reading,
writing and merging rows, the packaged sweep (`builtin:h200-auto`) and the shard files of ranks.
torchutil/studies/nas_cells.py measures the rows; nas_evaluate.py re-exports these names.
"""
from __future__ import annotations

import contextlib
import math
import os
import re
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator

from torchutil._ops import CHOICES
from torchutil.studies._common import nas_error

__all__ = [
    "BUILTIN_DBS",
    "CONFIG_COLUMNS",
    "KEY_COLUMNS",
    "METRIC_COLUMNS",
    "SUMMARY_COLUMNS",
    "TIMINGS",
    "check_db",
    "connect",
    "db_errors",
    "insert_rows",
    "is_builtin",
    "iter_shards",
    "merge",
    "read_rows",
    "remove_db",
    "shard_path",
    "shard_pattern",
]


# A row's identity. `device` is the device type ("cuda", "cpu"): the shards of one sweep run on
# cuda:0..cuda:7 and are one measurement; the GPU's name is in `device_name`.
KEY_COLUMNS = ("idx", "dataset", "batch", "dtype", "device", "mode")
TIMINGS = CHOICES["timing"]  # a row's mode
# One measurement config: a row's key without the arch index.
CONFIG_COLUMNS = KEY_COLUMNS[1:]
# Copied from the profile summary (torchutil.FIELDS); kernel figures are NaN (NULL) untraced.
# cuda_graph: 1 where the forward was timed as graph replays (timing "auto" falls back to
# eager for a cell that cannot be captured); seconds_relative_ci: how tight its median is.
SUMMARY_COLUMNS = ("utilization", "matrix_utilization", "flops", "matrix_flops", "bytes",
                   "seconds", "inputs_per_second", "achieved_flops_per_second",
                   "peak_flops_per_second", "kernels_per_forward", "kernel_seconds",
                   "gpu_busy_fraction", "kernel_utilization", "bandwidth_utilization",
                   "peak_bytes_per_second", "seconds_relative_ci", "cuda_graph",
                   # nas evaluate --energy (docs/energy.md); NULL without it.
                   "joules", "joules_ci_low", "joules_ci_high", "watts", "flops_per_joule", "inputs_per_joule")
# params: trainable parameters of the network; eval_seconds: wall time of the whole
# evaluation of the arch (construction + profile), what a sweep pays per arch.
METRIC_COLUMNS = (*SUMMARY_COLUMNS, "params", "build_seconds", "eval_seconds")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS results (
    idx INTEGER NOT NULL, dataset TEXT NOT NULL, batch INTEGER NOT NULL, dtype TEXT NOT NULL,
    device TEXT NOT NULL, mode TEXT NOT NULL, arch TEXT NOT NULL, device_name TEXT,
    {", ".join(f"{c} REAL" for c in METRIC_COLUMNS)},
    PRIMARY KEY ({", ".join(KEY_COLUMNS)})
)"""
_COLUMNS = (*KEY_COLUMNS, "arch", "device_name", *METRIC_COLUMNS)


def shard_path(db: str | os.PathLike[str], rank: int) -> Path:
    """results.sqlite -> results.rank3.sqlite."""
    db = Path(db)
    return db.with_name(f"{db.stem}.rank{rank}{db.suffix or '.sqlite'}")


# sqlite's primary result codes that mean "this file is not a (whole) SQLite db": only these
# get the hint that the file may be something else. A full disk (SQLITE_FULL), a read-only
# file system (SQLITE_READONLY, SQLITE_CANTOPEN) or a lock say so themselves.
_NOT_A_DB = {11: "SQLITE_CORRUPT", 26: "SQLITE_NOTADB"}


@contextlib.contextmanager
def db_errors(db: str | os.PathLike[str] | sqlite3.Connection) -> Iterator[None]:
    """sqlite3 errors inside become torchutil errors that name the db file, with the hint "is
    it a results db of nas evaluate?" where the file is not a SQLite db or is damaged."""
    try:
        yield
    except sqlite3.Error as e:
        name = _db_name(db)
        code = getattr(e, "sqlite_errorcode", None)
        hint = "; is it a results db of nas evaluate?" if code is not None and code & 0xFF in _NOT_A_DB else ""
        raise nas_error(f"{name}: {e}{hint}") from e


def _db_name(db: str | os.PathLike[str] | sqlite3.Connection) -> str:
    if isinstance(db, sqlite3.Connection):
        return next((row[2] for row in db.execute("PRAGMA database_list") if row[1] == "main"), "the db")
    return str(db)


def _check_schema(con: sqlite3.Connection, db: str | os.PathLike[str]) -> None:
    tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if tables and "results" not in tables:
        raise nas_error(f"{db} is a SQLite db of something else (tables {', '.join(sorted(tables))}), "
                        "not a results db of nas evaluate")
    if "results" in tables:
        have = {row[1] for row in con.execute("PRAGMA table_info(results)")}
        missing = [c for c in (*KEY_COLUMNS, "arch") if c not in have]
        if missing:
            raise nas_error(f"{db}: its table `results` has no column {', '.join(missing)}; it is not a results "
                            "db of nas evaluate")


# --- the packaged sweep ---------------------------------------------------------------------------

BUILTIN = "builtin:"
# Sweeps packaged with torchutil (torchutil/nas/data/README.md), read in place as CSV, for
# `nas correlate --db builtin:NAME` and `nas search --db builtin:NAME` without a GPU or a sweep.
# h200-auto: docs/results/nas/sweep_auto_a.csv.gz, all 15,625 cells, CIFAR-10 networks at
# batch 256, float16, channels_last, timing auto, on an NVIDIA H200 (2026-12-01).
BUILTIN_DBS = {"h200-auto": "sweep_h200_auto.csv.gz"}


def is_builtin(db: Any) -> bool:
    """True for "builtin:NAME", a packaged sweep (BUILTIN_DBS)."""
    return isinstance(db, str) and db.startswith(BUILTIN)


def _builtin_rows(db: str) -> list[dict[str, Any]]:
    import csv
    import gzip
    from importlib import resources

    name = db.removeprefix(BUILTIN)
    if name not in BUILTIN_DBS:
        raise nas_error(f"no packaged sweep {db!r}; they are {', '.join(BUILTIN + n for n in BUILTIN_DBS)}")
    def metric(text: str | None) -> float:  # a column the sweep predates: NaN, as NULL in a db
        return math.nan if text in (None, "") else float(text)

    with resources.files("torchutil.nas").joinpath("data", BUILTIN_DBS[name]).open("rb") as raw, \
            gzip.open(raw, "rt", newline="") as f:
        return [{**{c: r[c] for c in (*KEY_COLUMNS, "arch", "device_name")}, "idx": int(r["idx"]),
                 "batch": int(r["batch"]), **{c: metric(r.get(c)) for c in METRIC_COLUMNS}}
                for r in csv.DictReader(f)]


# --- opening a db -------------------------------------------------------------------------------


def connect(db: str | os.PathLike[str], create: bool = True) -> sqlite3.Connection:
    """Opens a results database for a sweep (creating it if needed), or with create=False for
    reading only: a missing file is then an error, nothing is created or changed, and a db on a
    read-only file system opens. Refuses a SQLite file of something else and a file that is
    not SQLite, naming it. A sweep's db is in WAL mode: a committed row survives a kill, cheaply."""
    if not create:
        return _open_readonly(db)
    with db_errors(db):
        con = sqlite3.connect(str(db), timeout=60)
        try:
            _check_schema(con, db)
            # WAL with synchronous=NORMAL: a commit is an append to the log, without an fsync,
            # and survives a killed process (not a power cut), which is what a sweep needs.
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute(_SCHEMA)
            # A db written before a metric column existed gets it (NULL in its old rows).
            have = {row[1] for row in con.execute("PRAGMA table_info(results)")}
            for column in METRIC_COLUMNS:
                if column not in have:
                    con.execute(f"ALTER TABLE results ADD COLUMN {column} REAL")
            con.commit()
        except BaseException:
            con.close()
            raise
    return con


def _open_readonly(db: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only connection (sqlite URI mode=ro). A WAL db whose folder cannot be written (a
    read-only file system: its -shm file cannot be made) is opened as immutable, which nobody
    can be writing there."""
    if not Path(db).is_file():
        raise nas_error(f"no results db at {db}; run `nas evaluate --db {db}` first, or read the packaged H200 "
                        f"sweep: --db {BUILTIN}h200-auto")
    uri = f"{Path(db).resolve().as_uri()}?mode=ro"
    with db_errors(db):
        for query in ("", "&immutable=1"):
            con = sqlite3.connect(uri + query, uri=True, timeout=60)
            try:
                _check_schema(con, db)
                return con
            except sqlite3.OperationalError as e:
                con.close()
                if query or getattr(e, "sqlite_errorcode", None) != sqlite3.SQLITE_CANTOPEN:
                    raise
            except BaseException:
                con.close()
                raise
    raise AssertionError("unreachable")


def check_db(db: str | os.PathLike[str]) -> None:
    """An error naming db unless it is a readable results db or a packaged sweep (nothing is
    created or changed)."""
    if is_builtin(db):
        _builtin_rows(str(db))
    else:
        connect(db, create=False).close()


def read_rows(db: str | os.PathLike[str] | sqlite3.Connection, **where: Any) -> list[dict[str, Any]]:
    """Rows of a results db (or of a packaged sweep, "builtin:NAME") as dicts (NULL -> NaN for
    metrics), filtered by key columns given as keywords (dataset="cifar10", batch=256, ...;
    None means any). The db is opened read-only."""
    where = {k: v for k, v in where.items() if v is not None}
    for k in where:
        if k not in KEY_COLUMNS:
            raise nas_error(f"can filter by {', '.join(KEY_COLUMNS)}, got {k!r}")
    if is_builtin(db):
        return [r for r in _builtin_rows(str(db)) if all(r[k] == v for k, v in where.items())]
    con = db if isinstance(db, sqlite3.Connection) else connect(db, create=False)
    try:
        with db_errors(db):
            return _read(con, where)
    finally:
        if con is not db:
            con.close()


def _read(con: sqlite3.Connection, where: dict[str, Any]) -> list[dict[str, Any]]:
    # A db written before a metric column existed lacks it: NULL (NaN) there, nothing altered.
    have = {row[1] for row in con.execute("PRAGMA table_info(results)")}
    if not have:  # an empty SQLite file: no table yet, no rows
        return []
    select = ", ".join(c if c in have else f"NULL AS {c}" for c in _COLUMNS)
    clause = " AND ".join(f"{k}=?" for k in where) or "1"
    cur = con.execute(f"SELECT {select} FROM results WHERE {clause} ORDER BY idx", tuple(where.values()))
    rows = []
    for values in cur:
        row = dict(zip(_COLUMNS, values))
        for c in METRIC_COLUMNS:
            row[c] = math.nan if row[c] is None else float(row[c])
        rows.append(row)
    return rows


def merge(dst: str | os.PathLike[str], sources: Iterable[str | os.PathLike[str]]) -> int:
    """Copies every row of the `sources` dbs into `dst` (a row with the same key is replaced)
    and returns the number of rows copied."""
    con = connect(dst)
    copied = 0
    try:
        for i, src in enumerate(sources):
            check_db(src)
            alias = f"src{i}"
            with db_errors(src):
                con.execute(f"ATTACH DATABASE ? AS {alias}", (str(src),))
                try:
                    # A source written before a metric column existed gives NULL for it.
                    have = {row[1] for row in con.execute(f"PRAGMA {alias}.table_info(results)")}
                    picked = ", ".join(c if c in have else f"NULL AS {c}" for c in _COLUMNS)
                    cols = ", ".join(_COLUMNS)
                    cur = con.execute(f"INSERT OR REPLACE INTO results ({cols}) SELECT {picked} FROM {alias}.results")
                    copied += cur.rowcount
                    con.commit()
                finally:
                    con.execute(f"DETACH DATABASE {alias}")
    finally:
        con.close()
    return copied


def insert_rows(con: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
    """Writes result rows (dicts with every column; NaN -> NULL), replacing equal keys, and commits."""
    def value(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v

    con.executemany(
        f"INSERT OR REPLACE INTO results ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
        [tuple(value(r[c]) for c in _COLUMNS) for r in rows])
    con.commit()


def remove_db(db: str | os.PathLike[str]) -> None:
    """Removes a db file with its WAL and shared-memory files (those a killed writer leaves)."""
    for extra in ("", "-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)


def shard_pattern(db: str | os.PathLike[str]) -> re.Pattern[str]:
    """The file names of db's shards and of their workers' dbs (results.rank3.sqlite,
    results.rank3.worker1.sqlite): group 1 is the rank, group 2 the worker part or None."""
    db = Path(db)
    return re.compile(rf"{re.escape(db.stem)}\.rank(\d+)(\.worker\d+)?{re.escape(db.suffix or '.sqlite')}")


def iter_shards(db: str | os.PathLike[str]) -> Iterator[Path]:
    """The shard files of db that exist (results.rank<r>.sqlite next to results.sqlite; not the
    worker dbs of a shard), by rank."""
    db, pattern = Path(db), shard_pattern(db)
    found = {int(m[1]): p for p in db.parent.iterdir() if (m := pattern.fullmatch(p.name)) and m[2] is None}
    yield from (found[r] for r in sorted(found))
