"""Is the default call a reward? Twelve calls of `torchutil.profile(model, x)` with its defaults
per configuration, repeated in separate processes, and how much what they report varies.

For each configuration and process it gives the mean utilization, its CV over the calls (the
sample standard deviation over the mean), the CV of the utilization over kernel time, and each
call's own 95 % interval; then the level of every later process against the first (mean
utilization, process k / process 1 - 1). A reward that varies by more than the differences
between candidates ranks them by luck: the targets are a CV of at most 1 % and a process-to-process
level within 1 % on every row. Extra timings (--timings eager auto) add rows with that argument.

    python benchmarks/results/bench_repeatability.py                        # issue #19's table (CUDA)
    python benchmarks/results/bench_repeatability.py --device cpu --configs resnet18:1 --calls 12
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import torch

import torchutil
from torchutil.models import DTYPES
from torchutil.studies._common import Setup

DEFAULT_CONFIGS = ["convnext_tiny:8", "efficientnet_b0:1", "densenet121:16", "mobilenet_v2:1", "resnet50:32",
                   "resnet50:1", "mobilenet_v3_large:64"]


def cv(values: list[float]) -> float:
    """Coefficient of variation in percent (sample standard deviation over the mean)."""
    finite = [v for v in values if v == v]
    if len(finite) < 2 or statistics.fmean(finite) == 0:
        return float("nan")
    return 100 * statistics.stdev(finite) / statistics.fmean(finite)


def measure(args: argparse.Namespace) -> dict:
    """One process's rows: every configuration and timing, args.calls calls each."""
    device = torch.device(args.device)
    on_cuda = device.type == "cuda"
    dtype = DTYPES[args.dtype or ("float16" if on_cuda else "float32")]
    rows = []
    for config in args.configs:
        name, _, batch_text = config.partition(":")
        batch = int(batch_text or 1)
        model, x = Setup.on(device, dtype).classifier(name, batch, args.image_size)  # channels_last on CUDA
        for timing in args.timings:
            kwargs = {} if timing == "default" else {"timing": timing}
            results = [torchutil.profile(model, x, **kwargs) for _ in range(args.calls)]
            util = [r.utilization for r in results]
            rows.append({
                "model": name, "batch": batch, "timing": timing,
                "timing_mode": results[-1].timing_mode, "timing_note": results[-1].timing_note,
                "utilization_mean": statistics.fmean(util), "utilization_cv_percent": cv(util),
                "kernel_utilization_cv_percent": cv([r.kernel_utilization for r in results]),
                "median_relative_ci_percent": 100 * statistics.median(r.seconds_relative_ci for r in results),
                "median_call_ms": 1e3 * statistics.median(r.call_seconds for r in results),
                "utilization": util,
            })
            print(f"  pid {os.getpid()}: {name} b{batch} {timing}: {rows[-1]['timing_mode']}", flush=True)
    where = torch.cuda.get_device_name(device) if on_cuda else f"CPU ({torch.get_num_threads()} threads)"
    return {"device": where, "dtype": str(dtype), "torch": torch.__version__, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, help="model:batch pairs")
    ap.add_argument("--timings", nargs="+", default=["default"],
                    help="'default' (no timing argument: the call a user writes), or timing modes")
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--processes", type=int, default=2, help="separate processes, one after the other")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, help="default float16 on CUDA, float32 on CPU")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)  # a process's own JSON output
    args = ap.parse_args()
    if args.child:
        with open(args.child, "w") as f:
            json.dump(measure(args), f)
        return
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for p in range(args.processes):
            out = os.path.join(tmp, f"p{p}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", out, *sys.argv[1:]]
            subprocess.run(cmd, check=True)
            with open(out) as f:
                runs.append(json.load(f))
    first = runs[0]
    print(f"\n{args.calls} calls of torchutil.profile(model, x) per row and process, {args.processes} processes, "
          f"on {first['device']}, torch {first['torch']}, {first['dtype']}")
    head = f"{'model':<20}{'batch':>6}  {'timing':<9}{'mode':<11}{'util %':>9}"
    head += "".join(f"{'CV % p' + str(p + 1):>10}" for p in range(args.processes))
    head += "".join(f"{'level p' + str(p + 1):>11}" for p in range(1, args.processes))
    head += f"{'kernel CV %':>13}{'own CI %':>10}{'call ms':>9}"
    print(head)
    worst_cv, worst_level = 0.0, 0.0
    for i, r in enumerate(first["rows"]):
        same = [run["rows"][i] for run in runs]
        line = (f"{r['model']:<20}{r['batch']:>6}  {r['timing']:<9}{r['timing_mode']:<11}"
                f"{100 * r['utilization_mean']:>9.3f}")
        for s in same:
            line += f"{s['utilization_cv_percent']:>10.2f}"
            worst_cv = max(worst_cv, s["utilization_cv_percent"])
        for s in same[1:]:
            level = 100 * (s["utilization_mean"] / r["utilization_mean"] - 1)
            line += f"{level:>+10.2f}%"
            worst_level = max(worst_level, abs(level))
        line += f"{r['kernel_utilization_cv_percent']:>13.3f}{r['median_relative_ci_percent']:>10.3f}"
        line += f"{r['median_call_ms']:>9.1f}"
        print(line)
    print(f"worst CV {worst_cv:.2f} % (target <= 1 %), worst process-to-process level {worst_level:.2f} % "
          "(target <= 1 %)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
