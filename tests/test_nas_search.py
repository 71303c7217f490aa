"""The NAS studies on CPU: the sweep into SQLite (resume, shards, merge; the sweep over ranks is
in test_nas_distributed.py), rank correlations against hand-computed values, the correlate and
search commands on a synthetic db, and torchutil.nas.reward.

Oracles: hand-computed Spearman / Kendall tau-b values with ties (and scipy where installed),
natsbench.network for the pooled networks, the definition of Pareto dominance.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from cli_status import status_and_err
from results_db import synthetic_rows as _synthetic_rows, write_db

from torchutil import FIELDS
from torchutil.nas import natsbench as nb
from torchutil.nas import reward
from torchutil.nas import stats
from torchutil.nas.stats import kendall, kendall_numpy, kendall_pairs, rankdata, spearman, spearman_numpy
from torchutil.studies import nas_correlate as co
from torchutil.studies import nas_evaluate as ev
from torchutil.studies import nas_search as se
from torchutil.studies.cli import main

FAST = dict(dataset="ImageNet16-120", batch=1, dtype="float32", device="cpu", warmup=0, iters=1)


@pytest.fixture(scope="module")
def full_db(tmp_path_factory):
    return write_db(tmp_path_factory.mktemp("nas") / "synthetic.sqlite", _synthetic_rows(range(nb.num_archs())))


# --- evaluate ----------------------------------------------------------------------------------


def test_parse_and_shard_indices(tmp_path):
    assert ev.parse_indices("0:4,10,2") == [0, 1, 2, 3, 10]
    assert ev.parse_indices(":3") == [0, 1, 2]
    assert len(ev.parse_indices(None)) == nb.num_archs()
    with pytest.raises(ValueError, match="outside"):
        ev.parse_indices("15625")
    indices = list(range(23))
    shards = [ev.shard_indices(indices, r, 4) for r in range(4)]
    assert sorted(i for s in shards for i in s) == indices
    assert all(i % 4 == r for r, s in enumerate(shards) for i in s)
    with pytest.raises(ValueError, match="rank"):
        ev.shard_indices(indices, 4, 4)
    assert ev.shard_path(tmp_path / "results.sqlite", 3) == tmp_path / "results.rank3.sqlite"


def test_evaluate_resumes(tmp_path, capsys):
    db = tmp_path / "results.sqlite"
    assert main(["nas", "evaluate", "--db", str(db), "--indices", "0:8", "--device", "cpu", "--batch", "1",
                 "--dataset", "ImageNet16-120", "--warmup", "0", "--iters", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "evaluated 8 archs" in out and "projected full space" in out
    rows = ev.read_rows(db)
    assert [r["idx"] for r in rows] == list(range(8))
    table = nb.load_accuracy_table()
    for r in rows:
        # The sweep's default timing is "auto", which is eager on a CPU (no CUDA graph).
        assert (r["dataset"], r["batch"], r["dtype"], r["device"], r["mode"]) == ("ImageNet16-120", 1, "float32", "cpu", "auto")
        assert r["cuda_graph"] == 0.0 and r["bandwidth_utilization"] > 0
        assert r["arch"] == str(table[r["idx"]].arch)
        assert r["utilization"] > 0 and r["inputs_per_second"] > 0 and r["seconds"] > 0
        assert math.isnan(r["kernel_seconds"]) and math.isnan(r["gpu_busy_fraction"])  # no GPU trace
        arch = table[r["idx"]].arch
        closed_form = 0.080456 + 0.24304 * arch.count("nor_conv_3x3") + 0.028 * arch.count("nor_conv_1x1")
        assert r["params"] / 1e6 == pytest.approx(closed_form, abs=1e-6)
    stats = ev.sweep(ev.EvalConfig(**FAST), ev.parse_indices("0:10"), db, progress=False)
    assert (stats.evaluated, stats.skipped) == (2, 8)
    assert len(ev.read_rows(db)) == 10
    assert math.isfinite(stats.projected_full_space_seconds)
    # Another config is another row.
    ev.sweep(ev.EvalConfig(**{**FAST, "batch": 2}), [0], db, progress=False)
    assert len(ev.read_rows(db)) == 11 and len(ev.read_rows(db, batch=2)) == 1


def test_merge_shards(tmp_path, capsys):
    db = tmp_path / "results.sqlite"
    indices = list(range(10))
    for rank in range(2):
        write_db(ev.shard_path(db, rank), _synthetic_rows(ev.shard_indices(indices, rank, 2)))
    assert list(ev.iter_shards(db)) == [ev.shard_path(db, 0), ev.shard_path(db, 1)]
    assert main(["nas", "merge", "--db", str(db)]) == 0
    assert f"merged 2 shard(s) into {db}: 10 rows new to it" in capsys.readouterr().out
    assert [r["idx"] for r in ev.read_rows(db)] == indices
    assert ev.merge(db, [ev.shard_path(db, 0)]) == 0  # merging again replaces, adds nothing
    assert len(ev.read_rows(db)) == 10
    with pytest.raises(ValueError, match="no results db at .*missing.sqlite"):
        ev.merge(db, [tmp_path / "missing.sqlite"])


def test_merge_counts_rows_really_merged(tmp_path, capsys):
    """The same shard twice is refused (exit 2, nothing written); overlapping shards count the rows
    they add, not the rows they copy (the report's "merged 6 rows" for 3)."""
    shard = write_db(tmp_path / "a.sqlite", _synthetic_rows(range(3)))
    overlap = write_db(tmp_path / "b.sqlite", _synthetic_rows(range(2, 5)))
    db = tmp_path / "m.sqlite"
    status, err = status_and_err(["nas", "merge", "--db", str(db), str(shard), str(shard)], capsys)
    assert status == 2 and f"shard {shard} is given twice" in err and not db.exists()
    assert main(["nas", "merge", "--db", str(db), str(shard), str(overlap)]) == 0
    assert "2 shard(s) into" in (out := capsys.readouterr().out) and ": 5 rows new to it" in out
    assert len(ev.read_rows(db)) == 5


def test_merge_workers_removes_only_worker_dbs(tmp_path, capsys):
    """The report's case: a user's r.worker-backup.sqlite and r.workers_old.sqlite beside --db
    r.sqlite were merged and deleted. Only r.worker<digits>.sqlite are, and it says so."""
    db = tmp_path / "r.sqlite"
    write_db(db, _synthetic_rows([0]))
    for name, rows in (("r.worker-backup.sqlite", [7]), ("r.workers_old.sqlite", [8]), ("r.worker.sqlite", [9]),
                       ("r.worker0.sqlite", [1, 2]), ("r.worker12.sqlite", [3]), ("rr.worker1.sqlite", [10])):
        write_db(tmp_path / name, _synthetic_rows(rows))
    ev.merge_workers(db)
    assert [r["idx"] for r in ev.read_rows(db)] == [0, 1, 2, 3]
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite") == ["r.sqlite", "r.worker-backup.sqlite", "r.worker.sqlite",
                                                         "r.workers_old.sqlite", "rr.worker1.sqlite"]
    err = capsys.readouterr().err
    assert f"merged the worker dbs r.worker0.sqlite, r.worker12.sqlite into {db} (3 new rows) and removed them" in err


