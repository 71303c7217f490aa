"""nas evaluate on a Ray cluster: cells handed out as they finish to one actor per GPU, on any
number of machines, into one db the driver writes.

    ray start --head --port 6379                      # on one machine
    ray start --address HEAD:6379                     # on every other
    python -m torchutil nas evaluate --ray auto --db results.sqlite      # on the head

Each actor holds `gpus_per_actor` of a GPU (default a whole one: one CUDA context per GPU, so a
cell measures as in a one-process sweep; 0.5 puts two actors, two contexts, on a GPU, which an
H200 times ~5 % faster, see torchutil.gpu_sharing) and runs a CellEvaluator (`nas evaluate`'s
threads, kept alive). The driver keeps `depth` calls of `chunk` cells in flight per actor and
gives the next chunk to whichever actor answers: dynamic, so a slow GPU or machine gets fewer
cells. It writes each cell's row once, committed per chunk, skipping cells the db holds (a rerun
resumes). An actor whose worker process or node dies is restarted by Ray wherever the cluster
has room (max_restarts=-1) and its calls in flight are retried there (max_task_retries=-1): a
loss costs the cells in flight. A cluster with no room for it stalls; after `stall_seconds`
without a finished cell the run stops, its rows kept.
"""
from __future__ import annotations

import collections
import contextlib
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import torch

from torchutil.studies._common import Progress, nas_error
from torchutil.studies.nas_db import connect, db_errors, insert_rows
from torchutil.studies.nas_evaluate import EvalConfig, finished_indices

__all__ = ["RaySweepStats", "actor_plan", "ray_sweep"]


@dataclass
class RaySweepStats:
    """What a Ray sweep did: cells evaluated (written) and skipped, the wall time of its cells
    (after setup_seconds of setting up its actors), the GPUs Ray reported, the actors, where each
    was set up (placement: node, pid, gpu_ids, threads, sharing note) and where the cells ran
    (node id -> cells; pids: every actor process that answered, restarted ones too)."""

    evaluated: int
    skipped: int
    seconds: float
    gpus_reported: float
    gpus_per_actor: float
    actors: int
    threads: int | None
    cells_per_node: dict[str, int] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)
    placement: list[dict[str, Any]] = field(default_factory=list)
    setup_seconds: float = 0.0

    @property
    def seconds_per_arch(self) -> float:
        return self.seconds / self.evaluated if self.evaluated else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds_per_arch": self.seconds_per_arch}


class _CellActor:
    """One GPU's (or CPU's) evaluator on a Ray node."""

    def __init__(self, config: dict[str, Any], threads: int | None, gpus_per_actor: float) -> None:
        import ray

        from torchutil.nas.evaluator import CellEvaluator
        from torchutil.studies.nas_evaluate import default_threads

        ctx = ray.get_runtime_context()
        self.node = ctx.get_node_id()
        device = torch.device(config["device"])
        if device.type == "cuda" and threads is None:  # the cores of this node over its actors
            node_gpus = next((n["Resources"].get("GPU", 0) for n in ray.nodes() if n["NodeID"] == self.node), 1)
            threads = default_threads(device, max(1, round(node_gpus / gpus_per_actor)))
        self.evaluator = CellEvaluator(EvalConfig(**config), threads=threads)

    def evaluate(self, cells: list[int]) -> tuple[str, int, list[dict[str, Any]]]:
        return self.node, os.getpid(), self.evaluator.evaluate_many(cells)

    def where(self) -> dict[str, Any]:
        import ray

        return {"node": self.node, "pid": os.getpid(), "gpu_ids": ray.get_gpu_ids(),
                "threads": self.evaluator.threads, "sharing": self.evaluator.sharing}


def actor_plan(resources: dict[str, float], device_type: str, gpus_per_actor: float = 1.0,
               actors: int | None = None) -> tuple[int, dict[str, float]]:
    """How many actors a sweep starts and what each asks Ray for, from ray.cluster_resources():
    on CUDA one per gpus_per_actor of the GPUs Ray reports ({"num_gpus": gpus_per_actor}), else
    `actors` (default: Ray's CPUs) of one CPU each."""
    if device_type == "cuda":
        gpus = float(resources.get("GPU", 0.0))
        if not 0 < gpus_per_actor <= 1:
            raise nas_error(f"gpus_per_actor must be in (0, 1], got {gpus_per_actor}")
        if gpus < gpus_per_actor:
            raise nas_error(f"the Ray cluster reports {gpus:g} GPUs; a CUDA sweep needs at least {gpus_per_actor:g}")
        return actors or int(gpus / gpus_per_actor + 1e-9), {"num_gpus": gpus_per_actor}
    return actors or max(1, int(resources.get("CPU", 1))), {"num_cpus": 1}


