"""One NATS-Bench cell's measurement and what every way of running a sweep shares: the sweep's
config (EvalConfig), one cell's profile into a result row (evaluate_arch), a process's loop over
its cells into a db (evaluate_cells), the GPU's lock file and the worker dbs.

nas_evaluate.sweep runs the cells in this process or hands them to nas_parallel's threads or
worker processes; both import from here, neither from the other.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn

import torchutil
from torchutil._ops import OPTION_DEFAULTS, check_choice
from torchutil.fields import FIELDS
from torchutil.models import DTYPES
from torchutil.nas import natsbench as nb
from torchutil.studies._common import NAS, Setup, cudnn_autotune, nas_error
from torchutil.studies.nas_db import (KEY_COLUMNS, SUMMARY_COLUMNS, TIMINGS, connect, db_errors, insert_rows, merge,
                                      remove_db, worker_pattern)

__all__ = [
    "EMPTY_CACHE_EVERY",
    "STAGES",
    "EvalConfig",
    "device_name",
    "diagnostic",
    "evaluate_arch",
    "evaluate_cells",
    "gpu_lock_path",
    "holding",
    "make_input",
    "merge_workers",
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
    energy_window: float = OPTION_DEFAULTS["energy_window"]
    energy_windows: int = OPTION_DEFAULTS["energy_windows"]

    def __post_init__(self) -> None:
        nb.input_shape(self.dataset)  # checks the name
        check_choice("dtype", self.dtype, DTYPES, NAS)
        check_choice("timing", self.timing, TIMINGS, NAS)
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


def _setup(config: EvalConfig, device: torch.device) -> Setup:
    return Setup.on(device, DTYPES[config.dtype], config.channels_last)


def make_input(config: EvalConfig, device: torch.device) -> torch.Tensor:
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
_SUMMARY_INDEX = {name: FIELDS.index(name) for name in SUMMARY_COLUMNS}  # a row's columns in the summary


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
                   trace=config.trace, gpu_lock=gpu_lock, energy=config.energy, energy_window=config.energy_window,
                   energy_windows=config.energy_windows)
    # With energy, the full result: where none was measured, its text says why.
    result = torchutil.profile(model, x, module_paths=False, **options) if config.energy else None
    if result is not None and not result.joules > 0:
        raise nas_error(f"nas evaluate --energy: cell {index} measured no energy: {result.energy_source}")
    summary = (result.summary if result is not None else torch.ops.util.profile(model, x, **options)).tolist()
    t2 = time.perf_counter()
    row: dict[str, Any] = dict(zip(KEY_COLUMNS, config.key(index)))
    row["arch"] = str(nb.arch_of_index(index))
    row["device_name"] = device_name(device)
    for c, i in _SUMMARY_INDEX.items():
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
def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def gpu_lock_path(device: torch.device) -> str:
    """The lock file of one physical GPU, torchutil.default_gpu_lock (a private file per GPU
    UUID in the user's own folder): every torchutil process on the GPU takes turns through it."""
    return torchutil.default_gpu_lock(device)


def worker_path(db: str | os.PathLike[str], worker: int) -> Path:
    """results.sqlite -> results.worker3.sqlite: a worker's own db, merged into db at the end."""
    db = Path(db)
    return db.with_name(f"{db.stem}.worker{worker}{db.suffix or '.sqlite'}")


def merge_workers(db: str | os.PathLike[str]) -> None:
    """Merges the worker dbs (worker_path's names, exactly; a kill leaves them) into db, then
    removes them, saying so on stderr."""
    db, pattern = Path(db), worker_pattern(db)
    shards = sorted(p for p in db.parent.iterdir() if pattern.fullmatch(p.name)) if db.parent.is_dir() else []
    if shards:
        added = merge(db, shards)
        for shard in shards:
            remove_db(shard)
        sys.stderr.write(f"nas evaluate: merged the worker dbs {', '.join(p.name for p in shards)} into {db} "
                         f"({added:,} new rows) and removed them\n")


def evaluate_cells(config: EvalConfig, todo: Sequence[int], db: str | os.PathLike[str], options: dict[str, Any],
                    gpu_lock: str | None, done: Callable[[], None], stages: dict[str, float]) -> int:
    """Evaluates the cells `todo` into db in this process; done() after each committed cell."""
    device = torch.device(config.device)
    start = time.perf_counter()
    with contextlib.closing(connect(db)) as con, cudnn_autotune(options["cudnn_benchmark"]):
        with holding(gpu_lock):  # the set-up runs kernels too (random weights)
            x = make_input(config, device)
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
            if device.type == "cuda" and gpu_lock is not None and n % EMPTY_CACHE_EVERY == EMPTY_CACHE_EVERY - 1:
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
EMPTY_CACHE_EVERY = 256


def diagnostic(name: str) -> bool:
    """A diagnostic switch of benchmarks/gpu/run_gpu.sh sweepiso (why eight workers time cells faster
    than one): TORCHUTIL_SWEEP_SPAWN=1 evaluates even one worker's cells in a spawned worker
    process; TORCHUTIL_SWEEP_NO_MEMORY_FRACTION=1 leaves the workers' memory unbounded;
    TORCHUTIL_SWEEP_NO_THREAD_WARMUP=1 skips the eager forward each sweep thread runs before its
    first capture (nas_parallel.run_threads)."""
    return os.environ.get(name) == "1"


@contextlib.contextmanager
def holding(lock_file: str | None) -> Iterator[None]:
    """The GPU lock (the file gpu_lock names, which torchutil's C++ flocks too) inside the block."""
    if lock_file is None:
        yield
        return
    import fcntl

    # As torchutil's C++ opens it: never through a symbolic link; a file made here is 0600.
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
