"""What the study commands' parsers share: argument types (a bad value is refused by argparse,
with the argument's name), the device and dtype defaults, the timing and counter options, and
UsageError for contradictions argparse cannot see."""
from __future__ import annotations

import argparse
import math
import os
from typing import Any, Callable, Sequence

import torch

from torchutil import _C
from torchutil._ops import CHOICES, OPTIONS, OPTION_DEFAULTS as _D
from torchutil.models import DTYPE_ALIASES

#: What the --dtype options say of the other spellings they take (torchutil.models.dtype_name).
ALIASES_HELP = f"{', '.join(DTYPE_ALIASES)} too, as torchutil.peak_flops takes them"

__all__ = ["ALIASES_HELP", "UsageError", "accuracy_csv", "add_counters_argument", "add_peak_argument", "add_repeat_arguments",
           "add_timing_arguments", "cuda_only", "default_dtype",
           "db_file", "existing_dir", "existing_file", "finite", "fraction", "indices", "known_device",
           "nonnegative", "nonnegative_float", "number", "option_type", "output_dir", "output_file", "pick_device",
           "positive", "positive_float", "probability", "results_db", "seeds", "timing"]


class UsageError(Exception):
    """A contradiction between arguments that argparse cannot see: exit 2, like its own errors."""


def number(kind: type, low: float, what: str, strict: bool = False, high: float = math.inf) -> Callable[[str], Any]:
    """An argparse type: `kind` (int or float) >= low (> low when strict), <= high."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or not (value > low if strict else value >= low) or value > high:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value
    parse.__name__ = what  # argparse names the type by it in "invalid ... value"
    return parse


positive = number(int, 1, "an integer >= 1")
nonnegative = number(int, 0, "an integer >= 0")
positive_float = number(float, 0.0, "a number > 0", strict=True)
nonnegative_float = number(float, 0.0, "a number >= 0")
finite = number(float, -math.inf, "a finite number")


def option_type(name: str) -> Callable[[str], Any]:
    """An argparse type for the profile option `name`: its row's kind and range (the options
    table, csrc/core/Options.h), refused in the table's words ("expected an integer in [1, 100],
    got 101")."""
    row = OPTIONS[name]
    kind = {"int": int, "float": float}[row["type"].rstrip("?")]
    low, high, what = row["low"], row["high"], row["range"]

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        above = value > low if row["low_open"] else value >= low
        below = value < high if row["high_open"] else value <= high
        if not (above and below):  # NaN is neither
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value
    parse.__name__ = what  # argparse names the type by it in "invalid ... value"
    return parse


def probability(text: str) -> float:
    value = nonnegative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {text}")
    return value


def fraction(text: str) -> float:
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1), got {text}")
    return value


def known_device(text: str) -> str:
    """auto, cpu, cuda or cuda:N, and only a device this machine has."""
    if text == "auto":
        return text
    try:
        dev = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; use auto, cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"torchutil runs on cpu or cuda, got {text!r}")
    if dev.type == "cpu" and dev.index not in (None, 0):
        raise argparse.ArgumentTypeError(f"{text}: there is one CPU device, cpu (or cpu:0)")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text}: CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return text


def _nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def output_file(text: str) -> str:
    """A file the command can create or overwrite ('-': stdout), checked before any work."""
    if text == "-":
        return text
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: {parent} is not a writable directory")
    return text


def db_file(text: str) -> str:
    """A results db the command writes (output_file), which must be a regular file or missing:
    not a FIFO (opening it would block for ever) nor a symbolic link to a missing file (the db
    would be made wherever the link points)."""
    output_file(text)
    if os.path.islink(text) and not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text} is a symbolic link to a missing file ({os.readlink(text)}); give "
                                         f"the path where the db is to be made")
    if os.path.exists(text) and not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{text} is not a regular file")
    return text


db_file.__name__ = "results db"


def output_dir(text: str) -> str:
    """A folder that exists or can be made, checked before any work."""
    existing = _nearest_existing(text)
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK):
        what = "is not a directory" if not os.path.isdir(existing) else "is not writable"
        raise argparse.ArgumentTypeError(f"cannot write into {text}: {existing} {what}")
    return text


def _existing(is_kind: Callable[[str], bool], noun: str) -> Callable[[str], str]:
    """An argparse type: a path that exists and is a `noun` (is_kind: os.path.isfile, isdir)."""
    def parse(text: str) -> str:
        if not is_kind(text):
            raise argparse.ArgumentTypeError(f"no such {noun}: {text}" if not os.path.exists(text)
                                             else f"{text} is not a {noun}")
        return text
    parse.__name__ = f"existing {noun}"
    return parse


existing_file = _existing(os.path.isfile, "file")
existing_dir = _existing(os.path.isdir, "folder")


