"""The runs behind docs/results/coded/: learned codes and parity models on the digits data (and on
MNIST, Fashion-MNIST, CIFAR-10 where their files are present), what the redundancy costs, and the
tail-latency simulation with the measured times. Every step is a `python -m torchutil coded`
command, run in this process; results.md lists them.

    python benchmarks/results/coded_results.py --device cuda --out gpu-results/coded     # run_gpu.sh's coded phase
    python benchmarks/results/coded_results.py --device cpu --out h200-work/coded-cpu

Writes into --out only: results.json (every run's config and metrics, the cost table, the
simulations), results.md (the tables, next to the paper's 64-98 %, and the commands) and one
sim_<run>.png per simulated run; the runs' folders go to --work.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch

from torchutil.studies.cli import main

# name -> coded train options, in the order they run: the paper's core first, so that a time budget
# cuts the variants (loss, encoder) rather than them.
RUNS = {
    "learned-k2": ["--k", "2"],
    "learned-k4": ["--k", "4"],
    "parity-k2": ["--k", "2", "--paradigm", "parity"],
    "parity-k4": ["--k", "4", "--paradigm", "parity"],
    "learned-k5": ["--k", "5"],
    "learned-k4-mse": ["--k", "4", "--loss", "mse"],
    "learned-k4-xent": ["--k", "4", "--loss", "xent"],
    "parity-k4-concat": ["--k", "4", "--paradigm", "parity", "--encoder", "concat"],
    "learned-k2-conv": ["--k", "2", "--encoder", "conv"],
}
CORE = 4  # the first four always run
# The runs whose cost is measured (the others share an architecture with one of them), and those
# whose measured times drive a simulation.
COSTED = ("learned-k2", "learned-k4", "learned-k5", "learned-k2-conv", "parity-k2", "parity-k4", "parity-k4-concat")
SIMULATED = ("learned-k2", "parity-k4")
OTHER_DATA = ("mnist", "fashion", "cifar10")
PAPER = "64–98 % (learned codes, MNIST / Fashion-MNIST / CIFAR-10; arXiv 1806.01259)"


def run(argv: list[str], log: list[str]) -> None:
    line = "python -m torchutil " + shlex.join(argv)
    print(f"$ {line}", flush=True)
    log.append(line)
    t0 = time.perf_counter()
    status = main(argv)
    print(f"  ({time.perf_counter() - t0:.1f} s)", flush=True)
    if status != 0:
        raise SystemExit(f"coded_results: `{line}` ended with status {status}")


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def results_markdown(record: dict[str, Any]) -> str:
    lines = [f"# Coded computation on {record['device_name']} ({record['device']})", "",
             f"{record['date']}, torch {record['torch']}, Python {record['python']}; "
             f"{record['epochs']} code epochs after {record['base_epochs']} of F, seed {record['seed']}, "
             f"one run per row, metrics over {record['passes']} seeded groupings of the test set.", "",
             f"Paper: {PAPER}.", "",
             "| data | run | paradigm | encoder | loss | k | F's accuracy | reconstruction | degraded mode | "
             "most frequent class | parity output unchanged | train s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["runs"]:
        c, m = r["config"], r["metrics"]
        lines.append(f"| {c['dataset']} | {r['name']} | {c['paradigm']} | {c['encoder']} | {c['loss']} | {c['k']} | "
                     f"{pct(m['base_accuracy'])} | **{pct(m['reconstruction_accuracy'])}** | "
                     f"{pct(m['degraded_accuracy'])} | {pct(m['most_frequent_reconstruction'])} | "
                     f"{pct(m['parity_output_reconstruction'])} | {r['seconds']:.0f} |")
    lines += ["", "The baselines are scored as the reconstruction is, against F's prediction (against the "
              "label: results.json).", ""]
    for name, note in record["missing_data"].items():
        lines.append(f"- {name}: {note}")
    lines += ["", "## What the redundancy costs", "", record["cost_md"], ""]
    for name, md in record["sim_md"].items():
        lines += [f"## Tail latency, {name} (sim_{name}.png)", "", md, ""]
    lines += ["## Commands", "", "```sh", *record["commands"], "```"]
    return "\n".join(lines) + "\n"


def write(record: dict[str, Any], out: Path) -> None:
    """results.json and results.md as far as the record goes (rewritten after every stage, so
    that a run stopped by its time limit leaves what it finished)."""
    (out / "results.json").write_text(json.dumps(record, indent=2, default=str))
    (out / "results.md").write_text(results_markdown(record))


def main_(args: argparse.Namespace) -> None:
    work, out = Path(args.work), Path(args.out)
    if work.exists():
        shutil.rmtree(work)
    out.mkdir(parents=True, exist_ok=True)
    commands: list[str] = []
    common = ["--device", args.device, "--no-progress", "--base-epochs", str(args.base_epochs), "--epochs",
              str(args.epochs), "--seed", str(args.seed), "--passes", str(args.passes)]
    datasets: list[tuple[str, list[str]]] = [("digits", [])]
    missing = {}
    for name in OTHER_DATA:
        folder = os.path.join(args.data_root, name) if args.data_root else None
        if folder and os.path.isdir(folder):
            datasets.append((name, ["--dataset", name, "--data-dir", folder]))
        else:
            missing[name] = f"not run: no files at {folder or '(no --data-root)'} on this machine"
    runs: list[dict[str, Any]] = []
    sims: dict[str, Any] = {}
    sim_md: dict[str, str] = {}
    record = {"device": args.device,
              "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor()
              or "CPU", "torch": torch.__version__, "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "epochs": args.epochs,
              "base_epochs": args.base_epochs, "seed": args.seed, "passes": args.passes, "paper": PAPER,
              "runs": runs, "missing_data": missing, "cost": None, "simulations": sims, "commands": commands,
              "cost_md": "(not measured)", "sim_md": sim_md}
    start = time.perf_counter()
    for dataset, data_args in datasets:
        for i, (name, extra) in enumerate(RUNS.items()):
            if dataset != "digits" and name not in ("learned-k2", "parity-k2"):
                continue  # the larger data sets: one run per paradigm
            if i >= CORE and time.perf_counter() - start > args.train_budget:
                missing[f"{dataset} {name}"] = f"not run: the training budget ({args.train_budget:.0f} s) was spent"
                continue
            folder = work / f"{dataset}-{name}"
            t0 = time.perf_counter()
            run(["coded", "train", *common, *data_args, *extra, "--out", str(folder)], commands)
            metrics = json.loads((folder / "metrics.json").read_text())
            runs.append({"name": name, "folder": str(folder), "seconds": time.perf_counter() - t0, **metrics})
            write(record, out)
    cost_runs = [str(work / f"digits-{name}") for name in COSTED if (work / f"digits-{name}").exists()]
    run(["coded", "cost", "--runs", *cost_runs, "--device", args.device, "--target-ci", "0.01", "--max-time",
         str(args.cost_max_time), "--out", str(work / "cost")], commands)
    record["cost"] = json.loads((work / "cost" / "cost.json").read_text())
    record["cost_md"] = (work / "cost" / "cost.md").read_text().strip()
    write(record, out)
    for name in SIMULATED:
        folder = work / f"sim-{name}"
        run(["coded", "simulate", "--cost", str(work / "cost" / "cost.json"), "--run", f"digits-{name}",
             "--out", str(folder)], commands)
        sims[name] = json.loads((folder / "sim.json").read_text())
        sim_md[name] = (folder / "sim.md").read_text().strip()
        if (folder / "sim.png").exists():
            shutil.copy(folder / "sim.png", out / f"sim_{name}.png")
        write(record, out)
    print(f"wrote {out}/results.json, results.md, " + ", ".join(f"sim_{n}.png" for n in SIMULATED))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="coded-results")
    parser.add_argument("--work", default="/tmp/coded-results-work", help="the runs' folders (deleted first)")
    parser.add_argument("--data-root", default=None,
                        help="a folder with mnist/, fashion/, cifar10/ subfolders of their files, where present")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--base-epochs", type=int, default=30)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cost-max-time", type=float, default=0.5, help="coded cost's --max-time per part")
    parser.add_argument("--train-budget", type=float, default=110.0,
                        help="seconds of training after which the runs beyond the first four are skipped")
    sys.exit(main_(parser.parse_args()))
