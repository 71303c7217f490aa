"""What kernel tracing costs, and whether CUPTI slows the process after a trace.

CUPTI stays attached to a process after its activities are disabled, and Kineto found training
10-20 % slower after a profile until cuptiFinalize detached it (pytorch/pytorch#146604). For each
setting of TORCHUTIL_CUPTI_TEARDOWN (0: CUPTI stays attached, 1: detached after every trace) a
fresh process measures: 13 plain eager forwards back to back with one synchronization, before any
trace and after one traced call; then rounds in random order of torch.ops.util.profile traced
and untraced, eager and in the default (graph) timing, and on a one-kernel model (CUPTI's set-up
and tear-down alone). Medians over the rounds, with quartiles.

    python benchmarks/trace_cost.py --model resnet50 --batch 1
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time


def child(args: argparse.Namespace) -> dict:
    import torch

    import torchutil  # noqa: F401  (registers the ops)
    from torchutil.models import build_classifier

    dev = torch.device("cuda")
    model = build_classifier(args.model).eval().to(dev, torch.half).to(memory_format=torch.channels_last)
    x = torch.randn(args.batch, 3, 224, 224, device=dev, dtype=torch.half).contiguous(memory_format=torch.channels_last)
    tiny, xt = torch.nn.ReLU(), torch.randn(1, 16, device=dev)

    def timed(fn) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def plain():
        for _ in range(13):
            model(x)

    def call(m, inp, **kw):
        return lambda: torch.ops.util.profile(m, inp, peak_flops=1.0, **kw)

    out: dict = {}
    with torch.inference_mode():
        for _ in range(3):
            plain()
        out["plain before any trace"] = [timed(plain) for _ in range(args.rounds)]
        call(model, x, timing="eager")()
        out["plain after one trace"] = [timed(plain) for _ in range(args.rounds)]
        variants = {
            "eager traced": call(model, x, timing="eager"),
            "eager untraced": call(model, x, timing="eager", trace=False),
            "default traced": call(model, x),
            "default untraced": call(model, x, trace=False),
            "tiny traced": call(tiny, xt, warmup=0, iters=1, timing="eager"),
            "tiny untraced": call(tiny, xt, warmup=0, iters=1, timing="eager", trace=False),
            "plain (13 forwards)": plain,
        }
        for fn in variants.values():
            fn()
        samples = {k: [] for k in variants}
        rng = random.Random(0)
        for _ in range(args.rounds):
            order = list(variants)
            rng.shuffle(order)
            for k in order:
                samples[k].append(timed(variants[k]))
        out.update(samples)
    out["device"] = torch.cuda.get_device_name(dev)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--processes", type=int, default=2, help="fresh processes per setting")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args)))
        return
    runs, lingering = {}, {}
    # TEARDOWN=0: CUPTI stays attached; 1: detached after each trace; kernels: kernel records
    # only, without the API records that attribute kernels to ops (is it the API tracing that
    # stays behind?).
    settings = {"0": {"TORCHUTIL_CUPTI_TEARDOWN": "0"}, "1": {"TORCHUTIL_CUPTI_TEARDOWN": "1"},
                "kernels": {"TORCHUTIL_CUPTI_TEARDOWN": "0", "TORCHUTIL_CUPTI_CORRELATION": "0"}}
    for teardown, extra in settings.items():
        env = {**os.environ, **extra}
        cmd = [sys.executable, os.path.abspath(__file__), "--child", *sys.argv[1:]]
        for p in range(args.processes):
            text = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
            run = json.loads(next(line[7:] for line in text.splitlines() if line.startswith("RESULT ")))
            ratio = statistics.median(run["plain after one trace"]) / statistics.median(run["plain before any trace"])
            lingering.setdefault(teardown, []).append(ratio)
            runs.setdefault(teardown, run)
    for t, ratios in lingering.items():
        print(f"setting {t}: plain forwards after one trace / before it, per process: "
              + ", ".join(f"{r:.3f}" for r in ratios))
    print(f"{args.model} b{args.batch} fp16 on {runs['0']['device']}: medians (q1-q3) of {args.rounds} rounds in "
          "random order, ms per call; one fresh process per setting")
    names = [k for k in runs["0"] if k != "device"]
    print(f"{'':<24}" + "".join(f"{'setting ' + t:>26}" for t in runs))
    for k in names:
        cells = []
        for run in runs.values():
            v = run[k]
            q = statistics.quantiles(v, n=4, method="inclusive")
            cells.append(f"{1e3 * statistics.median(v):>10.2f} ({1e3 * q[0]:.2f}-{1e3 * q[2]:.2f})")
        print(f"{k:<24}" + "".join(f"{c:>26}" for c in cells))
    for t, run in runs.items():
        med = {k: statistics.median(run[k]) for k in names}
        print(f"setting {t}: after one trace, plain forwards {med['plain after one trace'] / med['plain before any trace']:.3f}x "
              f"before; tracing adds {1e3 * (med['eager traced'] - med['eager untraced']):.2f} ms eager, "
              f"{1e3 * (med['default traced'] - med['default untraced']):.2f} ms default, "
              f"{1e3 * (med['tiny traced'] - med['tiny untraced']):.2f} ms on a one-kernel model; "
              f"eager traced call / plain loop {med['eager traced'] / med['plain (13 forwards)']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": runs, "lingering": lingering}, f, indent=2)


if __name__ == "__main__":
    main()
