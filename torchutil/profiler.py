"""The Python face of the profiler: torchutil.profile(), torchutil.Profiler and their result.

All counting and timing runs in C++ (torch.ops.util._profile, _count_begin/_count_end); this
module only shapes what comes back.
"""
from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict, dataclass, field as dataclass_field
from typing import Any, Sequence

import torch

from torchutil import _C, _ops  # noqa: F401  (registers the ops)
from torchutil.fields import FIELDS, KERNEL_FIELDS, OP_FIELDS

__all__ = ["OpRow", "ProfileResult", "Profiler", "profile", "utilization"]


@dataclass(frozen=True)
class OpRow:
    """One row of the per-op table: an op, called from one module, in one dtype.

    FLOPs and bytes are totals over the `calls` calls of one forward.
    """

    op: str
    module: str
    dtype: str
    op_class: str  # "matrix", "vector" or "memory"
    calls: int
    matrix_flops: int
    vector_flops: int
    bytes: int
    arithmetic_intensity: float  # FLOPs per byte
    # From the kernel trace (NaN when kernels were not traced); times are per forward.
    kernels: float = float("nan")
    kernel_seconds: float = float("nan")
    kernel_flops_per_second: float = float("nan")
    kernel_utilization: float = float("nan")  # kernel_flops_per_second / peak
    lost_seconds: float = float("nan")  # kernel_seconds - flops / peak

    @property
    def flops(self) -> int:
        return self.matrix_flops + self.vector_flops


@dataclass
class ProfileResult:
    """What one profile measured.

    summary: float64 tensor, one value per name in torchutil.FIELDS (the tensor
        torch.ops.util.profile returns). Each field is also an attribute: result.utilization.
    op_table: float64 tensor [len(ops), len(OP_FIELDS)], the numbers of `ops` as a tensor.
    ops: per-op rows in first-call order.
    unknown_ops: ops with no FLOP formula and no counted callee: name -> calls per forward.
    peak_source / peak_dtype: where the peak FLOP/s came from and which arithmetic it is for.
    timing_mode: "eager", "cuda_graph", "wall" (a Profiler block) or "none" (meta device).
    trace_status: "on", or "off: <why>" (CPU, trace=False, torch.profiler running, no CUPTI).
    kernel_table: float64 tensor [kernels, len(KERNEL_FIELDS)] of every traced GPU kernel,
        memcpy and memset (counted forward first, forward == -1; then the timed forwards);
        kernel_names / kernel_ops / kernel_modules: its name, the op that accounts for it and
        that op's module ("" when no op launched it).
    chrome_trace: the Chrome/Perfetto trace JSON when profile(..., chrome_trace=True).
    """

    summary: torch.Tensor
    op_table: torch.Tensor
    ops: list[OpRow]
    unknown_ops: dict[str, int]
    peak_source: str
    peak_dtype: str
    timing_mode: str
    device: str
    trace_status: str = "off"
    kernel_table: torch.Tensor | None = None
    kernel_names: list[str] = dataclass_field(default_factory=list)
    kernel_ops: list[str] = dataclass_field(default_factory=list)
    kernel_modules: list[str] = dataclass_field(default_factory=list)
    chrome_trace: str = ""
    _values: dict[str, float] = dataclass_field(default_factory=dict, repr=False)

    @classmethod
    def _from_op(cls, raw: Sequence[Any]) -> "ProfileResult":
        (summary, table, names, modules, dtypes, classes, unknown, unknown_calls, peak_source,
         peak_dtype, timing_mode, device, kernel_table, kernel_names, kernel_ops, kernel_modules,
         trace_status, chrome_trace) = raw
        rows = table.tolist()
        ops = [
            OpRow(n, m, d, c, int(r[0]), int(r[1]), int(r[2]), int(r[3]), *map(float, r[4:]))
            for n, m, d, c, r in zip(names, modules, dtypes, classes, rows)
        ]
        return cls(
            summary=summary,
            op_table=table,
            ops=ops,
            unknown_ops=dict(zip(unknown, unknown_calls)),
            peak_source=peak_source,
            peak_dtype=peak_dtype,
            timing_mode=timing_mode,
            device=device,
            trace_status=trace_status,
            kernel_table=kernel_table,
            kernel_names=list(kernel_names),
            kernel_ops=list(kernel_ops),
            kernel_modules=list(kernel_modules),
            chrome_trace=chrome_trace,
            _values=dict(zip(FIELDS, summary.tolist())),
        )

    def __getattr__(self, name: str) -> float:
        values = self.__dict__.get("_values", {})
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
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["op", "module", "dtype", "op_class", *OP_FIELDS])
            for r, values in zip(self.ops, self.op_table.tolist()):
                w.writerow([r.op, r.module, r.dtype, r.op_class, *values])

    def kernels_to_csv(self, path: str) -> None:
        """The per-kernel table as CSV (empty but for the header when nothing was traced)."""
        rows = self.kernel_table.tolist() if self.kernel_table is not None else []
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["name", "op", "module", *KERNEL_FIELDS])
            for name, op, module, values in zip(self.kernel_names, self.kernel_ops, self.kernel_modules, rows):
                w.writerow([name, op, module, *values])

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": dict(self._values),
            "ops": [asdict(r) for r in self.ops],
            "unknown_ops": dict(self.unknown_ops),
            "peak_source": self.peak_source,
            "peak_dtype": self.peak_dtype,
            "timing_mode": self.timing_mode,
            "device": self.device,
            "trace_status": self.trace_status,
            "kernels": [
                {"name": n, "op": o, "module": m, **dict(zip(KERNEL_FIELDS, values))}
                for n, o, m, values in zip(self.kernel_names, self.kernel_ops, self.kernel_modules,
                                           self.kernel_table.tolist() if self.kernel_table is not None else [])
            ],
        }

    def to_json(self, **kwargs: Any) -> str:
        # NaN (no timing on meta, no peak) is not JSON: written as null.
        def clean(v: Any) -> Any:
            if isinstance(v, float) and v != v:
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v

        return json.dumps(clean(self.to_dict()), **kwargs)

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
        if self.unknown_ops:
            listed = ", ".join(f"{k} x{c}" for k, c in self.unknown_ops.items())
            lines.append(f"ops with no FLOP formula (not counted): {listed}")
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


