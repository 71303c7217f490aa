"""A `nas evaluate` results db the tests write from row dicts, and synthetic rows for one."""
import math

import numpy as np

from torchutil.nas import natsbench as nb
from torchutil.studies import nas_evaluate as ev


def write_db(path, rows):
    """Writes `rows` (dicts with every column) into a new results db at `path`; returns path."""
    con = ev.connect(path)
    ev.insert_rows(con, rows)
    con.close()
    return path


def synthetic_rows(indices, seed=0, **key):
    """Rows of a plausible measurement: utilization grows with the cell's MACs, throughput falls."""
    rng = np.random.default_rng(seed)
    table = nb.load_accuracy_table()
    config = {"dataset": "cifar10", "batch": 256, "dtype": "float16", "device": "cuda", "mode": "eager", **key}
    rows = []
    for i in indices:
        r = table[i]
        row = {"idx": i, **config, "arch": str(r.arch), "device_name": "synthetic"}
        row.update({c: math.nan for c in ev.METRIC_COLUMNS})
        row.update(utilization=1e-3 * (1 + r.flops_m / 25) * (0.9 + 0.2 * rng.random()),
                   inputs_per_second=1e5 / (1 + r.flops_m / 20) * (0.8 + 0.4 * rng.random()),
                   flops=2e6 * r.flops_m, params=1e6 * r.params_m, eval_seconds=0.03)
        rows.append(row)
    return rows