def ray_sweep(config: EvalConfig, indices: Sequence[int], db: str | os.PathLike[str], *, address: str | None = None,
              gpus_per_actor: float = 1.0, actors: int | None = None, threads: int | None = None, chunk: int = 4,
              depth: int = 2, stall_seconds: float = 600.0, progress: bool = True,
              on_rows: Callable[[str, int, list[int]], None] | None = None) -> RaySweepStats:
    """Evaluates `indices` with `config` into db on a Ray cluster (see the module's docstring).
    address: ray.init's ("auto" for the cluster `ray start` started here, HOST:PORT, "local" for
    a new one on this machine; None: ray.init's own choice; a driver already connected keeps its
    connection). On CUDA one actor per gpus_per_actor of
    every GPU Ray reports; elsewhere `actors` actors of one CPU each (default: Ray's CPUs).
    on_rows(node id, actor pid, cells) after each chunk is committed."""
    import ray

    if chunk < 1 or depth < 1 or (actors is not None and actors < 1):
        raise nas_error(f"chunk, depth and actors must be >= 1, got chunk={chunk}, depth={depth}, actors={actors}")
    with contextlib.closing(connect(db)) as con:
        with db_errors(db):
            done = finished_indices(con, config)
    todo = list(dict.fromkeys(i for i in indices if i not in done))
    skipped = len(list(indices)) - len(todo)
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        return _run(config, todo, skipped, db, gpus_per_actor, actors, threads, chunk, depth, stall_seconds, progress,
                    on_rows)
    finally:
        if started_here:
            ray.shutdown()


