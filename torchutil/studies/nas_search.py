"""REINFORCE NAS over the NATS-Bench topology space, with utilization in the reward and as an
approximate filter; training is simulated from the packaged accuracy table.

The search follows NATS-Bench's REINFORCE baseline (AutoDL-Projects
`exps/NATS-algos/reinforce.py`, MIT License): a policy of 6 x 5 logits (one categorical per
edge, initialized 1e-3 * N(0, 1)), Adam on the logits, a bias-corrected exponential moving
average of the reward as baseline (momentum 0.9), loss = -log p(arch) * (reward - baseline),
learning rate 0.01; the search returns the best sampled arch (the reference's max over its
trace). Two differences from the reference, both forced or chosen here: its reward is the
12-epoch validation accuracy from `api.simulate_train_eval`, which also charges the training
time at every sample, while the packaged table holds only 200-epoch test accuracies, so that is
the reward here, and an arch sampled again reuses its result at no cost (a cache).

What is simulated, and at what cost (the cost model, in simulated GPU-seconds):
- measuring a candidate's utilization and throughput costs `measure_seconds` if given, else the
  arch's own `eval_seconds` from the `nas evaluate` db (what building and profiling it took),
  once per distinct arch, in every strategy but the plain one (accuracy reward, no filter);
- a full accuracy evaluation (training) costs eval_base_seconds + eval_seconds_per_mmac x the
  arch's multiply-accumulates in millions (the table's flops_m, 7.8 to 220 MMAC on CIFAR-10),
  once per distinct arch (later samples of it reuse the result). The defaults, 600 s + 30 s /
  MMAC, span 0.2 to 2 GPU-hours: an assumption, stated so that the search times compare
  strategies, not real trainings;
- the accuracy is the table's 200-epoch test accuracy (%) on `dataset`.

Strategies: the reward is accuracy / 100, optionally + weight x the candidate's utilization
(or throughput) min-max normalized over the space; the filter is none, a threshold (a
candidate whose utilization is below a fixed value skips the full evaluation) or a quantile
(below the q-quantile of the utilizations measured so far in this search; no knowledge of the
space needed). A filtered candidate gets the `penalty` reward. Each run returns the arch with
the best reward among those it evaluated fully.
"""
from __future__ import annotations

import csv
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from torchutil._ops import check_choice
from torchutil.nas import natsbench as nb
from torchutil.studies._common import NAS, atomic_open, figure, nas_error, save_figure, write_json
from torchutil.studies.nas_evaluate import CONFIG_COLUMNS, read_rows

__all__ = [
    "FILTERS",
    "CostModel",
    "SearchRun",
    "SearchSpace",
    "Strategy",
    "default_strategies",
    "format_summary",
    "pareto_front",
    "run_search",
    "run_strategies",
    "summarize",
    "write_outputs",
]

FILTERS = ("none", "threshold", "quantile")
_METRIC_COLUMN = {"utilization": "utilization", "throughput": "inputs_per_second",
                  "images_per_joule": "inputs_per_joule"}  # nas evaluate --energy


@dataclass(frozen=True)
class CostModel:
    """Simulated GPU-seconds of the search's two kinds of work (see the module docstring)."""

    eval_base_seconds: float = 600.0
    eval_seconds_per_mmac: float = 30.0
    measure_seconds: float | None = None  # None: the db's eval_seconds of each arch

    def full_evaluation(self, macs_m: float) -> float:
        return self.eval_base_seconds + self.eval_seconds_per_mmac * macs_m


