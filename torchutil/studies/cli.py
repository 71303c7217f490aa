"""Command line: torchutil profile [MODEL] [options]          (or python -m torchutil ...)
               torchutil nas {evaluate,merge,correlate,search} [options]
               torchutil survey [options]      (torchutil/studies/survey.py)
               torchutil fold-bench [options]  (torchutil/studies/foldbench.py)
               torchutil coded {train,evaluate,cost,simulate} [options]  (torchutil/studies/coded.py)

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
import json
import math
import os
import sqlite3
import sys
import warnings
from dataclasses import replace
from typing import Any, Callable, Iterator, Sequence

import torch

from torchutil._version import __version__
from torchutil.models import DTYPES, build_classifier, classifier_image_size
from torchutil.profiler import profile
from torchutil.studies._common import exit_on_error, fail

DEFAULT_MODEL = "resnet50"


# --- argument types: a bad value is refused by argparse, with the argument's name -------------


def _number(kind: type, low: float, what: str, strict: bool = False) -> Callable[[str], Any]:
    """An argparse type: `kind` (int or float) >= low (> low when strict)."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or not (value > low if strict else value >= low):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value
    parse.__name__ = what  # argparse names the type by it in "invalid ... value"
    return parse


_positive = _number(int, 1, "an integer >= 1")
_nonnegative = _number(int, 0, "an integer >= 0")
_positive_float = _number(float, 0.0, "a number > 0", strict=True)
_nonnegative_float = _number(float, 0.0, "a number >= 0")
_finite = _number(float, -math.inf, "a finite number")


def _probability(text: str) -> float:
    value = _nonnegative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {text}")
    return value


def _fraction(text: str) -> float:
    value = _positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1), got {text}")
    return value


def _device(text: str) -> str:
    """auto, cpu, cuda or cuda:N, and only a device this machine has."""
    if text == "auto":
        return text
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; use auto, cpu, cuda or cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"torchutil runs on cpu or cuda, got {text!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text}: CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return text


def _nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _output_file(text: str) -> str:
    """A file the command can create or overwrite ('-': stdout), checked before any work."""
    if text == "-":
        return text
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: {parent} is not a writable directory")
    return text


def _output_dir(text: str) -> str:
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


_existing_file = _existing(os.path.isfile, "file")
_existing_dir = _existing(os.path.isdir, "folder")


def _accuracy_csv(text: str) -> str:
    return text if text == "packaged" else _existing_file(text)


def _indices(text: str) -> list[int]:
    from torchutil.studies.nas_evaluate import parse_indices

    try:
        return parse_indices(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("torchutil.nas: ")) from None


def _seeds(text: str) -> list[int]:
    """'10' -> seeds 0..9; '3,5,8' -> those seeds."""
    if "," in text:
        seeds = [_nonnegative(s) for s in text.split(",")]
        if len(set(seeds)) != len(seeds):
            raise argparse.ArgumentTypeError(f"repeated seeds in {text!r}")
        return seeds
    return list(range(_positive(text)))


def _pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _default_dtype(device: torch.device) -> str:
    return "float16" if device.type == "cuda" else "float32"


def build_model(name: str) -> torch.nn.Module:
    """build_classifier for the command line: an unknown name ends the program with the list."""
    with exit_on_error():
        return build_classifier(name)


def _profile_command(args: argparse.Namespace) -> int:
    timing = _timing(args)
    device = _pick_device(args.device)
    on_cuda = device.type == "cuda"
    dtype_name = args.dtype or _default_dtype(device)
    dtype = DTYPES[dtype_name]
    batch = args.batch or (32 if on_cuda else 4)
    channels_last = on_cuda if args.channels_last is None else args.channels_last
    size = args.image_size or classifier_image_size(args.model)

    model = build_model(args.model).eval().to(device=device, dtype=dtype)
    x = torch.randn(batch, 3, size, size, device=device, dtype=dtype)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    where = torch.cuda.get_device_name(device) if on_cuda else "CPU"
    # With --json - the JSON is stdout's only content; the text goes to stderr.
    text = sys.stderr if args.json == "-" else sys.stdout
    print(f"torchutil: {args.model}, batch {batch}, {dtype_name}, "
          f"{'channels_last' if channels_last else 'contiguous'}, on {device} ({where})", file=text)
    result = profile(model, x, warmup=args.warmup, iters=args.iters, timing=timing,
                     target_ci=args.target_ci, max_time=args.max_time, peak=args.peak)
    print(result.format(top=args.top), file=text)
    if device.type == "cpu":
        print("note: on a CPU the peak is a timed GEMM of this machine, so utilization says how "
              "close the forward comes to this CPU's own matrix-multiply rate.", file=text)
    if args.json == "-":
        print(result.to_json(indent=2))
    elif args.json:
        with open(args.json, "w") as f:
            f.write(result.to_json(indent=2))
        print(f"wrote {args.json}")
    return 0


