#!/usr/bin/env bash
# What the GPU machine has to show, in phases that each fit one device call (run after building
# torchutil there: scripts/device_run.sh benchmarks/gpu/run_gpu.sh PHASE...). Results under $OUT
# (default ./gpu-results); every step has its own time limit, so one hang does not cost the rest.
#
#   tests    the GPU tests (pytest -m cuda)
#   repeat   twelve default profile calls per configuration in two processes: CV and level
#            (benchmarks/results/bench_repeatability.py)
#   overhead what a call costs against a user's own loops, resnet50 fp16 batch 1 and 32
#            (benchmarks/cost/bench_overhead.py; OVERHEAD_ROUNDS: its rounds, 9 unless given)
#   gap      where torchutil.profile's time goes beyond torch.ops.util.profile's (benchmarks/cost/profile_gap.py)
#   modulepaths what module paths add to a counted resnet50 forward, b1 and b32, and on the host's
#            CPU (benchmarks/cost/module_path_cost.py)
#   tracecost tracing's cost, and CUPTI after a trace with and without teardown (benchmarks/cost/trace_cost.py)
#   keptpools kept capture pools against private ones: benchmarks/cost/capture_cycle_cost.py, then every
#            GPU test with them off (TORCHUTIL_KEEP_CAPTURE_POOL=0: a private pool per capture, as
#            before the ninth session of 2026-12-02; $OUT/pytest_cuda_privatepools.txt); the sweep
#            and the overhead with them off: TORCHUTIL_KEEP_CAPTURE_POOL=0 benchmarks/gpu/run_gpu.sh sweep overhead
#   nastrial the NATS-Bench sweep on cells 0..999 in the default (auto) timing: time per cell
#   sweep    all 15,625 NATS-Bench cells, default timing (auto) and threads, into $OUT/sweep.sqlite,
#            and its agreement with docs/results/nas/sweep_auto_a.csv.gz (NAS_ARGS: more arguments)
#   capturenodes capture-node attribution's GPU tests and trace_cost.py (markers, capture)
#   sweepdiag cells 0..1499 with one worker and with the default workers, the SM clock sampled,
#            each against sweep_auto_a and the other
#   sweep3k  cells 0..2999 in one process (more captures than a GPU's memory of freed graph pools)
#   sweepiso cells 0..999: one worker in order, in the eight workers' order, in a spawned worker
#            process; eight workers with and without their memory fraction ($OUT/sweepiso.txt)
#   timingprobe benchmarks/cost/timing_probe.py on cells 0..95: torchutil's, a plain and a gated graph
#            timing against both committed sweeps; alone, beside a second CUDA context locked out
#            of the timed replays (the eight workers' level), beside 7 CPU-bound processes, with
#            the workers' memory fraction, with a gpu_lock ($OUT/timingprobe.txt; PROBE_ARGS:
#            the list of argument sets)
#   sweepthreads nas evaluate --threads: its GPU test, then cells 0..999 with 2, 3 and 4 threads of
#            one process (THREADS: the list), each's time, stages and agreement with sweep_auto_a
#            ($OUT/sweepthreads.txt). The whole space with threads: NAS_ARGS="--threads N" ... sweep
#   sweepctx one worker over cells 0..999 beside seven idle processes that hold a CUDA context:
#            does the presence of other contexts move its level? ($OUT/sweepctx.txt)
#   sweeplevel why eight workers time every cell ~0.1 ms per forward faster than one: cells 0..999
#            one worker (defaults, --warmup 10, --iters 10, a 20 ms idle GPU before the timed
#            replays) and eight (default, the idle gap), each against sweep_auto_a and one worker's
#            defaults; wall time and nvidia-smi clock/power/utilization each; <= 330 s;
#            $OUT/sweeplevel.txt and sweeplevel_*.csv.gz (SWEEP_QUICK=1: a CPU rehearsal, 4 cells)
#   sweep1   the same: the one-GPU baseline of sweepN on this machine, kept in $SWEEP_DIR
#            (h200-work/sweeps: a later call on the warm machine finds it)
#   sweepN   (sweep2, sweep4, sweep8) the same over N GPUs with torchrun; runs sweep1 first where
#            $SWEEP_DIR has none; wall time, scaling against sweep1, graph-timed cells, agreement
#            with sweep1 (sweep_agreement.py, sweep_scaling.py); $OUT/sweepN.txt, .csv.gz, JSON.
#            SWEEP_QUICK=1: a CPU rehearsal of the same steps (48 cells, batch 1)
#   reference utilization of the reference models and the README's Chrome trace
#   counters  hardware counters (issue #11): their GPU tests, the per-op hardware/nominal FLOP tables
#            and their costs; four files in $OUT/counters/ (COUNTERS_SKIP="tables ncu": costs only)
#   countersncu ncu's values against torchutil's, three ncu replay set-ups, and ncu's cost
#   pmprobe  CUPTI's PM sampler alone (benchmarks/results/pm_probe.cu), in several decode set-ups
#   foldcounters the FoldedCNN pairs with hardware counters (fold-bench --counters), $OUT/foldcounters/
#   coded    learned codes and parity models on digits (benchmarks/results/coded_results.py): the runs,
#            their cost per query and the tail-latency simulation, into $OUT/coded/
#   fashion  Fashion-MNIST learned codes and parity models, MLP and ResNet-18, and the measured
#            serving run (issue #23; the data travels in .data/, see the phase), into $OUT/fashion/
#   generation  LLM prefill and decode (issue #22): profile_generate's GPU tests, then a ~1B Llama at
#            batch 1/8/32 x prompt 512/2k/8k (benchmarks/results/generation.py, <= 6 min), into $OUT/generation/
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off on the lent machines (device/KINDS.md), also for torchrun's workers.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
export NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a "$OUT/gpu.txt"

