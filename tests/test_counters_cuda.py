"""Hardware counters on a GPU (counters=...): what CUPTI's range profiler and PM sampler read,
against GEMMs of known work and resnet50.

The first test decides whether csrc/core/HwCounters.h's kTensorOpFlopsPerUnit (FLOPs per unit
of an sm__ops_path_tensor_op_* counter, taken to be 1) holds: it prints hw_tensor_flops /
(2*M*N*K) for fp16, bf16 and tf32 GEMMs whose shapes tile evenly (7680 is a multiple of every
tile size cuBLAS uses on sm90: 64, 128, 192, 256, 320), and fails where a ratio is off by more
than 1 %. A ratio of 2 or 0.5 there means that factor, not the test, is to be changed.

Every test prints what it measured (pytest -s), so one device run gives the figures.
"""
from __future__ import annotations

import json
import math

import pytest
import torch
import torchvision.models as tvm

import torchutil

pytestmark = pytest.mark.cuda

N = 7680  # M = N = K: tiles evenly (see the module docstring)


def _assert_all_read(r) -> None:
    """Everything this GPU has a counter for was read. Metrics the chip has no counter for (GH100:
    the fp8 tensor paths, docs/results/counters/ncu_tensor_metrics.txt) are named apart, in
    counters_not_on_gpu, and do not make the read partial."""
    print(f"  counters_not_on_gpu {r.counters_not_on_gpu!r}")
    assert r.counters_status == "on", r.counters_status


# What a failed CUPTI call says where a machine gives no counters at all (explainFailure in
# csrc/core/HardwareBackends.cpp, through csrc/cupti/CuptiStatus.h).
UNAVAILABLE = ("no permission to read GPU performance counters", "not supported on this GPU, driver or sandbox",
               "another profiler holds the GPU's counters")


