"""Installs that cannot go wrong quietly: the import-time torch check, an isolated build that
stops at once with the fix, the sdist (made without torch, holding every file a build needs and
nothing else), and a wheel's metadata (distribution name, licence, torch pin, extras, console
script)."""
from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import tarfile
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


# The hook runners of pip (PEP517_BUILD_BACKEND) and of `python -m build`
# (_PYPROJECT_HOOKS_BUILD_BACKEND) name the backend in the environment of setup.py.
HOOK_RUNNERS = ["PEP517_BUILD_BACKEND", "_PYPROJECT_HOOKS_BUILD_BACKEND"]
NO_TORCH = "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"


def _site_with_torch(folder: Path, torch_init: str) -> Path:
    """A folder for PYTHONPATH whose `torch` package is torch_init (shadowing the real one)."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text(torch_init)
    return folder


@pytest.mark.parametrize("runner", HOOK_RUNNERS)
@pytest.mark.parametrize("command", ["dist_info", "bdist_wheel"])  # prepare_metadata_for_build_wheel, build_wheel
@pytest.mark.parametrize("fake_torch,found", [
    (NO_TORCH, "has no torch"),
    ("__version__ = '2.14.1'\n", "fetched its own torch 2.14.1"),
])
def test_isolated_wheel_build_stops_at_once(tmp_path, runner, command, fake_torch, found):
    """What an isolated build environment looks like to setup.py: PEP 517 hooks running with
    PYTHONPATH on a pip-build-env-* overlay, which has no torch or a fetched one."""
    site = _site_with_torch(tmp_path / "pip-build-env-test" / "site", fake_torch)
    env = {**os.environ, "PYTHONPATH": str(site), runner: "setuptools.build_meta"}
    p = subprocess.run([sys.executable, "setup.py", command], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode != 0
    assert found in p.stderr and "pip install --no-build-isolation ." in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1  # the one line, no traceback


def test_build_without_torch_says_so(tmp_path):
    """setup.py run by hand in a Python without torch names that Python."""
    site = _site_with_torch(tmp_path / "site", NO_TORCH)
    env = {k: v for k, v in os.environ.items() if k not in HOOK_RUNNERS}
    p = subprocess.run([sys.executable, "setup.py", "build_ext"], cwd=ROOT, env={**env, "PYTHONPATH": str(site)},
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert f"torch is not installed in {sys.executable}" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


CSRC = ROOT / "csrc"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def _tree_files(*patterns: str) -> set[str]:
    """The files of this tree that a clone would have (tracked and new ones, not the ignored)."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    return {f for f in files if (ROOT / f).is_file()}


def _includes(files: set[str]) -> tuple[set[str], set[str]]:
    """(the headers of csrc/ that files reach by #include, the other names they include).
    A name is looked up as the compiler does with setup.py's one include folder: beside the
    including file, then in csrc/. A quoted name found in neither would fail the build."""
    headers, others, todo = set(), set(), sorted(files)
    while todo:
        path = ROOT / todo.pop()
        for quote, name in INCLUDE.findall(path.read_text()):
            found = next((c for c in (path.parent / name, CSRC / name) if c.is_file()), None)
            if found is None:
                assert quote == "<", f"{path.relative_to(ROOT)} includes \"{name}\", which is not in csrc/"
                others.add(name)
                continue
            header = found.resolve().relative_to(ROOT).as_posix()
            if header not in headers:
                headers.add(header)
                todo.append(header)
    return headers, others


def test_core_includes_no_torch():
    """csrc/core stays torch-free (GoogleTest links it without torch): it includes only its own
    headers and the standard library's."""
    headers, others = _includes(_tree_files("csrc/core/*.cpp"))
    assert {h for h in headers if not h.startswith("csrc/core/")} == set()
    assert {n for n in others if re.match(r"(torch|ATen|c10|caffe2|pybind11|Python\.h|cuda|cupti)", n)} == set()


def _make_sdist(out: Path) -> Path:
    """The sdist of a copy of this tree, made as PEP 517 frontends make it
    (get_requires_for_build_sdist, then build_sdist) by a Python in which `import torch` fails,
    like an isolated build environment. The copy holds the files a clone would have (tracked and
    new ones: setuptools would also take every file named in a stale egg-info's SOURCES.txt),
    and the build outputs of a developer's tree, which must not go in."""
    src = out / "src"
    for name in _tree_files():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    for output in ["build/ext/csrc/core/Metrics.o", "build/ext/torchutil.cmake", "cmake-build/CMakeCache.txt",
                   "torchutil/_C.cpython-311-x86_64-linux-gnu.so", "torchutil/__pycache__/fields.cpython-311.pyc"]:
        (src / output).parent.mkdir(parents=True, exist_ok=True)
        (src / output).write_text("")
    site = _site_with_torch(out / "no-torch", NO_TORCH)
    # (build_meta rewrites sys.argv: the folder is read first.)
    code = ("import sys; out = sys.argv[1]; from setuptools import build_meta as b; "
            "assert b.get_requires_for_build_sdist() == []; print(b.build_sdist(out))")
    p = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": str(site), HOOK_RUNNERS[1]: "setuptools.build_meta"})
    assert p.returncode == 0, p.stderr[-3000:]
    return out / p.stdout.split()[-1]


def test_sdist_holds_what_the_build_needs(tmp_path):
    """The sdist's files against what setup.py compiles (every source of csrc/), every header
    those reach by #include, the package (every file of torchutil/ in the tree) and the project
    files; nothing else (build/, cmake-build/, objects, the built module, tests)."""
    sdist = _make_sdist(tmp_path)
    assert sdist.name == f"torch_utilization-{torchutil.__version__}.tar.gz"
    with tarfile.open(sdist) as tar:
        top = f"torch_utilization-{torchutil.__version__}/"
        names = {m.name.removeprefix(top) for m in tar.getmembers() if m.isfile()}
        pkg_info = tar.extractfile(top + "PKG-INFO").read().decode()
    # What setuptools writes for any sdist: its metadata and the egg-info beside it.
    names = {n for n in names if n not in ("PKG-INFO", "setup.cfg") and not n.startswith("torch_utilization.egg-info/")}
    sources = _tree_files("csrc/*.cpp")
    headers, _ = _includes(sources)
    expected = sources | headers | _tree_files("torchutil") | {"setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE"}
    assert names - expected == set(), "in the sdist but not needed by the build"
    assert expected - names == set(), "needed by the build but missing from the sdist"
    assert {"Name: torch-utilization", "License-Expression: BSD-3-Clause", "License-File: LICENSE",
            "Requires-Dist: torch", "Requires-Dist: numpy",
            "Description-Content-Type: text/markdown"} <= set(pkg_info.splitlines())
    # The long description is the README (the package index shows it), after the headers.
    readme = (ROOT / "README.md").read_text()
    assert pkg_info.split("\n\n", 1)[1].strip() == readme.strip()


@pytest.mark.slow
def test_wheel_metadata(tmp_path):
    """Builds a wheel of this tree, as `pip install --no-build-isolation .` does, and reads its
    metadata. The build reuses build/ext (a tree built before compiles nothing here); that the
    sdist holds all a build needs is test_sdist_holds_what_the_build_needs's part."""
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                        "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.startswith(f"torch_utilization-{torchutil.__version__}-")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = configparser.ConfigParser()
        entry_points.read_string(z.read(f"{info}/entry_points.txt").decode())
    assert {"Name: torch-utilization", "License-Expression: BSD-3-Clause"} <= set(metadata.splitlines())
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
    assert f"{info}/licenses/LICENSE" in names