# --- nas ---------------------------------------------------------------------------------------


def _nas_evaluate(args: argparse.Namespace) -> int:
    from torchutil.studies import nas_evaluate as ev

    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = _pick_device(args.device)
    on_cuda = device.type == "cuda"
    config = ev.EvalConfig(
        dataset=args.dataset, batch=args.batch or (256 if on_cuda else 8),
        dtype=args.dtype or _default_dtype(device), device=str(device),
        warmup=args.warmup, iters=args.iters, timing=_timing(args, default="auto"), trace=args.trace,
        channels_last=on_cuda if args.channels_last is None else args.channels_last)
    indices = args.indices if args.indices is not None else ev.parse_indices(None)
    # Default: on CUDA half the host's cores over the ranks of this host, at most 8 a GPU.
    workers = args.workers or ev.default_workers(device, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    kwargs = dict(commit_every=args.commit_every, cudnn_benchmark=args.cudnn_benchmark,
                  progress=not args.no_progress, rebuild=args.rebuild, workers=workers)
    if world > 1:
        import torch.distributed as dist

        from torchutil.studies.nas_distributed import distributed_sweep

        dist.init_process_group("nccl" if on_cuda else "gloo")
        try:
            stats = distributed_sweep(config, indices, args.db, **kwargs)
        finally:
            dist.destroy_process_group()
    else:
        stats = ev.sweep(config, indices, args.db, **kwargs)
    who = f"rank {stats.rank}/{stats.world_size}: " if stats.world_size > 1 else ""
    print(f"{who}{config.dataset} batch {config.batch} {config.dtype} on {config.device} ({config.mode}"
          f"{', traced' if config.trace else ''}): evaluated {stats.evaluated} archs, skipped "
          f"{stats.skipped} already in the db, in {stats.seconds:.1f} s")
    if stats.evaluated:
        print(f"{who}{1e3 * stats.seconds_per_arch:.2f} ms per arch over {stats.workers} worker(s); projected "
              f"full space (15,625 archs over {stats.world_size} rank(s)): "
              f"{stats.projected_full_space_seconds / 60:.1f} min")
        print(f"{who}{stats.stage_line()}")
    if stats.rank == 0:
        print(f"results in {args.db}")
    return 0


def _nas_merge(args: argparse.Namespace) -> int:
    from torchutil.studies import nas_evaluate as ev

    shards = args.shards or list(ev.iter_shards(args.db))
    if not shards:
        raise fail(f"no shards given and none found next to {args.db}")
    for shard in shards:
        ev.check_db(shard)  # every source readable before anything is written
    copied = ev.merge(args.db, shards)
    print(f"merged {copied} rows from {len(shards)} shard(s) into {args.db}")
    return 0


def _csv_path(text: str) -> str | None:
    return None if text == "packaged" else text


@contextlib.contextmanager
def _plots_need_matplotlib() -> Iterator[None]:
    try:
        yield
    except ModuleNotFoundError as e:
        if e.name != "matplotlib":
            raise
        raise SystemExit("torchutil.nas: the plots need matplotlib; pip install matplotlib "
                         "(or pass --no-plots)") from None


def _nas_correlate(args: argparse.Namespace) -> int:
    from torchutil.studies import nas_correlate as co

    results, joined = co.correlate(args.db, _csv_path(args.csv))
    print(co.format_table(results))
    with _plots_need_matplotlib():
        written = co.write_outputs(args.out, results, joined, plots=not args.no_plots)
    for path in written:
        print(f"wrote {path}")
    return 0


def _nas_search(args: argparse.Namespace) -> int:
    from torchutil.studies import nas_search as se

    space = se.SearchSpace.from_db(args.db, args.dataset, _csv_path(args.csv), dataset=args.measured_dataset,
                                   batch=args.batch, dtype=args.dtype, device=args.device, mode=args.mode)
    measured, total = int(space.available.sum()), space.available.size
    if measured < total:
        # The policy samples the whole space: a partial sweep would end in resampling loops.
        raise fail(f"{args.db} holds {measured:,} of the {total:,} cells for this config; nas search samples "
                   f"the whole space: finish the sweep first (nas evaluate --db {args.db} resumes where it stopped)")
    strategies = se.default_strategies(args.reward_metric, args.weight)
    if args.strategies:
        wanted = args.strategies.split(",")
        unknown = set(wanted) - {s.name for s in strategies}
        if unknown:
            raise fail(f"unknown strategies {sorted(unknown)}; they are " + ", ".join(s.name for s in strategies))
        strategies = [s for s in strategies if s.name in wanted]
    cost = se.CostModel(args.eval_base_seconds, args.eval_seconds_per_mmac, args.measure_seconds)
    runs = se.run_strategies(space, strategies, args.seeds, iterations=args.iterations,
                             time_budget=args.time_budget, lr=args.lr, momentum=args.momentum,
                             threshold=args.threshold, quantile=args.quantile,
                             quantile_warmup=args.quantile_warmup, penalty=args.penalty, cost=cost)
    print(f"REINFORCE on {space.dataset} accuracy, {int(space.available.sum())} measured archs, "
          f"{len(args.seeds)} seed(s), {args.iterations} iterations:")
    print(se.format_summary(se.summarize(runs, space)))
    with _plots_need_matplotlib():
        written = se.write_outputs(args.out, runs, space, plots=not args.no_plots)
    for path in written:
        print(f"wrote {path}")
    return 0


def _add_nas_parser(sub: argparse._SubParsersAction) -> None:
    nas = sub.add_parser("nas", help="NATS-Bench studies: evaluate the space, correlate, search")
    nsub = nas.add_subparsers(dest="nas_command", required=True)

    p = nsub.add_parser("evaluate", help="profile every arch (or a slice) into a SQLite db; resumable; "
                                         "shards over ranks under torchrun")
    p.add_argument("--db", type=_output_file, default="results.sqlite", help="SQLite db (shards: <stem>.rank<r>.sqlite)")
    p.add_argument("--indices", type=_indices, default=None,
                   help="'0:100' (cells 0..99), '5', '1,7,9:12' (default: all 15,625)")
    p.add_argument("--dataset", default="cifar10", choices=["cifar10", "cifar100", "ImageNet16-120"],
                   help="the network's input size and classes")
    p.add_argument("--batch", type=_positive, default=None, help="default 256 on CUDA, 8 on CPU")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default float16 on CUDA, float32 on CPU")
    p.add_argument("--device", type=_device, default="auto", help="auto, cpu, cuda (under torchrun: cuda:LOCAL_RANK)")
    p.add_argument("--warmup", type=_nonnegative, default=1)
    p.add_argument("--iters", type=_positive, default=3)
    _add_timing_arguments(p, default="auto")
    p.add_argument("--trace", action="store_true", help="record kernels with CUPTI (kernel-time columns)")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="default on for CUDA")
    p.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    p.add_argument("--commit-every", type=_positive, default=1,
                   help="archs per SQLite transaction (default 1: a kill loses only the arch in flight)")
    p.add_argument("--rebuild", action="store_true",
                   help="build every network afresh (default: swap edge ops in one prebuilt network)")
    p.add_argument("--workers", type=_positive, default=None,
                   help="processes per GPU: each builds and captures cells on the host while one at a time "
                        "replays on the GPU (default on CUDA: half the cores over this host's GPUs, at most 8 a GPU; "
                        "1 elsewhere)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_nas_evaluate)

    p = nsub.add_parser("merge", help="merge shard dbs into one")
    p.add_argument("--db", type=_output_file, default="results.sqlite")
    p.add_argument("shards", nargs="*", type=_existing_file, help="default: <db stem>.rank*.sqlite next to --db")
    p.set_defaults(func=_nas_merge)

    p = nsub.add_parser("correlate", help="Spearman / Kendall of utilization (and throughput, FLOPs, "
                                          "params) with accuracy")
    p.add_argument("--db", type=_existing_file, default="results.sqlite", help="a db written by nas evaluate")
    p.add_argument("--csv", type=_accuracy_csv, default="packaged", help="accuracy table (default: the packaged one)")
    p.add_argument("--out", type=_output_dir, default="nas-correlate", help="output folder (default ./nas-correlate)")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=_nas_correlate)

    p = nsub.add_parser("search", help="simulated REINFORCE NAS with utilization reward and filtering")
    p.add_argument("--db", type=_existing_file, default="results.sqlite", help="a db written by nas evaluate")
    p.add_argument("--csv", type=_accuracy_csv, default="packaged", help="accuracy table (default: the packaged one)")
    p.add_argument("--dataset", default="cifar10", choices=["cifar10", "cifar100", "ImageNet16-120"],
                   help="whose accuracy is the reward")
    p.add_argument("--measured-dataset", default=None, choices=["cifar10", "cifar100", "ImageNet16-120"],
                   help="pick the db's measurement config: dataset")
    p.add_argument("--batch", type=_positive, default=None, help="... batch")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="... dtype")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="... device type")
    p.add_argument("--mode", choices=["auto", "cuda_graph", "eager"], default=None, help="... mode")
    p.add_argument("--seeds", type=_seeds, default="10", help="N (seeds 0..N-1) or a list '3,5,8'")
    p.add_argument("--iterations", type=_positive, default=200, help="policy samples per search")
    p.add_argument("--time-budget", type=_positive_float, default=None, help="simulated seconds per search")
    p.add_argument("--lr", type=_positive_float, default=0.01)
    p.add_argument("--momentum", type=_nonnegative_float, default=0.9, help="of the baseline's moving average")
    p.add_argument("--reward-metric", default="utilization", choices=["utilization", "throughput"])
    p.add_argument("--weight", type=_finite, default=0.1, help="of the normalized metric in the reward")
    p.add_argument("--strategies", default=None, help="comma list of names (default: all 6)")
    p.add_argument("--threshold", type=_finite, default=None,
                   help="threshold filter's utilization (default: the space's --quantile quantile)")
    p.add_argument("--quantile", type=_fraction, default=0.25)
    p.add_argument("--quantile-warmup", type=_nonnegative, default=10, help="candidates measured before filtering")
    p.add_argument("--penalty", type=_finite, default=0.0, help="reward of a filtered candidate")
    p.add_argument("--eval-base-seconds", type=_nonnegative_float, default=600.0, help="cost model: per full evaluation")
    p.add_argument("--eval-seconds-per-mmac", type=_nonnegative_float, default=30.0, help="cost model: per MMAC")
    p.add_argument("--measure-seconds", type=_nonnegative_float, default=None,
                   help="cost model: per utilization measurement (default: the db's eval_seconds)")
    p.add_argument("--out", type=_output_dir, default="nas-search", help="output folder (default ./nas-search)")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=_nas_search)


