#!/usr/bin/env bash
# Installs what torchutil needs on a fresh Debian/Ubuntu machine and builds it in place
# (editable install, so the tests and the examples see the built extension).
#   scripts/install.sh demo     what `make demo` needs: a C++ compiler, ninja, torch (and
#                               torchvision where there is a GPU), setuptools; then the build
#   scripts/install.sh test     that, and what only `make test` needs (the lists below)
#   scripts/install.sh browser  that, and chromium for the opt-in browser test (`make test-browser`)
# Each step is skipped where its package is there already; the build compiles only what changed.
#
# Which torch: TORCHUTIL_TORCH_SPEC (pip's requirement words), else
#   - `demo` on a machine without an NVIDIA GPU: PyTorch's CPU wheel (CPU_SPEC, ~0.2 GB), which
#     has no torchvision to go with it: the demo then profiles a model that needs torch alone;
#   - otherwise the CUDA build with torchvision (CUDA_SPEC, ~6 GB): the tests need torchvision
#     (they build its models), so `make test` takes this one on any machine.
#
# Which Python: scripts/python.sh's answer (an active virtual environment or conda environment
# as it is, else this project's own, .venv here, made below on first use with the system
# python3: Debian 12 and Ubuntu 23.04+ refuse pip into the system Python, PEP 668). PYTHON=...
# names another.
#
# Where pip finds no CPU wheel (PyPI has only the CUDA builds of torch for Linux), the install is
# tried again with PyTorch's CPU index (TORCHUTIL_CPU_INDEX) added after the indexes pip already
# uses, so a machine with a local mirror keeps taking torch from it.
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_SPEC="torch==2.14.1 torchvision==0.29.1"
CPU_SPEC="torch==2.13.0+cpu"
CPU_INDEX=${TORCHUTIL_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
what=${1:-demo}
case "$what" in
  demo | test | browser) ;;
  *) echo "install: say what for: scripts/install.sh demo|test|browser (got '$what')" >&2; exit 2 ;;
esac

# System packages (apt), one per line as "<command or file that shows it is there>:<package>";
# alternatives for the first part are separated by '|'. More packages go into these lists.
demo_apt=(
  "python3:python3"                       # the interpreter the project's virtual environment is made from
  "g++:g++"                               # the C++ compiler
  "ninja:ninja-build"                     # setup.py's build: parallel, and nothing recompiled twice
)
test_apt=(
  "cmake:cmake"                           # the GoogleTest suite's build (CMakeLists.txt)
  "/usr/include/gtest/gtest.h:libgtest-dev"
  "clang-format:clang-format"             # the C++ layout check of scripts/test.sh
  "/usr/share/datasets/fashion-mnist:dataset-fashion-mnist"  # Fashion-MNIST for torchutil.coded's tests
)
browser_apt=(
  "chromium|chromium-browser:chromium"    # the opt-in test that screenshots the survey's HTML report
)
# Python packages for the tests, one per line as "<module>:<pip requirement>". The demo needs
# torch (and torchvision with the CUDA build), setuptools and numpy only.
test_pip=(
  "pytest:pytest"
  "ruff:ruff"                             # the lint step of scripts/test.sh
  "matplotlib:matplotlib"                 # the survey's plots (optional for users: the plot extra)
  "sklearn:scikit-learn"                  # the digits data of torchutil.coded (the coded extra)
  "transformers:transformers==5.17.0"     # Hugging Face models built from configs: profile_generate's and
                                          # kwargs= tests (the transformers extra); the H200
                                          # machine's version: the closed forms follow its code
  "optuna:optuna==5.1.0"                  # tests/test_engines.py (the optuna extra), the versions tested
  "ray.tune:ray[tune]==2.60.0"            # tests/test_engines_ray.py (the ray extra)
)

