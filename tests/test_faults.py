"""Bad input and faults in the study commands (issue #21), each reproduced: the command ends with
one line naming the problem and a non-zero status, never a traceback, and leaves no partial file.

A full disk is simulated portably by full_disk.fill: open() in one module gives files that take
a few more bytes, then fail with ENOSPC, as os.write does on a full disk. A read-only file
system is real where this process may mount a tmpfs (root on Linux), else that test is skipped;
the portable test beside it checks that readers open read-only and change nothing.
"""
from __future__ import annotations

import csv
import gzip
import json
import math
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_status import status_and_err
from full_disk import fill
from results_db import synthetic_rows, write_db

from torchutil.nas import natsbench as nb
from torchutil import _files
from torchutil.studies import nas_db, survey
from torchutil.studies import coded as cs
from torchutil.studies import nas_evaluate as ev

ROOT = Path(__file__).resolve().parents[1]
NO_SPACE = os.strerror(28)  # ENOSPC: "No space left on device"


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def full_db(tmp_path_factory):
    return write_db(tmp_path_factory.mktemp("db") / "full.sqlite", synthetic_rows(range(nb.num_archs())))


# --- a full disk ---------------------------------------------------------------------------------


def test_coded_train_on_a_full_disk_keeps_the_last_checkpoint(tmp_path, monkeypatch, capsys):
    pytest.importorskip("sklearn", reason="the digits data set ships with scikit-learn (the coded extra)")
    out = tmp_path / "run"
    train = ["coded", "train", "--device", "cpu", "--no-progress", "--base-epochs", "1", "--out", str(out)]
    assert status_and_err([*train, "--epochs", "1"], capsys)[0] == 0
    before = (out / cs.CHECKPOINT).read_bytes()
    fill(monkeypatch, _files, room=100)  # the next checkpoint finds 100 bytes free
    status, err = status_and_err([*train, "--epochs", "2"], capsys)
    assert err.startswith("resuming ")  # its log line, then the error
    line = _one_line(err.split("\n", 1)[1])
    assert status == 1 and NO_SPACE in line and str(out / cs.CHECKPOINT) in line, line
    assert sorted(os.listdir(out)) == [cs.CHECKPOINT, "metrics.json"]  # no checkpoint.pt.tmp
    assert (out / cs.CHECKPOINT).read_bytes() == before  # the epoch-1 checkpoint, whole


def test_survey_on_a_full_disk_leaves_whole_rows(tmp_path, monkeypatch, capsys):
    out = tmp_path / "survey"
    argv = ["survey", "--models", "squeezenet1_1", "--batches", "1", "2", "--device", "cpu", "--no-progress",
            "--out", str(out)]
    with monkeypatch.context() as full:
        disk = fill(full, survey.store, room=1 << 30)

        def measure(config, model_name, model, batch, *args):
            if batch == 2:
                disk.room = 10  # the second row finds 10 bytes free
            return {"summary": {"utilization": 0.5}, "ops": [], "bounds": {}, "ridge_intensity": 1.0}

        full.setattr(survey.run, "_measure", measure)
        status, err = status_and_err(argv, capsys)
        line = _one_line(err)
        assert status == 1 and NO_SPACE in line and str(out / survey.RESULTS) in line, line
        text = (out / survey.RESULTS).read_text()
        assert text.endswith("\n") and [json.loads(r)["batch"] for r in text.splitlines()] == [1]
        full.setattr(survey.run, "_measure", lambda *a: {"summary": {"utilization": 0.5}, "ops": [], "bounds": {},
                                                          "ridge_intensity": 1.0})
        disk.room = 1 << 30
        monkeypatch.setattr(survey, "write_outputs", lambda rows, config, plots=True: ["survey.csv"])
        assert status_and_err(argv, capsys)[0] == 0  # the resume runs the lost row, reading no cut line
    assert [r["batch"] for r in survey.load_results(str(out))] == [1, 2]


def test_profile_json_on_a_full_disk_leaves_no_file(tmp_path, monkeypatch, capsys):
    fill(monkeypatch, _files, room=0)
    profile = ["profile", "resnet18", "--device", "cpu", "--batch", "1", "--image-size", "32", "--warmup", "0",
               "--iters", "1"]
    kept = tmp_path / "kept.json"
    kept.write_text("an earlier result")
    for target in (tmp_path / "new.json", kept):
        status, err = status_and_err([*profile, "--json", str(target)], capsys)
        line = err.strip().splitlines()[-1]  # the profile's own text went to stdout
        assert status == 1 and line == f"torchutil: {NO_SPACE}: {target}", err
        assert "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["kept.json"] and kept.read_text() == "an earlier result"


