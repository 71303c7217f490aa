"""GPU behaviour: timing with CUDA events and graph replays, peaks, counts on CUDA kernels.

Every test here needs a CUDA GPU; conftest.py skips them where torch.cuda.is_available() is
False.
"""
from __future__ import annotations

import math
import statistics

import pytest
import torch
import torchvision.models as tvm
from torch.utils.flop_counter import FlopCounterMode

import torchutil

pytestmark = pytest.mark.cuda

# Dense bfloat16 tensor-core peaks of NVIDIA's datasheets, TFLOP/s, by the variant in the name.
H100_H200_BF16_TFLOPS = {"PCIE": 756.0, "NVL": 835.5, "SXM": 989.4}


@pytest.fixture(scope="module")
def resnet18_fp16():
    torch.manual_seed(0)
    return tvm.resnet18(weights=None).eval().to("cuda", torch.float16)


@pytest.fixture(scope="module")
def batch():
    return torch.randn(8, 3, 224, 224, device="cuda", dtype=torch.float16)


def test_profile_resnet18_fp16_eager(resnet18_fp16, batch):
    result = torchutil.profile(resnet18_fp16, batch, warmup=3, iters=10, timing="eager")
    assert 0 < result.utilization < 1
    assert result.peak_source.startswith(("datasheet", "computed")), result.peak_source
    assert result.peak_dtype == "float16"
    assert result.timing_mode == "eager"
    assert result.cuda_graph == 0
    assert result.device.startswith("cuda")
    assert result.seconds > 0
    assert result.utilization == pytest.approx(
        result.flops / result.seconds / result.peak_flops_per_second, rel=1e-9)
    assert {r.dtype for r in result.ops if r.op_class == "matrix"} == {"float16"}
    assert result.unknown_ops == {}


def test_the_default_timing_on_cuda_is_graph_replay(resnet18_fp16, batch):
    r = torchutil.profile(resnet18_fp16, batch)
    assert (r.timing_mode, r.cuda_graph, r.timing_note, r.trace_status) == ("cuda_graph", 1, "", "on")
    s = torch.ops.util.profile(resnet18_fp16, batch)
    assert torchutil.field(s, "cuda_graph").item() == 1
    assert torchutil.field(s, "flops").item() == r.flops
    # Where the call went: a traced call counts in the capture's forward (capture nodes), so
    # no eager counted forward runs; the traced replays are attributed through the nodes.
    assert r.phase_count_seconds == 0 and r.phase_capture_seconds > 0 and r.phase_trace_seconds > 0
    assert r.kernel_attribution == "timed" and not [k for k in r.kernels if not k.timed]
    phases = sum(getattr(r, f"phase_{p}_seconds") for p in
                 ("warmup", "count", "capture", "trace", "time", "counters", "wait", "assemble"))
    assert phases <= r.call_seconds <= phases + 0.05


def test_profile_resnet18_fp16_cuda_graph(resnet18_fp16, batch):
    eager = torchutil.profile(resnet18_fp16, batch, warmup=1, iters=2, timing="eager")
    result = torchutil.profile(resnet18_fp16, batch, warmup=3, iters=10, cuda_graph=True)
    assert result.timing_mode == "cuda_graph"
    assert result.cuda_graph == 1
    assert result.iterations == 10
    assert 0 < result.utilization < 1
    assert result.flops == eager.flops  # the count is the same eager forward either way


def test_event_seconds_agree_with_torch_cuda_events(resnet18_fp16):
    # GPU-bound (batch 256), so the host does not set the time; the reference records one pair
    # of torch.cuda.Events per forward back to back and synchronizes once, as torchutil does.
    x = torch.randn(256, 3, 224, 224, device="cuda", dtype=torch.float16)
    ratios = []
    with torch.inference_mode():
        for _ in range(3):
            result = torchutil.profile(resnet18_fp16, x, warmup=3, iters=10, trace=False)
            for _ in range(3):
                resnet18_fp16(x)
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                     for _ in range(10)]
            torch.cuda.synchronize()
            for start, end in pairs:
                start.record()
                resnet18_fp16(x)
                end.record()
            torch.cuda.synchronize()
            reference = statistics.median(s.elapsed_time(e) / 1e3 for s, e in pairs)  # ms -> s
            ratios.append(result.seconds / reference)
    print(f"resnet18 fp16 b256: torchutil / torch.cuda.Event median time, three rounds: {ratios}")
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.03)


