#!/usr/bin/env bash
# Prints the Python that `make demo`, `make test` and scripts/ use: the active virtual
# environment's ($VIRTUAL_ENV) or conda environment's ($CONDA_PREFIX) as it is, else this
# project's own virtual environment, .venv beside this folder (scripts/install.sh makes it on
# first use). It prints the path whether or not it exists yet.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  echo "$VIRTUAL_ENV/bin/python"
elif [ -n "${CONDA_PREFIX:-}" ] && [ -x "$CONDA_PREFIX/bin/python" ]; then
  echo "$CONDA_PREFIX/bin/python"
else
  echo "$root/.venv/bin/python"
fi