# --- bad input that ended in a traceback ---------------------------------------------------------


def test_coded_train_refuses_a_group_size_that_cannot_fit(tmp_path, capsys):
    status, err = status_and_err(["coded", "train", "--k", "100000", "--device", "cpu", "--out",
                                  str(tmp_path / "cm")], capsys)
    line = _one_line(err)
    assert status == 1 and "k = 100000" in line and "largest k that fits is" in line, line
    assert not (tmp_path / "cm").exists()


def test_parameter_count_before_building_is_the_built_count():
    """The refusal's count (on the meta device) against the code built for real."""
    from torchutil.coded import codes, data, models

    for paradigm, encoder in (("learned", "mlp"), ("learned", "conv"), ("parity", "sum")):
        config = cs.TrainConfig(k=3, paradigm=paradigm, encoder=encoder).resolved()
        base = models.build_base_model(config.base, data.SHAPES["digits"], data.CLASSES)
        code = codes.build_code(paradigm, 3, base, data.SHAPES["digits"], data.CLASSES, encoder)
        built = sum(p.numel() for p in base.parameters()) + sum(p.numel() for p in code.trainable_parameters())
        assert cs._parameters(config, 3) == built
    assert data.load_dataset("digits").shape == data.SHAPES["digits"]


def test_correlate_refuses_a_header_only_accuracy_table(tmp_path, capsys):
    db = write_db(tmp_path / "small.sqlite", synthetic_rows(range(50)))
    table = tmp_path / "header.csv"
    with open(ROOT / "torchutil" / "nas" / "data" / "nb201_accuracy.csv") as f:
        header, first, second = f.readline(), f.readline(), f.readline()
    for text, says in ((header, "holds 0 rows"), (header + second, "line 2: index 1 where 0 was due"),
                       (header.replace("flops_m,", ""), "no column flops_m")):
        table.write_text(text)
        status, err = status_and_err(["nas", "correlate", "--db", str(db), "--csv", str(table), "--no-plots",
                                      "--out", str(tmp_path / "c")], capsys)
        line = _one_line(err)
        assert status == 1 and str(table) in line and says in line, line
    assert not (tmp_path / "c").exists()
    assert first.startswith("0,")


def _packaged_table_with(tmp_path, change) -> Path:
    """The packaged accuracy table with change(rows) applied to its rows (lists of strings)."""
    with open(ROOT / "torchutil" / "nas" / "data" / "nb201_accuracy.csv", newline="") as f:
        rows = list(csv.reader(f))
    change(rows)
    path = tmp_path / "table.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


def _swap_archs(rows):
    rows[1][1], rows[2][1] = rows[2][1], rows[1][1]


def _nan_accuracy(rows):
    rows[3][2] = "nan"


@pytest.mark.parametrize("change,command,says", [
    (_swap_archs, "correlate", f"line 2: arch {nb.arch_of_index(1)} is not the cell of index 0 "
                               f"({nb.arch_of_index(0)})"),
    (_swap_archs, "search", "line 2: arch "),
    (_nan_accuracy, "correlate", "line 4: cifar10_test_acc is 'nan'; an accuracy table holds finite numbers"),
    (_nan_accuracy, "search", "line 4: cifar10_test_acc is 'nan'"),
], ids=["correlate-swapped", "search-swapped", "correlate-nan", "search-nan"])
def test_an_accuracy_table_is_checked_against_the_index(tmp_path, capsys, change, command, says):
    """The report's cases: swapped arch strings were joined to the wrong cells (exit 0); NaN
    accuracies ended nas search in torch.multinomial's traceback."""
    table = _packaged_table_with(tmp_path, change)
    db = write_db(tmp_path / "small.sqlite", synthetic_rows(range(50)))
    extra = ["--seeds", "1", "--iterations", "5"] if command == "search" else []
    status, err = status_and_err(["nas", command, "--db", str(db), "--csv", str(table), "--no-plots", *extra,
                                  "--out", str(tmp_path / "o")], capsys)
    line = _one_line(err)
    assert status == 1 and f"{table} {says}" in line, line
    assert not (tmp_path / "o").exists()


