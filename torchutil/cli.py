"""Command line: python -m torchutil profile [MODEL] [options].

With no arguments it profiles resnet50 on the best device present (CUDA if available, else
the CPU) and prints the summary and the top ops.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

import torch

from torchutil.profiler import profile

DEFAULT_MODEL = "resnet50"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}


def _pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"torchutil: --device {name}: CUDA is not available on this machine")
    return device


def build_model(name: str) -> torch.nn.Module:
    """A torchvision classification model by name, with random weights (weights=None)."""
    try:
        import torchvision
    except ImportError:
        raise SystemExit("torchutil: model names come from torchvision; pip install torchvision") from None
    available = torchvision.models.list_models(module=torchvision.models)
    if name not in available:
        raise SystemExit(
            f"torchutil: unknown model {name!r}; torchvision classification models are: "
            + ", ".join(sorted(available))
        )
    kwargs = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
    return torchvision.models.get_model(name, weights=None, **kwargs)


def _profile_command(args: argparse.Namespace) -> int:
    device = _pick_device(args.device)
    on_cuda = device.type == "cuda"
    dtype_name = args.dtype or ("float16" if on_cuda else "float32")
    dtype = DTYPES[dtype_name]
    batch = args.batch or (32 if on_cuda else 4)
    channels_last = on_cuda if args.channels_last is None else args.channels_last
    size = args.image_size or (299 if args.model == "inception_v3" else 224)

    model = build_model(args.model).eval().to(device=device, dtype=dtype)
    x = torch.randn(batch, 3, size, size, device=device, dtype=dtype)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    where = torch.cuda.get_device_name(device) if on_cuda else "CPU"
    print(f"torchutil: {args.model}, batch {batch}, {dtype_name}, "
          f"{'channels_last' if channels_last else 'contiguous'}, on {device} ({where})")
    result = profile(model, x, warmup=args.warmup, iters=args.iters, cuda_graph=args.cuda_graph,
                     peak=args.peak)
    print(result.format(top=args.top))
    if device.type == "cpu":
        print("note: on a CPU the peak is a timed GEMM of this machine, so utilization says how "
              "close the forward comes to this CPU's own matrix-multiply rate.")
    if args.json:
        with open(args.json, "w") as f:
            f.write(result.to_json(indent=2))
        print(f"wrote {args.json}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m torchutil",
                                     description="GPU/CPU utilization of PyTorch inference.")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("profile", help="profile a torchvision classification model")
    p.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                   help=f"torchvision model name (default {DEFAULT_MODEL})")
    p.add_argument("--batch", type=int, default=None, help="batch size (default 32 on CUDA, 4 on CPU)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                   help="default float16 on CUDA, float32 on CPU")
    p.add_argument("--device", default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="channels_last memory format (default on for CUDA)")
    p.add_argument("--image-size", type=int, default=None, help="input height and width (default 224)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--cuda-graph", action="store_true", help="time CUDA-graph replays")
    p.add_argument("--peak", default="auto", choices=["auto", "datasheet", "computed", "measured"])
    p.add_argument("--top", type=int, default=10, help="how many ops to list")
    p.add_argument("--json", default=None, help="also write the full result as JSON here")
    p.set_defaults(func=_profile_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["profile", *argv]
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 2
    return args.func(args)