# How many cells of a sweep db were timed as CUDA-graph replays.
graph_timed() {
  python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print('cells, graph-timed:', c.execute('select count(*), sum(cuda_graph) from results').fetchone())" "$1"
}

# The sweeps of sweepN live here between device calls (a call's $OUT starts empty; the
# git-ignored h200-work/ stays while the machine is warm): sweep<N>.sqlite and, for a sweep that
# finished in one go, sweep<N>.seconds, its wall time.
SWEEP_DIR=${SWEEP_DIR:-h200-work/sweeps}
SWEEP_ARGS=()
if [ "${SWEEP_QUICK:-0}" = 1 ]; then
  SWEEP_ARGS=(--device cpu --indices 0:48 --dataset ImageNet16-120 --batch 1 --warmup 0 --iters 1)
  SWEEP_DIR=$SWEEP_DIR/quick
fi
mkdir -p "$SWEEP_DIR"

# sweep_gpus N: a fresh sweep of the whole space (SWEEP_QUICK: a slice on the CPU) over N GPUs,
# one process each (N=1: GPU 0, no torchrun), default timing and threads, into $SWEEP_DIR.
sweep_gpus() {
  local n=$1 db="$SWEEP_DIR/sweep$1.sqlite" have start rc wall
  if [ "${SWEEP_QUICK:-0}" != 1 ]; then
    have=$(python3 -c "import torch; print(torch.cuda.device_count())")
    if [ "$have" -lt "$n" ]; then
      echo "sweep$n: this machine has $have GPU(s)" | tee -a "$OUT/sweep$n.txt"
      return 1
    fi
  fi
  # Fresh, so that its wall time is one sweep's.
  rm -f "$db" "$db-wal" "$db-shm" "$SWEEP_DIR/sweep$n".rank* "$SWEEP_DIR/sweep$n".worker* "$SWEEP_DIR/sweep$n.seconds"
  start=$(date +%s.%N)
  if [ "$n" = 1 ]; then
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} timeout "${SWEEP_TIMEOUT:-570}" \
      python3 -m torchutil nas evaluate --db "$db" --no-progress ${SWEEP_ARGS[@]+"${SWEEP_ARGS[@]}"} 2>&1
  else
    # --standalone: the rendezvous on this host, at a free port; the ranks talk over gloo.
    GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo} timeout "${SWEEP_TIMEOUT:-570}" \
      python3 -m torch.distributed.run --standalone --nproc-per-node "$n" \
      -m torchutil nas evaluate --db "$db" --no-progress ${SWEEP_ARGS[@]+"${SWEEP_ARGS[@]}"} 2>&1
  fi | grep -v "CUDA Graph is empty" > "$OUT/sweep$n.txt"
  rc=${PIPESTATUS[0]}
  wall=$(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$start")
  grep -v "^\[rank\|^  \|^Traceback" "$OUT/sweep$n.txt" | tail -12
  [ "$rc" = 0 ] && echo "$wall" > "$SWEEP_DIR/sweep$n.seconds"
  echo "sweep$n: $n GPU(s), exit $rc, command wall $wall s; $(graph_timed "$db")" | tee -a "$OUT/sweep$n.txt"
  python3 benchmarks/sweep/sweep_db_to_csv.py "$db" "$OUT/sweep$n.csv.gz"
  return "$rc"
}

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(tests repeat overhead)
for phase in "${phases[@]}"; do
  echo "=== $phase ($(date +%T))"
  case $phase in
    tests)
      # PYTEST_EXTRA: more pytest arguments, one word each (e.g. --ignore=tests/x.py)
      # shellcheck disable=SC2086
      timeout "${TESTS_TIMEOUT:-420}" python3 -m pytest tests -m cuda -q -p no:cacheprovider -rs -s ${PYTEST_EXTRA:-} \
        > "$OUT/pytest_cuda.txt" 2>&1
      grep -E "passed|failed|error|FAILED" "$OUT/pytest_cuda.txt" | tail -8 ;;
    repeat)
      # The default call, twelve times per configuration, in two processes (issue #19's table).
      timeout "${REPEAT_TIMEOUT:-200}" python3 benchmarks/results/bench_repeatability.py \
        --json "$OUT/repeatability.json" 2>&1 | grep -v "^  pid" | tee "$OUT/repeatability.txt" | tail -12 ;;
    overhead)
      for b in 1 32; do
        timeout 150 python3 benchmarks/cost/bench_overhead.py --model resnet50 --batch $b --device cuda \
          --dtype float16 --rounds "${OVERHEAD_ROUNDS:-9}" --json "$OUT/overhead_b$b.json" 2>&1 | grep -v "^USDT\|^STAGE\|UserWarning\|_warn_once" \
          | tee "$OUT/overhead_b$b.txt"
      done ;;
    keptpools)
      timeout 150 python3 benchmarks/cost/capture_cycle_cost.py --json "$OUT/capture_cycle.json" 2>&1 | tee "$OUT/capture_cycle.txt"
      TORCHUTIL_KEEP_CAPTURE_POOL=0 timeout "${TESTS_TIMEOUT:-420}" python3 -m pytest tests -m cuda -q -p no:cacheprovider \
        -rs -s > "$OUT/pytest_cuda_privatepools.txt" 2>&1
      tail -3 "$OUT/pytest_cuda_privatepools.txt" ;;
    gap)
      timeout 150 python3 benchmarks/cost/profile_gap.py --json "$OUT/profile_gap.json" 2>&1 | tee "$OUT/profile_gap.txt" | tail -12 ;;
    modulepaths)
      for b in 1 32; do
        timeout 120 python3 benchmarks/cost/module_path_cost.py --device cuda --batch $b --rounds 60 \
          --json "$OUT/module_path_cost_b$b.json"
      done 2>&1 | tee "$OUT/module_path_cost.txt"
      timeout 120 python3 benchmarks/cost/module_path_cost.py --device cpu --size 32 --threads 1 --rounds 40 \
        --json "$OUT/module_path_cost_cpu.json" 2>&1 | tee -a "$OUT/module_path_cost.txt" ;;
    tracecost)
      timeout 170 python3 benchmarks/cost/trace_cost.py --rounds 7 --json "$OUT/trace_cost.json" 2>&1 | tee "$OUT/trace_cost.txt" | tail -14 ;;
    nastrial)
      rm -f /tmp/nastrial.sqlite
      timeout 240 python3 -m torchutil nas evaluate --db /tmp/nastrial.sqlite --indices 0:1000 --no-progress \
        2>&1 | tee "$OUT/nastrial.txt" | tail -4 ;;
    sweep)
      # The whole NATS-Bench space in the default (repeatable, auto) timing, one GPU, one
      # process: $OUT/sweep.sqlite. SWEEP_TIMEOUT bounds it (what is left of a 10-minute call).
      start=$SECONDS
      # NAS_ARGS: more nas evaluate arguments, one word each (e.g. --threads 3)
      # shellcheck disable=SC2086
      timeout "${SWEEP_TIMEOUT:-570}" python3 -m torchutil nas evaluate --db "$OUT/sweep.sqlite" --no-progress ${NAS_ARGS:-} 2>&1 \
        | grep -v "CUDA Graph is empty" | tee "$OUT/sweep.txt" | tail -5
      echo "command wall $((SECONDS - start)) s" | tee -a "$OUT/sweep.txt"
      graph_timed "$OUT/sweep.sqlite" | tee -a "$OUT/sweep.txt"
      timeout 60 python3 benchmarks/sweep/sweep_agreement.py docs/results/nas/sweep_auto_a.csv.gz "$OUT/sweep.sqlite" \
        --json "$OUT/agreement.json" 2>&1 | tee -a "$OUT/sweep.txt" | tail -12 ;;
    sweepdiag)
      # Does sharing the GPU among workers change the figures? Cells 0..1499 with one worker and
      # with the default workers, the SM clock sampled every 200 ms during each, and the agreement
      # of both with sweep_auto_a (an earlier one-process sweep) and with each other.
      for w in 1 8; do
        rm -f "/tmp/diag_w$w.sqlite"*
        nvidia-smi --query-gpu=clocks.sm,power.draw,utilization.gpu --format=csv,noheader,nounits -lms 200 \
          > "$OUT/clocks_w$w.csv" 2>&1 &
        smi=$!
        start=$SECONDS
        timeout 150 python3 -m torchutil nas evaluate --db "/tmp/diag_w$w.sqlite" --indices 0:1500 --workers $w \
          --no-progress 2>&1 | grep -v "CUDA Graph is empty" | tail -3
        elapsed=$((SECONDS - start))
        kill $smi 2>/dev/null; wait $smi 2>/dev/null
        python3 - "$OUT/clocks_w$w.csv" $w $elapsed <<'PY'
