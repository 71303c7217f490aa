#!/usr/bin/env bash
# Runs every test: ruff (pyproject.toml's rules), clang-format (.clang-format) over the C++,
# the GoogleTest suite through CTest, then pytest. Installs first (what the tests need too).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(scripts/python.sh)}
export PYTHON
./scripts/install.sh test

"$PYTHON" -m ruff check .
# The C++ as .clang-format lays it out; `clang-format -i <files>` fixes what this reports.
git ls-files -z 'csrc/*.h' 'csrc/*.cpp' 'tests/cpp/*.h' 'tests/cpp/*.cpp' \
  | xargs -0 clang-format --dry-run --Werror

# The tests link the extension's own objects (build/ext, built by install.sh): only tests/cpp is
# compiled here.
cmake -S . -B cmake-build -G Ninja -DPython3_EXECUTABLE="$("$PYTHON" -c 'import sys; print(sys.executable)')"
cmake --build cmake-build -j"$(nproc)"
ctest --test-dir cmake-build --output-on-failure --no-tests=error

# pytest exits 5 when it collected no test: that is a failure here, not a pass.
set +e
"$PYTHON" -m pytest tests -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
