"""Neural-architecture-search spaces for torchutil's utilization studies.

natsbench: the NATS-Bench topology search space (= NAS-Bench-201, 15,625 cells): architecture
strings, the benchmark's index order, isomorphism keys, the packaged accuracy table and the
networks themselves, with their cost counted by torchutil in the benchmark's convention.
evaluate: the full-space sweep into SQLite (`python -m torchutil nas evaluate`); stats: rank
correlations with ties; correlate: utilization versus accuracy (RQ3); search: simulated
REINFORCE NAS with utilization as reward and pre-filter (RQ4/RQ5); reward(): utilization as a
reward tensor for a user's own search loop.
"""
from torchutil.nas import natsbench
from torchutil.nas.natsbench import (
    AccuracyRow,
    Arch,
    NetworkCost,
    TinyNetwork,
    arch_of_index,
    index_of_arch,
    input_shape,
    is_connected,
    load_accuracy_table,
    macs_and_params,
    network,
    num_archs,
    parse_arch,
    unique_str,
)
from torchutil.nas.rewards import reward
from torchutil.nas.stats import kendall, spearman

__all__ = [
    "AccuracyRow",
    "Arch",
    "NetworkCost",
    "TinyNetwork",
    "arch_of_index",
    "index_of_arch",
    "input_shape",
    "is_connected",
    "kendall",
    "load_accuracy_table",
    "macs_and_params",
    "natsbench",
    "network",
    "num_archs",
    "parse_arch",
    "reward",
    "spearman",
    "unique_str",
]
