"""`python -m torchutil coded ...`: train, a resume that reproduces an uninterrupted run, an
interrupted run that evaluate refuses, evaluate, cost and simulate from the cost file, and the
simulation's plot."""
from __future__ import annotations

import json
import sys

import pytest
import torch

from torchutil.coded import sim
from torchutil.studies import coded as cs
from torchutil.studies.cli import main

pytest.importorskip("sklearn", reason="the digits data set ships with scikit-learn (the coded extra)")

TRAIN = ["coded", "train", "--device", "cpu", "--no-progress", "--base-epochs", "3"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one thread is faster, and the same thread count makes runs bit-identical."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def _status(argv: list[str], capsys) -> tuple[int, str, str]:
    """main(argv) as the interpreter would end it: (status, stdout, stderr)."""
    try:
        status = main(argv)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        status = 1 if isinstance(e.code, str) else (e.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_resume_reproduces_an_uninterrupted_run(tmp_path, capsys):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert _status([*TRAIN, "--epochs", "2", "--out", a], capsys)[0] == 0
    status, out, err = _status([*TRAIN, "--epochs", "4", "--out", a, "--json", "-"], capsys)
    assert status == 0 and "code 2/4 epochs done" in err and "reconstruction accuracy" in err
    resumed = json.loads(out)  # stdout holds the JSON alone
    assert _status([*TRAIN, "--epochs", "4", "--out", b], capsys)[0] == 0
    with open(tmp_path / "b" / "metrics.json") as f:
        straight = json.load(f)
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in straight["history"]]
    assert len(resumed["history"]) == 3 + 4
    assert resumed["metrics"] == straight["metrics"]

    status, out, err = _status(["coded", "evaluate", "--run", a, "--device", "cpu", "--out",
                                str(tmp_path / "ev"), "--json", "-"], capsys)
    assert status == 0 and json.loads(out)["metrics"] == straight["metrics"]
    assert (tmp_path / "ev" / "metrics.json").exists()

    status, _, err = _status([*TRAIN, "--epochs", "3", "--out", a], capsys)
    assert status == 1 and "4 code epochs, more than the 3 asked" in err
    status, _, err = _status([*TRAIN, "--k", "4", "--out", a], capsys)
    assert status == 1 and "k 2 (asked: 4)" in err and "--restart" in err and "Traceback" not in err
    assert _status([*TRAIN, "--k", "4", "--epochs", "1", "--out", a, "--restart"], capsys)[0] == 0


def test_interrupted_run_is_refused_by_evaluate_and_resumed(tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "run")
    calls = []
    real = cs.code_epoch

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(cs, "code_epoch", interrupted)
    assert _status([*TRAIN, "--paradigm", "parity", "--epochs", "3", "--out", out], capsys)[0] == 130
    status, _, err = _status(["coded", "evaluate", "--run", out, "--device", "cpu"], capsys)
    assert status == 1 and "code epoch 1/3" in err and "Traceback" not in err
    status, _, err = _status([*TRAIN, "--paradigm", "parity", "--epochs", "3", "--out", out], capsys)
    assert status == 0 and "code 1/3 epochs done" in err


def test_cost_then_simulate(tmp_path, capsys):
    runs = {"l2": ["--k", "2"], "p4": ["--k", "4", "--paradigm", "parity"]}
    for name, extra in runs.items():
        assert _status([*TRAIN, "--base-epochs", "1", "--epochs", "1", *extra, "--out", str(tmp_path / name)],
                       capsys)[0] == 0
    cost_dir = tmp_path / "cost"
    status, out, err = _status(["coded", "cost", "--runs", *(str(tmp_path / n) for n in runs), "--device", "cpu",
                                "--warmup", "1", "--iters", "3", "--out", str(cost_dir)], capsys)
    assert status == 0, err
    table = json.loads((cost_dir / "cost.json").read_text())
    rows = {(r["run"], r["component"]): r for r in table["rows"]}
    assert len(rows) == 8 and all(r["device"] == "cpu" and r["seconds"] > 0 for r in rows.values())
    for name in runs:  # the parity model has F's architecture (learned: it is F)
        assert rows[name, "parity model"]["flops"] == rows[name, "base model"]["flops"] > 0
    assert rows["l2", "encoder"]["flops"] > rows["p4", "encoder"]["flops"] > 0  # an MLP against a sum
    summary = {s["run"]: s for s in table["summaries"]}
    assert summary["p4"]["replication_extra_ratio"] == 0.25
    assert summary["p4"]["coded_extra_flops_ratio"] >= 0.25  # F_P/k, plus encoder and decoder
    assert "| p4 | parity model |" in (cost_dir / "cost.md").read_text() and (cost_dir / "cost.csv").exists()

    sim_dir = tmp_path / "sim"
    args = ["coded", "simulate", "--cost", str(cost_dir / "cost.json"), "--run", "p4", "--loads", "0.5", "0.8",
            "--queries", "4000", "--out", str(sim_dir)]
    status, out, err = _status(args, capsys)
    assert status == 0, err
    result = json.loads((sim_dir / "sim.json").read_text())
    assert result["config"]["k"] == 4 and result["run"] == "p4"
    assert result["config"]["service_seconds"] == rows["p4", "base model"]["seconds"]
    assert result["config"]["decode_seconds"] == rows["p4", "decoder"]["seconds"]
    assert [(s["load"], s["policy"]) for s in result["summaries"]] == [(lo, p) for lo in (0.5, 0.8)
                                                                       for p in sim.POLICIES]
    assert "| 0.8 | coded | 5 |" in out
    status, _, err = _status([*args[:5], "nope"], capsys)
    assert status == 1 and "'nope'" in err and "l2, p4" in err

    assert _status(["coded", "cost", "--runs", str(tmp_path / "l2"), "--device", "cpu", "--batch", "2", "--iters",
                    "1", "--out", str(tmp_path / "cost2")], capsys)[0] == 0
    status, _, err = _status(["coded", "simulate", "--cost", str(tmp_path / "cost2" / "cost.json")], capsys)
    assert status == 1 and "--batch 1" in err


def test_sweep_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    config = sim.SimConfig(k=2, service_seconds=1e-3, straggler="bimodal", straggler_probability=0.05, slowdown=10.0,
                       queries=5_000)
    summaries = sim.sweep(config, [0.3, 0.6])
    assert [(s.load, s.policy) for s in summaries] == [(lo, p) for lo in (0.3, 0.6) for p in sim.POLICIES]
    assert [s.workers for s in summaries[:3]] == [2, 3, 3]
    path = tmp_path / "sim.png"
    cs.plot_simulation(summaries, config, str(path))
    image = imread(path)
    assert image.shape[0] > 200 and image.shape[1] > 600
    assert image[..., :3].std() > 0.05  # lines and text, not a blank canvas


def test_foreign_checkpoints_are_refused(tmp_path, capsys):
    for name, write in (("dict", lambda p: torch.save({"weights": torch.zeros(2)}, p)),
                        ("garbage", lambda p: p.write_bytes(b"\x80\x04 not a checkpoint")),
                        ("future", lambda p: torch.save({"format": cs.FORMAT, "config": {"k": 2, "r": 3}}, p))):
        (tmp_path / name).mkdir()
        write(tmp_path / name / cs.CHECKPOINT)
        status, _, err = _status(["coded", "evaluate", "--run", str(tmp_path / name), "--device", "cpu",
                                  "--out", str(tmp_path / "ev")], capsys)
        assert status == 1 and str(tmp_path / name / cs.CHECKPOINT) in err and "Traceback" not in err, err


@pytest.mark.parametrize("dataset,extra", [
    ("mnist", ["--k", "2", "--paradigm", "parity"]),
    ("cifar10", ["--k", "2", "--encoder", "conv", "--base", "resnet18_3stage", "--groups-per-batch", "4"]),
])
def test_train_and_evaluate_from_local_files(tmp_path, capsys, dataset, extra):
    """The loaders behind the command line, on small files written in the data sets' formats;
    evaluate reads them again from where they were moved (--data-dir)."""
    from test_coded import write_cifar, write_mnist

    data = tmp_path / "data"
    if dataset == "mnist":
        write_mnist(str(data), gz=True)
    else:
        write_cifar(str(data), per_batch=6)
    out = str(tmp_path / "run")
    status, _, err = _status([*TRAIN, "--base-epochs", "1", "--epochs", "1", "--dataset", dataset, "--data-dir",
                              str(data), *extra, "--out", out], capsys)
    assert status == 0, err
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert record["config"]["dataset"] == dataset and record["metrics"]["reconstructions"] > 0
    data.rename(tmp_path / "moved")
    status, _, err = _status(["coded", "evaluate", "--run", out, "--device", "cpu", "--out", str(tmp_path / "ev")],
                             capsys)
    assert status == 1 and str(data) in err  # the folder it was trained from is gone, and named
    status, out_text, err = _status(["coded", "evaluate", "--run", out, "--device", "cpu", "--data-dir",
                                     str(tmp_path / "moved"), "--out", str(tmp_path / "ev")], capsys)
    assert status == 0 and json.loads((tmp_path / "ev" / "metrics.json").read_text())["metrics"] == record["metrics"]
