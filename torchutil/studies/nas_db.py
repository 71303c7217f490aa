"""The results db of `nas evaluate`: one row per (index, dataset, batch, dtype, device, mode) in
the SQLite table `results`, its columns, opening it (created, or read-only for readers), reading,
writing and merging rows, the packaged sweep (`builtin:h200-auto`) and the shard files of ranks.
torchutil/studies/nas_cells.py measures the rows; nas_evaluate.py re-exports these names.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator

from torchutil._files import open_regular
# The columns (torchutil/nas/db_schema.py), re-exported.
from torchutil.nas.db_schema import CONFIG_COLUMNS, KEY_COLUMNS, METRIC_COLUMNS, SUMMARY_COLUMNS, TIMINGS
from torchutil.nas.errors import nas_error

__all__ = [
    "BUILTIN_DBS",
    "CONFIG_COLUMNS",
    "KEY_COLUMNS",
    "METRIC_COLUMNS",
    "SUMMARY_COLUMNS",
    "TIMINGS",
    "check_db",
    "connect",
    "hold_for_writing",
    "db_errors",
    "insert_rows",
    "is_builtin",
    "iter_shards",
    "merge",
    "read_rows",
    "remove_db",
    "shard_path",
    "shard_pattern",
    "worker_pattern",
]

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
        if code is not None and code & 0xFF in (_IOERR, _FULL):
            hint = _space_hint(name)
        raise nas_error(f"{name}: {e}{hint}") from e


_IOERR, _FULL = 10, 13  # SQLITE_IOERR, SQLITE_FULL: a write failed (a full disk says either)


def _space_hint(name: str) -> str:
    """What a failed write may be due to: the free space of the db's file system, when small."""
    try:
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(name))).free
    except OSError:
        return ""
    return f" (the disk holding it has {free / 1024:,.0f} KB free: is it full?)" if free < 64 << 20 else ""


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
                _refuse_unread_wal(db)
            except BaseException:
                con.close()
                raise
    raise AssertionError("unreachable")


def _refuse_unread_wal(db: str | os.PathLike[str]) -> None:
    """An error unless db can be read whole as immutable: that mode ignores the -wal file, so
    the rows committed there since the last checkpoint (what a killed `nas evaluate` leaves)
    would be silently missing."""
    wal = Path(f"{db}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        raise nas_error(f"{db} cannot be read whole here: its folder is read-only and its {wal.name} file "
                        f"({wal.stat().st_size:,} bytes) may hold committed rows, which only a -shm file lets "
                        f"sqlite read ({Path(db).name}-shm is missing); copy the db with its -wal into a writable "
                        f"folder and read it there, or copy it here with its -shm too")


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
    None means any). The db is opened read-only, and every row checked (_checked): a row that is
    not one nas evaluate writes is an error naming the db, the row and the value."""
    where = {k: v for k, v in where.items() if v is not None}
    for k in where:
        if k not in KEY_COLUMNS:
            raise nas_error(f"can filter by {', '.join(KEY_COLUMNS)}, got {k!r}")
    if is_builtin(db):
        return _checked(db, [r for r in _builtin_rows(str(db)) if all(r[k] == v for k, v in where.items())])
    con = db if isinstance(db, sqlite3.Connection) else connect(db, create=False)
    try:
        with db_errors(db):
            return _checked(db, _read(con, where))
    finally:
        if con is not db:
            con.close()


@functools.lru_cache(maxsize=1)
def _cell_archs() -> tuple[str, ...]:
    """The arch string of every cell, by index (natsbench.arch_of_index)."""
    from torchutil.nas.space import arch_of_index, num_archs

    return tuple(str(arch_of_index(i)) for i in range(num_archs()))


_SQL_TYPES = {str: "text", bytes: "a blob", float: "a real", int: "an integer", type(None): "NULL"}


def _shown(value: Any) -> str:
    """A db value for an error line: its repr (cut) and its SQLite type."""
    text = repr(value)
    return f"{text[:40]}{'...' if len(text) > 40 else ''} ({_SQL_TYPES.get(type(value), type(value).__name__)})"


def _checked(db: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` as read, once each is known to be a row nas evaluate writes: the one check of every
    reader (nas correlate, nas search, nas merge, the resumption of a sweep). An integer index
    of a cell of the space (0..15624: numpy would read -1 as the last cell), the arch of that
    cell (else its measurements join to another cell's accuracy), text and integer key columns,
    each key once (a table without its primary key doubled n in the correlations), and metrics
    that are numbers or NULL (NaN). A nas_error naming the db, the row and the value."""
    name = _db_name(db)
    archs = _cell_archs()
    seen: set[tuple[Any, ...]] = set()
    for r in rows:
        index = r["idx"]
        if type(index) is not int:
            raise nas_error(f"{name}: a row has index {_shown(index)}, not an integer; the cells of the space are "
                            f"0..{len(archs) - 1}")
        if not 0 <= index < len(archs):
            raise nas_error(f"{name}: a row has index {index}; the cells of the space are 0..{len(archs) - 1}")
        if r["arch"] != archs[index]:
            raise nas_error(f"{name}: the row of index {index} holds arch {r['arch']!r}, not that cell's "
                            f"({archs[index]}); it would join to the wrong accuracy")
        odd = next((c for c in CONFIG_COLUMNS if not (type(r[c]) is int and r[c] >= 1 if c == "batch"
                                                        else isinstance(r[c], str))), None)
        if odd is not None:
            want = "an integer >= 1" if odd == "batch" else "text"
            raise nas_error(f"{name}: the row of index {index} has {odd} {_shown(r[odd])}, not {want}")
        key = tuple(r[c] for c in KEY_COLUMNS)
        if key in seen:
            raise nas_error(f"{name}: the row of index {index} ({', '.join(map(str, key[1:]))}) is there twice; a "
                            f"results table holds each key once (is its primary key missing?)")
        seen.add(key)
        for c in METRIC_COLUMNS:
            v = r[c]
            if v is None:
                r[c] = math.nan
            elif type(v) in (int, float):
                r[c] = float(v)
            else:
                raise nas_error(f"{name}: the row of index {index} has {c} {_shown(v)}, not a number")
    return rows


