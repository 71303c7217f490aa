"""torchutil nas {evaluate,merge,correlate,search}: the NATS-Bench studies
(torchutil/studies/nas_evaluate.py, nas_correlate.py, nas_search.py)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from torchutil._ops import CHOICES
from torchutil.models import DTYPES, dtype_name
from torchutil.studies._common import fail, plots_available, write_json
from torchutil.studies.cli.args import (ALIASES_HELP, UsageError, accuracy_csv, add_energy_arguments,
                                        add_timing_arguments, cuda_only, db_file, default_dtype, existing_file,
                                        finite, fraction, indices, known_device, nonnegative, nonnegative_float,
                                        number, option_type, output_dir, pick_device, positive,
                                        positive_float, results_db, seeds, timing)


def add_parser(sub: argparse._SubParsersAction) -> None:
    nas = sub.add_parser("nas", help="NATS-Bench studies: evaluate the space, correlate, search")
    nsub = nas.add_subparsers(dest="nas_command", required=True)

    p = nsub.add_parser("evaluate", help="profile every arch (or a slice) into a SQLite db; resumable; "
                                         "shards over ranks under torchrun")
    p.add_argument("--db", type=db_file, default="results.sqlite", help="SQLite db (shards: <stem>.rank<r>.sqlite)")
    p.add_argument("--indices", type=indices, default=None,
                   help="'0:100' (cells 0..99), '5', '1,7,9:12' (default: all 15,625)")
    p.add_argument("--dataset", default="cifar10", choices=["cifar10", "cifar100", "ImageNet16-120"],
                   help="the network's input size and classes")
    p.add_argument("--batch", type=positive, default=None, help="default 256 on CUDA, 8 on CPU")
    p.add_argument("--dtype", type=dtype_name, choices=sorted(DTYPES), default=None,
                   help=f"default float16 on CUDA, float32 on CPU ({ALIASES_HELP})")
    p.add_argument("--device", type=known_device, default="auto", help="auto, cpu, cuda (under torchrun: cuda:LOCAL_RANK)")
    # The sweep's own counts; the values they may take are the options' (csrc/core/Options.h).
    p.add_argument("--warmup", type=option_type("warmup"), default=1)
    p.add_argument("--iters", type=option_type("iters"), default=3)
    add_timing_arguments(p, default="auto")
    p.add_argument("--trace", action="store_true", help="record kernels with CUPTI (kernel-time columns)")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="default on for CUDA")
    p.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    p.add_argument("--commit-every", type=positive, default=1,
                   help="archs per SQLite transaction (default 1: a kill loses only the arch in flight)")
    p.add_argument("--rebuild", action="store_true",
                   help="build every network afresh (default: swap edge ops in one prebuilt network)")
    p.add_argument("--threads", type=positive, default=None,
                   help="threads of this process per GPU: each builds and captures cells on the host while one "
                        "at a time replays on the GPU, all in one CUDA context, so cells time as in a one-thread "
                        "sweep (default on CUDA: half the cores over this host's GPUs, at most 4 a GPU; 1 elsewhere, "
                        "and with --trace or --rebuild)")
    p.add_argument("--workers", type=positive, default=None, help=argparse.SUPPRESS)  # gone: run_evaluate says why
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run the cells on a Ray cluster (HOST:PORT, 'auto': the one started here; none: RAY_ADDRESS, else a "
                        "new local one), "
                        "one actor per GPU Ray reports (docs/engines.md)")
    p.add_argument("--ray-gpus", type=_gpu_share, default=1.0, help="GPUs per Ray actor (default 1: a context per GPU)")
    add_energy_arguments(p)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run_evaluate)

    p = nsub.add_parser("merge", help="merge shard dbs into one")
    p.add_argument("--db", type=db_file, default="results.sqlite")
    p.add_argument("shards", nargs="*", type=existing_file, help="default: <db stem>.rank*.sqlite next to --db")
    p.set_defaults(func=run_merge)

    p = nsub.add_parser("correlate", help="Spearman / Kendall of utilization (and throughput, FLOPs, "
                                          "params) with accuracy")
    p.add_argument("--db", type=results_db, default="results.sqlite",
                   help="a db written by nas evaluate, or builtin:h200-auto: the packaged H200 sweep")
    p.add_argument("--csv", type=accuracy_csv, default="packaged", help="accuracy table (default: the packaged one)")
    p.add_argument("--out", type=output_dir, default="nas-correlate", help="output folder (default ./nas-correlate)")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=run_correlate)

    p = nsub.add_parser("search", help="simulated REINFORCE NAS with utilization reward and filtering")
    p.add_argument("--db", type=results_db, default="results.sqlite",
                   help="a db written by nas evaluate, or builtin:h200-auto: the packaged H200 sweep")
    p.add_argument("--csv", type=accuracy_csv, default="packaged", help="accuracy table (default: the packaged one)")
    p.add_argument("--dataset", default="cifar10", choices=["cifar10", "cifar100", "ImageNet16-120"],
                   help="whose accuracy is the reward")
    p.add_argument("--measured-dataset", default=None, choices=["cifar10", "cifar100", "ImageNet16-120"],
                   help="pick the db's measurement config: dataset")
    p.add_argument("--batch", type=positive, default=None, help="... batch")
    p.add_argument("--dtype", type=dtype_name, choices=sorted(DTYPES), default=None, help="... dtype")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="... device type")
    p.add_argument("--mode", choices=CHOICES["timing"], default=None, help="... mode")
    p.add_argument("--seeds", type=seeds, default="10", help="N (seeds 0..N-1) or a list '3,5,8'")
    p.add_argument("--iterations", type=number(int, 1, f"an integer in 1..{MOST_ITERATIONS:,}", high=MOST_ITERATIONS),
                   default=200, help=f"policy samples per search (at most {MOST_ITERATIONS:,}; the space has 15,625 "
                                     f"cells)")
    p.add_argument("--time-budget", type=positive_float, default=None, help="simulated seconds per search")
    p.add_argument("--lr", type=positive_float, default=0.01)
    p.add_argument("--momentum", type=nonnegative_float, default=0.9, help="of the baseline's moving average")
    p.add_argument("--reward-metric", default="utilization", choices=["utilization", "throughput", "images_per_joule"],
                   help="the measured figure added to the reward (images_per_joule: a db of nas evaluate --energy)")
    p.add_argument("--weight", type=finite, default=0.1, help="of the normalized metric in the reward")
    p.add_argument("--strategies", default=None, help="comma list of names (default: all 6)")
    p.add_argument("--threshold", type=number(float, 0.0, "a utilization in [0, 1] (0.05 is 5 %%)", high=1.0),
                   default=None, help="threshold filter's utilization, in [0, 1] (default: the space's --quantile "
                                      "quantile)")
    p.add_argument("--quantile", type=fraction, default=0.25)
    p.add_argument("--quantile-warmup", type=nonnegative, default=10, help="candidates measured before filtering")
    p.add_argument("--penalty", type=finite, default=0.0, help="reward of a filtered candidate")
    p.add_argument("--eval-base-seconds", type=nonnegative_float, default=600.0, help="cost model: per full evaluation")
    p.add_argument("--eval-seconds-per-mmac", type=nonnegative_float, default=30.0, help="cost model: per MMAC")
    p.add_argument("--measure-seconds", type=nonnegative_float, default=None,
                   help="cost model: per utilization measurement (default: the db's eval_seconds)")
    p.add_argument("--out", type=output_dir, default="nas-search", help="output folder (default ./nas-search)")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=run_search)


# Policy samples of one search: beyond this a search has drawn every cell of the space many
# times over (10**15 ran without end).
MOST_ITERATIONS = 100_000


def _gpu_share(text: str) -> float:
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a share of one GPU in (0, 1], got {text}")
    return value


def run_evaluate(args: argparse.Namespace) -> int:
    from torchutil.studies import nas_evaluate as ev

    if args.workers is not None:
        raise UsageError(f"--workers is gone: {args.workers} processes on one GPU are as many CUDA contexts, and an H200 "
                         "times cells ~4.5 % faster while another context does GPU work, whatever lock they share "
                         "(Spearman 0.9965 against one process on cells 5000:8000). Use --threads (one context), "
                         "and for several processes torchutil.nas.service or --ray (docs/engines.md)")
    if args.ray is not None:
        from torchutil.studies.nas_ray import run_cli

        return run_cli(args)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = pick_device(args.device)
    on_cuda = device.type == "cuda"
    # Refused before the db is opened (an empty db was left behind).
    cuda_only(device, (args.trace, "--trace", "it records GPU kernels with CUPTI"),
              ((args.threads or 1) > 1, f"--threads {args.threads}", "threads share one GPU (CPU timings would share "
                                                                     "the cores they measure)"))
    config = ev.EvalConfig(
        dataset=args.dataset, batch=args.batch or (256 if on_cuda else 8),
        dtype=args.dtype or default_dtype(device), device=str(device),
        warmup=args.warmup, iters=args.iters, timing=timing(args, default="auto"), trace=args.trace,
        channels_last=on_cuda if args.channels_last is None else args.channels_last,
        energy=args.energy, energy_window=args.energy_window,
        energy_windows=args.energy_windows)
    indices = args.indices if args.indices is not None else ev.parse_indices(None)
    # Default: on CUDA threads over half the host's cores shared by the ranks of this host, at most
    # 4 a GPU; one thread where what is asked for does not combine with threads (sweep() refuses
    # an explicit --threads that does not).
    threads = args.threads
    if threads is None:
        alone = args.trace or args.rebuild
        threads = 1 if alone else ev.default_threads(device, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    kwargs = dict(commit_every=args.commit_every, cudnn_benchmark=args.cudnn_benchmark,
                  progress=not args.no_progress, rebuild=args.rebuild, threads=threads)
    if world > 1:
        import torch.distributed as dist

        from torchutil.studies.nas_distributed import distributed_sweep

        dist.init_process_group("nccl" if on_cuda else "gloo")
        try:
            stats = distributed_sweep(config, indices, args.db, **kwargs)
        finally:
            dist.destroy_process_group()
    else:
        from torchutil.studies.nas_db import hold_for_writing

        with hold_for_writing(args.db):  # before the worker dbs of an earlier run are merged
            stats = ev.sweep(config, indices, args.db, **kwargs)
    # Under torchrun a restarted worker says which restart it is (torchelastic's count).
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
    who = (f"rank {stats.rank}/{stats.world_size}{f' (restart {restart})' if restart else ''}: "
           if stats.world_size > 1 else "")
    print(f"{who}{config.dataset} batch {config.batch} {config.dtype} on {config.device} ({config.mode}"
          f"{', traced' if config.trace else ''}{', energy' if config.energy else ''}): evaluated {stats.evaluated} archs, skipped "
          f"{stats.skipped} already in the db, in {stats.seconds:.1f} s")
    if stats.evaluated:
        over = f"{stats.threads} thread(s)"
        print(f"{who}{1e3 * stats.seconds_per_arch:.2f} ms per arch over {over}; projected "
              f"full space (15,625 archs over {stats.world_size} rank(s)): "
              f"{stats.projected_full_space_seconds / 60:.1f} min")
        print(f"{who}{stats.stage_line()}")
    if stats.rank == 0:
        print(f"results in {args.db}")
    return 0


def run_merge(args: argparse.Namespace) -> int:
    from torchutil.studies import nas_evaluate as ev

    shards = args.shards or list(ev.iter_shards(args.db))
    if not shards:
        raise fail(f"no shards given and none found next to {args.db}")
    for i, shard in enumerate(shards):
        if os.path.exists(args.db) and os.path.samefile(shard, args.db):
            raise UsageError(f"{shard} is the db merged into (--db {args.db}); a db cannot be merged into itself")
        if any(os.path.exists(s) and os.path.exists(shard) and os.path.samefile(s, shard) for s in shards[:i]):
            raise UsageError(f"shard {shard} is given twice; give each shard once")
        ev.check_db(shard)  # every source readable before anything is written
    added = ev.merge(args.db, shards)
    print(f"merged {len(shards)} shard(s) into {args.db}: {added} rows new to it (a row already there is replaced)")
    return 0


def _csv_path(text: str) -> str | None:
    return None if text == "packaged" else text


def run_correlate(args: argparse.Namespace) -> int:
    from torchutil.studies import nas_correlate as co

    results, joined = co.correlate(args.db, _csv_path(args.csv))
    print(co.format_table(results))
    agreement = co.rank_agreement(joined)
    print(co.format_agreement(agreement))
    written = co.write_outputs(args.out, results, joined, plots=plots_available(not args.no_plots))
    if agreement:
        written.append(Path(args.out) / "agreement.json")
        write_json(written[-1], agreement, indent=2)
    for path in written:
        print(f"wrote {path}")
    return 0


def run_search(args: argparse.Namespace) -> int:
    from torchutil.studies import nas_search as se

    strategies = se.default_strategies(args.reward_metric, args.weight)
    if args.strategies is not None:  # checked before the db is read
        wanted = args.strategies.split(",")
        unknown = [w for w in wanted if w not in {s.name for s in strategies}]
        if unknown:
            raise UsageError(f"--strategies {args.strategies!r}: unknown {', '.join(map(repr, unknown))}; give a comma "
                             f"list of " + ", ".join(s.name for s in strategies))
        strategies = [s for s in strategies if s.name in wanted]
    space = se.SearchSpace.from_db(args.db, args.dataset, _csv_path(args.csv), dataset=args.measured_dataset,
                                   batch=args.batch, dtype=args.dtype, device=args.device, mode=args.mode)
    measured, total = int(space.available.sum()), space.available.size
    if measured < total:
        # The policy samples the whole space: a partial sweep would end in resampling loops.
        raise fail(f"{args.db} holds {measured:,} of the {total:,} cells for this config; nas search samples "
                   f"the whole space: finish the sweep first (nas evaluate --db {args.db} resumes where it stopped), "
                   "or search the packaged H200 sweep: --db builtin:h200-auto")
    cost = se.CostModel(args.eval_base_seconds, args.eval_seconds_per_mmac, args.measure_seconds)
    runs = se.run_strategies(space, strategies, args.seeds, iterations=args.iterations,
                             time_budget=args.time_budget, lr=args.lr, momentum=args.momentum,
                             threshold=args.threshold, quantile=args.quantile,
                             quantile_warmup=args.quantile_warmup, penalty=args.penalty, cost=cost)
    print(f"REINFORCE on {space.dataset} accuracy, {int(space.available.sum())} measured archs, "
          f"{len(args.seeds)} seed(s), {args.iterations} iterations:")
    print(se.format_summary(se.summarize(runs, space)))
    written = se.write_outputs(args.out, runs, space, plots=plots_available(not args.no_plots))
    for path in written:
        print(f"wrote {path}")
    return 0
