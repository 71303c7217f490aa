"""torchutil's reward inside the search engines NAS runs on: Optuna and Ray Tune over the
NATS-Bench topology space (docs/engines.md).

    import optuna
    from torchutil.nas import engines
    objective = engines.optuna_objective(["accuracy", "utilization"])
    study = optuna.create_study(directions=objective.directions, storage="sqlite:///nas.db")
    study.optimize(objective, n_trials=200, n_jobs=4)

A cell is six categorical choices, one per edge of the cell (EDGE_PARAMS, each one of
natsbench.OPS). A trial's values are its metrics: "accuracy" is the packaged NATS-Bench test
accuracy (200 epochs, mean over seeds) on `accuracy_dataset`; any other name is a column of
`nas evaluate`'s results row (utilization, inputs_per_second, seconds, ...; inputs_per_joule
where the row has it), measured with torch.ops.util.profile under `config` (eval_config()).

Where the measuring happens (Reward's `shared`): by default the per-GPU service
(torchutil.nas.service), so any number of processes and threads, Optuna's or Ray's, get the
figures of one process; shared=False measures in this process (a CellEvaluator with `threads`
threads, for n_jobs threads of one process alone on its GPU).
"""
from __future__ import annotations

import functools
import math
import numbers
import threading
from typing import Any, Callable, Iterable, Mapping, Sequence

from torchutil.nas import natsbench as nb
from torchutil._files import save_figure
from torchutil.nas.cells import EvalConfig
from torchutil.nas.db_schema import METRIC_COLUMNS
from torchutil.nas.errors import NAS, nas_error

__all__ = ["DIRECTIONS", "EDGE_PARAMS", "SHARES_OF_PEAK", "Objective", "PeakExceeded", "Reward", "arch_from_params",
           "arch_params", "enqueue_cells", "optuna_objective", "plot_pareto_front", "suggest_arch", "tune_space",
           "tune_trainable"]

# One categorical parameter per edge of the cell, in natsbench.EDGES order: "edge_1_0" is the
# edge into node 1 from node 0.
EDGE_PARAMS: tuple[str, ...] = tuple(f"edge_{to}_{frm}" for to, frm in nb.EDGES)

# Which way each metric is better; a metric not here needs its direction given.
DIRECTIONS: dict[str, str] = {
    **dict.fromkeys(("accuracy", "utilization", "matrix_utilization", "bandwidth_utilization", "kernel_utilization",
                     "gpu_busy_fraction", "inputs_per_second", "achieved_flops_per_second", "inputs_per_joule"),
                    "maximize"),
    **dict.fromkeys(("seconds", "flops", "matrix_flops", "bytes", "params", "kernel_seconds", "joules_per_input"),
                    "minimize"),
}


def arch_params(arch: nb.Arch | str | int) -> dict[str, str]:
    """The parameters of a cell: {EDGE_PARAMS[k]: op} (for study.enqueue_trial, a Tune config)."""
    return dict(zip(EDGE_PARAMS, nb._as_arch(arch).ops))


def arch_from_params(params: Mapping[str, Any]) -> nb.Arch:
    """The cell of a trial's parameters; an error naming a missing edge or an unknown op."""
    missing = [p for p in EDGE_PARAMS if p not in params]
    if missing:
        raise nas_error(f"the parameters lack edge(s) {', '.join(missing)}; a cell has {', '.join(EDGE_PARAMS)}")
    return nb.Arch(tuple(params[p] for p in EDGE_PARAMS))


def suggest_arch(trial: Any) -> nb.Arch:
    """An Optuna trial's cell: trial.suggest_categorical per edge over natsbench.OPS."""
    return nb.Arch(tuple(trial.suggest_categorical(p, nb.OPS) for p in EDGE_PARAMS))


def enqueue_cells(study: Any, cells: Iterable[nb.Arch | str | int]) -> None:
    """Queues these cells as the study's next trials (any process sharing its storage takes them)."""
    for cell in cells:
        study.enqueue_trial(arch_params(cell))


@functools.lru_cache(maxsize=1)
def _accuracies() -> list[nb.AccuracyRow]:
    return nb.load_accuracy_table()

# Metrics that are a share of a peak (achieved rate / peak rate). Above 1 the peak was lower than
# what ran (a peak="measured" timed on a loaded machine, a clock read below the one the CPU ran
# at): such a figure says nothing of the cell, and is never handed to an engine as a reward.
SHARES_OF_PEAK = ("utilization", "matrix_utilization", "bandwidth_utilization", "kernel_utilization")