def test_matrix_flops_equal_flop_counter_on_cuda(resnet18_fp16, batch):
    with FlopCounterMode(display=False) as oracle, torch.no_grad():
        resnet18_fp16(batch)
    result = torchutil.profile(resnet18_fp16, batch, warmup=1, iters=1)
    assert result.matrix_flops == oracle.get_total_flops()


def test_datasheet_bf16_peak_of_h100_h200():
    name = torch.cuda.get_device_name().upper()
    if "H100" not in name and "H200" not in name:
        pytest.skip(f"the datasheet value checked here is for an H100/H200, not {name}")
    variant = next((v for v in ("PCIE", "NVL") if v in name), "SXM")
    value, source = torchutil.peak_flops("cuda", torch.bfloat16)
    assert value == pytest.approx(H100_H200_BF16_TFLOPS[variant] * 1e12, rel=1e-9)
    assert source.startswith("datasheet")
    assert torchutil.peak_flops("cuda", torch.bfloat16, "datasheet")[0] == value


def test_computed_peak_positive():
    value, source = torchutil.peak_flops("cuda", torch.float16, "computed")
    assert value > 0 and math.isfinite(value)
    assert source.startswith("computed")


def test_input_on_cuda_model_on_cpu():
    model = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4, device="cuda")
    message = r"input is on cuda.* but the model's parameters are on cpu"
    with pytest.raises(ValueError, match=message):
        torchutil.profile(model, x)
    assert torch.ops.util._live_callbacks() == 0



def test_timing_auto_replays_a_graph_and_converges(resnet18_fp16, batch):
    r = torchutil.profile(resnet18_fp16, batch, warmup=3, iters=10, timing="auto", target_ci=0.005)
    print(f"resnet18 fp16 b8 auto: {r.timing_mode}, {r.repetition}, util {100 * r.utilization:.3f} %, "
          f"bandwidth util {100 * r.bandwidth_utilization:.2f} %")
    assert r.timing_mode == "cuda_graph" and r.cuda_graph == 1 and r.timing_note == ""
    assert r.repetition.startswith("converged"), r.repetition
    assert r.seconds_relative_ci <= 0.005
    assert 0 < r.bandwidth_utilization < 1
    assert r.peak_bytes_per_second == torchutil.memory_bandwidth(batch.device)[0]


def test_timing_auto_falls_back_to_eager_when_the_forward_cannot_be_captured(resnet18_fp16, batch, monkeypatch):
    # With graph nodes asked for, as the hardest case: their trace subscribes to CUPTI's
    # callbacks around the capture, and the failed capture must not leave the subscriber behind.
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", "graph")

    def forward(x):
        y = resnet18_fp16(x)
        if y.float().abs().sum().item() < 0:  # .item() synchronizes: not allowed while capturing
            raise AssertionError
        return y

    r = torchutil.profile(forward, batch, warmup=1, iters=3, timing="auto")
    print(f"auto fallback: {r.timing_note}")
    assert r.timing_mode == "eager" and r.cuda_graph == 0
    assert r.timing_note.startswith("auto: eager, since the forward could not be captured"), r.timing_note
    # Traced still: the failed capture's graph-node trace gives way to an eager counted forward's.
    assert r.trace_status == "on" and [k for k in r.kernels if not k.timed and k.op_row is not None]
    with pytest.raises(RuntimeError, match="could not be captured in a CUDA graph"):
        torchutil.profile(forward, batch, warmup=1, iters=3, timing="cuda_graph")
    # Nothing is left behind: the next graph capture works, traced through graph nodes (a
    # CUPTI subscriber left by a failed capture would refuse the next one's, which would then
    # trace an eager counted forward instead).
    r = torchutil.profile(resnet18_fp16, batch, warmup=1, iters=3, timing="cuda_graph")
    assert r.cuda_graph == 1 and r.trace_status == "on"
    assert r.kernels and not [k for k in r.kernels if not k.timed]
    assert all(k.op_row is not None for k in r.kernels)
    assert torch.ops.util._live_callbacks() == 0
    # The same for the capture an eager traced call counts in (never replayed): it fails, the
    # call counts an eager forward instead, and the next captures of either kind work.
    monkeypatch.delenv("TORCHUTIL_CUPTI_CORRELATION")
    e = torchutil.profile(forward, batch, warmup=1, iters=2, timing="eager")
    assert (e.timing_mode, e.trace_status) == ("eager", "on") and e.flops > r.flops  # + abs, sum
    for timing in ("auto", "eager", "auto"):
        again = torchutil.profile(resnet18_fp16, batch, warmup=1, iters=2, timing=timing)
        assert again.trace_status == "on" and again.flops == r.flops
        assert again.timing_mode == ("cuda_graph" if timing == "auto" else "eager")
        assert again.phase_capture_seconds > 0 or again.phase_count_seconds > 0


