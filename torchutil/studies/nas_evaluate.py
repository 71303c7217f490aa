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
# The results db, re-exported: its columns, opening, reading, writing, merging (nas_db.py).
from torchutil.studies.nas_db import (BUILTIN, BUILTIN_DBS, CONFIG_COLUMNS, KEY_COLUMNS, METRIC_COLUMNS,  # noqa: F401
                                      SUMMARY_COLUMNS, TIMINGS, _COLUMNS, _FIELD_INDEX, _NOT_A_DB, _builtin_rows,
                                      _db_name, _open_readonly, _read, check_db, connect, db_errors, insert_rows,
                                      is_builtin, iter_shards, merge, read_rows, remove_db, shard_path, shard_pattern)

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
    "default_threads",
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
    energy: bool = False  # joules per forward of every cell (torchutil.profile's energy=)
    energy_window: float = 0.5

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


def finished_indices(con: sqlite3.Connection, config: EvalConfig) -> set[int]:
    """Indices already measured with this config (with energy, those with joules)."""
    _, *key = config.key(0)
    rows = con.execute(
        "SELECT idx FROM results WHERE dataset=? AND batch=? AND dtype=? AND device=? AND mode=?"
        + (" AND joules IS NOT NULL" if config.energy else ""), key)
    return {r[0] for r in rows}


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
# setup: what runs before the first cell (the input, the peak's measurement, the network pools,
# a thread's warm-up forward), in every worker or thread while it runs (threads wait for it).
STAGES = ("setup", "build", *_PHASES, "call_overhead", "write", "other")
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
    params = pool.params(index) if pool is not None else sum(p.numel() for p in model.parameters())
    t1 = time.perf_counter()
    options = dict(warmup=config.warmup, iters=config.iters, timing=config.timing, peak_flops=peak_flops,
                   trace=config.trace, gpu_lock=gpu_lock, energy=config.energy, energy_window=config.energy_window)
    # With energy, the full result: where none was measured, its text says why.
    result = torchutil.profile(model, x, module_paths=False, **options) if config.energy else None
    if result is not None and not result.joules > 0:
        raise nas_error(f"nas evaluate --energy: cell {index} measured no energy: {result.energy_source}")
    summary = (result.summary if result is not None else torch.ops.util.profile(model, x, **options)).tolist()
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


@dataclass
class SweepStats:
    """What a sweep did. seconds_per_arch: wall time per evaluated arch (construction, profile
    and the db write); projected_full_space_seconds: that times 15,625 / world_size; stages:
    where an arch's time went (seconds per arch for each of STAGES, summed over the workers or
    threads, so with several they add up to about workers (threads) x seconds_per_arch)."""

    evaluated: int
    skipped: int
    seconds: float
    seconds_per_arch: float
    build_seconds_per_arch: float
    projected_full_space_seconds: float
    world_size: int = 1
    rank: int = 0
    workers: int = 1
    threads: int = 1
    stages: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def stage_line(self) -> str:
        """Where an arch's time goes, for people: "build 0.4 ms, count 0.0 ms, ...". """
        parts = [f"{name} {1e3 * self.stages[name]:.2f}" for name in STAGES if name in self.stages]
        who = ""
        if self.workers > 1:
            who = f" (per worker; {self.workers} workers share the GPU through gpu_lock)"
        elif self.threads > 1:
            who = f" (per thread; {self.threads} threads of one process share the GPU through gpu_lock)"
        return "ms per arch: " + ", ".join(parts) + who


