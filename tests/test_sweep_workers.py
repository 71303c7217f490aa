"""nas evaluate's worker threads (several per GPU, taking turns through one lock file), run on the
meta device, where only the count runs: every cell exactly once, resumable, and a thread's failure
named; the worker processes it had are gone, and say why. The lock's exclusion itself is tested in
C++ (tests/cpp/FileLockTest.cpp); threads on CUDA in the last test (marked cuda)."""
from __future__ import annotations

import sqlite3

import pytest

from torchutil.studies import nas_evaluate as ev

META = ev.EvalConfig(device="meta", batch=2, dtype="float32", warmup=0, iters=1)


def rows(db):
    with sqlite3.connect(db) as con:
        return [r[0] for r in con.execute("SELECT idx FROM results ORDER BY idx")]


def test_every_cell_is_evaluated_exactly_once(tmp_path):
    db = tmp_path / "r.sqlite"
    stats = ev.sweep(META, range(10), db, progress=False, threads=3)
    assert stats.threads == 3
    assert stats.evaluated == 10 and stats.skipped == 0
    assert rows(db) == list(range(10))
    assert set(stats.stages) == set(ev.STAGES) and stats.stages["count"] > 0
    assert stats.stages["write"] > 0
    assert "per thread" in stats.stage_line()


@pytest.mark.parametrize("left", ["db", "worker db"])
def test_a_run_resumes_from_the_dbs_a_killed_one_left(tmp_path, left):
    db = tmp_path / "r.sqlite"
    # What a killed run leaves: the cells it committed, in db (threads) or, from a version that
    # ran worker processes, in a worker's own db, which the next run merges.
    ev.sweep(META, [1, 4, 7], ev.worker_path(db, 1) if left == "worker db" else db, progress=False)
    stats = ev.sweep(META, range(8), db, progress=False, threads=3)
    assert stats.skipped == 3 and stats.evaluated == 5
    assert rows(db) == list(range(8))
    assert not list(tmp_path.glob("r.worker*"))  # merged and removed


def test_workers_are_gone_and_the_cli_says_why(tmp_path, capsys):
    from torchutil.studies.cli import main

    with pytest.raises(SystemExit) as exit:
        main(["nas", "evaluate", "--device", "cpu", "--workers", "8", "--db", str(tmp_path / "r.sqlite")])
    assert exit.value.code == 2  # a usage error
    err = capsys.readouterr().err
    assert "--workers is gone: 8 processes on one GPU are as many CUDA contexts" in err and "--threads" in err
    assert not (tmp_path / "r.sqlite").exists()


def test_a_failing_thread_is_named_the_others_stop_and_its_rows_before_are_kept(tmp_path, monkeypatch):
    from torchutil.studies import nas_parallel

    real = nas_parallel.evaluate_arch

    def failing(index, *args, **kwargs):
        if index == 5:
            raise RuntimeError(f"cell {index} broke")
        return real(index, *args, **kwargs)

    monkeypatch.setattr(nas_parallel, "evaluate_arch", failing)
    db = tmp_path / "r.sqlite"
    with pytest.raises(Exception, match=r"a sweep thread failed.*thread \d: RuntimeError \(at test_sweep_workers.py:\d+\): cell 5 broke"):
        ev.sweep(META, range(40), db, threads=2, progress=False)
    done = rows(db)
    assert 5 not in done and len(done) < 40  # stopped, not run to the end
    monkeypatch.setattr(nas_parallel, "evaluate_arch", real)
    stats = ev.sweep(META, range(40), db, threads=2, progress=False)  # the rerun resumes
    assert stats.skipped == len(done) and rows(db) == list(range(40))


def test_threads_on_the_cpu_are_refused(tmp_path):
    with pytest.raises(Exception, match=r"threads > 1 needs a CUDA device.*got cpu"):
        ev.sweep(ev.EvalConfig(device="cpu", batch=2), range(2), tmp_path / "r.sqlite", progress=False, threads=3)


@pytest.mark.parametrize("option", ["rebuild", "trace"])
def test_threads_with_rebuild_or_trace_are_refused(tmp_path, option):
    config, kwargs = META, {}
    if option == "trace":
        config = ev.EvalConfig(device="meta", batch=2, dtype="float32", warmup=0, iters=1, trace=True)
    else:
        kwargs["rebuild"] = True
    with pytest.raises(Exception, match=rf"threads > 1 does not combine with {option}.*threads=2"):
        ev.sweep(config, range(2), tmp_path / "r.sqlite", threads=2, progress=False, **kwargs)


def test_the_gate_lets_one_caller_alone_only_once_no_cell_is_inside():
    import threading
    import time

    from torchutil.studies.nas_parallel import _Gate

    gate, log = _Gate(), []
    inside = threading.Event()
    release = threading.Event()

    def cell():
        with gate.cell():
            log.append("cell in")
            inside.set()
            release.wait(5)
            log.append("cell out")

    t = threading.Thread(target=cell)
    t.start()
    inside.wait(5)
    threading.Timer(0.2, release.set).start()
    t0 = time.perf_counter()
    with gate.alone():
        log.append("alone")
    assert time.perf_counter() - t0 >= 0.15  # it waited for the cell to leave
    t.join(5)
    assert log == ["cell in", "cell out", "alone"]


@pytest.mark.parametrize("cores, ranks, expected", [
    (16, 1, 4), (16, 2, 4), (16, 4, 2), (32, 2, 4), (128, 8, 4), (6, 1, 3), (4, 8, 1), (None, 1, 1)])
def test_default_threads_share_half_the_cores_among_the_hosts_gpus(monkeypatch, cores, ranks, expected):
    monkeypatch.setattr(ev.os, "cpu_count", lambda: cores)
    assert ev.default_threads("cuda", ranks) == expected
    assert ev.default_threads("cpu", ranks) == 1


@pytest.mark.cuda
def test_threads_on_cuda_time_cells_as_one_thread_does(tmp_path):
    # The point of threads over worker processes: one CUDA context, so a cell's timed replays
    # measure as in a one-thread sweep (worker processes measure ~5 % faster beside each other).
    # Oracle: the same cells swept by one thread in this process, just before.
    import statistics

    config = ev.EvalConfig(device="cuda", dtype="float16", channels_last=True)
    cells = range(96)
    ev.sweep(config, cells, tmp_path / "one.sqlite", progress=False)
    stats = ev.sweep(config, cells, tmp_path / "three.sqlite", threads=3, progress=False)
    assert stats.threads == 3 and stats.evaluated == len(cells) and stats.stages["wait"] > 0

    def read(db):
        with sqlite3.connect(db) as con:
            return {i: (s, f, g) for i, s, f, g in con.execute("SELECT idx, seconds, flops, cuda_graph FROM results")}

    one, three = read(tmp_path / "one.sqlite"), read(tmp_path / "three.sqlite")
    assert sorted(three) == list(cells)
    assert all(three[i][2] == 1 for i in cells)  # every cell graph-timed
    assert all(three[i][1] == one[i][1] for i in cells)  # the same count
    level = statistics.median(three[i][0] / one[i][0] - 1 for i in cells)
    assert abs(level) < 0.02, f"three threads time cells {100 * level:+.2f} % against one thread"