def _survey_command(args: argparse.Namespace) -> int:
    from torchutil.studies import survey

    device = _pick_device(args.device)
    on_cuda = device.type == "cuda"
    config = survey.SurveyConfig(
        models=args.models or survey.default_models(),
        batches=args.batches or ([1, 8, 32, 128, 256] if on_cuda else [1, 8]),
        dtypes=args.dtypes or (list(survey.DTYPES) if on_cuda else ["float32"]),
        modes=args.modes or (list(survey.MODES) if on_cuda else ["eager"]),
        device=str(device), out=args.out, image_size=args.image_size,
        channels_last=args.channels_last, warmup=args.warmup, iters=args.iters, peak=args.peak,
        progress=not args.no_progress, retry_failed=args.retry_failed, counters=args.counters)
    if args.report_only:
        rows = survey.load_results(args.out)
        if not rows:
            raise fail(f"--report-only: no results in {os.path.join(args.out, survey.RESULTS)}")
    else:
        rows = survey.run_survey(config)
    for note in config.skipped:
        print(f"note: {note}")
    try:
        written = survey.write_outputs(rows, config, plots=True)
    except ImportError:
        written = survey.write_outputs(rows, config, plots=False)
        print("note: no plots: matplotlib is not installed (pip install matplotlib: the plot extra)")
    failed = [r for r in rows if r.get("status") == "error"]
    print(f"survey: {len(rows)} configurations in {args.out} ({len(failed)} failed); wrote "
          + ", ".join(written))
    if failed:
        for r in failed:
            print(f"failed: {r['model']} batch {r['batch']} {r['dtype']} {r['mode']}: {r.get('error', '')}",
                  file=sys.stderr)
        print(f"survey: {len(failed)} configuration(s) failed; after a fix, rerun with --retry-failed",
              file=sys.stderr)
        return 1
    return 0


