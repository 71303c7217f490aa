"""Learned coded computation from the command line (torchutil.coded):

    python -m torchutil coded train --k 2 --paradigm learned      # digits, writes ./coded-train/
    python -m torchutil coded evaluate --run coded-train           # writes ./coded-evaluate/
    python -m torchutil coded cost --runs coded-train --device cuda   # writes ./coded-cost/
    python -m torchutil coded simulate --cost coded-cost/cost.json    # writes ./coded-simulate/

train: F, then the code (F frozen), with a checkpoint written after every epoch into the output
folder (checkpoint.pt); a rerun of the same command in the same folder resumes from it (more
--epochs continue a finished run; --restart starts afresh), and a checkpoint of another
configuration is refused, naming what differs. At the end it evaluates on the test set and
writes metrics.json.
"""
from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Sequence

import torch

from torchutil.coded import codes, data as coded_data, models, sim
from torchutil.coded.evaluate import CodedMetrics, evaluate
from torchutil.coded.train import LOSSES, base_epoch, code_epoch, make_optimizer
from torchutil.studies._common import Progress, atomic_open, device_memory, figure, save_figure, write_json

__all__ = ["CHECKPOINT", "MOST_EPOCHS", "MOST_SEED", "TrainConfig", "TrainedRun", "cost_table", "evaluate_run", "format_cost",
           "format_metrics", "format_simulation", "load_run", "metrics_record", "plot_simulation",
           "train_run",
           "write_cost", "write_simulation"]

CHECKPOINT = "checkpoint.pt"
FORMAT = "torchutil.coded/1"
# The most epochs of F or of the code one run trains (10**30 ran without end); and the largest
# seed (the epoch generators seed with seed x 1,000,003 + epoch, which must fit 64 bits).
MOST_EPOCHS = 100_000
MOST_SEED = 2**32 - 1


_PREFIX = "torchutil.coded: "


def _error(message: str) -> ValueError:
    return ValueError(f"{_PREFIX}{message}")


@dataclass(frozen=True)
class TrainConfig:
    """What a training run is; `epochs` (of the code) may grow between resumes, the rest may not
    change (data_dir may: the same files can move)."""

    dataset: str = "digits"
    data_dir: str | None = None
    k: int = 2
    paradigm: str = "learned"
    encoder: str | None = None  # default: the paradigm's first (codes.ENCODERS)
    loss: str | None = None  # default: kl (learned), mse (parity: ParM's loss)
    base: str | None = None  # default: models.default_base_model(dataset)
    base_epochs: int = 30
    epochs: int = 100
    batch_size: int = 64
    groups_per_batch: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-5
    seed: int = 0

    def __post_init__(self) -> None:
        """Every field of its type and in its range, checked before anything reads it (a
        checkpoint's config is a user's file): a ValueError naming the field and the value."""
        for name, kind, ok, want in _FIELD_CHECKS:
            value = getattr(self, name)
            if value is None and kind.endswith("?"):
                continue
            if not _of_kind(value, kind.rstrip("?")) or not ok(value):
                raise _error(f"{name} must be {want}, got {value!r}")

    def resolved(self) -> "TrainConfig":
        """Defaults filled in, and everything checked (ValueError naming the value)."""
        if self.dataset not in coded_data.DATASETS:
            raise _error(f"unknown dataset {self.dataset!r}; choose from {', '.join(coded_data.DATASETS)}")
        if self.paradigm not in codes.PARADIGMS:
            raise _error(f"unknown paradigm {self.paradigm!r}; choose from {', '.join(codes.PARADIGMS)}")
        config = replace(self, encoder=self.encoder or codes.ENCODERS[self.paradigm][0],
                         loss=self.loss or ("kl" if self.paradigm == "learned" else "mse"),
                         base=self.base or models.default_base_model(self.dataset))
        if config.encoder not in codes.ENCODERS[self.paradigm]:
            raise _error(f"the {self.paradigm} paradigm takes --encoder "
                         f"{' or '.join(codes.ENCODERS[self.paradigm])}, got {config.encoder!r}")
        if config.loss not in LOSSES:
            raise _error(f"unknown loss {config.loss!r}; choose from {', '.join(LOSSES)}")
        if config.base not in models.BASE_MODELS:
            raise _error(f"unknown base model {config.base!r}; choose from {', '.join(models.BASE_MODELS)}")
        codes.check_k(config.k, config.encoder)
        return config

    def identity(self) -> dict[str, Any]:
        """The fields a resumed run must share with its checkpoint."""
        return {k: v for k, v in asdict(self).items() if k not in ("epochs", "data_dir")}

    def describe(self) -> str:
        what = (f"learned code ({self.encoder} encoder, {self.loss} loss)" if self.paradigm == "learned"
                else f"parity model ({self.encoder} encoder, {self.loss} loss)")
        return f"{self.dataset}, {what}, k = {self.k}, base model {self.base}"


