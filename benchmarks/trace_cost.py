"""Where the cost of a traced profile call goes: wall time per call of torch.ops.util.profile
with and without kernel tracing, with 0 or 1 traced forwards after the counted one, at two
iteration counts (so that the per-call constant and the per-forward cost separate), and on a
model of one tiny kernel (the constant alone). Interleaved rounds, medians.

    python benchmarks/trace_cost.py --model resnet50 --batch 1
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import torchutil  # noqa: F401  (registers the ops)
from torchutil.models import build_classifier


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args()
    dev = torch.device("cuda")
    model = build_classifier(args.model).eval().to(dev, torch.half).to(memory_format=torch.channels_last)
    x = torch.randn(args.batch, 3, 224, 224, device=dev, dtype=torch.half).contiguous(memory_format=torch.channels_last)
    tiny = torch.nn.ReLU()
    xt = torch.randn(16, device=dev)

    def call(m, inp, iters, **kw):
        def run():
            torch.ops.util.profile(m, inp, warmup=3, iters=iters, peak_flops=1.0, **kw)
        return run

    def plain():
        model(x)

    variants = {
        "plain forward": (plain, 1),
        "untraced, iters 10": (call(model, x, 10, trace=False), 13),
        "traced 0, iters 10": (call(model, x, 10, trace_forwards=0), 13),
        "traced 1, iters 10": (call(model, x, 10), 13),
        "untraced, iters 40": (call(model, x, 40, trace=False), 43),
        "traced 1, iters 40": (call(model, x, 40), 43),
        "tiny untraced": (call(tiny, xt, 1, trace=False), 4),
        "tiny traced 0": (call(tiny, xt, 1, trace_forwards=0), 4),
    }
    samples = {k: [] for k in variants}
    with torch.inference_mode():
        for fn, _ in variants.values():
            fn()
            fn()
        for _ in range(args.rounds):
            for k, (fn, _) in variants.items():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                samples[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in samples.items()}
    plain_s = med["plain forward"]
    print(f"{args.model} b{args.batch} on {torch.cuda.get_device_name(dev)}: medians of {args.rounds} rounds")
    print(f"{'variant':<22}{'ms/call':>10}{'x plain per fwd':>17}")
    for k, (fn, n) in variants.items():
        print(f"{k:<22}{1e3 * med[k]:>10.3f}{med[k] / n / plain_s:>17.3f}")
    per_call = med["traced 1, iters 10"] - med["untraced, iters 10"]
    print(f"tracing adds {1e3 * per_call:.2f} ms per call ({1e3 * (med['traced 0, iters 10'] - med['untraced, iters 10']):.2f} ms "
          f"with no traced forward); CUPTI set-up and tear-down alone (tiny model): "
          f"{1e3 * (med['tiny traced 0'] - med['tiny untraced']):.2f} ms")


if __name__ == "__main__":
    main()
