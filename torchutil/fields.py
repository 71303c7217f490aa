"""Every field of a profile's result, as defined once in C++ (csrc/core/ResultSchema.h).

The C++ side returns a result by name (the util.ProfileOutput script object: summary, tables,
texts); this module reads the field lists from torch.ops.util._schema and builds the Python
rows from them, so a field added in C++ appears here without a Python edit.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Sequence

import torch

from torchutil import _C, _ops  # noqa: F401  (registers the ops)

__all__ = ["FIELDS", "FIELD_DOCS", "FieldSpec", "KERNEL_FIELDS", "OP_FIELDS", "ROOFLINE_FIELDS",
           "TEXT_FIELDS", "field", "schema"]


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """One field of a result table: its name, its kind ("real": a float, NaN where it does not
    exist; "count": an int, None where it does not exist; "text": a str) and what it means."""

    name: str
    kind: str
    doc: str


@functools.cache
def schema(table: str) -> tuple[FieldSpec, ...]:
    """The fields of a result table, in column order: "summary", "ops", "kernels",
    "unknown_ops", "roofline" or "texts". Read from C++ once per table and process (the
    schema is compiled in), so building a result's rows asks nothing of C++."""
    if not isinstance(table, str):
        raise TypeError(f"torchutil: schema's table must be a str (summary, ops, kernels, unknown_ops, roofline or "
                        f"texts), got {type(table).__name__} {table!r}")
    names, kinds, docs = torch.ops.util._schema(table)
    return tuple(FieldSpec(n, k, d) for n, k, d in zip(names, kinds, docs))


def _numeric(table: str) -> tuple[str, ...]:
    return tuple(f.name for f in schema(table) if f.kind != "text")


#: Field names of the float64 summary tensor returned by torch.ops.util.profile, in order.
FIELDS: tuple[str, ...] = tuple(f.name for f in schema("summary"))
#: What each summary field means, with units.
FIELD_DOCS: dict[str, str] = {f.name: f.doc for f in schema("summary")}
#: Columns of ProfileResult.op_table (the numeric fields of an op row), in order.
OP_FIELDS: tuple[str, ...] = _numeric("ops")
#: Columns of ProfileResult.kernel_table (the numeric fields of a kernel row), in order.
KERNEL_FIELDS: tuple[str, ...] = _numeric("kernels")
#: Numeric fields of a roofline point (torch.ops.util._roofline_points' table), in order.
ROOFLINE_FIELDS: tuple[str, ...] = _numeric("roofline")
#: The texts of a result (ProfileResult.peak_source, .trace_status, ...).
TEXT_FIELDS: tuple[str, ...] = tuple(f.name for f in schema("texts"))

_PY_TYPES = {"real": float, "count": "int | None", "text": str}


def _convert(kind: str) -> Callable[[Any], Any]:
    if kind == "count":
        return lambda v: None if isinstance(v, float) and math.isnan(v) else int(v)
    if kind == "real":
        return float
    return str


def row_class(name: str, table: str, doc: str, *, prefix: Sequence[tuple[str, Any]] = (),
              namespace: dict[str, Any] | None = None) -> type:
    """A frozen dataclass whose fields are `prefix` followed by the fields of `table`."""
    fields = list(prefix) + [(f.name, _PY_TYPES[f.kind]) for f in schema(table)]
    cls = dataclasses.make_dataclass(name, fields, frozen=True, namespace=namespace or {})
    lines = [doc, "", "Fields (csrc/core/ResultSchema.h):"]
    lines += [f"    {f.name}: {f.doc}" for f in schema(table) if f.doc]
    cls.__doc__ = "\n".join(lines)
    cls.__module__ = "torchutil"
    return cls


def build_rows(cls: type, table: str, numbers: torch.Tensor, texts: dict[str, Sequence[str]],
               **prefix: Sequence[Any]) -> list[Any]:
    """Rows of `cls` (made by row_class) from a table's numeric tensor and its text columns,
    matched by field name; prefix gives the values of the prefix fields, one per row."""
    specs = schema(table)
    numeric = [(f.name, _convert(f.kind)) for f in specs if f.kind != "text"]
    text_names = [f.name for f in specs if f.kind == "text"]
    rows = []
    for i, values in enumerate(numbers.tolist()):
        kwargs = {k: v[i] for k, v in prefix.items()}
        kwargs.update({n: str(texts[n][i]) for n in text_names})
        kwargs.update({n: conv(v) for (n, conv), v in zip(numeric, values)})
        rows.append(cls(**kwargs))
    return rows


def output_rows(cls: type, output: Any, table: str) -> tuple[torch.Tensor, list[Any]]:
    """The numeric tensor and the rows of one table of a util.ProfileOutput."""
    numbers = output.numbers(table)
    texts = {f.name: output.text_column(table, f.name) for f in schema(table) if f.kind == "text"}
    return numbers, build_rows(cls, table, numbers, texts)


def field(summary: torch.Tensor, name: str) -> torch.Tensor:
    """The named field of a summary tensor (or of a stack of them, on the last dimension)."""
    try:
        index = FIELDS.index(name)
    except ValueError:
        raise KeyError(f"torchutil: no result field {name!r}; fields are {', '.join(FIELDS)}") from None
    if summary.shape[-1] != len(FIELDS):
        raise ValueError(
            f"torchutil: a summary has {len(FIELDS)} fields on its last dimension, got shape "
            f"{tuple(summary.shape)}"
        )
    return summary[..., index]