def _run(config: EvalConfig, todo: list[int], skipped: int, db: str | os.PathLike[str], gpus_per_actor: float,
         actors: int | None, threads: int | None, chunk: int, depth: int, stall_seconds: float,
         progress: bool, on_rows: Callable[[str, int, list[int]], None] | None) -> RaySweepStats:
    import ray

    gpus = float(ray.cluster_resources().get("GPU", 0.0))
    n, resources = actor_plan(ray.cluster_resources(), config.device_type, gpus_per_actor, actors)
    if config.device_type == "cuda":  # inside an actor Ray numbers its GPUs from 0 (CUDA_VISIBLE_DEVICES)
        config = EvalConfig(**{**asdict(config), "device": "cuda:0"})
    cuda = config.device_type == "cuda"
    stats = RaySweepStats(evaluated=0, skipped=skipped, seconds=0.0, gpus_reported=gpus,
                          gpus_per_actor=gpus_per_actor if cuda else 0.0, actors=0, threads=threads)
    if not todo:
        return stats
    n = min(n, -(-len(todo) // chunk))
    actor_class = ray.remote(_CellActor).options(**resources, max_restarts=-1, max_task_retries=-1,
                                                 max_concurrency=depth + 1, scheduling_strategy="SPREAD")
    t_setup = time.perf_counter()
    pool = [actor_class.remote(asdict(config), threads, gpus_per_actor) for _ in range(n)]
    stats.actors = n
    cells = collections.deque(todo[k:k + chunk] for k in range(0, len(todo), chunk))
    inflight: dict[Any, tuple[int, list[int]]] = {}
    load = [0] * n
    written: set[int] = set()
    pids: set[int] = set()
    bar = Progress(len(todo), "nas evaluate (ray)", "arch", enabled=progress, every=10.0)
    try:
        # Every actor set up (torch imported, network pools built) before the first cell: the
        # sweep's time is then its cells', and the cells are dealt among all actors from the start.
        ready, _ = ray.wait([a.where.remote() for a in pool], num_returns=n, timeout=stall_seconds)
        if len(ready) < n:
            raise nas_error(f"{n - len(ready)} of {n} Ray actors ({resources}) were not set up after "
                            f"{stall_seconds:.0f} s: does the cluster have room for them?")
        try:
            stats.placement = ray.get(ready)
        except ray.exceptions.RayActorError as e:
            raise nas_error(f"a Ray actor failed to set up: {e}") from None
        stats.setup_seconds = time.perf_counter() - t_setup
        t0 = time.perf_counter()
        with contextlib.closing(connect(db)) as con:
            last = time.monotonic()
            while cells or inflight:
                for k in range(n):
                    while cells and load[k] < depth:
                        part = cells.popleft()
                        inflight[pool[k].evaluate.remote(part)] = (k, part)
                        load[k] += 1
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                if not ready:
                    if time.monotonic() - last > stall_seconds:
                        raise nas_error(f"no cell finished in {stall_seconds:.0f} s (an actor Ray cannot place again?); "
                                        f"{len(written)} cells are in {db}, a rerun resumes")
                    continue
                for ref in ready:
                    k, part = inflight.pop(ref)
                    load[k] -= 1
                    try:
                        node, pid, rows = ray.get(ref)
                    except ray.exceptions.RayTaskError as e:
                        raise nas_error(f"cells {part} failed on a Ray actor ({len(written)} cells are in {db}, a rerun "
                                        f"resumes): {e.cause if e.cause is not None else e}") from None
                    fresh = [r for r in rows if r["idx"] not in written]
                    with db_errors(db):
                        insert_rows(con, fresh)
                    written.update(r["idx"] for r in fresh)
                    stats.cells_per_node[node] = stats.cells_per_node.get(node, 0) + len(fresh)
                    pids.add(pid)
                    for _ in fresh:
                        bar.update()
                    if on_rows is not None:
                        on_rows(node, pid, [r["idx"] for r in fresh])
                    last = time.monotonic()
    finally:  # actors of a driver connected to a running cluster would outlive the run
        for actor in pool:
            ray.kill(actor)
    bar.close()
    stats.seconds = time.perf_counter() - t0
    stats.evaluated = len(written)
    stats.pids = sorted(pids)
    stats.threads = stats.threads or stats.placement[0]["threads"]
    return stats


def run_cli(args: Any) -> int:
    """`nas evaluate --ray [ADDRESS]`: the sweep of the other options on the Ray cluster at
    ADDRESS ("auto": the one `ray start` started on this machine; none: RAY_ADDRESS, else a new
    local one); --device auto is CUDA where Ray reports GPUs."""
    import ray

    from torchutil.nas.evaluator import eval_config
    from torchutil.studies.cli.args import UsageError, timing
    from torchutil.studies.nas_evaluate import parse_indices

    refused = [flag for flag, on in (("--rebuild", args.rebuild), ("--cudnn-benchmark", args.cudnn_benchmark)) if on]
    if refused:
        raise UsageError(f"{', '.join(refused)} do(es) not combine with --ray")
    started = not ray.is_initialized()
    if started:
        ray.init(address=args.ray or os.environ.get("RAY_ADDRESS") or "local", include_dashboard=False,
                 log_to_driver=False)
    try:
        device = args.device
        if device == "auto":
            device = "cuda" if ray.cluster_resources().get("GPU", 0) > 0 else "cpu"
        given = dict(dataset=args.dataset, batch=args.batch, dtype=args.dtype, warmup=args.warmup, iters=args.iters,
                     timing=timing(args, default="auto"), trace=args.trace, channels_last=args.channels_last)
        config = eval_config(device, **{k: v for k, v in given.items() if v is not None})
        indices = args.indices if args.indices is not None else parse_indices(None)
        threads = args.threads or (1 if args.trace else None)
        stats = ray_sweep(config, indices, args.db, gpus_per_actor=args.ray_gpus, threads=threads,
                          progress=not args.no_progress)
    finally:
        if started:
            ray.shutdown()
    per_gpu = f" of {stats.gpus_per_actor:g} GPU each" if stats.gpus_per_actor else ""
    print(f"{config.dataset} batch {config.batch} {config.dtype} on {config.device_type} ({config.mode}) over Ray: "
          f"evaluated {stats.evaluated} archs, skipped {stats.skipped} already in the db, in {stats.seconds:.1f} s")
    print(f"Ray reports {stats.gpus_reported:g} GPU(s); {stats.actors} actor(s){per_gpu}, {stats.threads} thread(s) "
          f"each, on {len(stats.cells_per_node)} node(s): {', '.join(map(str, stats.cells_per_node.values()))} cells")
    print(f"results in {args.db}")
    return 0
