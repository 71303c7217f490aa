"""The command line's habits: bad input ends in one message (never a traceback or a silent
substitution), --json - and closed pipes, --version, exit statuses, --retry-failed, progress
without carriage returns in logs, and a nas evaluate killed with SIGKILL."""
from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import torchutil
from torchutil.nas import natsbench as nb
from torchutil.studies import nas_evaluate as ev
from torchutil.studies import survey
from torchutil.studies._common import StageLine
from torchutil.studies.cli import main
from cli_status import status_and_err as _status

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _cli(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "torchutil", *args], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def _row(i: int, **key) -> dict:
    row = {"idx": i, "dataset": "cifar10", "batch": 256, "dtype": "float16", "device": "cuda", "mode": "eager",
           "arch": str(nb.arch_of_index(i)), "device_name": "synthetic", **key}
    row.update({c: 0.01 for c in ev.METRIC_COLUMNS})
    return row


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Bad inputs on disk: a foreign SQLite db, a file that is not SQLite, a results db cut
    short, an empty and a partial results db, a plain file where a folder is expected."""
    tmp = tmp_path_factory.mktemp("bad")
    foreign = sqlite3.connect(tmp / "foreign.sqlite")
    foreign.execute("CREATE TABLE photos (id INTEGER, path TEXT)")
    foreign.commit()
    foreign.close()
    (tmp / "garbage.sqlite").write_bytes(b"SQLite format 3\0" + b"\x13" * 40)
    con = ev.connect(tmp / "full.sqlite")
    ev.insert_rows(con, [_row(i) for i in range(0, 3000)])
    con.close()
    data = (tmp / "full.sqlite").read_bytes()
    (tmp / "truncated.sqlite").write_bytes(data[: len(data) // 3])
    ev.connect(tmp / "empty.sqlite").close()
    con = ev.connect(tmp / "partial.sqlite")
    ev.insert_rows(con, [_row(i) for i in range(50)])
    con.close()
    (tmp / "file").write_text("not a folder")
    return {"tmp": str(tmp), **{p.stem: str(p) for p in tmp.iterdir()}}


# (command line, what the message must name). {name} is a path from the `files` fixture.
BAD = [
    # profile
    ("profile --batch 0", "--batch"),
    ("profile --batch -3", "--batch"),
    ("profile --batch abc", "--batch"),
    ("profile --image-size 0", "--image-size"),
    ("profile --device xpu9", "xpu9"),
    ("profile --device cuda:99", "cuda:99"),
    ("profile --device mps", "mps"),
    ("profile no_such_model --device cpu", "no_such_model"),
    ("profile --dtype float8", "--dtype"),
    ("profile --warmup -1", "--warmup"),
    ("profile --iters 0", "--iters"),
    ("profile --top -1", "--top"),
    ("profile --target-ci 0", "--target-ci"),
    ("profile --target-ci 1.5", "--target-ci"),
    ("profile --max-time nan", "--max-time"),
    ("profile --json {file}/out.json", "--json"),
    ("profile --json {tmp}", "is a directory"),
    ("profile --cuda-graph --timing eager", "contradicts"),
    ("profile --peak bogus", "--peak"),
    ("profile --no-such-flag", "--no-such-flag"),
    ("bogus", "bogus"),
    # nas evaluate
    ("nas evaluate --batch 0", "--batch"),
    ("nas evaluate --indices 5:2", "empty"),
    ("nas evaluate --indices 20000", "20000"),
    ("nas evaluate --indices -1", "-1"),
    ("nas evaluate --indices 0:99999", "99999"),
    ("nas evaluate --indices=-5:", "-5"),
    ("nas evaluate --indices 1:9:2", "step"),
    ("nas evaluate --indices abc", "abc"),
    ("nas evaluate --indices 1,,2", "empty"),
    ("nas evaluate --dataset imagenet", "--dataset"),
    ("nas evaluate --iters 0", "--iters"),
    ("nas evaluate --commit-every 0", "--commit-every"),
    ("nas evaluate --device xpu9", "xpu9"),
    ("nas evaluate --db {file}/x.sqlite", "--db"),
    ("nas evaluate --db {tmp}", "is a directory"),
    ("nas evaluate --db {foreign} --indices 0 --device cpu", "foreign.sqlite"),
    ("nas evaluate --db {garbage} --indices 0 --device cpu", "garbage.sqlite"),
    ("nas evaluate --threads 0", "--threads"),
    ("nas evaluate --threads 2 --device cpu --indices 0", "--threads 2: threads share one GPU"),
    ("nas", "required"),
    # nas merge
    ("nas merge --db {tmp}/merged.sqlite {tmp}/missing.sqlite", "missing.sqlite"),
    ("nas merge --db {tmp}/merged.sqlite {garbage}", "garbage.sqlite"),
    ("nas merge --db {tmp}/merged.sqlite {foreign}", "foreign.sqlite"),
    ("nas merge --db {tmp}/nothing-here.sqlite", "no shards"),
    # nas correlate
    ("nas correlate --db {tmp}/missing.sqlite", "missing.sqlite"),
    ("nas correlate --db {foreign}", "foreign.sqlite"),
    ("nas correlate --db {garbage}", "garbage.sqlite"),
    ("nas correlate --db {truncated}", "truncated.sqlite"),
    ("nas correlate --db {empty} --no-plots --out {tmp}/c", "no measurements"),
    ("nas correlate --db {partial} --csv {tmp}/missing.csv", "missing.csv"),
    ("nas correlate --db {partial} --out {file}/out", "--out"),
    # nas search
    ("nas search --db {tmp}/missing.sqlite", "missing.sqlite"),
    ("nas search --db {partial} --no-plots --out {tmp}/s", "50 of the 15,625"),
    ("nas search --db {garbage}", "garbage.sqlite"),
    ("nas search --seeds 0", "--seeds"),
    ("nas search --seeds a,b", "--seeds"),
    ("nas search --iterations 0", "--iterations"),
    ("nas search --quantile 1.5", "--quantile"),
    ("nas search --lr -1", "--lr"),
    ("nas search --weight nan", "--weight"),
    ("nas search --dtype int8", "--dtype"),
    ("nas search --db {partial} --out {file}", "--out"),
    # survey
    ("survey --batches 0", "--batches"),
    ("survey --batches 1 -8", "--batches"),
    ("survey --image-size 0", "--image-size"),
    ("survey --device xpu9", "xpu9"),
    ("survey --dtypes float64", "--dtypes"),
    ("survey --iters 0", "--iters"),
    ("survey --out {file}", "--out"),
    ("survey --report-only --out {tmp}/nothing", "no survey.jsonl in"),
    ("survey --models no_such_model --batches 1 --device cpu --no-progress --out {tmp}/sv", "no_such_model"),
    # fold-bench
    ("fold-bench --f 0", "--f"),
    ("fold-bench --batch 0", "--batch"),
    ("fold-bench --multiple-of 0", "--multiple-of"),
    ("fold-bench --out {file}/x", "--out"),
    ("fold-bench --models nope --device cpu --out {tmp}/fb", "nope"),
    ("fold-bench --models spec_2conv_32 --batch 2 --f 3 --device cpu --out {tmp}/fb", "batch"),
    # coded
    ("coded", "required"),
    ("coded train --k 1", "--k"),
    ("coded train --k two", "--k"),
    ("coded train --dataset imagenet", "--dataset"),
    ("coded train --paradigm magic", "--paradigm"),
    ("coded train --loss l1", "--loss"),
    ("coded train --epochs 0", "--epochs"),
    ("coded train --lr 0", "--lr"),
    ("coded train --out {file}/x", "--out"),
    ("coded train --dataset mnist --data-dir {tmp}/no-data", "no-data"),
    ("coded train --dataset mnist --device cpu --out {tmp}/cm", "--data-dir"),
    ("coded train --dataset mnist --data-dir {tmp} --device cpu --out {tmp}/cm", "train-images-idx3-ubyte"),
    ("coded train --dataset cifar10 --data-dir {tmp} --device cpu --out {tmp}/cm", "data_batch_1"),
    ("coded train --data-dir {tmp} --device cpu --out {tmp}/cm", "digits"),
    ("coded train --encoder sum --device cpu --out {tmp}/cm", "'sum'"),
    ("coded train --paradigm parity --encoder concat --k 3 --device cpu --out {tmp}/cm", "k = 3"),
    ("coded evaluate --run {tmp}/no-run", "no-run"),
    ("coded evaluate --run {tmp} --device cpu --out {tmp}/ce", "no training run"),
    ("coded cost --runs {tmp}/no-run", "no-run"),
    ("coded simulate", "--cost"),
    ("coded simulate --service-seconds 0", "--service-seconds"),
    ("coded simulate --service-seconds 1 --loads 1.5", "--loads"),
    ("coded simulate --service-seconds 1 --straggler-probability 1", "--straggler-probability"),
    ("coded simulate --service-seconds 1 --slowdown 0.5", "--slowdown"),
    ("coded simulate --cost {garbage} --out {tmp}/cs", "garbage.sqlite"),
    ("coded simulate --cost {garbage} --service-seconds 1", "contradicts"),
    ("coded serve --run {tmp}/no-run", "no-run"),
    ("coded serve --queries 0", "--queries"),
    ("coded serve --load 1.5", "--load"),
    ("coded serve --straggler-burst 0", "--straggler-burst"),
    ("coded serve --run {tmp} --out {tmp}/sv", "no training run"),
]


@pytest.mark.parametrize("line,names", BAD, ids=[b[0] for b in BAD])
def test_bad_command_line(line, names, files, capsys):
    argv = [word.format(**files) for word in line.split()]
    status, err = _status(argv, capsys)
    assert status != 0
    assert names in err, err
    assert "Traceback" not in err
    assert not os.path.exists(os.path.join(files["tmp"], "missing.sqlite"))  # a reader creates no db
    assert not os.path.exists(os.path.join(files["tmp"], "cm"))  # a refused coded train writes nothing


def test_bad_lines_end_without_a_traceback_in_a_process(files):
    """The same as the interpreter runs them, for a few lines that fail at different stages."""
    for line in ("nas evaluate --indices 5:2", "nas correlate --db {garbage}", "profile --device xpu9"):
        p = _cli(*[w.format(**files) for w in line.split()])
        out, err = p.communicate(timeout=120)
        assert p.returncode in (1, 2) and "Traceback" not in err and err.strip(), (line, err)


def test_version_and_entry_point(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"torchutil {torchutil.__version__} (torch ") and "cuda " in out
    # setup.py's console script `torchutil` calls this function and exits with what it returns.
    from importlib import import_module

    assert import_module("torchutil.studies.cli").main is main


def test_closed_pipe_is_quiet(files):
    """`torchutil ... | head`: the reader is gone before the output is written."""
    for args in (["--version"], ["nas", "correlate", "--db", files["partial"], "--no-plots", "--out",
                                 os.path.join(files["tmp"], "pipe")]):
        p = _cli(*args)
        p.stdout.close()
        err = p.stderr.read()
        assert p.wait(timeout=120) == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_json_to_stdout(capsys):
    status = main(["profile", "resnet18", "--device", "cpu", "--batch", "1", "--image-size", "32",
                   "--warmup", "0", "--iters", "1", "--json", "-"])
    captured = capsys.readouterr()
    assert status == 0 and not os.path.exists("-")
    result = json.loads(captured.out)  # stdout holds the JSON alone; the text went to stderr
    assert result["summary"]["batch_size"] == 1 and "utilization" in captured.err


def _fake_measure(fail_models):
    def measure(config, model_name, model, batch, dtype, mode, bandwidth):
        if model_name in fail_models:
            raise RuntimeError("out of memory (faked)")
        return {"summary": {"utilization": 0.5, "inputs_per_second": 10.0, "flops": 1.0, "seconds": 1.0,
                            "arithmetic_intensity": 1.0, "peak_flops_per_second": 1.0}, "ops": [],
                "bounds": {}, "ridge_intensity": 1.0}
    return measure


def test_survey_exit_status_and_retry_failed(tmp_path, monkeypatch, capsys):
    args = ["survey", "--models", "squeezenet1_1", "--batches", "1", "2", "--device", "cpu", "--no-progress",
            "--out", str(tmp_path)]
    monkeypatch.setattr(survey.run, "_measure", _fake_measure({"squeezenet1_1"}))
    monkeypatch.setattr(survey, "write_outputs", lambda rows, config, plots=True: ["survey.csv"])
    assert main(args) == 1
    assert "2 configuration(s) failed" in capsys.readouterr().err
    assert main(args) == 1  # a rerun skips failures: still failed
    monkeypatch.setattr(survey.run, "_measure", _fake_measure(set()))
    assert main([*args, "--retry-failed"]) == 0
    rows = survey.load_results(str(tmp_path))
    assert [(r["batch"], r["status"]) for r in rows] == [(1, "ok"), (2, "ok")]
    assert len((tmp_path / survey.RESULTS).read_text().splitlines()) == 4  # appended, never rewritten


def test_survey_jsonl_repair(tmp_path, monkeypatch):
    """A cut-short last line does not swallow the next row; bad lines are skipped with a
    warning, their configurations rerun, and no good row is lost."""
    good = {"model": "squeezenet1_1", "batch": 1, "dtype": "float32", "mode": "eager", "status": "ok",
            "summary": {"utilization": 0.1}}
    lines = [json.dumps(good), "[1, 2]", json.dumps({"model": "x"}),
             json.dumps({**good, "batch": 0}), '{"model": "squeezenet1_1", "batch": 2, "dt']
    (tmp_path / survey.RESULTS).write_text("\n".join(lines))  # no newline after the cut line
    with pytest.warns(UserWarning, match="skipped 4 unusable line"):
        assert survey.load_results(str(tmp_path)) == [good]
    monkeypatch.setattr(survey.run, "_measure", _fake_measure(set()))
    config = survey.SurveyConfig(models=["squeezenet1_1"], batches=[1, 2], dtypes=["float32"], modes=["eager"],
                                 out=str(tmp_path), progress=False)
    with pytest.warns(UserWarning):
        rows = survey.run_survey(config)
    assert [(r["batch"], r["status"]) for r in rows] == [(1, "ok"), (2, "ok")]
    with pytest.warns(UserWarning, match="skipped 4"):  # the same bad lines, nothing new
        assert [r["batch"] for r in survey.load_results(str(tmp_path))] == [1, 2]


def test_sqlite_errors_name_the_file(files):
    with pytest.raises(ValueError, match="garbage.sqlite"):
        ev.read_rows(files["garbage"])
    with pytest.raises(ValueError, match="truncated.sqlite"):
        ev.read_rows(files["truncated"])
    with pytest.raises(ValueError, match="foreign.sqlite.*something else"):
        ev.connect(files["foreign"])
    with pytest.raises(ValueError, match="no results db"):
        ev.read_rows(os.path.join(files["tmp"], "absent.sqlite"))
    assert not os.path.exists(os.path.join(files["tmp"], "absent.sqlite"))


def _count(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_evaluate_killed_loses_at_most_the_cell_in_flight(tmp_path):
    db = tmp_path / "results.sqlite"
    args = ["nas", "evaluate", "--db", str(db), "--device", "cpu", "--dataset", "ImageNet16-120", "--batch", "1",
            "--warmup", "0", "--iters", "1"]
    p = _cli(*args, "--indices", "0:2000")
    deadline = time.monotonic() + 240
    seen = 0
    while seen < 5 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
        seen = _count(db)
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    assert seen >= 5, "the sweep did not commit rows as it went"
    kept = _count(db)
    assert kept >= seen  # every row seen committed survived the kill
    p = _cli(*args, "--indices", f"0:{kept + 2}")
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err
    assert f"resuming {db}: {kept:,} of these {kept + 2:,} cells are measured already" in err
    assert "evaluated 2 archs" in out and _count(db) == kept + 2


def test_without_torchvision_each_name_says_what_it_needs(monkeypatch, tmp_path, capsys):
    """Where torchvision is missing (the CPU wheel of torch), a torchvision name says it needs it
    and names the pip line; a typo gets the near names, never "needs torchvision"; --help marks the
    torchvision names; the survey knows the CNNs of torchutil.models."""
    monkeypatch.setitem(sys.modules, "torchvision", None)  # import torchvision raises ImportError
    monkeypatch.setitem(sys.modules, "torchvision.models.resnet", None)  # imported already by other tests
    for name in ("resnet18", "resnet18_cifar"):
        status, err = _status(["profile", name, "--device", "cpu"], capsys)
        assert status == 1 and f"{name} needs torchvision (pip install torchvision==0." in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    for typo, near in (("spec_4conv64", "did you mean spec_4conv_64"), ("resnet18_cifr", "did you mean resnet18_cifar"),
                       ("foo", "the names are spec_2conv_32")):
        status, err = _status(["profile", typo, "--device", "cpu"], capsys)
        assert status == 1 and near in err and "needs torchvision" not in err, err
    status, err = _status(["survey", "--models", "spec_4conv64", "--device", "cpu", "--out", str(tmp_path)], capsys)
    assert status == 1 and "did you mean spec_4conv_64" in err, err
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "need torchvision, which is not installed" in help_text
    assert help_text.index("resnet18_cifar") > help_text.index("(default spec_4conv_64)")
    assert survey.default_models() == list(torchutil.models.SPECIALIZED)


def test_torchvision_names_match_the_installed_torchvision():
    """The packaged list and the pip line are torchvision's own, where it is installed."""
    tv = pytest.importorskip("torchvision")
    assert sorted(torchutil.models.TORCHVISION_CLASSIFIERS) == sorted(tv.models.list_models(module=tv.models))
    minor = ".".join(tv.__version__.split(".")[:2])
    assert torchutil.models.torchvision_hint() == f"pip install torchvision=={minor}.*"


