"""The second reliability run (issue 50; the report's table, ../shared/reports/reliability-2.md)
as a regression table: one case per report id, S1..O11 and the `--warmup 2**63` exit status.

Each case builds its crafted input in a folder of its own, runs the command line in this process
(cli_status.status_and_err: a traceback would be an exception reaching the test) or the API,
under a time limit (SIGALRM: a case that hangs fails instead of blocking the run), and asserts
what the report's "expected" column says: the exit status (2: a bad argument, 1: a bad file), one
line naming the value, no traceback, and nothing in the case's folder written, changed or
deleted (the files SQLite keeps beside a db it opens, -wal and -shm, aside). The one case run as
`python -m torchutil` is the exit status of `--warmup 2**63`, which argparse sets.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import math
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_status import status_and_err
from results_db import synthetic_rows, write_db

import torchutil
from torchutil.coded import data as coded_data
from torchutil.nas import natsbench as nb
from torchutil.studies import coded as cs
from torchutil.studies import nas_db

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60  # seconds any one case may take; each takes a few at most
CASES = {}


def case(*ids):
    """Registers the function as the check of these report ids."""
    def register(check):
        for i in ids:
            CASES[i] = check
        return check
    return register


@contextlib.contextmanager
def time_limit(seconds):
    """A TimeoutError inside the block after `seconds` (a blocking open() of a FIFO is
    interrupted too): a hang fails the case."""
    def expire(signum, frame):
        raise TimeoutError(f"the case ran past {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def tree(folder):
    """{relative path: what it is}: links by their target, files by their bytes' hash; SQLite's
    -wal and -shm files aside."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if name.endswith(("-wal", "-shm")):
                continue
            if os.path.islink(path):
                out[os.path.relpath(path, folder)] = f"link to {os.readlink(path)}"
            elif os.path.isfile(path):
                out[os.path.relpath(path, folder)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            elif not os.path.isdir(path):
                out[os.path.relpath(path, folder)] = "special"
    return out


def refused(argv, status, says, folder, capsys):
    """Runs the command line: exit `status`, one line on stderr holding `says`, no traceback, the
    folder as it was. Returns the line."""
    before = tree(folder)
    got, err = status_and_err([str(a) for a in argv], capsys)
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert got == status, (got, err)
    # Exit 2 is argparse's: its usage, then the one error line; exit 1 is the line alone.
    assert (len(lines) == 1 if status == 1 else sum("error:" in line for line in lines) == 1), err
    assert says in lines[-1], lines[-1]
    assert tree(folder) == before, "a refused run wrote, changed or deleted a file"
    return lines[-1]


def api_refused(error, says, call):
    """call() raises `error` (a one-line `torchutil` message) holding `says`."""
    with pytest.raises(error) as e:
        call()
    text = str(e.value)
    assert "\n" not in text and text.startswith("torchutil") and says in text, text
    return text


# --- crafted inputs -------------------------------------------------------------------------------


def cifar_folder(folder, data, labels, protocol=4):
    """A CIFAR-10 folder whose data_batch_1 (the first one read) holds `data` and `labels`."""
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(pickle.dumps({b"data": data, b"labels": labels}, protocol=protocol))
    return folder


def bomb(depth):
    """[x, x] nested `depth` levels, sharing one memo entry: 2**depth leaves in a few bytes."""
    x = 0
    for _ in range(depth):
        x = [x, x]
    return x


def checkpoint_folder(folder, config=None, **state):
    """A coded-train checkpoint with TrainConfig's defaults, changed by `config` and `state`
    (read up to its config: its state dicts are empty)."""
    folder.mkdir()
    record = {"format": cs.FORMAT, "config": {**asdict(cs.TrainConfig()), **(config or {})}, "base_epochs_done": 1,
              "epochs_done": 1, "history": [], "base": {}, "code": {}, **state}
    torch.save(record, folder / cs.CHECKPOINT)
    return folder


def db_with(path, sql, *params, rows=None):
    """A results db of synthetic rows (cells 0..5), then `sql` run on it."""
    write_db(path, synthetic_rows(range(6)) if rows is None else rows)
    con = sqlite3.connect(path)
    con.execute(sql, params)
    con.commit()
    con.close()
    return path


def raw_db(path, columns, rows):
    """A `results` table of these column declarations (no primary key) holding `rows` (dicts)."""
    names = [c.split()[0] for c in columns]
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE results ({', '.join(columns)})")
    con.executemany(f"INSERT INTO results VALUES ({', '.join('?' * len(names))})",
                    [tuple(None if isinstance(r[n], float) and math.isnan(r[n]) else r[n] for n in names)
                     for r in rows])
    con.commit()
    con.close()
    return path


def columns(integers=()):
    """The column declarations of a results table without its primary key: every key column TEXT
    but `integers`, every metric REAL."""
    keys = ("idx", "dataset", "batch", "dtype", "device", "mode", "arch", "device_name")
    return [*(f"{c} {'INTEGER' if c in integers else 'TEXT'}" for c in keys), *(f"{c} REAL" for c in nas_db.METRIC_COLUMNS)]


@pytest.fixture(scope="module")
def full_rows():
    """Rows of every cell of the space (nas search wants the whole space)."""
    return synthetic_rows(range(15625))


def survey_folder(folder, row):
    folder.mkdir()
    (folder / "survey.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def published_row():
    with gzip.open(ROOT / "docs" / "results" / "survey" / "survey.jsonl.gz", "rt") as f:
        return json.loads(f.readline())


def toy_lm():
    """A language model of the step= kind: (model, step, rewind, cache)."""
    model = torch.nn.Embedding(16, 16)

    def step(tokens, cache):
        cache.append(tokens)
        return model(tokens)

    def rewind(cache, length):
        del cache[length:]

    return model, step, rewind, []


# --- Security -------------------------------------------------------------------------------------


@case("S1")
def _survey_link(tmp_path, capsys):
    (tmp_path / "sv").mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM\n")
    os.symlink("../victim.txt", tmp_path / "sv" / "survey.jsonl")
    refused(["survey", "--models", "squeezenet1_1", "--batches", "1", "--image-size", "64", "--device", "cpu",
             "--no-progress", "--out", tmp_path / "sv"], 1, "survey.jsonl is a symbolic link (to ../victim.txt)",
            tmp_path, capsys)
    assert victim.read_text() == "VICTIM\n"


@case("S2")
def _pareto_plot_link(tmp_path, capsys):
    optuna = pytest.importorskip("optuna")
    pytest.importorskip("matplotlib")
    from torchutil.nas import engines

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.optimize(lambda t: (t.suggest_float("a", 0, 1), t.suggest_float("n", 0, 1)), n_trials=4)
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM\n")
    os.symlink(victim, tmp_path / "pareto.png")
    engines.plot_pareto_front(study, str(tmp_path / "pareto.png"), ["acc", "n"])
    assert victim.read_text() == "VICTIM\n"
    plot = tmp_path / "pareto.png"
    assert not plot.is_symlink() and plot.read_bytes().startswith(b"\x89PNG")  # the link replaced, whole
    assert sorted(os.listdir(tmp_path)) == ["pareto.png", "victim.txt"]  # no temporary file left


@case("S3")
def _evaluate_dangling_db(tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere" / "created.sqlite", tmp_path / "r.sqlite")
    refused(["nas", "evaluate", "--db", tmp_path / "r.sqlite", "--device", "cpu", "--dataset", "ImageNet16-120",
             "--batch", "1", "--warmup", "0", "--iters", "1", "--indices", "0:1"], 2,
            "r.sqlite is a symbolic link to a missing file", tmp_path, capsys)


# --- Data loss ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker_run(tmp_path_factory):
    """One nas evaluate (one cell) beside a user's r.worker١.sqlite and r.worker１.sqlite, and a
    real worker db r.worker1.sqlite (the control: that one is merged and removed)."""
    from torchutil.studies.cli import main

    folder = tmp_path_factory.mktemp("workers")
    users = {name: write_db(folder / name, synthetic_rows(range(3))).read_bytes()
             for name in ("r.worker\u0661.sqlite", "r.worker\uff11.sqlite")}
    write_db(folder / "r.worker1.sqlite", synthetic_rows([5], dataset="ImageNet16-120", batch=1, device="cpu",
                                                          dtype="float32", mode="eager"))
    with time_limit(LIMIT):
        status = main(["nas", "evaluate", "--db", str(folder / "r.sqlite"), "--device", "cpu", "--dataset",
                       "ImageNet16-120", "--batch", "1", "--warmup", "0", "--iters", "1", "--indices", "10:11",
                       "--no-progress"])
    return folder, users, status


@case("D1", "D2")
def _user_worker_files(tmp_path, capsys, worker_run, cid):
    folder, users, status = worker_run
    name = "r.worker\u0661.sqlite" if cid == "D1" else "r.worker\uff11.sqlite"
    assert status == 0
    assert (folder / name).read_bytes() == users[name]  # kept, unchanged
    assert not (folder / "r.worker1.sqlite").exists()  # the control: an ASCII worker db is merged and removed
    assert sorted(r["idx"] for r in nas_db.read_rows(folder / "r.sqlite")) == [5, 10]


# --- Hangs ----------------------------------------------------------------------------------------


@case("H1")
def _fifo_db(tmp_path, capsys):
    fifo = tmp_path / "f.sqlite"
    os.mkfifo(fifo)
    refused(["nas", "evaluate", "--db", fifo, "--device", "cpu", "--indices", "0:1"], 2,
            "f.sqlite is not a regular file", tmp_path, capsys)
    # The library's lock too, and the survey's rows file: refused at once, never opened blocking.
    api_refused(ValueError, "f.sqlite is not a regular file (it is a FIFO)",
                lambda: nas_db.hold_for_writing(fifo).__enter__())
    os.mkfifo(tmp_path / "survey.jsonl")
    refused(["survey", "--report-only", "--out", tmp_path], 1, "survey.jsonl is not a regular file (it is a FIFO)",
            tmp_path, capsys)


@case("H2")
def _cifar_bomb(tmp_path, capsys):
    """24 levels: np.asarray would walk 16 Mi leaves (seconds); the check refuses the list at once."""
    folder = cifar_folder(tmp_path / "bomb", bomb(24), [0, 0])
    assert (folder / "data_batch_1").stat().st_size < 1000
    start = time.perf_counter()
    api_refused(ValueError, "b'data' is a list, not a uint8 array [N, 3072]",
                lambda: coded_data.read_cifar10_batch(folder / "data_batch_1"))
    assert time.perf_counter() - start < 1.0
    refused(["coded", "train", "--dataset", "cifar10", "--data-dir", folder, "--base-epochs", "1", "--epochs", "1",
             "--device", "cpu", "--no-progress", "--out", tmp_path / "out"], 1, "b'data' is a list", tmp_path, capsys)


@case("H3")
def _loop_repeats(tmp_path, capsys):
    model, step, rewind, cache = toy_lm()
    api_refused(ValueError, "loop_repeats must be at most 1,000 (each run generates every token again), got "
                            "1,000,000,000,000",
                lambda: torchutil.profile_generate(model, torch.zeros(1, 2, dtype=torch.long), 4, step=step,
                                                   rewind=rewind, cache=cache, warmup=0, iters=1,
                                                   loop_repeats=10**12))
    assert cache == []  # refused before any forward


@case("H4")
def _step_new_tokens(tmp_path, capsys):
    model, step, rewind, cache = toy_lm()
    api_refused(ValueError, "with step=, max_new_tokens must be at most 131,072",
                lambda: torchutil.profile_generate(model, torch.zeros(1, 2, dtype=torch.long), 2**20, step=step,
                                                   rewind=rewind, cache=cache))
    assert cache == []


@case("H5")
def _search_iterations(tmp_path, capsys):
    refused(["nas", "search", "--db", "builtin:h200-auto", "--seeds", "1", "--iterations", 10**15, "--out",
             tmp_path / "s", "--no-plots"], 2, "--iterations: expected an integer in 1..100,000, got "
                                               "1000000000000000", tmp_path, capsys)


@case("H6")
def _base_epochs(tmp_path, capsys):
    refused(["coded", "train", "--base-epochs", 10**30, "--epochs", "1", "--device", "cpu", "--no-progress",
             "--out", tmp_path / "t"], 2, f"--base-epochs: expected an integer in 1..100,000, got {10**30}",
            tmp_path, capsys)


# --- Tracebacks and silent wrong results: crafted files ------------------------------------------


CHECKPOINTS = {  # id: (config changes, state changes, what the line says)
    "T1": ({"epochs": "x"}, {}, "its config's epochs must be an int in 1..100,000, got 'x'"),
    "T2": ({"seed": "abc"}, {}, "its config's seed must be an int in 0..4,294,967,295, got 'abc'"),
    "W5": ({"base_epochs": -5}, {}, "its config's base_epochs must be an int in 1..100,000, got -5"),
    "W6": ({}, {"epochs_done": 10**30}, f"epochs_done is {10**30}, outside 0..epochs (100)"),
}


@case(*CHECKPOINTS)
def _checkpoint(tmp_path, capsys, cid):
    config, state, says = CHECKPOINTS[cid]
    run = checkpoint_folder(tmp_path / "run", config, **state)
    line = refused(["coded", "evaluate", "--run", run, "--device", "cpu", "--out", tmp_path / "e"], 1, says,
                   tmp_path, capsys)
    assert str(run / cs.CHECKPOINT) in line


CORRELATE_DBS = {  # id: (how the db is made, what the line says)
    "T3": (lambda p: db_with(p, "UPDATE results SET idx = 'abc' WHERE idx = 2"),
           "a row has index 'abc' (text), not an integer; the cells of the space are 0..15624"),
    "T4": (lambda p: db_with(p, "UPDATE results SET idx = 1.5 WHERE idx = 1"),
           "a row has index 1.5 (a real), not an integer"),
    "T5": (lambda p: db_with(p, "UPDATE results SET utilization = 'high' WHERE idx = 3"),
           "the row of index 3 has utilization 'high' (text), not a number"),
    "T6": (lambda p: db_with(p, "UPDATE results SET utilization = x'00ff' WHERE idx = 4"),
           "the row of index 4 has utilization b'\\x00\\xff' (a blob), not a number"),
    "T7": (lambda p: raw_db(p, columns(), synthetic_rows(range(6))),
           "a row has index '0' (text), not an integer"),
    "W3": (lambda p: raw_db(p, columns(integers=("idx", "batch")), synthetic_rows(range(6)) * 2),
           "the row of index 0 (cifar10, 256, float16, cuda, eager) is there twice"),
}


@case(*CORRELATE_DBS)
def _correlate_db(tmp_path, capsys, cid):
    make, says = CORRELATE_DBS[cid]
    (tmp_path / "in").mkdir()
    db = make(tmp_path / "in" / "db.sqlite")
    line = refused(["nas", "correlate", "--db", db, "--out", tmp_path / "c", "--no-plots"], 1, says, tmp_path, capsys)
    assert line.startswith(f"torchutil.nas: {db}: "), line


SEARCH_DBS = {  # id: (how the full db's rows change, what the line says)
    "T8": (lambda rows: rows.append({**rows[0], "idx": 99999}), "a row has index 99999; the cells of the space "
                                                                  "are 0..15624"),
    "W1": (lambda rows: rows[0].update(idx=1) or rows[1].update(idx=0),
           f"the row of index 0 holds arch '{nb.arch_of_index(1)}', not that cell's ({nb.arch_of_index(0)})"),
    "W2": (lambda rows: rows[-1].update(idx=-1), "a row has index -1; the cells of the space are 0..15624"),
}


@case(*SEARCH_DBS)
def _search_db(tmp_path, capsys, cid, full_rows):
    change, says = SEARCH_DBS[cid]
    rows = [dict(r) for r in full_rows]
    change(rows)
    (tmp_path / "in").mkdir()
    db = write_db(tmp_path / "in" / "full.sqlite", rows)
    refused(["nas", "search", "--db", db, "--seeds", "1", "--iterations", "20", "--out", tmp_path / "s",
             "--no-plots"], 1, says, tmp_path, capsys)


@case("W4")
def _merge_bad_shard(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    shard = write_db(tmp_path / "in" / "negidx.sqlite", [{**synthetic_rows([5])[0], "idx": -1}])
    refused(["nas", "merge", "--db", tmp_path / "m.sqlite", shard], 1, "a row has index -1", tmp_path, capsys)
    assert not (tmp_path / "m.sqlite").exists()


@case("T9")
def _search_seeds(tmp_path, capsys):
    refused(["nas", "search", "--db", "builtin:h200-auto", "--seeds", 10**12, "--iterations", "5", "--out",
             tmp_path / "s", "--no-plots"], 2, "--seeds: expected a number of seeds in 1..10,000 or a list '3,5,8', "
                                               "got 1000000000000", tmp_path, capsys)


@case("T10")
def _deep_json(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "deep.json").write_text("[" * 100000 + "]" * 100000)
    refused(["coded", "simulate", "--cost", tmp_path / "in" / "deep.json", "--out", tmp_path / "z", "--no-plots"], 1,
            "deep.json is not JSON (nested too deep to read)", tmp_path, capsys)


CIFAR_BATCHES = {  # id: (data, labels, what the line says)
    "T11": (np.zeros((2, 3072), np.uint8), [2**70] * 2, "a label is an int of 71 bits, not an int in 0..9"),
    "T12": ("not an array", [0], "b'data' is a str, not a uint8 array [N, 3072]"),
    "T13": ({"a": 1}, [0], "b'data' is a dict, not a uint8 array [N, 3072]"),
    "W7": (np.full((2, 3072), 1e300), [0, 1], "b'data' is a float64 array of shape [2, 3072], not a uint8 array"),
}


@case(*CIFAR_BATCHES)
def _cifar_batch(tmp_path, capsys, cid):
    data, labels, says = CIFAR_BATCHES[cid]
    folder = cifar_folder(tmp_path / "cifar", data, labels)
    line = refused(["coded", "train", "--dataset", "cifar10", "--data-dir", folder, "--base-epochs", "1", "--epochs",
                    "1", "--device", "cpu", "--no-progress", "--out", tmp_path / "out"], 1, says, tmp_path, capsys)
    assert "data_batch_1 is not a CIFAR-10 python batch" in line


@case("T14")
def _survey_nan(tmp_path, capsys):
    row = published_row()
    folder = survey_folder(tmp_path / "sv", {**row, "summary": {**row["summary"], "utilization": float("nan")}})
    refused(["survey", "--report-only", "--out", folder], 1, "has no number for summary field utilization (it has "
                                                             "nan)", tmp_path, capsys)


# --- Silent wrong results: the API ----------------------------------------------------------------


@case("W8", "W9", "W10")
def _utilization(tmp_path, capsys, cid):
    args, says = {"W8": ((float("nan"), 1.0, 1.0), "utilization's flops must be finite and >= 0, got nan"),
                  "W9": ((1.0, 0.0, 1.0), "utilization's seconds must be finite and > 0, got 0.0"),
                  "W10": ((1.0, -1.0, 1.0), "utilization's seconds must be finite and > 0, got -1.0")}[cid]
    api_refused(ValueError, says, lambda: torchutil.utilization(*args))
    # The same value inside a tensor is named with its element; a good one still divides.
    bad = [torch.tensor([1.0, v], dtype=torch.float64) for v in args]
    api_refused(ValueError, "(element 1 of (2,))", lambda: torchutil.utilization(*bad))
    assert torchutil.utilization(1e9, 1.0, 1e12).item() == pytest.approx(1e-3)


REWARDS = {  # id: (Reward's arguments, error, what the message says)
    "W11": ((["accuracy"],), {"threads": -3}, ValueError, "threads must be None or an int >= 1, got -3"),
    "W12": ((["accuracy"],), {"idle_seconds": float("nan")}, ValueError,
            "idle_seconds must be a finite number of seconds > 0, got nan"),
    "W13": ((["accuracy", "accuracy"],), {}, ValueError, "metric 'accuracy' is given twice"),
    "O10": ((["accuracy"],), {"config": "cpu"}, TypeError, "Reward's config must be an EvalConfig"),
}


@case(*REWARDS)
def _reward(tmp_path, capsys, cid):
    from torchutil.nas import engines

    args, kwargs, error, says = REWARDS[cid]
    api_refused(error, says, lambda: engines.Reward(*args, **kwargs))


# --- Other: wrong refusals and unclear messages ---------------------------------------------------


@case("O1")
def _cifar_protocol_2(tmp_path, capsys):
    data, labels = np.arange(2 * 3072, dtype=np.uint64).astype(np.uint8).reshape(2, 3072), [3, 9]
    folder = cifar_folder(tmp_path / "cifar", data, labels, protocol=2)
    assert b"_codecs" in (folder / "data_batch_1").read_bytes()  # Python 3's bytes at protocol 2
    images, got = coded_data.read_cifar10_batch(folder / "data_batch_1")
    assert np.array_equal(images.reshape(2, 3072), data) and got.tolist() == labels
    # _codecs.encode builds latin-1 bytes only: another codec is still refused.

    class Rot13:
        def __reduce__(self):
            import _codecs
            return _codecs.encode, ("abc", "rot13")

    (folder / "data_batch_1").write_bytes(pickle.dumps({b"data": Rot13(), b"labels": []}, protocol=2))
    api_refused(ValueError, "it calls _codecs.encode with str, 'rot13'",
                lambda: coded_data.read_cifar10_batch(folder / "data_batch_1"))


@case("O2")
def _long_model_name(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    folder = survey_folder(tmp_path / "sv", {**published_row(), "model": "m" * 2000})
    status, err = status_and_err(["survey", "--report-only", "--out", str(folder)], capsys)
    assert status == 0 and "Traceback" not in err, err
    (plot,) = [n for n in os.listdir(folder) if n.startswith("roofline_")]
    assert plot.startswith("roofline_" + "m" * 120 + "-") and len(plot.encode()) < 255
    assert plot in (folder / "report.html").read_text()


@case("O3", "O4")
def _unknown_device(tmp_path, capsys, cid):
    function = torchutil.peak_flops if cid == "O3" else torchutil.memory_bandwidth
    api_refused(ValueError, f"{function.__name__}: unknown device 'bogus'; use cpu, cuda or cuda:N",
                lambda: function("bogus"))


@case("O5")
def _fold_factor(tmp_path, capsys):
    from torchutil.models import build

    cnn = build("spec_2conv_32")[0]
    api_refused(ValueError, "the folding factor f must be an int in 1..1024", lambda: torchutil.fold(cnn, 10**6))


@case("O6")
def _schema_table(tmp_path, capsys):
    api_refused(TypeError, "schema's table must be a str", lambda: torchutil.schema(123))


@case("O7")
def _missing_folder(tmp_path, capsys):
    from torchutil.generation import rows_to_csv

    with pytest.raises(FileNotFoundError) as e:
        rows_to_csv(str(tmp_path / "nonexistent_dir" / "x.csv"), [])
    assert e.value.filename == str(tmp_path / "nonexistent_dir" / "x.csv")  # the output, not its temporary file


@case("O8", "O9")
def _step_returns(tmp_path, capsys, cid):
    model, _, rewind, cache = toy_lm()
    returned = None if cid == "O8" else {"logits": torch.zeros(1, 16)}
    api_refused(ValueError, f"torchutil.profile_generate: step= returned {'None' if cid == 'O8' else 'a dict'}; it "
                            f"must return logits",
                lambda: torchutil.profile_generate(model, torch.zeros(1, 2, dtype=torch.long), 2,
                                                   step=lambda tokens, c: returned, rewind=rewind, cache=cache))


@case("O11")
def _reward_text_value(tmp_path, capsys):
    from torchutil.nas import engines

    reward = engines.Reward(["utilization"], config=None, shared=False)
    api_refused(ValueError, "metric 'utilization' of cell 0 is 'high', not a number",
                lambda: reward.values({"idx": 0, "utilization": "high"}))


# --- Also noted: a bad argument exits 2 -----------------------------------------------------------


@case("warmup")
def _warmup_exit_status(tmp_path, capsys):
    """As the interpreter runs it: argparse's exit status 2 and its one error line."""
    p = subprocess.run([sys.executable, "-m", "torchutil", "profile", "squeezenet1_1", "--device", "cpu",
                        "--image-size", "32", "--warmup", "9223372036854775808"], capture_output=True, text=True,
                       timeout=LIMIT, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1].endswith(
        "argument --warmup: expected an integer in [0, 10000000], got 9223372036854775808"), p.stderr
    assert os.listdir(tmp_path) == []


REPORT_IDS = ([f"S{i}" for i in range(1, 4)] + ["D1", "D2"] + [f"H{i}" for i in range(1, 7)]
              + [f"T{i}" for i in range(1, 15)] + [f"W{i}" for i in range(1, 14)] + [f"O{i}" for i in range(1, 12)]
              + ["warmup"])


def test_every_report_id_has_its_case():
    assert sorted(CASES) == sorted(REPORT_IDS)


@pytest.mark.parametrize("cid", REPORT_IDS)
def test_report_case(cid, tmp_path, capsys, request):
    check = CASES[cid]
    names = check.__code__.co_varnames[:check.__code__.co_argcount]
    fixtures = {n: request.getfixturevalue(n) for n in names if n not in ("tmp_path", "capsys", "cid")}
    extra = {"cid": cid} if "cid" in names else {}
    start = time.perf_counter()
    with time_limit(LIMIT):
        check(tmp_path, capsys, **fixtures, **extra)
    assert time.perf_counter() - start < LIMIT
