"""The NATS-Bench topology search space (= NAS-Bench-201), written from its published definition.

A cell is a DAG of 4 nodes; node 0 is the cell input, node 3 its output, and each of the 6
edges j -> i (j < i) carries one of the 5 ops in OPS, so there are 5**6 = 15,625 cells. Every
node sums its incoming edges. The network (TinyNetwork) stacks 3 stages of N cells at C, 2C and
4C channels with a ResNet basic block between stages.

Sources (MIT License, Copyright Xuanyi Dong): AutoDL-Projects `xautodl/models/cell_operations.py`,
`cell_infers/cells.py` and `cell_infers/tiny_network.py` (the network),
`cell_searchs/genotypes.py` (`gen_all`, `to_unique_str`, `check_valid`), and
`exps/NATS-Bench/main-tss.py` (`traverse_net`: the index order).

    from torchutil.nas import natsbench as nb
    arch = nb.arch_of_index(6111)                   # Arch, printed as |...~0|+|...|+|...|
    nb.index_of_arch(str(arch)) == 6111
    with torch.device("meta"):
        model = nb.network(arch, "cifar10")         # no memory, no initialization cost
    nb.macs_and_params(model, "cifar10")            # NetworkCost in NATS-Bench's convention
"""
from __future__ import annotations

import copy
import csv
import functools
import os
import random
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any, Iterator

import torch
from torch import nn

import torchutil

