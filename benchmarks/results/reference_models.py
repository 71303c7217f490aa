"""Utilization of the models in ../shared/MISSION.md's reference table, next to the figures
measured there (H200, torch 2.11, fp16, channels_last, eager):

    python benchmarks/results/reference_models.py [--json out.json]

Runs torchutil.profile with kernel tracing on each (model, batch); resnet50 at batch 1 is also
run with CUDA-graph replay. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import json

import torch

import torchutil
from torchutil.studies._common import Setup

# (model, batch, graph) -> utilization in % of 989.4 TFLOP/s, from MISSION.md.
REFERENCE = {
    ("resnet50", 1, False): 0.26, ("resnet50", 32, False): 6.2, ("resnet50", 256, False): 14.0,
    ("resnet50", 1, True): 0.90,
    ("mobilenet_v3_large", 256, False): 1.45, ("efficientnet_b0", 256, False): 1.47,
    ("convnext_tiny", 256, False): 10.3, ("vgg16", 256, False): 26.8,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    device = torch.device("cuda")
    rows = []
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; torchutil build {torchutil.build_info()}")
    print(f"{'model':<20}{'batch':>6}{'mode':>11}{'util %':>9}{'ref %':>8}{'kern util %':>12}"
          f"{'busy %':>8}{'ms/fwd':>9}{'kern ms':>9}{'kernels':>8}  trace")
    for (name, batch, graph), ref in REFERENCE.items():
        model, x = Setup.on(device, torch.float16).classifier(name, batch)  # channels_last on CUDA
        r = torchutil.profile(model, x, warmup=5, iters=args.iters, cuda_graph=graph)
        row = {"model": name, "batch": batch, "mode": r.timing_mode, "reference_percent": ref,
               **{k: getattr(r, k) for k in ("utilization", "kernel_utilization", "gpu_busy_fraction",
                                             "seconds", "kernel_seconds", "kernels_per_forward", "flops",
                                             "peak_flops_per_second")},
               "peak_source": r.peak_source, "trace_status": r.trace_status,
               "unknown_ops": r.unknown_ops}
        rows.append(row)
        print(f"{name:<20}{batch:>6}{r.timing_mode:>11}{100 * r.utilization:>9.2f}{ref:>8.2f}"
              f"{100 * r.kernel_utilization:>12.2f}{100 * r.gpu_busy_fraction:>8.1f}"
              f"{1e3 * r.seconds:>9.3f}{1e3 * r.kernel_seconds:>9.3f}{r.kernels_per_forward:>8.0f}  {r.trace_status}")
        del model, x
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
