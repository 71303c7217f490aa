"""The command line's bad inputs of the reliability run (every subcommand, every class of bad
value of its Appendix B that ended in a traceback or exited 0), kept as a regression table:
each one ends with its line naming the value or the file, the exit status of its class (2: a bad
argument, refused before any work; 1: a bad file or a failure found while running), no
traceback, and no output of a refused run. The cases run in this process (a traceback would be
an exception reaching the test); a few run as `python -m torchutil` too.

The fixtures are made once per module: a coded-train run of the digits (one epoch of each
stage), checkpoints damaged from it, crafted cost and survey files, results dbs, accuracy
tables with swapped archs or NaNs, and a CIFAR-10 batch whose unpickling would run a command.
"""
from __future__ import annotations

import csv
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_status import status_and_err
from results_db import synthetic_rows, write_db

ROOT = Path(__file__).resolve().parents[1]
ACCURACY = ROOT / "torchutil" / "nas" / "data" / "nb201_accuracy.csv"


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _table(path: Path, change) -> str:
    with open(ACCURACY, newline="") as f:
        rows = list(csv.reader(f))
    change(rows)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return str(path)


def _swap(rows):
    rows[1][1], rows[2][1] = rows[2][1], rows[1][1]


def _nan(rows):
    rows[5][2] = "nan"


def _survey(folder: Path, row: dict) -> str:
    folder.mkdir()
    (folder / "survey.jsonl").write_text(json.dumps(row) + "\n")
    return str(folder)


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> dict[str, str]:
    fx = tmp_path_factory.mktemp("fx")
    paths = {"fx": str(fx), "work": str(fx / "work"), "dbs": str(fx / "dbs")}
    (fx / "dbs").mkdir()  # where a refused nas evaluate or merge would make its db
    # Results dbs and accuracy tables.
    paths["good"] = str(write_db(fx / "good.sqlite", synthetic_rows(range(3))))
    nulls = [{**r, **{c: float("nan") for c in r if c not in ("idx", "dataset", "batch", "dtype", "device", "mode",
                                                             "arch", "device_name")}} for r in synthetic_rows(range(3))]
    paths["nulls"] = str(write_db(fx / "nulls.sqlite", nulls))
    (fx / "zero.sqlite").write_bytes(b"")
    paths["zero"] = str(fx / "zero.sqlite")
    paths["swapped"] = _table(fx / "acc_swapped.csv", _swap)
    paths["accnan"] = _table(fx / "acc_nan.csv", _nan)
    # Crafted cost files.
    for name, value in (("list", []), ("partial", {"batch": 1, "summaries": [{"run": "r"}]}),
                        ("strsec", {"batch": 1, "summaries": [{"run": "r", "k": 2, "base_model_seconds": "0.001",
                                                               "parity_model_seconds": 0.001, "encoder_seconds": 0,
                                                               "decoder_seconds": 0}]})):
        (fx / f"cost_{name}.json").write_text(json.dumps(value))
        paths[f"cost_{name}"] = str(fx / f"cost_{name}.json")
    # Crafted survey rows.
    base = {"model": "m", "batch": 1, "dtype": "float32", "mode": "eager", "status": "ok"}
    paths["sv_nullmodel"] = _survey(fx / "sv_nullmodel", {**base, "model": None, "summary": {"utilization": 0.5}})
    paths["sv_strutil"] = _survey(fx / "sv_strutil", {**base, "summary": {"utilization": "high"}})
    paths["sv_nofields"] = _survey(fx / "sv_nofields", {**base, "summary": {"utilization": 0.5}})
    # A CIFAR-10 batch that would run a command.
    (fx / "evilcifar").mkdir()
    paths["marker"] = str(fx / "PWNED")
    (fx / "evilcifar" / "data_batch_1").write_bytes(pickle.dumps({b"data": _Payload(paths["marker"])}, protocol=4))
    paths["evilcifar"] = str(fx / "evilcifar")
    (fx / "dirckpt" / "checkpoint.pt").mkdir(parents=True)
    paths["dirckpt"] = str(fx / "dirckpt")
    # A coded-train run, and checkpoints damaged from it (they load, but are not whole).
    pytest.importorskip("sklearn", reason="the digits data set ships with scikit-learn (the coded extra)")
    from torchutil.studies.cli import main

    run = fx / "run1"
    assert main(["coded", "train", "--device", "cpu", "--base-epochs", "1", "--epochs", "1", "--no-progress",
                 "--out", str(run)]) == 0
    paths["run1"] = str(run)
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    for name, damaged in (("badstate", {**state, "base": {}}),
                          ("nokey", {k: v for k, v in state.items() if k != "epochs_done"})):
        (fx / name).mkdir()
        torch.save(damaged, fx / name / "checkpoint.pt")
        paths[name] = str(fx / name)
    return paths


