#!/usr/bin/env bash
# On a two-GPU machine: two lists of run_gpu.sh phases side by side, the first on GPU 0, the
# second on GPU 1, each in its own folder of $OUT and bounded by PAIR_TIMEOUT seconds; then both
# folders are packed into $OUT/pair.tgz (a device call returns at most 8 files).
#   bash benchmarks/gpu/run_gpu_pair.sh "coded tests" "counters"
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-results}
limit=${PAIR_TIMEOUT:-570}
mkdir -p "$OUT/gpu0" "$OUT/gpu1"
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=0 OUT="$OUT/gpu0" timeout "$limit" bash benchmarks/gpu/run_gpu.sh $1 > "$OUT/gpu0/log.txt" 2>&1 &
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=1 OUT="$OUT/gpu1" timeout "$limit" bash benchmarks/gpu/run_gpu.sh $2 > "$OUT/gpu1/log.txt" 2>&1 &
wait
for g in 0 1; do
  echo "=== GPU $g"
  tail -n 30 "$OUT/gpu$g/log.txt"
done
tar czf "$OUT/pair.tgz" -C "$OUT" gpu0 gpu1 && rm -rf "$OUT/gpu0" "$OUT/gpu1"
