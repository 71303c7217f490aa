"""One policy for a missing matplotlib in every command that plots (nas correlate, nas search,
coded simulate, survey): the plots are left out, everything else is written, the command
succeeds, and one note, the same in each, says so; --no-plots silences it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from results_db import synthetic_rows, write_db

from torchutil.nas import natsbench as nb
from torchutil.studies import survey
from torchutil.studies._common import NO_MATPLOTLIB
from torchutil.studies.cli import main

# (command line, a file it must still write, whether it takes --no-plots)
COMMANDS = [
    ("nas correlate --db {db} --out {out}", "correlations.csv", True),
    ("nas search --db {db} --seeds 1 --iterations 5 --out {out}", "summary.csv", True),
    ("coded simulate --service-seconds 0.001 --queries 2000 --loads 0.5 --out {out}", "sim.json", True),
    ("survey --report-only --no-progress --out {survey}", "report.html", False),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plots")
    db = write_db(tmp / "full.sqlite", synthetic_rows(range(nb.num_archs())))
    # A survey row as run_survey writes it, with a stand-in measurement (no model is profiled).
    mp = pytest.MonkeyPatch()
    mp.setattr(survey.run, "_measure", lambda *a: {
        "summary": {"utilization": 0.5, "inputs_per_second": 10.0, "flops": 1.0, "seconds": 1.0,
                    "arithmetic_intensity": 1.0, "peak_flops_per_second": 1.0},
        "ops": [], "bounds": {}, "ridge_intensity": 1.0})
    config = survey.SurveyConfig(models=["squeezenet1_1"], batches=[1], dtypes=["float32"], modes=["eager"],
                                 out=str(tmp / "survey"), progress=False)
    survey.run_survey(config)
    mp.undo()
    return {"db": str(db), "survey": str(tmp / "survey"), "tmp": tmp}


@pytest.fixture
def no_matplotlib(monkeypatch):
    for name in ("matplotlib", "matplotlib.backends.backend_agg", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ImportError


@pytest.mark.parametrize("line,written,no_plots_flag", COMMANDS, ids=[c[0].split(" --")[0] for c in COMMANDS])
def test_missing_matplotlib_leaves_out_the_plots_with_one_note(line, written, no_plots_flag, inputs,
                                                               no_matplotlib, tmp_path, capsys):
    out = tmp_path / "out"
    argv = line.format(db=inputs["db"], survey=inputs["survey"], out=out).split()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.count(f"note: {NO_MATPLOTLIB}") == 1, err
    folder = out if "{out}" in line else Path(inputs["survey"])
    assert (folder / written).is_file()
    assert not list(folder.glob("*.png"))
    if no_plots_flag:
        assert main([*argv, "--no-plots"]) == 0
        assert NO_MATPLOTLIB not in capsys.readouterr().err
