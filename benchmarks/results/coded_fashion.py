"""Fashion-MNIST with learned codes and parity models at k = 2, 3, 4, beside the papers' figures,
and a measured serving run (torchutil.coded.serve) beside the simulation of the same service
times. The data come from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).

    python benchmarks/results/coded_fashion.py --out $OUT                  # the H200 run: <= 7 minutes
    python benchmarks/results/coded_fashion.py --profile cpu --out DIR     # the CPU-sized run (MLP only)
    python benchmarks/results/coded_fashion.py --quick --out DIR           # end to end in ~2 minutes

F is trained once per base model; every code is then trained with F frozen, with the seeds and
steps of `python -m torchutil coded train --dataset fashion --base B --k K --paradigm P
--base-epochs BE --epochs E --groups-per-batch G` (64 groups a step at k = 2, 32 above: the
papers' batch sizes). The papers trained every code for 500 epochs; the profiles below train far
fewer (PROFILES), and a training deadline (--budget) skips the runs that would not finish in time,
saying so. Writes results.json and results.md under --out (rewritten after every stage).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

from torchutil import coded
from torchutil.coded.train import make_optimizer

# (base-model epochs per base model, code epochs learned / parity, bases, ks): see the docstring.
PROFILES = {
    "gpu": dict(base_epochs={"mlp": 20, "resnet18_3stage": 8}, learned_epochs={"mlp": 15, "resnet18_3stage": 6},
                parity_epochs={"mlp": 15, "resnet18_3stage": 6}, bases=["mlp", "resnet18_3stage"], ks=[2, 3, 4],
                budget=300.0, train_subset=None, serve_queries=12000, serve_k=[2, 4]),
    "cpu": dict(base_epochs={"mlp": 10}, learned_epochs={"mlp": 3}, parity_epochs={"mlp": 15}, bases=["mlp"],
                ks=[2, 3, 4], budget=1200.0, train_subset=None, serve_queries=3000, serve_k=[2]),
    "quick": dict(base_epochs={"mlp": 1}, learned_epochs={"mlp": 1}, parity_epochs={"mlp": 1}, bases=["mlp"],
                  ks=[2, 3, 4], budget=600.0, train_subset=3000, serve_queries=400, serve_k=[2]),
}
PARADIGMS = ("learned", "parity")

# The papers' figures for Fashion-MNIST, with where each comes from. None: searched for and not
# found in what could be read here (the papers' result tables and figures were not reachable;
# their abstracts and their repositories' READMEs were).
PAPER_RANGE = ("64–98 % of unavailable predictions reconstructed, learned codes, over MNIST, Fashion-MNIST and "
               "CIFAR-10 together (abstract of arXiv 1806.01259)")
PAPER_NOTES = [
    "Per-configuration Fashion-MNIST figures (reconstruction accuracy, degraded-mode accuracy and the base "
    "model's accuracy for a given k, model and paradigm) of arXiv 1806.01259, JSAIT 2020 and ParM (SOSP 2019) "
    "were not found in any text readable here: not given.",
    "The papers' training set-up (read in github.com/Thesys-lab/learned-coded-computation and "
    "github.com/Thesys-lab/parity-models): 500 epochs of the code, Adam lr 1e-3, weight decay 1e-5, 64 groups "
    "a step at k = 2 and 32 above, 5,000 training images held out for validation and the best epoch kept; "
    "pixels in [0, 1] (no standardization); ParM trains the parity model from a fresh initialization.",
]


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def groups_per_batch(k: int) -> int:
    return 64 if k == 2 else 32


def subset(data: coded.Dataset, n: int | None) -> coded.Dataset:
    if n is None:
        return data
    return coded.Dataset(data.name, data.train_x[:n], data.train_y[:n], data.test_x[: n // 3],
                         data.test_y[: n // 3], data.classes)


def epochs_until(run_epoch: Any, epochs: int, deadline: float) -> int:
    """run_epoch(e) for e = 0..epochs-1, stopping after the first epoch that ends past `deadline`
    (perf_counter); the number of epochs run."""
    for e in range(epochs):
        run_epoch(e)
        if time.perf_counter() > deadline:
            return e + 1
    return epochs


def train_all(args: argparse.Namespace, profile: dict[str, Any], record: dict[str, Any], out: Path,
              start: float) -> dict[str, tuple[torch.nn.Module, dict[int, dict[str, coded.Code]]]]:
    """F per base model, then each code; the trained models, for the serving run."""
    data = subset(coded.load_dataset("fashion", args.data_dir, seed=args.seed), profile["train_subset"])
    record["data"] = {"train": len(data.train_x), "test": len(data.test_x), "folder": args.data_dir
                      or coded.default_data_dir("fashion")}
    trained: dict[str, Any] = {}
    per_epoch: dict[str, float] = {}
    for base in profile["bases"]:
        left = profile["budget"] - (time.perf_counter() - start)
        if trained and left < 0.3 * profile["budget"]:
            record["skipped"].append(f"F = {base} and its codes: not run, {left:.0f} s of the training budget "
                                     f"({profile['budget']:.0f} s) left")
            print(record["skipped"][-1], flush=True)
            continue
        torch.manual_seed(args.seed)  # as coded train builds F
        f = coded.build_base_model(base, data.shape, data.classes).to(args.device)
        t0 = time.perf_counter()
        planned = profile["base_epochs"][base]
        opt = make_optimizer(list(f.parameters()))  # as coded.train_base, epoch by epoch: F may take 40 % of what is left
        epochs = epochs_until(lambda e: coded.base_epoch(f, opt, data, epoch=e, seed=args.seed, device=args.device),
                              planned, t0 + 0.4 * left)
        f_seconds = time.perf_counter() - t0
        f_acc = coded.base_accuracy(f, data, device=args.device)
        record["base_models"].append({"base": base, "epochs": epochs, "epochs_planned": planned,
                                      "seconds": f_seconds, "accuracy": f_acc, "budget_left_before": left})
        print(f"F = {base}: {epochs} epochs in {f_seconds:.0f} s, test accuracy {pct(f_acc)}", flush=True)
        codes: dict[int, dict[str, coded.Code]] = {}
        trained[base] = (f, codes)
        for k in profile["ks"]:
            for paradigm in args.paradigms:
                epochs = profile[f"{paradigm}_epochs"][base]
                key = f"{base}-{paradigm}-k{k}"
                guess = per_epoch.get(f"{base}-{paradigm}-k{k - 1}", per_epoch.get(f"{base}-{paradigm}", 0.0))
                elapsed = time.perf_counter() - start
                if elapsed + guess * epochs > profile["budget"]:
                    record["skipped"].append(f"{key}: not run, the training budget ({profile['budget']:.0f} s) "
                                             f"would be spent ({elapsed:.0f} s gone, ~{guess * epochs:.0f} s needed)")
                    print(record["skipped"][-1], flush=True)
                    continue
                torch.manual_seed(args.seed + 1)  # as coded train builds the code
                code = coded.build_code(paradigm, k, f, data.shape, data.classes).to(args.device)
                loss = "kl" if paradigm == "learned" else "mse"
                t0 = time.perf_counter()
                opt = make_optimizer(code.trainable_parameters())  # as coded.train_code, cut at the budget's end
                planned, epochs = epochs, epochs_until(
                    lambda e: coded.code_epoch(code, f, opt, data, epoch=e, seed=args.seed, loss=loss,
                                               groups_per_batch=groups_per_batch(k), device=args.device),
                    epochs, start + profile["budget"])
                seconds = time.perf_counter() - t0
                per_epoch[key] = per_epoch[f"{base}-{paradigm}"] = seconds / epochs
                m = coded.evaluate(code, f, data, seed=args.seed, passes=args.passes, device=args.device)
                codes.setdefault(k, {})[paradigm] = code
                record["runs"].append({"base": base, "paradigm": paradigm, "k": k, "loss": loss,
                                       "encoder": "mlp" if paradigm == "learned" else "sum", "epochs": epochs,
                                       "epochs_planned": planned,
                                       "groups_per_batch": groups_per_batch(k), "seconds": seconds,
                                       "metrics": m.to_dict()})
                print(f"  {key}: {epochs} epochs in {seconds:.0f} s; reconstruction "
                      f"{pct(m.reconstruction_accuracy)}, degraded mode {pct(m.degraded_accuracy)}", flush=True)
                write(record, out)
    return trained


def serve(args: argparse.Namespace, profile: dict[str, Any], record: dict[str, Any], trained: dict[str, Any],
          out: Path) -> None:
    """The measured serving run of the MLP and its code, for each --serve-k."""
    from torchutil.coded import serve as cserve

    data = coded.load_dataset("fashion", args.data_dir, seed=args.seed)
    base, paradigm = "mlp", args.serve_paradigm
    for k in args.serve_k or profile["serve_k"]:
        if base not in trained or paradigm not in trained[base][1].get(k, {}):
            record["serve"].append({"k": k, "skipped": f"no trained {base} {paradigm} code at k = {k}"})
            continue
        f, codes = trained[base]
        config = cserve.ServeConfig(k=k, queries=args.serve_queries or profile["serve_queries"], load=args.serve_load,
                                    stragglers=tuple(args.serve_stragglers),
                                    straggler_on_fraction=args.straggler_on_fraction,
                                    straggler_burst_seconds=args.straggler_burst, worker_nice=args.worker_nice,
                                    device=args.serve_device, seed=args.seed)
        report = cserve.measure(config, f.cpu(), codes[k][paradigm].cpu(), data.test_x, data.test_y)
        md = cserve.format_report(report)
        record["serve"].append({"k": k, "base": base, "paradigm": paradigm, **report.to_dict(), "markdown": md})
        print(md, flush=True)
        write(record, out)


def results_markdown(record: dict[str, Any]) -> str:
    lines = [f"# Fashion-MNIST: learned codes and parity models ({record['device_name']})", "",
             f"{record['date']}, torch {record['torch']}, profile {record['profile']}, seed {record['seed']}; data: "
             f"{record['data'].get('train', '?')} training / {record['data'].get('test', '?')} test images from "
             f"{record['data'].get('folder')}; metrics over {record['passes']} seeded grouping(s) of the test set.",
             "", "| base model | F's epochs | F's test accuracy | train s |", "|---|---|---|---|"]
    for b in record["base_models"]:
        lines.append(f"| {b['base']} | {b['epochs']} of {b['epochs_planned']} | {pct(b['accuracy'])} | "
                     f"{b['seconds']:.0f} |")
    lines += ["", "| base | paradigm | k | code epochs | reconstruction | degraded mode | F's accuracy | "
              "baselines: most frequent / parity output unchanged | paper | train s |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["runs"]:
        m = r["metrics"]
        lines.append(f"| {r['base']} | {r['paradigm']} ({r['encoder']}, {r['loss']}) | {r['k']} | "
                     f"{r['epochs']} of {r['epochs_planned']} | "
                     f"**{pct(m['reconstruction_accuracy'])}** | {pct(m['degraded_accuracy'])} | "
                     f"{pct(m['base_accuracy'])} | {pct(m['most_frequent_reconstruction'])} / "
                     f"{pct(m['parity_output_reconstruction'])} | not found | {r['seconds']:.0f} |")
    lines += ["", f"Paper: {PAPER_RANGE}.", *[f"- {n}" for n in PAPER_NOTES], *[f"- {s}" for s in record["skipped"]]]
    for r in record["serve"]:
        lines += ["", f"## Measured serving run, F = {r.get('base', 'mlp')}, {r.get('paradigm', '')} code, k = {r['k']}, "
                  "and the simulation of the same service times", "", r.get("markdown") or r["skipped"]]
    return "\n".join(lines) + "\n"


def write(record: dict[str, Any], out: Path) -> None:
    (out / "results.json").write_text(json.dumps(record, indent=2, default=str))
    (out / "results.md").write_text(results_markdown(record))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="gpu (default on CUDA), cpu (default otherwise), quick (same as --quick)")
    parser.add_argument("--quick", action="store_true", help="a tiny end-to-end run (3,000 training images)")
    parser.add_argument("--out", default=os.environ.get("OUT", "coded-fashion"))
    parser.add_argument("--data-dir", default=None, help="the Fashion-MNIST files (default: the Debian folder)")
    parser.add_argument("--budget", type=float, default=None, help="seconds of training before runs are skipped")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--ks", type=int, nargs="+", default=None, help="override the profile's k values")
    parser.add_argument("--bases", nargs="+", choices=("mlp", "resnet18_3stage"), default=None,
                        help="override the profile's base models (one device call per base on the H200)")
    parser.add_argument("--paradigms", nargs="+", choices=PARADIGMS, default=list(PARADIGMS))
    parser.add_argument("--no-serve", action="store_true", help="skip the measured serving run")
    parser.add_argument("--serve-k", type=int, nargs="+", default=None,
                        help="one measured run per k (default: the profile's, 2 and 4 on the GPU)")
    parser.add_argument("--serve-paradigm", choices=PARADIGMS, default="parity")
    parser.add_argument("--serve-queries", type=int, default=None, help="queries per policy")
    parser.add_argument("--serve-load", type=float, default=0.5)
    parser.add_argument("--serve-stragglers", type=int, nargs="*", default=[0],
                        help="data workers that get a background CPU burner")
    parser.add_argument("--straggler-on-fraction", type=float, default=0.2)
    parser.add_argument("--straggler-burst", type=float, default=0.02, help="mean seconds of one burst")
    parser.add_argument("--serve-device", default="cpu", help="where the workers run F (cpu or cuda)")
    parser.add_argument("--worker-nice", type=int, default=19)
    args = parser.parse_args(argv)
    name = "quick" if args.quick else args.profile or ("gpu" if args.device.startswith("cuda") else "cpu")
    profile = dict(PROFILES[name])
    if args.budget is not None:
        profile["budget"] = args.budget
    if args.ks:
        profile["ks"] = args.ks
    if args.bases:
        profile["bases"] = args.bases
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "profile": name, "settings": {k: v for k, v in profile.items()}, "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor()
        or "CPU", "torch": torch.__version__, "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "seed": args.seed, "passes": args.passes,
        "threads": torch.get_num_threads(), "data": {}, "base_models": [], "runs": [], "skipped": [], "serve": [],
        "paper_range": PAPER_RANGE, "paper_notes": PAPER_NOTES}
    start = time.perf_counter()
    trained = train_all(args, profile, record, out, start)
    if not args.no_serve:
        serve(args, profile, record, trained, out)
    record["seconds"] = time.perf_counter() - start
    write(record, out)
    print(results_markdown(record))
    print(f"wrote {out}/results.json and results.md in {record['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
