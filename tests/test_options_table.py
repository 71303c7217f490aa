"""The options table (csrc/core/Options.h) against everything that restates it: the ops' schemas,
torchutil.profile's signature and docstring, Profiler, _ops' CHOICES and OPTION_DEFAULTS, and the
command line's flags, choices, defaults and ranges. Adding an option is one row there and its use;
this test says where a reader disagrees."""
from __future__ import annotations

import argparse
import inspect
import math

import pytest
import torch

import torchutil
from torchutil import _C, _ops

ROWS = _C._options_table()
TABLE = {row["name"]: row for row in ROWS}


def _kwarg_schema(op: str) -> dict[str, torch._C.Argument]:
    return {a.name: a for a in getattr(torch.ops.util, op).default._schema.arguments if a.kwarg_only}


@pytest.mark.parametrize("op", ["_profile", "profile"])
def test_the_ops_schemas_are_the_table(op):
    args = _kwarg_schema(op)
    rows = [r for r in ROWS if op == "_profile" or r["summary_op"]]
    assert list(args) == [r["name"] for r in rows]  # the table's order
    for row in rows:
        arg = args[row["name"]]
        want = torch._C.parse_schema(f"f(*, {row['type']} {row['name']}={row['default_literal']}) -> ()").arguments[0]
        assert (str(arg.type), arg.default_value) == (str(want.type), want.default_value) == \
            (str(want.type), row["default"]), row["name"]


def test_torchutil_profile_signature_and_docstring_are_the_table():
    params = inspect.signature(torchutil.profile).parameters
    # model, its inputs, and count_as (what an AOTInductor package is counted as) say what runs,
    # not how it is measured: no row of the table.
    options = {n: p.default for n, p in params.items() if n not in ("model", "x", "args", "kwargs", "count_as")}
    assert options == {r["name"]: r["default"] for r in ROWS}
    assert all(params[n].kind is inspect.Parameter.KEYWORD_ONLY for n in options)
    doc = inspect.getdoc(torchutil.profile)
    for row in ROWS:
        assert f"{row['name']}={row['default_literal'].replace(chr(34), chr(39))}" in doc, row["name"]
        assert row["doc"] in doc, row["name"]


def test_profiler_and_the_python_tables_are_the_table():
    assert inspect.signature(torchutil.Profiler).parameters["peak"].default == TABLE["peak"]["default"]
    assert _ops.OPTION_DEFAULTS == {r["name"]: r["default"] for r in ROWS}
    assert _ops.OPTION_TYPES == {r["name"]: r["type"] for r in ROWS}
    assert _ops.SUMMARY_OPTIONS == {r["name"] for r in ROWS if r["summary_op"]}
    assert _ops.CHOICES == {r["name"]: r["choices"] for r in ROWS if r["choices"]}
    assert torchutil.peaks.PEAK_SOURCES == TABLE["peak"]["choices"]


def test_every_default_is_inside_its_own_row():
    for row in ROWS:
        d = row["default"]
        if d is None:
            assert row["type"].endswith("?"), row["name"]
        elif row["choices"] and isinstance(d, str):
            assert d in row["choices"], row["name"]
        elif row["low"] is not None:
            assert (d > row["low"] if row["low_open"] else d >= row["low"]), row["name"]
            assert (d < row["high"] if row["high_open"] else d <= row["high"]), row["name"]


def _subcommand(path: str) -> argparse.ArgumentParser:
    """The parser of a subcommand: "profile", "nas evaluate"."""
    from torchutil.studies.cli import _parser

    parser = _parser()
    for name in path.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions}


# (subcommand, the options whose flags it has, whether their defaults are the library's): each flag's
# choices and range are the row's; nas evaluate's sweep keeps counts of its own (warmup 1, iters 3).
COMMANDS = [
    ("profile", ["warmup", "iters", "target_ci", "max_time", "peak", "energy_window", "energy_windows"], True),
    ("survey", ["warmup", "iters", "peak", "counters", "energy_window", "energy_windows"], True),
    ("fold-bench", ["warmup", "iters", "counters"], True),
    ("nas evaluate", ["warmup", "iters", "energy_window", "energy_windows"], False),
]


@pytest.mark.parametrize("command, options, library_defaults", COMMANDS)
def test_the_command_lines_flags_are_the_table(command, options, library_defaults):
    flags = _flags(_subcommand(command))
    for name in options:
        row, flag = TABLE[name], flags[name]
        if library_defaults or name.startswith("energy"):
            assert flag.default == row["default"], (command, name)
        if row["choices"]:
            assert tuple(flag.choices) == row["choices"], (command, name)
        if row["low"] is None:
            continue
        kind = int if row["type"].startswith("int") else float
        parse = flag.type
        span = row["high"] - row["low"]
        step = 1 if kind is int or span > 4 else span / 4
        for end, is_open, out in ((row["low"], row["low_open"], -step), (row["high"], row["high_open"], step)):
            if math.isinf(end) or end > 2**62:
                continue
            inside = end - out if is_open else end
            outside = end if is_open else end + out
            assert parse(str(kind(inside))) == kind(inside), (command, name, inside)
            with pytest.raises(argparse.ArgumentTypeError, match=rf"expected {row['range']}".replace("(", r"\(")
                               .replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
                parse(str(kind(outside)))


def test_the_timing_flag_offers_the_tables_modes():
    assert tuple(_flags(_subcommand("profile"))["timing"].choices) == TABLE["timing"]["choices"]


def test_the_op_and_the_command_line_refuse_in_the_same_words():
    row = TABLE["energy_windows"]
    with pytest.raises(ValueError, match=rf"energy_windows must be {row['range']}".replace("[", r"\[")
                       .replace("]", r"\]") + ", got 0"):
        torchutil.profile(torch.nn.Linear(4, 3), torch.randn(2, 4), energy_windows=0)


def test_the_command_line_refuses_a_rule_with_the_ops_message(capsys):
    from cli_status import status_and_err

    with pytest.raises(ValueError) as op:
        torchutil.profile(torch.nn.Linear(4, 3), torch.randn(2, 4), timing="eager", cuda_graph=True)
    status, err = status_and_err(["profile", "--cuda-graph", "--timing", "eager"], capsys)
    assert status == 2 and str(op.value).splitlines()[0].removeprefix("torchutil: ") in err, (status, err)


def test_rules_and_environment_switches_are_listed():
    assert [options for options, _ in _C._option_rules()] == ["cuda_graph, timing", "max_iters, target_ci",
                                                              "max_iters, iters"]
    names = [name for name, _, _ in _C._env_switches()]
    assert names == ["TORCHUTIL_CUPTI_CORRELATION", "TORCHUTIL_CUPTI_TEARDOWN", "TORCHUTIL_CUPTI_RECORD_CAPTURE",
                     "TORCHUTIL_KEEP_CAPTURE_POOL", "TORCHUTIL_IDLE_BEFORE_TIMING_US"]
