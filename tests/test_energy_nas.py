"""Energy in the NAS studies on the CPU: the energy columns of a results db (an old db migrated,
an old shard merged), `nas evaluate --energy` refusing with the call's reason where nothing is
measured, `nas correlate`'s rank agreement of utilization, throughput and images per joule, and
`nas search` with images per joule as reward and as the second objective of a Pareto front.

Oracles: scipy.stats.spearmanr where installed (else numpy's Pearson of the ranks), a
disagreement planted by hand, the definition of Pareto dominance checked pair by pair."""
from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest
from results_db import synthetic_rows, write_db

from torchutil.nas import natsbench as nb
from torchutil.studies import nas_correlate as co
from torchutil.studies import nas_db
from torchutil.studies import nas_evaluate as ev
from torchutil.studies import nas_search as se
from torchutil.studies.cli import main

ENERGY_COLUMNS = ("joules", "joules_ci_low", "joules_ci_high", "watts", "flops_per_joule", "inputs_per_joule")


def _energy_rows(indices, seed=0):
    """Synthetic rows with energy: images per joule follows throughput (so it falls as
    utilization rises), except cell 0, planted at the top of both utilization and images per
    joule, against the trend."""
    rows = synthetic_rows(indices, seed=seed)
    rng = np.random.default_rng(seed + 1)
    for r in rows:
        r["inputs_per_joule"] = r["inputs_per_second"] / 300.0 * (0.95 + 0.1 * rng.random())
        r["joules"] = 256 / r["inputs_per_joule"]
    planted = rows[0]
    planted["utilization"] = max(r["utilization"] for r in rows) * 1.01
    planted["inputs_per_joule"] = max(r["inputs_per_joule"] for r in rows) * 1.01
    return rows


def test_the_energy_columns_migrate_an_old_db_and_an_old_shard_merges(tmp_path):
    old = tmp_path / "old.sqlite"
    con = sqlite3.connect(old)
    kept = [c for c in nas_db._COLUMNS if c not in ENERGY_COLUMNS]
    con.execute(f"CREATE TABLE results ({', '.join(kept)}, PRIMARY KEY ({', '.join(ev.KEY_COLUMNS)}))")
    row = synthetic_rows([3])[0]
    con.execute(f"INSERT INTO results VALUES ({', '.join('?' * len(kept))})",
                [None if isinstance(row[c], float) and math.isnan(row[c]) else row[c] for c in kept])
    con.commit()
    con.close()
    # Merged into a new db: the columns it lacks are NULL.
    new = tmp_path / "new.sqlite"
    assert ev.merge(new, [old]) == 1
    merged = ev.read_rows(new)
    assert merged[0]["idx"] == 3 and all(math.isnan(merged[0][c]) for c in ENERGY_COLUMNS)
    # Opened for a sweep, the old db gets the columns.
    ev.connect(old).close()
    have = {r[1] for r in sqlite3.connect(old).execute("PRAGMA table_info(results)")}
    assert set(ENERGY_COLUMNS) <= have


def test_evaluate_with_energy_refuses_with_the_calls_reason_where_nothing_is_measured(tmp_path):
    import glob
    import os

    if any(os.access(f, os.R_OK) for f in glob.glob("/sys/class/powercap/intel-rapl:[0-9]*/energy_uj")):
        pytest.skip("this machine reads RAPL: the refusal is not what happens here")
    config = ev.EvalConfig(dataset="ImageNet16-120", batch=1, device="cpu", warmup=0, iters=1, energy=True,
                           energy_window=0.25)
    with pytest.raises(ValueError, match=r"nas evaluate --energy: cell 5 measured no energy: off: no RAPL domain"):
        ev.sweep(config, [5], tmp_path / "e.sqlite", progress=False, threads=1)
    assert ev.read_rows(tmp_path / "e.sqlite") == []


