"""The NATS-Bench topology space (torchutil.nas.natsbench) against the benchmark's own table.

Oracles: the packaged table (index order, arch strings, the 341 chance-level cells, NATS-Bench's
`flop` / `params` for every row), the published count of 6,466 isomorphism classes, and the
closed forms of the data README for CIFAR-100 and ImageNet16-120. Costs are counted with
torchutil's own FLOP counter.
"""
from __future__ import annotations

import collections
import csv
import itertools
import random
import re
from importlib import resources

import pytest
import torch

from torchutil.nas import natsbench as nb

NUM_ARCHS = 15625


@pytest.fixture(scope="module")
def table() -> list[nb.AccuracyRow]:
    return nb.load_accuracy_table()


@pytest.fixture(scope="module")
def raw_arch_strings() -> list[str]:
    with resources.files("torchutil.nas").joinpath("data", "nb201_accuracy.csv").open(newline="") as f:
        return [row["arch"] for row in csv.DictReader(f)]


def test_table(table):
    assert len(table) == NUM_ARCHS
    assert [r.index for r in table] == list(range(NUM_ARCHS))
    best = max(r.cifar10_test_acc for r in table)
    assert best == 94.3733
    assert {r.index for r in table if r.cifar10_test_acc == best} == {6111, 13714}
    assert max(table, key=lambda r: r.cifar100_test_acc).index == 9930
    assert max(table, key=lambda r: r.imagenet16_test_acc).index == 857
    assert table[0].to_dict()["arch"] == str(table[0].arch)
    row = table[6111]
    assert [row.test_accuracy(d) for d in nb.DATASETS] == [
        row.cifar10_test_acc, row.cifar100_test_acc, row.imagenet16_test_acc]
    with pytest.raises(ValueError, match="unknown dataset"):
        row.test_accuracy("imagenet")


# --- strings -----------------------------------------------------------------------------------


def test_parse_print_round_trip(raw_arch_strings):
    assert len(set(raw_arch_strings)) == NUM_ARCHS
    for text in raw_arch_strings:
        arch = nb.parse_arch(text)
        assert str(arch) == text
        assert nb.parse_arch(str(arch)) == arch
    arch = nb.parse_arch(raw_arch_strings[1])
    assert arch.ops == (
        "nor_conv_3x3", "nor_conv_3x3", "avg_pool_3x3", "skip_connect", "nor_conv_3x3", "skip_connect")
    assert list(arch.edges())[2] == (2, 1, "avg_pool_3x3")
    assert arch.count("nor_conv_3x3") == 3


OK = "|nor_conv_3x3~0|+|none~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_1x1~1|none~2|"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "expected 3 '+'-separated nodes"),
        ("|nor_conv_3x3~0|+|none~0|none~1|", "expected 3 '+'-separated nodes"),
        (OK + "+|none~0|", "got 4"),
        ("nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|",
         "node 1 'nor_conv_3x3~0|' must be enclosed in '|'"),
        ("|nor_conv_3x3~0|+|none~0|+|none~0|none~1|none~2|", "node 2 '|none~0|' has 1 edge(s), expected 2"),
        ("|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|none~3|", "node 3"),
        ("|conv_5x5~0|+|none~0|none~1|+|none~0|none~1|none~2|", "unknown op 'conv_5x5'"),
        ("|none~1|+|none~0|none~1|+|none~0|none~1|none~2|", "edge 'none~1' of node 1 must be '<op>~0'"),
        ("|none|+|none~0|none~1|+|none~0|none~1|none~2|", "edge 'none' of node 1 must be '<op>~0'"),
        ("|none~0|+|none~1|none~0|+|none~0|none~1|none~2|", "edge 'none~1' of node 2 must be '<op>~0'"),
        ("|none~0|+|none~0|none~1|+|none~0|none~1|none~ 2|", "edge 'none~ 2' of node 3 must be '<op>~2'"),
    ],
)
def test_bad_strings_raise_naming_the_problem(text, problem):
    with pytest.raises(ValueError, match=re.escape(problem)) as info:
        nb.parse_arch(text)
    assert repr(text) in str(info.value)


