"""Where torchutil.profile's time goes beyond torch.ops.util.profile's (issue #19: the H200 saw
11-15 ms more per call on resnet50 fp16, all of it outside the C++ call's own clock).

Each round runs every variant once, in a new random order, and splits a call's wall time into
  cxx       the C++ call's own clock (the result's call_seconds)
  rest      wall - (cxx + after + free + sync): Python before the op (options, boxing the model)
            and the op's work outside its clock (tearing down the graph and the trace)
  after     from the op's return to the result object (ProfileResult._from_output)
  free      dropping the result (the C++ ProfileOutput and everything it holds)
  sync      the device synchronization after it all (work the call left queued)
The variants: the summary op, the full op (torch.ops.util._profile, as torchutil.profile calls
it) with and without module paths, and the full op with Python's garbage collector off (is a
collection of the process's heap what costs?). Medians and quartiles over the rounds.

    python benchmarks/cost/profile_gap.py --model resnet50 --batch 1 --device cuda --dtype float16
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time

import torch

import torchutil
from torchutil.models import DTYPES
from torchutil.result import ProfileResult
from torchutil.studies._common import Setup

PARTS = ("rest", "cxx", "after", "free", "sync", "wall")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float16" if torch.cuda.is_available() else "float32", choices=DTYPES)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    model, x = Setup.on(device, DTYPES[args.dtype]).classifier(args.model, args.batch)  # channels_last on CUDA
    call_index = torchutil.FIELDS.index("call_seconds")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def summary_op(**kw):
        def run() -> dict[str, float]:
            t0 = time.perf_counter()
            s = torch.ops.util.profile(model, x, **kw)
            t1 = time.perf_counter()
            cxx = s[call_index].item()
            del s
            t2 = time.perf_counter()
            sync()
            t3 = time.perf_counter()
            return {"cxx": cxx, "after": 0.0, "free": t2 - t1, "sync": t3 - t2, "wall": t3 - t0}
        return run

    def full_op(gc_off: bool = False, **kw):
        def run() -> dict[str, float]:
            if gc_off:
                gc.disable()
            try:
                t0 = time.perf_counter()
                out = torch.ops.util._profile(model, x, **kw)
                t1 = time.perf_counter()
                result = ProfileResult._from_output(out)
                t2 = time.perf_counter()
                cxx = result.call_seconds
                del out, result
                t3 = time.perf_counter()
                sync()
                t4 = time.perf_counter()
            finally:
                if gc_off:
                    gc.enable()
            return {"cxx": cxx, "after": t2 - t1, "free": t3 - t2, "sync": t4 - t3, "wall": t4 - t0}
        return run

    def profile_call():
        t0 = time.perf_counter()
        r = torchutil.profile(model, x)
        t1 = time.perf_counter()
        cxx = r.call_seconds
        del r
        t2 = time.perf_counter()
        sync()
        t3 = time.perf_counter()
        return {"cxx": cxx, "after": 0.0, "free": t2 - t1, "sync": t3 - t2, "wall": t3 - t0}

    variants = {
        "op (summary)": summary_op(),
        "torchutil.profile": profile_call,
        "_profile": full_op(),
        "_profile module_paths=False": full_op(module_paths=False),
        "_profile gc off": full_op(gc_off=True),
        "op trace=False": summary_op(trace=False),
        "_profile trace=False": full_op(trace=False),
    }
    samples: dict[str, list[dict[str, float]]] = {k: [] for k in variants}
    rng = random.Random(args.seed)
    with torch.inference_mode():
        for fn in variants.values():
            fn()
        for _ in range(args.rounds):
            order = list(variants)
            rng.shuffle(order)
            for name in order:
                sync()
                samples[name].append(variants[name]())

    where = torch.cuda.get_device_name(device) if cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(f"{args.model} batch {args.batch} {args.dtype} on {where}; torch {torch.__version__}; "
          f"{args.rounds} rounds in random order; ms per call, median [q1, q3]")
    print(f"{'variant':<30}" + "".join(f"{p:>20}" for p in PARTS))
    table: dict[str, dict[str, list[float]]] = {}
    for name, rows in samples.items():
        for r in rows:
            r["rest"] = r["wall"] - r["cxx"] - r["after"] - r["free"] - r["sync"]
        table[name] = {}
        cells = []
        for p in PARTS:
            v = sorted(1e3 * r[p] for r in rows)
            q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
            table[name][p] = [q[0], statistics.median(v), q[2]]
            cells.append(f"{statistics.median(v):8.2f} [{q[0]:.1f},{q[2]:.1f}]")
        print(f"{name:<30}" + "".join(f"{c:>20}" for c in cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "batch": args.batch, "dtype": args.dtype, "device": where,
                       "rounds": args.rounds, "ms_q1_median_q3": table}, f, indent=1)


if __name__ == "__main__":
    main()