# (command line, exit status, what the message must say). {name}: a path of the fixture;
# {work}, {dbs}: where a refused run would have written (a folder, a db).
CASES = [
    # profile (#11, #15, #18)
    ("profile resnet18 --device cpu:5", 2, "cpu:5: there is one CPU device"),
    ("profile resnet18 --device cpu --batch 1 --image-size 100000", 2, "the input alone is 120.0 GB"),
    ("profile resnet18 --device cpu --batch 100000 --image-size 224", 2, "--batch 100000 --image-size 224"),
    ("profile vgg11 --device cpu --batch 1 --image-size 1", 2, "vgg11 cannot take a 1x1 image"),
    # --warmup's type is the option's row (csrc/core/Options.h): refused before any work
    ("profile squeezenet1_1 --device cpu --image-size 32 --warmup 9223372036854775808", 2,
     "--warmup: expected an integer in [0, 10000000], got 9223372036854775808"),
    ("profile squeezenet1_1 --device cpu --image-size 32 --target-ci 2", 2, "--target-ci"),
    # fold-bench (#18, earlier F19)
    ("fold-bench --models spec_2conv_32 --device cpu --dtype tf32 --out {work}/f1", 2, "--dtype tf32: TF32"),
    ("fold-bench --models spec_2conv_32 --device cpu --cuda-graph --out {work}/f2", 2, "--cuda-graph"),
    # nas evaluate (#18, #22): refused before the db is made
    ("nas evaluate --device cpu --indices 0 --trace --db {dbs}/n1.sqlite", 2, "--trace: it records GPU kernels"),
    ("nas evaluate --device cpu --indices 0 --threads 2 --db {dbs}/n2.sqlite", 2, "--threads 2"),
    ("nas evaluate --device cpu --indices 0 --workers 2 --db {dbs}/n3.sqlite", 2, "--workers is gone"),
    # nas merge (#18, #20c)
    ("nas merge --db {dbs}/m1.sqlite {good} {good}", 2, "is given twice"),
    ("nas merge --db {dbs}/m2.sqlite {zero}", 1, "has no results table"),
    # nas correlate (#6, #10)
    ("nas correlate --db {good} --csv {swapped} --no-plots --out {work}/c1", 1, "is not the cell of index 0"),
    ("nas correlate --db {nulls} --no-plots --out {work}/c2", 1, "none of its 3 rows has a value"),
    ("nas correlate --db {good} --csv {accnan} --no-plots --out {work}/c3", 1, "cifar10_test_acc is 'nan'"),
    # nas search (#10, #18)
    ("nas search --db builtin:h200-auto --strategies '' --seeds 1 --iterations 5 --no-plots --out {work}/q1", 2,
     "--strategies ''"),
    ("nas search --db builtin:h200-auto --threshold 5 --seeds 1 --iterations 5 --no-plots --out {work}/q2", 2,
     "a utilization in [0, 1]"),
    ("nas search --db builtin:h200-auto --csv {accnan} --seeds 1 --iterations 5 --no-plots --out {work}/q3", 1,
     "cifar10_test_acc is 'nan'"),
    # survey (#10, #20a)
    ("survey --report-only --out {sv_nullmodel}", 1, "model None is not a name"),
    ("survey --report-only --out {sv_strutil}", 1, "summary field utilization is 'high', not a number"),
    ("survey --report-only --out {sv_nofields}", 1, "has no number for summary field inputs_per_second"),
    ("survey --report-only --out {work}/nothing", 1, "no survey.jsonl in"),
    # coded train (#1, #9, #11, #20b, #20e)
    ("coded train --lr 1e300 --device cpu --out {work}/t1", 2, "a learning rate in (0, 1]"),
    ("coded train --k 0 --device cpu --out {work}/t2", 2, "an integer >= 2 (queries per group), got 0"),
    ("coded train --dataset cifar10 --data-dir {evilcifar} --device cpu --no-progress --out {work}/t3", 1,
     "global posix.system"),
    ("coded train --device cpu --base-epochs 1 --epochs 1 --no-progress --out {dirckpt}", 1, "is not a file"),
    ("coded train --device cpu --base-epochs 1 --epochs 1 --no-progress --out {badstate}", 1,
     "its 'base' does not load"),
    ("coded train --device cpu --base-epochs 1 --epochs 1 --no-progress --out {nokey}", 1, "it lacks epochs_done"),
    # coded evaluate, cost (#9)
    ("coded evaluate --run {badstate} --device cpu --out {work}/e1", 1, "its 'base' does not load"),
    ("coded evaluate --run {nokey} --device cpu --out {work}/e2", 1, "it lacks epochs_done"),
    ("coded cost --runs {badstate} --device cpu --out {work}/k1", 1, "its 'base' does not load"),
    # coded simulate (#10, #11, #18)
    ("coded simulate --k 1 --service-seconds 0.001 --queries 1000 --no-plots --out {work}/z1", 2,
     "an integer >= 2 (queries per group), got 1"),
    ("coded simulate --k 2 --service-seconds 0.001 --queries 1000000000000 --no-plots --out {work}/z2", 2,
     "an integer in 1..10,000,000"),
    ("coded simulate --cost {cost_list} --no-plots --out {work}/z3", 1, "cost_list.json holds no runs"),
    ("coded simulate --cost {cost_partial} --no-plots --out {work}/z4", 1, "run 'r' has k None"),
    ("coded simulate --cost {cost_strsec} --no-plots --out {work}/z5", 1, "has base_model_seconds '0.001'"),
    # coded serve (#8, #9, #18)
    ("coded serve --run {run1} --serve-device bogus --out {work}/v1", 2, "unknown device 'bogus'"),
    ("coded serve --run {run1} --serve-device meta --out {work}/v2", 2, "runs on cpu or cuda, got 'meta'"),
    ("coded serve --run {run1} --stragglers 0 0 --out {work}/v3", 2, "--stragglers: worker numbers repeat"),
    ("coded serve --run {run1} --queries 2000000 --out {work}/v4", 2, "an integer in 1..1,000,000"),
    ("coded serve --run {badstate} --queries 200 --out {work}/v5", 1, "its 'base' does not load"),
]
if not torch.cuda.is_available():
    CASES.append(("coded serve --run {run1} --serve-device cuda --out {work}/v6", 2, "CUDA is not available"))