def _fold_bench_command(args: argparse.Namespace) -> int:
    from torchutil.studies import foldbench
    from torchutil.models import FOLD_BENCH_MODELS

    device = _pick_device(args.device)
    dtype = args.dtype or _default_dtype(device)
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


def _add_survey_parsers(sub: argparse._SubParsersAction) -> None:
    from torchutil.studies.survey import DTYPES as SURVEY_DTYPES, MODES as SURVEY_MODES

    s = sub.add_parser("survey", help="utilization of many CNNs over batch sizes, dtypes, modes")
    s.add_argument("--models", nargs="+", default=None,
                   help="torchvision names or timm:<name> (default: every torchvision classification model)")
    s.add_argument("--batches", nargs="+", type=_positive, default=None,
                   help="batch sizes (default 1 8 32 128 256 on CUDA, 1 8 on CPU)")
    s.add_argument("--dtypes", nargs="+", choices=SURVEY_DTYPES, default=None,
                   help="default all four on CUDA, float32 on CPU (tf32 runs on CUDA only)")
    s.add_argument("--modes", nargs="+", choices=SURVEY_MODES, default=None,
                   help="default both on CUDA, eager on CPU (cuda_graph runs on CUDA only)")
    s.add_argument("--device", type=_device, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    s.add_argument("--out", type=_output_dir, default="survey", help="output folder (default ./survey); a rerun resumes")
    s.add_argument("--image-size", type=_positive, default=None, help="default 224 (299 for inception_v3)")
    s.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="channels_last memory format (default on for CUDA)")
    s.add_argument("--warmup", type=_nonnegative, default=3)
    s.add_argument("--iters", type=_positive, default=10)
    s.add_argument("--peak", default="auto", choices=["auto", "datasheet", "computed", "measured"])
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--report-only", action="store_true",
                   help="measure nothing: write the CSV, JSON, plots and report from OUT/survey.jsonl")
    s.add_argument("--retry-failed", action="store_true",
                   help="run again the configurations that failed in an earlier run of OUT")
    _add_counters_argument(s)
    s.set_defaults(func=_survey_command)

    b = sub.add_parser("fold-bench", help="original versus FoldedCNN utilization and throughput")
    b.add_argument("--models", nargs="+", default=None,
                   help="names from torchutil.models.FOLD_BENCH_MODELS (default: all)")
    b.add_argument("--f", nargs="+", type=_positive, default=[2, 3, 4], help="folding factors (default 2 3 4)")
    b.add_argument("--batch", type=_positive, default=1024, help="images per forward (default 1024)")
    b.add_argument("--dtype", choices=sorted(SURVEY_DTYPES), default=None,
                   help="default float16 on CUDA, float32 on CPU")
    b.add_argument("--device", type=_device, default="auto", help="auto (CUDA if present), cpu, cuda, ...")
    b.add_argument("--warmup", type=_nonnegative, default=3)
    b.add_argument("--iters", type=_positive, default=10)
    b.add_argument("--cuda-graph", action="store_true", help="time CUDA-graph replays")
    b.add_argument("--fuse-bn", action="store_true",
                   help="fuse each BatchNorm into the conv before it (original and folded alike)")
    b.add_argument("--cudnn-benchmark", action="store_true",
                   help="let cuDNN time its algorithms per shape (torch.backends.cudnn.benchmark)")
    b.add_argument("--multiple-of", type=_positive, default=1,
                   help="round folded widths to a multiple of this (default 1: floor(C sqrt(f)))")
    b.add_argument("--out", type=_output_dir, default="fold-bench", help="output folder (default ./fold-bench)")
    _add_counters_argument(b)
    b.set_defaults(func=_fold_bench_command)


