"""The Python face of the profiler: torchutil.profile(), torchutil.Profiler and their result.

All counting and timing runs in C++ (torch.ops.util._profile, _count_begin/_count_end); this
module only shapes what comes back.
"""
from __future__ import annotations

import csv
import html
import json
import threading
import time
from dataclasses import asdict, dataclass, field as dataclass_field, fields
from typing import Any, Sequence

import torch

from torchutil import _C, _ops  # noqa: F401  (registers the ops)
from torchutil._json import json_safe
from torchutil.fields import FIELDS, TEXT_FIELDS, output_rows, row_class

__all__ = ["KernelRow", "OpRow", "ProfileResult", "Profiler", "UnknownOp", "profile", "utilization"]


OpRow = row_class(
    "OpRow", "ops",
    "One row of the per-op table: an op, called from one module, in one dtype. FLOPs and bytes\n"
    "are totals over the `calls` calls of one forward; kernel figures (NaN when nothing was\n"
    "traced) are per forward.",
    namespace={"flops": property(lambda self: self.matrix_flops + self.vector_flops,
                                 doc="matrix_flops + vector_flops")},
)

KernelRow = row_class(
    "KernelRow", "kernels",
    "One traced GPU kernel, memcpy or memset, with the op that accounts for it.",
)

UnknownOp = row_class("UnknownOp", "unknown_ops", "An op with no FLOP formula.")


