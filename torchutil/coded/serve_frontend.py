"""The serving run's frontend (torchutil.coded.serve): it sends each policy's queries to the
worker processes as they arrive, takes their results, encodes and decodes, and records every
query's times (PolicyRun)."""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

import numpy as np
import torch

from torchutil.coded.codes import Code
from torchutil.coded.serve_procs import FROM_WORKER, TO_WORKER

__all__ = ["Frontend", "PolicyRun"]


@dataclass
class PolicyRun:
    """One policy's measured run. Per query: arrival, answer time, how it was answered (index
    into ("own", "replica", "reconstruction"), -1: never), the class answered (the argmax of the
    output or of its reconstruction) and how many answers the frontend
    delivered for it (every completion after the first is redundant work, counted in
    `redundant`). Per message (the data queries first, then the extra worker's job of each
    group): worker, send, forward start / end (in the worker), time back at the frontend, and how
    many results came back for it."""

    policy: str
    arrivals: np.ndarray
    answers: np.ndarray
    answered_by: np.ndarray
    delivered: np.ndarray
    predicted: np.ndarray
    worker: np.ndarray
    send: np.ndarray
    start: np.ndarray
    end: np.ndarray
    back: np.ndarray
    received: np.ndarray
    redundant: int = 0
    encode_seconds: list[float] = field(default_factory=list)
    decode_seconds: list[float] = field(default_factory=list)

    @classmethod
    def empty(cls, policy: str, n: int, k: int) -> "PolicyRun":
        m = n + n // k
        return cls(policy, arrivals=np.empty(n), answers=np.full(n, np.inf), answered_by=np.full(n, -1, np.int8),
                   delivered=np.zeros(n, np.int32), predicted=np.full(n, -1, np.int64), worker=np.concatenate([np.arange(n) % k, np.full(m - n, k)]),
                   send=np.full(m, np.nan), start=np.full(m, np.nan), end=np.full(m, np.nan), back=np.full(m, np.nan),
                   received=np.zeros(m, np.int32))

    @property
    def latencies(self) -> np.ndarray:
        return self.answers - self.arrivals

    def occupancy(self) -> np.ndarray:
        """Per message (nan where none was sent): end - max(send, end of the worker's previous message)."""
        occ = np.full(len(self.send), np.nan)
        for w in np.unique(self.worker[np.isfinite(self.send)]):
            idx = np.flatnonzero((self.worker == w) & np.isfinite(self.send))
            idx = idx[np.argsort(self.send[idx], kind="stable")]
            prev_end = np.concatenate([[-np.inf], self.end[idx][:-1]])
            occ[idx] = self.end[idx] - np.maximum(self.send[idx], prev_end)
        return occ