# --- rank correlations -------------------------------------------------------------------------


def test_rankdata_ties():
    assert rankdata([10, 20, 20, 30]).tolist() == [1, 2.5, 2.5, 4]
    assert rankdata([3, 3, 3]).tolist() == [2, 2, 2]


@pytest.mark.parametrize("x, y, rho, tau", [
    # No ties: sum d^2 = 2, rho = 1 - 6 * 2 / (4 * 15); one discordant pair of 6.
    ([1, 2, 3, 4], [1, 3, 2, 4], 0.8, 4 / 6),
    # A tie in y: ranks (1, 2, 3) and (1.5, 1.5, 3) give rho = 1.5 / sqrt(2 * 1.5);
    # tau-b = (2 - 0) / sqrt(3 * (3 - 1)).
    ([1, 2, 3], [1, 1, 2], math.sqrt(3) / 2, 2 / math.sqrt(6)),
    # Ties in both, independent.
    ([1, 1, 2, 2], [1, 2, 1, 2], 0.0, 0.0),
    # Reversed, the same pair tied in both: n_c - n_d = -5, tau-b = -5 / sqrt(5 * 5).
    ([1, 2, 2, 3], [3, 2, 2, 1], -1.0, -1.0),
])
def test_correlations_hand_computed(x, y, rho, tau):
    assert spearman(x, y) == pytest.approx(rho, abs=1e-12)
    assert kendall(x, y) == pytest.approx(tau, abs=1e-12)
    assert kendall_pairs(x, y) == pytest.approx(tau, abs=1e-12)
    assert spearman_numpy(x, y) == pytest.approx(rho, abs=1e-12)
    assert kendall_numpy(x, y) == pytest.approx(tau, abs=1e-12)


