#!/usr/bin/env bash
# The GPU runs behind docs/results/ (survey, fold-bench, NAS sweep), on a machine with two GPUs,
# in phases that each fit one device call:
#
#   START=$(date +%s) scripts/device_run.sh benchmarks/gpu/h200_results.sh PHASE [SECONDS]
#
#   tests  GPU 0: the whole pytest suite; GPU 1: fold-bench in every variant (twice each);
#          then the survey on both GPUs until the time is up
#   nas1   GPU 0: the full-space NAS sweep on one GPU; GPU 1: the survey, until the time is up
#   nas2   both GPUs: the full-space NAS sweep sharded with torchrun; then the survey on both
#   fold   one GPU: fold-bench of every model, CUDA graph (twice), eager, CUDA graph with fused BN
#   tuned  one GPU: fold-bench of every model, CUDA graph with cuDNN autotuning (twice), and with
#          widths rounded to multiples of 8
#
# Everything lands in h200-work/ (git-ignored), which is also packed into $OUT/h200-work.tgz;
# a later phase resumes from it (carry it back if the machine was given back meanwhile). The
# survey is resumable, so each phase runs it only as long as its time allows: SECONDS (default
# 540) counted from $START, the start of the device call.
set -uo pipefail
cd "$(dirname "$0")/../.."
PHASE=${1:?phase: tests, nas1 or nas2}
END=$(( ${START:-$(date +%s)} + ${2:-540} ))
W=h200-work
OUT=${OUT:-$W/out}
mkdir -p "$W" "$OUT"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
left() { echo $(( END - $(date +%s) )); }
now() { date +%s.%N; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$W/gpus.txt"

# The survey: every torchvision classification model at batch 1, 32, 256 in float16, eager and
# CUDA graph; then the four dtypes on ten models. GPU g takes the models at even (g = 0) or odd
# (g = 1) positions of the sorted list, into its own folder (merged afterwards with --report-only).
ALL=$(python3 -c "import torchvision; print(' '.join(sorted(torchvision.models.list_models(module=torchvision.models))))")
SUBSET="convnext_tiny densenet121 efficientnet_b0 mobilenet_v3_large regnet_y_8gf resnet50 resnext50_32x4d swin_t vgg16 vit_b_16"
half() { local i=0 out=""; for m in $1; do [ $(( i % 2 )) -eq "$2" ] && out="$out $m"; i=$(( i + 1 )); done; echo $out; }
survey() {  # survey GPU
  local g=$1 t
  t=$(left); [ "$t" -gt 20 ] || return 0
  CUDA_VISIBLE_DEVICES=$g timeout "$t" python3 -m torchutil survey --device cuda --no-progress \
    --models $(half "$ALL" "$g") --batches 1 32 256 --dtypes float16 --modes eager cuda_graph \
    --out "$W/survey_gpu$g" >> "$W/survey_gpu$g.log" 2>&1
  t=$(left); [ "$t" -gt 20 ] || return 0
  CUDA_VISIBLE_DEVICES=$g timeout "$t" python3 -m torchutil survey --device cuda --no-progress \
    --models $(half "$SUBSET" "$g") --batches 1 32 256 --dtypes float32 tf32 bfloat16 \
    --modes eager cuda_graph --out "$W/survey_gpu$g" >> "$W/survey_gpu$g.log" 2>&1
}

# fold-bench (batch 1024, fp16, f = 2 3 4) once per NAME:FLAGS, into $W/DIR/NAME, logged to
# $W/DIR.log and printed.
fold_bench() {  # fold_bench DIR NAME:FLAGS...
  local dir=$1 v
  shift
  for v in "$@"; do
    python3 -m torchutil fold-bench --device cuda --dtype float16 --batch 1024 --f 2 3 4 \
      --iters 30 ${v#*:} --out "$W/$dir/${v%%:*}" 2>&1 | tee -a "$W/$dir.log"
  done
}

case "$PHASE" in
tests)
  ( CUDA_VISIBLE_DEVICES=0 timeout "$(left)" python3 -m pytest tests -q -p no:cacheprovider -rs \
      > "$W/pytest.txt" 2>&1; survey 0 ) &
  (
    export CUDA_VISIBLE_DEVICES=1
    for rep in 1 2; do
      fold_bench fold "eager_rep$rep:" "graph_rep$rep:--cuda-graph" "eager_fused_rep$rep:--fuse-bn" \
        "graph_fused_rep$rep:--cuda-graph --fuse-bn" "eager_m8_rep$rep:--multiple-of 8" \
        "graph_m8_rep$rep:--cuda-graph --multiple-of 8" \
        "graph_fused_m8_rep$rep:--cuda-graph --fuse-bn --multiple-of 8" > /dev/null
    done
    # Where the time goes, per op, original vs f = 4 (CUDA graph, kernel trace).
    python3 - >> "$W/fold_ops.txt" 2>&1 <<'PY'
import torch, torchutil
from torchutil.models import build
for name in ("spec_3conv_32", "spec_4conv_64"):
    model, size, _ = build(name)
    for f in (1, 4):
        m = (model if f == 1 else torchutil.fold(model, f).eval()).cuda().half().to(memory_format=torch.channels_last)
        x = torch.randn(1024, 3, size, size, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
        r = torchutil.profile(m, x, warmup=3, iters=30, cuda_graph=True)
        print(f"===== {name} f={f}\n{r.format(top=14)}\n")
PY
    survey 1
  ) &
  wait
  grep -E "passed|failed" "$W/pytest.txt" | tail -2
  ;;
fold)
  fold_bench fold_all "graph_rep1:--cuda-graph" "graph_rep2:--cuda-graph" "eager_rep1:" \
    "graph_fused_rep1:--cuda-graph --fuse-bn"
  tar czf "$OUT/fold_all.tgz" "$W/fold_all" "$W/fold_all.log"
  exit 0
  ;;
tuned)
  fold_bench fold_tuned "graph_tuned_rep1:--cuda-graph --cudnn-benchmark" \
    "graph_tuned_rep2:--cuda-graph --cudnn-benchmark" \
    "graph_tuned_m8_rep1:--cuda-graph --cudnn-benchmark --multiple-of 8"
  tar czf "$OUT/fold_tuned.tgz" "$W/fold_tuned" "$W/fold_tuned.log"
  exit 0
  ;;