def test_bad_values_raise():
    with pytest.raises(ValueError, match="6 edge ops, got 5"):
        nb.Arch(("none",) * 5)
    with pytest.raises(ValueError, match=r"unknown op 'max_pool_3x3' on edge 1->3"):
        nb.Arch(("none",) * 4 + ("max_pool_3x3", "none"))
    for index in (-1, NUM_ARCHS, True, 1.0):
        with pytest.raises(ValueError, match=r"an int in \[0, 15625\)"):
            nb.arch_of_index(index)
    with pytest.raises(TypeError):
        nb.parse_arch(None)
    with pytest.raises(ValueError, match="unknown dataset 'cifar-10'"):
        nb.input_shape("cifar-10")


# --- index order -------------------------------------------------------------------------------


def test_index_order_matches_the_table(table, raw_arch_strings):
    assert nb.num_archs() == NUM_ARCHS
    for index, (row, text) in enumerate(zip(table, raw_arch_strings)):
        assert nb.arch_of_index(index) == row.arch
        assert nb.index_of_arch(row.arch) == index
        assert nb.index_of_arch(text) == index


def test_index_order_is_the_published_shuffle():
    # exps/NATS-Bench/main-tss.py asserts these three after random.seed(88); random.shuffle.
    assert str(nb.arch_of_index(0)) == (
        "|avg_pool_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|nor_conv_1x1~0|skip_connect~1|skip_connect~2|")
    assert str(nb.arch_of_index(9)) == (
        "|avg_pool_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|nor_conv_3x3~2|")
    assert str(nb.arch_of_index(123)) == (
        "|avg_pool_3x3~0|+|avg_pool_3x3~0|nor_conv_1x1~1|+|none~0|avg_pool_3x3~1|nor_conv_3x3~2|")
    # No itertools.product order (of any edge nesting and op order) gives the table's order: in
    # one, indices 0..4 would differ only in the innermost edge.
    first = [nb.arch_of_index(i).ops for i in range(5)]
    assert sum(len({ops[e] for ops in first}) > 1 for e in range(6)) > 1
    # Every cell has exactly one index.
    indices = {nb.index_of_arch(nb.Arch(ops)) for ops in itertools.product(nb.OPS, repeat=6)}
    assert indices == set(range(NUM_ARCHS))


# --- isomorphism and connectivity ---------------------------------------------------------------


def test_isomorphism_classes(table):
    keys = {nb.unique_str(r.arch) for r in table}
    assert len(keys) == 6466
    # The sum into a node is unordered: conv3x3(x) + conv1x1(skip(x)) == conv1x1(x) + conv3x3(skip(x)).
    a = "|skip_connect~0|+|none~0|none~1|+|nor_conv_3x3~0|nor_conv_1x1~1|none~2|"
    b = "|skip_connect~0|+|none~0|none~1|+|nor_conv_1x1~0|nor_conv_3x3~1|none~2|"
    assert nb.unique_str(a) == nb.unique_str(b) == "#+(0)@nor_conv_1x1+(0)@nor_conv_3x3"
    # Node 1 reaches the output through `none` only: its op does not matter.
    c = "|{}~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none~1|nor_conv_1x1~2|"
    assert len({nb.unique_str(c.format(op)) for op in nb.OPS}) == 1
    # skip_connect is transparent: conv(skip(x)) == conv(x).
    d = "|skip_connect~0|+|none~0|nor_conv_3x3~1|+|none~0|none~1|skip_connect~2|"
    e = "|none~0|+|nor_conv_3x3~0|none~1|+|none~0|none~1|skip_connect~2|"
    assert nb.unique_str(d) == nb.unique_str(e)
    assert nb.unique_str(a) != nb.unique_str(d)
    # As published, a "#" stays in its node's key, so swapping nodes 1 and 2 (node 2 has the
    # extra `none` input from node 1) changes the key; and the disconnected cells take 5 keys.
    swap_a = "|nor_conv_3x3~0|+|nor_conv_1x1~0|none~1|+|none~0|avg_pool_3x3~1|skip_connect~2|"
    swap_b = "|nor_conv_1x1~0|+|nor_conv_3x3~0|none~1|+|none~0|skip_connect~1|avg_pool_3x3~2|"
    assert nb.unique_str(swap_a) != nb.unique_str(swap_b)
    assert len({nb.unique_str(r.arch) for r in table if not nb.is_connected(r.arch)}) == 5