def test_correlations_degenerate_and_random():
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3])) and math.isnan(kendall([1, 1, 1], [1, 2, 3]))
    assert math.isnan(kendall([1], [2]))
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2], [1, 2, 3])
    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, 500).astype(float)
    y = x + rng.integers(0, 4, 500)
    assert kendall_numpy(x, y) == pytest.approx(kendall_pairs(x, y, block=64), abs=1e-12)
    scipy_stats = pytest.importorskip("scipy.stats")
    assert spearman_numpy(x, y) == pytest.approx(scipy_stats.spearmanr(x, y)[0], abs=1e-12)
    assert kendall_numpy(x, y) == pytest.approx(scipy_stats.kendalltau(x, y)[0], abs=1e-12)
    assert spearman(x, y) == pytest.approx(spearman_numpy(x, y), abs=1e-12)
    assert kendall(x, y) == pytest.approx(kendall_numpy(x, y), abs=1e-12)


def test_p_values_with_scipy_and_without(monkeypatch):
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    x = rng.normal(size=200)
    y = x + rng.normal(size=200)
    rho, p_rho = stats.spearman_test(x, y)
    tau, p_tau = stats.kendall_test(x, y)
    assert p_rho == pytest.approx(scipy_stats.spearmanr(x, y).pvalue, rel=1e-12)
    assert p_tau == pytest.approx(scipy_stats.kendalltau(x, y).pvalue, rel=1e-12)
    assert 0 <= p_rho < 1e-6 and 0 <= p_tau < 1e-6  # strongly associated
    monkeypatch.setattr(stats, "_scipy_stats", None)  # the numpy fallback: no p-values
    rho_np, p_np = stats.spearman_test(x, y)
    tau_np, _ = stats.kendall_test(x, y)
    assert rho_np == pytest.approx(rho, abs=1e-12) and tau_np == pytest.approx(tau, abs=1e-12)
    assert math.isnan(p_np)


