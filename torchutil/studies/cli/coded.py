"""torchutil coded {train,evaluate,cost,simulate,serve}: learned coded computation
(torchutil/studies/coded.py)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from typing import Any

from torchutil._json import loads
from torchutil.models import DTYPES, dtype_name
from torchutil.studies._common import fail, plots_available
from torchutil.studies.cli.args import (ALIASES_HELP, UsageError, add_repeat_arguments, existing_dir, existing_file, fraction, known_device,
                                        nonnegative, nonnegative_float, number, output_dir, output_file,
                                        pick_device, positive, positive_float,
                                        probability)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from torchutil.coded import codes, data, models, sim
    from torchutil.coded.train import LOSSES
    from torchutil.studies.coded import MOST_EPOCHS, MOST_SEED

    coded = sub.add_parser("coded", help="learned coded computation: train, evaluate, cost, simulate, serve")
    csub = coded.add_subparsers(dest="coded_command", required=True)

    def common(p: argparse.ArgumentParser, out: str) -> None:
        p.add_argument("--device", type=known_device, default="auto", help="auto (CUDA if present), cpu, cuda, ...")
        p.add_argument("--out", type=output_dir, default=out, help=f"output folder (default ./{out})")

    def data_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", type=existing_dir, default=None,
                       help="folder with the MNIST/Fashion IDX files or CIFAR-10 python batches (not for digits; "
                            "fashion's default: /usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist)")

    def metrics(p: argparse.ArgumentParser) -> None:
        p.add_argument("--passes", type=positive, default=1, help="groupings of the test set evaluated (seeded)")
        p.add_argument("--json", type=output_file, default=None,
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
    epochs = number(int, 1, f"an integer in 1..{MOST_EPOCHS:,}", high=MOST_EPOCHS)
    t.add_argument("--base-epochs", type=epochs, default=30, help=f"epochs of F (default 30, at most {MOST_EPOCHS:,})")
    t.add_argument("--epochs", type=epochs, default=100,
                   help=f"epochs of the code (default 100, at most {MOST_EPOCHS:,})")
    t.add_argument("--batch-size", type=positive, default=64, help="images per step of F's training")
    t.add_argument("--groups-per-batch", type=positive, default=64, help="groups of k per step of the code's")
    t.add_argument("--lr", type=_learning_rate, default=1e-3, help="Adam's learning rate, in (0, 1] (default 1e-3)")
    t.add_argument("--weight-decay", type=nonnegative_float, default=1e-5)
    t.add_argument("--seed", type=number(int, 0, f"an integer in 0..{MOST_SEED:,}", high=MOST_SEED), default=0,
                   help="weights, epoch order and the digits split")
    t.add_argument("--restart", action="store_true", help="start afresh, overwriting OUT/checkpoint.pt")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    metrics(t)
    common(t, "coded-train")
    t.set_defaults(func=run_train)

    e = csub.add_parser("evaluate", help="reconstruction and degraded-mode accuracy of a trained run")
    e.add_argument("--run", type=existing_dir, default="coded-train", help="a coded train output folder")
    data_dir(e)
    metrics(e)
    common(e, "coded-evaluate")
    e.set_defaults(func=run_evaluate)

    c = csub.add_parser("cost", help="FLOPs, utilization and latency of F, encoder, parity model, decoder")
    c.add_argument("--runs", nargs="+", type=existing_dir, default=["coded-train"],
                   help="coded train output folders (named by their folder names)")
    data_dir(c)
    c.add_argument("--dtype", type=dtype_name, choices=sorted(DTYPES), default="float32", help=ALIASES_HELP)
    c.add_argument("--batch", type=positive, default=1,
                   help="queries per call of F (groups per call of the others); 1 for the simulation")
    add_repeat_arguments(c, what="calls", target_ci=True)
    common(c, "coded-cost")
    c.set_defaults(func=run_cost)

    s = csub.add_parser("simulate", help="tail latency with stragglers: no redundancy, replication, code")
    s.add_argument("--cost", type=existing_file, default=None, help="cost.json of coded cost (at --batch 1)")
    s.add_argument("--run", default=None, help="which run of the cost file (default: its first)")
    s.add_argument("--k", type=_group_size, default=2, help="without --cost: queries per group (>= 2)")
    s.add_argument("--service-seconds", type=positive_float, default=None, help="without --cost: F per query")
    s.add_argument("--parity-seconds", type=nonnegative_float, default=None, help="default: --service-seconds")
    s.add_argument("--encode-seconds", type=nonnegative_float, default=0.0)
    s.add_argument("--decode-seconds", type=nonnegative_float, default=0.0)
    s.add_argument("--loads", nargs="+", type=fraction, default=[0.3, 0.5, 0.7, 0.8, 0.9],
                   help="arrival rate / capacity of the k workers (default 0.3 0.5 0.7 0.8 0.9)")
    s.add_argument("--policies", nargs="+", choices=sim.POLICIES, default=list(sim.POLICIES))
    s.add_argument("--straggler", choices=sim.STRAGGLERS, default="bimodal", help="default bimodal")
    s.add_argument("--straggler-probability", type=probability, default=0.02, help="bimodal: p (0.02)")
    s.add_argument("--slowdown", type=number(float, 1.0, "a number >= 1"), default=10.0, help="bimodal: a straggler's factor (10)")
    s.add_argument("--tail", type=nonnegative_float, default=1.0, help="shifted-exp: mean extra / service time")
    s.add_argument("--failure-probability", type=probability, default=0.0,
                   help="a query's result never returns")
    s.add_argument("--arrivals", choices=["poisson", "periodic"], default="poisson")
    s.add_argument("--queries", type=number(int, 1, f"an integer in 1..{SIM_QUERIES:,} (each simulated query keeps its "
                                                  f"times in memory)", high=SIM_QUERIES),
                   default=200_000, help=f"simulated queries per policy and load (at most {SIM_QUERIES:,})")
    s.add_argument("--seed", type=nonnegative, default=0)
    s.add_argument("--no-plots", action="store_true")
    s.add_argument("--out", type=output_dir, default="coded-simulate", help="output folder (default ./coded-simulate)")
    s.set_defaults(func=run_simulate)

    v = csub.add_parser("serve", help="measured tail latency: frontend + k + 1 worker processes, real stragglers")
    v.add_argument("--run", type=existing_dir, default="coded-train", help="a coded train output folder")
    data_dir(v)
    v.add_argument("--queries", type=number(int, 1, f"an integer in 1..{SERVE_QUERIES:,} (each is a real forward)",
                                            high=SERVE_QUERIES),
                   default=5000, help=f"queries per policy (default 5000, at most {SERVE_QUERIES:,})")
    v.add_argument("--load", type=fraction, default=0.5, help="arrival rate / the data workers' idle capacity")
    v.add_argument("--stragglers", type=nonnegative, nargs="*", default=[0],
                   help="workers whose core gets a CPU-burning process (default: worker 0; none: no stragglers)")
    v.add_argument("--straggler-on-fraction", type=fraction, default=0.2, help="share of time a burner burns")
    v.add_argument("--straggler-burst", type=positive_float, default=0.02, help="mean seconds of one burst")
    v.add_argument("--worker-nice", type=nonnegative, default=19, help="the workers' nice value (0..19)")
    v.add_argument("--serve-device", type=known_device, default="cpu",
                   help="where the workers run F: cpu (default) or cuda")
    v.add_argument("--seed", type=nonnegative, default=0)
    v.add_argument("--out", type=output_dir, default="coded-serve", help="output folder (default ./coded-serve)")
    v.set_defaults(func=run_serve)


# The most queries one run takes: a simulation keeps a few float64 per query and policy (10**12
# asked for 7 TiB); a served query is a forward on a worker.
SIM_QUERIES = 10_000_000
SERVE_QUERIES = 1_000_000


def _learning_rate(text: str) -> float:
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a learning rate in (0, 1] (Adam's steps are about lr in size; "
                                         f"a larger one diverges), got {text}")
    return value


_group_size = number(int, 2, "an integer >= 2 (queries per group)")


def _print_json(args: argparse.Namespace, record: dict[str, Any], out: str, name: str) -> None:
    """record into OUT/name, and to --json (a file, or '-': stdout)."""
    from torchutil._json import json_safe
    from torchutil.studies._common import write_json

    write_json(os.path.join(out, name), record, indent=2)
    if args.json == "-":
        print(json.dumps(json_safe(record), indent=2))
    elif args.json:
        write_json(args.json, record, indent=2)


def run_train(args: argparse.Namespace) -> int:
    from torchutil.studies import coded as cs

    text = sys.stderr if args.json == "-" else sys.stdout
    device = pick_device(args.device)
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


def run_evaluate(args: argparse.Namespace) -> int:
    from torchutil.studies import coded as cs

    text = sys.stderr if args.json == "-" else sys.stdout
    device = pick_device(args.device)
    run = cs.load_run(args.run, data_dir=args.data_dir, device=device)
    metrics = cs.evaluate_run(run, device=device, passes=args.passes)
    print(f"coded evaluate {args.run} on {device}: " + cs.format_metrics(run, metrics), file=text)
    os.makedirs(args.out, exist_ok=True)
    _print_json(args, cs.metrics_record(run, metrics, device=str(device), run=args.run), args.out, "metrics.json")
    return 0


def run_cost(args: argparse.Namespace) -> int:
    from torchutil.studies import coded as cs

    device = pick_device(args.device)
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


def run_simulate(args: argparse.Namespace) -> int:
    from torchutil.coded import sim
    from torchutil.studies import coded as cs

    model = dict(queries=args.queries, arrivals=args.arrivals, straggler=args.straggler,
                 straggler_probability=args.straggler_probability, slowdown=args.slowdown, tail=args.tail,
                 failure_probability=args.failure_probability, seed=args.seed)
    if args.cost and args.service_seconds is not None:
        raise UsageError("--service-seconds contradicts --cost (the cost file gives the service times)")
    if args.cost:
        with open(args.cost, "rb") as f:
            try:
                cost = loads(f.read())
            except ValueError as e:  # not JSON, not UTF-8, or nested too deep
                raise fail(f"{args.cost} is not JSON ({e})") from None
        run, config = sim.config_from_cost(cost, args.run, args.cost, **model)
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
    written = cs.write_simulation(summaries, config, args.out, run=run, plots=plots_available(not args.no_plots))
    print(f"wrote {', '.join(written)} in {args.out}")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    from torchutil.coded import serve
    from torchutil.studies import coded as cs

    if len(set(args.stragglers)) != len(args.stragglers):
        raise UsageError(f"--stragglers: worker numbers repeat ({' '.join(map(str, args.stragglers))}); a worker "
                         f"gets one burner")
    run = cs.load_run(args.run, data_dir=args.data_dir)
    config = serve.ServeConfig(k=run.config.k, queries=args.queries, load=args.load, stragglers=tuple(args.stragglers),
                               straggler_on_fraction=args.straggler_on_fraction,
                               straggler_burst_seconds=args.straggler_burst, worker_nice=args.worker_nice,
                               device=str(pick_device(args.serve_device)), seed=args.seed)
    report = serve.measure(config, run.base_model, run.code, run.data.test_x, run.data.test_y)
    print(serve.format_report(report))
    print(f"wrote {', '.join(serve.write_report(report, args.out))} in {args.out}")
    return 0