def _argv(line: str, fx: dict[str, str]) -> list[str]:
    return [("" if word == "''" else word.format(**fx)) for word in line.split()]


@pytest.mark.parametrize("line,status,says", CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_is_one_line_and_its_exit_status(line, status, says, fx, capsys):
    got, err = status_and_err(_argv(line, fx), capsys)
    assert "Traceback" not in err
    assert got == status, (got, err)
    assert says.format(**fx) in err, err
    assert not os.path.exists(fx["work"]), os.listdir(fx["work"])  # a refused run writes nothing
    assert os.listdir(fx["dbs"]) == []
    assert not os.path.exists(fx["marker"])  # the crafted CIFAR batch ran nothing


@pytest.mark.parametrize("line", ["profile resnet18 --device cpu:5",
                                  "coded simulate --k 2 --service-seconds 0.001 --queries 1000000000000",
                                  "coded serve --run {run1} --serve-device bogus --out {work}/v1"])
def test_the_same_as_the_interpreter_runs_them(line, fx):
    p = subprocess.run([sys.executable, "-m", "torchutil", *_argv(line, fx)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.count("error:") == 1, p.stderr


@pytest.mark.parametrize("error", [
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                 "tried to allocate 120000000000 bytes. Error code 12 (Cannot allocate memory)"),
    MemoryError("Unable to allocate 7.28 TiB for an array with shape (1000000000000,) and data type float64"),
], ids=["cpu-allocator", "numpy"])
def test_an_allocation_that_fails_anyway_is_one_line(error, monkeypatch, capsys):
    """What the bounds do not foresee (the activations of a forward whose input fits) ends in one
    line too, not the allocator's traceback."""
    from torchutil.studies.cli import profile

    def out_of_memory(*args, **kwargs):
        raise error

    monkeypatch.setattr(profile, "profile", out_of_memory)
    status, err = status_and_err(["profile", "squeezenet1_1", "--device", "cpu", "--batch", "1", "--image-size",
                                  "32"], capsys)
    line = err.strip().splitlines()[-1]
    assert status == 1 and "Traceback" not in err
    assert line.startswith("torchutil: out of memory (") and "use a smaller batch, image size or number" in line