__all__ = [
    "DATASETS",
    "EDGES",
    "OPS",
    "AccuracyRow",
    "Arch",
    "InferCell",
    "NetworkCost",
    "NetworkPool",
    "ReLUConvBN",
    "ResNetBasicblock",
    "TinyNetwork",
    "Zero",
    "arch_of_index",
    "index_of_arch",
    "input_shape",
    "is_connected",
    "load_accuracy_table",
    "macs_and_params",
    "network",
    "num_archs",
    "parse_arch",
    "unique_str",
]

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

    path: a CSV with the same columns; default: the table packaged with torchutil (source and
    license in torchutil/nas/data/README.md).
    """
    if path is None:
        packaged = resources.files("torchutil.nas").joinpath("data", "nb201_accuracy.csv")
        with packaged.open("r", newline="") as f:
            return _read_table(f)
    with open(path, newline="") as f:
        return _read_table(f)


def _read_table(f: Any) -> list[AccuracyRow]:
    return [
        AccuracyRow(
            index=int(r["index"]),
            arch=parse_arch(r["arch"]),
            cifar10_test_acc=float(r["cifar10_test_acc"]),
            cifar100_test_acc=float(r["cifar100_test_acc"]),
            imagenet16_test_acc=float(r["imagenet16_test_acc"]),
            flops_m=float(r["flops_m"]),
            params_m=float(r["params_m"]),
        )
        for r in csv.DictReader(f)
    ]


# ---------------------------------------------------------------------------------------------
# The network. Module and attribute names follow xautodl's, so a state_dict of an official
# NAS-Bench-201 / NATS-Bench TinyNetwork loads into it.


class ReLUConvBN(nn.Module):
    """ReLU -> Conv2d (no bias) -> BatchNorm2d (affine, running statistics)."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int, padding: int) -> None:
        super().__init__()
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=padding, bias=False),
            nn.BatchNorm2d(c_out, affine=True, track_running_stats=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


class Zero(nn.Module):
    """The `none` op: x * 0, so the edge still runs (as in NAS-Bench-201) but adds nothing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


def _edge_op(op: str, channels: int) -> nn.Module:
    if op == "none":
        return Zero()
    if op == "skip_connect":
        return nn.Identity()
    if op == "nor_conv_1x1":
        return ReLUConvBN(channels, channels, 1, 1, 0)
    if op == "nor_conv_3x3":
        return ReLUConvBN(channels, channels, 3, 1, 1)
    if op == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
    raise _error(f"unknown op {op!r}; ops are {', '.join(OPS)}")


class InferCell(nn.Module):
    """One cell at `channels` channels (stride 1): node i = sum of op(node j) over its edges.

    layers[k] is the op of EDGES[k].
    """

    def __init__(self, arch: Arch, channels: int) -> None:
        super().__init__()
        self.arch = arch
        self.layers = nn.ModuleList(_edge_op(op, channels) for op in arch.ops)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for node in range(1, _NUM_NODES):
            total = None
            for k, (to, frm) in enumerate(EDGES):
                if to == node:
                    y = self.layers[k](nodes[frm])
                    total = y if total is None else total + y
            nodes.append(total)
        return nodes[-1]

    def extra_repr(self) -> str:
        return str(self.arch)


class ResNetBasicblock(nn.Module):
    """The reduction block between stages: two ReLUConvBN 3x3 (the first with stride 2) plus a
    residual of AvgPool2d(2, 2) -> Conv2d 1x1 (no bias, no BatchNorm)."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv_a = ReLUConvBN(c_in, c_out, 3, 2, 1)
        self.conv_b = ReLUConvBN(c_out, c_out, 3, 1, 1)
        self.downsample = nn.Sequential(
            nn.AvgPool2d(kernel_size=2, stride=2, padding=0),
            nn.Conv2d(c_in, c_out, kernel_size=1, stride=1, padding=0, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(x) + self.conv_b(self.conv_a(x))


class TinyNetwork(nn.Module):
    """The NAS-Bench-201 network of one cell.

    stem: Conv2d 3x3 (3 -> C, no bias) + BatchNorm2d; then N cells at C, a ResNetBasicblock to
    2C (stride 2), N cells at 2C, a block to 4C, N cells at 4C; then BatchNorm2d + ReLU, global
    average pooling and Linear(4C, num_classes).

    forward(x [batch, 3, H, W]) -> logits [batch, num_classes]. (xautodl's TinyNetwork returns
    the pooled features too, as (features, logits).)
    """

    def __init__(self, arch: Arch | str | int, C: int = 16, N: int = 5, num_classes: int = 10) -> None:
        super().__init__()
        self.arch = _as_arch(arch)
        for name, value in (("C", C), ("N", N), ("num_classes", num_classes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _error(f"TinyNetwork {name} must be a positive int, got {value!r}")
        self.stem = nn.Sequential(nn.Conv2d(3, C, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(C))
        self.cells = nn.ModuleList()
        channels = C
        for stage in range(3):
            if stage > 0:
                self.cells.append(ResNetBasicblock(channels, 2 * channels))
                channels *= 2
            for _ in range(N):
                self.cells.append(InferCell(self.arch, channels))
        self.lastact = nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU(inplace=True))
        self.global_pooling = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feature = self.stem(x)
        for cell in self.cells:
            feature = cell(feature)
        out = self.global_pooling(self.lastact(feature))
        return self.classifier(out.flatten(1))


def _dataset(dataset: str) -> tuple[int, int]:
    if dataset not in DATASETS:
        raise _error(f"unknown dataset {dataset!r}; NATS-Bench datasets are {', '.join(DATASETS)}")
    return DATASETS[dataset]


def input_shape(dataset: str, batch_size: int = 1) -> tuple[int, int, int, int]:
    """Input shape [batch, 3, H, W] of `dataset`: 32x32 for CIFAR, 16x16 for ImageNet16-120."""
    size = _dataset(dataset)[1]
    return (batch_size, 3, size, size)


def network(arch: Arch | str | int, dataset: str = "cifar10", C: int = 16, N: int = 5) -> TinyNetwork:
    """The NATS-Bench network of `arch` for `dataset` ("cifar10", "cifar100", "ImageNet16-120"),
    with the benchmark's C=16, N=5. Build it under `with torch.device("meta"):` to count it
    without allocating or initializing weights."""
    return TinyNetwork(arch, C=C, N=N, num_classes=_dataset(dataset)[0])


class NetworkPool:
    """The network of any arch in microseconds, for sweeps over many archs: one TinyNetwork
    built once on `device`, whose cells' edge ops are swapped per arch from modules built once
    (for each cell position, edge and op). get(arch) returns that one network set to the arch:
    the same module tree, parameter count and FLOPs as network(arch, dataset), with random
    weights. Building a TinyNetwork is ~340 module constructions (~20 ms of Python on a 2-core
    CPU), more than profiling it on a GPU takes. Not thread-safe: get() changes the network in
    place."""

    def __init__(self, dataset: str, device: torch.device | str, dtype: torch.dtype = torch.float32,
                 channels_last: bool = False) -> None:
        device = torch.device(device)
        with device:
            self.model = network(0, dataset)
            self.cells: list[InferCell] = []
            edges: list[list[dict[str, nn.Module]]] = []
            channels = self.model.stem[0].out_channels
            for cell in self.model.cells:
                if isinstance(cell, ResNetBasicblock):
                    channels = cell.conv_b.op[1].out_channels
                    continue
                self.cells.append(cell)
                edges.append([{op: _edge_op(op, channels) for op in OPS} for _ in EDGES])
        self.pool = edges
        # One holder so that dtype, memory format and eval mode reach every pooled module.
        holder = nn.ModuleList([self.model, *(m for cell in edges for edge in cell for m in edge.values())])
        holder.eval()
        holder.to(dtype=dtype)
        if channels_last:
            holder.to(memory_format=torch.channels_last)

    def get(self, arch: Arch | str | int) -> TinyNetwork:
        arch = _as_arch(arch)
        self.model.arch = arch
        for cell, edges in zip(self.cells, self.pool):
            cell.arch = arch
            for k, op in enumerate(arch.ops):
                cell.layers[k] = edges[k][op]
        return self.model


@dataclass(frozen=True)
class NetworkCost:
    """A network's cost in NATS-Bench's convention (`flop` and `params` of its cost records).

    macs: multiply-accumulates of one forward of one image, counting every convolution and the
        classifier (its bias additions included); BatchNorm, ReLU, pooling, `none` and the
        additions of nodes are not counted. NATS-Bench calls this number `flop` and the
        packaged table `flops_m`; it is half of torchutil's matrix FLOPs (2 x MAC).
    params: trainable parameters, BatchNorm weights and biases included.
    """

    macs: int
    params: int

    @property
    def macs_m(self) -> float:
        """macs in millions (the table's flops_m)."""
        return self.macs / 1e6

    @property
    def params_m(self) -> float:
        """params in millions (the table's params_m)."""
        return self.params / 1e6

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "macs_m": self.macs_m, "params_m": self.params_m}


def _is_convolution(op: str) -> bool:
    return "conv" in op.split("::")[-1]


def macs_and_params(model: nn.Module, dataset: str, device: torch.device | str = "meta") -> NetworkCost:
    """Counts `model` (a TinyNetwork) on one image of `dataset` with torchutil's own FLOP counter
    and converts the count to NATS-Bench's convention (see NetworkCost).

    macs = (matrix FLOPs of the convolutions and of the classifier) / 2 + the classifier's bias
    additions (torchutil counts those as vector FLOPs, 1 per output element).
    The count runs on `device` ("meta" by default: shapes only, no arithmetic). A model that is
    not on `device` is counted on a copy moved there; the model itself is not changed (it is
    counted in eval mode, and its training flags are restored).
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    first = next(model.parameters(), None)
    if first is not None and first.device != device:
        # A meta model has no values to copy: its copy gets uninitialized storage, which the
        # count never reads.
        model = copy.deepcopy(model)
        model = model.to_empty(device=device) if first.device.type == "meta" else model.to(device)
    training = {m: m.training for m in model.modules()}
    model.eval()
    try:
        x = torch.zeros(input_shape(dataset), device=device)
        # One counted forward (torchutil.profile would add timed ones).
        with torchutil.Profiler(model, device=device) as prof, torch.inference_mode():
            model(x)
    finally:
        for m, flag in training.items():
            m.training = flag
    result = prof.result
    if result.unknown_ops:
        raise RuntimeError(f"torchutil.nas: ops without a FLOP formula in the count: {result.unknown_ops}")
    matrix = 0
    classifier_bias = 0
    for row in result.ops:
        in_classifier = row.module == "classifier" or row.module.endswith(".classifier")
        if in_classifier:
            classifier_bias += row.vector_flops
        if in_classifier or _is_convolution(row.op):
            matrix += row.matrix_flops
        elif row.matrix_flops:
            raise RuntimeError(
                f"torchutil.nas: matrix FLOPs outside a convolution or the classifier: {row.op} "
                f"in {row.module!r} ({row.matrix_flops})"
            )
    if matrix % 2:
        raise RuntimeError(f"torchutil.nas: matrix FLOPs {matrix} are not 2 x multiply-accumulates")
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return NetworkCost(macs=matrix // 2 + classifier_bias, params=params)
