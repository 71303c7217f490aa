"""Utilization of LLM inference: torchutil.profile_generate, the prefill and each decode step.

    result = torchutil.profile_generate(model, input_ids, max_new_tokens=64)   # a Hugging Face LM
    result.prefill          # ProfileResult of the prompt's forward
    result.decode           # GenerationRow per measured decode step: FLOPs, bytes, MFU, MBU, ...
    result.loop_slowdown    # generate()'s time / the profiled forwards' time, same tokens

Every forward is measured by torchutil.profile (counted in C++, timed as CUDA-graph replays
where it captures); this module runs the generation, keeps the KV cache at each measured
context, and splits bytes into weights and KV cache. docs/generation.md defines every number.
"""
from __future__ import annotations

import csv
import inspect
import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Sequence

import numpy as np
import torch

from torchutil._decoding import HFRunner, Step, StepRunner, error, next_token
from torchutil._files import atomic_open, save_figure
from torchutil._json import json_safe
from torchutil.profiler import ProfileResult, _synchronize, profile

__all__ = ["GenerationResult", "GenerationRow", "plot_generation", "profile_generate"]

# The most tokens one profile_generate call generates: each is a forward, and no model has a context
# this long (the loop is otherwise unbounded: a typo of 10**9 ran on and on).
MAX_NEW_TOKENS = 1 << 20
# With step= there is no max_position_embeddings to bound a generation by: 2**17 positions, the
# longest context of today's open models (128 Ki), each a forward of the prefill's loop.
MAX_STEP_NEW_TOKENS = 1 << 17
# Timed runs of the plain loop: each generates max_new_tokens tokens (more never finished).
MAX_LOOP_REPEATS = 1000
# Keywords of torchutil.profile that profile_generate passes on (model and x are its own).
_PROFILE_OPTIONS = frozenset(inspect.signature(profile).parameters) - {"model", "x", "args", "kwargs", "timing"}


@dataclass(frozen=True)
class GenerationRow:
    """One measured forward of a generation: the prefill, or one decode step.

    Totals are per forward, over the whole batch. context: tokens per sequence in the KV cache
    before the forward; tokens: tokens per sequence it processes (the prompt's length, or 1).
    flops, matrix_flops, bytes: the engine's counts (torchutil.profile; attention's nominal
    FLOPs); useful_flops: the engine's count of what attention masks keep (NaN where this build
    has no such field). attention_bytes: the engine's bytes of the attention ops (q, K, V and
    output; NaN where no attention op ran). weight_bytes: the parameters' bytes;
    kv_read_bytes: the cache's K and V at `context`; kv_write_bytes: K and V of `tokens` new
    tokens. mfu = flops / seconds / peak FLOP/s (torchutil's utilization), useful_mfu the same
    with useful_flops, mbu = bytes / seconds / peak bandwidth. analytic_*: as serving engines
    compute them, 2 x parameters per token and weights plus KV bytes. With energy=True (an
    option of torchutil.profile): joules per forward, the device's whole draw (docs/energy.md),
    and joules_per_token = joules / (batch x tokens); NaN without it.
    """

    phase: str
    batch: int
    context: int
    tokens: int
    flops: float
    matrix_flops: float
    useful_flops: float
    bytes: float
    attention_bytes: float
    weight_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    seconds: float
    seconds_relative_ci: float
    timing_mode: str
    mfu: float
    useful_mfu: float
    mbu: float
    tokens_per_second: float
    analytic_flops: float
    analytic_bytes: float
    analytic_mfu: float
    analytic_mbu: float
    joules: float
    joules_per_token: float