import statistics as st, sys
rows = [[float(v) for v in line.split(",")] for line in open(sys.argv[1]) if line.count(",") == 2]
busy = [r for r in rows if r[2] > 0]
print(f"workers {sys.argv[2]}: {sys.argv[3]} s; while the GPU was busy ({len(busy)} of {len(rows)} samples): SM clock "
      f"median {st.median(r[0] for r in busy):.0f} MHz (min {min(r[0] for r in busy):.0f}), power median "
      f"{st.median(r[1] for r in busy):.0f} W, GPU utilization median {st.median(r[2] for r in busy):.0f} %")
PY
      done 2>&1 | tee "$OUT/sweepdiag.txt"
      for pair in "docs/results/nas/sweep_auto_a.csv.gz /tmp/diag_w1.sqlite" "docs/results/nas/sweep_auto_a.csv.gz /tmp/diag_w8.sqlite" \
                  "/tmp/diag_w1.sqlite /tmp/diag_w8.sqlite"; do
        echo "--- $pair"
        # shellcheck disable=SC2086
        timeout 60 python3 benchmarks/sweep/sweep_agreement.py $pair 2>&1 | sed -n '1,3p'
      done | tee -a "$OUT/sweepdiag.txt" ;;
    capturenodes)
      # Capture-node attribution (TORCHUTIL_CUPTI_CORRELATION=capture), first run: its GPU tests
      # (every kernel attributed, the oracle against API records, trace_forwards, eager timing
      # counting in a capture) beside the graph-node ones, then what it costs and leaves behind
      # (trace_cost.py, 3 processes each: default and eager calls).
      timeout 200 python3 -m pytest tests/test_kernel_trace.py tests/test_cuda.py -m cuda -q -p no:cacheprovider -s \
        -k "every_kernel or replayed_kernel or trace_forwards or counts_in_a_capture" > "$OUT/pytest_capturenodes.txt" 2>&1
      grep -E "passed|failed|FAILED|replay|resnet50 b8" "$OUT/pytest_capturenodes.txt" | tail -14
      timeout 200 python3 benchmarks/cost/trace_cost.py --rounds 7 --settings markers capture --processes 3 \
        --json "$OUT/trace_cost_capture.json" 2>&1 | tee "$OUT/trace_cost_capture.txt" | head -4 ;;
    timingprobe)
      for extra in ${PROBE_ARGS:-"" "--heater locked" "--burn 7" "--fraction 0.1125" "--lock"}; do
        echo "=== timing_probe.py $extra"
        timeout 120 python3 benchmarks/cost/timing_probe.py --cells 0:96 $extra 2>&1 | grep -v "CUDA Graph is empty"
      done 2>&1 | tee "$OUT/timingprobe.txt" ;;
    sweepiso)
      # What of the worker processes makes eight workers time cells ~5 % faster than one (the
      # GPU's state and other contexts are ruled out: sweeplevel, sweepctx)? Cells 0..999: one
      # worker in order (the reference), one worker in the eight workers' order (each worker
      # takes every eighth cell), one worker in a spawned worker process (TORCHUTIL_SWEEP_SPAWN=1:
      # memory fraction, allocator emptied every 256 cells), eight workers with no memory
      # fraction (TORCHUTIL_SWEEP_NO_MEMORY_FRACTION=1), eight workers; each against sweep_auto_a
      # and the reference. <= ~230 s; $OUT/sweepiso.txt.
      (
        order=$(python3 -c "print(','.join(str(i) for k in range(8) for i in range(k, 1000, 8)))")
        run_iso() {  # name, one env assignment, then nas evaluate's arguments
          local name=$1 setting=$2; shift 2
          rm -f "/tmp/iso_$name.sqlite"*
          local start=$SECONDS
          env "$setting" timeout 100 python3 -m torchutil nas evaluate --db "/tmp/iso_$name.sqlite" --no-progress "$@" 2>&1 \
            | grep -v "CUDA Graph is empty" | tail -2
          echo "$name: $((SECONDS - start)) s"
        }
        run_iso ref TORCHUTIL_SWEEP_SPAWN=0 --indices 0:1000 --workers 1 --threads 1
        run_iso order TORCHUTIL_SWEEP_SPAWN=0 --indices "$order" --workers 1 --threads 1
        run_iso spawn TORCHUTIL_SWEEP_SPAWN=1 --indices 0:1000 --workers 1 --threads 1
        run_iso nofraction TORCHUTIL_SWEEP_NO_MEMORY_FRACTION=1 --indices 0:1000 --workers 8
        run_iso w8 TORCHUTIL_SWEEP_SPAWN=0 --indices 0:1000 --workers 8
        for name in ref order spawn nofraction w8; do
          for ref in docs/results/nas/sweep_auto_a.csv.gz /tmp/iso_ref.sqlite; do
            [ "$ref" = "/tmp/iso_$name.sqlite" ] && continue
            echo "--- $ref /tmp/iso_$name.sqlite"
            timeout 30 python3 benchmarks/sweep/sweep_agreement.py "$ref" "/tmp/iso_$name.sqlite" 2>&1 | sed -n '1,4p'
          done
        done
      ) 2>&1 | tee "$OUT/sweepiso.txt" ;;
    sweepthreads)
      (
        timeout 120 python3 -m pytest tests/test_sweep_workers.py -m cuda -q -p no:cacheprovider > "$OUT/pytest_threads.txt" 2>&1
        grep -E "^E  |passed|failed" "$OUT/pytest_threads.txt" | head -12
        for n in ${THREADS:-2 3 4}; do
          rm -f "/tmp/threads_$n.sqlite"*
          start=$SECONDS
          timeout 100 python3 -m torchutil nas evaluate --db "/tmp/threads_$n.sqlite" --indices 0:1000 --threads "$n" \
            --no-progress 2>&1 | grep -v "CUDA Graph is empty" | grep -E "rror|ms per arch|evaluated" | head -6
          echo "$n threads: $((SECONDS - start)) s; $(graph_timed "/tmp/threads_$n.sqlite")"
          timeout 30 python3 benchmarks/sweep/sweep_agreement.py docs/results/nas/sweep_auto_a.csv.gz "/tmp/threads_$n.sqlite" \
            2>&1 | sed -n '1,4p'
        done
      ) 2>&1 | tee "$OUT/sweepthreads.txt" ;;
    sweepctx)
      # Is it other processes' CUDA contexts that make eight workers time cells faster? One worker
      # over cells 0..999 while seven idle processes hold a context on the GPU (each made one
      # allocation and sleeps), against sweep_auto_a and one worker alone
      # (docs/results/reward/2026-12-02/sweep_one_worker_cells_0-999.csv.gz).
      (
        rm -f /tmp/ctx_w1.sqlite*
        sleepers=()
        for _ in 1 2 3 4 5 6 7; do
          python3 -c "import time, torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize(); time.sleep(150)" &
          sleepers+=($!)
        done
        sleep 12
        nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l | sed 's/^/processes on the GPU: /'
        start=$SECONDS
        timeout 120 python3 -m torchutil nas evaluate --db /tmp/ctx_w1.sqlite --indices 0:1000 --workers 1 --threads 1 \
          --no-progress 2>&1 | grep -v "CUDA Graph is empty" | tail -3
        echo "one worker beside 7 idle contexts: $((SECONDS - start)) s"
        kill "${sleepers[@]}" 2>/dev/null; wait "${sleepers[@]}" 2>/dev/null
        for ref in docs/results/nas/sweep_auto_a.csv.gz docs/results/reward/2026-12-02/sweep_one_worker_cells_0-999.csv.gz; do
          echo "--- $ref /tmp/ctx_w1.sqlite"
          timeout 60 python3 benchmarks/sweep/sweep_agreement.py "$ref" /tmp/ctx_w1.sqlite 2>&1 | sed -n '1,4p'
        done
      ) 2>&1 | tee "$OUT/sweepctx.txt" ;;
    sweeplevel)
      # Eight workers time every cell a median ~105 us per forward faster than one (level +4.8 %,
      # docs/results/nas/README.md, "What the difference is made of"). Cells 0..999, each variant
      # into its own db, wall time and the SM clock/power/utilization (nvidia-smi every 200 ms):
      #   a  one worker, the defaults (1 warm-up replay, 3 timed)
      #   b  one worker, 10 warm-up replays right before the timed ones (--warmup 10 also runs 9
      #      eager forwards before the capture): does it move to d's level?
      #   c  one worker, 10 timed replays
      #   d  eight workers (the default on a 16-core host until --threads became it)
      #   e  eight workers, the GPU left idle 20 ms before each cell's timed replays (the C++
      #      sleeps under the GPU lock: TORCHUTIL_IDLE_BEFORE_TIMING_US, csrc/libtorch/Timing.cpp):
      #      does it move back to a's?
      #   f  one worker, the same idle gap: does the gap alone change a's level?
      # Then each against sweep_auto_a (on these cells) and b..f against a (sweep_agreement.py: the
      # cells in both). One call, <= 330 s (SWEEPLEVEL_BUDGET): a step's limit is the smaller of its
      # own and what is left; a step cut short keeps its committed cells (its workers' dbs merged),
      # and the agreement compares those. Expected (session 5's per-cell costs): a 32, d 23, e 35,
      # f 52, c 48, b 75..120 s; b runs last, so that only it can be cut short.
      level_end=$((SECONDS + ${SWEEPLEVEL_BUDGET:-330} - 20))  # 20 s for the agreement (~10 s)
      level_args=(--indices 0:1000)
      [ "${SWEEP_QUICK:-0}" = 1 ] && level_args=(--device cpu --indices 0:4 --batch 1 --warmup 0 --iters 1)
      # name | arguments | idle us | its own limit (s)
      for v in "a|--workers 1 --threads 1|0|50" "d|--workers 8|0|40" "e|--workers 8|20000|55" "f|--workers 1 --threads 1|20000|80" \
               "c|--workers 1 --threads 1 --iters 10|0|75" "b|--workers 1 --threads 1 --warmup 10|0|150"; do
        IFS='|' read -r name vargs idle cap <<< "$v"
        db=/tmp/level_$name.sqlite
        rm -f "$db" "$db"-wal "$db"-shm /tmp/level_"$name".worker*
        limit=$((level_end - SECONDS - 5))  # 5: timeout's -k
        [ "$limit" -gt "$cap" ] && limit=$cap
        echo "--- $name: $vargs, TORCHUTIL_IDLE_BEFORE_TIMING_US=$idle, limit $limit s"
        if [ "$limit" -lt 10 ]; then
          echo "$name: skipped, the phase's budget is spent"
          continue
        fi
        nvidia-smi --query-gpu=clocks.sm,power.draw,utilization.gpu --format=csv,noheader,nounits -lms 200 \
          > "$OUT/sweeplevel_clocks_$name.csv" 2>&1 &
        smi=$!
        start=$(date +%s.%N)
        # shellcheck disable=SC2086
        TORCHUTIL_IDLE_BEFORE_TIMING_US=$idle timeout -k 5 "$limit" python3 -m torchutil nas evaluate \
          --db "$db" "${level_args[@]}" $vargs --no-progress 2>&1 | grep -v "CUDA Graph is empty" | tail -4
        rc=${PIPESTATUS[0]}
        wall=$(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$start")
        kill $smi 2>/dev/null; wait $smi 2>/dev/null
        if compgen -G "/tmp/level_$name.worker*.sqlite" > /dev/null; then  # killed before its merge
          python3 -c "import sys; from torchutil.studies import nas_evaluate as ev; ev.merge_workers(sys.argv[1])" "$db"
        fi
        python3 - "$OUT/sweeplevel_clocks_$name.csv" "$name" "$wall" "$rc" <<'PY'
import statistics as st, sys
rows = [[float(v) for v in line.split(",")] for line in open(sys.argv[1]) if line.count(",") == 2]
busy = [r for r in rows if r[2] > 0]
clocks = (f"while the GPU was busy ({len(busy)} of {len(rows)} samples): SM clock median "
          f"{st.median(r[0] for r in busy):.0f} MHz (min {min(r[0] for r in busy):.0f}), power median "
          f"{st.median(r[1] for r in busy):.0f} W, GPU utilization median {st.median(r[2] for r in busy):.0f} %"
          if busy else f"no busy nvidia-smi sample ({len(rows)} samples)")
print(f"{sys.argv[2]}: wall {sys.argv[3]} s, exit {sys.argv[4]}; {clocks}")
PY
        if [ -s "$db" ]; then
          graph_timed "$db"
          python3 benchmarks/sweep/sweep_db_to_csv.py "$db" "$OUT/sweeplevel_$name.csv.gz"
        fi
      done 2>&1 | tee "$OUT/sweeplevel.txt"
      # All eleven comparisons in one process (the script's main, as on the command line): one
      # import of torch instead of eleven.
      pairs=()
      for name in a b c d e f; do pairs+=(docs/results/nas/sweep_auto_a.csv.gz "/tmp/level_$name.sqlite"); done
      for name in b c d e f; do pairs+=(/tmp/level_a.sqlite "/tmp/level_$name.sqlite"); done
      limit=$((level_end + 20 - SECONDS))
      [ "$limit" -lt 20 ] && limit=20
      timeout "$limit" python3 - "${pairs[@]}" <<'PY' 2>&1 | tee -a "$OUT/sweeplevel.txt"
import sys
sys.path.insert(0, "benchmarks/sweep")
import sweep_agreement  # noqa: E402

pairs = sys.argv[1:]
for a, b in zip(pairs[::2], pairs[1::2]):
    print(f"--- {a} {b}", flush=True)
    sys.argv = ["sweep_agreement.py", a, b]
    try:
        sweep_agreement.main()
    except SystemExit as e:  # a missing db, no cell in both: say so and go on
        if e.code not in (None, 0):
            print(e.code)
    sys.stdout.flush()
PY
      ;;
    sweep3k)
      # Cells 0..2999 in one process: more graph captures than a whole GPU's memory of freed
      # graph pools (the 2,068th failed before the fix in cuda/CudaSupport.cpp).
      rm -f /tmp/sweep3k.sqlite
      timeout 200 python3 -m torchutil nas evaluate --db /tmp/sweep3k.sqlite --indices 0:3000 --no-progress 2>&1 \
        | grep -v "CUDA Graph is empty" | tee "$OUT/sweep3k.txt" | tail -3
      graph_timed /tmp/sweep3k.sqlite ;;
    sweep1)
      sweep_gpus 1 ;;
    sweep[0-9]*)
      # The whole space sharded over N GPUs with torchrun (rank r takes the cells i % N == r into
      # its shard; rank 0 gathers the shards into $SWEEP_DIR/sweepN.sqlite), against sweep1.
      n=${phase#sweep}
      if [ ! -s "$SWEEP_DIR/sweep1.seconds" ]; then
        sweep_gpus 1 || { echo "sweep$n: no one-GPU baseline"; continue; }
      fi
      sweep_gpus "$n" || continue
      python3 benchmarks/sweep/sweep_agreement.py "$SWEEP_DIR/sweep1.sqlite" "$SWEEP_DIR/sweep$n.sqlite" \
        --json "$OUT/agreement_sweep1_sweep$n.json" | tee -a "$OUT/sweep$n.txt"
      python3 benchmarks/sweep/sweep_scaling.py "$SWEEP_DIR" "$n" "$OUT/agreement_sweep1_sweep$n.json" \
        --json "$OUT/scaling_sweep$n.json" | tee -a "$OUT/sweep$n.txt" ;;
    reference)
      timeout 300 python3 benchmarks/results/reference_models.py --json "$OUT/reference.json" | tee "$OUT/reference.txt" ;;
    counters)
      # <= 7 minutes: the GPU tests (~2 min; their CPU side runs in CI), then the tables and the
      # costs (9 rounds in random order), each capped. ncu is the countersncu phase.
      mkdir -p "$OUT/counters"
      timeout 200 python3 -m pytest tests/test_counters_cuda.py -q -p no:cacheprovider -rs -s \
        > "$OUT/counters/pytest.txt" 2>&1
      grep -E "passed|failed|error|FAILED|RESULT|^E  " "$OUT/counters/pytest.txt" | tail -24
      # Every stage runs in a child process within the budget (a crash costs that stage only).
      timeout 230 python3 benchmarks/results/hw_counters.py --json "$OUT/counters/hw_counters.json" \
        --markdown "$OUT/counters/hw_counters.md" --skip ${COUNTERS_SKIP:-ncu} --rounds 9 --stage-timeout 150 --budget 220 2>&1 \
        | tee "$OUT/counters/bench.txt" | tail -30 ;;
    countersncu)
      # <= 6 minutes: ncu against torchutil on resnet50's forward, three ways ncu replays (kernel
      # replay with and without its cache flush, application replay without it); NCU_SKIP_DEFAULT=1
      # leaves out the first (measured before).
      mkdir -p "$OUT/counters"
      # NCU_ONLY: one of them alone (NCU_TIMEOUT: its time limit, 100 s unless given).
      NCU_CONFIGS=("kernel, no cache flush" "application, no cache flush")
      [ "${NCU_SKIP_DEFAULT:-0}" = 1 ] || NCU_CONFIGS=(kernel "${NCU_CONFIGS[@]}")
      [ -z "${NCU_ONLY:-}" ] || NCU_CONFIGS=("$NCU_ONLY")
      timeout 340 python3 benchmarks/results/hw_counters.py --json "$OUT/counters/ncu.json" \
        --markdown "$OUT/counters/ncu.md" --skip tables costs --ncu-configs "${NCU_CONFIGS[@]}" \
        --ncu-timeout "${NCU_TIMEOUT:-100}" --stage-timeout "$((${NCU_TIMEOUT:-100} + 30))" --budget 335 2>&1 \
        | tee "$OUT/counters/ncu.txt" | tail -40 ;;
    pmprobe)
      # CUPTI's PM sampler alone (benchmarks/results/pm_probe.cu): decoded at the end or by a thread,
      # images of several sizes, both buffer modes; does the hardware buffer overflow?
      mkdir -p "$OUT/counters"
      nvcc -std=c++17 -O2 benchmarks/results/pm_probe.cu -o /tmp/pm_probe -lcupti -L/usr/local/cuda/lib64 \
        -L/usr/local/cuda/extras/CUPTI/lib64 || continue
      # Decoded at the end: how many samples the hardware buffer holds (at two intervals and two
      # buffer sizes); then a decode thread: how fast CUPTI decodes.
      for a in "run_ms=10" "run_ms=20" "run_ms=30" "run_ms=40" "interval_ns=20000 run_ms=40" "interval_ns=20000 run_ms=60" \
               "interval_ns=20000 run_ms=80" "buffer_mb=32 run_ms=40" "buffer_mb=32 run_ms=60" "buffer_mb=32 run_ms=80" \
               "buffer_mb=64 run_ms=120" "buffer_mb=256 run_ms=400" "period_ms=2 image_samples=200 run_ms=500 mode=1"; do
        # shellcheck disable=SC2086
        timeout 30 /tmp/pm_probe period_ms=0 image_samples=5000 $a 2>&1 | tail -3
      done | tee "$OUT/counters/pm_probe.txt" ;;
    foldcounters)
      # The FoldedCNN pairs with hardware counters: hardware FLOPs and tensor-pipe activity of the
      # folded networks against the unfolded ones (eager, cuDNN autotuning, BN fused).
      mkdir -p "$OUT/foldcounters"
      timeout 240 python3 -m torchutil fold-bench --device cuda --dtype float16 --batch 1024 --f 2 3 4 \
        --iters 20 --cudnn-benchmark --fuse-bn --counters flops throughput --out "$OUT/foldcounters" 2>&1 \
        | tee "$OUT/foldcounters/log.txt" | tail -40 ;;
    coded)
      # docs/results/coded/: results.json, results.md, sim_learned-k2.png, sim_parity-k4.png (and the
      # log); the runs' folders stay in /tmp. MNIST/Fashion/CIFAR-10 run only from TORCHUTIL_DATA_ROOT.
      mkdir -p "$OUT/coded"
      timeout 240 python3 benchmarks/results/coded_results.py --device cuda --out "$OUT/coded" --work /tmp/coded-work \
        ${TORCHUTIL_DATA_ROOT:+--data-root "$TORCHUTIL_DATA_ROOT"} 2>&1 | tee "$OUT/coded/log.txt" | tail -40 ;;
    fashion)
      # Issue #23: Fashion-MNIST at k = 2, 3, 4, both paradigms, F = the papers' MLP and
      # resnet18_3stage, then the measured serving run (benchmarks/results/coded_fashion.py, profile gpu).
      # The data travels with the call: here, `mkdir -p .data && cp -r /usr/share/datasets/fashion-mnist
      # .data/ && echo /.data/ >> .git/info/exclude`, and name .data in the call's carry.
      # FASHION_ARGS: more arguments, one word each (e.g. --bases resnet18_3stage --no-serve).
      # shellcheck disable=SC2086
      timeout "${FASHION_TIMEOUT:-570}" python3 benchmarks/results/coded_fashion.py --profile gpu \
        --data-dir .data/fashion-mnist --out "$OUT/fashion" --budget "${FASHION_BUDGET:-360}" ${FASHION_ARGS:-} 2>&1 \
        | tee "$OUT/fashion.txt" | tail -30 ;;
    generation)
      mkdir -p "$OUT/generation"
      timeout 120 python3 -m pytest tests/test_generation_hf.py tests/test_generation.py -m cuda -q -p no:cacheprovider \
        -rs > "$OUT/generation/pytest_cuda.txt" 2>&1
      grep -E "passed|failed|error|FAILED|^E  " "$OUT/generation/pytest_cuda.txt" | tail -12
      timeout 400 python3 benchmarks/results/generation.py --out "$OUT/generation" 2>&1 | grep -v "^USDT\|^STAGE" \
        | tee "$OUT/generation/log.txt" | tail -30 ;;
    *) echo "unknown phase $phase" ;;
  esac
done