def _as_inputs(x: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, torch.Tensor) for t in x):
        return list(x)
    raise TypeError(
        f"torchutil: x must be a Tensor or a non-empty list/tuple of Tensors, got {type(x).__name__}"
    )


def profile(
    model: Any,
    x: torch.Tensor | Sequence[torch.Tensor],
    *,
    warmup: int = 3,
    iters: int = 10,
    cuda_graph: bool = False,
    peak: str = "auto",
    peak_flops: float | None = None,
    trace: bool = True,
    chrome_trace: bool = False,
    module_paths: bool = True,
) -> ProfileResult:
    """Profiles model(*x): utilization, FLOPs, bytes, time and the per-op table.

    Runs `warmup` forwards (the last of them, or one extra if warmup is 0, with counting on;
    a torch.compile'd model always gets one uncounted forward first, where it compiles),
    then `iters` timed forwards without hooks: device events on accelerators, a steady clock on
    the CPU; with cuda_graph=True the timed forwards are replays of one captured CUDA graph.
    On the meta device only the count runs. Everything runs in inference mode.

    model: nn.Module, torch.compile'd module, TorchScript module or any callable.
    peak: where the peak FLOP/s comes from ("auto", "datasheet", "computed", "measured");
    peak_flops: a number that overrides it.
    trace: on CUDA, record every kernel with CUPTI (kernel time, GPU-busy fraction, per-op
    kernel time; see trace_status); chrome_trace: also build the Perfetto trace (save_trace()).
    module_paths: name each op's module (Python module hooks on the counted forward; without
    them the rows' module is ""). torch.ops.util.profile, which returns the summary only, never
    records them.
    """
    raw = torch.ops.util._profile(model, _as_inputs(x), warmup, iters, cuda_graph, peak, peak_flops,
                                  trace, chrome_trace, module_paths)
    return ProfileResult._from_op(raw)


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

    def __enter__(self) -> "Profiler":
        if torch.ops.util._counting():
            raise RuntimeError(
                "torchutil: a profile is already counting on this thread; profiles cannot be nested"
            )
        _synchronize(self.device)
        torch.ops.util._count_begin()
        try:
            if isinstance(self.model, torch.nn.Module):
                self._scope = _C._ModuleScope(self.model)
        except BaseException:
            torch.ops.util._count_abort()
            raise
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is not None:
                torch.ops.util._count_abort()
                return
            _synchronize(self.device)
            seconds = time.perf_counter() - self._t0
            raw = torch.ops.util._count_end(self.device, self.batch_size, seconds, self.peak, self.peak_flops)
            self.result = ProfileResult._from_op(raw)
        finally:
            torch.ops.util._count_abort()  # no-op unless _count_end failed
            if self._scope is not None:
                self._scope.close()
                self._scope = None
