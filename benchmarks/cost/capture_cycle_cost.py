"""What one CUDA-graph capture costs the host, piece by piece, and what a shared memory pool saves.

Every default profile captures its forward (graph timing), and an eager traced call counts in a
capture it never replays. This script times torch's capture cycle as torchutil runs it
(torch.cuda.CUDAGraph(keep_graph=True): capture_begin, the forward, capture_end, destruction)
on a one-op model and on a real one, in two settings:

  private   each capture in a fresh private memory pool (torch's default, and torchutil's with
            TORCHUTIL_KEEP_CAPTURE_POOL=0)
  shared    every capture in one pool that a kept one-op graph holds alive, so the blocks of a
            destroyed capture are there for the next (no new segments, no cudaMalloc): what
            torchutil does by default since the ninth session of 2026-12-02

and counts the allocator's new segments (cudaMalloc calls) per capture. Every capture here runs
on one side stream: the allocator reuses a free block only on the stream it was allocated on, so
a kept pool saves the segments only where the captures share a stream (torchutil keeps one
capture stream per thread and device; with TORCHUTIL_KEEP_CAPTURE_POOL=0 a profile takes one from
torch's round-robin pool per call). Medians over --rounds with quartiles; one process.

    python benchmarks/cost/capture_cycle_cost.py --model resnet50 --batch 1
"""
from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    from torchutil.studies._common import Setup

    dev = torch.device("cuda")
    model, x = Setup.on(dev, torch.half).classifier(args.model, args.batch)  # channels_last on CUDA
    tiny, xt = torch.nn.ReLU(), torch.randn(1, 16, device=dev)
    stream = torch.cuda.Stream()
    out: dict = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__, "args": vars(args)}

    def segments() -> int:
        return int(torch.cuda.memory_stats().get("segment.all.allocated", 0))

    def cycle(fn, inp, pool) -> dict[str, float]:
        torch.cuda.synchronize()
        s0 = segments()
        t0 = time.perf_counter()
        g = torch.cuda.CUDAGraph(keep_graph=True)
        g.capture_begin(pool=pool) if pool is not None else g.capture_begin()
        t1 = time.perf_counter()
        fn(inp)
        t2 = time.perf_counter()
        g.capture_end()
        t3 = time.perf_counter()
        del g
        t4 = time.perf_counter()
        return {"begin": t1 - t0, "forward": t2 - t1, "end": t3 - t2, "destroy": t4 - t3, "cycle": t4 - t0,
                "new segments": float(segments() - s0)}

    with torch.inference_mode(), torch.cuda.stream(stream):
        for _ in range(3):
            model(x)
            tiny(xt)
        torch.cuda.synchronize()
        handle = torch.cuda.graph_pool_handle()
        keeper = torch.cuda.CUDAGraph(keep_graph=True)
        keeper.capture_begin(pool=handle)
        tiny(xt)
        keeper.capture_end()
        for name, fn, inp in (("one op", tiny, xt), (args.model, model, x)):
            for setting, pool in (("private", None), ("shared", handle)):
                rows = [cycle(fn, inp, pool) for _ in range(args.rounds)]
                out[f"{name}, {setting}"] = rows
        del keeper
    print(f"{out['device']}, torch {out['torch']}: one capture cycle, ms, median (q1-q3) over {args.rounds} rounds; "
          "one process")
    pieces = ["begin", "forward", "end", "destroy", "cycle"]
    print(f"{'':<22}" + "".join(f"{p:>22}" for p in pieces) + f"{'new segments':>14}")
    for key, rows in out.items():
        if not isinstance(rows, list):
            continue
        cells = []
        for p in pieces:
            v = [r[p] for r in rows]
            q = statistics.quantiles(v, n=4, method="inclusive")
            cells.append(f"{1e3 * statistics.median(v):.3f} ({1e3 * q[0]:.3f}-{1e3 * q[2]:.3f})")
        seg = statistics.mean(r["new segments"] for r in rows)
        print(f"{key:<22}" + "".join(f"{c:>22}" for c in cells) + f"{seg:>14.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