@dataclass
class GenerationResult:
    """What profile_generate measured. prefill / decode_profiles: the ProfileResults;
    prefill_row / decode: their GenerationRows (decode: one per measured step, by context).
    loop_*: the plain generation loop (Hugging Face's generate, or a greedy loop over `step`)
    for the same tokens, timed end to end with the device synchronized, median of
    loop_repeats runs. profiled_seconds: the prefill's seconds plus every decode step's
    (interpolated in context between measured steps; decode_estimated says whether any was).
    loop_slowdown = loop_seconds / profiled_seconds. profile_seconds: profile_generate's own
    wall time, the loop's timing excluded."""

    batch: int
    prompt_length: int
    max_new_tokens: int
    cache: str
    parameters: int
    weight_bytes: int
    kv_bytes_per_token: float
    prefill: ProfileResult
    prefill_row: GenerationRow
    decode_profiles: list[ProfileResult]
    decode: list[GenerationRow]
    decode_estimated: bool
    profiled_seconds: float
    loop_seconds: float
    loop_first_token_seconds: float
    loop_repeats: int
    profile_seconds: float
    tokens: torch.Tensor
    loop_tokens: torch.Tensor
    peak_flops_per_second: float
    peak_bytes_per_second: float

    @property
    def loop_tokens_equal(self) -> bool:
        """Whether the loop generated the tokens the profiled generation did (greedy both; with
        random weights' flat logits, a rounding difference between kernels can flip one)."""
        return torch.equal(self.tokens.cpu(), self.loop_tokens.cpu())

    @property
    def rows(self) -> list[GenerationRow]:
        return [self.prefill_row, *self.decode]

    @property
    def generated_tokens(self) -> int:
        return self.batch * self.max_new_tokens

    @property
    def profiled_tokens_per_second(self) -> float:
        return self.generated_tokens / self.profiled_seconds

    @property
    def loop_tokens_per_second(self) -> float:
        return self.generated_tokens / self.loop_seconds

    @property
    def loop_slowdown(self) -> float:
        return self.loop_seconds / self.profiled_seconds

    @property
    def loop_decode_seconds_per_step(self) -> float:
        """(loop_seconds - loop_first_token_seconds) / decode steps; NaN with one new token."""
        steps = self.max_new_tokens - 1
        return (self.loop_seconds - self.loop_first_token_seconds) / steps if steps else math.nan

    def summary(self) -> dict[str, Any]:
        names = ("batch", "prompt_length", "max_new_tokens", "cache", "parameters", "weight_bytes",
                 "kv_bytes_per_token", "decode_estimated", "profiled_seconds", "loop_seconds",
                 "loop_first_token_seconds", "loop_repeats", "profile_seconds", "peak_flops_per_second",
                 "peak_bytes_per_second", "generated_tokens", "profiled_tokens_per_second",
                 "loop_tokens_per_second", "loop_slowdown", "loop_decode_seconds_per_step", "loop_tokens_equal")
        return {n: getattr(self, n) for n in names}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "rows": [asdict(r) for r in self.rows]}

    def to_json(self, **kwargs: Any) -> str:
        """to_dict() as JSON, NaN written as null."""
        return json.dumps(json_safe(self.to_dict()), **kwargs)

    def to_csv(self, path: str) -> None:
        """The prefill row and the decode rows, one CSV line each, columns as GenerationRow."""
        rows_to_csv(path, self.rows)

    def plot(self, path: str) -> None:
        """plot_generation([self], path)."""
        plot_generation([self], path)

    def format(self) -> str:
        names = ("context", "GFLOP", "MB", "weight MB", "KV read MB", "ms", "MFU %", "MBU %", "analytic MFU %",
                 "analytic MBU %", "tokens/s", "J/token")
        lines = [f"batch {self.batch}, prompt {self.prompt_length}, {self.max_new_tokens} new tokens, "
                 f"{self.cache} cache, {self.parameters / 1e6:.1f} M parameters; peaks "
                 f"{self.peak_flops_per_second / 1e12:.4g} TFLOP/s, {self.peak_bytes_per_second / 1e12:.4g} TB/s",
                 f"{'phase':<8}" + "".join(f"{n:>15}" for n in names) + "  timing"]
        for r in self.rows:
            values = (r.context, r.flops / 1e9, r.bytes / 1e6, r.weight_bytes / 1e6, r.kv_read_bytes / 1e6,
                      1e3 * r.seconds, 100 * r.mfu, 100 * r.mbu, 100 * r.analytic_mfu, 100 * r.analytic_mbu,
                      r.tokens_per_second, r.joules_per_token)
            lines.append(f"{r.phase:<8}" + "".join(f"{v:>15.4g}" for v in values) + f"  {r.timing_mode}")
        est = " (decode steps between measured ones interpolated)" if self.decode_estimated else ""
        lines.append(f"profiled forwards {self.profiled_seconds * 1e3:.4g} ms{est} = "
                     f"{self.profiled_tokens_per_second:.4g} tokens/s; generation loop "
                     f"{self.loop_seconds * 1e3:.4g} ms = {self.loop_tokens_per_second:.4g} tokens/s: "
                     f"the loop takes {self.loop_slowdown:.3g}x the forwards' time")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def rows_to_csv(path: str, rows: Sequence[GenerationRow], extra: dict[str, Sequence[Any]] | None = None) -> None:
    """GenerationRows as CSV; `extra` adds leading columns (name -> one value per row)."""
    names = [f.name for f in fields(GenerationRow)]
    extra = extra or {}
    with atomic_open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*extra, *names])
        for i, r in enumerate(rows):
            w.writerow([*(v[i] for v in extra.values()), *(getattr(r, n) for n in names)])


