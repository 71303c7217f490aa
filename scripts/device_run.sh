#!/usr/bin/env bash
# On the GPU machine (the device tool): build torchutil in place, then run the given command
# with PYTHONPATH set; build log under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
# That machine sets CXX=/opt/gcc/bin/g++, a wrapper that links libstdc++ statically: the
# extension then carries a second libstdc++ whose iostreams crash on the process's locale
# (seen: SIGSEGV in std::ostream::operator<<(double)). Build with the system compiler.
if [ -x /usr/bin/g++ ]; then
  export CC=/usr/bin/gcc CXX=/usr/bin/g++
fi
if ! python3 setup.py build_ext --inplace > "${OUT:-/tmp}/build.log" 2>&1; then
  grep -E "error|Error" "${OUT:-/tmp}/build.log" | head -40
  exit 1
fi
grep -E "^torchutil:" "${OUT:-/tmp}/build.log"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$@"
