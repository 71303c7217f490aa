"""torchutil fold-bench: original versus FoldedCNN utilization and throughput
(torchutil/studies/foldbench.py)."""
from __future__ import annotations

import argparse

from torchutil.folding import MOST_FOLD
from torchutil.models import dtype_name
from torchutil.studies._common import TORCH_DTYPES, exit_on_error
from torchutil.studies.cli.args import (ALIASES_HELP, add_counters_argument, add_repeat_arguments, cuda_only,
                                        default_dtype, known_device, number, output_dir, pick_device, positive)


def add_parser(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("fold-bench", help="original versus FoldedCNN utilization and throughput")
    b.add_argument("--models", nargs="+", default=None,
                   help="names from torchutil.models.FOLD_BENCH_MODELS (default: all)")
    b.add_argument("--f", nargs="+", type=number(int, 1, f"an integer in 1..{MOST_FOLD:,}", high=MOST_FOLD),
                   default=[2, 3, 4], help=f"folding factors (default 2 3 4; at most {MOST_FOLD:,})")
    b.add_argument("--batch", type=positive, default=1024, help="images per forward (default 1024)")
    b.add_argument("--dtype", type=dtype_name, choices=sorted(TORCH_DTYPES), default=None,
                   help=f"default float16 on CUDA, float32 on CPU ({ALIASES_HELP})")
    b.add_argument("--device", type=known_device, default="auto", help="auto (CUDA if present), cpu, cuda, ...")
    add_repeat_arguments(b)
    b.add_argument("--cuda-graph", action="store_true", help="time CUDA-graph replays")
    b.add_argument("--fuse-bn", action="store_true",
                   help="fuse each BatchNorm into the conv before it (original and folded alike)")
    b.add_argument("--cudnn-benchmark", action="store_true",
                   help="let cuDNN time its algorithms per shape (torch.backends.cudnn.benchmark)")
    b.add_argument("--multiple-of", type=positive, default=1,
                   help="round folded widths to a multiple of this (default 1: floor(C sqrt(f)))")
    b.add_argument("--out", type=output_dir, default="fold-bench", help="output folder (default ./fold-bench)")
    add_counters_argument(b)
    b.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchutil.studies import foldbench
    from torchutil.models import FOLD_BENCH_MODELS

    device = pick_device(args.device)
    dtype = args.dtype or default_dtype(device)
    cuda_only(device, (dtype == "tf32", "--dtype tf32", "TF32 is a CUDA tensor-core format (on a CPU: float32)"),
              (args.cuda_graph, "--cuda-graph", "it times CUDA-graph replays"))
    with exit_on_error():
        rows = foldbench.run_fold_bench(args.models or list(FOLD_BENCH_MODELS), args.f, device=str(device),
                                        batch=args.batch, dtype=dtype, warmup=args.warmup, iters=args.iters,
                                        cuda_graph=args.cuda_graph, fuse_bn=args.fuse_bn,
                                        multiple_of=args.multiple_of, cudnn_benchmark=args.cudnn_benchmark,
                                        counters=args.counters)
    print(f"fold-bench: batch {args.batch}, {dtype}, on {device}, "
          f"{'CUDA graph' if args.cuda_graph else 'eager'}{', BatchNorm fused' if args.fuse_bn else ''}"
          f"{', cuDNN autotuned' if args.cudnn_benchmark else ''}"
          f"{f', widths rounded to multiples of {args.multiple_of}' if args.multiple_of > 1 else ''}")
    print(foldbench.format_table(rows))
    written = foldbench.write_outputs(rows, args.out)
    print(f"wrote {', '.join(written)} in {args.out}")
    return 0