@dataclass
class SearchSpace:
    """Per-arch arrays (indexed by NATS-Bench index) that the simulated search reads.
    available[i] is False for archs the db has no measurement of (the search resamples them)."""

    accuracy: np.ndarray
    utilization: np.ndarray
    throughput: np.ndarray
    macs_m: np.ndarray
    measure_seconds: np.ndarray
    available: np.ndarray
    dataset: str = "cifar10"
    images_per_joule: np.ndarray | None = None  # NaN without nas evaluate --energy

    def __post_init__(self) -> None:
        if self.images_per_joule is None:
            self.images_per_joule = np.full(self.accuracy.shape, np.nan)

    @classmethod
    def from_db(cls, db: str | os.PathLike[str], accuracy_dataset: str = "cifar10",
                table_csv: str | None = None, **where: Any) -> "SearchSpace":
        """Joins the packaged accuracy table (or table_csv) with the measurements of db.
        where: key columns that pick one measurement config (batch=256, dtype="float16", ...);
        an error names the configs when the db holds several and none is picked."""
        dataset = accuracy_dataset
        check_choice("accuracy dataset", dataset, nb.DATASETS, NAS)
        rows = read_rows(db, **where)
        if not rows:
            raise nas_error(f"no measurements in {db} for {where or 'any config'}; run `nas evaluate` first")
        configs = {tuple(r[k] for k in CONFIG_COLUMNS) for r in rows}
        if len(configs) > 1:
            raise nas_error(f"{db} holds several configs {sorted(configs)}; pick one with "
                         "--measured-dataset/--batch/--dtype/--device/--mode")
        table = nb.load_accuracy_table(table_csv)
        n = len(table)
        space = cls(
            accuracy=np.array([r.test_accuracy(dataset) for r in table]),
            utilization=np.full(n, np.nan), throughput=np.full(n, np.nan),
            macs_m=np.array([r.flops_m for r in table]), measure_seconds=np.full(n, np.nan),
            available=np.zeros(n, dtype=bool), dataset=dataset, images_per_joule=np.full(n, np.nan))
        for r in rows:
            i = r["idx"]
            space.utilization[i] = r["utilization"]
            space.throughput[i] = r["inputs_per_second"]
            space.images_per_joule[i] = r.get("inputs_per_joule", math.nan)
            space.measure_seconds[i] = r["eval_seconds"]
            space.available[i] = math.isfinite(r["utilization"]) and math.isfinite(r["inputs_per_second"])
        if not space.available.any():
            raise nas_error(f"no finite utilization in {db}")
        return space

    def metric(self, name: str) -> np.ndarray:
        check_choice("reward metric", name, _METRIC_COLUMN, NAS)
        m = {"utilization": self.utilization, "throughput": self.throughput}.get(name, self.images_per_joule)
        if not np.isfinite(m[self.available]).all():
            raise nas_error(f"the measurements hold no {name} for every cell; measure them with nas evaluate --energy")
        return m

    def has_energy(self) -> bool:
        return bool(np.isfinite(self.images_per_joule[self.available]).all())

    def normalized(self, name: str) -> np.ndarray:
        """The metric min-max scaled to [0, 1] over the available archs (NaN elsewhere)."""
        m = self.metric(name)
        lo, hi = np.nanmin(m[self.available]), np.nanmax(m[self.available])
        return (m - lo) / (hi - lo) if hi > lo else np.zeros_like(m)


@dataclass(frozen=True)
class Strategy:
    """reward_metric: None (reward = accuracy) or "utilization" / "throughput" (added with
    `weight`); filter: "none", "threshold" or "quantile"."""

    reward_metric: str | None = None
    filter: str = "none"
    weight: float = 0.1

    def __post_init__(self) -> None:
        check_choice("filter", self.filter, FILTERS, NAS)
        if self.reward_metric is not None and self.reward_metric not in _METRIC_COLUMN:
            raise nas_error(f"reward metric must be None or one of {', '.join(_METRIC_COLUMN)}, got {self.reward_metric!r}")

    @property
    def name(self) -> str:
        reward = "acc" if self.reward_metric is None else f"acc+{self.reward_metric}"
        return reward if self.filter == "none" else f"{reward}/{self.filter}"


def default_strategies(reward_metric: str = "utilization", weight: float = 0.1) -> list[Strategy]:
    """Every combination of reward (accuracy; accuracy + metric) and filter (none, threshold,
    quantile): 6 strategies."""
    return [Strategy(m, f, weight) for m in (None, reward_metric) for f in FILTERS]