@dataclass(repr=False)
class ProfileResult:
    """What one profile measured.

    summary: float64 tensor, one value per name in torchutil.FIELDS (the tensor
        torch.ops.util.profile returns). Each field is also an attribute: result.utilization.
    op_table: float64 tensor [len(ops), len(OP_FIELDS)], the numbers of `ops` as a tensor.
    ops: per-op rows (OpRow) in first-call order.
    unknown_ops: ops with no FLOP formula and no counted callee: name -> calls per forward.
    kernel_table: float64 tensor [len(kernels), len(KERNEL_FIELDS)], the numbers of `kernels`.
    kernels: every traced GPU kernel, memcpy and memset (KernelRow): the counted forward's
        (timed == 0), then the timed forwards'.
    texts: the result's texts by name (torchutil.TEXT_FIELDS), also attributes:
        result.peak_source, .peak_dtype, .timing_mode, .device, .trace_status,
        .kernel_attribution, .chrome_trace.
    """

    summary: torch.Tensor
    op_table: torch.Tensor
    ops: list[Any]
    unknown_ops: dict[str, int]
    kernel_table: torch.Tensor
    kernels: list[Any]
    texts: dict[str, str]
    _values: dict[str, float] = dataclass_field(default_factory=dict, repr=False)

    @classmethod
    def _from_output(cls, output: Any) -> "ProfileResult":
        """From a util.ProfileOutput script object (torch.ops.util._profile, _count_end)."""
        summary = output.summary()
        op_table, ops = output_rows(OpRow, output, "ops")
        kernel_table, kernels = output_rows(KernelRow, output, "kernels")
        _, unknown = output_rows(UnknownOp, output, "unknown_ops")
        return cls(
            summary=summary,
            op_table=op_table,
            ops=ops,
            unknown_ops={u.op: u.calls for u in unknown},
            kernel_table=kernel_table,
            kernels=kernels,
            texts={name: output.text(name) for name in TEXT_FIELDS},
            _values=dict(zip(FIELDS, summary.tolist())),
        )

    @property
    def kernel_names(self) -> list[str]:
        return [k.name for k in self.kernels]

    @property
    def kernel_ops(self) -> list[str]:
        return [k.op for k in self.kernels]

    @property
    def kernel_modules(self) -> list[str]:
        return [k.module for k in self.kernels]

    def __getattr__(self, name: str) -> Any:
        for part in ("_values", "texts"):
            values = self.__dict__.get(part, {})
            if name in values:
                return values[name]
        raise AttributeError(f"ProfileResult has no attribute {name!r}")

    def top_ops(self, n: int = 10, by: str = "flops") -> list[OpRow]:
        """The n rows with the most `by` ("flops", "matrix_flops", "vector_flops", "bytes",
        "calls", "kernel_seconds", "lost_seconds"); rows where `by` is NaN come last."""
        def key(r: OpRow) -> float:
            v = float(getattr(r, by))
            return float("-inf") if v != v else v

        return sorted(self.ops, key=key, reverse=True)[:n]

    def save_trace(self, path: str) -> None:
        """Writes the Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing)."""
        if not self.chrome_trace:
            raise ValueError(
                "torchutil: this result has no trace; profile a CUDA model with "
                f"chrome_trace=True (trace status: {self.trace_status})"
            )
        with open(path, "w") as f:
            f.write(self.chrome_trace)

    def ops_to_csv(self, path: str) -> None:
        """The per-op table as CSV, one row per (op, module, dtype)."""
        _rows_to_csv(path, self.ops, OpRow)

    def kernels_to_csv(self, path: str) -> None:
        """The per-kernel table as CSV (empty but for the header when nothing was traced)."""
        _rows_to_csv(path, self.kernels, KernelRow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": dict(self._values),
            "ops": [asdict(r) for r in self.ops],
            "unknown_ops": dict(self.unknown_ops),
            **{name: text for name, text in self.texts.items() if name != "chrome_trace"},
            "kernels": [asdict(k) for k in self.kernels],
        }

    def to_json(self, **kwargs: Any) -> str:
        """to_dict() as JSON; NaN and infinities (no timing on meta, no peak) are written as null."""
        return json.dumps(json_safe(self.to_dict()), **kwargs)

    def to_pandas(self, table: str = "ops") -> Any:
        """One table as a pandas DataFrame, a column per field: "ops" (OpRow), "kernels"
        (KernelRow) or "summary" (one row, a column per torchutil.FIELDS and the texts but
        chrome_trace). pandas is optional: `pip install pandas` where it is missing."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "torchutil: ProfileResult.to_pandas() needs pandas, which is not installed; "
                "install it with `pip install pandas`"
            ) from None
        if table == "ops":
            return pandas.DataFrame([asdict(r) for r in self.ops], columns=[f.name for f in fields(OpRow)])
        if table == "kernels":
            return pandas.DataFrame([asdict(k) for k in self.kernels],
                                    columns=[f.name for f in fields(KernelRow)])
        if table == "summary":
            texts = {k: v for k, v in self.texts.items() if k != "chrome_trace"}
            return pandas.DataFrame([{**self._values, **texts}])
        raise ValueError(f"torchutil: to_pandas(table=...) takes 'ops', 'kernels' or 'summary', got {table!r}")

    def _summary_items(self) -> list[tuple[str, str]]:
        """The headline figures as (label, formatted value): what repr() and the notebook show."""
        v = self._values
        items = [
            ("device", f"{self.device}, timing {self.timing_mode}, batch {_count(v['batch_size'])}"),
            ("utilization", f"{_percent(v['utilization'])} of {_scaled(v['peak_flops_per_second'], 1e12)} "
                            f"TFLOP/s ({self.peak_dtype})"),
            ("FLOPs / forward", f"{_scaled(v['flops'], 1e9)} GFLOP"),
            ("time / forward", f"{_scaled(v['seconds'], 1e-3)} ms"),
            ("ops", f"{len(self.ops)} rows, {_count(v['counted_op_calls'])} calls"
                    + (f", {len(self.unknown_ops)} with no formula" if self.unknown_ops else "")),
        ]
        if v.get("traced") == 1.0:
            items.append(("kernels", f"{_count(v['kernels_per_forward'])} / forward, "
                                     f"GPU busy {_percent(v['gpu_busy_fraction'])}"))
        else:
            items.append(("kernels", f"not traced ({self.trace_status})"))
        if self.counters_status != "off":
            items.append(("hardware counters", self._counters_line()))
        return items

    def _counters_line(self) -> str:
        """The hardware counters in one line: status, hardware/nominal FLOPs, throughputs."""
        v = self._values
        parts = [self.counters_status]
        if self.counters_not_on_gpu:
            parts.append(f"no counter on this GPU for {self.counters_not_on_gpu}")
        if v.get("hw_tensor_flops") == v.get("hw_tensor_flops"):
            parts.append(f"tensor {_scaled(v['hw_tensor_flops'], 1e9)} GFLOP = "
                         f"{_scaled(v['hw_flops_ratio'], 1.0)} x counted matrix FLOPs")
        for name, label in (("sm_throughput_pct", "SM"), ("dram_throughput_pct", "DRAM"),
                            ("tensor_active_pct", "tensor"), ("pm_sm_active_pct", "PM SM active"),
                            ("pm_tensor_active_pct", "PM tensor"), ("pm_dram_throughput_pct", "PM DRAM")):
            if v.get(name) == v.get(name):
                parts.append(f"{label} {v[name]:.1f} %")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return "ProfileResult(" + "; ".join(f"{k}: {x}" for k, x in self._summary_items()) + ")"

    def _repr_html_(self, top: int = 10) -> str:
        """For notebooks: the summary and the top ops by FLOPs, as HTML tables."""
        e = html.escape
        summary = "".join(f"<tr><th style='text-align:left'>{e(k)}</th><td style='text-align:left'>{e(x)}</td></tr>"
                          for k, x in self._summary_items())
        head = ("op", "module", "dtype", "calls", "GFLOP", "MB", "FLOP/B", "kernel ms")
        rows = "".join(
            "<tr>" + "".join(f"<td>{e(c)}</td>" for c in (
                r.op, r.module, r.dtype, str(r.calls), _scaled(r.flops, 1e9), _scaled(r.bytes, 1e6),
                _scaled(r.arithmetic_intensity, 1.0), _scaled(r.kernel_seconds, 1e-3))) + "</tr>"
            for r in self.top_ops(top))
        return (
            f"<div><b>torchutil profile</b><table>{summary}</table>"
            f"<details open><summary>top {top} ops by FLOPs</summary><table><thead><tr>"
            + "".join(f"<th>{h}</th>" for h in head)
            + f"</tr></thead><tbody>{rows}</tbody></table></details></div>"
        )

    def format(self, top: int = 10) -> str:
        """A human-readable summary and the top ops by FLOPs."""
        v = self._values
        lines = [
            f"device {self.device}, timing {self.timing_mode}, batch {int(v['batch_size'])}",
            f"utilization        {100 * v['utilization']:.3f} % of {v['peak_flops_per_second'] / 1e12:.2f} "
            f"TFLOP/s ({self.peak_dtype}; {self.peak_source})",
            f"FLOPs / forward    {v['flops'] / 1e9:.3f} GFLOP (matrix {v['matrix_flops'] / 1e9:.3f}, "
            f"vector {v['vector_flops'] / 1e9:.3f})",
            f"bytes / forward    {v['bytes'] / 1e6:.1f} MB, intensity {v['arithmetic_intensity']:.1f} FLOP/B",
            f"time / forward     {1e3 * v['seconds']:.3f} ms median of {int(v['iterations'])}, "
            f"{v['inputs_per_second']:.1f} inputs/s, {v['achieved_flops_per_second'] / 1e12:.3f} TFLOP/s",
        ]
        if v.get("traced") == 1.0:
            lines.append(
                f"GPU kernels        {v['kernels_per_forward']:.0f} / forward, {1e3 * v['kernel_seconds']:.3f} ms kernel time, "
                f"busy {100 * v['gpu_busy_fraction']:.1f} % of the forward, "
                f"utilization over kernel time {100 * v['kernel_utilization']:.3f} %"
            )
        else:
            lines.append(f"GPU kernels        not traced ({self.trace_status})")
        if self.counters_status != "off":
            lines.append(f"hardware counters  {self._counters_line()}")
        if self.unknown_ops:
            listed = ", ".join(f"{k} x{c}" for k, c in self.unknown_ops.items())
            lines.append(f"ops with no FLOP formula (not counted): {listed}")
        if v.get("peak_exceeded", 0) > 0:
            lines.append(f"the forward ran at {100 * v['peak_exceeded']:.0f} % of the peak: the peak "
                         f"({self.peak_source}) is below what this device reached for {self.peak_dtype}")
        if v.get("count_saturated") == 1.0:
            lines.append("a count did not fit int64 and is held at 2^63-1: the figures are lower bounds")
        if v.get("other_thread_op_calls", 0) > 0:
            lines.append(f"{v['other_thread_op_calls']:.0f} op calls on other threads were not counted "
                         "(forked work while several counts ran)")
        lines.append(f"top {top} ops by FLOPs:")
        lines.append(f"  {'op':<34} {'module':<28} {'calls':>5} {'GFLOP':>9} {'MB':>8} {'FLOP/B':>7}")
        for r in self.top_ops(top):
            lines.append(
                f"  {r.op:<34} {r.module[-28:]:<28} {r.calls:>5} {r.flops / 1e9:>9.4f} "
                f"{r.bytes / 1e6:>8.2f} {r.arithmetic_intensity:>7.1f}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _scaled(value: float, unit: float) -> str:
    """value / unit to four significant digits, "n/a" where it is NaN."""
    return "n/a" if value != value else f"{value / unit:.4g}"


def _percent(fraction: float) -> str:
    return "n/a" if fraction != fraction else f"{100 * fraction:.3g} %"


def _count(value: float) -> str:
    return "n/a" if value != value else str(int(value))


def _rows_to_csv(path: str, rows: list[Any], cls: type) -> None:
    """One CSV row per row of the dataclass cls, the columns in field order."""
    names = [f.name for f in fields(cls)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        for r in rows:
            w.writerow([getattr(r, n) for n in names])


_D = _ops.OPTION_DEFAULTS  # the defaults of csrc/ops/ProfileArgs.h's options table


def profile(
    model: Any,
    x: torch.Tensor | Sequence[torch.Tensor] | None = None,
    *,
    args: tuple[Any, ...] | None = None,
    kwargs: dict[str, Any] | None = None,
    batch_size: int | None = _D["batch_size"],
    warmup: int = _D["warmup"],
    iters: int = _D["iters"],
    timing: str | None = _D["timing"],
    cuda_graph: bool = _D["cuda_graph"],
    target_ci: float | None = _D["target_ci"],
    max_time: float = _D["max_time"],
    max_iters: int | None = _D["max_iters"],
    peak: str = _D["peak"],
    peak_flops: float | None = _D["peak_flops"],
    trace: bool = _D["trace"],
    trace_forwards: int = _D["trace_forwards"],
    chrome_trace: bool = _D["chrome_trace"],
    module_paths: bool = _D["module_paths"],
    counters: str | Sequence[str] | None = _D["counters"],
    counter_replay: str = _D["counter_replay"],
    gpu_lock: str | None = _D["gpu_lock"],
) -> ProfileResult:
    """Profiles model(*x), or model(*args, **kwargs): utilization, FLOPs, bytes, time and the
    per-op table.

    Runs `warmup` forwards (one of them, or one extra if warmup is 0, with counting on; a
    torch.compile'd model always gets one uncounted forward first, where it compiles), then the
    timed forwards without any hook: device events on accelerators, a steady clock on the CPU.
    On CUDA with trace=True, CUPTI records the kernels of the counted forward and of
    `trace_forwards` more, which are taken from the warm-ups (after the counted one; replays
    when timing as a CUDA graph) while there are enough.
    On the meta device only the count runs. Everything runs in inference mode.

    model: nn.Module, torch.compile'd module, TorchScript module or any callable.
    x: a tensor or a list/tuple of tensors, the model's positional inputs. args, kwargs: the
        inputs as torch.export takes them, for models that take lists (torchvision's detection
        models: args=([image],)), keyword arguments (Hugging Face models: kwargs={"input_ids":
        ids}) or anything else; their tensors give the device.
    batch_size: the inputs a forward holds (inputs_per_second is per input). By default the
        first tensor's first dimension, which must be unambiguous: a tensor of two or more
        dimensions (or, with args/kwargs, a list of tensors, whose length is the batch).
    timing: None (the default) is "auto" on CUDA and eager elsewhere; "auto": replays of one
        captured CUDA graph when the forward captures, else eager (result.timing_note says
        why): no host launch cost, a figure that repeats call to call, what a NAS reward needs;
        "eager": each timed forward launched from the host, as a deployed eager PyTorch model
        runs (at small batches this measures the host CPU as much as the model); "cuda_graph"
        (same as cuda_graph=True): graph replays or an error. `utilization` is measured in the
        mode that ran (result.timing_mode).
    iters: timed forwards; with target_ci (a relative half-width, 0.005 for +-0.5 %) the least
        number, and more are timed until the 95 % confidence interval of the median is that
        tight, max_time seconds have passed or max_iters forwards ran (result.repetition says
        which; seconds_ci_low/high and seconds_relative_ci give the interval).
    peak: where the peak FLOP/s comes from ("auto", "datasheet", "computed", "measured");
        peak_flops: a number that overrides it.
    trace: on CUDA, record kernels with CUPTI (kernel time, GPU-busy fraction, per-op kernel
        time; see trace_status). The counted forward and `trace_forwards` more are traced; the
        timed forwards never are. chrome_trace: also build the Perfetto trace (save_trace()).
    module_paths: name each op's module (Python module hooks on the counted forward; without
        them the rows' module is ""). torch.ops.util.profile, which returns the summary only,
        never records them.
    counters: the GPU's own hardware counters beside the counted FLOPs (CUDA, CUPTI; off by
        default, and nothing changes without them): "flops" (tensor-core FLOPs per path and
        dtype, FMA/ALU pipe instructions: hw_tensor_flops, hw_flops_ratio per op and forward),
        "throughput" (SM and DRAM throughput %, tensor-pipe active %, achieved occupancy),
        both read per kernel by CUPTI's range profiler in extra forwards after the timed ones
        (one per replay pass), and "timeline" (PM sampling of SM-active, tensor-active and DRAM
        throughput % over the traced forwards, else over forwards after the timed ones: pm_* fields, counter
        tracks in the Chrome trace); a list of them, or "all". Where counters cannot be read the profile
        still returns, and result.counters_status says why. See docs/counters.md.
    counter_replay: how the range profiler gets its passes: "user" (one more forward per pass)
        or "kernel" (CUPTI replays each kernel within one forward, restoring device memory, as
        ncu does: for forwards that cannot be run again unchanged; slower).
    gpu_lock: a file path: every phase that runs work on the GPU holds an exclusive lock on it
        (flock), so that processes sharing one GPU time their forwards one at a time (the
        host-only capture of an untraced graph profile runs without it).
    """
    options = {name: value for name, value in locals().items() if name in _ops.OPTION_TYPES}
    output = torch.ops.util._profile(model, x, args=args, kwargs=kwargs, **options)
    return ProfileResult._from_output(output)


def utilization(flops: torch.Tensor, seconds: torch.Tensor, peak_flops_per_second: torch.Tensor) -> torch.Tensor:
    """flops / seconds / peak, elementwise (torch.ops.util.utilization): for batches of results."""
    return torch.ops.util.utilization(flops, seconds, peak_flops_per_second)


def _model_device(model: Any) -> torch.device | None:
    if isinstance(model, torch.nn.Module):
        for t in model.parameters():
            return t.device
        for t in model.buffers():
            return t.device
    return None


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Profiler:
    """Counts every op the code inside the block runs on this thread.

        with torchutil.Profiler(model, batch_size=32) as prof:
            model(x)
        prof.result.utilization

    The block's wall time (with the device synchronized at both ends) is the time, so the
    utilization is that of everything inside, Python included. model (optional) names the
    modules in the per-op table; device defaults to the model's device, else the current CUDA
    device if CUDA is initialized, else the CPU. Blocks cannot nest, on one thread.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        *,
        batch_size: int = 1,
        device: torch.device | str | None = None,
        peak: str = "auto",
        peak_flops: float | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"torchutil: batch_size must be a positive int, got {batch_size!r}")
        self.model = model
        self.batch_size = batch_size
        if device is None:
            device = _model_device(model)
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_initialized() else torch.device("cpu")
        self.device = torch.device(device)
        self.peak = peak
        self.peak_flops = peak_flops
        self.result: ProfileResult | None = None
        self._scope: Any = None
        self._t0 = 0.0
        self._token = 0
        self._thread = 0

    def __enter__(self) -> "Profiler":
        if torch.ops.util._counting():
            raise RuntimeError(
                "torchutil: a profile is already counting on this thread; profiles cannot be nested"
            )
        _synchronize(self.device)
        self._token = torch.ops.util._count_begin()
        self._thread = threading.get_ident()
        try:
            if isinstance(self.model, torch.nn.Module):
                self._scope = _C._ModuleScope(self.model)
        except BaseException:
            torch.ops.util._count_abort()
            raise
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if threading.get_ident() != self._thread:
            # The count (a thread-local callback) lives on the entering thread, which drops it
            # at its next op; nothing was measured here.
            torch.ops.util._count_abandon(self._token)
            if self._scope is not None:
                self._scope.close()
                self._scope = None
            raise RuntimeError(
                "torchutil: a Profiler must be exited on the thread that entered it; the count "
                "was abandoned"
            )
        try:
            if exc_type is not None:
                torch.ops.util._count_abort()
                return
            _synchronize(self.device)
            seconds = time.perf_counter() - self._t0
            output = torch.ops.util._count_end(self.device, self.batch_size, seconds, self.peak,
                                               self.peak_flops)
            self.result = ProfileResult._from_output(output)
        finally:
            torch.ops.util._count_abort()  # no-op unless _count_end failed
            if self._scope is not None:
                self._scope.close()
                self._scope = None