def results_db(text: str) -> str:
    """A results db file of nas evaluate, or a packaged sweep: builtin:NAME."""
    from torchutil.studies.nas_evaluate import BUILTIN, BUILTIN_DBS

    if text.startswith(BUILTIN):
        if text.removeprefix(BUILTIN) not in BUILTIN_DBS:
            raise argparse.ArgumentTypeError(f"no packaged sweep {text!r}; they are "
                                             + ", ".join(BUILTIN + n for n in BUILTIN_DBS))
        return text
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"no such file: {text} (a db of nas evaluate; without a sweep of your "
                                         f"own, {BUILTIN}h200-auto reads the packaged H200 sweep)")
    return existing_file(text)


results_db.__name__ = "results db"


def accuracy_csv(text: str) -> str:
    return text if text == "packaged" else existing_file(text)


def indices(text: str) -> list[int]:
    from torchutil.studies.nas_evaluate import parse_indices

    try:
        return parse_indices(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("torchutil.nas: ")) from None


MOST_SEEDS = 10_000  # searches per strategy: each is --iterations policy samples


def seeds(text: str) -> Sequence[int]:
    """'10' -> seeds 0..9 (a range: nothing is built for a count that is refused); '3,5,8' ->
    those seeds. At most MOST_SEEDS of them."""
    count = number(int, 1, f"a number of seeds in 1..{MOST_SEEDS:,} or a list '3,5,8'", high=MOST_SEEDS)
    if "," in text:
        words = text.split(",")
        if len(words) > MOST_SEEDS:
            raise argparse.ArgumentTypeError(f"expected at most {MOST_SEEDS:,} seeds, got {len(words):,}")
        values = [nonnegative(s) for s in words]
        if len(set(values)) != len(values):
            raise argparse.ArgumentTypeError(f"repeated seeds in {text!r}")
        return values
    return range(count(text))


def cuda_only(device: torch.device, *asked: tuple[bool, str, str]) -> None:
    """UsageError (exit 2, before any work) for the first (asked, option, what it is) whose
    option was asked for while device is not CUDA."""
    if device.type == "cuda":
        return
    for on, option, what in asked:
        if on:
            raise UsageError(f"{option}: {what}, which needs a CUDA device; got {device}")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def default_dtype(dev: torch.device) -> str:
    return "float16" if dev.type == "cuda" else "float32"


def add_repeat_arguments(p: argparse.ArgumentParser, what: str = "forwards", target_ci: bool = False) -> None:
    """--warmup and --iters (and with target_ci, --target-ci and --max-time): the types, ranges
    and defaults of torchutil.profile's options (the options table, csrc/core/Options.h)."""
    p.add_argument("--warmup", type=option_type("warmup"), default=_D["warmup"],
                   help=f"untimed {what} first (default {_D['warmup']})")
    p.add_argument("--iters", type=option_type("iters"), default=_D["iters"],
                   help=f"timed {what} (default {_D['iters']}{'; with --target-ci: at least that many' if target_ci else ''})")
    if target_ci:
        p.add_argument("--target-ci", type=option_type("target_ci"), default=_D["target_ci"],
                       help="repeat until the median time is known to +-this fraction (0.005: +-0.5 %%)")
        p.add_argument("--max-time", type=option_type("max_time"), default=_D["max_time"],
                       help=f"seconds of timing at most, with --target-ci (default {_D['max_time']:g})")


def add_peak_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--peak", default=_D["peak"], choices=CHOICES["peak"],
                   help=f"where the peak FLOP/s comes from (default {_D['peak']})")


def add_timing_arguments(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--timing", choices=CHOICES["timing"], default=None,
                   help=f"how forwards are timed: eager, CUDA-graph replays, or auto (replays where the "
                        f"forward captures, else eager); default {default}")
    p.add_argument("--cuda-graph", action="store_true", help="same as --timing cuda_graph")


def timing(args: argparse.Namespace, default: str | None = None) -> str | None:
    """--timing / --cuda-graph; None leaves the library's default (auto on CUDA, eager elsewhere).
    Their rule is the options table's (csrc/core/Options.h), checked by C++ before any work."""
    try:
        _C._check_options({"timing": args.timing, "cuda_graph": args.cuda_graph})
    except ValueError as e:
        raise UsageError(str(e).removeprefix("torchutil: ")) from None
    return "cuda_graph" if args.cuda_graph else (args.timing or default)


def add_counters_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--counters", nargs="+", choices=CHOICES["counters"], default=None,
                   help="also read the GPU's hardware counters (CUDA; docs/counters.md): hardware FLOPs "
                        "beside the counted ones, throughputs, the PM timeline")



def add_energy_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--energy", action="store_true",
                   help="also measure joules per forward, watts, FLOPs and inputs per joule (NVML on a GPU, "
                        "RAPL on a CPU; docs/energy.md)")
    p.add_argument("--energy-window", type=option_type("energy_window"), default=_D["energy_window"],
                   help=f"seconds of forwards the energy windows span, with --energy (default {_D['energy_window']:g})")
    p.add_argument("--energy-windows", type=option_type("energy_windows"), default=_D["energy_windows"],
                   help=f"how many windows energy_window is split into; the interval comes from their spread, "
                        f"with --energy (default {_D['energy_windows']})")