class Frontend:
    """This process's side: sends queries, takes results, encodes and decodes.

    At most WINDOW messages are in flight to a worker; later ones wait here, in order, and go
    as results come back. A pipe holds only so much: a send into a full one blocks, and while it
    blocks the frontend takes no result, so a worker whose results are not taken stops reading
    (seen: 3,000 digits queries at k = 2 on 2 cores hung in send_bytes for good). With the window
    neither side's buffer fills: a worker has at most WINDOW results to give back."""

    WINDOW = 8

    def __init__(self, conns: list[Connection], code: Code, images: np.ndarray, timeout: float, spin: bool) -> None:
        # spin: the last moments before an arrival (exact arrival times); not where the frontend
        # shares its core with workers, whom it would starve (they run at nice 19).
        self.conns, self.code, self.images, self.timeout, self.spin = conns, code, images, timeout, spin
        self.k = code.k
        self.shape = images.shape[1:]

    def send(self, worker: int, mid: int, which: int, x: np.ndarray) -> float:
        """Sends message `mid` for model `which` of `worker`; the time the send began."""
        msg = TO_WORKER.pack(mid, which) + np.ascontiguousarray(x, np.float32).tobytes()
        t = time.perf_counter()
        try:
            self.conns[worker].send_bytes(msg)
        except OSError as e:  # a broken pipe or a reset connection: the worker died
            raise RuntimeError(f"torchutil.coded: worker {worker} went away ({e})") from None
        return t

    def receive(self, conn: Connection) -> tuple[int, float, float, float, np.ndarray]:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError) as e:
            raise RuntimeError(f"torchutil.coded: worker {self.conns.index(conn)} went away "
                               f"({type(e).__name__})") from None
        mid, t0, t1 = FROM_WORKER.unpack_from(msg)
        return mid, t0, t1, time.perf_counter(), np.frombuffer(msg, np.float32, offset=FROM_WORKER.size)

    def round_trip(self, worker: int, x: np.ndarray) -> float:
        t = time.perf_counter()
        self.send(worker, 0, 0, x)
        if not self.conns[worker].poll(self.timeout):
            raise RuntimeError(f"torchutil.coded: worker {worker} did not answer in {self.timeout} s")
        self.receive(self.conns[worker])
        return time.perf_counter() - t

    def run(self, policy: str, offsets: np.ndarray) -> PolicyRun:
        """One policy over queries arriving at `offsets` seconds from now (sorted)."""
        k, n = self.k, len(offsets)
        run = PolicyRun.empty(policy, n, k)
        outputs: dict[int, np.ndarray] = {}
        parity: dict[int, np.ndarray] = {}
        run.arrivals[:] = time.perf_counter() + 0.05 + offsets
        i, outstanding = 0, 0

        def answer(j: int, at: float, how: int, output: np.ndarray) -> None:
            if run.delivered[j]:
                run.redundant += 1  # a later copy or reconstruction: redundant work, not a second answer
                return
            run.answers[j], run.answered_by[j], run.delivered[j] = at, how, 1
            run.predicted[j] = int(np.argmax(output))

        def try_decode(g: int) -> None:
            have = [outputs.get(g * k + m) for m in range(k)]
            missing = [m for m, o in enumerate(have) if o is None]
            if g not in parity or len(missing) != 1 or run.delivered[g * k + missing[0]]:
                return
            t = time.perf_counter()
            with torch.inference_mode():
                outs = torch.stack([torch.zeros(len(parity[g])) if o is None else torch.from_numpy(o) for o in have])
                out = self.code.reconstruct(outs[None], torch.from_numpy(parity[g])[None], torch.tensor([missing[0]]))
            done = time.perf_counter()
            run.decode_seconds.append(done - t)
            answer(g * k + missing[0], done, 2, out[0].numpy())

        waiting: list[deque[tuple[int, int, np.ndarray]]] = [deque() for _ in self.conns]
        in_flight = [0] * len(self.conns)

        def submit(worker: int, mid: int, which: int, x: np.ndarray) -> None:
            nonlocal outstanding
            waiting[worker].append((mid, which, x))
            outstanding += 1
            pump(worker)

        def pump(worker: int) -> None:
            while waiting[worker] and in_flight[worker] < self.WINDOW:
                mid, which, x = waiting[worker].popleft()
                run.send[mid] = self.send(worker, mid, which, x)
                in_flight[worker] += 1

        while i < n or outstanding:
            while i < n and run.arrivals[i] <= time.perf_counter():
                g = i // k
                submit(i % k, i, 0, self.images[i])
                if policy == "replication" and i == g * k + g % k:
                    submit(k, n + g, 0, self.images[i])
                elif policy == "coded" and i % k == k - 1:
                    t = time.perf_counter()
                    with torch.inference_mode():
                        p = self.code.encode(torch.from_numpy(self.images[g * k:(g + 1) * k])[None])[0].numpy()
                    run.encode_seconds.append(time.perf_counter() - t)
                    submit(k, n + g, 1, p)
                i += 1
            ready = [c for c in self.conns if c.poll(0)]
            if not ready:
                if i < n:  # block until shortly before the next arrival (wait's timeout is coarse), then spin
                    remaining = run.arrivals[i] - time.perf_counter()  # (or block until it: self.spin)
                    if remaining > (2e-3 if self.spin else 0.0):
                        wait(self.conns, remaining - (1.5e-3 if self.spin else 0.0))
                    continue
                ready = wait(self.conns, self.timeout)
                if not ready:
                    raise RuntimeError(f"torchutil.coded: no result for {self.timeout} s with {outstanding} outstanding")
            for conn in ready:
                mid, t0, t1, back, out = self.receive(conn)
                outstanding -= 1
                worker = self.conns.index(conn)
                in_flight[worker] -= 1
                pump(worker)
                run.start[mid], run.end[mid], run.back[mid] = t0, t1, back
                run.received[mid] += 1
                if mid < n:
                    answer(mid, back, 0, out)
                    if policy == "coded":
                        outputs[mid] = out.copy()
                        try_decode(mid // k)
                elif policy == "replication":
                    g = mid - n
                    answer(g * k + g % k, back, 1, out)
                else:
                    parity[mid - n] = out.copy()
                    try_decode(mid - n)
        return run
