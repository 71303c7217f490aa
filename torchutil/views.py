"""Views of a profile that users of other counters know, as text tables and as data.

    result.by_op_type()          # fvcore's flop_count_table by operator: op -> calls, FLOPs, share, bytes, time
    result.module_tree(depth=2)  # FlopCounterMode's nested display, ptflops' per-layer tree, with params
    print(torchutil.roofline(result))  # the roofline as a table (torchutil/rooflines.py)

Both views are built from the per-op table (result.ops) alone: FLOPs and bytes are the counted
forward's; time is each op's kernel time on a GPU (kernel_seconds, with a kernel trace) or the
wall time of its calls on a CPU (kernel_attribution "cpu"), NaN ("n/a") where neither was
measured. A module's figures are inclusive: its own ops and those of every module inside it, as
FlopCounterMode and ptflops count them. docs/views.md describes them.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Sequence

import torch

from torchutil._format import percent, seconds, si

__all__ = ["ModuleRow", "ModuleTree", "OpTypeRow", "OpTypeTable", "module_params", "text_table"]


# --- a text table, shared by the views and the roofline -------------------------------------------

def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """Columns as wide as their widest cell; the first `left` columns left-aligned (names),
    the others right-aligned (numbers)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _seconds(rows: Sequence[Any]) -> float:
    """The rows' time: the sum of the finite kernel_seconds, NaN when none is finite."""
    times = [r.kernel_seconds for r in rows if math.isfinite(r.kernel_seconds)]
    return math.fsum(times) if times else math.nan


def _to_pandas(rows: Sequence[Any], cls: type) -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError("torchutil: to_pandas() needs pandas, which is not installed; install it with "
                          "`pip install pandas`") from None
    return pandas.DataFrame([asdict(r) for r in rows], columns=[f.name for f in fields(cls)])


class _View:
    """Rows of one dataclass, as text (format(), str()) and as data (to_dicts(), to_pandas())."""

    rows: list[Any]
    _row_class: type

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Any:
        return self.rows[i]

    def to_dicts(self) -> list[dict[str, Any]]:
        """One dict per row, the row's fields by name."""
        return [asdict(r) for r in self.rows]

    def to_pandas(self) -> Any:
        """A pandas DataFrame, a column per field (pandas is optional: `pip install pandas`)."""
        return _to_pandas(self.rows, self._row_class)

    def format(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.rows)} rows; print() it for the table)"


# --- by operator type ------------------------------------------------------------------------------

@dataclass(frozen=True)
class OpTypeRow:
    """One operator over the whole forward (every module and dtype it ran in).

    op: operator name; calls: calls per forward; flops, matrix_flops: FLOPs per forward;
    share: flops / the forward's FLOPs; bytes: bytes read and written; seconds: its time per
    forward (kernel time on a GPU, wall time of its calls on a CPU; NaN where neither was
    measured); time_share: seconds / the time of every op."""

    op: str
    calls: int
    flops: int
    matrix_flops: int
    share: float
    bytes: int
    seconds: float
    time_share: float


class OpTypeTable(_View):
    """The forward by operator type, the most FLOPs first (fvcore's flop_count_table by
    operator; torch.profiler's key_averages() by name). Built by ProfileResult.by_op_type()."""

    _row_class = OpTypeRow

    def __init__(self, ops: Sequence[Any]) -> None:
        groups: dict[str, list[Any]] = {}
        for r in ops:
            groups.setdefault(r.op, []).append(r)
        total = sum(r.flops for r in ops)
        total_seconds = _seconds(ops)
        rows = []
        for op, rs in groups.items():
            flops = sum(r.flops for r in rs)
            seconds = _seconds(rs)
            rows.append(OpTypeRow(op=op, calls=sum(r.calls for r in rs), flops=flops,
                                  matrix_flops=sum(r.matrix_flops for r in rs),
                                  share=flops / total if total > 0 else math.nan,
                                  bytes=sum(r.bytes for r in rs), seconds=seconds,
                                  time_share=seconds / total_seconds if total_seconds > 0 else math.nan))
        rows.sort(key=lambda r: (-r.flops, -(r.seconds if r.seconds == r.seconds else -1.0), r.op))
        self.rows = rows

    def format(self) -> str:
        return text_table(
            ["op", "calls", "FLOPs", "share", "bytes", "time", "time share"],
            [[r.op, str(r.calls), si(r.flops, "FLOP"), percent(r.share, ".1f"), si(r.bytes, "B"),
              seconds(r.seconds), percent(r.time_share, ".1f")] for r in self.rows])


