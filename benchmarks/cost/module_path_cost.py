"""What module paths cost a counted forward, apart from everything else a profile call does.

torchutil.profile names each op's module (module_paths=True, the default) on its counted forward;
bench_overhead.py sees that cost only as the difference of two whole calls, which a host whose
speed drifts by milliseconds between calls hides. Here each round runs, in a new random order:

  plain        model(x)
  scope        model(x) inside a module scope alone (the forwards wrapped, nothing counted)
  count        a torchutil.Profiler(None) block around model(x): counted, no module paths
  count+paths  a torchutil.Profiler(model) block around model(x): counted, with module paths

each followed by a device synchronization, and reports medians and the paired differences per
round (median, q1 to q3): scope - plain (the wrappers and their set-up), count+paths - count
(what module paths add to a counted forward). Also the scope's opening and closing alone.

    python benchmarks/cost/module_path_cost.py --device cuda --batch 1 --dtype float16
    python benchmarks/cost/module_path_cost.py --device cpu --size 32 --threads 1
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import torchutil
from torchutil import _C
from torchutil.models import DTYPES
from torchutil.studies._common import Setup

from rounds import quartiles, timed_rounds  # benchmarks/cost/rounds.py, beside this script


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, choices=DTYPES, help="float16 on CUDA, float32 on the CPU")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    dtype = DTYPES[args.dtype or ("float16" if cuda else "float32")]
    model, x = Setup.on(device, dtype).classifier(args.model, args.batch, args.size)  # channels_last on CUDA

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def plain() -> None:
        model(x)

    def scope() -> None:
        s = _C._ModuleScope(model)
        try:
            model(x)
        finally:
            s.close()

    def count() -> None:
        with torchutil.Profiler(None, device=device, peak_flops=1e12):
            model(x)

    def count_paths() -> None:
        with torchutil.Profiler(model, device=device, peak_flops=1e12):
            model(x)

    variants = {"plain": plain, "scope": scope, "count": count, "count+paths": count_paths}
    opening: list[float] = []
    closing: list[float] = []

    def scope_alone() -> None:
        """After a round: a forward (as in a call), then the scope opened and closed alone."""
        model(x)
        sync()
        t0 = time.perf_counter()
        s = _C._ModuleScope(model)
        t1 = time.perf_counter()
        s.close()
        closing.append(time.perf_counter() - t1)
        opening.append(t1 - t0)

    with torch.inference_mode():
        samples = timed_rounds(variants, args.rounds, args.seed, sync, after_round=scope_alone)

    where = torch.cuda.get_device_name(device) if cuda else f"CPU ({torch.get_num_threads()} threads)"
    modules = sum(1 for _ in model.modules())
    print(f"{args.model} ({modules} modules) batch {args.batch} {args.size}x{args.size} {dtype} on {where}; "
          f"torch {torch.__version__}; {args.rounds} rounds in random order; ms, median [q1, q3]")
    for name, v in samples.items():
        q1, m, q3 = quartiles(v)
        print(f"  {name:<14}{1e3 * m:9.3f} [{1e3 * q1:.3f}, {1e3 * q3:.3f}]")
    out = {"args": vars(args), "device": where, "torch": torch.__version__, "modules": modules,
           "samples": samples, "open": opening, "close": closing, "paired_ms": {}}
    for a, b in (("scope", "plain"), ("count+paths", "count"), ("count", "plain")):
        q1, m, q3 = quartiles([p - q for p, q in zip(samples[a], samples[b])])
        out["paired_ms"][f"{a} - {b}"] = [1e3 * q1, 1e3 * m, 1e3 * q3]
        print(f"  paired {a} - {b}: {1e3 * m:.3f} ms [{1e3 * q1:.3f}, {1e3 * q3:.3f}]")
    for name, v in (("open", opening), ("close", closing)):
        q1, m, q3 = quartiles(v)
        print(f"  scope {name} alone: {1e3 * m:.3f} ms [{1e3 * q1:.3f}, {1e3 * q3:.3f}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
