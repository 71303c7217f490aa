"""The layers stand on the ones below them, never on those above.

Python: the library (torchutil's own modules, torchutil.nas, torchutil.coded, ...) never imports
the studies (torchutil.studies: the survey, fold-bench, the NAS studies and the command line),
which stand on the library. The one exception is torchutil/__main__.py, the program's entry
point: `python -m torchutil` runs the command line, which is a study's, not the library's.
Checked twice: statically (every import statement of every library file, read with `ast`, lazy
ones included) and at run time (every library module imported in a fresh interpreter, after which
no torchutil.studies module may be loaded).

C++: csrc/core includes only csrc/core and the standard library (it is compiled and tested
without torch; tests/test_install.py follows its includes into the rest of csrc/).
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "torchutil"
STUDIES = "torchutil.studies"
# The program's entry point, which runs the command line (torchutil.studies.cli): not the library.
ENTRY_POINT = PACKAGE / "__main__.py"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def library_files() -> list[Path]:
    """Every Python file of the package outside torchutil/studies/, the entry point excepted."""
    files = sorted(p for p in PACKAGE.rglob("*.py")
                   if (PACKAGE / "studies") not in p.parents and p != ENTRY_POINT)
    assert len(files) > 20, files  # the package is where this test thinks it is
    return files


def imported_names(path: Path, source: str | None = None) -> set[str]:
    """The dotted names the import statements of the package's file `path` (its text, or
    `source`) name, relative ones resolved, each `from a import b` as both a and a.b (b may be a
    module), and the literal names given to import_module() or __import__()."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    source = path.read_text() if source is None else source
    out: set[str] = set()
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[: len(parts) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))
              and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.add(node.args[0].value)
    return out


def _is_studies(name: str) -> bool:
    return name == STUDIES or name.startswith(STUDIES + ".")


def test_imported_names_sees_every_form_of_import():
    """The static check's reader finds the studies however a statement of torchutil/nas names them."""
    path = PACKAGE / "nas" / "sample.py"  # not read: the sources are given
    forms = {
        "import torchutil.studies.nas_db": True,
        "from torchutil.studies import nas_db": True,
        "from torchutil import studies": True,
        "from ..studies._common import nas_error": True,
        "def f():\n    from torchutil.studies.nas_parallel import _Gate": True,
        "importlib.import_module('torchutil.studies.cli')": True,
        "from torchutil.nas.errors import nas_error": False,
        "from . import studies_like": False,
        "from ..nas import cells": False,
    }
    for source, expected in forms.items():
        names = imported_names(path, source)
        assert any(_is_studies(n) for n in names) is expected, (source, names)


