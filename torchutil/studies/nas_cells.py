"""What every way of running the `nas evaluate` sweep shares beside one cell's measurement
(torchutil.nas.cells, re-exported here): a process's loop over its cells into a db
(evaluate_cells), the GPU's lock file and the worker dbs.

nas_evaluate.sweep runs the cells in this process or hands them to nas_parallel's threads or
worker processes; both import from here, neither from the other.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

import torchutil
from torchutil.models import DTYPES
from torchutil.nas import natsbench as nb
# One cell's measurement, re-exported (the library's torchutil.nas.cells).
from torchutil.nas.cells import (EMPTY_CACHE_EVERY, STAGES, EvalConfig, device_name, evaluate_arch, holding,
                                 make_input)
from torchutil.studies._common import cudnn_autotune
from torchutil.studies.nas_db import connect, db_errors, insert_rows, merge, remove_db, worker_pattern

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


def diagnostic(name: str) -> bool:
    """A diagnostic switch of benchmarks/gpu/run_gpu.sh sweepiso (why eight workers time cells faster
    than one): TORCHUTIL_SWEEP_SPAWN=1 evaluates even one worker's cells in a spawned worker
    process; TORCHUTIL_SWEEP_NO_MEMORY_FRACTION=1 leaves the workers' memory unbounded;
    TORCHUTIL_SWEEP_NO_THREAD_WARMUP=1 skips the eager forward each sweep thread runs before its
    first capture (nas_parallel.run_threads)."""
    return os.environ.get(name) == "1"


