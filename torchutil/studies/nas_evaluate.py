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
import math
import os
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

import torch

from torchutil.nas import natsbench as nb
from torchutil.nas.cells import default_threads
from torchutil.studies._common import Progress, nas_error
# One cell's measurement and the config, re-exported (nas_cells.py).
from torchutil.studies.nas_cells import (STAGES, EvalConfig, evaluate_arch, evaluate_cells,
                                         gpu_lock_path, merge_workers, worker_path)
# The results db, re-exported: its columns, opening, reading, writing, merging (nas_db.py).
from torchutil.studies.nas_db import (BUILTIN, BUILTIN_DBS, CONFIG_COLUMNS, KEY_COLUMNS, METRIC_COLUMNS,  # noqa: F401
                                      SUMMARY_COLUMNS, TIMINGS, check_db, connect, db_errors, insert_rows,
                                      is_builtin, iter_shards, merge, read_rows, remove_db, shard_path, shard_pattern)
from torchutil.studies.nas_parallel import run_threads

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



@dataclass
class SweepStats:
    """What a sweep did. seconds_per_arch: wall time per evaluated arch (construction, profile
    and the db write); projected_full_space_seconds: that times 15,625 / world_size; stages:
    where an arch's time went (seconds per arch for each of STAGES, summed over the threads, so
    with several they add up to about threads x seconds_per_arch)."""

    evaluated: int
    skipped: int
    seconds: float
    seconds_per_arch: float
    build_seconds_per_arch: float
    projected_full_space_seconds: float
    world_size: int = 1
    rank: int = 0
    threads: int = 1
    stages: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def stage_line(self) -> str:
        """Where an arch's time goes, for people: "build 0.4 ms, count 0.0 ms, ...". """
        parts = [f"{name} {1e3 * self.stages[name]:.2f}" for name in STAGES if name in self.stages]
        who = ""
        if self.threads > 1:
            who = f" (per thread; {self.threads} threads of one process share the GPU through gpu_lock)"
        return "ms per arch: " + ", ".join(parts) + who


def sweep(config: EvalConfig, indices: Sequence[int], db: str | os.PathLike[str], *,
          rank: int = 0, world_size: int = 1, commit_every: int = 1,
          cudnn_benchmark: bool = False, progress: bool = True, rebuild: bool = False,
          skip: Iterable[int] = (), threads: int = 1) -> SweepStats:
    """Evaluates `indices` (this rank's share of them) with `config` into `db`, skipping rows
    that are already there (and the indices in `skip`), committing every `commit_every` archs
    (default 1: a kill loses at most the arch in flight in each thread; WAL mode keeps a commit
    cheap) and saying on stderr what it resumes. rebuild: build every network afresh instead
    of swapping edge ops in one (nb.NetworkPool). threads > 1 (CUDA; the CLI's default,
    default_threads): that many threads of this process evaluate the cells, each building and
    capturing its own on the host while another replays on the GPU under the GPU's lock file
    (gpu_lock_path), in the process's one CUDA context (nas_parallel.py), so that the cells
    measure as in a one-thread sweep. Several processes on one GPU would be contexts of their
    own, which an H200 times ~5 % faster whatever lock they share (torchutil.gpu_sharing)."""
    device = torch.device(config.device)
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        config = EvalConfig(**{**asdict(config), "device": str(device)})
    if threads < 1:
        raise nas_error(f"threads must be >= 1, got {threads}")
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
    threads = min(threads, max(len(todo), 1))
    desc = f"nas evaluate rank {rank}" if world_size > 1 else "nas evaluate"
    bar = Progress(len(todo), desc, "arch", enabled=progress, every=10.0)
    t0 = time.perf_counter()
    options = dict(commit_every=commit_every, cudnn_benchmark=cudnn_benchmark, rebuild=rebuild)
    if threads > 1:
        lock = gpu_lock_path(device) if device.type == "cuda" else None
        evaluated, stages = run_threads(config, todo, db, threads, options, lock, bar)
    else:
        stages = dict.fromkeys(STAGES, 0.0)
        evaluated = evaluate_cells(config, todo, db, options, None, bar.update, stages)
    seconds = time.perf_counter() - t0
    bar.close()
    per_arch = seconds / evaluated if evaluated else math.nan
    return SweepStats(
        evaluated=evaluated, skipped=len(mine) - len(todo), seconds=seconds, seconds_per_arch=per_arch,
        build_seconds_per_arch=stages["build"] / evaluated if evaluated else math.nan,
        projected_full_space_seconds=per_arch * nb.num_archs() / world_size,
        world_size=world_size, rank=rank, threads=threads,
        stages={k: v / evaluated for k, v in stages.items()} if evaluated else {})


