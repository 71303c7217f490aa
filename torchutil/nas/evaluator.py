"""NATS-Bench cells measured on request, in this process, from any number of caller threads: what
an Optuna objective, a Ray actor or the per-GPU service (torchutil.nas.service) calls.

    with CellEvaluator(eval_config("cuda")) as ev:
        row = ev.evaluate(6111)             # a row of `nas evaluate`'s results table, as a dict
        rows = ev.evaluate_many(range(100))

The evaluator is `nas evaluate`'s threads kept alive: `threads` worker threads (default on CUDA:
cells.default_threads), each with its own network pool, set up as a sweep's threads are
(pools and input made, each thread's first eager forward run, before any capture), take cells
from one queue; callers wait on a Future. Every profile call holds the GPU's lock file over its
GPU phases (default: torchutil.default_gpu_lock, shared by every torchutil process on the GPU),
so a cell measures as in a one-thread sweep. Several processes on one GPU must not each run an
evaluator where the figures should be one process's: they are contexts of their own (see
torchutil.gpu_sharing); the evaluator warns when NVML shows other processes on its GPU.

On the CPU one thread measures (timings there share the cores they measure); the meta device
counts FLOPs and bytes and times nothing (its rows' timings are NaN), for tests.
"""
from __future__ import annotations

import os
import queue
import threading
import warnings
from concurrent.futures import Future
from dataclasses import asdict, replace
from typing import Any, Iterable

import torch

import torchutil
from torchutil.gpu_sharing import default_gpu_lock, sharing_note
from torchutil.models import DTYPES
from torchutil.nas import natsbench as nb
from torchutil.nas.cells import (EMPTY_CACHE_EVERY, EvalConfig, Gate, default_threads, device_name, evaluate_arch,
                                 holding, make_input)
from torchutil.nas.errors import nas_error

__all__ = ["CellEvaluator", "eval_config", "index_of"]

# Cells between two looks at NVML for other processes on the GPU (a look costs ~0.1 ms).
_SHARING_CHECK_EVERY = 500


def eval_config(device: torch.device | str = "auto", **overrides: Any) -> EvalConfig:
    """`nas evaluate`'s measurement config for `device` ("auto": CUDA where there is one): on
    CUDA batch 256, float16, channels_last, timing auto; elsewhere batch 8, float32. overrides:
    any EvalConfig field."""
    if str(device) == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = torch.device(device).type == "cuda"
    defaults = dict(batch=256 if cuda else 8, dtype="float16" if cuda else "float32", channels_last=cuda)
    return EvalConfig(**{**defaults, "device": str(device), **overrides})


def index_of(arch: nb.Arch | str | int) -> int:
    """A cell's index in the space from its index, Arch or NAS-Bench-201 string."""
    if isinstance(arch, int):
        if not 0 <= arch < nb.num_archs():
            raise nas_error(f"cell index {arch} is outside the space's 0..{nb.num_archs() - 1}")
        return arch
    return nb.index_of_arch(arch)


