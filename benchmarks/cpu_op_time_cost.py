"""What timing every op costs a CPU profile's counted forward.

On a CPU, torchutil.profile times each op call of its counted forward on the steady clock (two
clock reads and one small record per op call; docs/views.md). Each round runs, in a new random
order:

  plain          model(x)
  count+paths    a torchutil.Profiler(model) block around model(x): counted, module paths, no
                 op clock (the block's own wall time)
  count+clock    torchutil.profile(model, x, warmup=0, iters=1): its counted forward, with module
                 paths and the op clock (phase_count_seconds: the steady clock around it)

and reports medians and the paired differences per round: count+clock - count+paths (what the op
clock adds) and count+clock - plain (what a counted forward costs in all), also as a ratio.

    python benchmarks/cpu_op_time_cost.py --model resnet18 --batch 1 --threads 1
"""
from __future__ import annotations

import argparse
import json

import torch

import torchutil
from torchutil.models import build_classifier

from rounds import quartiles, timed_rounds  # benchmarks/rounds.py, beside this script


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = build_classifier(args.model).eval()
    x = torch.randn(args.batch, 3, args.size, args.size)
    counted: list[float] = []

    def plain() -> None:
        model(x)

    def count_paths() -> None:
        with torchutil.Profiler(model, batch_size=args.batch, peak_flops=1e12):
            model(x)

    def count_clock() -> None:
        r = torchutil.profile(model, x, warmup=0, iters=1, peak_flops=1e12)
        assert r.kernel_attribution == "cpu"
        counted.append(r.phase_count_seconds)

    with torch.inference_mode():
        walls = timed_rounds({"plain": plain, "count+paths": count_paths, "count+clock": count_clock},
                             args.rounds, args.seed, sync=lambda: None)
    # count+clock's sample is its counted forward, not the whole call (which also times one).
    samples = {"plain": walls["plain"], "count+paths": walls["count+paths"], "count+clock": counted[2:]}
    print(f"{args.model} batch {args.batch} {args.size}x{args.size} float32 on CPU "
          f"({torch.get_num_threads()} threads); torch {torch.__version__}; {args.rounds} rounds in random "
          "order; ms, median [q1, q3]")
    for name, v in samples.items():
        q1, m, q3 = quartiles(v)
        print(f"  {name:<14}{1e3 * m:9.3f} [{1e3 * q1:.3f}, {1e3 * q3:.3f}]")
    out = {"args": vars(args), "torch": torch.__version__, "threads": torch.get_num_threads(),
           "samples": samples, "paired_ms": {}, "paired_ratio": {}}
    for a, b in (("count+clock", "count+paths"), ("count+clock", "plain"), ("count+paths", "plain")):
        q1, m, q3 = quartiles([p - q for p, q in zip(samples[a], samples[b])])
        r1, rm, r3 = quartiles([p / q for p, q in zip(samples[a], samples[b])])
        out["paired_ms"][f"{a} - {b}"] = [1e3 * q1, 1e3 * m, 1e3 * q3]
        out["paired_ratio"][f"{a} / {b}"] = [r1, rm, r3]
        print(f"  paired {a} - {b}: {1e3 * m:.3f} ms [{1e3 * q1:.3f}, {1e3 * q3:.3f}]; "
              f"ratio {rm:.4f} [{r1:.4f}, {r3:.4f}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