# The 4 paths from the cell input (0) to its output (3).
PATHS = (((1, 0), (3, 1)), ((3, 0),), ((2, 0), (3, 2)), ((1, 0), (2, 1), (3, 2)))


def _has_live_path(arch: nb.Arch) -> bool:
    op = dict(zip(nb.EDGES, arch.ops))
    return any(all(op[edge] != "none" for edge in path) for path in PATHS)


def test_disconnected_architectures(table):
    disconnected = {r.index for r in table if not _has_live_path(r.arch)}
    assert len(disconnected) == 341
    assert {r.index for r in table if not nb.is_connected(r.arch)} == disconnected
    assert {r.index for r in table if r.cifar10_test_acc == 10.0} == disconnected


# --- the network and its cost --------------------------------------------------------------------


def _cost_group(arch: nb.Arch) -> tuple[int, int]:
    # Only nor_conv edges hold parameters or multiply-accumulates; which edges they sit on
    # does not change their shapes (every edge of a cell maps C channels to C at one size).
    return arch.count("nor_conv_3x3"), arch.count("nor_conv_1x1")


@pytest.fixture(scope="module")
def group_costs(table) -> dict[tuple[int, int], nb.NetworkCost]:
    """The cost of the first architecture of every (n3, n1) group, counted on the meta device."""
    costs = {}
    for row in table:
        key = _cost_group(row.arch)
        if key not in costs:
            with torch.device("meta"):
                model = nb.network(row.arch, "cifar10")
            costs[key] = nb.macs_and_params(model, "cifar10")
    return costs


def _matches_row(cost: nb.NetworkCost, row: nb.AccuracyRow) -> bool:
    # flops_m and params_m are exact at the table's 5 and 6 decimals: compare integers.
    return cost.macs == round(row.flops_m * 1e6) and cost.params == round(row.params_m * 1e6)


@pytest.mark.slow
def test_cost_of_every_architecture(table, group_costs):
    """Every row's flops_m and params_m equal the torchutil count of its (n3, n1) group (that
    all members of a group count alike is test_cost_depends_only_on_the_group's part)."""
    assert len(group_costs) == 28
    groups = collections.Counter(_cost_group(r.arch) for r in table)
    assert set(groups) == set(group_costs) and sum(groups.values()) == NUM_ARCHS
    for row in table:
        cost = group_costs[_cost_group(row.arch)]
        assert _matches_row(cost, row), (row.index, str(row.arch), cost, row.flops_m, row.params_m)
        assert round(cost.macs_m, 5) == row.flops_m and round(cost.params_m, 6) == row.params_m


@pytest.mark.slow
def test_cost_depends_only_on_the_group(table, group_costs):
    """Up to 12 random architectures of every (n3, n1) group (all of a smaller group; about 300
    in all), each built and counted on its own, count exactly as their group's representative
    and as their table row. Counted on the CPU: a real forward, and faster than the meta
    device's Python shape functions. (All 15,625 would take about 9 minutes on 2 cores.)"""
    rng = random.Random(201)
    members = collections.defaultdict(list)
    for row in table:
        members[_cost_group(row.arch)].append(row)
    sample = [row for rows in members.values() for row in rng.sample(rows, min(12, len(rows)))]
    assert len(sample) > 300
    for row in sample:
        cost = nb.macs_and_params(nb.network(row.arch, "cifar10"), "cifar10", device="cpu")
        assert cost == group_costs[_cost_group(row.arch)], (row.index, str(row.arch))
        assert _matches_row(cost, row)


