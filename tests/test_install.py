"""Installs that cannot go wrong quietly: the import-time torch check, an isolated build that
stops at once with the fix, and a wheel's metadata (distribution name, torch pin, extras,
console script)."""
from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import torchutil
from torchutil import _ops

ROOT = Path(__file__).resolve().parents[1]


def test_import_refuses_another_torch(monkeypatch):
    _ops.check_torch_version()  # the torch this build was made for: no error
    assert torchutil.build_info()["torch_version"] == torch.__version__
    monkeypatch.setattr(_ops, "_built_torch_version", lambda: "2.13.0+cpu")
    with pytest.raises(ImportError) as info:
        _ops.check_torch_version()
    message = str(info.value)
    assert "2.13.0+cpu" in message and torch.__version__ in message
    assert "pip install --no-build-isolation --force-reinstall ." in message


def test_import_in_a_process_with_another_torch():
    code = "import torch; torch.__version__ = '2.99.0+fake'; import torchutil"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "ImportError: torchutil was built against torch" in p.stderr and "2.99.0+fake" in p.stderr


@pytest.mark.parametrize("fake_torch,found", [
    ("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')", "no torch in it"),
    ("__version__ = '2.14.1'", "torch 2.14.1 in it"),
])
def test_isolated_build_stops_at_once(tmp_path, fake_torch, found):
    """What pip's isolated build environment looks like to setup.py: PEP 517 hooks running with
    PYTHONPATH on a pip-build-env-* overlay, which has no torch or a fetched one."""
    site = tmp_path / "pip-build-env-test" / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(fake_torch + "\n")
    env = {**os.environ, "PYTHONPATH": str(site), "PEP517_BUILD_BACKEND": "setuptools.build_meta"}
    p = subprocess.run([sys.executable, "setup.py", "--version"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode != 0
    assert found in p.stderr and "pip install --no-build-isolation ." in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1  # the one line, no traceback


@pytest.mark.slow
def test_wheel_metadata(tmp_path):
    """Builds a (CPU-only, for speed) wheel from a copy of the tree and reads its metadata."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", "*.so", "cmake-build*", "results", ".pytest_cache"))
    env = {**os.environ, "TORCHUTIL_CUDA": "0"}
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                        "-w", str(tmp_path / "dist"), str(src)], env=env, capture_output=True, text=True,
                       timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.startswith(f"torch_utilization-{torchutil.__version__}-")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = configparser.ConfigParser()
        entry_points.read_string(z.read(f"{info}/entry_points.txt").decode())
    assert "Name: torch-utilization" in metadata.splitlines()
    requires = [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ")]
    public = torch.__version__.split("+")[0]
    assert f"torch=={public}" in requires and "numpy" in requires
    for extra in ("vision", "plot", "timm", "coded", "transformers"):
        assert f"Provides-Extra: {extra}" in metadata
    assert any(r.startswith("torchvision") and "extra == \"vision\"" in r for r in requires)
    assert any(r.startswith("scikit-learn") and "extra == \"coded\"" in r for r in requires)
    assert any(r.startswith("transformers>=5") and "extra == \"transformers\"" in r for r in requires)
    assert entry_points["console_scripts"]["torchutil"] == "torchutil.studies.cli:main"
    assert any(n.startswith("torchutil/_C") and n.endswith(".so") for n in names)
    assert "torchutil/nas/data/nb201_accuracy.csv" in names
    assert "torchutil/nas/data/sweep_h200_auto.csv.gz" in names  # nas correlate/search --db builtin:h200-auto
