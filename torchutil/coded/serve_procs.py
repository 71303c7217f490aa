"""The processes of a measured serving run (torchutil.coded.serve): workers that serve forwards
at batch 1 over a pipe, burners that make stragglers by burning a worker's core in bursts, and
how they are placed on cores and stopped."""
from __future__ import annotations

import multiprocessing as mp
import os
import random
import struct
import time
from multiprocessing.connection import Connection
from typing import Any, Sequence

import torch
from torch import nn

__all__ = ["FROM_WORKER", "TO_WORKER", "WORKER_FAILED", "burner", "layout", "stop", "worker"]

TO_WORKER = struct.Struct("<qB")  # message id (< 0: stop), which of the worker's models; then float32 image
FROM_WORKER = struct.Struct("<qdd")  # message id, start and end of the forward (perf_counter); then float32 output
WORKER_FAILED = b"failed: "  # instead of b"ready": the worker could not start; then its exception
# The frontend went away (killed, or it stopped on an error): a worker or burner then ends
# quietly, with no traceback of its own on the shared stderr.
_FRONTEND_GONE = (EOFError, BrokenPipeError, ConnectionResetError)


def _pin(core: int | None, nice: int) -> None:
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    if nice:
        os.nice(nice)


def worker(conn: Connection, models: list[nn.Module], shape: tuple[int, ...], device: str, core: int | None,
            nice: int) -> None:
    """Serves forwards of models[i] at batch 1 until a stop message (id < 0). A failure before
    it is ready is sent to the frontend (WORKER_FAILED and the exception) instead of "ready"."""
    try:
        try:
            _pin(core, nice)
            torch.set_num_threads(1)
            dev = torch.device(device)
            models = [m.to(dev).eval() for m in models]
            with torch.inference_mode():
                for m in models:  # warm-up: first calls allocate
                    for _ in range(10):
                        m(torch.zeros(1, *shape, device=dev)).cpu()
        except Exception as e:
            conn.send_bytes(WORKER_FAILED + f"{type(e).__name__}: {' '.join(str(e).split())}".encode())
            return
        conn.send_bytes(b"ready")
        with torch.inference_mode():
            while True:
                msg = conn.recv_bytes()
                t0 = time.perf_counter()
                mid, which = TO_WORKER.unpack_from(msg)
                if mid < 0:
                    break
                x = torch.frombuffer(bytearray(msg[TO_WORKER.size:]), dtype=torch.float32).view(1, *shape)
                y = models[which](x.to(dev)).float().cpu().numpy()  # .cpu() waits for a GPU
                conn.send_bytes(FROM_WORKER.pack(mid, t0, time.perf_counter()) + y.tobytes())
    except _FRONTEND_GONE:
        pass
    finally:
        conn.close()


def burner(conn: Connection, core: int | None, on_fraction: float, burst: float, seed: int) -> None:
    """Idles and burns the CPU in turns until told to stop; sends back its (start, end) bursts."""
    try:
        _burn(conn, core, on_fraction, burst, seed)
    except _FRONTEND_GONE:
        pass
    finally:
        conn.close()


def _burn(conn: Connection, core: int | None, on_fraction: float, burst: float, seed: int) -> None:
    _pin(core, 0)
    conn.send("ready")
    rng = random.Random(seed)
    bursts = []
    idle = burst * (1 - on_fraction) / on_fraction
    while not conn.poll(rng.expovariate(1 / idle)):
        t0 = time.perf_counter()
        end = t0 + rng.expovariate(1 / burst)
        stop = False
        while time.perf_counter() < end:
            x = 0
            for i in range(2000):  # real work, in slices short enough to notice a stop
                x += i * i
            if conn.poll(0):
                stop = True
                break
        bursts.append((t0, time.perf_counter()))
        if stop:
            break
    conn.recv()
    conn.send(bursts)


def stop(processes: Sequence[mp.process.BaseProcess], timeout: float = 5.0) -> None:
    """Each process joined; terminate, then kill, where it does not end in time."""
    for p in processes:
        p.join(timeout)
        if p.is_alive():
            p.terminate()
            p.join(timeout)
        if p.is_alive():
            p.kill()
            p.join()


def layout(k: int, stragglers: Sequence[int]) -> dict[str, Any]:
    """Cores: the first of this process's affinity for the frontend, the next ones for workers
    0..k, a straggler's burner on its worker's core. Where there are fewer than k + 2 cores, the
    stragglers take cores of their own first (round-robin among them) and the other workers share
    the rest, the frontend's too: a burner then slows its own worker only, as a straggling host
    would, and not the healthy worker that could answer for it. frontend_spins: whether the
    frontend may spin before an arrival (not where it shares its core with a worker)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not cores:
        return {"frontend": None, "workers": [None] * (k + 1), "burners": {w: None for w in stragglers},
                "dedicated": False, "frontend_spins": False}
    if len(cores) >= k + 2:
        workers = [cores[1 + w] for w in range(k + 1)]
    else:
        slow = sorted(set(stragglers))
        pool = cores[1:] or cores
        workers = [0] * (k + 1)
        for i, w in enumerate(slow):
            workers[w] = pool[i % len(pool)]
        taken = {workers[w] for w in slow}
        healthy = [c for c in pool if c not in taken] or [c for c in cores if c not in taken] or cores
        for i, w in enumerate(w for w in range(k + 1) if w not in slow):
            workers[w] = healthy[i % len(healthy)]
    return {"frontend": cores[0], "workers": workers, "burners": {w: workers[w] for w in stragglers},
            "dedicated": len(cores) >= k + 2, "frontend_spins": cores[0] not in workers}
