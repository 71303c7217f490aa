"""What kernel tracing costs, and whether CUPTI slows the process after a trace.

CUPTI stays attached to a process after its activities are disabled, and Kineto found training
10-20 % slower after a profile until cuptiFinalize detached it (pytorch/pytorch#146604). For each
setting (--settings) a fresh process measures: 13 plain eager forwards back to back with one
synchronization, before any trace and after one traced call; then rounds in random order of
torch.ops.util.profile traced and untraced, eager and in the default (graph) timing, and on a
one-kernel model (CUPTI's set-up and tear-down alone). Medians over the rounds, with quartiles;
and which share of a traced call's kernel time is attributed to ops. The settings:

  default   no setting: capture nodes (as capture below)
  markers   TORCHUTIL_CUPTI_CORRELATION=markers: the counted forward runs eagerly, traced, its
            launches correlated by op markers, no API records
  graph     TORCHUTIL_CUPTI_CORRELATION=graph: graph timing counts in the capture, whose graph
            nodes carry their op to the traced replays' kernels (no eager traced forward; CUPTI's
            callback subscriber for the capture); eager timing: markers
  capture   TORCHUTIL_CUPTI_CORRELATION=capture (the default): as graph, with the nodes' ops
            from CUDA's capture queries (no CUPTI callback); eager timing counts in a capture that
            is never replayed and attributes its traced eager forwards against the nodes; kernel
            records on from the traced forwards only
  recordcapture  capture, with the kernel records on from the trace's start, through the capture
            and the warm-up replays (TORCHUTIL_CUPTI_RECORD_CAPTURE=1, the behaviour before)
  api       TORCHUTIL_CUPTI_CORRELATION=api: CUPTI's runtime and driver API records
  teardown  api, and CUPTI detached after every trace (TORCHUTIL_CUPTI_TEARDOWN=1)
  kernels   TORCHUTIL_CUPTI_CORRELATION=0: kernel records alone, attributed to no op

    python benchmarks/cost/trace_cost.py --model resnet50 --batch 1
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


SETTINGS = {"default": {}, "markers": {"TORCHUTIL_CUPTI_CORRELATION": "markers"}, "graph": {"TORCHUTIL_CUPTI_CORRELATION": "graph"},
            "capture": {"TORCHUTIL_CUPTI_CORRELATION": "capture"},
            "recordcapture": {"TORCHUTIL_CUPTI_CORRELATION": "capture", "TORCHUTIL_CUPTI_RECORD_CAPTURE": "1"},
            "api": {"TORCHUTIL_CUPTI_CORRELATION": "api"},
            "teardown": {"TORCHUTIL_CUPTI_CORRELATION": "api", "TORCHUTIL_CUPTI_TEARDOWN": "1"},
            "kernels": {"TORCHUTIL_CUPTI_CORRELATION": "0"}}


def child(args: argparse.Namespace) -> dict:
    import torch

    import torchutil
    from torchutil.studies._common import Setup

    dev = torch.device("cuda")
    model, x = Setup.on(dev, torch.half).classifier(args.model, args.batch)  # channels_last on CUDA
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
        call(model, x)()
        out["plain after a default trace"] = [timed(plain) for _ in range(args.rounds)]
        call(model, x, timing="eager")()
        out["plain after one trace"] = [timed(plain) for _ in range(args.rounds)]
        r = torchutil.profile(model, x)
        out["attributed"] = 1.0 - r.unattributed_kernel_seconds / r.kernel_seconds
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
        stages: dict[str, dict[str, list[float]]] = {k: {} for k in variants if "traced" in k and "untraced" not in k}
        rng = random.Random(0)
        for _ in range(args.rounds):
            order = list(variants)
            rng.shuffle(order)
            for k in order:
                torchutil._C._trace_stages()  # starts the sums from zero
                samples[k].append(timed(variants[k]))
                if k in stages:
                    for stage, (_, seconds) in torchutil._C._trace_stages().items():
                        stages[k].setdefault(stage, []).append(seconds)
        out.update(samples)
        out["stages"] = stages
    out["device"] = torch.cuda.get_device_name(dev)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--processes", type=int, default=2, help="fresh processes per setting")
    ap.add_argument("--settings", nargs="+", default=["default", "markers"], choices=list(SETTINGS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--report", default=None, metavar="JSON", help="print the report of a saved --json and exit")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args)))
        return
    if args.report:
        with open(args.report) as f:
            report(json.load(f))
        return
    runs: dict[str, list[dict]] = {}
    for setting in args.settings:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHUTIL_CUPTI_")}
        env.update(SETTINGS[setting])
        cmd = [sys.executable, os.path.abspath(__file__), "--child", *sys.argv[1:]]
        for _ in range(args.processes):
            text = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
            runs.setdefault(setting, []).append(
                json.loads(next(line[7:] for line in text.splitlines() if line.startswith("RESULT "))))
    data = {"args": vars(args), "runs": runs}
    report(data)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=2)


def report(data: dict) -> None:
    """Prints what a run measured: per setting, the lingering slowdown and tracing's cost per
    process, and a table of every variant with the rounds of all its processes pooled. (Files
    written before the processes were kept hold the first process of each setting only.)"""
    args = data["args"]
    runs = {t: r if isinstance(r, list) else [r] for t, r in data["runs"].items()}
    names = [k for k in next(iter(runs.values()))[0] if k not in ("device", "attributed", "stages")
             and all(k in r for rs in runs.values() for r in rs)]

    def med(run: dict, k: str) -> float:
        return statistics.median(run[k])

    first = next(iter(runs.values()))[0]
    print(f"{args['model']} b{args['batch']} fp16 on {first['device']}: {args['rounds']} rounds in random order per "
          f"process, processes per setting: " + ", ".join(f"{t} {len(r)}" for t, r in runs.items()))
    for t, rs in runs.items():
        after_default = [r for r in rs if "plain after a default trace" in r]  # files before it: none
        print(f"setting {t}: per process, plain forwards after one eager trace / before any "
              + ", ".join(f"{med(r, 'plain after one trace') / med(r, 'plain before any trace'):.3f}" for r in rs)
              + ("; after one default trace / before any " + ", ".join(
                  f"{med(r, 'plain after a default trace') / med(r, 'plain before any trace'):.3f}" for r in after_default)
                 if after_default else "")
              + "; tracing adds (ms) eager " + ", ".join(f"{1e3 * (med(r, 'eager traced') - med(r, 'eager untraced')):.2f}" for r in rs)
              + ", default " + ", ".join(f"{1e3 * (med(r, 'default traced') - med(r, 'default untraced')):.2f}" for r in rs)
              + "; eager traced call / plain loop " + ", ".join(f"{med(r, 'eager traced') / med(r, 'plain (13 forwards)'):.3f}" for r in rs)
              + "; kernel time attributed to ops " + ", ".join(f"{max(0.0, 100 * r['attributed']):.1f} %" for r in rs if "attributed" in r))
    for t, ratios in data.get("lingering", {}).items():  # files written before: every process's ratio
        print(f"setting {t}: plain forwards after one trace / before it, all {len(ratios)} processes: "
              + ", ".join(f"{r:.3f}" for r in ratios))
    print("ms per call, median (q1-q3) of the rounds of all processes of a setting")
    print(f"{'':<24}" + "".join(f"{'setting ' + t:>26}" for t in runs))
    for k in names:
        cells = []
        for rs in runs.values():
            v = [x for r in rs for x in r[k]]
            q = statistics.quantiles(v, n=4, method="inclusive")
            cells.append(f"{1e3 * statistics.median(v):>10.2f} ({1e3 * q[0]:.2f}-{1e3 * q[2]:.2f})")
        print(f"{k:<24}" + "".join(f"{c:>26}" for c in cells))
    for t, rs in runs.items():
        staged = [r["stages"] for r in rs if "stages" in r]  # files before it: none
        if not staged:
            continue
        print(f"setting {t}: where a traced call's tracing goes (torchutil._C._trace_stages), ms per call, "
              "median of the rounds of all its processes")
        stage_names = list(next(iter(staged[0].values())))
        print(f"{'':<16}" + "".join(f"{n:>12}" for n in stage_names) + f"{'sum':>10}")
        for v in staged[0]:
            per = {n: [x for st in staged for x in st[v][n]] for n in stage_names}
            meds = [1e3 * statistics.median(per[n]) for n in stage_names]
            print(f"{v:<16}" + "".join(f"{m:>12.3f}" for m in meds) + f"{sum(meds):>10.3f}")

if __name__ == "__main__":
    main()