def _add_counters_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--counters", nargs="+", choices=["flops", "throughput", "timeline", "all"], default=None,
                   help="also read the GPU's hardware counters (CUDA; docs/counters.md): hardware FLOPs "
                        "beside the counted ones, throughputs, the PM timeline")


# --- coded ---------------------------------------------------------------------------------------


def _group_size(text: str) -> int:
    value = _positive(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2 (queries per group), got {text}")
    return value


def _print_json(args: argparse.Namespace, record: dict[str, Any], out: str, name: str) -> None:
    """record into OUT/name, and to --json (a file, or '-': stdout)."""
    from torchutil._json import json_safe
    from torchutil.studies._common import write_json

    write_json(os.path.join(out, name), record, indent=2)
    if args.json == "-":
        print(json.dumps(json_safe(record), indent=2))
    elif args.json:
        write_json(args.json, record, indent=2)


def _coded_train(args: argparse.Namespace) -> int:
    from torchutil.studies import coded as cs

    text = sys.stderr if args.json == "-" else sys.stdout
    device = _pick_device(args.device)
    config = cs.TrainConfig(dataset=args.dataset, data_dir=args.data_dir, k=args.k, paradigm=args.paradigm,
                            encoder=args.encoder, loss=args.loss, base=args.base, base_epochs=args.base_epochs,
                            epochs=args.epochs, batch_size=args.batch_size, groups_per_batch=args.groups_per_batch,
                            lr=args.lr, weight_decay=args.weight_decay, seed=args.seed)
    run = cs.train_run(config, args.out, device=device, restart=args.restart, progress=not args.no_progress,
                       log=lambda line: print(line, file=sys.stderr))
    metrics = cs.evaluate_run(run, device=device, passes=args.passes)
    print(f"coded train on {device}: " + cs.format_metrics(run, metrics), file=text)
    _print_json(args, cs.metrics_record(run, metrics, device=str(device)), args.out, "metrics.json")
    print(f"checkpoint and metrics in {args.out}", file=text)
    return 0


def _coded_evaluate(args: argparse.Namespace) -> int:
    from torchutil.studies import coded as cs

    text = sys.stderr if args.json == "-" else sys.stdout
    device = _pick_device(args.device)
    run = cs.load_run(args.run, data_dir=args.data_dir, device=device)
    metrics = cs.evaluate_run(run, device=device, passes=args.passes)
    print(f"coded evaluate {args.run} on {device}: " + cs.format_metrics(run, metrics), file=text)
    os.makedirs(args.out, exist_ok=True)
    _print_json(args, cs.metrics_record(run, metrics, device=str(device), run=args.run), args.out, "metrics.json")
    return 0


def _coded_cost(args: argparse.Namespace) -> int:
    from torchutil.studies import coded as cs

    device = _pick_device(args.device)
    names = [os.path.basename(os.path.normpath(r)) for r in args.runs]
    if len(set(names)) != len(names):
        raise UsageError(f"--runs: two runs share a folder name ({', '.join(names)}); the table names runs by it")
    runs = [(name, cs.load_run(folder, data_dir=args.data_dir)) for name, folder in zip(names, args.runs)]
    table = cs.cost_table(runs, device=device, dtype=DTYPES[args.dtype], batch=args.batch, warmup=args.warmup,
                          iters=args.iters, target_ci=args.target_ci, max_time=args.max_time)
    print(cs.format_cost(table))
    written = cs.write_cost(table, args.out)
    print(f"wrote {', '.join(written)} in {args.out}")
    return 0


def _coded_simulate(args: argparse.Namespace) -> int:
    from torchutil.coded import sim
    from torchutil.studies import coded as cs

    model = dict(queries=args.queries, arrivals=args.arrivals, straggler=args.straggler,
                 straggler_probability=args.straggler_probability, slowdown=args.slowdown, tail=args.tail,
                 failure_probability=args.failure_probability, seed=args.seed)
    if args.cost and args.service_seconds is not None:
        raise UsageError("--service-seconds contradicts --cost (the cost file gives the service times)")
    if args.cost:
        with open(args.cost) as f:
            try:
                cost = json.load(f)
            except json.JSONDecodeError as e:
                raise fail(f"{args.cost} is not JSON ({e})") from None
        run, config = cs.sim_config_from_cost(cost, args.run, **model)
    elif args.service_seconds is not None:
        run, config = None, sim.SimConfig(k=args.k, service_seconds=args.service_seconds,
                                          parity_seconds=args.parity_seconds, encode_seconds=args.encode_seconds,
                                          decode_seconds=args.decode_seconds, **model)
    else:
        raise UsageError("give --cost FILE (the cost.json of `coded cost`) or --service-seconds")
    for load in args.loads:
        replace(config, load=load).check()  # every load refused before any work
    summaries = sim.sweep(config, args.loads, args.policies)
    print(cs.format_simulation(summaries, config))
    with _plots_need_matplotlib():
        written = cs.write_simulation(summaries, config, args.out, run=run, plots=not args.no_plots)
    print(f"wrote {', '.join(written)} in {args.out}")
    return 0


def _add_coded_parser(sub: argparse._SubParsersAction) -> None:
    from torchutil.coded import codes, data, models, sim
    from torchutil.coded.train import LOSSES

    coded = sub.add_parser("coded", help="learned coded computation: train, evaluate, cost, simulate")
    csub = coded.add_subparsers(dest="coded_command", required=True)

    def common(p: argparse.ArgumentParser, out: str) -> None:
        p.add_argument("--device", type=_device, default="auto", help="auto (CUDA if present), cpu, cuda, ...")
        p.add_argument("--out", type=_output_dir, default=out, help=f"output folder (default ./{out})")

    def data_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", type=_existing_dir, default=None,
                       help="folder with the MNIST/Fashion IDX files or CIFAR-10 python batches (not for digits)")

    def metrics(p: argparse.ArgumentParser) -> None:
        p.add_argument("--passes", type=_positive, default=1, help="groupings of the test set evaluated (seeded)")
        p.add_argument("--json", type=_output_file, default=None,
                       help="also write the metrics JSON here ('-': stdout, the text then goes to stderr)")

    t = csub.add_parser("train", help="train F and a code (learned or parity model); resumes from OUT/checkpoint.pt")
    t.add_argument("--dataset", default="digits", choices=data.DATASETS,
                   help="digits (default: ships with scikit-learn), or mnist, fashion, cifar10 from --data-dir")
    data_dir(t)
    t.add_argument("--k", type=_group_size, default=2, help="queries per group (default 2)")
    t.add_argument("--paradigm", default="learned", choices=codes.PARADIGMS)
    t.add_argument("--encoder", default=None, choices=[e for es in codes.ENCODERS.values() for e in es],
                   help="learned: mlp (default), conv; parity: sum (default), concat (k = 2, 4)")
    t.add_argument("--loss", default=None, choices=LOSSES, help="default kl (learned), mse (parity)")
    t.add_argument("--base", default=None, choices=models.BASE_MODELS,
                   help="base model F (default mlp; resnet18 for cifar10)")
    t.add_argument("--base-epochs", type=_positive, default=30, help="epochs of F (default 30)")
    t.add_argument("--epochs", type=_positive, default=100, help="epochs of the code (default 100)")
    t.add_argument("--batch-size", type=_positive, default=64, help="images per step of F's training")
    t.add_argument("--groups-per-batch", type=_positive, default=64, help="groups of k per step of the code's")
    t.add_argument("--lr", type=_positive_float, default=1e-3)
    t.add_argument("--weight-decay", type=_nonnegative_float, default=1e-5)
    t.add_argument("--seed", type=_nonnegative, default=0, help="weights, epoch order and the digits split")
    t.add_argument("--restart", action="store_true", help="start afresh, overwriting OUT/checkpoint.pt")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    metrics(t)
    common(t, "coded-train")
    t.set_defaults(func=_coded_train)

    e = csub.add_parser("evaluate", help="reconstruction and degraded-mode accuracy of a trained run")
    e.add_argument("--run", type=_existing_dir, default="coded-train", help="a coded train output folder")
    data_dir(e)
    metrics(e)
    common(e, "coded-evaluate")
    e.set_defaults(func=_coded_evaluate)

    c = csub.add_parser("cost", help="FLOPs, utilization and latency of F, encoder, parity model, decoder")
    c.add_argument("--runs", nargs="+", type=_existing_dir, default=["coded-train"],
                   help="coded train output folders (named by their folder names)")
    data_dir(c)
    c.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    c.add_argument("--batch", type=_positive, default=1,
                   help="queries per call of F (groups per call of the others); 1 for the simulation")
    c.add_argument("--warmup", type=_nonnegative, default=3)
    c.add_argument("--iters", type=_positive, default=10, help="timed calls (with --target-ci: at least)")
    c.add_argument("--target-ci", type=_fraction, default=None, help="repeat until the median is known to +-this")
    c.add_argument("--max-time", type=_positive_float, default=2.0, help="seconds of timing at most, with --target-ci")
    common(c, "coded-cost")
    c.set_defaults(func=_coded_cost)

    s = csub.add_parser("simulate", help="tail latency with stragglers: no redundancy, replication, code")
    s.add_argument("--cost", type=_existing_file, default=None, help="cost.json of coded cost (at --batch 1)")
    s.add_argument("--run", default=None, help="which run of the cost file (default: its first)")
    s.add_argument("--k", type=_positive, default=2, help="without --cost: queries per group")
    s.add_argument("--service-seconds", type=_positive_float, default=None, help="without --cost: F per query")
    s.add_argument("--parity-seconds", type=_nonnegative_float, default=None, help="default: --service-seconds")
    s.add_argument("--encode-seconds", type=_nonnegative_float, default=0.0)
    s.add_argument("--decode-seconds", type=_nonnegative_float, default=0.0)
    s.add_argument("--loads", nargs="+", type=_fraction, default=[0.3, 0.5, 0.7, 0.8, 0.9],
                   help="arrival rate / capacity of the k workers (default 0.3 0.5 0.7 0.8 0.9)")
    s.add_argument("--policies", nargs="+", choices=sim.POLICIES, default=list(sim.POLICIES))
    s.add_argument("--straggler", choices=sim.STRAGGLERS, default="bimodal", help="default bimodal")
    s.add_argument("--straggler-probability", type=_probability, default=0.02, help="bimodal: p (0.02)")
    s.add_argument("--slowdown", type=_number(float, 1.0, "a number >= 1"), default=10.0, help="bimodal: a straggler's factor (10)")
    s.add_argument("--tail", type=_nonnegative_float, default=1.0, help="shifted-exp: mean extra / service time")
    s.add_argument("--failure-probability", type=_probability, default=0.0,
                   help="a query's result never returns")
    s.add_argument("--arrivals", choices=["poisson", "periodic"], default="poisson")
    s.add_argument("--queries", type=_positive, default=200_000, help="simulated queries per policy and load")
    s.add_argument("--seed", type=_nonnegative, default=0)
    s.add_argument("--no-plots", action="store_true")
    s.add_argument("--out", type=_output_dir, default="coded-simulate", help="output folder (default ./coded-simulate)")
    s.set_defaults(func=_coded_simulate)


