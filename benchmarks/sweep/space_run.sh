#!/usr/bin/env bash
# The whole NATS-Bench space on one GPU with nas evaluate's defaults, and how it agrees with the
# committed sweep_auto_a: first THREAD_CHOICES (default "4 8") are tried on cells 0:2000 and the
# faster one runs the whole space into $OUT/space.sqlite; then its time and per-stage
# breakdown, the agreement (sweep_agreement.py) and the counted columns cell by cell
# (count_equality.py). On the GPU machine, after a build:
#   scripts/device_run.sh bash benchmarks/sweep/space_run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=${OUT:-/tmp}
ref=docs/results/nas/sweep_auto_a.csv.gz
best=""; best_s=""
for t in ${THREAD_CHOICES:-4 8}; do
  rm -f "$OUTDIR/slice_t$t.sqlite"*
  start=$(date +%s.%N)
  timeout 120 python3 -m torchutil nas evaluate --db "$OUTDIR/slice_t$t.sqlite" --indices 0:2000 --threads "$t" \
    --no-progress 2>&1 | grep -v "CUDA Graph is empty" | grep -E "rror|ms per arch" | head -4
  s=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  echo "== slice 0:2000, $t threads: $s s"
  python3 benchmarks/sweep/sweep_agreement.py "$ref" "$OUTDIR/slice_t$t.sqlite" 2>&1 | sed -n '3,4p'
  if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $s < $best_s else 1)"; then best=$t; best_s=$s; fi
done
echo "== the whole space with $best threads"
rm -f "$OUTDIR/space.sqlite"*
start=$(date +%s.%N)
timeout "${SPACE_TIMEOUT:-300}" python3 -m torchutil nas evaluate --db "$OUTDIR/space.sqlite" --threads "$best" --no-progress \
  2>&1 | grep -v "CUDA Graph is empty" | tee "$OUTDIR/space.txt" | tail -5
echo "command wall $(python3 -c "import time; print(f'{time.time() - $start:.1f}')") s" | tee -a "$OUTDIR/space.txt"
python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print('cells, graph-timed:', c.execute('select count(*), sum(cuda_graph) from results').fetchone())" "$OUTDIR/space.sqlite" | tee -a "$OUTDIR/space.txt"
python3 benchmarks/sweep/sweep_agreement.py "$ref" "$OUTDIR/space.sqlite" --json "$OUTDIR/agreement_space.json" 2>&1 | tee -a "$OUTDIR/space.txt" | head -8
python3 benchmarks/sweep/count_equality.py "$ref" "$OUTDIR/space.sqlite" 2>&1 | tee -a "$OUTDIR/space.txt"
python3 benchmarks/sweep/sweep_db_to_csv.py "$OUTDIR/space.sqlite" "$OUTDIR/space.csv.gz"