@pytest.mark.parametrize(
    "dataset, macs, params",
    [
        # The data README's closed forms: n3, n1 -> multiply-accumulates, parameters.
        ("cifar100", lambda n3, n1: 7_788_900 + 35_389_440 * n3 + 3_932_160 * n1,
         lambda n3, n1: 79_156 + 243_040 * n3 + 28_000 * n1),
        ("ImageNet16-120", lambda n3, n1: 1_953_400 + 8_847_360 * n3 + 983_040 * n1,
         lambda n3, n1: 80_456 + 243_040 * n3 + 28_000 * n1),
    ],
)
def test_cost_on_other_datasets(table, dataset, macs, params):
    rng = random.Random(120)
    for row in rng.sample(table, 12):
        n3, n1 = _cost_group(row.arch)
        model = nb.network(row.arch, dataset)
        cost = nb.macs_and_params(model, dataset, device="cpu")
        assert (cost.macs, cost.params) == (macs(n3, n1), params(n3, n1)), (dataset, str(row.arch))


def test_network_forward():
    torch.manual_seed(0)
    arch = nb.arch_of_index(6111)
    for dataset, classes in (("cifar10", 10), ("cifar100", 100), ("ImageNet16-120", 120)):
        model = nb.network(arch, dataset).eval()
        x = torch.randn(nb.input_shape(dataset, batch_size=2))
        assert x.shape[-1] == (16 if dataset == "ImageNet16-120" else 32)
        with torch.no_grad():
            assert model(x).shape == (2, classes)
    # A disconnected cell outputs zeros: the logits do not depend on the input.
    dead = next(nb.arch_of_index(i) for i in range(NUM_ARCHS) if not nb.is_connected(nb.arch_of_index(i)))
    model = nb.network(dead).eval()
    with torch.no_grad():
        a, b = model(torch.randn(1, 3, 32, 32)), model(torch.randn(1, 3, 32, 32))
    assert torch.equal(a, b)


def test_state_dict_names_follow_xautodl():
    arch = nb.parse_arch("|nor_conv_3x3~0|+|none~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_1x1~1|none~2|")
    with torch.device("meta"):
        keys = set(nb.network(arch).state_dict())
    expected = {
        "stem.0.weight", "stem.1.running_mean", "cells.0.layers.0.op.1.weight",
        "cells.0.layers.0.op.2.bias", "cells.4.layers.4.op.1.weight", "cells.5.conv_a.op.1.weight",
        "cells.5.conv_b.op.2.num_batches_tracked", "cells.5.downsample.1.weight",
        "cells.16.layers.0.op.2.weight", "lastact.0.weight", "classifier.weight", "classifier.bias",
    }
    assert expected <= keys
    assert not any(k.startswith("cells.0.layers.1.") or k.startswith("cells.0.layers.2.") for k in keys)


@pytest.mark.parametrize("index", [0, 6111, 15624])
def test_network_pool_is_the_network(index):
    pool = nb.NetworkPool("ImageNet16-120", "cpu")
    model = pool.get(index)
    ref = nb.network(index, "ImageNet16-120")
    assert str(model.arch) == str(ref.arch)
    assert [(k, v.shape) for k, v in model.state_dict().items()] == [(k, v.shape) for k, v in ref.state_dict().items()]
    assert nb.macs_and_params(model, "ImageNet16-120", device="cpu") == nb.macs_and_params(ref, "ImageNet16-120")
    assert not model.training
    # params() from counts made once; oracle: the freshly built network's parameters
    assert pool.params(index) == sum(p.numel() for p in ref.parameters())


def test_macs_and_params_leaves_the_model_alone():
    model = nb.network(11).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cost = nb.macs_and_params(model, "cifar10")  # counted on a meta copy
    assert cost.macs_m == pytest.approx(113.95137) and cost.params == 802_426
    assert model.training and all(m.training for m in model.modules())
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) and after[k].device.type == "cpu" for k in before)
    assert cost.to_dict() == {
        "macs": 113_951_370, "params": 802_426, "macs_m": 113.95137, "params_m": 0.802426}
