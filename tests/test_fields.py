"""The result's fields are defined once, in C++ (csrc/core/ResultSchema.h): the Python rows and
attributes follow those lists by name, and docs/fields.md documents every field. These tests fail
when the two sides, or the docs, drift apart."""
from __future__ import annotations

import dataclasses
import os
import re

import pytest
import torch

import torchutil
from torchutil.fields import build_rows, row_class

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
FIELDS_DOC = os.path.join(ROOT, "docs", "fields.md")


def _names(table: str) -> list[str]:
    return [f.name for f in torchutil.schema(table)]


def test_schema_tables_and_kinds():
    assert torch.ops.util._schema_tables() == ["summary", "ops", "kernels", "unknown_ops", "roofline", "texts"]
    for table in torch.ops.util._schema_tables():
        specs = torchutil.schema(table)
        assert specs and len({f.name for f in specs}) == len(specs)
        assert {f.kind for f in specs} <= {"real", "count", "text"}
    with pytest.raises(ValueError, match="no result table 'opps'"):
        torchutil.schema("opps")


def test_python_lists_are_the_cpp_lists():
    assert list(torchutil.FIELDS) == torch.ops.util.result_fields() == _names("summary")
    assert list(torchutil.OP_FIELDS) == torch.ops.util.op_fields()
    assert list(torchutil.KERNEL_FIELDS) == torch.ops.util.kernel_fields()
    assert list(torchutil.ROOFLINE_FIELDS) == torch.ops.util._roofline_fields()
    assert list(torchutil.TEXT_FIELDS) == _names("texts")


def test_row_classes_have_exactly_the_schema_fields():
    def fields(cls):
        return [f.name for f in dataclasses.fields(cls)]

    assert fields(torchutil.OpRow) == _names("ops")
    assert fields(torchutil.KernelRow) == _names("kernels")
    assert fields(torchutil.UnknownOp) == _names("unknown_ops")
    assert fields(torchutil.RooflineRow) == ["op", "module", "dtype", "flops", "bytes", *_names("roofline")]


def test_a_result_exposes_every_field_by_name():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    r = torchutil.profile(model, torch.randn(2, 8), warmup=0, iters=1)
    assert set(r.texts) == set(torchutil.TEXT_FIELDS)
    for name in torchutil.FIELDS:
        assert isinstance(getattr(r, name), float)
    for name in torchutil.TEXT_FIELDS:
        assert getattr(r, name) == r.texts[name]
    assert r.op_table.shape == (len(r.ops), len(torchutil.OP_FIELDS))
    # The tensor and the rows carry the same numbers, column by column.
    for j, name in enumerate(torchutil.OP_FIELDS):
        for row, value in zip(r.ops, r.op_table[:, j].tolist()):
            got = getattr(row, name)
            assert (got != got and value != value) or got == value, (name, got, value)
    d = r.to_dict()
    assert set(torchutil.TEXT_FIELDS) - {"chrome_trace"} <= set(d)
    assert list(d["ops"][0]) == _names("ops")


def test_build_rows_matches_by_name_not_position():
    # A count field holding NaN becomes None; reals stay floats; texts strings.
    Row = row_class("Row", "unknown_ops", "test")
    rows = build_rows(Row, "unknown_ops", torch.tensor([[3.0], [float("nan")]], dtype=torch.float64),
                      {"op": ["aten::a", "aten::b"]})
    assert rows == [Row(op="aten::a", calls=3), Row(op="aten::b", calls=None)]


def test_docs_document_every_field():
    """docs/fields.md names every field of the summary, the op and kernel rows and the texts;
    the README's short table names only fields that exist."""
    text = open(FIELDS_DOC).read()
    for table in ("summary", "ops", "kernels", "texts"):
        for name in _names(table):
            assert re.search(rf"`{name}`", text), f"docs/fields.md does not document {table} field {name!r}"
    readme = open(os.path.join(ROOT, "README.md")).read()
    table = readme[readme.index("## Reading a result"):readme.index("## What it measures")]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    shown = [name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)]
    known = {n for t in ("summary", "ops", "kernels", "texts") for n in _names(t)}
    assert shown and set(shown) <= known, set(shown) - known


def test_schema_is_read_once_per_table(monkeypatch):
    """Building results asks C++ for each table's schema once per process, not once per row
    or per result (torchutil.fields.schema is cached)."""
    from torchutil import fields

    real = torch.ops.util._schema
    reads: list[str] = []

    def counting(table):
        reads.append(table)
        return real(table)

    getattr(fields.schema, "cache_clear", lambda: None)()  # start from nothing read
    monkeypatch.setattr(torch.ops.util, "_schema", counting)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    for _ in range(3):
        r = torchutil.profile(model, torch.randn(2, 8), warmup=0, iters=1)
        with torchutil.Profiler(model, batch_size=2):
            model(torch.randn(2, 8))
    assert r.ops and reads  # the results were built, and from the schema
    assert sorted(reads) == sorted(set(reads)), f"a table's schema was read more than once: {reads}"