def _decode_steps(steps: str | Sequence[int], n: int) -> list[int]:
    """The decode steps to measure, of 0..n-1 (step s runs at context prompt + s)."""
    if isinstance(steps, str):
        if steps == "all":
            return list(range(n))
        if steps == "geometric":
            return sorted({0, n - 1} | {2 ** k for k in range(n.bit_length()) if 2 ** k < n}) if n else []
        raise error(f"steps must be 'all', 'geometric' or a list of step indices, got {steps!r}")
    chosen = list(steps)
    if not chosen and n:
        raise error(f"steps=[] measures no decode step of the {n:,}: the prefill alone would stand for the whole "
                    f"generation (profiled_seconds, loop_slowdown); give at least one step of 0..{n - 1}, or "
                    f"max_new_tokens=1 to profile the prefill alone")
    bad = [s for s in chosen if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s < n]
    if bad or len(set(chosen)) != len(chosen):
        raise error(f"steps must be distinct ints in 0..{n - 1} (max_new_tokens - 2: decode step s runs at "
                    f"context prompt + s), got {list(steps)!r}")
    return sorted(chosen)


def _median_seconds(run: Callable[[], Any], repeats: int, device: torch.device) -> tuple[float, Any]:
    """One untimed run, then the median of `repeats` runs, each from synchronized to
    synchronized, and what the last run returned."""
    out = run()
    times = []
    for _ in range(repeats):
        _synchronize(device)
        t0 = time.perf_counter()
        out = run()
        _synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _row(phase: str, r: ProfileResult, *, batch: int, context: int, tokens: int, weight_bytes: int,
         kv_token: float, parameters: int) -> GenerationRow:
    seconds, peak, bandwidth = r.seconds, r.peak_flops_per_second, r.peak_bytes_per_second
    useful = float(getattr(r, "useful_flops", math.nan))
    attention = [o.bytes for o in r.ops if "attention" in o.op]
    kv_read, kv_write = kv_token * context, kv_token * tokens
    analytic_flops = 2.0 * parameters * batch * tokens
    analytic_bytes = weight_bytes + kv_read + kv_write
    return GenerationRow(
        phase=phase, batch=batch, context=context, tokens=tokens, flops=r.flops, matrix_flops=r.matrix_flops,
        useful_flops=useful, bytes=r.bytes, attention_bytes=float(sum(attention)) if attention else math.nan,
        weight_bytes=float(weight_bytes), kv_read_bytes=kv_read, kv_write_bytes=kv_write, seconds=seconds,
        seconds_relative_ci=r.seconds_relative_ci, timing_mode=r.timing_mode, mfu=r.utilization,
        useful_mfu=useful / seconds / peak, mbu=r.bandwidth_utilization,
        tokens_per_second=batch * tokens / seconds, analytic_flops=analytic_flops, analytic_bytes=analytic_bytes,
        analytic_mfu=analytic_flops / seconds / peak, analytic_mbu=analytic_bytes / seconds / bandwidth,
        joules=r.joules, joules_per_token=r.joules / (batch * tokens))