def test_graph_timing_counts_the_capture_forward(resnet18_fp16, batch, monkeypatch):
    # Untraced graph timing counts the capture's own forward: warmup=1 costs one host pass, what
    # a NAS sweep pays per cell; so does a traced call with graph nodes
    # (TORCHUTIL_CUPTI_CORRELATION=graph: the replays' kernels are attributed through the
    # capture's nodes). Traced by default (markers), the counted forward runs eagerly on the
    # capture's side stream first, as the capture's warm-up: two passes.
    calls = []

    def forward(x):
        calls.append(torch.cuda.current_stream(x.device).stream_id)
        return resnet18_fp16(x)

    eager = torchutil.profile(resnet18_fp16, batch, warmup=2, iters=2, timing="eager", trace=False)
    r = torchutil.profile(forward, batch, warmup=1, iters=3, timing="cuda_graph", trace=False)
    assert r.timing_mode == "cuda_graph" and r.iterations == 3
    assert len(calls) == 1, calls
    assert (r.flops, r.bytes, r.counted_op_calls) == (eager.flops, eager.bytes, eager.counted_op_calls)
    assert r.phase_count_seconds == 0 and r.phase_capture_seconds > 0
    default = torch.cuda.current_stream(batch.device).stream_id
    assert calls[0] != default, (calls, default)
    calls.clear()
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", "markers")  # an eager counted forward, traced
    r = torchutil.profile(forward, batch, warmup=1, iters=3, timing="cuda_graph", trace=True)
    assert r.flops == eager.flops and r.trace_status == "on"
    assert len(calls) == 2 and calls[0] == calls[1] != default, (calls, default)
    for correlation in ("graph", None):  # None: the default, capture nodes
        calls.clear()
        if correlation:
            monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", correlation)
        else:
            monkeypatch.delenv("TORCHUTIL_CUPTI_CORRELATION")
        r = torchutil.profile(forward, batch, warmup=1, iters=3, timing="cuda_graph", trace=True)
        assert r.flops == eager.flops and r.trace_status == "on" and r.kernel_attribution == "timed"
        assert len(calls) == 1 and calls[0] != default, (correlation, calls, default)
    # Eager timing stays on the current stream, with no capture.
    calls.clear()
    torchutil.profile(forward, batch, warmup=1, iters=3, timing="eager", trace=False)
    assert calls == [default] * 4, calls


def test_an_eager_call_counting_in_a_capture_runs_warmup_host_forwards_before_the_timed_ones(resnet18_fp16, batch):
    # Eager timing with capture nodes (the default correlation) counts in a capture that is never
    # replayed. Its forward runs on the host like any warm-up, so the host forwards before the
    # timed ones are `warmup` in all (the user's loop of warmup + iters is the baseline), with one
    # plain forward before the capture whatever warmup says: lazy initialization cannot be captured.
    calls = []

    def forward(x):
        calls.append(torch.cuda.is_current_stream_capturing())
        return resnet18_fp16(x)

    r = torchutil.profile(forward, batch, warmup=3, iters=4, timing="eager")
    assert r.trace_status == "on" and r.traced_forwards == 1 and r.iterations == 4
    # plain warm-up, counting capture, traced eager forward, then the 4 timed ones
    assert calls == [False, True, False] + [False] * 4, calls
    calls.clear()
    r = torchutil.profile(forward, batch, warmup=0, iters=1, timing="eager")
    assert r.trace_status == "on" and r.iterations == 1
    assert calls == [False, True, False, False], calls