have() {  # have 'cmd|/file|...': one of them is a command on PATH or an existing file
  local alternatives=() one
  IFS='|' read -ra alternatives <<< "$1"
  for one in "${alternatives[@]}"; do
    if [[ "$one" == /* ]]; then [ -e "$one" ] && return 0; else command -v "$one" >/dev/null && return 0; fi
  done
  return 1
}

has_gpu() {  # an NVIDIA GPU that the driver shows
  compgen -G "/dev/nvidia[0-9]*" >/dev/null || { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }
}

apt_install() {  # apt-get install PACKAGE...: once per run of this script, after one update
  echo "install: apt-get install $*"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  [ -n "${apt_updated:-}" ] || $sudo apt-get update -q
  apt_updated=1
  $sudo apt-get install -y -q "$@"
}

apt_wanted=("${demo_apt[@]}")
[ "$what" != demo ] && apt_wanted+=("${test_apt[@]}")
[ "$what" = browser ] && apt_wanted+=("${browser_apt[@]}")
missing=()
for entry in "${apt_wanted[@]}"; do
  have "${entry%%:*}" || missing+=("${entry##*:}")
done
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

# The Python: the active environment's, else the project's own virtual environment.
PYTHON=${PYTHON:-$(scripts/python.sh)}
if [ "$PYTHON" = "$PWD/.venv/bin/python" ] && [ ! -x "$PYTHON" ]; then
  # Debian and Ubuntu ship venv's pip (ensurepip) and Python's C headers (the build needs
  # Python.h) as packages of their own: python3-venv and python3-dev.
  base_apt=()
  python3 -c "import ensurepip, venv" 2>/dev/null || base_apt+=(python3-venv)
  python3 -c "import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" \
    2>/dev/null || base_apt+=(python3-dev)
  [ ${#base_apt[@]} -eq 0 ] || apt_install "${base_apt[@]}"
  echo "install: making the project's virtual environment: python3 -m venv .venv ($(python3 --version 2>&1))"
  rm -rf .venv
  python3 -m venv .venv
  "$PYTHON" -m pip install -q --upgrade pip
fi
if "$PYTHON" -c "import sys, sysconfig, os; sys.exit(not (sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_paths()['stdlib'], 'EXTERNALLY-MANAGED'))))" 2>/dev/null; then
  echo "install: $PYTHON is a Python that the system manages (PEP 668: it refuses pip). Leave PYTHON unset to" \
    "use this project's own virtual environment (.venv), or activate one of yours first" >&2
  exit 1
fi
echo "install: Python: $PYTHON ($("$PYTHON" --version 2>&1))"

# What the chosen torch must bring: torch alone for the CPU wheel's demo, torchvision too otherwise.
why=""
if [ -n "${TORCHUTIL_TORCH_SPEC:-}" ]; then
  torch_spec=$TORCHUTIL_TORCH_SPEC; needed="torch"
  [[ "$torch_spec" == *torchvision* ]] && needed="torch, torchvision"
elif [ "$what" = demo ] && ! has_gpu; then
  torch_spec=$CPU_SPEC; needed="torch"
  why=" (no NVIDIA GPU here: PyTorch's CPU wheel, without torchvision; \`make test\` takes the CUDA build)"
else
  torch_spec=$CUDA_SPEC; needed="torch, torchvision"
fi
pip_torch() {  # pip install the torch spec; its output in build/pip-torch.log
  # shellcheck disable=SC2086
  "$PYTHON" -m pip install -q "$@" $torch_spec >build/pip-torch.log 2>&1
}
mkdir -p build
if ! "$PYTHON" -c "import $needed" 2>/dev/null; then
  echo "install: pip install $torch_spec$why"
  if ! pip_torch; then
    if [[ "$torch_spec" == *+cpu* ]] && grep -q "No matching distribution" build/pip-torch.log; then
      echo "install: pip's indexes have no $torch_spec (PyPI has no +cpu wheels): again with PyTorch's CPU index," \
        "$CPU_INDEX, after them"
      if ! pip_torch --extra-index-url "$CPU_INDEX"; then
        cat build/pip-torch.log >&2
        echo "install: '$torch_spec' is not on pip's indexes nor on $CPU_INDEX (pip's message is above). Name" \
          "another torch with TORCHUTIL_TORCH_SPEC, or another CPU index with TORCHUTIL_CPU_INDEX" >&2
        exit 1
      fi
    else
      cat build/pip-torch.log >&2
      echo "install: pip could not install '$torch_spec' (pip's message is above); TORCHUTIL_TORCH_SPEC names" \
        "another torch" >&2
      exit 1
    fi
  fi
fi
if [ "$what" != demo ]; then
  for entry in "${test_pip[@]}"; do
    if ! "$PYTHON" -c "import ${entry%%:*}" 2>/dev/null; then
      echo "install: pip install ${entry##*:}"
      "$PYTHON" -m pip install -q "${entry##*:}"
    fi
  done
fi
# pyproject.toml's build requirement (the License-Expression metadata); a no-op when met.
"$PYTHON" -m pip install -q "setuptools>=77"
# The distribution is torch-utilization; one named torchutil (this project's former name, or the
# unrelated project of that name on the package index) would claim the same import name.
if "$PYTHON" -m pip show -q torchutil >/dev/null 2>&1; then
  echo "install: pip uninstall torchutil (the distribution is torch-utilization now)"
  "$PYTHON" -m pip uninstall -y -q torchutil
fi

# --no-build-isolation: build against the torch installed above (an isolated build would fetch
# another multi-GB torch). The build shows a line per compiled file; its whole output goes to
# build/install.log.
echo "install: building torchutil (pip install --no-build-isolation -e .; log: build/install.log)"
set +e
# (pip -v indents the build's output by two spaces.)
"$PYTHON" -m pip install -v --no-build-isolation -e . 2>&1 | tee build/install.log | sed -nuE \
  -e 's#^ *(\[[0-9]+/[0-9]+\]) .* -c [^ ]*/(csrc/[^ ]+\.cpp) .*#install:   \1 \2#p' \
  -e 's#^ *[^ ]+ .* -shared .* -o [^ ]*/(_C[^ /]*\.so)( .*)?$#install:   linking torchutil/\1#p' \
  -e 's#^ *(ninja: no work to do\.)#install:   \1#p' \
  -e 's#^ *(torchutil: .*)#install: \1#p'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "install: the build failed (exit $rc); the first errors in build/install.log:" >&2
  grep -E -A4 -m 10 "FAILED:|error:|Error:|torchutil: " build/install.log | cut -c1-300 >&2 || true
  exit "$rc"
fi
"$PYTHON" -c "import torchutil; print('install: torchutil', torchutil.__version__, torchutil.build_info())"
