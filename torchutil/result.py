"""What one profile measured: ProfileResult and its rows (OpRow, KernelRow, UnknownOp), and how
it reads.

The notebook's HTML and format() (lines of text, what print(result) shows) show the same summary,
built from one list, SUMMARY: each line a label, the result field it shows (its meaning, from the
schema, is the HTML tooltip) and how its value is written; repr() is one short line of it. The
top-ops table of the HTML and of format() is built from one list of columns, OP_COLUMNS.
"""
from __future__ import annotations

import csv
import html
import json
import math
from dataclasses import asdict, dataclass, field as dataclass_field, fields
from typing import Any, Callable, NamedTuple

import torch

from torchutil._format import count, cut_middle, number, percent, rate, seconds, si
from torchutil._files import atomic_open
from torchutil._json import json_safe
from torchutil.fields import FIELDS, TEXT_FIELDS, output_rows, row_class, schema

__all__ = ["KernelRow", "OpRow", "ProfileResult", "UnknownOp"]


OpRow = row_class(
    "OpRow", "ops",
    "One row of the per-op table: an op, called from one module, in one dtype. FLOPs and bytes\n"
    "are totals over the `calls` calls of one forward; kernel figures (NaN when nothing was\n"
    "traced) are per forward.",
    namespace={"flops": property(lambda self: self.matrix_flops + self.vector_flops,
                                 doc="matrix_flops + vector_flops")},
)

