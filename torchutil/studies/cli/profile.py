"""torchutil profile [MODEL]: the summary and top ops of a classification model (the default command)."""
from __future__ import annotations

import argparse
import sys

import torch

from torchutil import models
from torchutil.models import DTYPES, SPECIALIZED, dtype_name, has_torchvision, torchvision_hint
from torchutil.peaks import peak_flops
from torchutil.profiler import profile
from torchutil.studies._common import Setup, StageLine, atomic_open, device_memory, exit_on_error
from torchutil.studies.cli.args import (ALIASES_HELP, UsageError, add_energy_arguments, add_peak_argument, add_repeat_arguments,
                                        add_timing_arguments, cuda_only, default_dtype, known_device, nonnegative, output_file,
                                        pick_device, positive, timing)

DEFAULT_MODEL = "resnet50"
# The default where torchvision is not installed, as with the CPU wheel of torch (which has no
# torchvision to match it): a CNN of torchutil.models that needs torch alone.
DEFAULT_MODEL_TORCH_ONLY = "spec_4conv_64"


def default_model() -> str:
    """DEFAULT_MODEL where torchvision can be imported, else DEFAULT_MODEL_TORCH_ONLY."""
    return DEFAULT_MODEL if has_torchvision() else DEFAULT_MODEL_TORCH_ONLY


def build_model(name: str) -> tuple[torch.nn.Module, int]:
    """The model and its input height and width (torchutil.models.build_model). A name it
    refuses ends the program with one line: the near names, or what the model needs."""
    with exit_on_error():
        return models.build_model(name)


def _model_help() -> str:
    """The model argument's help: with torchvision missing, its names are marked as needing it."""
    torch_only = ", ".join(SPECIALIZED)
    if has_torchvision():
        return (f"a torchvision classification model (resnet50, vit_b_16, ...), timm:<name>, or a CNN of "
                f"torchutil.models: {torch_only}, resnet18_cifar (default {DEFAULT_MODEL})")
    return (f"a CNN of torchutil.models: {torch_only} (default {DEFAULT_MODEL_TORCH_ONLY}); resnet18_cifar and "
            f"torchvision's classifiers (resnet50, ...) need torchvision, which is not installed "
            f"({torchvision_hint()}); timm:<name> needs timm")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="profile a classification model")
    p.add_argument("model", nargs="?", default=None, help=_model_help())
    p.add_argument("--batch", type=positive, default=None, help="batch size (default 32 on CUDA, 4 on CPU)")
    p.add_argument("--dtype", type=dtype_name, choices=sorted(DTYPES), default=None,
                   help=f"default float16 on CUDA, float32 on CPU ({ALIASES_HELP})")
    p.add_argument("--device", type=known_device, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="channels_last memory format (default on for CUDA)")
    p.add_argument("--image-size", type=positive, default=None,
                   help="input height and width (default the model's: 224 for most torchvision models)")
    add_repeat_arguments(p, target_ci=True)
    add_timing_arguments(p, default="auto on CUDA (graph replays where the forward captures), eager elsewhere")
    add_peak_argument(p)
    add_energy_arguments(p)
    p.add_argument("--top", type=nonnegative, default=10, help="how many ops to list")
    p.add_argument("--json", type=output_file, default=None,
                   help="also write the full result as JSON here ('-': stdout, the text then goes to stderr)")
    p.set_defaults(func=run)


def _check_input(name: str, batch: int, size: int, setup: Setup) -> None:
    """UsageError before anything is allocated: an input that alone takes more than half the
    device's memory (--image-size 100000: 120 GB), or a size the model cannot take (vgg11's
    five poolings at --image-size 1), found by a forward on the meta device."""
    need = batch * 3 * size * size * torch.empty((), dtype=setup.dtype).element_size()
    memory = device_memory(setup.device)
    if memory is not None and need > memory // 2:
        raise UsageError(f"--batch {batch} --image-size {size}: the input alone is {need / 1e9:,.1f} GB, more than "
                         f"half the {memory / 1e9:,.1f} GB of memory of {setup.device} (the activations need more); "
                         f"use a smaller batch or image size")
    with torch.device("meta"):
        meta = build_model(name)[0].eval()

    def fails_at(side: int) -> Exception | None:
        try:
            with torch.no_grad():
                meta(torch.empty(1, 3, side, side, device="meta"))
        except Exception as e:
            return e
        return None

    e = fails_at(size)
    # Refused only where the model's own size runs on meta: else meta is what failed, not the size.
    if e is not None and fails_at(build_model(name)[1]) is None:
        raise UsageError(f"--image-size {size}: {name} cannot take a {size}x{size} image "
                         f"({' '.join(str(e).split())})")


def run(args: argparse.Namespace) -> int:
    mode = timing(args)
    dev = pick_device(args.device)
    on_cuda = dev.type == "cuda"
    # Refused before the model is built (seconds for the large ones).
    cuda_only(dev, (mode == "cuda_graph", "--cuda-graph" if args.cuda_graph else "--timing cuda_graph",
                    "CUDA-graph replays"))
    dtype_name = args.dtype or default_dtype(dev)
    batch = args.batch or (32 if on_cuda else 4)
    setup = Setup.on(dev, DTYPES[dtype_name], args.channels_last)
    name = args.model or default_model()
    # With --json - the JSON is stdout's only content; the text goes to stderr, and no stage line.
    text = sys.stderr if args.json == "-" else sys.stdout
    stages = StageLine(enabled=args.json != "-")
    with stages.stage(f"building {name}"):
        model, size = build_model(name)
        size = args.image_size or size
        _check_input(name, batch, size, setup)
        model = setup.model(model)
        x = setup.input(batch, 3, size, size)

    where = torch.cuda.get_device_name(dev) if on_cuda else "CPU"
    if args.model is None and name != DEFAULT_MODEL:
        print(f"torchutil: torchvision is not installed, so the default model is {name} "
              f"(torchutil.models; {DEFAULT_MODEL} needs torchvision)", file=text)
    print(f"torchutil: {name}, batch {batch}, {dtype_name}, "
          f"{'channels_last' if setup.channels_last else 'contiguous'}, on {dev} ({where})", file=text)
    text.flush()
    with stages.stage(f"finding the peak FLOP/s of {dev} ({args.peak})"):
        peak_flops(dev, dtype_name, args.peak)  # kept by the process: the profile below reuses it
    with stages.stage(f"counting and timing {name}'s forwards"):
        result = profile(model, x, warmup=args.warmup, iters=args.iters, timing=mode,
                         target_ci=args.target_ci, max_time=args.max_time, peak=args.peak, energy=args.energy,
                         energy_window=args.energy_window,
                         energy_windows=args.energy_windows)
    print(result.format(top=args.top), file=text)
    if dev.type == "cpu" and result.peak_source.startswith("computed"):
        print("note: on a CPU the peak is computed from the CPU (cores x clock x FLOP per clock of its widest unit), "
              "so utilization says how much of this CPU's arithmetic the forward used.", file=text)
    elif dev.type == "cpu" and result.peak_source.startswith("measured"):
        print("note: the peak is a timed GEMM of this machine, so utilization says how close the forward comes to "
              "this CPU's own matrix-multiply rate, and moves with the machine's load.", file=text)
    if args.json == "-":
        print(result.to_json(indent=2))
    elif args.json:
        text = result.to_json(indent=2)
        with atomic_open(args.json) as f:
            f.write(text)
        print(f"wrote {args.json}")
    return 0
