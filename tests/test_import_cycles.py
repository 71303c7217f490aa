"""No two modules of torchutil/ import each other, directly or around a loop.

The graph is read from the source with `ast`: every `import` and `from ... import`, at module
level or inside a function (a lazy import hides a loop, it does not remove one). An edge goes
to the module a statement names: `from torchutil.studies import nas_db` depends on
torchutil.studies.nas_db, not on the package torchutil.studies, whose __init__ Python runs for
any submodule; `from torchutil import peak_flops` depends on torchutil/__init__.py.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "torchutil"
EXTENSIONS = {"torchutil._C"}  # built by setup.py, absent from the source tree


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> source file of every module under `package`."""
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that module `name` (source `path`) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..y import z
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    out.add(sub)
                elif sub not in EXTENSIONS and base in known:
                    out.add(base)
    out.discard(name)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items()}


def test_no_import_cycle_between_torchutil_modules():
    graph = import_graph(PACKAGE)
    assert len(graph) > 50 and graph["torchutil.studies.nas_evaluate"], "the graph was not read"
    loops = {" <-> ".join(c): {m: sorted(graph[m] & set(c)) for m in c} for c in cycles(graph)}
    assert not loops, f"modules of torchutil import each other (module -> what it imports in the loop): {loops}"


@pytest.mark.parametrize("b_source, loop", [
    ("from pkg import a\n", True),                        # b -> a -> b
    ("def f():\n    from pkg.a import x\n", True),       # a lazy import is still a loop
    ("from . import a\n", True),                          # relative
    ("from pkg import c\n", False),                       # b -> c only
    ("import pkg.c\n", False),
])
def test_the_check_finds_a_planted_cycle(tmp_path, b_source, loop):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import y\nx = 1\n")
    (pkg / "b.py").write_text(b_source + "y = 2\n")
    (pkg / "c.py").write_text("import os\n")
    found = cycles(import_graph(pkg))
    assert found == ([["pkg.a", "pkg.b"]] if loop else [])