@pytest.mark.parametrize("correlation", ["markers", "graph", "capture"])
def test_trace_forwards_chooses_how_many_forwards_are_traced(resnet18_fp16, batch, monkeypatch, correlation):
    # With graph nodes, the counted forward is the capture's and only the replays are traced; but
    # trace_forwards=0 has no replay to attribute nodes on, so its counted forward is traced
    # eagerly (markers). Its kernel count is the oracle of the replays'.
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", correlation)
    # warmup=3: one plain forward before the counted one, whose first-use kernels (seen: 169
    # against the replays' 167 when this test ran first) would otherwise be counted.
    results = {n: torchutil.profile(resnet18_fp16, batch, warmup=3, iters=10, trace_forwards=n) for n in (0, 1, 3)}
    for n, r in results.items():
        assert r.trace_status == "on" and r.traced_forwards == n
        timed = [k for k in r.kernels if k.timed]
        counted = [k for k in r.kernels if not k.timed]
        assert len(timed) == n * int(results[0].kernels_per_forward)
        eager_count = correlation == "markers" or n == 0
        assert len(counted) == (int(results[0].kernels_per_forward) if eager_count else 0)
        assert sorted({k.forward for k in timed}) == list(range(n))
        assert r.kernel_attribution == ("timed" if n else "counted")
    one, three = results[1], results[3]
    assert one.kernels_per_forward == three.kernels_per_forward == results[0].kernels_per_forward
    assert one.kernel_seconds == pytest.approx(three.kernel_seconds, rel=0.05)
    assert one.kernel_bandwidth_utilization >= one.bandwidth_utilization


def test_gpu_lock_is_held_for_the_call_and_released_after(resnet18_fp16, batch, tmp_path):
    import fcntl

    lock = tmp_path / "gpu.lock"
    seen = []

    def forward(x):
        with open(lock, "a") as f:  # held by the profile while the GPU runs: a try from here fails
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append("free")
                fcntl.flock(f, fcntl.LOCK_UN)
            except BlockingIOError:
                seen.append("held")
        return resnet18_fp16(x)

    r = torchutil.profile(forward, batch, warmup=2, iters=2, timing="eager", trace=False, gpu_lock=str(lock))
    assert seen == ["held"] * 4 and r.phase_wait_seconds >= 0
    with open(lock, "a") as f:  # released when the call returns
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_kept_capture_pools_take_the_same_blocks_again_and_give_them_back(resnet18_fp16, batch, monkeypatch):
    # By default each thread's captures allocate from one pool on one side stream, kept between
    # calls; TORCHUTIL_KEEP_CAPTURE_POOL=0 gives every capture a private pool of its own.
    # Oracle: torch's allocator statistics (segments made = cudaMalloc calls; reserved bytes).
    # After the first calls neither a default call (one capture, replayed) nor an eager traced
    # one (counts in a capture never replayed) makes a segment, the figures are those of private
    # pools, and private pools make new segments on every call.
    monkeypatch.setenv("TORCHUTIL_KEEP_CAPTURE_POOL", "0")
    private = torchutil.profile(resnet18_fp16, batch)
    before = torch.cuda.memory_stats()["segment.all.allocated"]
    torchutil.profile(resnet18_fp16, batch)
    assert torch.cuda.memory_stats()["segment.all.allocated"] > before, "a private pool per capture"
    monkeypatch.delenv("TORCHUTIL_KEEP_CAPTURE_POOL")
    torchutil.free_capture_pools()  # a failed capture earlier on this thread turned them off
    try:
        first = torchutil.profile(resnet18_fp16, batch)
        torchutil.profile(resnet18_fp16, batch, timing="eager")
        made = torch.cuda.memory_stats()["segment.all.allocated"]
        again = [torchutil.profile(resnet18_fp16, batch) for _ in range(3)]
        eager = torchutil.profile(resnet18_fp16, batch, timing="eager")
        assert torch.cuda.memory_stats()["segment.all.allocated"] == made
        assert [r.flops for r in [first, *again, eager]] == [private.flops] * 5
        assert [r.timing_mode for r in again] == ["cuda_graph"] * 3 and eager.trace_status == "on"
        assert [k.name for k in again[-1].kernels] == [k.name for k in private.kernels]
        assert statistics.median(r.utilization for r in again) == pytest.approx(private.utilization, rel=0.02)
        # empty_cache leaves the kept pool; giving the pool back returns it to the cache.
        torch.cuda.empty_cache()
        kept = torch.cuda.memory_reserved()
        torchutil.free_capture_pools()
        torch.cuda.empty_cache()
        assert torch.cuda.memory_reserved() < kept
    finally:
        torchutil.free_capture_pools()
