"""nas evaluate in parallel on one GPU: worker threads of one process (`--threads`, the default
on CUDA). Each thread builds, counts and captures its cells on the host while another replays
on the GPU under the GPU's lock file (gpu_lock_path), so every timed replay has the GPU to itself.

Why threads, not processes: an H200 runs a graph's kernels ~0.6 us a kernel faster while a second
CUDA context uses it, so cells timed beside other worker processes measured ~4.5 % faster than
the same cells timed alone, whatever lock they shared (docs/results/nas/README.md;
torchutil.gpu_sharing). Threads share the process's one context, so a cell's timed replays see
the GPU as a one-process sweep does. Their captures run side by side (their forwards' Python
takes turns at the GIL, their launches, counting and graph instantiation need not), and beside
another thread's replays under the lock.

Threads each have their own NetworkPool (a
network whose edge ops they swap), all built before the first capture (random numbers drawn
beside a capture break PyTorch's CUDA generator), and take the next cell from a shared queue.
Their profile calls pass gpu_lock, so their captures run in CUDA's thread-local mode, side by
side (a failed capture's retry frees the allocator's cache alone), their other CUDA calls stay
legal beside a capture, and their synchronizations wait for their own streams (CUDA refuses a
device-wide one beside a capture).
The main thread writes the rows (every `commit_every`) and drives the progress bar, so a kill
loses at most the cells in flight. The allocator's cache (each destroyed graph leaves its
private pool there) is emptied every EMPTY_CACHE_EVERY cells while no thread is inside a cell:
emptying it beside another thread's capture is not safe.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

import torch

import torchutil
from torchutil.models import DTYPES
from torchutil.nas import natsbench as nb
from torchutil.nas.cells import Gate as _Gate  # its old name here, which tests import
from torchutil.studies._common import Progress, cudnn_autotune, nas_error
from torchutil.studies.nas_db import connect, db_errors, insert_rows
from torchutil.studies.nas_cells import (EMPTY_CACHE_EVERY, STAGES, EvalConfig, device_name, diagnostic, evaluate_arch,
                                         holding, make_input)


def run_threads(config: EvalConfig, todo: Sequence[int], db: str | os.PathLike[str], threads: int,
                options: dict[str, Any], lock: str | None, bar: Progress) -> tuple[int, dict[str, float]]:
    """Evaluates `todo` into db over `threads` threads of this process sharing config.device
    through the lock file `lock` (None: no lock, the meta device). Returns (cells written,
    seconds per stage of STAGES summed over the threads). A thread's error stops the others after
    their cell and is raised naming the thread; the rows made before it are written either way."""
    device = torch.device(config.device)
    start = time.perf_counter()
    cells: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in todo:
        cells.put(i)
    out: queue.SimpleQueue[tuple[str, int, Any]] = queue.SimpleQueue()
    stop = threading.Event()
    gate = _Gate()
    count_lock = threading.Lock()
    started = [0]
    stages = [dict.fromkeys(STAGES, 0.0) for _ in range(threads)]

    # The set-up runs kernels (random weights, the input, the peak's measurement), all of it
    # before any thread captures: random numbers drawn beside a capture break PyTorch's CUDA
    # generator (seen: "Offset increment outside graph capture encountered unexpectedly").
    with holding(lock):
        if device.type == "cuda":
            torch.cuda.set_device(device)
        x = make_input(config, device)
        peak = None if device.type == "meta" else torchutil.peak_flops(device, DTYPES[config.dtype])[0]
        pools = [nb.NetworkPool(config.dataset, device, DTYPES[config.dtype], config.channels_last)
                 for _ in range(threads)]
        if device.type == "cuda":
            device_name(device)  # cached: the rows' device_name asks no CUDA call beside a capture
            torch.cuda.synchronize(device)
    setup = [0.0]  # seconds until the last thread is ready, which every thread waited for

    def all_ready() -> None:
        setup[0] = time.perf_counter() - start

    # No cell starts before every thread has its device set and its warm-up forward run.
    ready = threading.Barrier(threads, action=all_ready)

    def work(k: int) -> None:
        try:
            if device.type == "cuda":
                torch.cuda.set_device(device)  # the current device is per thread
            pool = pools[k]
            if device.type == "cuda" and not diagnostic("TORCHUTIL_SWEEP_NO_THREAD_WARMUP"):
                # One eager forward in this thread before any capture, so that none of its
                # library handles (cuDNN's and cuBLAS's are per thread, made on first use) is made
                # inside a capture. A precaution: the failure it was added for (device call 4)
                # was the device-wide synchronization (csrc/libtorch/Devices.h, ThreadStreams).
                with holding(lock), torch.inference_mode():
                    pool.get(todo[0])(x)
                    torch.cuda.synchronize(device)
            ready.wait()
            while not stop.is_set():
                try:
                    i = cells.get_nowait()
                except queue.Empty:
                    break
                with count_lock:
                    started[0] += 1
                    drain = device.type == "cuda" and started[0] % EMPTY_CACHE_EVERY == 0
                t0 = time.perf_counter()  # a drain below counts as "other"
                if drain:
                    with gate.alone():
                        torch.cuda.empty_cache()
                with gate.cell():
                    row = evaluate_arch(i, config, x, peak, device, pool, lock, stages[k])
                out.put(("row", k, row))
                stages[k]["other"] += time.perf_counter() - t0 - row["eval_seconds"]
        except BaseException as e:  # reported to the main thread, which names the thread
            ready.abort()  # no thread waits for this one
            where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
            at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
            out.put(("error", k, f"{type(e).__name__}{at}: {e}"))
        finally:
            out.put(("done", k, None))

    workers = [threading.Thread(target=work, args=(k,), name=f"nas-evaluate-thread{k}", daemon=True)
               for k in range(threads)]
    errors: list[str] = []
    pending: list[dict[str, Any]] = []
    written = 0
    write_seconds = 0.0
    running = threads

    def write() -> None:
        nonlocal written, write_seconds
        t0 = time.perf_counter()
        with db_errors(db):
            insert_rows(con, pending)
        written += len(pending)
        pending.clear()
        write_seconds += time.perf_counter() - t0

    with contextlib.closing(connect(db)) as con, cudnn_autotune(options["cudnn_benchmark"]):
        try:
            for t in workers:
                t.start()
            while running:
                try:
                    kind, k, value = out.get(timeout=0.5)  # a timeout keeps Ctrl-C heard
                except queue.Empty:
                    continue
                if kind == "row":
                    pending.append(value)
                    if len(pending) >= options["commit_every"]:
                        write()
                    bar.update()
                elif kind == "error":
                    errors.append(f"thread {k}: {value}")
                    stop.set()
                else:
                    running -= 1
        finally:
            stop.set()  # an interrupt of the main thread stops the others after their cell
            for t in workers:
                t.join()
            while True:  # rows that arrived after the loop stopped reading
                try:
                    kind, k, value = out.get_nowait()
                except queue.Empty:
                    break
                if kind == "row":
                    pending.append(value)
            if pending:
                write()
    if errors:
        raise nas_error("a sweep thread failed, the others were stopped (committed cells are kept; a rerun "
                        "resumes): " + "; ".join(errors))
    total = dict.fromkeys(STAGES, 0.0)
    for s in stages:
        for name, v in s.items():
            total[name] += v
    total["write"] += write_seconds
    total["setup"] += setup[0] * threads
    return written, total