# What top_ops can rank by: the numbers of an op row.
_TOP_BY = ("flops", *(f.name for f in schema("ops") if f.kind != "text"))

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

    A torchutil.Profiler block's result (timing_mode "wall") holds the totals of the block,
    however many forwards ran in it; its summary says "per block" where a profile's says
    "per forward".
    """

    summary: torch.Tensor
    texts: dict[str, str]
    _values: dict[str, float] = dataclass_field(default_factory=dict, repr=False)
    # The util.ProfileOutput the tables are read from, on first use: a NAS loop that reads the
    # summary pays nothing for hundreds of kernel rows.
    _output: Any = dataclass_field(default=None, repr=False)
    # Parameters per module path, inner modules included (views.module_params, module_tree()).
    _module_params: dict[str, int] = dataclass_field(default_factory=dict, repr=False)

    @classmethod
    def _from_output(cls, output: Any) -> "ProfileResult":
        """From a util.ProfileOutput script object (torch.ops.util._profile, _count_end)."""
        summary = output.summary()
        return cls(summary=summary, texts={name: output.text(name) for name in TEXT_FIELDS},
                   _values=dict(zip(FIELDS, summary.tolist())), _output=output)

    def by_op_type(self) -> Any:
        """The forward by operator: calls, FLOPs, share, bytes, time (views.OpTypeTable)."""
        from torchutil.views import OpTypeTable

        return OpTypeTable(self.ops)

    def module_tree(self, depth: int | None = None) -> Any:
        """The forward by module down to `depth`: params, FLOPs, share, time (views.ModuleTree)."""
        from torchutil.views import ModuleTree

        return ModuleTree(self.ops, self._module_params, self.texts.get("model", ""), depth)

    def _table(self, cls: type, name: str) -> tuple[torch.Tensor, list[Any]]:
        key = f"_table_{name}"
        if key not in self.__dict__:
            self.__dict__[key] = output_rows(cls, self._output, name)
        return self.__dict__[key]

    def __getstate__(self) -> dict[str, Any]:
        """pickle and copy.deepcopy (a result sent back from a multiprocessing worker): the
        tables are read out of the C++ output, which does not pickle, and travel instead."""
        for cls, name in ((OpRow, "ops"), (KernelRow, "kernels"), (UnknownOp, "unknown_ops")):
            self._table(cls, name)
        return {**self.__dict__, "_output": None}

    @property
    def op_table(self) -> torch.Tensor:
        return self._table(OpRow, "ops")[0]

    @property
    def ops(self) -> list[Any]:
        return self._table(OpRow, "ops")[1]

    @property
    def kernel_table(self) -> torch.Tensor:
        return self._table(KernelRow, "kernels")[0]

    @property
    def kernels(self) -> list[Any]:
        return self._table(KernelRow, "kernels")[1]

    @property
    def unknown_ops(self) -> dict[str, int]:
        return {u.op: u.calls for u in self._table(UnknownOp, "unknown_ops")[1]}

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
        if by not in _TOP_BY:
            raise ValueError(f"torchutil: top_ops(by=) takes one of {', '.join(_TOP_BY)}, got {by!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"torchutil: top_ops(n=) takes an int >= 0, got {n!r}")

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
        with atomic_open(path) as f:
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

    # --- how it reads: SUMMARY and OP_COLUMNS, below ------------------------------------------

    @property
    def _per(self) -> str:
        """What the totals are of: a Profiler block (timing "wall") measured a block of code,
        however many forwards ran in it; a profile, one forward."""
        return "block" if self.timing_mode == "wall" else "forward"

    def _summary_items(self) -> list[tuple[str, str, str]]:
        """The summary as (label, field, text), the lines of SUMMARY that apply."""
        per = self._per
        items = []
        for line in SUMMARY:
            text = line.format(self, per)
            if text is not None:
                items.append((line.label.format(per=per), line.field, text))
        return items

    def __repr__(self) -> str:
        """One short line: what ran (model, device, dtype, batch), utilization, FLOPs and the
        time with its interval; format() (print(result)) has the rest."""
        per = self._per
        what = ", ".join(t for t in (self.texts.get("model", ""), self.device, self.peak_dtype,
                                     f"batch {count(self.batch_size)}") if t)
        return (f"ProfileResult({what}: utilization {percent(self.utilization)}, "
                f"{rate(self.flops, 'FLOP')} / {per}, {_seconds(self, per)})")

    def _repr_html_(self, top: int = 10) -> str:
        """For notebooks: the summary and the top ops by FLOPs, as HTML tables."""
        e = html.escape
        # The schema's words for a field speak of one forward: a block's summary goes without.
        docs = _DOCS if self._per == "forward" else {}
        summary = "".join(f"<tr><th style='text-align:left' title='{e(docs.get(name, ''))}'>{e(label)}</th>"
                          f"<td style='text-align:left'>{e(text)}</td></tr>"
                          for label, name, text in self._summary_items())
        rows = "".join("<tr>" + "".join(f"<td>{e(c.format(r))}</td>" for c in OP_COLUMNS) + "</tr>"
                       for r in self.top_ops(top))
        return (
            f"<div><b>torchutil profile</b><table>{summary}</table>"
            f"<details open><summary>top {top} ops by FLOPs</summary><table><thead><tr>"
            + "".join(f"<th>{e(c.header)}</th>" for c in OP_COLUMNS)
            + f"</tr></thead><tbody>{rows}</tbody></table></details></div>"
        )

    def format(self, top: int = 10) -> str:
        """A human-readable summary and the top ops by FLOPs."""
        lines = [f"{label:<18} {text}" for label, _, text in self._summary_items()]
        lines.append(f"top {top} ops by FLOPs:")
        lines.append("  " + " ".join(_cell(c, c.header) for c in OP_COLUMNS))
        lines += ["  " + " ".join(_cell(c, c.format(r)) for c in OP_COLUMNS) for r in self.top_ops(top)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


# --- the summary: one list for repr, HTML and format --------------------------------------------

class SummaryLine(NamedTuple):
    """One line of a result's summary. label: "{per}" in it reads "forward", or "block" for a
    Profiler block; field: the result field it shows; format(result, per): its text, or None
    where the line does not apply."""

    label: str
    field: str
    format: Callable[[ProfileResult, str], str | None]


def _device(r: ProfileResult, per: str) -> str:
    return f"{r.device}, timing {r.timing_mode}, batch {count(r.batch_size)}"


def _utilization(r: ProfileResult, per: str) -> str:
    return f"{percent(r.utilization)} of {rate(r.peak_flops_per_second)} ({r.peak_dtype})"


#: How long the peak source's line in format() may be; the whole text is result.peak_source.
PEAK_SOURCE_WIDTH = 100


def _peak_source(r: ProfileResult, per: str) -> str:
    """The source's first clause (up to its first ";" or sentence end), cut at a word to
    PEAK_SOURCE_WIDTH; where anything was left out, the line says where the rest is."""
    text = " ".join(r.peak_source.split())
    first = min((i for i in (text.find("; "), text.find(". ")) if i >= 0), default=len(text))
    short = text[:first]
    more = " (the rest: peak_source)"
    if len(short) > PEAK_SOURCE_WIDTH - len(more):
        short = short[:PEAK_SOURCE_WIDTH - len(more) - 1].rsplit(" ", 1)[0].rstrip(",") + "…"
    return short if short == text else short + more


def _flops(r: ProfileResult, per: str) -> str:
    return (f"{si(r.flops, 'FLOP')} (matrix {si(r.matrix_flops, 'FLOP')}, "
            f"vector {si(r.vector_flops, 'FLOP')})")


def _bytes(r: ProfileResult, per: str) -> str:
    return f"{si(r.bytes, 'B')}, intensity {number(r.arithmetic_intensity)} FLOP/B"


def _seconds(r: ProfileResult, per: str) -> str:
    """The time with how sure it is: "512.7 ms ± 28 % (median of 10, 95 % CI)". A block is timed
    once, by the wall clock around it, and one forward has no interval: neither gets a ±. An
    interval wider than the time itself (± over 100 %) is not a figure: it says so."""
    time = seconds(r.seconds)
    if per == "block":
        return f"{time} ({r.repetition})"
    n = count(r.iterations)
    half = r.seconds_relative_ci
    if not r.iterations >= 2 or half != half:
        return f"{time} (median of {n}, no interval)"
    pct = 100 * half
    if pct > 100:
        return f"{time} ± > 100 % (median of {n}, unreliable)"
    return f"{time} ± {pct:{'.2g' if pct < 10 else '.0f'}} % (median of {n}, 95 % CI)"


def _time(r: ProfileResult, per: str) -> str:
    return (f"{_seconds(r, per)}, {number(r.inputs_per_second)} inputs/s, "
            f"{rate(r.achieved_flops_per_second)}")


def _ops(r: ProfileResult, per: str) -> str:
    text = f"{len(r.ops)} rows, {count(r.counted_op_calls)} calls"
    if r.unknown_ops:
        listed = ", ".join(f"{k} x{c}" for k, c in r.unknown_ops.items())
        text += f"; {len(r.unknown_ops)} with no FLOP formula (not counted): {listed}"
    return text


def _kernels(r: ProfileResult, per: str) -> str:
    if r.traced != 1.0:
        return f"not traced ({r.trace_status})"
    return (f"{count(r.kernels_per_forward)} / {per}, {seconds(r.kernel_seconds)} kernel time, "
            f"busy {percent(r.gpu_busy_fraction)} of the {per}, "
            f"utilization over kernel time {percent(r.kernel_utilization)}")


def _counters(r: ProfileResult, per: str) -> str | None:
    """The hardware counters in one line: status, hardware/nominal FLOPs, throughputs."""
    if r.counters_status == "off":
        return None
    v = r._values
    parts = [r.counters_status]
    if r.counters_not_on_gpu:
        parts.append(f"no counter on this GPU for {r.counters_not_on_gpu}")
    if v.get("hw_tensor_flops") == v.get("hw_tensor_flops"):
        parts.append(f"tensor {si(v['hw_tensor_flops'], 'FLOP')} = "
                     f"{number(v['hw_flops_ratio'])} x counted matrix FLOPs")
    for name, label in (("sm_throughput_pct", "SM"), ("dram_throughput_pct", "DRAM"),
                        ("tensor_active_pct", "tensor"), ("pm_sm_active_pct", "PM SM active"),
                        ("pm_tensor_active_pct", "PM tensor"), ("pm_dram_throughput_pct", "PM DRAM")):
        if v.get(name) == v.get(name):
            parts.append(f"{label} {v[name]:.1f} %")
    return "; ".join(parts)


def _peak_exceeded(r: ProfileResult, per: str) -> str | None:
    if not r.peak_exceeded > 0:
        return None
    return (f"the {per} ran at {percent(r.peak_exceeded)} of the peak: the peak (its source above) is "
            f"below what this device reached for {r.peak_dtype}")


def _saturated(r: ProfileResult, per: str) -> str | None:
    if r.count_saturated != 1.0:
        return None
    return "a count did not fit int64 and is held at 2^63-1: the figures are lower bounds"


def _other_threads(r: ProfileResult, per: str) -> str | None:
    if not r.other_thread_op_calls > 0:
        return None
    return (f"{count(r.other_thread_op_calls)} op calls on other threads were not counted "
            "(forked work while several counts ran)")


def _energy(r: ProfileResult, per: str) -> str | None:
    if r.energy_source == "off: energy=False":
        return None
    if not r.joules > 0:
        return r.energy_source
    # One window has no interval (NaN ends): the figure alone.
    interval = "" if math.isnan(r.joules_ci_low) else f" ({number(r.joules_ci_low)}-{number(r.joules_ci_high)})"
    return (f"{number(r.joules)} J{interval}, {number(r.watts)} W, "
            f"{number(r.inputs_per_joule)} inputs/J, {si(r.flops_per_joule, 'FLOP/J')}")


SUMMARY: tuple[SummaryLine, ...] = (
    SummaryLine("device", "device", _device),
    SummaryLine("utilization", "utilization", _utilization),
    SummaryLine("peak source", "peak_source", _peak_source),
    SummaryLine("FLOPs / {per}", "flops", _flops),
    SummaryLine("bytes / {per}", "bytes", _bytes),
    SummaryLine("time / {per}", "seconds", _time),
    SummaryLine("ops", "counted_op_calls", _ops),
    SummaryLine("GPU kernels", "kernels_per_forward", _kernels),
    SummaryLine("hardware counters", "counters_status", _counters),
    SummaryLine("energy / {per}", "joules", _energy),
    SummaryLine("peak exceeded", "peak_exceeded", _peak_exceeded),
    SummaryLine("count saturated", "count_saturated", _saturated),
    SummaryLine("other threads", "other_thread_op_calls", _other_threads),
)

# What each field means (the schema's words), for the HTML summary's tooltips.
_DOCS = {f.name: f.doc for table in ("summary", "texts") for f in schema(table)}


# --- the top-ops table: one list for HTML and format --------------------------------------------

class OpColumn(NamedTuple):
    """A column of the top-ops table: its header, its text for an OpRow, and its width in
    format() (negative: left-aligned); clip: format() cuts a longer text in the middle
    (a module path's first and innermost names, _format.cut_middle)."""

    header: str
    format: Callable[[Any], str]
    width: int
    clip: bool = False


OP_COLUMNS: tuple[OpColumn, ...] = (
    OpColumn("op", lambda r: r.op, -34),
    OpColumn("module", lambda r: r.module, -28, clip=True),
    OpColumn("dtype", lambda r: r.dtype, -9),
    OpColumn("calls", lambda r: str(r.calls), 5),
    OpColumn("FLOPs", lambda r: si(r.flops, "FLOP"), 11),
    OpColumn("bytes", lambda r: si(r.bytes, "B"), 9),
    OpColumn("FLOP/B", lambda r: number(r.arithmetic_intensity), 9),
    # A GPU op's kernel time, a CPU op's wall time (kernel_attribution "cpu").
    OpColumn("time", lambda r: seconds(r.kernel_seconds), 9),
)


def _cell(column: OpColumn, text: str) -> str:
    width = abs(column.width)
    if column.clip:
        text = cut_middle(text, width)
    return f"{text:<{width}}" if column.width < 0 else f"{text:>{width}}"


def _rows_to_csv(path: str, rows: list[Any], cls: type) -> None:
    """One CSV row per row of the dataclass cls, the columns in field order."""
    names = [f.name for f in fields(cls)]
    with atomic_open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        for r in rows:
            w.writerow([getattr(r, n) for n in names])