class CellEvaluator:
    """Measures NATS-Bench cells with `config` in this process (see the module's docstring).

    threads: cells measured at once (each thread builds and captures its cell on the host while
    one at a time replays on the GPU; default on CUDA cells.default_threads, elsewhere 1;
    more than one on the CPU is refused). gpu_lock: True for the GPU's default lock file, a path,
    or None for none (only where no other process or thread shares the GPU)."""

    def __init__(self, config: EvalConfig | None = None, *, threads: int | None = None,
                 gpu_lock: bool | str | None = True) -> None:
        config = eval_config() if config is None else config
        device = torch.device(config.device)
        if device.type == "cuda":
            device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
            config = replace(config, device=str(device))
        threads = (default_threads(device) if device.type == "cuda" else 1) if threads is None else threads
        if threads < 1:
            raise nas_error(f"threads must be >= 1, got {threads}")
        if threads > 1 and device.type == "cpu":
            raise nas_error(f"threads > 1 needs a CUDA device (CPU timings would share the cores they measure), "
                            f"got threads={threads} on {device}")
        if threads > 1 and config.trace:
            raise nas_error(f"threads > 1 does not combine with trace (CUPTI's records are the process's), "
                            f"got threads={threads}")
        if gpu_lock is True:
            gpu_lock = default_gpu_lock(device) if device.type == "cuda" else None
        self.config, self.device, self.threads = config, device, threads
        self.gpu_lock: str | None = gpu_lock or None
        self.pid = os.getpid()  # the process that measures
        self.evaluated = 0
        self.sharing: str | None = None  # the last sharing_note() seen, None while alone
        self._cells: queue.SimpleQueue[tuple[int, Future[dict[str, Any]]] | None] = queue.SimpleQueue()
        self._gate = Gate()
        self._count = threading.Lock()
        self._closed = False
        with holding(self.gpu_lock):  # the set-up runs kernels too (random weights, the peak)
            if device.type == "cuda":
                torch.cuda.set_device(device)
            self._x = make_input(config, device)
            self._peak = None if device.type == "meta" else torchutil.peak_flops(device, DTYPES[config.dtype])[0]
            pools = [nb.NetworkPool(config.dataset, device, DTYPES[config.dtype], config.channels_last)
                     for _ in range(threads)]
            if device.type == "cuda":
                device_name(device)  # cached: a row asks no CUDA call beside a capture
                torch.cuda.synchronize(device)
        self._check_sharing()
        # No cell starts before every thread has its device set and its first eager forward run:
        # random numbers or library handles made beside a capture break it (nas_parallel.py).
        ready = threading.Barrier(threads + 1)
        self._setup_errors: list[str] = []
        self._workers = [threading.Thread(target=self._work, args=(pool, ready), daemon=True,
                                          name=f"nas-cell-evaluator{k}") for k, pool in enumerate(pools)]
        for t in self._workers:
            t.start()
        ready.wait()
        if self._setup_errors:
            self.close()
            raise nas_error("a CellEvaluator thread failed its first forward: " + "; ".join(self._setup_errors))

    def _work(self, pool: nb.NetworkPool, ready: threading.Barrier) -> None:
        device = self.device
        try:
            if device.type == "cuda":
                torch.cuda.set_device(device)  # the current device is per thread
                with holding(self.gpu_lock), torch.inference_mode():
                    pool.get(0)(self._x)
                    torch.cuda.synchronize(device)
        except BaseException as e:  # raised by __init__, which then stops every thread
            self._setup_errors.append(f"{threading.current_thread().name}: {type(e).__name__}: {e}")
        finally:
            ready.wait()
        while (item := self._cells.get()) is not None:
            index, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                with self._count:
                    self.evaluated += 1
                    drain = device.type == "cuda" and self.evaluated % EMPTY_CACHE_EVERY == 0
                    look = device.type == "cuda" and self.evaluated % _SHARING_CHECK_EVERY == 0
                if drain:  # each destroyed graph leaves its pool in the allocator's cache
                    with self._gate.alone():
                        torch.cuda.empty_cache()
                if look:
                    self._check_sharing()
                with self._gate.cell():
                    row = evaluate_arch(index, self.config, self._x, self._peak, device, pool, self.gpu_lock)
            except BaseException as e:
                future.set_exception(e)
            else:
                future.set_result(row)

    def _check_sharing(self) -> None:
        if self.device.type != "cuda":
            return
        note = sharing_note(self.device)
        if note is not None and self.sharing is None:
            warnings.warn(f"torchutil.nas: {note}", RuntimeWarning, stacklevel=2)
        self.sharing = note

    def submit(self, arch: nb.Arch | str | int) -> Future[dict[str, Any]]:
        """Queues a cell (index, Arch or string); the Future gives its result row (a dict of the
        results table's columns) or raises the cell's error."""
        if self._closed:
            raise nas_error("this CellEvaluator is closed")
        future: Future[dict[str, Any]] = Future()
        self._cells.put((index_of(arch), future))
        return future

    def evaluate(self, arch: nb.Arch | str | int) -> dict[str, Any]:
        """The result row of one cell (see submit); safe to call from any number of threads."""
        return self.submit(arch).result()

    def evaluate_many(self, archs: Iterable[nb.Arch | str | int]) -> list[dict[str, Any]]:
        """The rows of several cells, in order, measured `threads` at a time."""
        return [f.result() for f in [self.submit(a) for a in archs]]

    def describe(self) -> dict[str, Any]:
        """What it measures with: the config, threads, lock file."""
        return {"config": asdict(self.config), "threads": self.threads, "gpu_lock": self.gpu_lock}

    def close(self) -> None:
        """Lets the queued cells finish, then stops the threads."""
        if self._closed:
            return
        self._closed = True
        for _ in self._workers:
            self._cells.put(None)
        for t in self._workers:
            t.join()

    def __enter__(self) -> "CellEvaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
