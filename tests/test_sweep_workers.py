"""nas evaluate's worker processes (several per GPU, taking turns through one lock file), run on
the meta device, where only the count runs: every cell exactly once, resumable, and a worker's
failure named. The lock's exclusion itself is tested in C++ (tests/cpp/FileLockTest.cpp)."""
from __future__ import annotations

import sqlite3

import pytest

from torchutil.studies import nas_evaluate as ev

META = ev.EvalConfig(device="meta", batch=2, dtype="float32", warmup=0, iters=1)


def rows(db):
    with sqlite3.connect(db) as con:
        return [r[0] for r in con.execute("SELECT idx FROM results ORDER BY idx")]


def test_workers_evaluate_every_cell_exactly_once(tmp_path):
    db = tmp_path / "r.sqlite"
    stats = ev.sweep(META, range(10), db, workers=2, progress=False)
    assert stats.workers == 2 and stats.evaluated == 10 and stats.skipped == 0
    assert rows(db) == list(range(10))
    assert not list(tmp_path.glob("r.worker*"))  # merged and removed
    assert set(stats.stages) == set(ev.STAGES) and stats.stages["count"] > 0


def test_a_run_resumes_from_the_dbs_a_killed_one_left(tmp_path):
    db = tmp_path / "r.sqlite"
    # What a killed worker leaves: its own db with the cells it committed.
    ev.sweep(META, [1, 4, 7], ev.worker_path(db, 1), progress=False)
    stats = ev.sweep(META, range(8), db, workers=2, progress=False)
    assert stats.skipped == 3 and stats.evaluated == 5
    assert rows(db) == list(range(8))


def test_a_failing_worker_is_named_and_the_sweep_stops(tmp_path):
    bad = ev.EvalConfig(device="meta", batch=2, dtype="float32", timing="cuda_graph")
    with pytest.raises(Exception, match=r"a sweep worker failed.*worker \d: ValueError: .*cuda_graph.*needs CUDA"):
        ev.sweep(bad, range(4), tmp_path / "r.sqlite", workers=2, progress=False)
    assert not list(tmp_path.glob("r.worker*"))


def test_workers_on_the_cpu_are_refused(tmp_path):
    with pytest.raises(Exception, match=r"workers > 1 needs a CUDA device.*got cpu"):
        ev.sweep(ev.EvalConfig(device="cpu", batch=2), range(2), tmp_path / "r.sqlite", workers=2, progress=False)


@pytest.mark.parametrize("cores, ranks, expected", [
    (16, 1, 8), (16, 2, 4), (32, 2, 8), (128, 8, 8), (64, 1, 8), (4, 8, 1), (None, 1, 1)])
def test_default_workers_share_half_the_cores_among_the_hosts_gpus(monkeypatch, cores, ranks, expected):
    monkeypatch.setattr(ev.os, "cpu_count", lambda: cores)
    assert ev.default_workers("cuda", ranks) == expected
    assert ev.default_workers("cpu", ranks) == 1
