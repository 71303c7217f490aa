"""torchutil profile [MODEL]: the summary and top ops of a torchvision model (the default command)."""
from __future__ import annotations

import argparse
import sys

import torch

from torchutil.models import DTYPES, build_classifier, classifier_image_size
from torchutil.profiler import profile
from torchutil.studies._common import Setup, atomic_open, exit_on_error
from torchutil.studies.cli.args import (add_energy_arguments, add_timing_arguments, default_dtype, fraction,
                                        known_device, nonnegative, output_file, pick_device, positive,
                                        positive_float, timing)

DEFAULT_MODEL = "resnet50"


def build_model(name: str) -> torch.nn.Module:
    """build_classifier for the command line: an unknown name ends the program with the list."""
    with exit_on_error():
        return build_classifier(name)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="profile a torchvision classification model")
    p.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                   help=f"torchvision model name (default {DEFAULT_MODEL})")
    p.add_argument("--batch", type=positive, default=None, help="batch size (default 32 on CUDA, 4 on CPU)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                   help="default float16 on CUDA, float32 on CPU")
    p.add_argument("--device", type=known_device, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="channels_last memory format (default on for CUDA)")
    p.add_argument("--image-size", type=positive, default=None, help="input height and width (default 224)")
    p.add_argument("--warmup", type=nonnegative, default=3)
    p.add_argument("--iters", type=positive, default=10, help="timed forwards (with --target-ci: at least)")
    add_timing_arguments(p, default="auto on CUDA (graph replays where the forward captures), eager elsewhere")
    p.add_argument("--target-ci", type=fraction, default=None,
                   help="repeat until the median time is known to +-this fraction (0.005: +-0.5 %%)")
    p.add_argument("--max-time", type=positive_float, default=2.0, help="seconds of timing at most, with --target-ci")
    p.add_argument("--peak", default="auto", choices=["auto", "datasheet", "computed", "measured"])
    add_energy_arguments(p)
    p.add_argument("--top", type=nonnegative, default=10, help="how many ops to list")
    p.add_argument("--json", type=output_file, default=None,
                   help="also write the full result as JSON here ('-': stdout, the text then goes to stderr)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    mode = timing(args)
    dev = pick_device(args.device)
    on_cuda = dev.type == "cuda"
    dtype_name = args.dtype or default_dtype(dev)
    batch = args.batch or (32 if on_cuda else 4)
    setup = Setup.on(dev, DTYPES[dtype_name], args.channels_last)
    size = args.image_size or classifier_image_size(args.model)
    model = setup.model(build_model(args.model))
    x = setup.input(batch, 3, size, size)

    where = torch.cuda.get_device_name(dev) if on_cuda else "CPU"
    # With --json - the JSON is stdout's only content; the text goes to stderr.
    text = sys.stderr if args.json == "-" else sys.stdout
    print(f"torchutil: {args.model}, batch {batch}, {dtype_name}, "
          f"{'channels_last' if setup.channels_last else 'contiguous'}, on {dev} ({where})", file=text)
    result = profile(model, x, warmup=args.warmup, iters=args.iters, timing=mode,
                     target_ci=args.target_ci, max_time=args.max_time, peak=args.peak, energy=args.energy,
                     energy_window=args.energy_window)
    print(result.format(top=args.top), file=text)
    if dev.type == "cpu":
        print("note: on a CPU the peak is a timed GEMM of this machine, so utilization says how "
              "close the forward comes to this CPU's own matrix-multiply rate.", file=text)
    if args.json == "-":
        print(result.to_json(indent=2))
    elif args.json:
        text = result.to_json(indent=2)
        with atomic_open(args.json) as f:
            f.write(text)
        print(f"wrote {args.json}")
    return 0