def _skip_unless_counters(r) -> None:
    """Skips (saying why) where this machine gives no counters at all (no permission, a sandbox,
    another profiler); any other failure, and a partial read, fails the test."""
    if r.counters_status.startswith("off") and any(u in r.counters_status for u in UNAVAILABLE):
        pytest.skip(f"hardware counters unavailable here: {r.counters_status}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "tf32"])
def test_gemm_hardware_flops_equal_2mnk(dtype):
    torch.manual_seed(0)
    tf32 = dtype == "tf32"
    torch_dtype = torch.float32 if tf32 else getattr(torch, dtype)
    a = torch.randn(N, N, device="cuda", dtype=torch_dtype)
    b = torch.randn(N, N, device="cuda", dtype=torch_dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        r = torchutil.profile(lambda x: torch.mm(x, b), a, warmup=2, iters=3, counters="flops")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    print(f"\n{dtype} GEMM {N}^3: counters_status {r.counters_status!r}")
    _skip_unless_counters(r)
    nominal = 2.0 * N * N * N
    kernels = [k for k in r.kernels if not k.timed and k.kind == 0]
    for k in kernels:
        print(f"  kernel {k.name[:90]}: hw_tensor_flops {k.hw_tensor_flops:.6g}, "
              f"gmma instructions {k.hw_gmma_instructions:.6g}, FMA {k.hw_fma_instructions:.6g}, "
              f"{k.duration_us:.1f} us")
    per_path = {d: getattr(r, f"hw_tensor_flops_{d}") for d in ("fp16", "bf16", "tf32", "fp8")}
    ratio = r.hw_tensor_flops / nominal
    gmma = r.hw_gmma_instructions
    print(f"  counted matrix FLOPs {r.matrix_flops:.6g} (2MNK {nominal:.6g}); hardware "
          f"{r.hw_tensor_flops:.6g}; ratio hw/2MNK {ratio:.6f}; per path {per_path}; "
          f"2MNK / gmma instructions {nominal / gmma if gmma == gmma and gmma > 0 else float('nan'):.1f}")
    print("  RESULT " + json.dumps({"test": "gemm", "dtype": dtype, "n": N, "ratio": ratio,
                                    "hw_tensor_flops": r.hw_tensor_flops, "nominal": nominal,
                                    "gmma_instructions": gmma, "per_path": per_path}))
    assert r.matrix_flops == nominal
    _assert_all_read(r)
    assert {"float16": "fp16", "bfloat16": "bf16", "tf32": "tf32"}[dtype] not in r.counters_not_on_gpu
    assert r.counter_kernels >= len(kernels) and r.counter_passes >= 1  # memsets may be ranges too
    assert ratio == pytest.approx(1.0, rel=0.01), (
        f"{dtype}: hardware FLOPs / 2MNK = {ratio:.4f}; if this is 2 or 0.5 for every dtype, "
        "kTensorOpFlopsPerUnit in csrc/core/HwCounters.h is wrong")
    assert r.hw_flops_ratio == pytest.approx(ratio, rel=1e-9)


@pytest.fixture(scope="module")
def resnet50():
    torch.manual_seed(0)
    model = tvm.resnet50(weights=None).eval().to("cuda", torch.float16).to(memory_format=torch.channels_last)
    x = torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    return model, x


def test_resnet50_per_op_hardware_table(resnet50):
    model, x = resnet50
    r = torchutil.profile(model, x, warmup=3, iters=10, counters=["flops", "throughput"])
    print(f"\nresnet50 fp16 b32: counters_status {r.counters_status!r}")
    _skip_unless_counters(r)
    _assert_all_read(r)
    counted = [k for k in r.kernels if not k.timed and k.kind == 0]
    assert r.counter_kernels >= len(counted)
    print(f"  hw tensor {r.hw_tensor_flops / 1e9:.3f} GFLOP vs counted matrix {r.matrix_flops / 1e9:.3f} "
          f"(ratio {r.hw_flops_ratio:.4f}); SM {r.sm_throughput_pct:.1f} %, DRAM {r.dram_throughput_pct:.1f} %, "
          f"tensor active {r.tensor_active_pct:.1f} %, occupancy {r.achieved_occupancy_pct:.1f} %; "
          f"{r.counter_passes:.0f} passes in {r.counter_seconds:.3f} s (set-up {r.counter_setup_seconds:.3f} s, "
          f"passes {r.counter_pass_seconds:.3f} s, decoding {r.counter_decode_seconds:.3f} s), "
          f"plain forward {1e3 * r.seconds:.3f} ms")
    print(f"  {'op':<22} {'module':<28} {'GFLOP':>8} {'hw GFLOP':>9} {'hw/nom':>7} {'SM%':>6} {'DRAM%':>6} {'TC%':>6}")
    for row in sorted(r.ops, key=lambda o: -o.matrix_flops)[:25]:
        print(f"  {row.op:<22} {row.module[-28:]:<28} {row.matrix_flops / 1e9:>8.3f} "
              f"{row.hw_tensor_flops / 1e9:>9.3f} {row.hw_flops_ratio:>7.3f} {row.sm_throughput_pct:>6.1f} "
              f"{row.dram_throughput_pct:>6.1f} {row.tensor_active_pct:>6.1f}")
    convs = [o for o in r.ops if "conv" in o.op and o.matrix_flops > 0]
    assert convs and all(math.isfinite(o.hw_flops_ratio) for o in convs)
    assert 0 < r.sm_throughput_pct <= 100 and 0 < r.dram_throughput_pct <= 100
    assert 0 < r.achieved_occupancy_pct <= 100
    # The read's stages: each measured, and together no more than the whole read (the claim and
    # the release are in counter_seconds only).
    stages = [r.counter_setup_seconds, r.counter_pass_seconds, r.counter_decode_seconds]
    assert all(math.isfinite(s) and s > 0 for s in stages), stages
    assert sum(stages) <= r.counter_seconds
    # Per-kernel values add up to the per-op and the forward's: every counted record the ranges
    # were matched to (memsets too, where CUPTI profiled them) counts once in its op's row
    # (op_row) and once in the forward.
    matched = [k for k in r.kernels if not k.timed and k.hw_tensor_flops == k.hw_tensor_flops]
    assert len(matched) == r.counter_kernels
    assert sum(k.hw_tensor_flops for k in matched) == pytest.approx(r.hw_tensor_flops, rel=1e-9)
    per_row: dict[int, float] = {}
    for k in matched:
        if k.op_row is not None:
            per_row[k.op_row] = per_row.get(k.op_row, 0.0) + k.hw_tensor_flops
    with_hw = {i for i, o in enumerate(r.ops) if o.hw_tensor_flops == o.hw_tensor_flops}
    assert per_row and set(per_row) == with_hw
    for row, total in per_row.items():
        assert r.ops[row].hw_tensor_flops == pytest.approx(total, rel=1e-9), (r.ops[row].op, r.ops[row].module)


def test_kernel_replay_reads_the_counts_user_replay_reads(resnet50):
    model, x = resnet50
    user = torchutil.profile(model, x, warmup=2, iters=3, counters="flops")
    kernel = torchutil.profile(model, x, warmup=2, iters=3, counters="flops", counter_replay="kernel")
    print(f"\nresnet50 flops, user replay: {user.counters_status!r}, {user.counter_passes:.0f} forwards, "
          f"{user.counter_seconds:.3f} s; kernel replay: {kernel.counters_status!r}, "
          f"{kernel.counter_passes:.0f} forwards, {kernel.counter_seconds:.3f} s; hw tensor FLOPs "
          f"{user.hw_tensor_flops:.6g} vs {kernel.hw_tensor_flops:.6g}")
    _skip_unless_counters(user)
    _assert_all_read(kernel)
    assert kernel.counter_passes == 1
    # Counts do not depend on how the passes were taken.
    assert kernel.hw_tensor_flops == pytest.approx(user.hw_tensor_flops, rel=1e-6)
    assert kernel.hw_fma_instructions == pytest.approx(user.hw_fma_instructions, rel=1e-6)


def test_resnet50_timeline(resnet50):
    model, x = resnet50
    r = torchutil.profile(model, x, warmup=3, iters=10, counters="timeline", chrome_trace=True)
    print(f"\nresnet50 fp16 b32 timeline: counters_status {r.counters_status!r}, {r.pm_samples:.0f} samples, "
          f"clock offset {r.pm_clock_offset_us:.3f} us; SM active {r.pm_sm_active_pct:.1f} %, tensor "
          f"{r.pm_tensor_active_pct:.1f} %, DRAM {r.pm_dram_throughput_pct:.1f} %; GPU busy (kernel union) "
          f"{100 * r.gpu_busy_fraction:.1f} %")
    _skip_unless_counters(r)
    _assert_all_read(r)
    assert r.pm_interval_us == 10  # one traced forward fits at the least interval
    assert r.pm_samples > 0 and 0 < r.pm_sm_active_pct <= 100
    assert '"ph":"C"' in r.chrome_trace
    with_pm = [o for o in r.ops if o.pm_sm_active_pct == o.pm_sm_active_pct]
    print(f"  {len(with_pm)} of {len(r.ops)} op rows have PM figures; top by kernel time:")
    for row in sorted(with_pm, key=lambda o: -o.kernel_seconds)[:10]:
        print(f"  {row.op:<22} {row.module[-28:]:<28} kernel {1e3 * row.kernel_seconds:.3f} ms, SM active "
              f"{row.pm_sm_active_pct:.1f} %, tensor {row.pm_tensor_active_pct:.1f} %, DRAM {row.pm_dram_throughput_pct:.1f} %")
    assert with_pm


def test_flops_need_tracing_but_the_timeline_does_not(resnet50):
    model, x = resnet50
    r = torchutil.profile(model, x, warmup=1, iters=3, trace=False, counters=["flops", "timeline"])
    print(f"\ntrace=False, flops+timeline: {r.counters_status!r}")
    _skip_unless_counters(r)
    assert "need kernel tracing" in r.counters_status
    assert math.isnan(r.hw_tensor_flops) and r.pm_samples > 0


def test_untraced_timeline_samples_a_forward_after_the_timed_ones(resnet50):
    """trace=False: PM sampling runs over one forward after the 400 timed ones, not over them.
    Sampling all of them (2 s: 200,000 samples at 10 us) overflowed CUPTI's hardware buffer, which
    holds some 4,000 samples of 32 MB on an H200 (benchmarks/results/pm_probe.cu), and so did 2,340
    samples at a stretched 787 us. Oracle: the interval times the samples is the sampled window,
    which must hold one forward (its median time) and not the timed ones: 1.2-1.8 forwards in the
    H200 runs of docs/results (the sampler's start and stop around it), where the 400 timed
    forwards would be 400, or a full buffer's ~4,000 samples (18 forwards of 2.2 ms)."""
    model, x = resnet50
    r = torchutil.profile(model, x, warmup=3, iters=400, trace=False, counters="timeline")
    covered = r.pm_samples * r.pm_interval_us * 1e-6
    print(f"\ntimeline, trace=False, {r.iterations:.0f} timed forwards: {r.counters_status!r}, "
          f"{r.pm_samples:.0f} samples every {r.pm_interval_us:.0f} us = {1e3 * covered:.3f} ms; median forward "
          f"{1e3 * r.seconds:.3f} ms; SM active {r.pm_sm_active_pct:.1f} %, tensor {r.pm_tensor_active_pct:.1f} %, "
          f"DRAM {r.pm_dram_throughput_pct:.1f} %")
    _skip_unless_counters(r)
    _assert_all_read(r)
    assert r.iterations == 400 and r.pm_interval_us == 10
    assert 0.9 * r.seconds <= covered <= 4 * r.seconds
    assert 0 < r.pm_sm_active_pct <= 100


def _assert_read_both(r) -> None:
    """Range counters and PM samples were really read (not only a status that says so)."""
    assert r.counters_status.startswith("on"), r.counters_status
    assert r.counter_kernels > 0 and r.counter_passes >= 1 and r.hw_fma_instructions > 0
    assert r.pm_samples > 0


@pytest.mark.torch_profiler
def test_counters_leave_nothing_behind(resnet50):
    """Counters read, then read again, then after torch.profiler (Kineto subscribed to CUPTI and
    set its own clock) read again: nothing a read enabled is left behind. Skipped where this
    machine gives no counters at all, since then nothing was read to leave anything behind.
    It runs torch.profiler in this process (so it is collected last: conftest.py)."""
    model, x = resnet50
    first = torchutil.profile(model, x, warmup=1, iters=2, counters="all")
    print(f"\ncounters='all': {first.counters_status!r}")
    _skip_unless_counters(first)
    _assert_read_both(first)
    second = torchutil.profile(model, x, warmup=1, iters=2, counters="all")
    assert second.counters_status == first.counters_status
    _assert_read_both(second)
    assert second.counter_kernels == first.counter_kernels
    plain = torchutil.profile(model, x, warmup=1, iters=2)
    assert plain.trace_status == "on" and plain.counters_status == "off"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        model(x)
        torch.cuda.synchronize()
    assert any(e.device_type == torch.autograd.DeviceType.CUDA for e in prof.events())
    # While torch.profiler runs, the profile returns and says why there are no counters.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        during = torchutil.profile(model, x, warmup=1, iters=2, counters="flops")
    print(f"during torch.profiler: {during.counters_status!r}")
    assert during.counters_status.startswith("off: torch.profiler is running")
    # After torch.profiler (Kineto subscribed to CUPTI and set its clock), counters read again.
    after = torchutil.profile(model, x, warmup=1, iters=2, counters="all")
    print(f"after torch.profiler: {after.counters_status!r}")
    assert after.counters_status == first.counters_status
    _assert_read_both(after)
    assert after.counter_kernels == first.counter_kernels
    assert after.hw_tensor_flops == pytest.approx(first.hw_tensor_flops, rel=1e-6)
    assert torch.ops.util._live_callbacks() == 0