def test_evaluate_with_energy_remeasures_cells_without_joules(tmp_path):
    db = write_db(tmp_path / "r.sqlite", synthetic_rows([0, 1], dataset="ImageNet16-120", batch=1,
                                                           dtype="float32", device="cpu", mode="auto"))
    con = ev.connect(db)
    plain = ev.EvalConfig(dataset="ImageNet16-120", batch=1, device="cpu")
    assert ev.finished_indices(con, plain) == {0, 1}
    assert ev.finished_indices(con, ev.EvalConfig(**{**plain.__dict__, "energy": True})) == set()
    con.close()


def _spearman_oracle(x, y):
    try:
        from scipy.stats import spearmanr
    except ImportError:
        from torchutil.nas.stats import rankdata
        return float(np.corrcoef(rankdata(x), rankdata(y))[0, 1])
    return float(spearmanr(x, y).statistic)


def test_correlate_ranks_utilization_throughput_and_images_per_joule(tmp_path, capsys):
    rows = _energy_rows(range(0, nb.num_archs(), 25))
    db = write_db(tmp_path / "e.sqlite", rows)
    results, joined = co.correlate(db)
    assert {"images_per_joule"} <= {r["metric"] for r in results}
    agreement = co.rank_agreement(joined)
    pairs = {(r["a"], r["b"]): r for r in agreement}
    assert set(pairs) == {("utilization", "throughput"), ("utilization", "images_per_joule"),
                          ("throughput", "images_per_joule")}
    util = np.array([r["utilization"] for r in rows])
    ipj = np.array([r["inputs_per_joule"] for r in rows])
    assert pairs["utilization", "images_per_joule"]["spearman"] == pytest.approx(_spearman_oracle(util, ipj))
    # The planted cell breaks the falling trend: top of utilization and of images per joule.
    assert pairs["utilization", "images_per_joule"]["spearman"] < -0.5
    worst = pairs["utilization", "images_per_joule"]["disagree"][0]
    assert worst["index"] == 0 and worst["rank_gap"] > 0.9
    assert main(["nas", "correlate", "--db", str(db), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "utilization vs images_per_joule: Spearman" in out and "ranks differ most at cells 0 (+" in out
    assert (tmp_path / "out" / "agreement.json").exists()


def test_search_rewards_images_per_joule_and_keeps_its_pareto_front(tmp_path):
    db = write_db(tmp_path / "e.sqlite", _energy_rows(range(nb.num_archs())))
    space = se.SearchSpace.from_db(db)
    assert space.has_energy()
    runs = se.run_strategies(space, [se.Strategy("images_per_joule", "none", 0.1)], [0, 1], iterations=40)
    summary = se.summarize(runs, space)[0]
    assert summary["strategy"] == "acc+images_per_joule"
    evaluated = sorted({i for r in runs for i in r.evaluated})
    front = set(summary["energy_front"])
    acc, ipj = space.accuracy, space.images_per_joule
    for i in evaluated:  # Pareto dominance, pair by pair: on the front iff nothing dominates it
        dominated = any(acc[j] >= acc[i] and ipj[j] >= ipj[i] and (acc[j] > acc[i] or ipj[j] > ipj[i])
                        for j in evaluated)
        assert (i in front) == (not dominated) or any(acc[j] == acc[i] and ipj[j] == ipj[i]
                                                      for j in front if j != i)
    assert main(["nas", "search", "--db", str(db), "--reward-metric", "images_per_joule", "--seeds", "1",
                 "--iterations", "20", "--strategies", "acc+images_per_joule", "--out", str(tmp_path / "s"),
                 "--no-plots"]) == 0
    text = (tmp_path / "s" / "pareto.csv").read_text()
    assert "acc+images_per_joule,images_per_joule," in text


def test_search_on_a_db_without_energy_refuses_the_energy_reward(tmp_path):
    db = write_db(tmp_path / "plain.sqlite", synthetic_rows(range(nb.num_archs())))
    space = se.SearchSpace.from_db(db)
    assert not space.has_energy()
    with pytest.raises(ValueError, match="no images_per_joule for every cell; measure them with nas evaluate --energy"):
        se.run_search(space, se.Strategy("images_per_joule"), 0, iterations=2)
    assert se.summarize(se.run_strategies(space, [se.Strategy()], [0], iterations=5), space)[0]["energy_front"] == []
