"""The NATS-Bench topology search space (= NAS-Bench-201), written from its published definition.

A cell is a DAG of 4 nodes; node 0 is the cell input, node 3 its output, and each of the 6
edges j -> i (j < i) carries one of the 5 ops in OPS, so there are 5**6 = 15,625 cells. Every
node sums its incoming edges. The network (TinyNetwork) stacks 3 stages of N cells at C, 2C and
4C channels with a ResNet basic block between stages.

Sources (MIT License, Copyright Xuanyi Dong): AutoDL-Projects `xautodl/models/cell_operations.py`,
`cell_infers/cells.py` and `cell_infers/tiny_network.py` (the network),
`cell_searchs/genotypes.py` (`gen_all`, `to_unique_str`, `check_valid`), and
`exps/NATS-Bench/main-tss.py` (`traverse_net`: the index order).

The cells themselves (strings, indices, isomorphism keys, the accuracy table) are defined in
torchutil/nas/space.py, torch-free; this module builds their networks and re-exports all of it.

    from torchutil.nas import natsbench as nb
    arch = nb.arch_of_index(6111)                   # Arch, printed as |...~0|+|...|+|...|
    nb.index_of_arch(str(arch)) == 6111
    with torch.device("meta"):
        model = nb.network(arch, "cifar10")         # no memory, no initialization cost
    nb.macs_and_params(model, "cifar10")            # NetworkCost in NATS-Bench's convention
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

import torchutil
from torchutil.nas.space import (DATASETS, EDGES, OPS, AccuracyRow, Arch, _as_arch, _dataset, _error, _NUM_NODES,
                                 arch_of_index, index_of_arch, is_connected, load_accuracy_table, num_archs,
                                 parse_arch, unique_str)

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
        # Parameter counts for params(): the network's outside the swapped edge ops, and each op's.
        def count(m: nn.Module) -> int:
            return sum(p.numel() for p in m.parameters())

        self._base_params = count(self.model) - sum(count(layer) for cell in self.cells for layer in cell.layers)
        self._op_params = [[{op: count(m) for op, m in edge.items()} for edge in cell] for cell in edges]
        # One holder so that dtype, memory format and eval mode reach every pooled module.
        holder = nn.ModuleList([self.model, *(m for cell in edges for edge in cell for m in edge.values())])
        holder.eval()
        holder.to(dtype=dtype)
        if channels_last:
            holder.to(memory_format=torch.channels_last)

    def params(self, arch: Arch | str | int) -> int:
        """The parameter count of get(arch) (sum of its parameters' numel), from counts made once."""
        ops = _as_arch(arch).ops
        return self._base_params + sum(cell[k][op] for cell in self._op_params for k, op in enumerate(ops))

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
