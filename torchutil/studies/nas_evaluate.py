"""The full-space sweep: utilization, throughput and cost of every NATS-Bench cell, into SQLite.

    python -m torchutil nas evaluate --db results.sqlite --dataset cifar10 --batch 256
    torchrun --nproc-per-node 8 -m torchutil nas evaluate --db results.sqlite   # sharded

One row per (index, dataset, batch, dtype, device, mode) in the table `results`; a rerun skips
the rows that are there. Under torchrun each rank takes the indices i with i % world_size ==
rank, runs on cuda:local_rank and writes its own shard `<db stem>.rank<r>.sqlite`, which rank 0
gathers into the db at the end (nas_distributed.py; `nas merge` merges shards by hand).

What one arch costs: its network, one torch.ops.util.profile call (warmup forwards, one
counted forward, `iters` timed forwards; the summary tensor only, no per-op tables, no kernel
trace unless asked), and one row in SQLite. The input and the peak FLOP/s are made once per
sweep. Building a TinyNetwork is ~340 nn.Module constructions (~20 ms of Python on a 2-core
CPU, whatever the device), more than a profile of it on a GPU, so by default a sweep builds
the network once and, per arch, only swaps the edge ops of its 15 cells from a pool of the
15 x 6 x 5 edge modules made once on the device (natsbench.NetworkPool: the same module tree
as natsbench.network(arch), with random weights). rebuild=True builds every network afresh.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import queue
import re
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from torch import nn

import torchutil
from torchutil.fields import FIELDS
from torchutil.models import DTYPES
from torchutil.nas import natsbench as nb
from torchutil.studies._common import Progress, Setup, cudnn_autotune, nas_error

__all__ = [
    "BUILTIN_DBS",
    "CONFIG_COLUMNS",
    "KEY_COLUMNS",
    "METRIC_COLUMNS",
    "STAGES",
    "EvalConfig",
    "SweepStats",
    "check_db",
    "connect",
    "db_errors",
    "default_workers",
    "evaluate_arch",
    "finished_indices",
    "gpu_lock_path",
    "insert_rows",
    "is_builtin",
    "iter_shards",
    "merge",
    "merge_workers",
    "parse_indices",
    "read_rows",
    "remove_db",
    "shard_indices",
    "shard_path",
    "shard_pattern",
    "sweep",
    "worker_path",
]


# A row's identity. `device` is the device type ("cuda", "cpu"): the shards of one sweep run on
# cuda:0..cuda:7 and are one measurement; the GPU's name is in `device_name`.
KEY_COLUMNS = ("idx", "dataset", "batch", "dtype", "device", "mode")
TIMINGS = ("auto", "cuda_graph", "eager")
# One measurement config: a row's key without the arch index.
CONFIG_COLUMNS = KEY_COLUMNS[1:]
# Copied from the profile summary (torchutil.FIELDS); kernel figures are NaN (NULL) untraced.
# cuda_graph: 1 where the forward was timed as graph replays (timing "auto" falls back to
# eager for a cell that cannot be captured); seconds_relative_ci: how tight its median is.
SUMMARY_COLUMNS = ("utilization", "matrix_utilization", "flops", "matrix_flops", "bytes",
                   "seconds", "inputs_per_second", "achieved_flops_per_second",
                   "peak_flops_per_second", "kernels_per_forward", "kernel_seconds",
                   "gpu_busy_fraction", "kernel_utilization", "bandwidth_utilization",
                   "peak_bytes_per_second", "seconds_relative_ci", "cuda_graph")
# params: trainable parameters of the network; eval_seconds: wall time of the whole
# evaluation of the arch (construction + profile), what a sweep pays per arch.
METRIC_COLUMNS = (*SUMMARY_COLUMNS, "params", "build_seconds", "eval_seconds")
_FIELD_INDEX = {name: FIELDS.index(name) for name in SUMMARY_COLUMNS}

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS results (
    idx INTEGER NOT NULL, dataset TEXT NOT NULL, batch INTEGER NOT NULL, dtype TEXT NOT NULL,
    device TEXT NOT NULL, mode TEXT NOT NULL, arch TEXT NOT NULL, device_name TEXT,
    {", ".join(f"{c} REAL" for c in METRIC_COLUMNS)},
    PRIMARY KEY ({", ".join(KEY_COLUMNS)})
)"""
_COLUMNS = (*KEY_COLUMNS, "arch", "device_name", *METRIC_COLUMNS)


