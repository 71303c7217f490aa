"""Is utilization repeatable enough to be a reward? Twelve profile calls in a row, in one
process, per (model, batch, timing), and the coefficient of variation of what they report.

For each configuration it prints the mean utilization, its CV over the calls, the CV of the
utilization over kernel time (the GPU's own view, from the CUPTI trace), the CV of bandwidth
utilization, and the median relative half-width of each call's own 95 % interval. A reward that
varies by more than the differences between candidates ranks them by luck: the target is a CV of
at most 1 % in the repeatable timing modes.

    python benchmarks/bench_repeatability.py                              # the issue's table (CUDA)
    python benchmarks/bench_repeatability.py --device cpu --models resnet18 --batches 1 --timings eager
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch

import torchutil
from torchutil.models import DTYPES, build_classifier

DEFAULT_CONFIGS = ["resnet50:1", "resnet50:32", "mobilenet_v3_large:64"]


def cv(values: list[float]) -> float:
    """Coefficient of variation in percent (sample standard deviation over the mean)."""
    finite = [v for v in values if v == v]
    if len(finite) < 2 or statistics.fmean(finite) == 0:
        return float("nan")
    return 100 * statistics.stdev(finite) / statistics.fmean(finite)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, help="model:batch pairs")
    ap.add_argument("--timings", nargs="+", default=["eager", "auto"],
                    help="timing modes; 'auto+ci' is auto with --target-ci")
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--target-ci", type=float, default=0.005, help="for the auto+ci timing")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, help="default float16 on CUDA, float32 on CPU")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    device = torch.device(args.device)
    on_cuda = device.type == "cuda"
    dtype = DTYPES[args.dtype or ("float16" if on_cuda else "float32")]
    where = torch.cuda.get_device_name(device) if on_cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(f"{args.calls} calls of torchutil.profile(warmup={args.warmup}, iters={args.iters}) per row, one "
          f"process, on {where}, torch {torch.__version__}, {dtype}, "
          f"{'channels_last' if on_cuda else 'contiguous'}")
    rows = []
    for config in args.configs:
        name, _, batch_text = config.partition(":")
        batch = int(batch_text or 1)
        model = build_classifier(name).eval().to(device=device, dtype=dtype)
        x = torch.randn(batch, 3, args.image_size, args.image_size, device=device, dtype=dtype)
        if on_cuda:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        for timing in args.timings:
            kwargs = dict(warmup=args.warmup, iters=args.iters, timing=timing.removesuffix("+ci"),
                          module_paths=False)
            if timing.endswith("+ci"):
                kwargs.update(target_ci=args.target_ci, max_time=2.0)
            results = [torchutil.profile(model, x, **kwargs) for _ in range(args.calls)]
            util = [r.utilization for r in results]
            row = {
                "model": name, "batch": batch, "timing": timing,
                "timing_mode": results[-1].timing_mode, "timing_note": results[-1].timing_note,
                "utilization_mean": statistics.fmean(util),
                "utilization_min": min(util), "utilization_max": max(util),
                "utilization_cv_percent": cv(util),
                "kernel_utilization_cv_percent": cv([r.kernel_utilization for r in results]),
                "bandwidth_utilization_mean": statistics.fmean(r.bandwidth_utilization for r in results),
                "bandwidth_utilization_cv_percent": cv([r.bandwidth_utilization for r in results]),
                "median_relative_ci_percent": 100 * statistics.median(r.seconds_relative_ci for r in results),
                "median_iterations": statistics.median(r.iterations for r in results),
                "utilization": util,
            }
            rows.append(row)
            print(f"  {name} b{batch} {timing}: done ({row['timing_mode']})", flush=True)
    print(f"\n{'model':<20}{'batch':>6}  {'timing':<10}{'util %':>9}{'range %':>17}{'CV %':>8}"
          f"{'kernel CV %':>13}{'bw util %':>11}{'bw CV %':>9}{'own CI %':>10}{'iters':>7}")
    for r in rows:
        print(f"{r['model']:<20}{r['batch']:>6}  {r['timing']:<10}{100 * r['utilization_mean']:>9.3f}"
              f"{100 * r['utilization_min']:>8.3f}-{100 * r['utilization_max']:<8.3f}"
              f"{r['utilization_cv_percent']:>8.2f}{r['kernel_utilization_cv_percent']:>13.3f}"
              f"{100 * r['bandwidth_utilization_mean']:>11.3f}{r['bandwidth_utilization_cv_percent']:>9.2f}"
              f"{r['median_relative_ci_percent']:>10.3f}{r['median_iterations']:>7.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "device": where, "torch": torch.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
