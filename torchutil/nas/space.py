"""The cells of the NATS-Bench topology space (= NAS-Bench-201), without their networks
(torchutil/nas/natsbench.py builds those and re-exports all of this): architecture strings, the
benchmark's index order, isomorphism keys, connectivity and the packaged accuracy table.

Sources (MIT License, Copyright Xuanyi Dong): AutoDL-Projects `cell_searchs/genotypes.py`
(`gen_all`, `to_unique_str`, `check_valid`) and `exps/NATS-Bench/main-tss.py` (`traverse_net`:
the index order).
"""
from __future__ import annotations

import csv
import functools
import math
import os
import random
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any, Iterator

__all__ = ["DATASETS", "EDGES", "OPS", "AccuracyRow", "Arch", "arch_of_index", "index_of_arch", "is_connected",
           "load_accuracy_table", "num_archs", "parse_arch", "unique_str"]

# The op list of NAS-Bench-201 in its own order (xautodl `NAS_BENCH_201`): the order of the
# enumeration that fixes the benchmark's indices.
OPS: tuple[str, ...] = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")

# The 6 edges as (to node, from node), in the order of the arch string and of Arch.ops.
EDGES: tuple[tuple[int, int], ...] = ((1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2))

# Dataset name (NATS-Bench's key) -> (classes, input height = width).
DATASETS: dict[str, tuple[int, int]] = {
    "cifar10": (10, 32),
    "cifar100": (100, 32),
    "ImageNet16-120": (120, 16),
}

_NUM_NODES = 4
_NUM_ARCHS = len(OPS) ** len(EDGES)
# NATS-Bench enumerates every cell with `gen_all` (nested products, edge (1, 0) outermost, ops
# in OPS order), then shuffles that list with random.seed(88); random.shuffle(...) and keeps
# the shuffled order as its index (exps/NATS-Bench/main-tss.py, "please do not change this
# line for reproducibility"). CPython's shuffle has drawn the same sequence since Python 3.2;
# tests/test_natsbench.py checks all 15,625 indices against the packaged table.
_SHUFFLE_SEED = 88


def _error(message: str) -> ValueError:
    return ValueError(f"torchutil.nas: {message}")


@dataclass(frozen=True)
class Arch:
    """One cell: the ops of its 6 edges, in EDGES order (1<-0, 2<-0, 2<-1, 3<-0, 3<-1, 3<-2).

    str(arch) is the NAS-Bench-201 string |op~0|+|op~0|op~1|+|op~0|op~1|op~2|.
    """

    ops: tuple[str, str, str, str, str, str]

    def __post_init__(self) -> None:
        ops = tuple(self.ops)
        if len(ops) != len(EDGES):
            raise _error(f"an Arch has {len(EDGES)} edge ops, got {len(ops)}: {ops!r}")
        for (to, frm), op in zip(EDGES, ops):
            if op not in OPS:
                raise _error(f"unknown op {op!r} on edge {frm}->{to}; ops are {', '.join(OPS)}")
        object.__setattr__(self, "ops", ops)

    def __str__(self) -> str:
        nodes = [[] for _ in range(_NUM_NODES - 1)]
        for (to, frm), op in zip(EDGES, self.ops):
            nodes[to - 1].append(f"{op}~{frm}")
        return "+".join("|" + "|".join(node) + "|" for node in nodes)

    def edges(self) -> Iterator[tuple[int, int, str]]:
        """(to node, from node, op) for the 6 edges, in EDGES order."""
        for (to, frm), op in zip(EDGES, self.ops):
            yield to, frm, op

    def count(self, op: str) -> int:
        """How many of the 6 edges carry `op`."""
        return self.ops.count(op)


