"""Why do eight sweep workers time NATS-Bench cells ~0.1 ms per forward faster than one?

One process, the sweep's own set-up (NetworkPool, cifar10 batch 256, fp16, channels_last, one
warm-up and three timed replays as `nas evaluate` runs them). Per cell it times:

  torchutil   torch.ops.util.profile(model, x, ...) as the sweep calls it: its `seconds`
  plain       the same graph timing written out here: an own CUDA graph, a pair of events around
              each of `--iters` replays queued back to back after one synchronization
  gated       the same, but a spin kernel (torch.cuda._sleep) holds the stream until every
              replay is queued, so no replay can wait for the host to launch it

and the host's time to queue one replay. Each figure is compared with the committed sweeps'
`seconds` for the same cells: sweep_auto_a (one worker) and sweep_workers8 (eight workers).
--burn K runs K CPU-bound processes beside it (does a loaded host change the timings?);
--fraction F sets the per-process memory fraction the sweep's workers set (0.9 / 8); --heater
runs another CUDA context beside it that launches a small kernel every 2 ms, free or locked out
of the timed forwards (does another context's GPU work move the timings?).

    python benchmarks/cost/timing_probe.py --cells 0:48 [--burn 7] [--fraction 0.1125]
"""
from __future__ import annotations

import argparse
import csv
import gzip
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

import torchutil  # noqa: F401  (registers torch.ops.util)
from torchutil.fields import FIELDS
from torchutil.nas import natsbench as nb
from torchutil.studies.nas_cells import EvalConfig, holding, make_input

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "nas"


def _burn() -> None:
    while True:
        pass


def _heat(lock: str | None) -> None:
    """Another process's CUDA context with a little GPU work every 2 ms (taking the lock around
    it when given, so that it never runs beside a timed forward)."""
    import fcntl

    torch.cuda.init()
    y = torch.ones(1024, device="cuda")
    with open(lock or os.devnull, "a") as f:
        while True:
            if lock:
                fcntl.flock(f, fcntl.LOCK_EX)
            y.add_(1.0)
            torch.cuda.synchronize()
            if lock:
                fcntl.flock(f, fcntl.LOCK_UN)
            time.sleep(0.002)


def _reference(name: str) -> dict[int, float]:
    with gzip.open(RESULTS / name, "rt") as f:
        return {int(r["idx"]): float(r["seconds"]) for r in csv.DictReader(f)}


def _time_replays(graph: torch.cuda.CUDAGraph, iters: int, gate_cycles: int) -> tuple[list[float], float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    torch.cuda.synchronize()
    if gate_cycles:
        torch.cuda._sleep(gate_cycles)
    t0 = time.perf_counter()
    for s, e in zip(starts, ends):
        s.record()
        graph.replay()
        e.record()
    queued = (time.perf_counter() - t0) / iters
    ends[-1].synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)], queued


def _lock_path() -> str:
    return str(Path(tempfile.gettempdir()) / "timing_probe.lock")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", default="0:48", help="first:last (exclusive) NATS-Bench indices")
    ap.add_argument("--iters", type=int, default=3, help="timed replays per cell (nas evaluate: 3)")
    ap.add_argument("--burn", type=int, default=0, help="CPU-bound processes to run beside it")
    ap.add_argument("--fraction", type=float, default=0.0, help="per-process memory fraction (0: none)")
    ap.add_argument("--lock", action="store_true", help="pass torchutil a gpu_lock file, as the workers do")
    ap.add_argument("--heater", choices=["free", "locked"], default=None,
                    help="another process with a CUDA context running a small kernel every 2 ms, free to run "
                         "beside the timed forwards or locked out of them (implies --lock)")
    ap.add_argument("--gate-ms", type=float, default=5.0, help="the spin kernel's length before the replays")
    args = ap.parse_args()
    lo, hi = (int(v) for v in args.cells.split(":"))
    args.lock = args.lock or args.heater == "locked"
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burn)]
    if args.heater:
        heat_lock = _lock_path() if args.heater == "locked" else None
        burners.append(multiprocessing.get_context("spawn").Process(target=_heat, args=(heat_lock,), daemon=True))
    for p in burners:
        p.start()
    try:
        run(args, range(lo, hi))
    finally:
        for p in burners:
            p.terminate()
            p.join()


def run(args: argparse.Namespace, cells: range) -> None:
    device = torch.device("cuda", torch.cuda.current_device())
    if args.fraction:
        torch.cuda.set_per_process_memory_fraction(args.fraction, device)
    a, w8 = _reference("sweep_auto_a.csv.gz"), _reference("sweep_workers8.csv.gz")
    sweep = EvalConfig(dataset="cifar10", batch=256, dtype="float16", device=str(device), channels_last=True)
    pool = nb.NetworkPool(sweep.dataset, device, torch.float16, channels_last=True)
    x = make_input(sweep, device)  # the sweep's own input
    seconds_at = FIELDS.index("seconds")
    gate_cycles = int(args.gate_ms * 1e-3 * torch.cuda.get_device_properties(device).clock_rate * 1e3)
    lock = _lock_path() if args.lock else None
    rows = []
    for i in cells:
        model = pool.get(i)
        with torch.inference_mode():
            ours = torch.ops.util.profile(model, x, warmup=1, iters=args.iters, timing="auto",
                                         gpu_lock=lock).tolist()[seconds_at]
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                model(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(x)
            graph.replay()
            with holding(lock):  # as the sweep holds the GPU lock
                plain, queued = _time_replays(graph, args.iters, 0)
                gated, queued_g = _time_replays(graph, args.iters, gate_cycles)
            del graph
        rows.append((i, ours, statistics.median(plain), statistics.median(gated), queued, queued_g))
    print(f"cells {cells.start}..{cells.stop - 1}, {args.iters} timed replays each, burners {args.burn}, "
          f"memory fraction {args.fraction or 'none'}, gpu_lock {lock}, heater {args.heater}; per cell, microseconds")
    print("idx   torchutil  plain   gated  queue/replay  auto_a  workers8")
    for i, ours, plain, gated, queued, _ in rows[:8]:
        print(f"{i:4d} {ours * 1e6:9.1f} {plain * 1e6:7.1f} {gated * 1e6:7.1f} {queued * 1e6:9.1f}"
              f"   {a.get(i, float('nan')) * 1e6:7.1f} {w8.get(i, float('nan')) * 1e6:7.1f}")

    def med(f) -> float:
        return statistics.median(f(r) for r in rows if r[0] in a and r[0] in w8)

    def spread(f) -> str:
        q1, q2, q3 = statistics.quantiles([f(r) for r in rows if r[0] in a and r[0] in w8], n=4)
        return f"{100 * q2:+6.2f} % (q1 {100 * q1:+.2f}, q3 {100 * q3:+.2f})"

    print("medians over the cells (level = b / a - 1 of seconds; utilization moves the other way):")
    for name, k in (("torchutil", 1), ("plain", 2), ("gated", 3)):
        print(f"  {name:9s}: vs auto_a {spread(lambda r: r[k] / a[r[0]] - 1)}, "
              f"vs workers8 {spread(lambda r: r[k] / w8[r[0]] - 1)}")
    print(f"  plain - gated: {med(lambda r: r[2] - r[3]) * 1e6:.1f} us; host queueing per replay "
          f"{med(lambda r: r[4]) * 1e6:.1f} us (gated {med(lambda r: r[5]) * 1e6:.1f} us)")


if __name__ == "__main__":
    main()
