#!/usr/bin/env bash
# What the GPU machine has to show, in phases that each fit one device call (run after building
# torchutil there: scripts/device_run.sh benchmarks/run_gpu.sh PHASE...). Results under $OUT
# (default ./gpu-results); every step has its own time limit, so one hang does not cost the rest.
#
#   tests    the GPU tests (pytest -m cuda)
#   repeat   twelve default profile calls per configuration in two processes: CV and level
#            (benchmarks/bench_repeatability.py)
#   overhead what a call costs against a user's own loops, resnet50 fp16 batch 1 and 32
#            (benchmarks/bench_overhead.py)
#   tracecost tracing's cost, and CUPTI after a trace with and without teardown (benchmarks/trace_cost.py)
#   nastrial the NATS-Bench sweep on cells 0..999 in the default (auto) timing: time per cell
#   sweep    all 15,625 NATS-Bench cells, default timing (auto) and workers, into $OUT/sweep.sqlite,
#            and its agreement with docs/results/nas/sweep_auto_a.csv.gz
#   sweep2   the same over two GPUs with torchrun, into $OUT/sweep2.sqlite
#   reference utilization of the reference models and the README's Chrome trace
#   counters  hardware counters (issue #11): their GPU tests, the per-op hardware/nominal FLOP tables
#            and their costs; four files in $OUT/counters/ (COUNTERS_SKIP="tables ncu": costs only)
#   countersncu ncu's values against torchutil's, three ncu replay set-ups, and ncu's cost
#   pmprobe  CUPTI's PM sampler alone (benchmarks/pm_probe.cu), in several decode set-ups
#   foldcounters the FoldedCNN pairs with hardware counters (fold-bench --counters), $OUT/foldcounters/
#   coded    learned codes and parity models on digits (benchmarks/coded_results.py): the runs,
#            their cost per query and the tail-latency simulation, into $OUT/coded/
#   generation  LLM prefill and decode (issue #22): profile_generate's GPU tests, then a ~1B Llama at
#            batch 1/8/32 x prompt 512/2k/8k (benchmarks/generation.py, <= 6 min), into $OUT/generation/
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a "$OUT/gpu.txt"

