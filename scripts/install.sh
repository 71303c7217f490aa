#!/usr/bin/env bash
# Installs what torchutil needs on a fresh Debian/Ubuntu machine and builds it in place
# (editable install, so the tests and the examples see the built extension).
#   system: a C++ compiler, CMake, Ninja, GoogleTest (libgtest-dev), clang-format (the C++
#           format check of scripts/test.sh), chromium (the survey test screenshots its HTML
#           report)
#   Python: torch + torchvision (only if torch is missing; TORCHUTIL_TORCH_SPEC overrides
#           which), pytest, ruff (the lint step of scripts/test.sh), matplotlib (the survey's
#           plots; optional for users), scikit-learn (the digits data of torchutil.coded;
#           optional for users)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCHUTIL_TORCH_SPEC:-"torch==2.14.1 torchvision==0.29.1"}

missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
command -v clang-format >/dev/null || missing+=(clang-format)
# The survey test renders report.html in a headless browser.
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install: apt-get install ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -q
  $sudo apt-get install -y -q "${missing[@]}"
fi

if ! "$PYTHON" -c "import torch, torchvision" 2>/dev/null; then
  echo "install: pip install $TORCH_SPEC"
  # shellcheck disable=SC2086
  "$PYTHON" -m pip install -q $TORCH_SPEC
fi
"$PYTHON" -c "import pytest" 2>/dev/null || "$PYTHON" -m pip install -q pytest
"$PYTHON" -m ruff --version >/dev/null 2>&1 || "$PYTHON" -m pip install -q ruff
# Optional for users (the `plot` extra), needed by the survey tests: its PNG plots.
"$PYTHON" -c "import matplotlib" 2>/dev/null || "$PYTHON" -m pip install -q matplotlib
# Optional for users (the `coded` extra), needed by the coded tests: scikit-learn ships the
# handwritten-digits data set that `torchutil coded` trains on by default (no download).
"$PYTHON" -c "import sklearn" 2>/dev/null || "$PYTHON" -m pip install -q scikit-learn
# pyproject.toml's build requirement (builds wheels without the `wheel` package); a no-op when met.
"$PYTHON" -m pip install -q "setuptools>=70.1"
# The distribution is torch-utilization; one named torchutil (this project's former name, or the
# unrelated project of that name on the package index) would claim the same import name.
if "$PYTHON" -m pip show -q torchutil >/dev/null 2>&1; then
  echo "install: pip uninstall torchutil (the distribution is torch-utilization now)"
  "$PYTHON" -m pip uninstall -y -q torchutil
fi

# --no-build-isolation: build against the torch installed above (an isolated build would fetch
# another multi-GB torch).
echo "install: building torchutil (pip install --no-build-isolation -e .)"
"$PYTHON" -m pip install -q --no-build-isolation -e .
"$PYTHON" -c "import torchutil; print('install: torchutil', torchutil.__version__, torchutil.build_info())"