def test_correlate_command(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    db = write_db(tmp_path / "r.sqlite", _synthetic_rows(range(0, nb.num_archs(), 37)))
    out = tmp_path / "out"
    assert main(["nas", "correlate", "--db", str(db), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Spearman / Kendall" in printed and "ImageNet16-120" in printed
    results, _ = co.correlate(db)
    # subsets x accuracy datasets x metrics; bandwidth utilization is NaN in these rows (as in a
    # db from before it existed), so it is left out rather than reported as NaN correlations
    assert {r["metric"] for r in results} == {"utilization", "throughput", "flops", "params"}
    assert len(results) == 2 * 3 * 4
    assert all(-1 <= r["spearman"] <= 1 and -1 <= r["kendall"] <= 1 for r in results)
    if stats._scipy_stats is not None:
        assert all(0 <= r["spearman_p"] <= 1 and 0 <= r["kendall_p"] <= 1 for r in results)
    # The synthetic utilization grows with MACs: it ranks like FLOPs, up to its noise.
    util = next(r for r in results if r["metric"] == "utilization" and r["subset"] == "all"
                and r["accuracy_dataset"] == "cifar10")
    assert util["spearman"] > 0.3
    assert (out / "correlations.csv").read_text().count("\n") == 25
    assert (out / "correlations.json").exists()
    assert list(out.glob("scatter_*.png"))
    # With the column measured, it is correlated too.
    rows = _synthetic_rows(range(0, nb.num_archs(), 37))
    for r in rows:
        r["bandwidth_utilization"] = 10 * r["utilization"]
    db2 = write_db(tmp_path / "r2.sqlite", rows)
    results2, _ = co.correlate(db2)
    assert len(results2) == 2 * 3 * 5
    bw = next(r for r in results2 if r["metric"] == "bandwidth_utilization" and r["subset"] == "all"
              and r["accuracy_dataset"] == "cifar10")
    assert bw["spearman"] == pytest.approx(util["spearman"], abs=1e-12)


# --- search ------------------------------------------------------------------------------------


def test_pareto_front():
    acc = [90, 92, 91, 92, 85]
    thr = [10, 5, 5, 4, 20]
    assert se.pareto_front(acc, thr) == [1, 0, 4]


def test_search_strategies(full_db):
    space = se.SearchSpace.from_db(full_db)
    strategies = se.default_strategies()
    assert [s.name for s in strategies] == [
        "acc", "acc/threshold", "acc/quantile",
        "acc+utilization", "acc+utilization/threshold", "acc+utilization/quantile"]
    runs = se.run_strategies(space, strategies, seeds=[0, 1], iterations=40, quantile_warmup=5)
    summary = {s["strategy"]: s for s in se.summarize(runs, space)}
    for s in strategies:
        mine = [r for r in runs if r.strategy == s.name]
        assert len(mine) == 2 and all(r.iterations == 40 for r in mine)
        if s.filter == "none":
            assert all(r.avoided_evaluations == 0 for r in mine)
        else:
            assert summary[s.name]["avoided_evaluations_mean"] > 0
        for r in mine:
            assert r.found_index in r.evaluated
            assert r.found_accuracy == space.accuracy[r.found_index]
            assert r.simulated_seconds >= sum(se.CostModel().full_evaluation(space.macs_m[i]) for i in r.evaluated)
        # The front is non-dominated among everything the strategy evaluated.
        evaluated = sorted({i for r in mine for i in r.evaluated})
        front = summary[s.name]["pareto_front"]
        assert front and set(front) <= set(evaluated)
        for f in front:
            assert not any(space.accuracy[i] >= space.accuracy[f] and space.throughput[i] >= space.throughput[f]
                           and (space.accuracy[i], space.throughput[i]) != (space.accuracy[f], space.throughput[f])
                           for i in evaluated)
    # Same seed, same samples: the filter only removes trainings, so it costs less time.
    plain = next(r for r in runs if r.strategy == "acc" and r.seed == 0)
    filtered = next(r for r in runs if r.strategy == "acc/threshold" and r.seed == 0)
    assert filtered.full_evaluations < plain.full_evaluations
    # A time budget stops the search.
    budget = se.run_search(space, strategies[0], 0, iterations=1000, time_budget=5000.0)
    assert budget.iterations < 1000 and budget.simulated_seconds < 5000.0 + se.CostModel().full_evaluation(250)


def test_search_command(full_db, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "search"
    assert main(["nas", "search", "--db", str(full_db), "--seeds", "2", "--iterations", "15",
                 "--strategies", "acc,acc+throughput/quantile", "--reward-metric", "throughput",
                 "--quantile-warmup", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "acc+throughput/quantile" in printed
    for name in ("runs.csv", "summary.csv", "summary.json", "pareto.csv", "pareto.png", "search_cost.png"):
        assert (out / name).exists(), name
    for bad in ("nope", "", "acc,"):  # '' ran all six
        status, err = status_and_err(["nas", "search", "--db", str(full_db), "--strategies", bad, "--out", str(out)],
                                     capsys)
        assert status == 2 and f"--strategies {bad!r}: unknown" in err, err


def test_search_needs_one_config(tmp_path):
    db = write_db(tmp_path / "two.sqlite", _synthetic_rows(range(5)) + _synthetic_rows(range(5), batch=1))
    with pytest.raises(ValueError, match="several configs"):
        se.SearchSpace.from_db(db)
    assert se.SearchSpace.from_db(db, batch=1).available.sum() == 5


# --- reward ------------------------------------------------------------------------------------


def test_reward():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).eval()
    x = torch.randn(8, 64)
    r = reward(model, x, accuracy=0.9)
    assert r.dim() == 0 and r.dtype == torch.float64 and torch.isfinite(r) and r.item() > 0.9

    def summary(util: float, ips: float = 100.0) -> torch.Tensor:
        s = torch.zeros(len(FIELDS), dtype=torch.float64)
        s[FIELDS.index("utilization")] = util
        s[FIELDS.index("inputs_per_second")] = ips
        return s

    low, high = (reward(None, None, summary=summary(u), accuracy=0.5, weight=2.0) for u in (0.1, 0.2))
    assert high > low and (high - low).item() == pytest.approx(0.2)
    with_thr = reward(None, None, summary=summary(0.1, 300.0), weight=1.0, throughput_weight=0.5, throughput_scale=100.0)
    assert with_thr.item() == pytest.approx(0.1 + 1.5)
    with pytest.raises(ValueError, match="summary"):
        reward(None, None, summary=torch.zeros(3))


def test_a_db_from_before_new_metric_columns_gets_them(tmp_path):
    # The schema of earlier sweeps: no bandwidth, interval or cuda_graph columns.
    import sqlite3

    db = tmp_path / "old.sqlite"
    old_metrics = [c for c in ev.METRIC_COLUMNS if c not in ("bandwidth_utilization", "peak_bytes_per_second",
                                                              "seconds_relative_ci", "cuda_graph")]
    con = sqlite3.connect(db)
    con.execute(f"CREATE TABLE results (dataset TEXT, batch INTEGER, idx INTEGER, "
                f"dtype TEXT, device TEXT, mode TEXT, arch TEXT, device_name TEXT, "
                f"{', '.join(f'{c} REAL' for c in old_metrics)}, PRIMARY KEY (idx, dataset, batch, dtype, device, mode))")
    con.commit()
    con.close()
    stats = ev.sweep(ev.EvalConfig(**FAST), [0, 1], db, progress=False)
    assert stats.evaluated == 2
    rows = ev.read_rows(db)
    assert [r["idx"] for r in rows] == [0, 1] and all(r["bandwidth_utilization"] > 0 for r in rows)
