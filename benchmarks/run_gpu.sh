#!/usr/bin/env bash
# Everything the GPU machine has to show, in one go (run after building torchutil there, e.g.
# scripts/device_run.sh benchmarks/run_gpu.sh). Results under $OUT (default ./gpu-results).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/overhead.txt"

# The whole test suite, GPU tests included.
python3 -m pytest tests -q -p no:cacheprovider -rs -s > "$OUT/pytest.txt" 2>&1
grep -E "passed|failed|error" "$OUT/pytest.txt" | tail -3

# Counting and tracing overhead, resnet50 fp16 channels_last at batch 1 and 256.
python3 benchmarks/bench_overhead.py --model resnet50 --batch 1 --device cuda --dtype float16 \
  --json "$OUT/overhead_b1.json" 2>&1 | grep -v "^USDT\|^STAGE" | tee -a "$OUT/overhead.txt"
python3 benchmarks/bench_overhead.py --model resnet50 --batch 256 --device cuda --dtype float16 \
  --rounds 9 --json "$OUT/overhead_b256.json" 2>&1 | grep -v "^USDT\|^STAGE" | tee -a "$OUT/overhead.txt"

# Utilization of the reference models.
python3 benchmarks/reference_models.py --json "$OUT/reference.json" | tee "$OUT/reference.txt"

# A Chrome trace of resnet50 (batch 32) for the README's picture.
python3 - "$OUT/trace_resnet50_b32.json" <<'PY'
import sys, torch, torchvision, torchutil
m = torchvision.models.resnet50(weights=None).eval().cuda().half().to(memory_format=torch.channels_last)
x = torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
r = torchutil.profile(m, x, warmup=3, iters=2, chrome_trace=True)
r.save_trace(sys.argv[1])
print(r.format(top=5))
PY
