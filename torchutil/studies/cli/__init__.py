"""Command line: torchutil profile [MODEL] [options]          (or python -m torchutil ...)
               torchutil nas {evaluate,merge,correlate,search} [options]
               torchutil survey [options]      (torchutil/studies/survey)
               torchutil fold-bench [options]  (torchutil/studies/foldbench.py)
               torchutil coded {train,evaluate,cost,simulate,serve} [options]  (torchutil/studies/coded.py)

Each command's parser and what it runs are one module here, with its add_parser(subparsers):
profile.py, nas.py, survey.py, fold_bench.py, coded.py; args.py holds the argument types they
share. This module assembles them and runs one.

With no arguments it profiles resnet50 on the best device present (CUDA if available, else
the CPU) and prints the summary and the top ops. `nas` runs the NATS-Bench studies
(torchutil/studies/nas_evaluate.py, nas_correlate.py, nas_search.py).

Habits of pip and torch.utils.benchmark: a bad argument ends the command with one line and exit
status 2 (argparse's), a failure found while running (a missing or foreign db, an unwritable
output) with one line and status 1, never a traceback; `--json -` writes to stdout; a closed
pipe (`| head`) ends the command quietly with status 0; Ctrl-C with status 130.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
import warnings
from typing import Any, Iterator, Sequence

import torch

from torchutil._version import __version__
from torchutil.studies._common import fail
from torchutil.studies.cli import coded, fold_bench, nas, profile, survey
from torchutil.studies.cli.args import UsageError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchutil", description="GPU/CPU utilization of PyTorch inference.")
    parser.add_argument("--version", action="version",
                        version=f"torchutil {__version__} (torch {torch.__version__}, {_build_text()})")
    sub = parser.add_subparsers(dest="command")
    for command in (profile, nas, coded, survey, fold_bench):
        command.add_parser(sub)
    return parser


def _build_text() -> str:
    from torchutil import build_info

    info = build_info()
    return ", ".join(f"{k} {'on' if info[k] else 'off'}" for k in ("cuda", "cupti"))


def _show_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    print(f"warning: {message}", file=sys.stderr)


@contextlib.contextmanager
def _one_line_errors(prog: str) -> Iterator[None]:
    """What a user can cause and fix ends the command with one line instead of a traceback: a
    contradiction between arguments (exit 2), torchutil's own ValueErrors (their message says
    what and why), sqlite and file-system errors (exit 1)."""
    try:
        yield
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except ValueError as e:
        if not str(e).startswith("torchutil"):
            raise
        raise SystemExit(str(e)) from None
    except sqlite3.Error as e:  # the nas commands name the db in theirs; this is the last resort
        raise fail(f"sqlite: {e}") from None
    except (MemoryError, torch.OutOfMemoryError) as e:
        raise fail(_out_of_memory(e)) from None
    except RuntimeError as e:
        if "can't allocate memory" not in str(e):  # the CPU allocator's out-of-memory error
            raise
        raise fail(_out_of_memory(e)) from None
    except OSError as e:
        if e.filename is None or isinstance(e, BrokenPipeError):
            raise
        raise fail(f"{e.strerror}: {e.filename}") from None


def _out_of_memory(e: BaseException) -> str:
    """One line for an allocation that failed: what was asked (the allocator's own words, cut)."""
    why = " ".join(str(e).split())
    return (f"out of memory ({why[:160]}{'...' if len(why) > 160 else ''}); the arguments ask for more memory "
            f"than this machine has: use a smaller batch, image size or number of queries")


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (`| head`): stop quietly, like pip. Later writes (the
    interpreter's final flush) go to /dev/null instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The `torchutil` command (and python -m torchutil); returns the exit status."""
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except KeyboardInterrupt:
        print("torchutil: interrupted", file=sys.stderr)
        return 130


def _run(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["profile", *argv]
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    finally:
        sys.stdout.flush()  # --help, --version: a closed pipe raises here, inside main
    if args.command is None:
        parser.print_help()
        return 2
    with warnings.catch_warnings(), _one_line_errors(parser.prog):
        warnings.showwarning = _show_warning
        status = args.func(args)
        sys.stdout.flush()
    return status
