#!/usr/bin/env bash
# How a sweep's timed phase can shrink without moving its figures: `nas evaluate` on a slice of
# the space (INDICES, default 0:2000) once per variant WARMUP:ITERS:THREADS (VARIANTS, default
# the sweep's defaults 1:3:4 and the shorter ones), each printed with its wall time, its
# per-stage breakdown and its agreement with the committed sweep_auto_a (utilization: Spearman
# and median level over the cells of the slice). On the GPU machine, after a build:
#   scripts/device_run.sh bash benchmarks/sweep/timing_variants.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
INDICES=${INDICES:-0:2000}
OUTDIR=${OUT:-/tmp}/timing_variants
mkdir -p "$OUTDIR"
for v in ${VARIANTS:-1:3:4 0:1:4 1:1:4 0:2:4 0:1:8}; do
  IFS=: read -r w i t <<< "$v"
  db="$OUTDIR/w${w}_i${i}_t${t}.sqlite"
  rm -f "$db"*
  start=$(date +%s.%N)
  timeout "${VARIANT_TIMEOUT:-120}" python3 -m torchutil nas evaluate --db "$db" --indices "$INDICES" --warmup "$w" \
    --iters "$i" --threads "$t" --no-progress 2>&1 | grep -v "CUDA Graph is empty" | grep -E "rror|ms per arch|per thread|evaluated|stage" | head -8
  end=$(date +%s.%N)
  echo "== warmup $w iters $i threads $t: $(python3 -c "print(f'{$end - $start:.1f}')") s for $INDICES"
  python3 benchmarks/sweep/sweep_agreement.py docs/results/nas/sweep_auto_a.csv.gz "$db" \
    --json "$OUTDIR/w${w}_i${i}_t${t}.json" 2>&1 | sed -n '1,6p'
done
