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
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
CUDA_SPEC="torch==2.14.1 torchvision==0.29.1"
CPU_SPEC="torch==2.13.0+cpu"
what=${1:-demo}
case "$what" in
  demo | test | browser) ;;
  *) echo "install: say what for: scripts/install.sh demo|test|browser (got '$what')" >&2; exit 2 ;;
esac

# System packages (apt), one per line as "<command or file that shows it is there>:<package>";
# alternatives for the first part are separated by '|'. More packages go into these lists.
demo_apt=(
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

apt_wanted=("${demo_apt[@]}")
[ "$what" != demo ] && apt_wanted+=("${test_apt[@]}")
[ "$what" = browser ] && apt_wanted+=("${browser_apt[@]}")
missing=()
for entry in "${apt_wanted[@]}"; do
  have "${entry%%:*}" || missing+=("${entry##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install: apt-get install ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -q
  $sudo apt-get install -y -q "${missing[@]}"
fi

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
if ! "$PYTHON" -c "import $needed" 2>/dev/null; then
  echo "install: pip install $torch_spec$why"
  # shellcheck disable=SC2086
  if ! "$PYTHON" -m pip install -q $torch_spec; then
    echo "install: pip could not install '$torch_spec' (pip's message is above). Where pip finds no +cpu wheel," \
      "add PyTorch's CPU index: PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu; or name another torch" \
      "with TORCHUTIL_TORCH_SPEC" >&2
    exit 1
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
mkdir -p build
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