# --- by module tree --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModuleRow:
    """One module of the model with everything inside it.

    module: its dotted path ("" is the model itself); name: its last name (the model's class
    name for the root); depth: 0 for the model, 1 for its children, ...; calls: op calls per
    forward; flops, matrix_flops, bytes: per forward, its ops' and those of the modules inside
    it; share: flops / the forward's FLOPs; seconds: the time of those ops (kernel time on a GPU,
    wall time on a CPU; NaN where neither was measured); params: its parameters, those of the
    modules inside it included (NaN where the model's were not counted)."""

    module: str
    name: str
    depth: int
    calls: int
    flops: int
    matrix_flops: int
    share: float
    bytes: int
    seconds: float
    params: float


def _parent(path: str) -> str:
    return path.rpartition(".")[0]


class ModuleTree(_View):
    """The forward by module, as a tree in the model's order (FlopCounterMode's nested display,
    ptflops' per-layer tree), down to `depth` (None: every module). Built by
    ProfileResult.module_tree()."""

    _row_class = ModuleRow

    def __init__(self, ops: Sequence[Any], module_params: dict[str, int], root_name: str,
                 depth: int | None = None) -> None:
        if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 0):
            raise ValueError(f"torchutil: module_tree(depth=...) takes None or an int >= 0, got {depth!r}")
        # Every module in the model's order: the named modules (module_params is in that order),
        # then any path only the ops name, each after its parents.
        order: dict[str, None] = {"": None}
        for path in list(module_params) + [r.module for r in ops]:
            parts = path.split(".") if path else []
            for i in range(1, len(parts) + 1):
                order.setdefault(".".join(parts[:i]), None)
        inside: dict[str, list[Any]] = {path: [] for path in order}
        for r in ops:
            path = r.module
            while True:
                inside[path].append(r)
                if not path:
                    break
                path = _parent(path)
        total = sum(r.flops for r in ops)
        counted = bool(module_params)
        rows = []
        for path in order:
            d = path.count(".") + 1 if path else 0
            if depth is not None and d > depth:
                continue
            rs = inside[path]
            flops = sum(r.flops for r in rs)
            rows.append(ModuleRow(
                module=path, name=path.rpartition(".")[2] if path else (root_name or "(model)"), depth=d,
                calls=sum(r.calls for r in rs), flops=flops, matrix_flops=sum(r.matrix_flops for r in rs),
                share=flops / total if total > 0 else math.nan, bytes=sum(r.bytes for r in rs),
                seconds=_seconds(rs), params=float(module_params.get(path, 0)) if counted else math.nan))
        # Children after their parent, in the model's order: a depth-first walk.
        children: dict[str, list[ModuleRow]] = {}
        for row in rows[1:]:
            children.setdefault(_parent(row.module), []).append(row)
        self.rows = []
        stack = [rows[0]]
        while stack:
            row = stack.pop()
            self.rows.append(row)
            stack.extend(reversed(children.get(row.module, [])))

    def format(self) -> str:
        return text_table(
            ["module", "params", "FLOPs", "share", "bytes", "time"],
            [["  " * r.depth + r.name, _params(r.params), si(r.flops, "FLOP"), percent(r.share, ".1f"),
              si(r.bytes, "B"), seconds(r.seconds)] for r in self.rows])

    def to_dict(self) -> dict[str, Any]:
        """The tree as nested dicts: {"module": ..., "flops": ..., ..., "children": [...]}."""
        nodes = {r.module: {**asdict(r), "children": []} for r in self.rows}
        for r in self.rows[1:]:  # a depth limit leaves out children, never a parent
            nodes[_parent(r.module)]["children"].append(nodes[r.module])
        return nodes[self.rows[0].module]


def _params(n: float) -> str:
    return si(n, "").rstrip()


# --- what the views need of the model, taken when it is profiled -----------------------------------

def module_params(model: Any) -> dict[str, int]:
    """Parameters per module path, with the modules inside it, in named_modules() order, for
    module_tree(); {} where there is no model, it is no nn.Module, or a lazy module's parameter
    has no shape yet. Each parameter is counted once, in the first module that holds it
    (nn.Module.named_parameters()); a torch.compile'd module is counted through the module it
    compiled, whose paths the op rows name. The model's own count, its name and why it has no
    count are the result's params, model and params_note fields, which the C++ fills
    (csrc/python/PyModule.cpp, csrc/libtorch/Forward.cpp)."""
    if not isinstance(model, torch.nn.Module):
        return {}
    root = getattr(model, "_orig_mod", model)  # torch.compile's OptimizedModule
    per_module = {path: 0 for path, _ in root.named_modules()}
    try:
        for path, p in root.named_parameters():
            n = p.numel()
            module = path.rpartition(".")[0]
            while True:
                per_module[module] = per_module.get(module, 0) + n
                if not module:
                    break
                module = _parent(module)
    except ValueError:  # a lazy module's parameter before its first forward (params_note says so)
        return {}
    return per_module
