"""The wheels benchmarks/engines.py needs on a GPU machine that cannot download: Optuna and Ray
(pinned as `make test` installs them) with their dependencies, for CPython 3.12 on x86-64 Linux,
into .whl/ (git-ignored; carry it). Ray's wheel is 75.6 MiB, over what a device call carries
(64 MiB in all), and 30.7 MiB of it is ray/jars/ray_dist.jar, Ray's Java workers: the copy made
here leaves the jar out (and its line in RECORD), which Python-only Ray never loads.

    python benchmarks/engine_wheels.py                   # then carry .whl/
    pip install --no-index --find-links .whl optuna ray  # on the GPU machine

numpy, which torch brings, is not downloaded.
"""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

# The checkout's root, wherever under benchmarks/ this file lives.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "torchutil").is_dir())
PINS = ("optuna==5.1.0", "ray==2.60.0")
LEAVE_OUT = "ray/jars/"


def strip(wheel: Path) -> Path:
    """wheel without LEAVE_OUT's files (RECORD too), in place."""
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.startswith(LEAVE_OUT):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True)
                                if not line.startswith(LEAVE_OUT.encode()))
            dst.writestr(info, data)
    tmp.replace(wheel)
    return wheel


def main() -> None:
    out = ROOT / ".whl"
    out.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", *PINS, "--only-binary=:all:", "--python-version", "3.12",
                    "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform",
                    "manylinux_2_28_x86_64", "--platform", "any", "-d", str(out)], check=True)
    for numpy in out.glob("numpy-*.whl"):
        numpy.unlink()
    for ray in out.glob("ray-*.whl"):
        strip(ray)
    total = 0
    for wheel in sorted(out.glob("*.whl"), key=lambda p: -p.stat().st_size):
        total += wheel.stat().st_size
        print(f"{wheel.stat().st_size / 2**20:7.2f} MiB  {wheel.name}")
    print(f"{total / 2**20:7.2f} MiB in {out}")


if __name__ == "__main__":
    main()
