"""What counting costs, measured side by side in one run.

For one model and input, interleaves rounds of:
  plain          model(x)
  counted        model(x) with torchutil's dispatcher counting on (hooks + formulas)
  Profiler       the same inside `with torchutil.Profiler()` (counting + building the result)
  profile/fwd    torch.ops.util.profile(model, x, warmup=W, iters=N) wall time / (W + N) forwards:
                 what a NAS loop pays per forward (one counted forward, the rest unhooked;
                 on CUDA with kernel tracing of the counted forward and one more, and as
                 profile-notrace/fwd without it; the timed forwards are never traced)
  FlopCounter    model(x) inside torch.utils.flop_counter.FlopCounterMode
  torch.profiler model(x) inside torch.profiler.profile(with_flops=True)
and prints medians and ratios to plain. Every timing synchronizes the device at both ends.

    python benchmarks/bench_overhead.py --model resnet18 --batch 1 --device cpu
    python benchmarks/bench_overhead.py --model resnet50 --batch 1 --device cuda --dtype float16
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

import torchutil
from torchutil.models import DTYPES, build_classifier


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device: torch.device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None)
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds per variant")
    ap.add_argument("--profile-iters", type=int, default=10)
    ap.add_argument("--skip-torch-profiler", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    channels_last = device.type == "cuda" if args.channels_last is None else args.channels_last
    model = build_classifier(args.model).eval().to(device=device, dtype=dtype)
    x = torch.randn(args.batch, 3, 224, 224, device=device, dtype=dtype)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)

    def plain():
        model(x)

    def counted():
        torch.ops.util._count_begin()
        try:
            model(x)
        finally:
            torch.ops.util._count_abort()

    def profiler_block():
        with torchutil.Profiler(model, batch_size=args.batch, device=device, peak_flops=1.0):
            model(x)

    # The profile's defaults: three warm-ups (one of them counted, one traced), ten timed.
    warm, iters = 3, args.profile_iters

    def profile_call():
        torch.ops.util.profile(model, x, warmup=warm, iters=iters, peak_flops=1.0)

    def profile_untraced():
        torch.ops.util.profile(model, x, warmup=warm, iters=iters, peak_flops=1.0, trace=False)

    def flop_counter():
        with FlopCounterMode(display=False):
            model(x)

    def torch_profiler():
        with torch.profiler.profile(activities=activities, with_flops=True):
            model(x)

    variants = {"plain": (plain, 1), "counted": (counted, 1), "Profiler": (profiler_block, 1),
                "profile/fwd": (profile_call, warm + iters), "FlopCounter": (flop_counter, 1)}
    if device.type == "cuda":
        variants["profile-notrace/fwd"] = (profile_untraced, warm + iters)
    if not args.skip_torch_profiler:
        variants["torch.profiler"] = (torch_profiler, 1)

    with torch.inference_mode():
        for fn, _ in variants.values():  # warm every path (library init, lazy modules)
            for _ in range(2):
                fn()
        samples: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.rounds):
            for name, (fn, forwards) in variants.items():
                samples[name].append(_timed(fn, device) / forwards)

    med = {k: statistics.median(v) for k, v in samples.items()}
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"{args.model} batch {args.batch} {args.dtype} {'channels_last' if channels_last else 'contiguous'} "
          f"on {where}; torch {torch.__version__}; median of {args.rounds} interleaved rounds")
    # Paired: the ratio to the plain forward of the same round, then the median over rounds;
    # steadier than a ratio of medians when the host drifts during the run.
    paired = {k: statistics.median(a / b for a, b in zip(v, samples["plain"])) for k, v in samples.items()}
    print(f"{'variant':<16}{'ms/forward':>12}{'x plain':>10}{'paired x':>10}")
    for k, v in med.items():
        print(f"{k:<16}{1e3 * v:>12.3f}{v / med['plain']:>10.3f}{paired[k]:>10.3f}")
    trace = _trace_overhead(model, x, args) if device.type == "cuda" else None
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "device": where, "median_seconds": med,
                       "ratio_to_plain": {k: v / med["plain"] for k, v in med.items()},
                       "paired_ratio_to_plain": paired,
                       "samples": samples, "trace": trace}, f, indent=2)


def _trace_overhead(model, x, args) -> dict:
    """Kernel tracing's cost: the timed loop of torchutil.profile with and without CUPTI,
    interleaved; and the traced kernel time against the untraced event time."""
    untraced, traced, kernel = [], [], []
    for _ in range(max(5, args.rounds // 3)):
        r0 = torchutil.profile(model, x, warmup=2, iters=args.profile_iters, trace=False)
        r1 = torchutil.profile(model, x, warmup=2, iters=args.profile_iters, trace=True)
        untraced.append(r0.seconds)
        traced.append(r1.seconds)
        kernel.append(r1.kernel_seconds)
    m0, m1, mk = (statistics.median(v) for v in (untraced, traced, kernel))
    paired = statistics.median(b / a for a, b in zip(untraced, traced))
    print(f"kernel tracing: timed forward {1e3 * m0:.3f} ms untraced, {1e3 * m1:.3f} ms traced "
          f"({m1 / m0:.3f}x, paired {paired:.3f}x); traced kernel time {1e3 * mk:.3f} ms = {100 * mk / m0:.1f} % of the "
          f"untraced forward, {100 * mk / m1:.1f} % of the traced one")
    return {"untraced_seconds": untraced, "traced_seconds": traced, "kernel_seconds": kernel,
            "ratio": m1 / m0, "paired_ratio": paired}


if __name__ == "__main__":
    main()