def test_the_library_never_imports_the_studies_statically():
    offenders = {str(p.relative_to(ROOT)): sorted(n for n in imported_names(p) if _is_studies(n))
                 for p in library_files()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_entry_point_is_the_one_exception():
    """__main__.py runs the command line; if it stopped, the exception should go too."""
    assert any(_is_studies(n) for n in imported_names(ENTRY_POINT))


def test_the_library_never_imports_the_studies_at_run_time():
    """Each library module imported in turn in a fresh interpreter: the first after whose import a
    torchutil.studies module is loaded is named."""
    modules = [_module_name(p) for p in library_files()]
    script = f"""
import importlib, json, sys
out = {{"loaded": [], "first": None}}
for name in {modules!r}:
    importlib.import_module(name)
    studies = sorted(m for m in sys.modules if m == {STUDIES!r} or m.startswith({STUDIES + "."!r}))
    out["loaded"].append(name)
    if studies:
        out["first"] = [name, studies]
        break
print(json.dumps(out))
"""
    p = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["first"] is None
    assert out["loaded"] == modules


# The C++ standard library's headers (C++20), the C ones included, which csrc/core may use.
STANDARD_HEADERS = frozenset("""
algorithm any array atomic barrier bit bitset charconv chrono codecvt compare complex concepts
condition_variable coroutine deque exception execution filesystem format forward_list fstream
functional future initializer_list iomanip ios iosfwd iostream istream iterator latch limits list
locale map memory memory_resource mutex new numbers numeric optional ostream queue random ranges
ratio regex scoped_allocator semaphore set shared_mutex source_location span sstream stack
stdexcept stop_token streambuf string string_view syncstream system_error thread tuple type_traits
typeindex typeinfo unordered_map unordered_set utility valarray variant vector version
cassert cctype cerrno cfenv cfloat cinttypes climits clocale cmath csetjmp csignal cstdarg cstddef
cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype
""".split())
# What the platform gives beside it, and which core files use it: POSIX file locking
# (FileLock.cpp) and the C++ ABI's demangler (KernelName.cpp). Neither is a library to link.
PLATFORM_HEADERS = {"fcntl.h": "FileLock.cpp", "sys/file.h": "FileLock.cpp", "unistd.h": "FileLock.cpp",
                    "cxxabi.h": "KernelName.cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def core_includes() -> dict[str, list[tuple[str, str]]]:
    """Every csrc/core file's #include lines: file name -> [(quote, name)]."""
    files = sorted((ROOT / "csrc" / "core").glob("*.[ch]*"))
    assert len(files) > 30, files
    return {f.name: INCLUDE.findall(f.read_text()) for f in files}


def test_core_includes_only_core_and_the_standard_library():
    wrong = []
    for file, includes in core_includes().items():
        for quote, name in includes:
            if quote == '"':
                ok = name.startswith("core/") and (ROOT / "csrc" / name).is_file()
            else:
                ok = name in STANDARD_HEADERS or PLATFORM_HEADERS.get(name) == file
            if not ok:
                wrong.append(f"{file}: #include {quote}{name}{'>' if quote == '<' else quote}")
    assert wrong == []


def test_the_platform_headers_listed_are_still_used():
    """A platform header no core file includes any more leaves the allowance."""
    used = {(name, file) for file, includes in core_includes().items() for _, name in includes}
    assert {(name, file) for name, file in PLATFORM_HEADERS.items()} <= used


# ---- the C++ -> Python edge ------------------------------------------------------------------------

def test_the_cpp_imports_no_module_of_the_package():
    """The profile calls into torchutil only through the callbacks the package registers."""
    found = [f"{p.relative_to(ROOT)}: {m}" for p in sorted((ROOT / "csrc").rglob("*.[ch]*"))
             for m in re.findall(r'import\(\s*"torchutil[^"]*"', p.read_text())]
    assert found == []


def test_the_callbacks_are_registered_when_torchutil_is_imported():
    import torchutil
    from torchutil import _C, _eager, _inductor

    assert torchutil._ops._C is _C
    assert _C._callbacks() == {"inductor_recording": _inductor.Recording, "run_eager": _eager.run_eager,
                               "uncounted_reason": _eager.uncounted_reason}


def test_a_callback_is_refused_by_name_and_type():
    import pytest

    from torchutil import _C

    with pytest.raises(ValueError, match=r"^torchutil: no Python callback is called 'recording'; the callbacks are "
                                         r"'inductor_recording', 'run_eager', 'uncounted_reason'$"):
        _C._set_callback("recording", print)
    with pytest.raises(TypeError, match=r"^torchutil: the Python callback 'run_eager' must be callable, got int$"):
        _C._set_callback("run_eager", 3)


def test_a_compiled_model_without_its_callback_names_it_and_runs_once_it_is_back():
    """torch.compile's eager backend: an OptimizedModule (whose count runs run_eager) with no
    Inductor compile to wait for."""
    import pytest
    import torch

    from torchutil import _C

    model = torch.compile(torch.nn.Linear(8, 4), backend="eager")
    x = torch.randn(2, 8)
    run_eager = _C._callbacks()["run_eager"]
    _C._set_callback("run_eager", None)
    try:
        assert _C._callbacks()["run_eager"] is None
        with pytest.raises(RuntimeError, match=r"torchutil: the Python callback 'run_eager' is not registered: "
                                               r"torchutil/_eager.py registers it"):
            torch.ops.util.profile(model, x, warmup=0, iters=1, peak_flops=1e12)
    finally:
        _C._set_callback("run_eager", run_eager)
    summary = torch.ops.util.profile(model, x, warmup=0, iters=1, peak_flops=1e12)
    import torchutil

    assert torchutil.field(summary, "flops").item() == 2 * 2 * 8 * 4 + 2 * 4  # the matmul's 2 x MAC, the bias add