class PeakExceeded(ValueError):
    """A cell's share of the peak came out above 1 (its results row's `peak_exceeded`): the
    peak, not the cell, is wrong. Optuna's objective fails the trial with the reason in its user
    attributes; Ray Tune's trainable ends the trial with this error."""

    def __init__(self, metric: str, index: int, value: float, peak: float | None) -> None:
        self.metric, self.index, self.value = metric, index, value
        rate = f" of {peak:.4g} FLOP/s" if peak is not None and math.isfinite(peak) else ""
        super().__init__(
            f"{NAS}: metric {metric!r} of cell {index} is {value:.3g}, above 1: the peak{rate} is below "
            "what the cell ran at, so the figure is not a reward (on a CPU, peak='auto' computes the peak from the CPU; "
            "a peak='measured' moves with the machine's load)")


class Reward:
    """The metric values of a cell: {metric: value} for `metrics`, in that order.

    config: the measurement (default eval_config(): CUDA where there is one). accuracy_dataset:
    whose accuracy "accuracy" is (default config's dataset). shared: measure in the GPU's service
    (any number of processes get one process's figures) or, False, in this process. threads: the
    evaluator's (the service's when this process starts it). directions: for metrics not in
    DIRECTIONS. Picklable before and after use (a Ray trial gets a copy that connects itself)."""

    def __init__(self, metrics: Sequence[str] = ("accuracy", "utilization"), *, config: EvalConfig | None = None,
                 accuracy_dataset: str | None = None, shared: bool = True, threads: int | None = None,
                 directions: Mapping[str, str] | None = None, idle_seconds: float = 60.0) -> None:
        from torchutil.nas.evaluator import eval_config

        if isinstance(metrics, str) or not metrics:
            raise nas_error(f"metrics must be a non-empty list of names, got {metrics!r}")
        twice = sorted({m for m in metrics if list(metrics).count(m) > 1})
        if twice:
            raise nas_error(f"metric {twice[0]!r} is given twice in {list(metrics)}; a study has each objective once")
        if config is not None and not isinstance(config, EvalConfig):
            raise TypeError(f"torchutil.nas: Reward's config must be an EvalConfig (eval_config(device=...)), got "
                            f"{type(config).__name__} {config!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise nas_error(f"threads must be None or an int >= 1, got {threads!r}")
        if isinstance(idle_seconds, bool) or not isinstance(idle_seconds, (int, float)) \
                or not 0 < idle_seconds < math.inf:
            raise nas_error(f"idle_seconds must be a finite number of seconds > 0, got {idle_seconds!r}")
        given = dict(directions or {})
        bad = {m: d for m, d in given.items() if d not in ("maximize", "minimize")}
        if bad:
            raise nas_error(f"a direction is 'maximize' or 'minimize', got {bad}")
        unknown = [m for m in metrics if m not in given and m not in DIRECTIONS]
        if unknown:
            raise nas_error(f"no direction known for {', '.join(unknown)}; pass directions={{name: 'maximize' or "
                            f"'minimize'}} (known: {', '.join(sorted(DIRECTIONS))})")
        self.metrics = list(metrics)
        self.directions = [given.get(m) or DIRECTIONS[m] for m in self.metrics]
        self.config = eval_config() if config is None else config
        self.accuracy_dataset = accuracy_dataset or self.config.dataset
        nb.input_shape(self.accuracy_dataset)  # checks the name
        self.shared, self.threads, self.idle_seconds = shared, threads, idle_seconds
        self._evaluator: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_evaluator", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _evaluator=None, _lock=threading.Lock())

    @property
    def measures(self) -> bool:
        """Whether a metric needs a measurement (any other than accuracy)."""
        return any(m != "accuracy" for m in self.metrics)

    def evaluator(self) -> Any:
        """The evaluator it measures with, made on first use: a ServiceClient or a CellEvaluator."""
        with self._lock:
            if self._evaluator is None:
                if self.shared:
                    from torchutil.nas.service import ServiceClient

                    self._evaluator = ServiceClient(self.config, threads=self.threads, idle_seconds=self.idle_seconds)
                else:
                    from torchutil.nas.evaluator import CellEvaluator

                    self._evaluator = CellEvaluator(self.config, threads=self.threads)
            return self._evaluator

    def row(self, arch: nb.Arch | str | int) -> dict[str, Any]:
        """The cell's results row (index, arch, every metric column), measured; plus its
        accuracy and `measured_by`, the id of the process that measured it (None: unmeasured)."""
        from torchutil.nas.evaluator import index_of

        index = index_of(arch)
        if not self.measures:
            row = {"idx": index, "arch": str(nb.arch_of_index(index)), "measured_by": None}
        else:
            evaluator = self.evaluator()
            row = {**evaluator.evaluate(index), "measured_by": evaluator.pid}
        return {**row, "accuracy": _accuracies()[index].test_accuracy(self.accuracy_dataset)}

    def values(self, row: Mapping[str, Any]) -> dict[str, float]:
        """{metric: value} of a row; an error naming a metric the row lacks or holds as NaN."""
        out = {}
        for m in self.metrics:
            if m not in row:
                have = ["accuracy", *(c for c in METRIC_COLUMNS if c in row)]
                raise nas_error(f"no metric {m!r} in a results row; there are {', '.join(have)}")
            value = row[m]
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise nas_error(f"metric {m!r} of cell {row.get('idx')} is {value!r}, not a number")
            value = float(value)
            if math.isnan(value):
                why = ("the meta device times nothing" if self.config.device_type == "meta" else
                       "kernel columns need trace=True" if m.startswith("kernel") or m == "gpu_busy_fraction" else
                       "the measurement gave none")
                raise nas_error(f"metric {m!r} of cell {row['idx']} is NaN ({why})")
            if m in SHARES_OF_PEAK and value > 1:
                raise PeakExceeded(m, row["idx"], value, row.get("peak_flops_per_second"))
            out[m] = value
        return out

    def __call__(self, arch: nb.Arch | str | int) -> dict[str, float]:
        return self.values(self.row(arch))

    def close(self) -> None:
        """Stops this process's evaluator or closes its connection to the service."""
        with self._lock:
            if self._evaluator is not None:
                self._evaluator.close()
                self._evaluator = None


class Objective:
    """An Optuna objective over the NATS-Bench space (optuna_objective)."""

    def __init__(self, reward: Reward) -> None:
        self.reward = reward

    @property
    def directions(self) -> list[str]:
        """For optuna.create_study(directions=...), in the order of the metrics."""
        return self.reward.directions

    def __call__(self, trial: Any) -> float | tuple[float, ...]:
        arch = suggest_arch(trial)
        row = self.reward.row(arch)
        trial.set_user_attr("index", row["idx"])
        trial.set_user_attr("arch", str(arch))
        trial.set_user_attr("measured_by", row["measured_by"])
        try:
            values = self.reward.values(row)
        except PeakExceeded as e:
            # NaN fails the trial (Optuna goes on with the study); the attributes say why.
            trial.set_user_attr("peak_exceeded", e.value)
            trial.set_user_attr("failed_because", str(e))
            nan = float("nan")
            return nan if len(self.reward.metrics) == 1 else tuple(nan for _ in self.reward.metrics)
        return values[self.reward.metrics[0]] if len(values) == 1 else tuple(values.values())


def optuna_objective(metrics: Sequence[str] = ("accuracy", "utilization"), **reward: Any) -> Objective:
    """An Optuna objective: a cell from six trial.suggest_categorical calls, its metrics' values
    (one float for one metric, else a tuple for a multi-objective study; see .directions). The
    trial's user attributes get the cell's index, arch string and measuring process id. reward: Reward's keywords."""
    return Objective(Reward(metrics, **reward))


def plot_pareto_front(study: Any, path: str, target_names: Sequence[str] | None = None) -> str:
    """Optuna's Pareto-front plot of a multi-objective study (matplotlib), written to path."""
    import warnings

    import matplotlib.pyplot as plt
    import optuna

    # Optuna's plot sets the ggplot style for the process; rc_context puts the user's back.
    with warnings.catch_warnings(), plt.rc_context():  # the plot is marked experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        ax = optuna.visualization.matplotlib.plot_pareto_front(study, target_names=list(target_names) if target_names
                                                                else None)
        try:  # whole or not at all, and not through a link planted at path (atomic_open)
            save_figure(ax.figure, path, dpi=120, bbox_inches="tight")
        finally:
            plt.close(ax.figure)
    return path


def tune_space() -> dict[str, Any]:
    """Ray Tune's param_space over the cells: tune.choice(natsbench.OPS) per edge."""
    from ray import tune

    return {p: tune.choice(list(nb.OPS)) for p in EDGE_PARAMS}


def tune_trainable(metrics: Sequence[str] = ("accuracy", "utilization"), **reward: Any) -> Callable[[dict], None]:
    """A Ray Tune function trainable: the cell of its config (tune_space()), one tune.report of
    its metrics (and its index). Give it fractional GPUs with tune.with_resources(trainable,
    {"gpu": 0.25}); the trials of a GPU measure in its one service. reward: Reward's keywords."""
    measure = Reward(metrics, **reward)

    def trainable(config: dict[str, Any]) -> None:
        from ray import tune

        row = measure.row(arch_from_params(config))
        tune.report({**measure.values(row), "index": row["idx"], "measured_by": row["measured_by"]})

    trainable.directions = measure.directions  # type: ignore[attr-defined]
    return trainable