def test_correlate_checks_the_db_rows_and_their_values(tmp_path, capsys):
    """A db row whose arch is not its cell's, an index outside the space, and a db whose metrics
    are all NULL (an IndexError in the report) each end in one line naming the db."""
    rows = synthetic_rows(range(5))
    rows[2]["arch"] = rows[3]["arch"]
    wrong = write_db(tmp_path / "wrong.sqlite", rows)
    outside = write_db(tmp_path / "outside.sqlite", [{**synthetic_rows([0])[0], "idx": 20000}])
    nulls = write_db(tmp_path / "nulls.sqlite", [{**r, **{c: math.nan for c in ev.METRIC_COLUMNS}}
                                                  for r in synthetic_rows(range(5))])
    for db, says in ((wrong, f"the row of index 2 holds arch {rows[3]['arch']!r}, not that cell's"),
                     (outside, "a row has index 20000; the cells of the space are 0..15624"),
                     (nulls, "none of its 5 rows has a value of utilization, ")):
        status, err = status_and_err(["nas", "correlate", "--db", str(db), "--no-plots", "--out",
                                      str(tmp_path / "o")], capsys)
        line = _one_line(err)
        assert status == 1 and f"{db}: {says}" in line, line


def test_a_write_error_on_a_nearly_full_disk_says_how_much_is_free(tmp_path, monkeypatch):
    """nas evaluate on a full disk with a fresh db said only "disk I/O error" (20d)."""
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    for free, says in ((12 << 10, "disk I/O error (the disk holding it has 12 KB free: is it full?)"),
                       (10 << 30, "disk I/O error")):
        monkeypatch.setattr(nas_db.shutil, "disk_usage", lambda path, free=free: usage(1 << 40, 0, free))
        e = sqlite3.OperationalError("disk I/O error")
        e.sqlite_errorcode = 10  # SQLITE_IOERR
        with pytest.raises(ValueError) as info, nas_db.db_errors(tmp_path / "r.sqlite"):
            raise e
        assert str(info.value) == f"torchutil.nas: {tmp_path / 'r.sqlite'}: {says}"


def test_a_second_nas_evaluate_of_one_db_is_refused(tmp_path, capsys):
    """Two nas evaluate on one db each evaluated every cell (the report's note 23): the second is
    refused at once while the first holds the db; the db is then evaluated as usual."""
    db = tmp_path / "r.sqlite"
    argv = ["nas", "evaluate", "--db", str(db), "--device", "cpu", "--indices", "0", "--dataset", "ImageNet16-120",
            "--batch", "1", "--warmup", "0", "--iters", "1", "--no-progress"]
    with nas_db.hold_for_writing(db):  # as a running nas evaluate holds it
        status, err = status_and_err(argv, capsys)
        assert status == 1 and f"{db} is being written by another nas evaluate" in _one_line(err)
    assert status_and_err(argv, capsys)[0] == 0 and len(ev.read_rows(db)) == 1
    fresh = tmp_path / "fresh.sqlite"
    with nas_db.hold_for_writing(fresh):
        pass
    assert not fresh.exists()  # made for the lock, left empty: removed


# --- valid data refused --------------------------------------------------------------------------


def test_readers_open_read_only_and_change_nothing(tmp_path, capsys):
    db = write_db(tmp_path / "r.sqlite", synthetic_rows(range(50)))
    with sqlite3.connect(db) as con:  # a db as another tool keeps it: rollback journal, no WAL
        con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    before = db.read_bytes()
    assert len(ev.read_rows(db)) == 50
    ev.check_db(db)
    assert status_and_err(["nas", "correlate", "--db", str(db), "--no-plots", "--out", str(tmp_path / "c")],
                          capsys)[0] == 0
    assert db.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["c", "r.sqlite"]
    reader = ev.connect(db, create=False)
    with pytest.raises(ValueError, match="readonly") as info:
        with ev.db_errors(db):
            reader.execute("DELETE FROM results")
    reader.close()
    assert "is it a results db" not in str(info.value)


def test_readers_leave_an_old_schema_as_it_is(tmp_path):
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE results (idx INTEGER, dataset TEXT, batch INTEGER, dtype TEXT, device TEXT, "
                "mode TEXT, arch TEXT, device_name TEXT, utilization REAL)")
    con.execute("INSERT INTO results VALUES (0, 'cifar10', 256, 'float16', 'cuda', 'auto', ?, 'gpu', 0.5)",
                (str(nb.arch_of_index(0)),))
    con.commit()
    con.close()
    before = db.read_bytes()
    (row,) = ev.read_rows(db)
    assert row["utilization"] == 0.5 and row["inputs_per_second"] != row["inputs_per_second"]  # NaN
    assert db.read_bytes() == before