def parse_arch(text: Arch | str) -> Arch:
    """Arch of a NAS-Bench-201 string such as
    '|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|'.

    Node i (the i-th '+'-separated group) lists its i incoming edges op~j for j = 0..i-1, in
    that order. Raises ValueError naming the string and the part that is wrong. An Arch is
    returned as it is.
    """
    if isinstance(text, Arch):
        return text
    if not isinstance(text, str):
        raise TypeError(f"torchutil.nas: an architecture string must be a str, got {type(text).__name__}")
    groups = text.split("+")
    if len(groups) != _NUM_NODES - 1:
        raise _error(
            f"bad architecture string {text!r}: expected {_NUM_NODES - 1} '+'-separated nodes "
            f"like |op~0|+|op~0|op~1|+|op~0|op~1|op~2|, got {len(groups)}"
        )
    ops: list[str] = []
    for node, group in enumerate(groups, start=1):
        if len(group) < 2 or not group.startswith("|") or not group.endswith("|"):
            raise _error(f"bad architecture string {text!r}: node {node} {group!r} must be enclosed in '|'")
        parts = group[1:-1].split("|")
        if len(parts) != node:
            raise _error(
                f"bad architecture string {text!r}: node {node} {group!r} has {len(parts)} "
                f"edge(s), expected {node} (one from each earlier node)"
            )
        for source, part in enumerate(parts):
            op, tilde, frm = part.partition("~")
            if not tilde or frm != str(source):
                raise _error(
                    f"bad architecture string {text!r}: edge {part!r} of node {node} must be "
                    f"'<op>~{source}' (edges listed by source node, 0 first)"
                )
            if op not in OPS:
                raise _error(
                    f"bad architecture string {text!r}: unknown op {op!r} in {part!r}; ops are "
                    f"{', '.join(OPS)}"
                )
            ops.append(op)
    # The string lists edges node by node, which is EDGES order.
    return Arch(tuple(ops))  # type: ignore[arg-type]


def _as_arch(arch: Arch | str | int) -> Arch:
    if isinstance(arch, Arch):
        return arch
    if isinstance(arch, str):
        return parse_arch(arch)
    if isinstance(arch, int) and not isinstance(arch, bool):
        return arch_of_index(arch)
    raise TypeError(f"torchutil.nas: expected an Arch, an arch string or an index, got {type(arch).__name__}")


def num_archs() -> int:
    """Number of cells in the space: 5 ops ** 6 edges = 15,625."""
    return _NUM_ARCHS


@functools.lru_cache(maxsize=None)
def _order() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(gen_all position of each benchmark index, benchmark index of each gen_all position)."""
    position_of_index = list(range(_NUM_ARCHS))
    random.Random(_SHUFFLE_SEED).shuffle(position_of_index)
    index_of_position = [0] * _NUM_ARCHS
    for index, position in enumerate(position_of_index):
        index_of_position[position] = index
    return tuple(position_of_index), tuple(index_of_position)


def arch_of_index(index: int) -> Arch:
    """The cell with NATS-Bench TSS index `index` (0..15624), as `api.arch(index)`."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < _NUM_ARCHS:
        raise _error(f"an architecture index is an int in [0, {_NUM_ARCHS}), got {index!r}")
    position = _order()[0][index]
    ops = []
    for _ in EDGES:  # gen_all's last edge varies fastest: base-5 digits, last edge lowest
        position, digit = divmod(position, len(OPS))
        ops.append(OPS[digit])
    return Arch(tuple(reversed(ops)))  # type: ignore[arg-type]


_OP_DIGIT = {op: digit for digit, op in enumerate(OPS)}


def index_of_arch(arch: Arch | str) -> int:
    """NATS-Bench TSS index of a cell (`api.query_index_by_arch`), in O(1)."""
    arch = parse_arch(arch) if isinstance(arch, str) else arch
    if not isinstance(arch, Arch):
        raise TypeError(f"torchutil.nas: expected an Arch or an arch string, got {type(arch).__name__}")
    position = 0
    for op in arch.ops:
        position = position * len(OPS) + _OP_DIGIT[op]
    return _order()[1][position]


def unique_str(arch: Arch | str | int) -> str:
    """The isomorphism key NATS-Bench uses (`Structure.to_unique_str(consider_zero=True)`).

    Built node by node from the input ("0"): an edge whose op is `none`, or whose source node is
    zero ("#"), contributes "#"; `skip_connect` passes its source's string through; any other op
    wraps it as "(source)@op"; a node joins its contributions sorted, so the order of the edges
    into a node does not matter. The key is the output node's string: edges that do not reach
    the output leave no trace. The 15,625 cells fall into 6,466 keys.

    Kept exactly as published, because the benchmark's 6,466 classes are defined by it, although
    it is not a full canonical form of the cell's function: a "#" stays in its node's string,
    so "#+(0)@nor_conv_3x3" (a node fed by a conv and a `none` edge) differs from
    "(0)@nor_conv_3x3", and swapping two nodes that differ in their `none` inputs changes the
    key; and only a node whose string is exactly "#" counts as zero, so a node whose inputs are
    all zero but number two or more ("#+#") does not, and the 341 cells with no path from input
    to output take 5 keys rather than 1.
    """
    arch = _as_arch(arch)
    nodes = ["0"]
    for node in range(1, _NUM_NODES):
        parts = []
        for to, frm, op in arch.edges():
            if to != node:
                continue
            if op == "none" or nodes[frm] == "#":
                parts.append("#")
            elif op == "skip_connect":
                parts.append(nodes[frm])
            else:
                parts.append(f"({nodes[frm]})@{op}")
        nodes.append("+".join(sorted(parts)))
    return nodes[-1]