@dataclass(frozen=True)
class EvalConfig:
    """What one sweep measures. timing is "auto" (CUDA-graph replays where the cell captures,
    else eager: the repeatable default), "cuda_graph" or "eager"; it is the rows' `mode`.
    trace=False skips CUPTI (the kernel columns are then NULL) and is the fast default for a
    full-space sweep."""

    dataset: str = "cifar10"
    batch: int = 256
    dtype: str = "float32"
    device: str = "cpu"
    warmup: int = 1
    iters: int = 3
    timing: str = "auto"
    trace: bool = False
    channels_last: bool = False

    def __post_init__(self) -> None:
        nb.input_shape(self.dataset)  # checks the name
        if self.dtype not in DTYPES:
            raise nas_error(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.timing not in TIMINGS:
            raise nas_error(f"timing must be one of {', '.join(TIMINGS)}, got {self.timing!r}")
        if self.batch < 1 or self.iters < 1 or self.warmup < 0:
            raise nas_error(f"need batch >= 1, iters >= 1, warmup >= 0; got {self.batch}, {self.iters}, {self.warmup}")

    @property
    def mode(self) -> str:
        return self.timing

    @property
    def device_type(self) -> str:
        return torch.device(self.device).type

    def key(self, index: int) -> tuple[Any, ...]:
        return (index, self.dataset, self.batch, self.dtype, self.device_type, self.mode)


def parse_indices(text: str | None) -> list[int]:
    """'0:100' (START:STOP, STOP excluded; either may be left out), '5' or '1,7,9:12' ->
    indices; None -> the whole space. Nothing is clipped or counted from the end: an index
    outside [0, 15625), an empty or reversed range and a step are errors."""
    n = nb.num_archs()
    if text is None:
        return list(range(n))
    out: list[int] = []

    def index(word: str, default: int) -> int:
        if not word.strip():
            return default
        try:
            i = int(word)
        except ValueError:
            raise nas_error(f"{word!r} in {text!r} is not an index") from None
        if not 0 <= i <= n:  # n itself only as a range's stop (checked below)
            raise nas_error(f"index {i} in {text!r} is outside the space's 0..{n - 1}")
        return i

    for part in text.split(","):
        if part.count(":") > 1:
            raise nas_error(f"{part!r} in {text!r}: ranges are START:STOP, without a step")
        if ":" in part:
            lo_text, _, hi_text = part.partition(":")
            lo, hi = index(lo_text, 0), index(hi_text, n)
            if lo >= hi:
                raise nas_error(f"range {part!r} in {text!r} is empty (START:STOP takes START <= i < STOP)")
            out.extend(range(lo, hi))
        else:
            if not part.strip():
                raise nas_error(f"an empty index in {text!r}")
            i = index(part, 0)
            if i == n:
                raise nas_error(f"index {i} in {text!r} is outside the space's 0..{n - 1}")
            out.append(i)
    return list(dict.fromkeys(out))


def shard_indices(indices: Sequence[int], rank: int, world_size: int) -> list[int]:
    """The indices rank `rank` of `world_size` evaluates: those with i % world_size == rank."""
    if not 0 <= rank < world_size:
        raise nas_error(f"rank must be in [0, world_size={world_size}), got {rank}")
    return [i for i in indices if i % world_size == rank]


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


def finished_indices(con: sqlite3.Connection, config: EvalConfig) -> set[int]:
    """Indices already measured with this config."""
    _, *key = config.key(0)
    rows = con.execute(
        "SELECT idx FROM results WHERE dataset=? AND batch=? AND dtype=? AND device=? AND mode=?", key)
    return {r[0] for r in rows}


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
                    cols = ", ".join(_COLUMNS)
                    cur = con.execute(f"INSERT OR REPLACE INTO results ({cols}) SELECT {cols} FROM {alias}.results")
                    copied += cur.rowcount
                    con.commit()
                finally:
                    con.execute(f"DETACH DATABASE {alias}")
    finally:
        con.close()
    return copied


def _setup(config: EvalConfig, device: torch.device) -> Setup:
    return Setup.on(device, DTYPES[config.dtype], config.channels_last)


def _make_input(config: EvalConfig, device: torch.device) -> torch.Tensor:
    return _setup(config, device).input(*nb.input_shape(config.dataset, config.batch))


def _build(index: int, config: EvalConfig, device: torch.device) -> nn.Module:
    # Parameters are created (and initialized) on the device: no host copy per arch.
    with device:
        model = nb.network(index, config.dataset)
    return _setup(config, device).model(model)


# The C++ phases of a profile call (its phase_* summary fields) that a sweep reports.
_PHASES = ("warmup", "count", "capture", "trace", "time", "wait", "assemble")
STAGES = ("build", *_PHASES, "call_overhead", "write", "other")
_PHASE_INDEX = {p: FIELDS.index(f"phase_{p}_seconds") for p in _PHASES}
_CALL_INDEX = FIELDS.index("call_seconds")


def evaluate_arch(index: int, config: EvalConfig, x: torch.Tensor, peak_flops: float | None = None,
                  device: torch.device | None = None, pool: nb.NetworkPool | None = None,
                  gpu_lock: str | None = None, stages: dict[str, float] | None = None) -> dict[str, Any]:
    """Profiles the network of arch `index` on x (taken from `pool`, else built afresh on the
    device): one result row. gpu_lock: the lock file of processes sharing the GPU (see
    torchutil.profile). stages, when given, gets the seconds of each of STAGES added."""
    device = torch.device(config.device) if device is None else device
    t0 = time.perf_counter()
    model = pool.get(index) if pool is not None else _build(index, config, device)
    params = sum(p.numel() for p in model.parameters())
    t1 = time.perf_counter()
    summary = torch.ops.util.profile(model, x, warmup=config.warmup, iters=config.iters,
                                     timing=config.timing, peak_flops=peak_flops,
                                     trace=config.trace, gpu_lock=gpu_lock).tolist()
    t2 = time.perf_counter()
    row: dict[str, Any] = dict(zip(KEY_COLUMNS, config.key(index)))
    row["arch"] = str(nb.arch_of_index(index))
    row["device_name"] = _device_name(device)
    for c, i in _FIELD_INDEX.items():
        row[c] = summary[i]
    row["params"] = float(params)
    row["build_seconds"] = t1 - t0
    row["eval_seconds"] = t2 - t0
    if stages is not None:
        stages["build"] += t1 - t0
        for phase, i in _PHASE_INDEX.items():
            stages[phase] += summary[i]
        stages["call_overhead"] += (t2 - t1) - summary[_CALL_INDEX]
    return row


@functools.lru_cache(maxsize=None)
def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def insert_rows(con: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
    """Writes result rows (dicts with every column; NaN -> NULL), replacing equal keys, and commits."""
    def value(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v

    con.executemany(
        f"INSERT OR REPLACE INTO results ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
        [tuple(value(r[c]) for c in _COLUMNS) for r in rows])
    con.commit()


@dataclass
class SweepStats:
    """What a sweep did. seconds_per_arch: wall time per evaluated arch (construction, profile
    and the db write); projected_full_space_seconds: that times 15,625 / world_size; stages:
    where an arch's time went (seconds per arch for each of STAGES, summed over the workers, so
    with several workers they add up to about workers x seconds_per_arch)."""

    evaluated: int
    skipped: int
    seconds: float
    seconds_per_arch: float
    build_seconds_per_arch: float
    projected_full_space_seconds: float
    world_size: int = 1
    rank: int = 0
    workers: int = 1
    stages: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def stage_line(self) -> str:
        """Where an arch's time goes, for people: "build 0.4 ms, count 0.0 ms, ...". """
        parts = [f"{name} {1e3 * self.stages[name]:.2f}" for name in STAGES if name in self.stages]
        who = f" (per worker; {self.workers} workers share the GPU through gpu_lock)" if self.workers > 1 else ""
        return "ms per arch: " + ", ".join(parts) + who


def default_workers(device: torch.device | str, ranks_on_host: int = 1) -> int:
    """Processes a sweep runs on one device: on CUDA half the host's cores shared by the
    `ranks_on_host` ranks (one per GPU) of this host, at most 8 a GPU (each builds and captures
    its cells on the host while one of them at a time replays on the GPU); elsewhere 1 (CPU
    timings would share the cores they measure)."""
    if torch.device(device).type != "cuda":
        return 1
    return max(1, min(8, (os.cpu_count() or 2) // 2 // max(ranks_on_host, 1)))


def gpu_lock_path(device: torch.device) -> str:
    """The lock file of one physical GPU (by its UUID) in the temp folder: every torchutil sweep
    on the GPU, in any process, takes turns through it."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", device.index))
    return os.path.join(tempfile.gettempdir(), f"torchutil-gpu-{uuid}.lock")


def worker_path(db: str | os.PathLike[str], worker: int) -> Path:
    """results.sqlite -> results.worker3.sqlite: a worker's own db, merged into db at the end."""
    db = Path(db)
    return db.with_name(f"{db.stem}.worker{worker}{db.suffix or '.sqlite'}")


def merge_workers(db: str | os.PathLike[str]) -> None:
    """Merges the worker dbs of an earlier run (a kill leaves them) into db, then removes them."""
    db = Path(db)
    shards = sorted(db.parent.glob(f"{db.stem}.worker*{db.suffix or '.sqlite'}"))
    if shards:
        merge(db, shards)
        for shard in shards:
            remove_db(shard)


def remove_db(db: str | os.PathLike[str]) -> None:
    """Removes a db file with its WAL and shared-memory files (those a killed writer leaves)."""
    for extra in ("", "-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)


def sweep(config: EvalConfig, indices: Sequence[int], db: str | os.PathLike[str], *,
          rank: int = 0, world_size: int = 1, commit_every: int = 1,
          cudnn_benchmark: bool = False, progress: bool = True, rebuild: bool = False,
          skip: Iterable[int] = (), workers: int = 1) -> SweepStats:
    """Evaluates `indices` (this rank's share of them) with `config` into `db`, skipping rows
    that are already there (and the indices in `skip`), committing every `commit_every` archs
    (default 1: a kill loses at most the arch in flight in each worker; WAL mode keeps a commit
    cheap) and saying on stderr what it resumes. rebuild: build every network afresh instead
    of swapping edge ops in one (nb.NetworkPool). workers > 1 (CUDA): that many processes
    evaluate the cells, each building and capturing its own on the host while the GPU replays
    another's; the GPU phases take turns through one lock per GPU (gpu_lock_path), so every
    timed forward has the GPU to itself."""
    device = torch.device(config.device)
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        config = EvalConfig(**{**asdict(config), "device": str(device)})
    if workers < 1:
        raise nas_error(f"workers must be >= 1, got {workers}")
    mine = shard_indices(indices, rank, world_size)
    with db_errors(db):
        merge_workers(db)
    with contextlib.closing(connect(db)) as con:
        with db_errors(db):
            done = finished_indices(con, config) | set(skip)
    todo = [i for i in mine if i not in done]
    if todo and len(todo) < len(mine):
        sys.stderr.write(f"nas evaluate: resuming {db}: {len(mine) - len(todo):,} of these {len(mine):,} cells "
                         f"are measured already; evaluating the other {len(todo):,}, from cell {todo[0]}\n")
    workers = min(workers, max(len(todo), 1))
    desc = f"nas evaluate rank {rank}" if world_size > 1 else "nas evaluate"
    bar = Progress(len(todo), desc, "arch", enabled=progress, every=10.0)
    t0 = time.perf_counter()
    options = dict(commit_every=commit_every, cudnn_benchmark=cudnn_benchmark, rebuild=rebuild)
    if workers > 1:
        if device.type == "cpu":
            raise nas_error(f"workers > 1 needs a CUDA device (CPU timings would share the cores they measure), "
                            f"got {device}")
        evaluated, stages = _run_workers(config, todo, db, workers, options, bar)
    else:
        stages = dict.fromkeys(STAGES, 0.0)
        evaluated = _evaluate_cells(config, todo, db, options, None, bar.update, stages)
    seconds = time.perf_counter() - t0
    bar.close()
    per_arch = seconds / evaluated if evaluated else math.nan
    return SweepStats(
        evaluated=evaluated, skipped=len(mine) - len(todo), seconds=seconds, seconds_per_arch=per_arch,
        build_seconds_per_arch=stages["build"] / evaluated if evaluated else math.nan,
        projected_full_space_seconds=per_arch * nb.num_archs() / world_size,
        world_size=world_size, rank=rank, workers=workers,
        stages={k: v / evaluated for k, v in stages.items()} if evaluated else {})


def _evaluate_cells(config: EvalConfig, todo: Sequence[int], db: str | os.PathLike[str], options: dict[str, Any],
                    gpu_lock: str | None, done: Callable[[], None], stages: dict[str, float]) -> int:
    """Evaluates the cells `todo` into db in this process; done() after each committed cell."""
    device = torch.device(config.device)
    with contextlib.closing(connect(db)) as con, cudnn_autotune(options["cudnn_benchmark"]):
        with _holding(gpu_lock):  # the set-up runs kernels too (random weights)
            x = _make_input(config, device)
            pool = None
            if todo and not options["rebuild"]:
                pool = nb.NetworkPool(config.dataset, device, DTYPES[config.dtype], config.channels_last)
            peak = None
            if device.type != "meta":
                peak, _ = torchutil.peak_flops(device, DTYPES[config.dtype])  # once, not per arch
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        pending: list[dict[str, Any]] = []
        for n, i in enumerate(todo):
            if device.type == "cuda" and gpu_lock is not None and n % _EMPTY_CACHE_EVERY == _EMPTY_CACHE_EVERY - 1:
                # Each destroyed graph's private pool stays in this process's allocator cache;
                # with several processes on one GPU, give it back before it crowds the others.
                torch.cuda.empty_cache()
            t0 = time.perf_counter()
            row = evaluate_arch(i, config, x, peak, device, pool, gpu_lock, stages)
            pending.append(row)
            t1 = time.perf_counter()
            if len(pending) >= options["commit_every"]:
                with db_errors(db):
                    insert_rows(con, pending)
                pending.clear()
            t2 = time.perf_counter()
            stages["write"] += t2 - t1
            stages["other"] += (t1 - t0) - row["eval_seconds"]
            done()
        if pending:
            with db_errors(db):
                insert_rows(con, pending)
    return len(todo)


# Cells between two frees of a worker's allocator cache (each capture leaves a graph pool there).
_EMPTY_CACHE_EVERY = 256


@contextlib.contextmanager
def _holding(lock_file: str | None) -> Iterator[None]:
    """The GPU lock (the file gpu_lock names, which torchutil's C++ flocks too) inside the block."""
    if lock_file is None:
        yield
        return
    import fcntl

    with open(lock_file, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _worker(k: int, config: dict[str, Any], todo: list[int], db: str, options: dict[str, Any], lock: str | None,
            counter: Any, results: Any) -> None:
    """One worker process: its cells into its own db; (k, error text or None, stages) at the end.
    Stops at the next cell once its parent is gone (killed), so no orphan sweeps on."""
    parent = os.getppid()
    stages = dict.fromkeys(STAGES, 0.0)

    def done() -> None:
        with counter.get_lock():
            counter.value += 1
        if os.getppid() != parent:
            raise SystemExit(f"nas evaluate worker {k}: the sweep's process is gone")

    try:
        device = torch.device(config["device"])
        if device.type == "cuda":
            torch.cuda.set_device(device)
            # A share of the GPU's memory each, so that one worker's cached graph pools cannot
            # starve another's capture (a full share frees its cache and captures again).
            torch.cuda.set_per_process_memory_fraction(0.9 / options["workers"])
        _evaluate_cells(EvalConfig(**config), todo, worker_path(db, k), options, lock, done, stages)
        results.put((k, None, stages))
    except BaseException as e:  # reported to the parent, which names the worker
        results.put((k, f"{type(e).__name__}: {e}", stages))


def _run_workers(config: EvalConfig, todo: Sequence[int], db: str | os.PathLike[str], workers: int,
                 options: dict[str, Any], bar: Progress) -> tuple[int, dict[str, float]]:
    """Evaluates todo over `workers` spawned processes (cells dealt round-robin) sharing the GPU
    through its lock file; merges their dbs into db. A worker's error stops the others and is
    raised naming the worker; what was committed is kept either way."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    counter, results = ctx.Value("q", 0), ctx.Queue()
    device = torch.device(config.device)
    lock = gpu_lock_path(device) if device.type == "cuda" else None
    options = {**options, "workers": workers}
    procs = [ctx.Process(target=_worker, name=f"nas-evaluate-worker{k}", daemon=True,
                         args=(k, asdict(config), list(todo[k::workers]), str(db), options, lock, counter, results))
             for k in range(workers)]
    stages = dict.fromkeys(STAGES, 0.0)
    errors: list[str] = []
    finished = 0
    try:
        for p in procs:
            p.start()
        while finished < workers:
            try:
                k, error, worker_stages = results.get(timeout=0.5)
            except queue.Empty:
                if not all(p.is_alive() or p.exitcode == 0 for p in procs):
                    dead = [p.name for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
                    errors.append(f"{', '.join(dead)} died (exit code "
                                  f"{', '.join(str(p.exitcode) for p in procs if p.name in dead)})")
                    break
            else:
                finished += 1
                for name, v in worker_stages.items():
                    stages[name] += v
                if error is not None:
                    errors.append(f"worker {k}: {error}")
                    break
            while bar.done < counter.value:
                bar.update()
    finally:
        for p in procs:
            if p.is_alive() and (errors or finished < workers):
                p.terminate()
            p.join(timeout=30)
        with db_errors(db):
            merge_workers(db)
    while bar.done < counter.value:
        bar.update()
    if errors:
        raise nas_error("a sweep worker failed, the others were stopped (committed cells are kept; a rerun "
                        "resumes): " + "; ".join(errors))
    return counter.value, stages


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
