"""nas evaluate over the ranks of a gloo group (torchutil/studies/nas_distributed.py), two
processes on the loopback (torch.multiprocessing.spawn): rank 0's db gets every cell exactly
once, with or without a folder the ranks share; what a killed run left (shards of any rank
number, worker dbs, a db on a rank other than 0) is recovered, not measured again; a rank's
failure is an error on every rank, naming it. torchrun's agents, and a kill, are in
test_torchrun_rehearsal.py.

Oracle for "not measured again": the rows a killed run left carry values no measurement gives
(device_name "left by a killed run"), and they are still in the db at the end.
"""
from __future__ import annotations

import math
import socket
import sqlite3

import pytest
import torch
from results_db import write_db

from torchutil.nas import natsbench as nb
from torchutil.studies import nas_distributed
from torchutil.studies import nas_evaluate as ev

FAST = dict(dataset="ImageNet16-120", batch=1, dtype="float32", device="cpu", warmup=0, iters=1)
LEFT = "left by a killed run"

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not available")


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, port: int, dbs: list[str], indices: list[int], configs: list[dict]) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=len(dbs))
    try:
        nas_distributed.distributed_sweep(ev.EvalConfig(**configs[rank]), indices, dbs[rank], progress=False)
    finally:
        dist.destroy_process_group()


def _spawn(dbs, indices, configs=None):
    configs = configs or [FAST] * len(dbs)
    torch.multiprocessing.spawn(_rank, args=(_free_loopback_port(), [str(d) for d in dbs], list(indices), configs),
                                nprocs=len(dbs), join=True)


def _left_rows(indices):
    """Rows of FAST's config that an earlier run committed."""
    config = ev.EvalConfig(**FAST)
    rows = []
    for i in indices:
        row = dict(zip(ev.KEY_COLUMNS, config.key(i)), arch=str(nb.arch_of_index(i)), device_name=LEFT)
        row.update({c: math.nan for c in ev.METRIC_COLUMNS}, eval_seconds=1000.0 + i)
        rows.append(row)
    return rows


def _files(folder):
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


def test_every_cell_once_in_rank0s_db_and_no_shard_left(tmp_path):
    db = tmp_path / "results.sqlite"
    _spawn([db, db], range(4))
    rows = ev.read_rows(db)
    assert [r["idx"] for r in rows] == [0, 1, 2, 3]
    assert all(r["utilization"] > 0 for r in rows)
    assert _files(tmp_path) == ["results.sqlite"]  # shards merged and removed, probes removed


@pytest.mark.slow
def test_without_a_shared_folder_what_a_killed_run_left_is_recovered(tmp_path):
    host0, host1 = tmp_path / "host0", tmp_path / "host1"
    host0.mkdir()
    host1.mkdir()
    a, b = host0 / "r.sqlite", host1 / "r.sqlite"
    # What an earlier run left: on host 0 its rank 0 shard; on host 1 a shard numbered 0 (the
    # ranks were numbered the other way then), a worker db of its rank 1 and the merged db of a
    # run where host 1 held rank 0 (with a row of another config, which stays there).
    write_db(ev.shard_path(a, 0), _left_rows([0]))
    write_db(ev.shard_path(b, 0), _left_rows([2]))
    write_db(ev.worker_path(ev.shard_path(b, 1), 0), _left_rows([3]))
    other = {**_left_rows([1])[0], "batch": 7}
    write_db(b, _left_rows([5]) + [other])
    _spawn([a, b], range(7))
    rows = ev.read_rows(a)
    assert [r["idx"] for r in rows] == list(range(7))
    left = [r["idx"] for r in rows if r["device_name"] == LEFT]
    assert left == [0, 2, 3, 5]  # recovered, not measured again
    assert all(r["eval_seconds"] == 1000 + r["idx"] for r in rows if r["idx"] in left)
    assert _files(host0) == ["r.sqlite"] and _files(host1) == ["r.sqlite"]
    assert [(r["idx"], r["batch"]) for r in ev.read_rows(b)] == [(1, 7), (5, 1)]  # host 1's db untouched


@pytest.mark.slow
def test_a_failing_rank_is_named_on_every_rank_and_the_others_rows_are_kept(tmp_path):
    db = tmp_path / "results.sqlite"
    # Rank 1's timing cannot run on the CPU: its sweep fails at its first cell.
    bad = {**FAST, "timing": "cuda_graph"}
    with pytest.raises(Exception, match=r"rank 1 failed: ValueError: .*cuda_graph"):
        _spawn([db, db], range(4), configs=[FAST, bad])
    assert [r["idx"] for r in ev.read_rows(db)] == [0, 2]
    assert _files(tmp_path) == ["results.sqlite"]


@pytest.mark.slow
def test_a_foreign_file_named_like_a_shard_is_named_and_nothing_is_touched(tmp_path):
    db = tmp_path / "results.sqlite"
    foreign = ev.shard_path(db, 3)
    with sqlite3.connect(foreign) as con:
        con.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(Exception, match=r"rank 0 failed: .*results.rank3.sqlite is a SQLite db of something else"):
        _spawn([db, db], range(4))
    assert _files(tmp_path) == ["results.rank3.sqlite"]  # no db made, no probe left, the file kept
    with sqlite3.connect(foreign) as con:
        assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["notes"]


@pytest.mark.parametrize("env, warned", [
    ({"TORCHELASTIC_MAX_RESTARTS": "1", "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_USE_AGENT_STORE": "True"}, True),
    ({"TORCHELASTIC_MAX_RESTARTS": "1", "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_USE_AGENT_STORE": "False"}, False),
    ({"TORCHELASTIC_MAX_RESTARTS": "1", "GROUP_WORLD_SIZE": "1", "TORCHELASTIC_USE_AGENT_STORE": "True"}, False),
    ({"TORCHELASTIC_MAX_RESTARTS": "0", "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_USE_AGENT_STORE": "True"}, False),
])
def test_torchrun_restarts_across_hosts_with_the_shared_store_are_warned_of(monkeypatch, capsys, env, warned):
    # What torchrun's agent sets for its workers (elastic/agent/server/local_elastic_agent.py).
    for k, v in {**env, "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(k, v)
    nas_distributed._warn_of_elastic_restarts_across_hosts()
    assert ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in capsys.readouterr().err) is warned