def profile_generate(
    model: Any,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    *,
    step: Callable[..., torch.Tensor] | None = None,
    cache: Any = "dynamic",
    rewind: Callable[[Any, int], None] | None = None,
    kv_bytes_per_token: float | None = None,
    max_cache_len: int | None = None,
    steps: str | Sequence[int] = "geometric",
    timing: str = "auto",
    loop_repeats: int = 3,
    **options: Any,
) -> GenerationResult:
    """Profiles greedy generation of max_new_tokens tokens after input_ids [batch, prompt].

    The prompt's forward (the prefill) and the decode steps chosen by `steps` are each measured
    by torchutil.profile(..., timing=timing, **options): "geometric" (the default) measures
    decode steps 0, 1, 2, 4, 8, ... and the last, "all" every one, or a list of step indices;
    decode step s is the forward at context prompt + s, and there are max_new_tokens - 1 of
    them (the prefill makes the first token). Between measured steps the generation goes on
    eagerly, so each step sees the cache a real generation has. Each profiled forward starts
    from the same cache state (see torchutil._decoding.Step), so warm-ups, capture and replays repeat one step.
    Then the plain loop is timed for the same tokens (loop_repeats runs after one untimed).

    model: a Hugging Face causal LM (called as model(tokens, past_key_values=cache,
        use_cache=True, logits_to_keep=1) with a DynamicCache, cache="dynamic", or a
        StaticCache of max_cache_len (default prompt + max_new_tokens) positions,
        cache="static"; the loop is model.generate). With step=, any nn.Module: its
        parameters are the weights, step(tokens, cache) -> logits runs a forward that appends
        to `cache` (any object), rewind(cache, length) makes the cache hold its first `length`
        tokens again (it is called before every profiled forward; for CUDA graphs it must put
        back the tensors the cache held, not slice the newer ones), and the loop is greedy
        steps. kv_bytes_per_token: K and V bytes per position over the batch; by default read
        from the cache's tensors (HF) or their growth over one step (step=).
    options: keywords of torchutil.profile (warmup, iters, target_ci, trace, peak, ...).
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.numel() == 0 \
            or input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
        shown = (f"{input_ids.dtype} of shape {tuple(input_ids.shape)}" if isinstance(input_ids, torch.Tensor)
                 else type(input_ids).__name__)
        raise error(f"input_ids must be a non-empty 2-D integer tensor [batch, prompt length], got {shown}")
    for name, value in (("max_new_tokens", max_new_tokens), ("loop_repeats", loop_repeats)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise error(f"{name} must be a positive int, got {value!r}")
    if max_new_tokens > MAX_NEW_TOKENS:
        raise error(f"max_new_tokens must be at most {MAX_NEW_TOKENS:,} (2**20 forwards, beyond any model's "
                    f"context), got {max_new_tokens:,}")
    if step is not None and max_new_tokens > MAX_STEP_NEW_TOKENS:
        raise error(f"with step=, max_new_tokens must be at most {MAX_STEP_NEW_TOKENS:,} (2**17 positions, the "
                    f"longest context of today's models; each is a forward of every loop), got {max_new_tokens:,}")
    if loop_repeats > MAX_LOOP_REPEATS:
        raise error(f"loop_repeats must be at most {MAX_LOOP_REPEATS:,} (each run generates every token again), got "
                    f"{loop_repeats:,}")
    unknown = sorted(set(options) - _PROFILE_OPTIONS)
    if unknown:
        raise TypeError(f"torchutil.profile_generate: no option {', '.join(map(repr, unknown))}; options are "
                        f"torchutil.profile's: {', '.join(sorted(_PROFILE_OPTIONS))}")
    if kv_bytes_per_token is not None and not (isinstance(kv_bytes_per_token, (int, float))
                                               and not isinstance(kv_bytes_per_token, bool)
                                               and 0 < kv_bytes_per_token < math.inf):
        raise error(f"kv_bytes_per_token must be a finite positive number, got {kv_bytes_per_token!r}")
    batch, prompt = input_ids.shape
    measured = _decode_steps(steps, max_new_tokens - 1)
    runner: HFRunner | StepRunner
    if step is None:
        if not (hasattr(model, "config") and hasattr(model, "generate")):
            raise error(f"without step=, model must be a Hugging Face causal LM (with .config and .generate), got "
                        f"{type(model).__name__}; for another stack pass step=, cache= and rewind=")
        if max_cache_len is not None and max_cache_len < prompt + max_new_tokens:
            raise error(f"max_cache_len must hold prompt + max_new_tokens = {prompt + max_new_tokens} positions, "
                        f"got {max_cache_len}")
        runner = HFRunner(model, cache, max_cache_len or prompt + max_new_tokens, prompt + max_new_tokens)
        kind = cache
    else:
        if not isinstance(model, torch.nn.Module) or not callable(step) or not callable(rewind) \
                or cache is None or isinstance(cache, str):
            raise error("with step=, model must be the nn.Module holding the weights, cache= the cache object "
                        f"and rewind= a function (cache, length); got model {type(model).__name__}, cache "
                        f"{cache!r}, rewind {rewind!r}")
        runner = StepRunner(step, cache, rewind, kv_bytes_per_token)
        kind = type(cache).__name__
    parameters = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    device = input_ids.device
    started = time.perf_counter()
    with torch.inference_mode():
        runner.call(input_ids)  # an eager first forward: lazily built cache tensors exist from here
        prefill = profile(Step(model, runner.call, runner.checkpoint(0)), input_ids, timing=timing, **options)
        runner.checkpoint(0)()
        tokens = [next_token(runner.call(input_ids))]
        runner.observe()
        decode_profiles, contexts = [], []
        for s in range(max_new_tokens - 1):
            if s in measured:
                restore = runner.checkpoint(prompt + s)
                decode_profiles.append(profile(Step(model, runner.call, restore), tokens[-1], timing=timing,
                                               **options))
                contexts.append(prompt + s)
                restore()
            tokens.append(next_token(runner.call(tokens[-1])))
            runner.observe()
        kv_token = runner.kv_bytes_per_token() if kv_bytes_per_token is None else float(kv_bytes_per_token)
        profile_seconds = time.perf_counter() - started
        loop_seconds, loop_tokens = _median_seconds(lambda: runner.loop(input_ids, max_new_tokens), loop_repeats,
                                                    device)
        first_seconds, _ = _median_seconds(lambda: runner.loop(input_ids, 1), loop_repeats, device)
    common = dict(batch=batch, weight_bytes=weight_bytes, kv_token=kv_token, parameters=parameters)
    prefill_row = _row("prefill", prefill, context=0, tokens=prompt, **common)
    decode = [_row("decode", r, context=c, tokens=1, **common) for r, c in zip(decode_profiles, contexts)]
    all_steps = np.arange(max_new_tokens - 1)
    decode_seconds = float(np.interp(all_steps, [c - prompt for c in contexts], [r.seconds for r in decode]).sum()) \
        if decode else 0.0
    return GenerationResult(
        batch=batch, prompt_length=prompt, max_new_tokens=max_new_tokens, cache=kind, parameters=parameters,
        weight_bytes=weight_bytes, kv_bytes_per_token=kv_token, prefill=prefill, prefill_row=prefill_row,
        decode_profiles=decode_profiles, decode=decode, decode_estimated=len(decode) < max_new_tokens - 1,
        profiled_seconds=prefill.seconds + decode_seconds, loop_seconds=loop_seconds,
        loop_first_token_seconds=first_seconds, loop_repeats=loop_repeats, profile_seconds=profile_seconds,
        tokens=torch.cat(tokens, 1), loop_tokens=loop_tokens,
        peak_flops_per_second=prefill.peak_flops_per_second, peak_bytes_per_second=prefill.peak_bytes_per_second)


def plot_generation(results: Sequence[GenerationResult], path: str) -> None:
    """Decode memory bandwidth and FLOP/s against context, a line per (batch, cache), engine
    counts solid and analytic dashed, prefill as squares at the prompt's length, and each
    peak drawn as a line (the results' own peak values). Writes a PNG; needs matplotlib."""
    if not results:
        raise error("plot_generation needs at least one result")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("torchutil: the generation plot needs matplotlib, which is not installed; install it "
                          "with `pip install matplotlib` (the plot extra)") from None
    fig = Figure(figsize=(12, 4.8))
    FigureCanvasAgg(fig)
    bw_ax, fl_ax = fig.subplots(1, 2)
    groups: dict[tuple[int, str], list[GenerationResult]] = {}
    for res in results:
        groups.setdefault((res.batch, res.cache), []).append(res)
    for i, ((batch, kind), group) in enumerate(sorted(groups.items())):
        color = f"C{i % 10}"
        rows = sorted((r for res in group for r in res.decode), key=lambda r: r.context)
        ctx = [r.context for r in rows]
        label = f"batch {batch}, {kind}"
        bw_ax.plot(ctx, [r.bytes / r.seconds for r in rows], "-o", ms=3, color=color, label=label)
        bw_ax.plot(ctx, [r.analytic_bytes / r.seconds for r in rows], "--", color=color)
        fl_ax.plot(ctx, [r.flops / r.seconds for r in rows], "-o", ms=3, color=color, label=f"{label}: decode")
        fl_ax.plot(ctx, [r.analytic_flops / r.seconds for r in rows], "--", color=color)
        fl_ax.plot([res.prompt_length for res in group], [res.prefill_row.flops / res.prefill_row.seconds
                                                          for res in group], "s", color=color,
                   label=f"{label}: prefill")
    first = results[0].prefill
    for ax, peak, source, unit, what in (
            (bw_ax, results[0].peak_bytes_per_second, first.bandwidth_source, "TB/s", "bytes/s"),
            (fl_ax, results[0].peak_flops_per_second, first.peak_source, "TFLOP/s", "FLOP/s")):
        ax.axhline(peak, color="black", lw=1)
        ax.annotate(f"peak {peak / 1e12:.4g} {unit} ({source.split(':')[0]})", (0.01, peak),
                    xycoords=("axes fraction", "data"), va="bottom", fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context (tokens in the KV cache)")
        ax.set_ylabel(f"achieved {what} (solid: counted; dashed: analytic)")
        ax.secondary_yaxis("right", functions=(lambda v, p=peak: 100 * v / p, lambda u, p=peak: u * p / 100)) \
            .set_ylabel("% of peak (MBU)" if what == "bytes/s" else "% of peak (MFU)")
        ax.grid(True, which="both", alpha=0.3)
    bw_ax.set_title("decode: memory bandwidth")
    fl_ax.set_title("FLOP/s: decode steps and prefill")
    bw_ax.legend(fontsize=7)
    fl_ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)