def _add_timing_arguments(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--timing", choices=["eager", "cuda_graph", "auto"], default=None,
                   help=f"how forwards are timed: eager, CUDA-graph replays, or auto (replays where the "
                        f"forward captures, else eager); default {default}")
    p.add_argument("--cuda-graph", action="store_true", help="same as --timing cuda_graph")


def _timing(args: argparse.Namespace, default: str | None = None) -> str | None:
    """--timing / --cuda-graph; None leaves the library's default (auto on CUDA, eager elsewhere)."""
    if args.cuda_graph and args.timing not in (None, "cuda_graph"):
        raise UsageError(f"--cuda-graph contradicts --timing {args.timing}")
    return "cuda_graph" if args.cuda_graph else (args.timing or default)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchutil", description="GPU/CPU utilization of PyTorch inference.")
    parser.add_argument("--version", action="version",
                        version=f"torchutil {__version__} (torch {torch.__version__}, {_build_text()})")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("profile", help="profile a torchvision classification model")
    p.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                   help=f"torchvision model name (default {DEFAULT_MODEL})")
    p.add_argument("--batch", type=_positive, default=None, help="batch size (default 32 on CUDA, 4 on CPU)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                   help="default float16 on CUDA, float32 on CPU")
    p.add_argument("--device", type=_device, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="channels_last memory format (default on for CUDA)")
    p.add_argument("--image-size", type=_positive, default=None, help="input height and width (default 224)")
    p.add_argument("--warmup", type=_nonnegative, default=3)
    p.add_argument("--iters", type=_positive, default=10, help="timed forwards (with --target-ci: at least)")
    _add_timing_arguments(p, default="auto on CUDA (graph replays where the forward captures), eager elsewhere")
    p.add_argument("--target-ci", type=_fraction, default=None,
                   help="repeat until the median time is known to +-this fraction (0.005: +-0.5 %%)")
    p.add_argument("--max-time", type=_positive_float, default=2.0, help="seconds of timing at most, with --target-ci")
    p.add_argument("--peak", default="auto", choices=["auto", "datasheet", "computed", "measured"])
    p.add_argument("--top", type=_nonnegative, default=10, help="how many ops to list")
    p.add_argument("--json", type=_output_file, default=None,
                   help="also write the full result as JSON here ('-': stdout, the text then goes to stderr)")
    p.set_defaults(func=_profile_command)
    _add_nas_parser(sub)
    _add_coded_parser(sub)
    _add_survey_parsers(sub)
    return parser


def _build_text() -> str:
    from torchutil import build_info

    info = build_info()
    return ", ".join(f"{k} {'on' if info[k] else 'off'}" for k in ("cuda", "cupti"))


class UsageError(Exception):
    """A contradiction between arguments that argparse cannot see: exit 2, like its own errors."""


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
    except OSError as e:
        if e.filename is None or isinstance(e, BrokenPipeError):
            raise
        raise fail(f"{e.strerror}: {e.filename}") from None


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
