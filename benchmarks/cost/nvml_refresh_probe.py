"""When does NVML's total-energy counter change: on a free-running 100 ms clock, or when it is
read after going unread for an update? And which instant does a reading describe?

The energy windows (csrc/core/EnergyWindows.cpp) open at the counter's first change after the
first forward is queued; if that change comes a fixed time after the first read of a stale
counter, the wait is that time, not half an update on average. Three experiments, nvidia-ml-py
and torch only (no torchutil build):

A. GPU idle: sleep `gap` seconds without reading, read once (r0), then poll until the value
   changes. Printed: whether r0 differed from the last value before the sleep, and the time
   from r0 to the next change. A free-running counter gives times spread over (0, 100 ms); one
   refreshed by a stale read gives ~100 ms every time.
B. The same with the GPU busy (back-to-back matmuls queued ahead).
C. Which instant a fresh reading describes: GPU idle, a stale read (tA), idle for `pre`, queue a
   heavy load at tL, read again `delta` later (stale: > 100 ms since tA). The energy between the
   two readings against idle power x (tL - tA) + load power x delta says how far before the read
   its value reaches.

    python benchmarks/cost/nvml_refresh_probe.py
"""
from __future__ import annotations

import statistics
import time

import pynvml
import torch


def main() -> None:
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)

    def read() -> tuple[int, float]:
        t0 = time.perf_counter()
        v = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        return v, 0.5 * (t0 + time.perf_counter())

    durations = []
    for _ in range(200):
        t0 = time.perf_counter()
        pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        durations.append(time.perf_counter() - t0)
    durations.sort()
    print(f"read: median {1e3 * statistics.median(durations):.3f} ms, p90 {1e3 * durations[180]:.3f}, "
          f"max {1e3 * durations[-1]:.3f}")

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()

    def next_change(v0: int, t0: float, busy: bool) -> float:
        while True:
            if busy and torch.cuda.current_stream().query():
                for _ in range(20):
                    a @ b
            v, t = read()
            if v != v0:
                return t - t0

    for busy in (False, True):
        print(f"== experiment {'B (busy)' if busy else 'A (idle)'}")
        for gap in (0.03, 0.07, 0.15, 0.25, 0.33, 0.5, 0.77):
            rows = []
            for _ in range(4):
                if busy:
                    for _ in range(40):
                        a @ b
                last, _ = read()
                time.sleep(gap)
                v0, t0 = read()
                rows.append((v0 != last, next_change(v0, t0, busy)))
                torch.cuda.synchronize()
            print(f"  gap {gap:.2f} s: r0 changed {[r[0] for r in rows]}, next change after "
                  f"{[round(1e3 * r[1], 1) for r in rows]} ms")

    print("== experiment C")
    # Power of the load and of the idle GPU, over 1 s each, from the counter itself.
    torch.cuda.synchronize()
    time.sleep(0.5)
    v0, t0 = read()
    time.sleep(1.0)
    v1, t1 = read()
    idle = (v1 - v0) / 1e3 / (t1 - t0)
    for _ in range(40):
        a @ b
    time.sleep(0.2)
    v0, t0 = read()
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        if torch.cuda.current_stream().query():
            for _ in range(20):
                a @ b
        time.sleep(0.001)
    v1, t1 = read()
    torch.cuda.synchronize()
    load = (v1 - v0) / 1e3 / (t1 - t0)
    print(f"  idle {idle:.0f} W, load {load:.0f} W (1 s each)")
    for delta in (0.001, 0.003, 0.01, 0.02, 0.05, 0.09):
        for pre in (0.15,):
            torch.cuda.synchronize()
            time.sleep(0.4)
            va, ta = read()
            time.sleep(pre)
            tl = time.perf_counter()
            for _ in range(100):
                a @ b
            while time.perf_counter() < tl + delta:
                pass
            vb, tb = read()
            torch.cuda.synchronize()
            joules = (vb - va) / 1e3
            # The time at load power that the reading holds: what is left after idle draw.
            busy_s = (joules - idle * (tb - ta)) / (load - idle)
            print(f"  delta {1e3 * delta:5.1f} ms (read {1e3 * (tb - tl):5.1f} ms after the load began): "
                  f"{joules:.3f} J, as if busy for {1e3 * busy_s:6.1f} ms")


if __name__ == "__main__":
    main()