def _mount_tmpfs(folder: Path) -> bool:
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    folder.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


def test_a_db_on_a_read_only_file_system(full_db, tmp_path, capsys):
    ro = tmp_path / "ro"
    if not _mount_tmpfs(ro):
        pytest.skip("cannot mount a tmpfs here (needs root on Linux); "
                    "test_readers_open_read_only_and_change_nothing covers the rest")
    try:
        write_db(ro / "results.sqlite", ev.read_rows(full_db))  # a WAL db, as nas evaluate leaves it
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        db = str(ro / "results.sqlite")
        for argv in (["nas", "correlate", "--db", db, "--no-plots", "--out", str(tmp_path / "c")],
                     ["nas", "search", "--db", db, "--seeds", "1", "--iterations", "5", "--no-plots",
                      "--out", str(tmp_path / "s")]):
            status, err = status_and_err(argv, capsys)
            assert status == 0, err
        assert (tmp_path / "c" / "correlations.csv").is_file() and (tmp_path / "s" / "summary.csv").is_file()
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def _wal_state_copy(full_db, folder: Path, rows_in_wal: int) -> Path:
    """A copy of a WAL db as a killed `nas evaluate` leaves it: 3 rows in the main file, the
    next `rows_in_wal` committed in its -wal only, and no -shm beside the copy."""
    rows = ev.read_rows(full_db)[:3 + rows_in_wal]
    src = write_db(folder.parent / f"src{rows_in_wal}.sqlite", rows[:3])
    con = ev.connect(src)
    con.execute("PRAGMA wal_autocheckpoint=0")
    ev.insert_rows(con, rows[3:])
    folder.mkdir(exist_ok=True)
    for extra in ("", "-wal"):  # copied while the writer still holds it: nothing checkpointed
        (folder / f"x.sqlite{extra}").write_bytes(Path(f"{src}{extra}").read_bytes())
    con.close()
    return folder / "x.sqlite"


def test_a_wal_db_without_its_shm_is_refused_not_read_in_part(full_db, tmp_path, capsys, monkeypatch):
    """The report's case: a WAL db copied with its -wal but without its -shm where no -shm can be
    made was read as 3 of its 14 rows. Portable: the read-only open is made to fail as it does on
    a read-only file system (SQLITE_CANTOPEN)."""
    db = _wal_state_copy(full_db, tmp_path / "copy", rows_in_wal=11)
    real_connect = sqlite3.connect

    class CannotOpen:  # sqlite opens lazily: the first statement fails
        def execute(self, *args):
            e = sqlite3.OperationalError("unable to open database file")
            e.sqlite_errorcode = sqlite3.SQLITE_CANTOPEN
            raise e

        def close(self):
            pass

    def connect(database, *args, **kwargs):
        if "mode=ro" in str(database) and "immutable" not in str(database):
            return CannotOpen()
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(nas_db.sqlite3, "connect", connect)
    with pytest.raises(ValueError, match=r"x\.sqlite cannot be read whole here: .*x\.sqlite-shm is missing"):
        ev.read_rows(db)
    status, err = status_and_err(["nas", "correlate", "--db", str(db), "--no-plots", "--out", str(tmp_path / "c")],
                                 capsys)
    assert status == 1 and "cannot be read whole" in _one_line(err)
    (tmp_path / "copy" / "x.sqlite-wal").unlink()  # no -wal: immutable reads the whole file
    assert len(ev.read_rows(db)) == 3


def test_a_wal_db_without_its_shm_on_a_read_only_file_system(full_db, tmp_path, capsys):
    ro = tmp_path / "ro"
    if not _mount_tmpfs(ro):
        pytest.skip("cannot mount a tmpfs here (needs root on Linux); the test before covers it portably")
    try:
        db = _wal_state_copy(full_db, ro, rows_in_wal=11)
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        for argv in (["nas", "correlate", "--db", str(db), "--no-plots", "--out", str(tmp_path / "c")],
                     ["nas", "merge", "--db", str(tmp_path / "m.sqlite"), str(db)]):
            status, err = status_and_err(argv, capsys)
            assert status == 1 and "cannot be read whole here" in _one_line(err), err
        assert not (tmp_path / "c" / "correlations.json").exists()
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_the_hint_follows_only_a_file_that_is_not_a_db(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"SQLite format 3\0" + b"\x13" * 40)
    with pytest.raises(ValueError, match="is it a results db of nas evaluate"):
        ev.read_rows(garbage)
    # A full disk, as sqlite meets it (SQLITE_FULL): the db may grow no more pages.
    db = tmp_path / "full.sqlite"
    con = ev.connect(db)
    pages = con.execute("PRAGMA page_count").fetchone()[0]
    con.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(ValueError, match="full") as info:
        with ev.db_errors(db):
            ev.insert_rows(con, synthetic_rows(range(2000)))
    con.close()
    assert str(db) in str(info.value) and "is it a results db" not in str(info.value)