@dataclass
class SearchRun:
    """One search: what it found and what it cost. found_*: the fully evaluated arch with the
    best reward; full_evaluations: distinct archs trained; avoided_evaluations: distinct archs
    the filter stopped (and never trained); simulated_seconds: the cost model's total."""

    strategy: str
    seed: int
    iterations: int
    found_index: int
    found_accuracy: float
    found_throughput: float
    found_utilization: float
    full_evaluations: int
    avoided_evaluations: int
    measurements: int
    simulated_seconds: float
    seconds_to_found: float
    policy_index: int  # the policy's most likely arch at the end
    evaluated: list[int] = field(default_factory=list, repr=False)

    def to_dict(self, evaluated: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not evaluated:
            d.pop("evaluated")
        return d


class _EMA:
    """The baseline of NATS-Bench's REINFORCE: a bias-corrected exponential moving average."""

    def __init__(self, momentum: float) -> None:
        self.momentum, self.num, self.den = momentum, 0.0, 0.0

    def update(self, value: float) -> float:
        self.num = self.momentum * self.num + (1 - self.momentum) * value
        self.den = self.momentum * self.den + (1 - self.momentum)
        return self.num / self.den


def _index_of_digits(digits: Sequence[int]) -> int:
    return nb.index_of_arch(nb.Arch(tuple(nb.OPS[d] for d in digits)))  # type: ignore[arg-type]


def run_search(space: SearchSpace, strategy: Strategy, seed: int, *, iterations: int = 200,
               time_budget: float | None = None, lr: float = 0.01, momentum: float = 0.9,
               threshold: float | None = None, quantile: float = 0.25, quantile_warmup: int = 10,
               penalty: float = 0.0, cost: CostModel = CostModel()) -> SearchRun:
    """One REINFORCE search of `iterations` samples (or until `time_budget` simulated seconds).

    threshold: the utilization below which the threshold filter stops a candidate (default:
    the space's `quantile`-quantile, which assumes a full sweep); quantile: for the quantile
    filter, the share of utilizations measured so far below which it stops a candidate, once
    `quantile_warmup` candidates have been measured.
    """
    gen = torch.Generator().manual_seed(seed)
    logits = (1e-3 * torch.randn(len(nb.EDGES), len(nb.OPS), generator=gen, dtype=torch.float64)).requires_grad_()
    opt = torch.optim.Adam([logits], lr=lr)
    baseline = _EMA(momentum)
    util = space.utilization
    bonus = space.normalized(strategy.reward_metric) if strategy.reward_metric else None
    if strategy.filter == "threshold" and threshold is None:
        threshold = float(np.quantile(util[space.available], quantile))
    # Accuracy alone, unfiltered, needs no profile: only the other strategies pay for one.
    needs_measurement = strategy.reward_metric is not None or strategy.filter != "none"
    measured: list[float] = []
    seen: set[int] = set()
    evaluated: dict[int, float] = {}  # index -> reward
    time_of: dict[int, float] = {}
    avoided: set[int] = set()
    clock = 0.0
    it = 0
    for it in range(1, iterations + 1):
        if time_budget is not None and clock >= time_budget:
            it -= 1
            break
        probs = torch.softmax(logits.detach(), dim=1)
        for _ in range(1000):  # archs the db has not measured are resampled
            digits = torch.multinomial(probs, 1, generator=gen).squeeze(1)
            index = _index_of_digits(digits.tolist())
            if space.available[index]:
                break
        else:
            raise nas_error("the policy keeps sampling archs the db has no measurement of")
        if index not in seen and needs_measurement:
            seen.add(index)
            measured.append(util[index])
            spent = space.measure_seconds[index] if cost.measure_seconds is None else cost.measure_seconds
            clock += spent if math.isfinite(spent) else 0.0
        passes = True
        if strategy.filter == "threshold":
            passes = util[index] >= threshold
        elif strategy.filter == "quantile" and len(measured) > quantile_warmup:
            passes = util[index] >= np.quantile(measured[:-1], quantile)
        if passes or index in evaluated:
            if index not in evaluated:
                clock += cost.full_evaluation(space.macs_m[index])
                reward = space.accuracy[index] / 100.0
                if bonus is not None:
                    reward += strategy.weight * bonus[index]
                evaluated[index] = float(reward)
                time_of[index] = clock
                avoided.discard(index)
            reward = evaluated[index]
        else:
            avoided.add(index)
            reward = penalty
        advantage = reward - baseline.update(reward)
        logp = torch.log_softmax(logits, dim=1).gather(1, digits.unsqueeze(1)).sum()
        opt.zero_grad()
        (-logp * advantage).backward()
        opt.step()
    policy_index = _index_of_digits(logits.detach().argmax(dim=1).tolist())
    if evaluated:
        found = max(evaluated, key=lambda i: (evaluated[i], -i))
    else:  # everything was filtered: the policy's choice, untrained
        found = policy_index
    return SearchRun(
        strategy=strategy.name, seed=seed, iterations=it, found_index=found,
        found_accuracy=float(space.accuracy[found]), found_throughput=float(space.throughput[found]),
        found_utilization=float(util[found]), full_evaluations=len(evaluated),
        avoided_evaluations=len(avoided), measurements=len(seen), simulated_seconds=clock,
        seconds_to_found=time_of.get(found, math.nan), policy_index=policy_index,
        evaluated=sorted(evaluated))


def run_strategies(space: SearchSpace, strategies: Sequence[Strategy], seeds: Sequence[int],
                   **kwargs: Any) -> list[SearchRun]:
    """run_search for every strategy and seed (the same seeds for every strategy)."""
    return [run_search(space, s, seed, **kwargs) for s in strategies for seed in seeds]


def pareto_front(accuracy: Sequence[float], throughput: Sequence[float]) -> list[int]:
    """Positions of the points no other point dominates (at least as accurate and as fast,
    better in one), both maximized; sorted by throughput, duplicates kept once."""
    a = np.asarray(accuracy, dtype=np.float64)
    t = np.asarray(throughput, dtype=np.float64)
    order = sorted(range(a.size), key=lambda i: (-t[i], -a[i]))
    front: list[int] = []
    best_acc = -math.inf
    for i in order:  # fastest first: a point is on the front if more accurate than all faster
        if a[i] > best_acc:
            front.append(i)
            best_acc = a[i]
    return sorted(front, key=lambda i: t[i])


def summarize(runs: Sequence[SearchRun], space: SearchSpace) -> list[dict[str, Any]]:
    """One row per strategy: means (and std of the found accuracy) over seeds, and the
    accuracy/throughput Pareto front of every arch the strategy's runs evaluated fully (with
    energy measured, also the accuracy/images-per-joule front: energy_front)."""
    out = []
    for name in dict.fromkeys(r.strategy for r in runs):
        mine = [r for r in runs if r.strategy == name]
        evaluated = sorted({i for r in mine for i in r.evaluated})
        front = [evaluated[p] for p in pareto_front(space.accuracy[evaluated], space.throughput[evaluated])] if evaluated else []
        energy = [evaluated[p] for p in pareto_front(space.accuracy[evaluated], space.images_per_joule[evaluated])] \
            if evaluated and space.has_energy() else []
        acc = np.array([r.found_accuracy for r in mine])
        out.append({
            "strategy": name,
            "seeds": len(mine),
            "found_accuracy_mean": float(acc.mean()),
            "found_accuracy_std": float(acc.std()),
            "found_throughput_mean": float(np.mean([r.found_throughput for r in mine])),
            "found_utilization_mean": float(np.mean([r.found_utilization for r in mine])),
            "full_evaluations_mean": float(np.mean([r.full_evaluations for r in mine])),
            "avoided_evaluations_mean": float(np.mean([r.avoided_evaluations for r in mine])),
            "simulated_hours_mean": float(np.mean([r.simulated_seconds for r in mine]) / 3600),
            "pareto_front": front,
            "energy_front": energy,
        })
    return out


def write_outputs(out: str | os.PathLike[str], runs: Sequence[SearchRun], space: SearchSpace,
                  plots: bool = True) -> list[Path]:
    """runs.csv (one row per run), summary.csv / summary.json (per strategy), pareto.csv (the
    fronts) and, with plots, pareto.png and search_cost.png under out. Returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(runs, space)
    written = [out / "runs.csv", out / "summary.csv", out / "summary.json", out / "pareto.csv"]
    with atomic_open(written[0], "w", newline="") as f:
        rows = [r.to_dict() for r in runs]
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with atomic_open(written[1], "w", newline="") as f:
        fronts = ("pareto_front", "energy_front")
        w = csv.DictWriter(f, fieldnames=[k for k in summary[0] if k not in fronts])
        w.writeheader()
        w.writerows({k: v for k, v in s.items() if k not in fronts} for s in summary)
    write_json(written[2], {"dataset": space.dataset, "strategies": summary}, indent=2)
    with atomic_open(written[3], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["strategy", "front", "index", "arch", "accuracy", "throughput", "utilization",
                    "images_per_joule"])
        for s in summary:
            for front, key in (("throughput", "pareto_front"), ("images_per_joule", "energy_front")):
                for i in s[key]:
                    w.writerow([s["strategy"], front, i, str(nb.arch_of_index(i)), space.accuracy[i],
                                space.throughput[i], space.utilization[i], space.images_per_joule[i]])
    if plots:
        # One panel per strategy: its front in colour over the space and, in grey, the other
        # strategies' fronts (drawn on one axes they hide each other where they coincide).
        cols = min(3, len(summary))
        rows_n = math.ceil(len(summary) / cols)
        fig = figure(figsize=(4.6 * cols, 3.6 * rows_n))
        axes = fig.subplots(rows_n, cols, squeeze=False, sharex=True, sharey=True)
        avail = np.flatnonzero(space.available)
        fronts = [np.asarray(s["pareto_front"], dtype=int) for s in summary]
        front_acc = np.concatenate([space.accuracy[f] for f in fronts if f.size]) if any(f.size for f in fronts) else space.accuracy[avail]
        colors = [f"C{i}" for i in range(len(summary))]
        for k, (ax, s) in enumerate(zip(axes.flat, summary)):
            ax.scatter(space.throughput[avail], space.accuracy[avail], s=1, c="0.88", rasterized=True)
            for j, other in enumerate(fronts):
                if j != k:
                    ax.plot(space.throughput[other], space.accuracy[other], color="0.55", lw=0.8, alpha=0.6)
            ax.plot(space.throughput[fronts[k]], space.accuracy[fronts[k]], marker="o", ms=3.5, lw=1.8,
                    color=colors[k])
            ax.set_title(f"{s['strategy']} ({len(fronts[k])} on the front)", fontsize=9)
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(summary):]:
            ax.axis("off")
        # The chance-level cells (about 10 %) would squeeze the fronts into the top strip.
        low = float(np.min(front_acc))
        axes[0][0].set_ylim(low - 0.25 * (float(np.max(front_acc)) - low) - 1, float(np.max(front_acc)) + 1)
        for ax in axes[-1]:
            ax.set_xlabel("throughput (1,000 inputs/s)")
            ax.xaxis.set_major_formatter(lambda v, _: f"{v / 1000:g}")
        for ax in axes[:, 0]:
            ax.set_ylabel(f"{space.dataset} test accuracy (%)")
        fig.suptitle("Pareto front (accuracy vs throughput) of the archs each strategy evaluated; "
                     "grey lines: the other strategies' fronts", fontsize=10)
        fig.tight_layout()
        save_figure(fig, out / "pareto.png", dpi=120)
        fig = figure(figsize=(7, 4))
        ax = fig.subplots()
        names = [s["strategy"] for s in summary]
        ax.bar(names, [s["simulated_hours_mean"] for s in summary], color=colors)
        ax.set_ylabel("simulated GPU-hours per search (mean)")
        ax.set_title("Simulated search cost per strategy", fontsize=10)
        ax.tick_params(axis="x", rotation=30, labelsize=7)
        fig.tight_layout()
        save_figure(fig, out / "search_cost.png", dpi=120)
        written += [out / "pareto.png", out / "search_cost.png"]
    return written


def format_summary(summary: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'strategy':<26} {'acc %':>12} {'inputs/s':>10} {'util %':>8} {'trained':>8} "
             f"{'avoided':>8} {'sim h':>8} {'front':>6}"]
    for s in summary:
        lines.append(
            f"{s['strategy']:<26} {s['found_accuracy_mean']:>6.2f}±{s['found_accuracy_std']:<5.2f} "
            f"{s['found_throughput_mean']:>10.1f} {100 * s['found_utilization_mean']:>8.3f} "
            f"{s['full_evaluations_mean']:>8.1f} {s['avoided_evaluations_mean']:>8.1f} "
            f"{s['simulated_hours_mean']:>8.1f} {len(s['pareto_front']):>6}")
    return "\n".join(lines)