def default_threads(device: torch.device | str, ranks_on_host: int = 1) -> int:
    """Threads a sweep runs on one device by default (nas_parallel.run_threads): on CUDA half the
    host's cores shared by the `ranks_on_host` ranks (one per GPU) of this host, at most 4 a GPU
    (each builds and captures its cells on the host while one of them at a time replays on the
    GPU; their Python forwards take turns at the GIL: on an H200 four ran the space in 2.9
    minutes, and on cells 0-999 three and six were slower than four); elsewhere 1 (CPU timings
    would share the cores they measure)."""
    if torch.device(device).type != "cuda":
        return 1
    return max(1, min(4, (os.cpu_count() or 2) // 2 // max(ranks_on_host, 1)))


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


def sweep(config: EvalConfig, indices: Sequence[int], db: str | os.PathLike[str], *,
          rank: int = 0, world_size: int = 1, commit_every: int = 1,
          cudnn_benchmark: bool = False, progress: bool = True, rebuild: bool = False,
          skip: Iterable[int] = (), workers: int = 1, threads: int = 1) -> SweepStats:
    """Evaluates `indices` (this rank's share of them) with `config` into `db`, skipping rows
    that are already there (and the indices in `skip`), committing every `commit_every` archs
    (default 1: a kill loses at most the arch in flight in each worker; WAL mode keeps a commit
    cheap) and saying on stderr what it resumes. rebuild: build every network afresh instead
    of swapping edge ops in one (nb.NetworkPool). workers > 1 (CUDA): that many processes
    evaluate the cells, each building and capturing its own on the host while the GPU replays
    another's; the GPU phases take turns through one lock per GPU (gpu_lock_path), so every
    timed forward has the GPU to itself, but each worker is a CUDA context of its own, and an H200
    times a cell ~5 % faster beside another context. threads > 1 (CUDA, one worker; the CLI's
    default, default_threads): that many threads of this process share the GPU the same way in
    its one context (nas_parallel.py), so that the cells measure as in a one-thread sweep."""
    device = torch.device(config.device)
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        config = EvalConfig(**{**asdict(config), "device": str(device)})
    if workers < 1 or threads < 1:
        raise nas_error(f"workers and threads must be >= 1, got workers={workers}, threads={threads}")
    if workers > 1 and threads > 1:
        raise nas_error(f"workers > 1 and threads > 1 do not combine (got workers={workers}, threads={threads}): "
                        "worker processes are contexts of their own, threads share one")
    if threads > 1 and device.type == "cpu":
        raise nas_error(f"threads > 1 needs a CUDA device (CPU timings would share the cores they measure), "
                        f"got {device}")
    if threads > 1 and (rebuild or config.trace):
        # rebuild draws random weights per cell, beside other threads' captures; CUPTI's
        # activity records are the process's, so two threads' traces would mix.
        raise nas_error(f"threads > 1 does not combine with {'rebuild' if rebuild else 'trace'} "
                        f"(got threads={threads})")
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
    threads = min(threads, max(len(todo), 1))
    desc = f"nas evaluate rank {rank}" if world_size > 1 else "nas evaluate"
    bar = Progress(len(todo), desc, "arch", enabled=progress, every=10.0)
    t0 = time.perf_counter()
    options = dict(commit_every=commit_every, cudnn_benchmark=cudnn_benchmark, rebuild=rebuild)
    if workers > 1 or (_diagnostic("TORCHUTIL_SWEEP_SPAWN") and device.type == "cuda"):
        if device.type == "cpu":
            raise nas_error(f"workers > 1 needs a CUDA device (CPU timings would share the cores they measure), "
                            f"got {device}")
        from torchutil.studies.nas_parallel import run_workers

        evaluated, stages = run_workers(config, todo, db, workers, options, bar)
    elif threads > 1:
        from torchutil.studies.nas_parallel import run_threads

        lock = gpu_lock_path(device) if device.type == "cuda" else None
        evaluated, stages = run_threads(config, todo, db, threads, options, lock, bar)
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
        world_size=world_size, rank=rank, workers=workers, threads=threads,
        stages={k: v / evaluated for k, v in stages.items()} if evaluated else {})


def _evaluate_cells(config: EvalConfig, todo: Sequence[int], db: str | os.PathLike[str], options: dict[str, Any],
                    gpu_lock: str | None, done: Callable[[], None], stages: dict[str, float]) -> int:
    """Evaluates the cells `todo` into db in this process; done() after each committed cell."""
    device = torch.device(config.device)
    start = time.perf_counter()
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
        stages["setup"] += time.perf_counter() - start
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


def _diagnostic(name: str) -> bool:
    """A diagnostic switch of benchmarks/run_gpu.sh sweepiso (why eight workers time cells faster
    than one): TORCHUTIL_SWEEP_SPAWN=1 evaluates even one worker's cells in a spawned worker
    process; TORCHUTIL_SWEEP_NO_MEMORY_FRACTION=1 leaves the workers' memory unbounded;
    TORCHUTIL_SWEEP_NO_THREAD_WARMUP=1 skips the eager forward each sweep thread runs before its
    first capture (nas_parallel.run_threads)."""
    return os.environ.get(name) == "1"


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
