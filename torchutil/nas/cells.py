"""One NATS-Bench cell's measurement: the config a sweep or a search measures with (EvalConfig),
one cell's profile into a results row (evaluate_arch, whose columns are torchutil.nas.db_schema's),
its input (make_input), the GPU's lock file held around set-up work (holding), how many threads
measure a GPU by default (default_threads) and the gate that lets the allocator's cache be freed
between the cells of several threads (Gate).

torchutil.nas.evaluator (the cells measured on request) and the `nas evaluate` sweep
(the studies' nas_cells.py and nas_parallel.py) both stand on it.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

import torchutil
from torchutil._ops import OPTION_DEFAULTS, check_choice
from torchutil.fields import FIELDS
from torchutil.models import DTYPES, Setup
from torchutil.nas import natsbench as nb
from torchutil.nas.db_schema import KEY_COLUMNS, SUMMARY_COLUMNS, TIMINGS
from torchutil.nas.errors import NAS, nas_error

__all__ = ["EMPTY_CACHE_EVERY", "STAGES", "EvalConfig", "Gate", "default_threads", "device_name", "evaluate_arch",
           "holding", "make_input"]


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


# Cells between two frees of a worker's allocator cache (each capture leaves a graph pool there).
EMPTY_CACHE_EVERY = 256


def default_threads(device: torch.device | str, ranks_on_host: int = 1) -> int:
    """Threads that measure one device by default (a sweep's, a CellEvaluator's): on CUDA half the
    host's cores shared by the `ranks_on_host` ranks (one per GPU) of this host, at most 4 a GPU
    (each builds and captures its cells on the host while one of them at a time replays on the
    GPU; their Python forwards take turns at the GIL: on an H200 four ran the space in 2.9
    minutes, and on cells 0-999 three and six were slower than four); elsewhere 1 (CPU timings
    would share the cores they measure)."""
    if torch.device(device).type != "cuda":
        return 1
    return max(1, min(4, (os.cpu_count() or 2) // 2 // max(ranks_on_host, 1)))


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


class Gate:
    """Lets any number of threads into a cell at once, or one caller alone with none inside
    (a readers-writer lock whose writer goes first once it asks)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._inside = 0
        self._closing = False

    @contextlib.contextmanager
    def cell(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._closing)
            self._inside += 1
        try:
            yield
        finally:
            with self._cond:
                self._inside -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._closing)
            self._closing = True
            self._cond.wait_for(lambda: self._inside == 0)
        try:
            yield
        finally:
            with self._cond:
                self._closing = False
                self._cond.notify_all()
