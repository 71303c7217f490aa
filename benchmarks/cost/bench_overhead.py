"""What a profile call costs against what a user would run without torchutil, side by side.

Every round runs each variant once, in a new random order; the table gives the median wall
time of a call with its quartiles over the rounds, and ratios of medians. The baselines are what
a user writes without us, doing the forwards the call does:

  plain loop        warmup + iters (13) plain forwards queued back to back, one synchronization
                    at the end: the baseline of an eager call (timing="eager")
  user FCM+graph    a user's own FlopCounterMode-plus-graph loop, as PyTorch's CUDA-graph docs
                    write it: one forward under FlopCounterMode on a side stream (the count and
                    the capture's warm-up), the capture, `iters` replays timed with events (CUDA)
  plain synced      the 13 forwards with a synchronization around each (the old baseline of this
                    script, printed for comparison only: no user loop synchronizes every forward)

and ours: torch.ops.util.profile(model, x) and torchutil.profile(model, x) with their defaults
(on CUDA the repeatable graph timing, kernels traced), untraced (trace=False), and eager
(timing="eager"), traced and untraced, and torchutil.profile without module paths (what of its
cost over the summary op they are); for reference one forward under FlopCounterMode and
under torch.profiler(with_flops=True). The targets of issue #19 are printed last, with where
the default call's time goes (its phase_* fields).

    python benchmarks/cost/bench_overhead.py --model resnet50 --batch 1 --device cuda --dtype float16
    python benchmarks/cost/bench_overhead.py --model resnet18 --batch 1 --device cpu
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch
from torch.utils.flop_counter import FlopCounterMode

import torchutil
from torchutil.models import DTYPES
from torchutil.studies._common import Setup

from rounds import quartiles, timed_rounds  # benchmarks/cost/rounds.py, beside this script

PHASES = ("warmup", "count", "capture", "trace", "time", "counters", "wait", "assemble")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None)
    ap.add_argument("--rounds", type=int, default=9, help="rounds, each running every variant once in random order")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-torch-profiler", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    dtype = DTYPES[args.dtype]
    setup = Setup.on(device, dtype, args.channels_last)  # channels_last None: on for CUDA
    model, x = setup.classifier(args.model, args.batch)
    defaults = torchutil._ops.OPTION_DEFAULTS
    warmup, iters = defaults["warmup"], defaults["iters"]
    forwards = warmup + iters

    def plain_loop():
        for _ in range(forwards):
            model(x)
        _sync(device)

    def plain_synced():
        for _ in range(forwards):
            _sync(device)
            model(x)
            _sync(device)

    def user_fcm_graph():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            with FlopCounterMode(display=False) as fcm:
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(x)
        start = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        end = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for s, e in zip(start, end):
            s.record()
            graph.replay()
            e.record()
        torch.cuda.synchronize()
        seconds = statistics.median(s.elapsed_time(e) for s, e in zip(start, end)) / 1e3
        return fcm.get_total_flops() / seconds

    phases: dict[str, list[torch.Tensor]] = {}

    def label(kind: str, kw: dict) -> str:
        return f"{kind} " + (",".join(f"{k}={v}" for k, v in kw.items()) or "default")

    def op(**kw):
        def run():
            phases.setdefault(label("op", kw), []).append(torch.ops.util.profile(model, x, **kw))
        return run

    def full(**kw):
        def run():
            phases.setdefault(label("profile", kw), []).append(torchutil.profile(model, x, **kw).summary)
        return run

    def flop_counter():
        with FlopCounterMode(display=False):
            model(x)

    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])

    def torch_profiler():
        with torch.profiler.profile(activities=activities, with_flops=True):
            model(x)

    variants = {"plain loop": plain_loop, "plain synced": plain_synced,
                "op default": op(), "profile default": full(), "profile no paths": full(module_paths=False),
                "op untraced": op(trace=False)}
    if cuda:
        variants.update({"user FCM+graph": user_fcm_graph, "op eager": op(timing="eager"),
                         "op eager untraced": op(timing="eager", trace=False),
                         "profile eager": full(timing="eager")})
    variants["FlopCounterMode x1"] = flop_counter
    if not args.skip_torch_profiler:
        variants["torch.profiler x1"] = torch_profiler

    with torch.inference_mode():
        samples = timed_rounds(variants, args.rounds, args.seed, lambda: _sync(device),
                               before_rounds=phases.clear)

    where = torch.cuda.get_device_name(device) if cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(f"{args.model} batch {args.batch} {args.dtype} {'channels_last' if setup.channels_last else 'contiguous'} "
          f"on {where}; torch {torch.__version__}; {args.rounds} rounds in random order; "
          f"a call's defaults: warmup={warmup}, iters={iters}")
    med = {k: statistics.median(v) for k, v in samples.items()}
    base = "user FCM+graph" if cuda else "plain loop"
    print(f"{'variant':<22}{'ms/call':>10}{'q1':>10}{'q3':>10}{'x plain loop':>14}{'x ' + base:>20}")
    for k, v in samples.items():
        q1, m, q3 = quartiles(v)
        print(f"{k:<22}{1e3 * m:>10.3f}{1e3 * q1:>10.3f}{1e3 * q3:>10.3f}{m / med['plain loop']:>14.3f}"
              f"{m / med[base]:>20.3f}")

    def ms(a: str, b: str) -> float:
        return 1e3 * (med[a] - med[b])

    def paired(a: str, b: str) -> str:
        """a - b per round (both ran in the same round, in random order): median (q1-q3), ms. On a
        host whose speed drifts between rounds, the paired differences spread less than the
        difference of the two medians does."""
        q1, m, q3 = quartiles([x - y for x, y in zip(samples[a], samples[b])])
        return f"{1e3 * m:.2f} ({1e3 * q1:.2f} to {1e3 * q3:.2f})"

    print("\ntargets (issue #19), ratios of medians:")
    if cuda:
        print(f"  default traced call / user FCM+graph:   op {med['op default'] / med[base]:.3f}, "
              f"profile {med['profile default'] / med[base]:.3f}   (target <= 1.05)")
        print(f"  eager traced call / plain loop:         op {med['op eager'] / med['plain loop']:.3f}, "
              f"profile {med['profile eager'] / med['plain loop']:.3f}   (target <= 1.10)")
        print(f"  tracing's fixed cost:                   default {ms('op default', 'op untraced'):.2f} ms, "
              f"eager {ms('op eager', 'op eager untraced'):.2f} ms   (target <= 5 ms)")
        print(f"    paired, median of the rounds' differences (q1 to q3): default "
              f"{paired('op default', 'op untraced')} ms, eager {paired('op eager', 'op eager untraced')} ms")
    else:
        print(f"  default call / plain loop:              op {med['op default'] / med['plain loop']:.3f}, "
              f"profile {med['profile default'] / med['plain loop']:.3f}")
    print(f"  torchutil.profile - torch.ops.util.profile: {ms('profile default', 'op default'):.2f} ms   "
          "(target <= 2 ms)")
    print(f"    paired (q1 to q3): {paired('profile default', 'op default')} ms; of it, module paths "
          f"(profile - profile module_paths=False): {paired('profile default', 'profile no paths')} ms")
    fields = torchutil.FIELDS
    breakdown = {}
    for name, summaries in phases.items():
        s = torch.stack(summaries)
        breakdown[name] = {p: 1e3 * s[:, fields.index(f"phase_{p}_seconds")].median().item() for p in PHASES}
        breakdown[name]["call"] = 1e3 * s[:, fields.index("call_seconds")].median().item()
    print("\nwhere a call's time goes in C++ (medians, ms; the rest of the wall time is Python and the result):")
    print(f"  {'call':<22}" + "".join(f"{p:>10}" for p in (*PHASES, "call")))
    for name, b in breakdown.items():
        print(f"  {name:<22}" + "".join(f"{b[p]:>10.2f}" for p in (*PHASES, "call")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "device": where, "torch": torch.__version__, "samples": samples,
                       "median_seconds": med, "phases_ms": breakdown}, f, indent=2)


if __name__ == "__main__":
    main()
