#!/usr/bin/env bash
# Before and after on one GPU machine, in one device call: builds this tree and an earlier one
# (OLD, default .old: a copy of that commit's setup.py, csrc/, torchutil/ and benchmarks/, e.g.
# `mkdir .old && git archive <commit> setup.py pyproject.toml README.md LICENSE MANIFEST.in csrc
# torchutil benchmarks | tar -x -C .old`, carried to the machine), then runs the phases:
#
#   tests     pytest -m cuda on this tree
#   overhead  benchmarks/cost/bench_overhead.py, resnet50 fp16 batch 1 and 32, OVERHEAD_ROUNDS
#             rounds (5), each tree with its own script, old and new alternating per batch
#   repeat    benchmarks/results/bench_repeatability.py, each tree with its own script
#
# Results under $OUT (default ./gpu-results), named by tree (old, new); each step has a time limit.
#   benchmarks/gpu/before_after.sh tests overhead
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-results} OLD=${OLD:-.old}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
# The machine's CXX links libstdc++ statically (scripts/device_run.sh says why): the system compiler.
[ -x /usr/bin/g++ ] && export CC=/usr/bin/gcc CXX=/usr/bin/g++
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee -a "$OUT/gpu.txt"
build() {  # build DIR NAME
  if ! (cd "$1" && timeout 400 python3 setup.py build_ext --inplace > "$OUT/build_$2.log" 2>&1); then
    echo "before_after: the $2 tree did not build:"; grep -E "error|Error" "$OUT/build_$2.log" | head -20; return 1
  fi
}
start=$(date +%s)
build . new & new_pid=$!
build "$OLD" old & old_pid=$!
wait "$new_pid" || exit 1
wait "$old_pid" || exit 1
echo "=== built both in $(( $(date +%s) - start )) s"
tree() { [ "$1" = new ] && echo "$PWD" || (cd "$OLD" && pwd); }
for phase in "$@"; do
  echo "=== $phase ($(date +%T))"
  case $phase in
    tests)
      timeout "${TESTS_TIMEOUT:-300}" python3 -m pytest tests -m cuda -q -p no:cacheprovider -rs > "$OUT/pytest_cuda.txt" 2>&1
      grep -E "passed|failed|error|FAILED" "$OUT/pytest_cuda.txt" | tail -12 ;;
    overhead)
      for b in 1 32; do
        for t in old new; do
          (cd "$(tree $t)" && PYTHONPATH="$PWD" timeout 150 python3 benchmarks/cost/bench_overhead.py --model resnet50 \
            --batch $b --device cuda --dtype float16 --rounds "${OVERHEAD_ROUNDS:-5}" --json "$OUT/overhead_${t}_b$b.json" \
            > "$OUT/overhead_${t}_b$b.txt" 2>&1)
          echo "--- $t b$b"; grep -E "ratio|torch.ops.util.profile|torchutil.profile|user FCM|plain loop" "$OUT/overhead_${t}_b$b.txt" | head -8
        done
      done ;;
    repeat)
      for t in old new; do
        (cd "$(tree $t)" && PYTHONPATH="$PWD" timeout 200 python3 benchmarks/results/bench_repeatability.py \
          --json "$OUT/repeat_$t.json" > "$OUT/repeat_$t.txt" 2>&1)
        echo "--- $t"; grep -v "^  pid" "$OUT/repeat_$t.txt" | tail -10
      done ;;
    *) echo "before_after: no phase $phase (tests, overhead, repeat)"; exit 2 ;;
  esac
done
