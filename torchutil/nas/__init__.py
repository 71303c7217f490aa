"""Neural-architecture search with utilization: the library side.

natsbench: the NATS-Bench topology search space (= NAS-Bench-201, 15,625 cells): architecture
strings, the benchmark's index order, isomorphism keys, the packaged accuracy table and the
networks themselves, with their cost counted by torchutil in the benchmark's convention.
stats: rank correlations with ties. reward(): utilization as a reward tensor for a user's own
search loop. cells: one cell's measurement into a results row (EvalConfig, evaluate_arch), whose
columns are db_schema's; evaluator, service and engines measure cells on request, for Optuna and
Ray Tune; errors: the "torchutil.nas: ..." ValueError they all raise.

The studies built on them (the full-space sweep, correlate, the simulated search: `python -m
torchutil nas ...`) live in the studies package (nas_evaluate, nas_correlate, nas_search), which
imports from here; nothing here imports from there (tests/test_layering.py).
"""
from torchutil.nas import natsbench
from torchutil.nas.natsbench import (
    AccuracyRow,
    Arch,
    NetworkCost,
    NetworkPool,
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
from torchutil.nas.stats import kendall, kendall_test, spearman, spearman_test

__all__ = [
    "AccuracyRow",
    "Arch",
    "NetworkCost",
    "NetworkPool",
    "TinyNetwork",
    "arch_of_index",
    "index_of_arch",
    "input_shape",
    "is_connected",
    "kendall",
    "kendall_test",
    "load_accuracy_table",
    "macs_and_params",
    "natsbench",
    "network",
    "num_archs",
    "parse_arch",
    "reward",
    "spearman",
    "spearman_test",
    "unique_str",
]
