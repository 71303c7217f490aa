"""benchmarks/sweep/sweep_db_to_csv.py, sweep_csv_to_db.py, sweep_agreement.py and sweep_scaling.py: a
sweep db survives the round trip through the committed CSV form, and the agreement and scaling
figures are those of closed-form cases (a sweep against itself, against a copy scaled by a known
factor, against a reversed ranking; half the wall time on two GPUs)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from results_db import write_db

from torchutil.nas import natsbench as nb
from torchutil.studies import nas_evaluate as ev

ROOT = Path(__file__).resolve().parents[1]


def _rows(n, scale=1.0, reverse=False, mode="auto"):
    rows = []
    for i in range(n):
        u = 1e-3 * (1 + (n - i if reverse else i))
        row = {"idx": i, "dataset": "cifar10", "batch": 256, "dtype": "float16", "device": "cuda",
               "mode": mode, "arch": str(nb.arch_of_index(i)), "device_name": "synthetic"}
        row.update({c: math.nan for c in ev.METRIC_COLUMNS})
        row.update(utilization=scale * u, bandwidth_utilization=scale * 10 * u, inputs_per_second=scale * 1e5 * u,
                   seconds=1.0 / (scale * u), cuda_graph=1.0, params=1e5, build_seconds=1e-3, eval_seconds=0.03)
        rows.append(row)
    return rows


def _run(*args):
    out = subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_db_csv_round_trip_keeps_every_value(tmp_path):
    rows = _rows(50)
    db = str(write_db(tmp_path / "a.sqlite", rows))
    _run("benchmarks/sweep/sweep_db_to_csv.py", db, tmp_path / "a.csv.gz")
    first = (tmp_path / "a.csv.gz").read_bytes()
    _run("benchmarks/sweep/sweep_db_to_csv.py", db, tmp_path / "a.csv.gz")
    assert (tmp_path / "a.csv.gz").read_bytes() == first  # same db, same bytes
    _run("benchmarks/sweep/sweep_csv_to_db.py", tmp_path / "a.csv.gz", tmp_path / "b.sqlite")
    back = {r["idx"]: r for r in ev.read_rows(str(tmp_path / "b.sqlite"))}
    for r in rows:
        for c in ("utilization", "bandwidth_utilization", "seconds", "cuda_graph", "arch", "mode"):
            assert back[r["idx"]][c] == r[c], c
        assert back[r["idx"]]["kernel_seconds"] is None or math.isnan(back[r["idx"]]["kernel_seconds"])


def test_agreement_of_closed_form_cases(tmp_path):
    a = str(write_db(tmp_path / "a.sqlite", _rows(40)))
    scaled = str(write_db(tmp_path / "s.sqlite", _rows(40, scale=1.1)))
    reversed_ = str(write_db(tmp_path / "r.sqlite", _rows(40, reverse=True)))
    _run("benchmarks/sweep/sweep_agreement.py", a, a, "--json", tmp_path / "self.json")
    _run("benchmarks/sweep/sweep_agreement.py", a, scaled, "--json", tmp_path / "scaled.json")
    _run("benchmarks/sweep/sweep_agreement.py", a, reversed_, "--json", tmp_path / "rev.json")
    same = json.loads((tmp_path / "self.json").read_text())
    assert same["cells"] == 40 and same["utilization"]["spearman"] == pytest.approx(1.0)
    assert same["utilization"]["median_level_difference"] == 0.0
    scaled_r = json.loads((tmp_path / "scaled.json").read_text())
    assert scaled_r["utilization"]["spearman"] == pytest.approx(1.0)
    assert scaled_r["utilization"]["median_level_difference"] == pytest.approx(0.1)
    assert scaled_r["seconds"]["median_level_difference"] == pytest.approx(1 / 1.1 - 1)
    assert scaled_r["graph_timed_a"] == 40
    rev = json.loads((tmp_path / "rev.json").read_text())
    assert rev["utilization"]["spearman"] == pytest.approx(-1.0)
    assert rev["utilization"]["kendall"] == pytest.approx(-1.0)


def test_agreement_of_two_timing_modes_needs_by_index(tmp_path):
    a = str(write_db(tmp_path / "a.sqlite", _rows(10, mode="auto")))
    e = str(write_db(tmp_path / "e.sqlite", _rows(10, mode="eager")))
    out = subprocess.run([sys.executable, "benchmarks/sweep/sweep_agreement.py", a, e], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode != 0 and "no cell is in both sweeps" in out.stderr
    assert "Warning" not in out.stderr, out.stderr  # numpy's "Mean of empty slice" before it, once
    assert "10 cells in both" in _run("benchmarks/sweep/sweep_agreement.py", a, e, "--by-index")


def test_scaling_of_a_sweep_over_gpus_against_one(tmp_path):
    # Closed-form case: the same cells, half the wall time on 2 GPUs, 10 % more utilization on
    # one: scaling 2.0x (met), agreement's level +10 % (not met).
    write_db(tmp_path / "sweep1.sqlite", _rows(40))
    write_db(tmp_path / "sweep2.sqlite", _rows(40, scale=1.1))
    (tmp_path / "sweep1.seconds").write_text("100.0\n")
    (tmp_path / "sweep2.seconds").write_text("50.0\n")
    _run("benchmarks/sweep/sweep_agreement.py", tmp_path / "sweep1.sqlite", tmp_path / "sweep2.sqlite",
         "--json", tmp_path / "agreement.json")
    out = _run("benchmarks/sweep/sweep_scaling.py", tmp_path, 2, tmp_path / "agreement.json", "--json", tmp_path / "s.json")
    r = json.loads((tmp_path / "s.json").read_text())
    assert r["scaling"] == 2.0 and r["scaling_met"] and r["cells_1"] == r["cells_n"] == [40, 40]
    assert r["median_level_difference"] == pytest.approx(0.1) and not r["agreement_met"]
    assert "scaling 2.00x (100 % of linear; target >= 1.90x): met" in out
    assert "median level +10.00 %" in out and "NOT met" in out