# --- bad input that exited 0 ---------------------------------------------------------------------


@pytest.mark.parametrize("ask,names", [(["--modes", "cuda_graph"], "cuda_graph"),
                                       (["--modes", "eager", "auto"], "auto"),
                                       (["--dtypes", "float32", "tf32"], "tf32")])
def test_survey_refuses_cuda_only_modes_and_dtypes_on_the_cpu(ask, names, tmp_path, capsys):
    status, err = status_and_err(["survey", "--models", "squeezenet1_1", "--batches", "1", "--device", "cpu",
                                  "--no-progress", "--out", str(tmp_path / "sv"), *ask], capsys)
    line = _one_line(err)
    assert status == 1 and names in line and "cpu" in line, line
    assert not (tmp_path / "sv").exists()


def test_merge_refuses_a_db_into_itself(tmp_path, capsys, monkeypatch):
    db = write_db(tmp_path / "a.sqlite", synthetic_rows(range(20)))
    monkeypatch.chdir(tmp_path)
    for source in (str(db), "./a.sqlite"):
        status, err = status_and_err(["nas", "merge", "--db", str(db), source], capsys)
        line = _one_line(err)
        assert status == 2 and "merged into itself" in line and source in line, line
    assert len(ev.read_rows(db)) == 20


def test_a_checkpoint_of_random_bytes_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / cs.CHECKPOINT).write_bytes(random.Random(0).randbytes(4096))
    status, err = status_and_err(["coded", "evaluate", "--run", str(run), "--device", "cpu", "--out",
                                  str(tmp_path / "ev")], capsys)
    line = _one_line(err)
    assert status == 1 and "is not a coded-train checkpoint" in line and "weights_only" not in err, err
    assert not (tmp_path / "ev").exists()


# --- the packaged H200 sweep ---------------------------------------------------------------------


def test_packaged_sweep_is_the_committed_one():
    packaged = ROOT / "torchutil" / "nas" / "data" / ev.BUILTIN_DBS["h200-auto"]
    assert packaged.read_bytes() == (ROOT / "docs" / "results" / "nas" / "sweep_auto_a.csv.gz").read_bytes()
    with gzip.open(packaged, "rt") as f:
        assert len(f.read().splitlines()) == nb.num_archs() + 1


def test_correlate_on_the_packaged_sweep_reproduces_the_published_table(tmp_path, capsys):
    """Oracle: docs/results/nas/correlations.csv, computed from the same sweep rebuilt as a
    SQLite db by benchmarks/sweep/sweep_csv_to_db.py (docs/results/nas/README.md)."""
    status, err = status_and_err(["nas", "correlate", "--db", "builtin:h200-auto", "--no-plots", "--out",
                                  str(tmp_path)], capsys)
    assert status == 0, err

    def table(path):
        with open(path) as f:
            return {(r["config"], r["subset"], r["accuracy_dataset"], r["metric"]): r for r in csv.DictReader(f)}

    ours, published = table(tmp_path / "correlations.csv"), table(ROOT / "docs/results/nas/correlations.csv")
    assert ours.keys() == published.keys() and len(ours) > 20
    for key, r in published.items():
        assert ours[key]["n"] == r["n"]
        for stat in ("spearman", "kendall"):
            assert float(ours[key][stat]) == pytest.approx(float(r[stat]), abs=1e-12), (key, stat)


def test_search_on_the_packaged_sweep(tmp_path, capsys):
    status, err = status_and_err(["nas", "search", "--db", "builtin:h200-auto", "--seeds", "1", "--iterations",
                                  "10", "--no-plots", "--out", str(tmp_path)], capsys)
    assert status == 0, err
    with open(tmp_path / "summary.csv") as f:
        assert len(list(csv.DictReader(f))) == 6
    status, err = status_and_err(["nas", "search", "--db", "builtin:h100"], capsys)
    assert status == 2 and "builtin:h200-auto" in err
    status, err = status_and_err(["nas", "correlate", "--db", str(tmp_path / "none.sqlite")], capsys)
    assert status == 2 and "none.sqlite" in err and "builtin:h200-auto" in err