def _of_kind(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# (field, type ("?": or None), range, what it must be) of TrainConfig, as `coded train`'s options take them.
_FIELD_CHECKS: tuple[tuple[str, str, Callable[[Any], bool], str], ...] = (
    *((f, "str", lambda v: True, "a name") for f in ("dataset", "paradigm")),
    *((f, "str?", lambda v: True, "a name or None") for f in ("data_dir", "encoder", "loss", "base")),
    ("k", "int", lambda v: v >= 2, "an int >= 2"),
    *((f, "int", lambda v: 1 <= v <= MOST_EPOCHS, f"an int in 1..{MOST_EPOCHS:,}") for f in ("base_epochs", "epochs")),
    *((f, "int", lambda v: v >= 1, "an int >= 1") for f in ("batch_size", "groups_per_batch")),
    ("lr", "float", lambda v: 0 < v <= 1, "a number in (0, 1]"),
    ("weight_decay", "float", lambda v: v >= 0, "a finite number >= 0"),
    ("seed", "int", lambda v: 0 <= v <= MOST_SEED, f"an int in 0..{MOST_SEED:,}"),
)


@dataclass
class TrainedRun:
    """A run's configuration, data, F and code, and how far its training got."""

    config: TrainConfig
    data: coded_data.Dataset
    base_model: torch.nn.Module
    code: codes.Code | None  # None while F trains
    base_epochs_done: int
    epochs_done: int
    history: list[dict[str, Any]]


def _checkpoint_path(folder: str) -> str:
    return os.path.join(folder, CHECKPOINT)


def _read_checkpoint(folder: str) -> dict[str, Any]:
    path = _checkpoint_path(folder)
    if os.path.exists(path) and not os.path.isfile(path):
        raise _error(f"{path} is not a file, so not a coded-train checkpoint; move it away, or use another folder")
    if not os.path.isfile(path):
        raise _error(f"no training run in {folder} (no {CHECKPOINT}); run `coded train --out {folder}` first")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch.load fails in many ways on a file that is not a checkpoint
        # Only our line: torch's message would go on to advise weights_only=False, which would
        # run whatever code the file holds.
        raise _error(f"{path} is not a coded-train checkpoint (torch.load cannot read it: {type(e).__name__})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise _error(f"{path} is not a coded-train checkpoint (format {FORMAT})")
    wrong = [f"{key} ({kind.__name__})" for key, kind in _STATE_KEYS.items()
             if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool)]
    if wrong:
        raise _error(f"{path} is not a coded-train checkpoint: it lacks {', '.join(wrong)}")
    try:
        state["config"] = config = TrainConfig(**state["config"])
    except TypeError as e:  # fields this version does not know, or lacks
        raise _error(f"{path} holds a configuration this version cannot read ({e})") from None
    except ValueError as e:  # a field of the wrong type or out of range
        raise _error(f"{path} is not a coded-train checkpoint: its config's {str(e).removeprefix(_PREFIX)}") from None
    for done, of in (("base_epochs_done", "base_epochs"), ("epochs_done", "epochs")):
        if not 0 <= state[done] <= getattr(config, of):
            raise _error(f"{path} is not a coded-train checkpoint: {done} is {state[done]}, outside 0..{of} "
                         f"({getattr(config, of)})")
    return state


# What a checkpoint holds besides its format and optimizers, and the type of each.
_STATE_KEYS = {"config": dict, "base_epochs_done": int, "epochs_done": int, "history": list, "base": dict,
               "code": dict}


def _restore(target: Any, state: dict[str, Any], key: str, folder: str) -> None:
    """target.load_state_dict(state[key]); a state that does not fit (a damaged checkpoint, or
    one edited by hand) is one line naming the checkpoint and the part."""
    try:
        target.load_state_dict(state[key])
    except (KeyError, RuntimeError, ValueError, TypeError, AttributeError) as e:
        why = " ".join(str(e).split())
        raise _error(f"{_checkpoint_path(folder)} is not a coded-train checkpoint of this run: its {key!r} does "
                     f"not load ({type(e).__name__}: {why[:200]}{'...' if len(why) > 200 else ''})") from None


def _save_checkpoint(folder: str, run: TrainedRun, optimizers: dict[str, Any]) -> None:
    state = {"format": FORMAT, "config": asdict(run.config), "base_epochs_done": run.base_epochs_done,
             "epochs_done": run.epochs_done, "history": run.history,
             "base": run.base_model.state_dict(),
             "code": run.code.state_dict() if run.code is not None else {},  # None until F is trained
             **{f"{name}_optimizer": opt.state_dict() for name, opt in optimizers.items()}}
    # Serialized in memory first: torch.save straight to a full disk fails with two chained
    # RuntimeErrors that do not say why, where Python's own write names ENOSPC. The file is then
    # written whole or not at all (a kill or a full disk leaves the previous checkpoint).
    data = io.BytesIO()
    torch.save(state, data)
    os.makedirs(folder, exist_ok=True)
    with atomic_open(_checkpoint_path(folder), "wb") as f:
        f.write(data.getvalue())


def _build(config: TrainConfig, data_dir: str | None, device: torch.device) -> tuple[coded_data.Dataset,
                                                                                       torch.nn.Module]:
    data = coded_data.load_dataset(config.dataset, data_dir, seed=config.seed)
    torch.manual_seed(config.seed)
    return data, models.build_base_model(config.base, data.shape, data.classes).to(device)


def _make_code(config: TrainConfig, data: coded_data.Dataset, base_model: torch.nn.Module,
               device: torch.device) -> codes.Code:
    torch.manual_seed(config.seed + 1)
    return codes.build_code(config.paradigm, config.k, base_model, data.shape, data.classes,
                            config.encoder).to(device)


# What training holds per parameter: the float32 weight, its gradient and Adam's two moments.
_BYTES_PER_PARAMETER = 16


def _parameters(config: TrainConfig, k: int) -> int:
    """The parameters F and the code of `config` train at group size k, counted on the meta
    device (nothing is allocated)."""
    shape = coded_data.SHAPES[config.dataset]
    with torch.device("meta"):
        base = models.build_base_model(config.base, shape, coded_data.CLASSES)
        code = codes.build_code(config.paradigm, k, base, shape, coded_data.CLASSES, config.encoder)
    return sum(p.numel() for p in base.parameters()) + sum(p.numel() for p in code.trainable_parameters())


def _check_fits(config: TrainConfig, device: torch.device) -> None:
    """ValueError before anything is built when the code of config.k cannot fit the device's
    memory (the MLP encoder grows as k squared: k = 100000 on digits is 44 trillion weights),
    naming k, what it needs and the largest k that fits."""
    memory = device_memory(device)
    if memory is None:
        return

    def need(k: int) -> int:
        return _BYTES_PER_PARAMETER * _parameters(config, k)

    if need(config.k) <= memory:
        return
    # The largest k that fits (the concat encoder takes k = 2 or 4 only).
    candidates = [2] if config.encoder == "concat" else None
    low, high = 1, config.k  # need(low) fits (1: none does), need(high) does not
    while candidates is None and high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if mid >= 2 and need(mid) <= memory else (low, mid)
    largest = low if candidates is None else max([k for k in candidates if need(k) <= memory], default=1)
    fits = f"the largest k that fits is {largest}" if largest >= 2 else "no k fits"
    raise _error(f"k = {config.k} makes {need(config.k) // _BYTES_PER_PARAMETER:,} parameters to train, "
                 f"{_bytes_text(need(config.k))} with their gradients and Adam's state, more than the "
                 f"{_bytes_text(memory)} of memory of {device}: {fits} (the papers use k = 2 to 4)")


def _bytes_text(n: int) -> str:
    return f"{n / 1e12:,.1f} TB" if n >= 1e12 else f"{n / 1e9:,.1f} GB"


def train_run(config: TrainConfig, out: str, *, device: torch.device | str = "cpu", restart: bool = False,
              progress: bool = True, log: Callable[[str], None] = print) -> TrainedRun:
    """Trains (or resumes) the run of `config` in folder `out`; a checkpoint after every epoch.
    A k whose code cannot fit the device's memory is refused before anything is built."""
    config = config.resolved()
    dev = torch.device(device)
    _check_fits(config, dev)
    state = None
    if os.path.exists(_checkpoint_path(out)) and not restart:
        state = _read_checkpoint(out)
        saved = state["config"]
        differ = {k: (v, config.identity()[k]) for k, v in saved.identity().items() if config.identity()[k] != v}
        if differ:
            what = ", ".join(f"{k} {old!r} (asked: {new!r})" for k, (old, new) in differ.items())
            raise _error(f"{_checkpoint_path(out)} is a run with {what}; use another --out, or --restart "
                         f"to overwrite it")
        if state["epochs_done"] > config.epochs:
            raise _error(f"{_checkpoint_path(out)} has trained {state['epochs_done']} code epochs, more than the "
                         f"{config.epochs} asked; use another --out, or --restart to overwrite it")
    data, base_model = _build(config, config.data_dir, dev)
    run = TrainedRun(config, data, base_model, None, 0, 0, [])
    base_opt = make_optimizer(list(base_model.parameters()), config.lr, config.weight_decay)
    if state is not None:
        _restore(base_model, state, "base", out)
        _restore(base_opt, state, "base_optimizer", out)
        run.base_epochs_done, run.epochs_done, run.history = (state["base_epochs_done"], state["epochs_done"],
                                                              list(state["history"]))
        log(f"resuming {_checkpoint_path(out)}: base model {run.base_epochs_done}/{config.base_epochs} epochs, "
            f"code {run.epochs_done}/{config.epochs} epochs done")
    remaining = config.base_epochs - run.base_epochs_done + max(0, config.epochs - run.epochs_done)
    bar = Progress(remaining, "coded train", "epoch", enabled=progress, in_place=True, every=5.0)
    optimizers: dict[str, Any] = {"base": base_opt}
    try:
        while run.base_epochs_done < config.base_epochs:
            loss = base_epoch(base_model, base_opt, data, epoch=run.base_epochs_done, seed=config.seed,
                              batch_size=config.batch_size, device=dev)
            run.base_epochs_done += 1
            run.history.append({"stage": "base", "epoch": run.base_epochs_done, "loss": loss})
            _save_checkpoint(out, run, optimizers)
            bar.update(f"base model epoch {run.base_epochs_done}, loss {loss:.4f}")
        run.code = _make_code(config, data, base_model, dev)
        code_opt = make_optimizer(run.code.trainable_parameters(), config.lr, config.weight_decay)
        optimizers["code"] = code_opt
        if state is not None and run.epochs_done > 0:
            _restore(run.code, state, "code", out)
            _restore(code_opt, state, "code_optimizer", out)
        while run.epochs_done < config.epochs:
            loss = code_epoch(run.code, base_model, code_opt, data, epoch=run.epochs_done, seed=config.seed,
                              loss=config.loss, groups_per_batch=config.groups_per_batch, device=dev)
            run.epochs_done += 1
            run.history.append({"stage": "code", "epoch": run.epochs_done, "loss": loss})
            _save_checkpoint(out, run, optimizers)
            bar.update(f"code epoch {run.epochs_done}, loss {loss:.4f}")
    finally:
        bar.close()
    return run


def load_run(folder: str, *, data_dir: str | None = None, device: torch.device | str = "cpu") -> TrainedRun:
    """A finished training run from its folder (data_dir overrides the one it was trained with)."""
    state = _read_checkpoint(folder)
    config = state["config"]
    if state["epochs_done"] < config.epochs or state["base_epochs_done"] < config.base_epochs:
        raise _error(f"the training in {folder} stopped at base epoch {state['base_epochs_done']}/"
                     f"{config.base_epochs}, code epoch {state['epochs_done']}/{config.epochs}; rerun "
                     f"`coded train --out {folder}` with its options to finish it")
    dev = torch.device(device)
    data, base_model = _build(config, data_dir if data_dir is not None else config.data_dir, dev)
    _restore(base_model, state, "base", folder)
    code = _make_code(config, data, base_model, dev)
    _restore(code, state, "code", folder)
    return TrainedRun(config, data, base_model, code, state["base_epochs_done"], state["epochs_done"],
                      list(state["history"]))


def evaluate_run(run: TrainedRun, *, device: torch.device | str = "cpu", passes: int = 1) -> CodedMetrics:
    return evaluate(run.code, run.base_model, run.data, seed=run.config.seed, passes=passes, device=device)


def format_metrics(run: TrainedRun, metrics: CodedMetrics) -> str:
    m = metrics

    def pct(x: float) -> str:
        return f"{100 * x:5.1f} %"

    return "\n".join([
        f"{run.config.describe()}; trained {run.base_epochs_done} + {run.epochs_done} epochs",
        f"  base model accuracy        {pct(m.base_accuracy)}",
        f"  reconstruction accuracy    {pct(m.reconstruction_accuracy)}   (baselines: most frequent class "
        f"{pct(m.most_frequent_reconstruction)}, parity output unchanged {pct(m.parity_output_reconstruction)})",
        f"  degraded-mode accuracy     {pct(m.degraded_accuracy)}   (baselines: most frequent class "
        f"{pct(m.most_frequent_degraded)}, parity output unchanged {pct(m.parity_output_degraded)})",
        f"  over {m.reconstructions} erased outputs of the {run.data.name} test set"])


def metrics_record(trained: TrainedRun, metrics: CodedMetrics, **extra: Any) -> dict[str, Any]:
    """What metrics.json holds: the configuration, the metrics, the loss of every epoch."""
    return {"config": asdict(trained.config), "metrics": metrics.to_dict(), "history": trained.history, **extra}


# --- cost ----------------------------------------------------------------------------------------

COST_COLUMNS = ["run", "dataset", "paradigm", "encoder", "k", "component", "batch", "queries_per_call", "flops",
                "flops_per_query", "seconds", "seconds_ci_low", "seconds_ci_high", "seconds_per_query",
                "utilization", "timing_mode", "device"]


def cost_table(runs: Sequence[tuple[str, TrainedRun]], *, device: torch.device | str, dtype: torch.dtype,
               batch: int, warmup: int, iters: int, target_ci: float | None,
               max_time: float) -> dict[str, Any]:
    """One row per (run, component) and one redundancy summary per run."""
    from torchutil.coded.cost import measure_cost, redundancy_summary

    rows, summaries = [], []
    for name, run in runs:
        c = run.config
        parts = measure_cost(run.code, run.base_model, run.data.shape, run.data.classes, batch=batch,
                             device=device, dtype=dtype, warmup=warmup, iters=iters, target_ci=target_ci,
                             max_time=max_time)
        key = {"run": name, "dataset": c.dataset, "paradigm": c.paradigm, "encoder": c.encoder, "k": c.k}
        rows += [{**key, **p.to_dict()} for p in parts]
        summaries.append({**key, **redundancy_summary(parts, c.k),
                          **{f"{p.component.replace(' ', '_')}_seconds": p.seconds for p in parts}})
    return {"batch": batch, "dtype": str(dtype).removeprefix("torch."), "rows": rows, "summaries": summaries}


def format_cost(table: dict[str, Any]) -> str:
    """A markdown table: per query, each part's FLOPs and time, and the redundancy against F."""
    lines = [f"Per query, batch {table['batch']} ({table['dtype']}); time = median of one call / queries it serves.",
             "", "| run | part | FLOPs/query | µs/call (95 % CI) | µs/query | utilization | timing |",
             "|---|---|---|---|---|---|---|"]
    for r in table["rows"]:
        lines.append(f"| {r['run']} | {r['component']} | {r['flops_per_query']:,.0f} | {1e6 * r['seconds']:.1f} "
                     f"({1e6 * r['seconds_ci_low']:.1f}–{1e6 * r['seconds_ci_high']:.1f}) | "
                     f"{1e6 * r['seconds_per_query']:.2f} | {100 * r['utilization']:.3f} % | "
                     f"{r['timing_mode']} on {r['device']} |")
    lines += ["", "| run | k | code's extra FLOPs / F's | replication's (1/k) | code's extra time / F's |",
              "|---|---|---|---|---|"]
    for s in table["summaries"]:
        lines.append(f"| {s['run']} | {s['k']} | {s['coded_extra_flops_ratio']:.3f} | "
                     f"{s['replication_extra_ratio']:.3f} | {s['coded_extra_seconds_ratio']:.3f} |")
    return "\n".join(lines)


def write_cost(table: dict[str, Any], out: str) -> list[str]:
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "cost.json"), table, indent=2)
    with atomic_open(os.path.join(out, "cost.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COST_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table["rows"])
    with atomic_open(os.path.join(out, "cost.md")) as f:
        f.write(format_cost(table) + "\n")
    return ["cost.json", "cost.csv", "cost.md"]


# --- simulation ------------------------------------------------------------------------------------


def format_simulation(summaries: Sequence[sim.SimSummary], config: sim.SimConfig) -> str:
    lines = [f"k = {config.k}, F {1e6 * config.service_seconds:.1f} µs per query, straggler {config.straggler}"
             + (f" (p {config.straggler_probability}, x{config.slowdown})" if config.straggler == "bimodal" else "")
             + (f" (tail {config.tail})" if config.straggler == "shifted-exp" else "")
             + f", failures {config.failure_probability}, {config.arrivals} arrivals",
             "", "| load | policy | workers | median (µs) | p99 (µs) | p99.9 (µs) | reconstructed | unanswered |",
             "|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s.load:g} | {s.policy} | {s.workers} | {1e6 * s.median:.1f} | {1e6 * s.p99:.1f} | "
                     f"{1e6 * s.p999:.1f} | {100 * s.fraction_reconstructed:.2f} % | "
                     f"{100 * s.fraction_unanswered:.3f} % |")
    return "\n".join(lines)


def plot_simulation(summaries: Sequence[sim.SimSummary], config: sim.SimConfig, path: str) -> None:
    """Median and p99.9 latency against load per policy, and the fraction reconstructed."""
    fig = figure(figsize=(12, 3.8))
    axes = fig.subplots(1, 3)
    for policy in sim.POLICIES:
        mine = [s for s in summaries if s.policy == policy]
        if not mine:
            continue
        loads = [s.load for s in mine]
        axes[0].plot(loads, [1e6 * s.median for s in mine], "o-", label=policy)
        axes[1].plot(loads, [1e6 * s.p999 for s in mine], "o-", label=policy)
        axes[2].plot(loads, [100 * s.fraction_reconstructed for s in mine], "o-", label=policy)
    for ax, title in zip(axes, ("median latency (µs)", "p99.9 latency (µs)", "answered by reconstruction (%)")):
        ax.set_title(title)
        ax.set_xlabel("load (of k workers' capacity)")
        ax.grid(alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend()
    fig.suptitle(f"k = {config.k}, {config.straggler} stragglers"
                 + (f" (p = {config.straggler_probability}, x{config.slowdown})" if config.straggler == "bimodal"
                    else "") + f", F = {1e6 * config.service_seconds:.1f} µs/query")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def write_simulation(summaries: Sequence[sim.SimSummary], config: sim.SimConfig, out: str, *, run: str | None,
                     plots: bool) -> list[str]:
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "sim.json"), {"run": run, "config": asdict(config),
                                               "summaries": [s.to_dict() for s in summaries]}, indent=2)
    with atomic_open(os.path.join(out, "sim.md")) as f:
        f.write(format_simulation(summaries, config) + "\n")
    written = ["sim.json", "sim.md"]
    if plots:
        plot_simulation(summaries, config, os.path.join(out, "sim.png"))
        written.append("sim.png")
    return written