nas1)
  ( t0=$(now); CUDA_VISIBLE_DEVICES=0 timeout "$(left)" python3 -m torchutil nas evaluate \
      --db "$W/nas_1gpu.sqlite" > "$W/nas_1gpu.log" 2>&1; rc=$?
    echo "one GPU: rc $rc, command wall $(python3 -c "print(f'{$(now) - $t0:.1f}')") s" >> "$W/nas_1gpu.log" ) &
  survey 1 &
  wait
  tail -4 "$W/nas_1gpu.log"
  ;;
nas2)
  t0=$(now)
  timeout "$(left)" torchrun --nproc-per-node 2 -m torchutil nas evaluate --db "$W/nas_2gpu.sqlite" \
    > "$W/nas_2gpu.log" 2>&1
  rc=$?
  echo "two GPUs: rc $rc, command wall $(python3 -c "print(f'{$(now) - $t0:.1f}')") s" >> "$W/nas_2gpu.log"
  grep -v "it/s\|arch/s" "$W/nas_2gpu.log" | tail -8
  survey 0 & survey 1 &
  wait
  ;;
*)
  echo "unknown phase $PHASE" >&2; exit 2 ;;
esac
for g in 0 1; do
  [ -f "$W/survey_gpu$g/survey.jsonl" ] && echo "survey gpu$g: $(wc -l < "$W/survey_gpu$g/survey.jsonl") configurations"
done
tar czf "$OUT/h200-work.tgz" --exclude=out "$W"
ls -la "$OUT"
