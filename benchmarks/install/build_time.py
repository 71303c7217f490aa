"""Times torchutil's build as a user's first `make demo` meets it, and the rebuild after one
edit, side by side in one run:

- clean: `pip wheel --no-build-isolation --no-deps` of a fresh copy of the tree (setup.py's
  metadata, every compile, the link, the wheel: what `make demo`'s install step waits for,
  apart from pip's editable bookkeeping), with the unity build (the default) and, with
  --per-file, with TORCHUTIL_UNITY=0 (each source its own translation unit);
- rebuild: the same copy built again after touching one file of csrc/core (ninja recompiles the
  one translation unit that includes it, then links).

Each build runs in a new copy (git's tracked files plus the working tree's changes), with the
compiler cache off (TORCH_NO_COMPILER_WRAPPER=1: torch would put ccache in front of the
compiler where it is installed, and a warm cache is no first build). Wall seconds and CPU
seconds (the builds' child processes, user + system) are printed per round, then medians and the
spread (min-max) over --rounds. The machine's load average is printed before each build: a
figure from a loaded machine is not a quiet machine's.

    python benchmarks/install/build_time.py [--rounds 3] [--per-file] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOUCHED = "csrc/core/Roofline.cpp"


def _copy_tree(dest: Path) -> None:
    """The tracked files and the working tree's changes to them, plus untracked, unignored ones."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the children) of one command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"build_time: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def one_round(unity: bool) -> dict[str, float]:
    env = {**os.environ, "TORCH_NO_COMPILER_WRAPPER": "1", "TORCHUTIL_UNITY": "1" if unity else "0"}
    with tempfile.TemporaryDirectory(prefix="torchutil-build-") as tmp:
        src, dist = Path(tmp) / "src", Path(tmp) / "dist"
        src.mkdir()
        _copy_tree(src)
        wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(dist), "."]
        load = os.getloadavg()[0]
        clean_wall, clean_cpu = _timed(wheel, src, env)
        (src / TOUCHED).touch()
        rebuild_wall, rebuild_cpu = _timed(wheel, src, env)
    return {"load_before": load, "clean_wall": clean_wall, "clean_cpu": clean_cpu, "rebuild_wall": rebuild_wall,
            "rebuild_cpu": rebuild_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="builds of each kind (default 3)")
    parser.add_argument("--per-file", action="store_true", help="also time TORCHUTIL_UNITY=0, alternating rounds")
    parser.add_argument("--json", help="write every round's figures here")
    args = parser.parse_args()
    if not 1 <= args.rounds <= 20:
        parser.error(f"--rounds is 1 to 20, got {args.rounds}")
    import torch

    kinds = ["unity", "per-file"] if args.per_file else ["unity"]
    print(f"torchutil build: {platform.node()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"commit {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True).stdout.strip()}")
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for i in range(args.rounds):
        for kind in kinds:  # alternating, so both see the same drift of the machine
            r = one_round(kind == "unity")
            rounds[kind].append(r)
            print(f"  round {i + 1} {kind:8s} load {r['load_before']:.2f}: clean {r['clean_wall']:.1f} s wall "
                  f"({r['clean_cpu']:.0f} s CPU), rebuild after touching {TOUCHED} {r['rebuild_wall']:.1f} s "
                  f"({r['rebuild_cpu']:.0f} s CPU)", flush=True)
    for kind, rs in rounds.items():
        for what in ("clean_wall", "clean_cpu", "rebuild_wall", "rebuild_cpu"):
            v = [r[what] for r in rs]
            print(f"{kind:8s} {what:12s} median {statistics.median(v):6.1f} s  (min {min(v):.1f}, max {max(v):.1f}, "
                  f"n={len(v)})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rounds, f, indent=1)


if __name__ == "__main__":
    main()
