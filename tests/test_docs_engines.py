"""docs/engines.md's Python snippets and examples/optuna_nas.py run as written on this machine (a
CPU here), with fewer trials: Optuna's objective with and without matplotlib (the plot is said
to be skipped in one line), and the Ray Tune snippet asking for what the machine has (a GPU asked
for where there is none left the trials pending for ever). Each starts the measuring service, so
each takes ~20 s or more on a 2-core CPU."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "engines.md"
NO_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None  # import matplotlib raises ImportError\n"


def snippet(first_line: str) -> str:
    """The ```python block of docs/engines.md whose code holds `first_line`."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    (block,) = [b for b in blocks if first_line in b]
    return block


def shrunk(code: str, old: str, new: str) -> str:
    assert old in code, f"docs/engines.md's snippet no longer has {old!r}: update this test"
    return code.replace(old, new)


def run(code: str, cwd: Path, timeout: float = 400) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_install_lines_work_from_a_clone():
    text = DOC.read_text()
    assert "torch-utilization[" not in text  # the distribution is not published
    for extra in ("optuna", "ray"):
        assert f'pip install --no-build-isolation ".[{extra}]"' in text


@pytest.mark.slow
def test_the_optuna_snippet_runs_without_matplotlib(tmp_path):
    pytest.importorskip("optuna")
    code = shrunk(snippet("optuna.create_study"), "n_trials=200, n_jobs=4", "n_trials=2, n_jobs=1")
    p = run(NO_MATPLOTLIB + code, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "no Pareto plot: matplotlib is not installed (pip install matplotlib)"
    assert (tmp_path / "nas.db").is_file() and not (tmp_path / "pareto.png").exists()


@pytest.mark.slow
def test_the_optuna_example_runs_and_plots(tmp_path):
    pytest.importorskip("optuna")
    pytest.importorskip("matplotlib")
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "optuna_nas.py"), "--trials", "2", "--jobs", "1"],
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                       timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Pareto front: pareto.png" in p.stdout and (tmp_path / "pareto.png").stat().st_size > 0


@pytest.mark.slow
def test_the_ray_tune_snippet_asks_for_what_the_machine_has(tmp_path):
    pytest.importorskip("ray.tune")
    code = shrunk(snippet("tune.Tuner"), "num_samples=64", "num_samples=2")
    code += "\nprint('trials', len(results), sorted(r.metrics['index'] for r in results))\n"
    p = run(code, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    m = re.search(r"^trials 2 \[(\d+), (\d+)\]$", p.stdout, re.M)
    assert m, p.stdout[-2000:]