def test_survey_runs_a_torch_only_model(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "torchvision", None)
    monkeypatch.setattr(survey, "write_outputs", lambda rows, config, plots=True: ["survey.csv"])
    args = ["survey", "--models", "spec_2conv_32", "--batches", "1", "--device", "cpu", "--warmup", "0",
            "--iters", "1", "--no-progress", "--out", str(tmp_path)]
    status, err = _status(args, capsys)
    assert status == 0, err
    (row,) = survey.load_results(str(tmp_path))
    assert row["status"] == "ok" and row["image_size"] == 32 and row["summary"]["flops"] > 0


def test_profile_model_example_runs_without_torchvision():
    code = ("import runpy, sys; sys.modules['torchvision'] = None; "
            "runpy.run_path('examples/profile_model.py', run_name='__main__')")
    p = subprocess.run([sys.executable, "-c", code], env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "top 5 ops by FLOPs" in p.stdout and "aten::convolution" in p.stdout


def test_profile_default_model_without_torchvision(monkeypatch, capsys):
    """With the CPU wheel of torch there is no torchvision: `torchutil profile` (what `make demo`
    runs) then profiles a CNN of torchutil.models at its own input size, and says why."""
    monkeypatch.setitem(sys.modules, "torchvision", None)  # import torchvision raises ImportError
    status = main(["profile", "--device", "cpu", "--batch", "1", "--warmup", "0", "--iters", "1", "--json", "-"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "torchvision is not installed, so the default model is spec_4conv_64" in captured.err
    assert "spec_4conv_64, batch 1, float32" in captured.err
    summary = json.loads(captured.out)["summary"]
    # Oracle, a closed form: 2 x 9 x c_in x c_out x H x W per 3x3 conv (3->32 at 64x64, 32->64
    # at 32x32, 64->128 at 16x16, 128->128 at 8x8) and 2 x 128 x 4 for the Linear.
    convs = [(3, 32, 64), (32, 64, 32), (64, 128, 16), (128, 128, 8)]
    assert summary["matrix_flops"] == sum(2 * 9 * i * o * s * s for i, o, s in convs) + 2 * 128 * 4


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_stage_line_on_a_terminal_only():
    tty = _Terminal()
    with StageLine(stream=tty, every=0.01).stage("building x"):
        time.sleep(0.05)
    assert "\r| building x (0 s)\033[K" in tty.getvalue() and tty.getvalue().endswith("\r\033[K")
    for stream, enabled in ((io.StringIO(), True), (_Terminal(), False)):
        with StageLine(enabled=enabled, stream=stream).stage("building x"):
            pass
        assert stream.getvalue() == ""


@pytest.mark.parametrize("json_out", [False, True])
def test_profile_shows_its_stages_on_a_terminal_and_not_under_json(json_out, monkeypatch, capsys):
    tty = _Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    argv = ["profile", "spec_2conv_32", "--device", "cpu", "--batch", "1", "--warmup", "0", "--iters", "1"]
    assert main(argv + (["--json", "-"] if json_out else [])) == 0
    stages = ("building spec_2conv_32", "finding the peak FLOP/s of cpu", "counting and timing spec_2conv_32")
    if json_out:
        assert "\r" not in tty.getvalue() and json.loads(capsys.readouterr().out)["summary"]["flops"] > 0
    else:
        assert all(f" {s}" in tty.getvalue() for s in stages), tty.getvalue()
        assert "\r" not in capsys.readouterr().out