# How many cells of a sweep db were timed as CUDA-graph replays.
graph_timed() {
  python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print('cells, graph-timed:', c.execute('select count(*), sum(cuda_graph) from results').fetchone())" "$1"
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
      timeout "${REPEAT_TIMEOUT:-200}" python3 benchmarks/bench_repeatability.py \
        --json "$OUT/repeatability.json" 2>&1 | grep -v "^  pid" | tee "$OUT/repeatability.txt" | tail -12 ;;
    overhead)
      for b in 1 32; do
        timeout 120 python3 benchmarks/bench_overhead.py --model resnet50 --batch $b --device cuda \
          --dtype float16 --json "$OUT/overhead_b$b.json" 2>&1 | grep -v "^USDT\|^STAGE\|UserWarning\|_warn_once" \
          | tee "$OUT/overhead_b$b.txt"
      done ;;
    tracecost)
      timeout 150 python3 benchmarks/trace_cost.py --json "$OUT/trace_cost.json" 2>&1 | tee "$OUT/trace_cost.txt" | tail -14 ;;
    nastrial)
      rm -f /tmp/nastrial.sqlite
      timeout 240 python3 -m torchutil nas evaluate --db /tmp/nastrial.sqlite --indices 0:1000 --no-progress \
        2>&1 | tee "$OUT/nastrial.txt" | tail -4 ;;
    sweep)
      # The whole NATS-Bench space in the default (repeatable, auto) timing, one GPU, one
      # process: $OUT/sweep.sqlite. SWEEP_TIMEOUT bounds it (what is left of a 10-minute call).
      start=$SECONDS
      timeout "${SWEEP_TIMEOUT:-570}" python3 -m torchutil nas evaluate --db "$OUT/sweep.sqlite" --no-progress 2>&1 \
        | grep -v "CUDA Graph is empty" | tee "$OUT/sweep.txt" | tail -5
      echo "command wall $((SECONDS - start)) s" | tee -a "$OUT/sweep.txt"
      graph_timed "$OUT/sweep.sqlite" | tee -a "$OUT/sweep.txt"
      timeout 60 python3 benchmarks/sweep_agreement.py docs/results/nas/sweep_auto_a.csv.gz "$OUT/sweep.sqlite" \
        --json "$OUT/agreement.json" 2>&1 | tee -a "$OUT/sweep.txt" | tail -12 ;;
    sweep2)
      # The whole space sharded over two GPUs with torchrun (rank r takes cells i % 2 == r and
      # writes its shard; rank 0 merges them into $OUT/sweep2.sqlite).
      start=$SECONDS
      timeout "${SWEEP_TIMEOUT:-570}" torchrun --nproc-per-node 2 -m torchutil nas evaluate --db "$OUT/sweep2.sqlite" \
        --no-progress 2>&1 | grep -v "CUDA Graph is empty" | tee "$OUT/sweep2.txt" | tail -6
      echo "two GPUs: command wall $((SECONDS - start)) s" | tee -a "$OUT/sweep2.txt"
      rm -f "$OUT"/sweep2.rank*.sqlite*
      graph_timed "$OUT/sweep2.sqlite" | tee -a "$OUT/sweep2.txt" ;;
    sweep3k)
      # Cells 0..2999 in one process: more graph captures than a whole GPU's memory of freed
      # graph pools (the 2,068th failed before the fix in cuda/CudaSupport.cpp).
      rm -f /tmp/sweep3k.sqlite
      timeout 200 python3 -m torchutil nas evaluate --db /tmp/sweep3k.sqlite --indices 0:3000 --no-progress 2>&1 \
        | grep -v "CUDA Graph is empty" | tee "$OUT/sweep3k.txt" | tail -3
      graph_timed /tmp/sweep3k.sqlite ;;
    reference)
      timeout 300 python3 benchmarks/reference_models.py --json "$OUT/reference.json" | tee "$OUT/reference.txt" ;;
    counters)
      # <= 7 minutes: the GPU tests (~2 min; their CPU side runs in CI), then the tables and the
      # costs (9 rounds in random order), each capped. ncu is the countersncu phase.
      mkdir -p "$OUT/counters"
      timeout 200 python3 -m pytest tests/test_counters_cuda.py -q -p no:cacheprovider -rs -s \
        > "$OUT/counters/pytest.txt" 2>&1
      grep -E "passed|failed|error|FAILED|RESULT|^E  " "$OUT/counters/pytest.txt" | tail -24
      # Every stage runs in a child process within the budget (a crash costs that stage only).
      timeout 230 python3 benchmarks/hw_counters.py --json "$OUT/counters/hw_counters.json" \
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
      timeout 340 python3 benchmarks/hw_counters.py --json "$OUT/counters/ncu.json" \
        --markdown "$OUT/counters/ncu.md" --skip tables costs --ncu-configs "${NCU_CONFIGS[@]}" \
        --ncu-timeout "${NCU_TIMEOUT:-100}" --stage-timeout "$((${NCU_TIMEOUT:-100} + 30))" --budget 335 2>&1 \
        | tee "$OUT/counters/ncu.txt" | tail -40 ;;
    pmprobe)
      # CUPTI's PM sampler alone (benchmarks/pm_probe.cu): decoded at the end or by a thread,
      # images of several sizes, both buffer modes; does the hardware buffer overflow?
      mkdir -p "$OUT/counters"
      nvcc -std=c++17 -O2 benchmarks/pm_probe.cu -o /tmp/pm_probe -lcupti -L/usr/local/cuda/lib64 \
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
      timeout 240 python3 benchmarks/coded_results.py --device cuda --out "$OUT/coded" --work /tmp/coded-work \
        ${TORCHUTIL_DATA_ROOT:+--data-root "$TORCHUTIL_DATA_ROOT"} 2>&1 | tee "$OUT/coded/log.txt" | tail -40 ;;
    generation)
      mkdir -p "$OUT/generation"
      timeout 120 python3 -m pytest tests/test_generation_hf.py tests/test_generation.py -m cuda -q -p no:cacheprovider \
        -rs > "$OUT/generation/pytest_cuda.txt" 2>&1
      grep -E "passed|failed|error|FAILED|^E  " "$OUT/generation/pytest_cuda.txt" | tail -12
      timeout 400 python3 benchmarks/generation.py --out "$OUT/generation" 2>&1 | grep -v "^USDT\|^STAGE" \
        | tee "$OUT/generation/log.txt" | tail -30 ;;
    *) echo "unknown phase $phase" ;;
  esac
done