def is_connected(arch: Arch | str | int) -> bool:
    """True if some path from the cell input to the cell output avoids `none` edges
    (NATS-Bench `check_valid`). The 341 cells without one compute 0 and train to chance."""
    arch = _as_arch(arch)
    reached = [True] + [False] * (_NUM_NODES - 1)
    for to, frm, op in arch.edges():  # EDGES is in topological order
        reached[to] = reached[to] or (op != "none" and reached[frm])
    return reached[-1]


@dataclass(frozen=True)
class AccuracyRow:
    """One architecture of the packaged table (torchutil/nas/data/nb201_accuracy.csv).

    Accuracies are top-1 test accuracies in %, after 200 epochs, mean over seeds; flops_m and
    params_m are NATS-Bench's multiply-accumulates and trainable parameters of the CIFAR-10
    network, in millions.
    """

    index: int
    arch: Arch
    cifar10_test_acc: float
    cifar100_test_acc: float
    imagenet16_test_acc: float
    flops_m: float
    params_m: float

    def test_accuracy(self, dataset: str) -> float:
        """The test accuracy (%) on `dataset` ("cifar10", "cifar100", "ImageNet16-120")."""
        _dataset(dataset)  # checks the name
        return {"cifar10": self.cifar10_test_acc, "cifar100": self.cifar100_test_acc,
                "ImageNet16-120": self.imagenet16_test_acc}[dataset]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["arch"] = str(self.arch)
        return d


def load_accuracy_table(path: str | os.PathLike[str] | None = None) -> list[AccuracyRow]:
    """The 15,625 rows of the NATS-Bench accuracy table, in index order.

    path: a CSV with the same columns, one row per cell in index order; default: the table
    packaged with torchutil (source and license in torchutil/nas/data/README.md). A table
    that is not that (a missing column, a row short, out of order or not a number, an arch
    that is not arch_of_index of its index) is refused with a ValueError naming the file and
    the row.
    """
    if path is None:
        packaged = resources.files("torchutil.nas").joinpath("data", "nb201_accuracy.csv")
        with packaged.open("r", newline="") as f:
            return _read_table(f, "the packaged accuracy table", check_arch=False)  # checked by its test
    with open(path, newline="") as f:
        return _read_table(f, os.fspath(path), check_arch=True)


_TABLE_COLUMNS = ("index", "arch", "cifar10_test_acc", "cifar100_test_acc", "imagenet16_test_acc", "flops_m",
                  "params_m")


def _read_table(f: Any, name: str, check_arch: bool) -> list[AccuracyRow]:
    reader = csv.DictReader(f)
    missing = [c for c in _TABLE_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise _error(f"{name} is not an accuracy table: no column {', '.join(missing)}")
    rows = []
    for r in reader:
        line = reader.line_num
        try:
            row = AccuracyRow(
                index=int(r["index"]),
                arch=parse_arch(r["arch"]),
                cifar10_test_acc=float(r["cifar10_test_acc"]),
                cifar100_test_acc=float(r["cifar100_test_acc"]),
                imagenet16_test_acc=float(r["imagenet16_test_acc"]),
                flops_m=float(r["flops_m"]),
                params_m=float(r["params_m"]),
            )
        except (TypeError, ValueError) as e:  # a short row (None) or a bad number or arch
            raise _error(f"{name} line {line}: {e}") from None
        if row.index != len(rows):
            raise _error(f"{name} line {line}: index {row.index} where {len(rows)} was due (one row per cell, "
                         "in index order)")
        bad = next((c for c in _TABLE_COLUMNS[2:] if not math.isfinite(getattr(row, c))), None)
        if bad is not None:
            raise _error(f"{name} line {line}: {bad} is {r[bad]!r}; an accuracy table holds finite numbers")
        if check_arch and row.arch != arch_of_index(row.index):
            raise _error(f"{name} line {line}: arch {row.arch} is not the cell of index {row.index} "
                         f"({arch_of_index(row.index)}); its accuracies would join to the wrong cell")
        rows.append(row)
    if len(rows) != _NUM_ARCHS:
        raise _error(f"{name} holds {len(rows):,} rows; an accuracy table has one per cell of the space "
                     f"({_NUM_ARCHS:,}), in index order")
    return rows


def _dataset(dataset: str) -> tuple[int, int]:
    if dataset not in DATASETS:
        raise _error(f"unknown dataset {dataset!r}; NATS-Bench datasets are {', '.join(DATASETS)}")
    return DATASETS[dataset]