def _read(con: sqlite3.Connection, where: dict[str, Any]) -> list[dict[str, Any]]:
    # A db written before a metric column existed lacks it: NULL (NaN) there, nothing altered.
    have = {row[1] for row in con.execute("PRAGMA table_info(results)")}
    if not have:  # an empty SQLite file: no table yet, no rows
        return []
    select = ", ".join(c if c in have else f"NULL AS {c}" for c in _COLUMNS)
    clause = " AND ".join(f"{k}=?" for k in where) or "1"
    cur = con.execute(f"SELECT {select} FROM results WHERE {clause} ORDER BY idx", tuple(where.values()))
    return [dict(zip(_COLUMNS, values)) for values in cur]  # checked by _checked


def merge(dst: str | os.PathLike[str], sources: Iterable[str | os.PathLike[str]]) -> int:
    """Copies every row of the `sources` dbs into `dst` (a row with the same key is replaced)
    and returns the number of rows it adds to `dst` (a replaced row is not counted again: the
    same shard merged twice adds its rows once)."""
    sources = list(sources)
    for src in sources:  # every source readable, not empty and its rows valid before anything is written
        with contextlib.closing(connect(src, create=False)) as c, db_errors(src):
            if not c.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='results'").fetchone():
                raise nas_error(f"{src} has no results table ({os.path.getsize(src):,} bytes: an empty db); there "
                                f"is nothing in it to merge")
            _checked(src, _read(c, {}))
    con = connect(dst)
    with db_errors(dst):
        before = _count(con)
    try:
        for i, src in enumerate(sources):
            alias = f"src{i}"
            with db_errors(src):
                con.execute(f"ATTACH DATABASE ? AS {alias}", (str(src),))
                try:
                    # A source written before a metric column existed gives NULL for it.
                    have = {row[1] for row in con.execute(f"PRAGMA {alias}.table_info(results)")}
                    picked = ", ".join(c if c in have else f"NULL AS {c}" for c in _COLUMNS)
                    cols = ", ".join(_COLUMNS)
                    con.execute(f"INSERT OR REPLACE INTO results ({cols}) SELECT {picked} FROM {alias}.results")
                    con.commit()
                finally:
                    con.execute(f"DETACH DATABASE {alias}")
        with db_errors(dst):
            return _count(con) - before
    finally:
        con.close()


def _count(con: sqlite3.Connection) -> int:
    return con.execute("SELECT COUNT(*) FROM results").fetchone()[0]


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


def worker_pattern(db: str | os.PathLike[str]) -> re.Pattern[str]:
    """The file names of db's worker dbs, exactly: results.worker<digits>.sqlite, ASCII digits
    only (not a user's results.worker-backup.sqlite, nor results.worker١.sqlite: `\\d` matches
    every Unicode digit)."""
    db = Path(db)
    return re.compile(rf"{re.escape(db.stem)}\.worker[0-9]+{re.escape(db.suffix or '.sqlite')}")


@contextlib.contextmanager
def hold_for_writing(db: str | os.PathLike[str]) -> Iterator[None]:
    """An exclusive flock on the db file inside the block (the file created empty if missing:
    SQLite takes an empty file as a new db; removed again if the block leaves it empty). A
    second `nas evaluate` of the same db is refused at once instead of evaluating every cell
    the first one does. SQLite's own locks are fcntl locks, which a flock does not touch, so
    readers and `nas merge` go on."""
    import fcntl

    created = not os.path.lexists(db)
    if os.path.islink(db) and not os.path.exists(db):
        raise nas_error(f"{db} is a symbolic link to a missing file ({os.readlink(db)}); give the path where the db is "
                        f"to be made")
    try:
        # A link to a db is followed (SQLite follows it too), a FIFO refused without blocking.
        with open(open_regular(db, os.O_WRONLY | os.O_APPEND | os.O_CREAT, follow=True), "ab") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise nas_error(f"{db} is being written by another nas evaluate (it holds the db's lock); wait for "
                                f"it, or share the cells with --threads, torchrun ranks or --ray instead") from None
            yield
    finally:
        if created and os.path.isfile(db) and os.path.getsize(db) == 0:
            remove_db(db)


def shard_pattern(db: str | os.PathLike[str]) -> re.Pattern[str]:
    """The file names of db's shards and of their workers' dbs (results.rank3.sqlite,
    results.rank3.worker1.sqlite): group 1 is the rank, group 2 the worker part or None."""
    db = Path(db)
    return re.compile(rf"{re.escape(db.stem)}\.rank([0-9]+)(\.worker[0-9]+)?{re.escape(db.suffix or '.sqlite')}")


def iter_shards(db: str | os.PathLike[str]) -> Iterator[Path]:
    """The shard files of db that exist (results.rank<r>.sqlite next to results.sqlite; not the
    worker dbs of a shard), by rank."""
    db, pattern = Path(db), shard_pattern(db)
    found = {int(m[1]): p for p in db.parent.iterdir() if (m := pattern.fullmatch(p.name)) and m[2] is None}
    yield from (found[r] for r in sorted(found))
