"""The multi-host rehearsal of benchmarks/sweep/torchrun_rehearsal.py: two torchrun agents (--nnodes 2,
c10d rendezvous on 127.0.0.1, one CPU worker each, each with its own --db folder, so no shared
filesystem) sweep 40 cells; rank 1's worker is SIGKILLed once it has committed a cell; the sweep
restarts by rerunning both agents, or by torchrun itself (--max-restarts 1). Every process is
stopped by its pid on every path (the harness's Processes), and none may be left.

Oracles: the cells 0..39 themselves (each exactly once in rank 0's db), the rows the killed rank
had committed (read from its shard after the kill: the same values at the end, so not measured
again), and sweep()'s own count of what each rank evaluated and skipped after the restart.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
CELLS = 40  # 20 a rank, ~50 ms each (the harness's SWEEP): the kill after rank 1's first commit lands mid-run
SHARE = CELLS // 2  # rank r's cells: i % 2 == r

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the harness finds processes under /proc"),
    pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not available"),
]


def _harness():
    spec = importlib.util.spec_from_file_location("torchrun_rehearsal", ROOT / "benchmarks" / "sweep" / "torchrun_rehearsal.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scenario", ["rerun", "elastic"])
def test_a_killed_rank_costs_only_its_cell_in_flight(tmp_path, scenario):
    record = _harness().rehearse(tmp_path, scenario, cells=CELLS, kill_rank=1, timeout=150)
    runs, check = record["runs"], record["check"]
    assert record["left_alive"] == []
    killed = runs[0]["killed"]
    committed = check["killed_rank_had_committed"]
    assert killed["rank"] == 1 and 1 <= len(committed) < SHARE, "the kill must land mid-run"
    assert all(i % 2 == 1 for i in committed)
    if scenario == "rerun":
        # Both agents fail (one's worker was killed, the other loses it at the exchange); the
        # rerun of the same commands finishes.
        assert [rc != 0 for rc in runs[0]["exit_codes"]] == [True, True]
        assert len(runs) == 2 and check["workers_per_rank_in_first_run"] == {0: 1, 1: 1}
        assert check["restart_of_finishing_workers"] == {0: 0, 1: 0}
    else:
        # One run of the agents, in which torchrun restarted the workers of both ranks; rank 1's
        # finishing worker says it is its agent's restart 1 (TORCHELASTIC_RESTART_COUNT; rank 0's
        # agent restarts on the membership change, which torchelastic does not count).
        assert len(runs) == 1 and check["workers_per_rank_in_first_run"] == {0: 2, 1: 2}
        assert check["restart_of_finishing_workers"][1] == 1
    assert runs[-1]["exit_codes"] == [0, 0]
    assert len(record["merged_into"]) == 1 and check["every_cell_once"]
    assert check["committed_rows_kept_unmeasured"]
    # After the restart rank 1 skips exactly what it had committed and evaluates the rest: the
    # kill cost the cell it had in flight, nothing committed.
    assert check["restart_skipped"][1] == len(committed)
    assert check["restart_evaluated"][1] == SHARE - len(committed)
    assert sum(check["restart_evaluated"].values()) + sum(check["restart_skipped"].values()) == CELLS
    assert check["leftovers"] == {"host0": [], "host1": []}


def test_runs_from_any_folder(tmp_path):
    """`python benchmarks/sweep/torchrun_rehearsal.py --out DIR` from a folder other than the
    repository's, with DIR relative to that folder: the agents (which run in the repository root)
    and the harness use the same db folders, and the record lands in DIR. Oracle: the cells
    0..CELLS-1, each once in rank 0's db (the record's check)."""
    script = ROOT / "benchmarks" / "sweep" / "torchrun_rehearsal.py"
    p = subprocess.run([sys.executable, str(script), "--scenarios", "rerun", "--cells", str(CELLS),
                        "--timeout", "150", "--out", "rehearsal"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    (record,) = json.loads((tmp_path / "rehearsal" / "rehearsal.json").read_text())
    assert record["check"]["every_cell_once"] and record["left_alive"] == []
    assert all(Path(db).is_relative_to(tmp_path / "rehearsal") for db in record["merged_into"])
