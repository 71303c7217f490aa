"""Kernel tracing (CUPTI): kernels recorded, attributed to ops, time-based utilization, traces.

The CPU tests run everywhere; the cuda-marked ones run on the GPU machine.
"""
from __future__ import annotations

import csv
import json
import statistics

import pytest
import torch

import torchutil
from torchutil import KERNEL_FIELDS


def _resnet50(batch: int, device: str = "cuda") -> tuple[torch.nn.Module, torch.Tensor]:
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.resnet50(weights=None).eval().to(device=device, dtype=torch.float16)
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(batch, 3, 224, 224, device=device, dtype=torch.float16)
    return model, x.contiguous(memory_format=torch.channels_last)


def _event_seconds(model: torch.nn.Module, x: torch.Tensor, graph: bool, n: int) -> float:
    """The median of n forwards of model(x), each between a pair of CUDA events, queued back to
    back and read after one synchronization: replays of one captured CUDA graph when `graph`,
    else eager forwards (after three eager warm-ups either way)."""
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        run = lambda: model(x)  # noqa: E731
        if graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                model(x)
            torch.cuda.current_stream().wait_stream(side)
            cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cuda_graph):
                model(x)
            cuda_graph.replay()
            run = cuda_graph.replay
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in events:
            start.record()
            run()
            end.record()
        torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) * 1e-3 for start, end in events)


def _column(result: torchutil.ProfileResult, name: str) -> torch.Tensor:
    return result.kernel_table[:, KERNEL_FIELDS.index(name)]


# ---- CPU: what a result without a trace says ------------------------------------------------

def test_cpu_profile_says_why_there_is_no_trace(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    r = torchutil.profile(model, torch.randn(2, 8), warmup=1, iters=2)
    assert r.trace_status.startswith("off: kernel tracing needs a CUDA device")
    assert r.traced == 0.0
    assert r.kernel_seconds != r.kernel_seconds  # NaN, never a silent 0
    assert r.kernel_table.shape == (0, len(KERNEL_FIELDS))
    with pytest.raises(ValueError, match="no trace"):
        r.save_trace(str(tmp_path / "t.json"))
    r.kernels_to_csv(str(tmp_path / "k.csv"))
    with open(tmp_path / "k.csv") as f:
        assert next(csv.reader(f)) == [spec.name for spec in torchutil.schema("kernels")]
    r.ops_to_csv(str(tmp_path / "o.csv"))
    with open(tmp_path / "o.csv") as f:
        rows = list(csv.reader(f))
    assert [row[0] for row in rows[1:]] == [o.op for o in r.ops]


def test_trace_false_is_reported():
    r = torchutil.profile(torch.nn.Linear(4, 4), torch.randn(1, 4), warmup=0, iters=1, trace=False)
    assert r.trace_status == "off: trace=False"
    assert r.kernel_attribution == "none"
    assert r.kernels == []


# ---- GPU ----------------------------------------------------------------------------------

@pytest.mark.cuda
def test_kernel_time_matches_event_time_when_gpu_bound():
    model, x = _resnet50(256)
    untraced = torchutil.profile(model, x, warmup=3, iters=10, trace=False)
    r = torchutil.profile(model, x, warmup=3, iters=10, trace_forwards=10)
    assert r.trace_status == "on", r.trace_status
    assert r.traced == 1.0
    forward = _column(r, "forward")
    start = _column(r, "start_us")
    end = start + _column(r, "duration_us")
    # Per timed forward: the span from its first kernel's start to its last kernel's end, and the
    # idle time between consecutive kernels inside it.
    spans, idles = [], []
    for f in range(10):
        mask = forward == f
        s, order = start[mask].sort()
        e = end[mask][order]
        spans.append((e.max() - s.min()).item() * 1e-6)
        idles.append((s[1:] - e[:-1]).clamp(min=0).sum().item() * 1e-6)
    span = sorted(spans)[5]
    idle = sorted(idles)[5]
    gap = (r.seconds - r.kernel_seconds) / r.seconds
    print(f"resnet50 b256: kernel sum {r.kernel_seconds * 1e3:.3f} ms, CUDA events {r.seconds * 1e3:.3f} ms "
          f"(untraced {untraced.seconds * 1e3:.3f} ms), kernel sum {100 * (1 - gap):.2f} % of the event time, "
          f"busy {100 * r.gpu_busy_fraction:.2f} %; kernel span {span * 1e3:.3f} ms, idle between "
          f"{int(r.kernels_per_forward) - 1} consecutive kernels {idle * 1e3:.3f} ms")
    # GPU-bound: the kernels of a forward fill the event window; what the kernel sum misses is
    # the idle time between consecutive kernels, measured from the same records. The spans are
    # the traced replays', the events the untraced timed ones', and CUPTI's kernel records make a
    # replay a little longer: on the H200 the span was 0.10-0.17 ms (0.7-1.1 %) over the event
    # time in five runs (0.3-0.5 us per kernel of 312): hence 2 %, not 1 %.
    assert abs(span - r.seconds) / r.seconds < 0.02
    assert abs(r.kernel_seconds + idle - span) / span < 0.01
    assert 0.0 <= gap < 0.05
    assert 0.95 < r.gpu_busy_fraction <= 1.0 + 1e-6
    assert r.kernel_utilization >= r.utilization
    # Tracing does not change the forward's time much (the cost target lives in benchmarks/).
    assert r.seconds < 1.10 * untraced.seconds


@pytest.mark.cuda
@pytest.mark.parametrize("correlation", ["markers", "graph", "capture"])
def test_every_kernel_of_a_resnet50_forward_is_attributed(correlation, monkeypatch):
    # markers (TORCHUTIL_CUPTI_CORRELATION=markers): the counted forward runs eagerly, traced,
    # and the traced replays are attributed by position; graph (=graph): the counted forward is
    # the capture's, and the replays' kernels are attributed through their graph nodes; capture
    # (the default): the same nodes' ops from CUDA's capture queries.
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", correlation)
    model, x = _resnet50(8)
    r = torchutil.profile(model, x, warmup=3, iters=5, trace_forwards=5)
    assert r.trace_status == "on", r.trace_status
    op_row = _column(r, "op_row")
    counted = _column(r, "timed") == 0
    timed = ~counted
    assert r.kernel_attribution == "timed"
    unattributed = [k.name for k in r.kernels if k.op_row is None]
    print(f"resnet50 b8 {correlation}: {int(counted.sum())} kernels in the counted forward, {int(timed.sum())} in "
          f"5 traced ones, unattributed: {unattributed}")
    assert unattributed == []
    assert (op_row[timed] >= 0).all()
    assert sorted({k.forward for k in r.kernels if k.timed}) == [0, 1, 2, 3, 4]
    assert all(k.forward is None for k in r.kernels if not k.timed)
    assert r.kernels_per_forward == pytest.approx(float(timed.sum()) / 5)
    assert r.kernels_per_forward > 50
    assert r.timing_mode == "cuda_graph"
    if correlation != "markers":
        assert int(counted.sum()) == 0
    else:
        assert int(timed.sum()) == 5 * int(counted.sum())
    # Per-op kernel time adds up to the attributed kernel time.
    per_op = sum(o.kernel_seconds for o in r.ops if o.kernel_seconds == o.kernel_seconds)
    assert per_op + r.unattributed_kernel_seconds == pytest.approx(r.kernel_seconds, rel=1e-6)
    convs = [o for o in r.ops if o.op == "aten::convolution"]
    assert convs and all(o.kernels >= 1 and o.kernel_seconds > 0 for o in convs)
    assert r.top_ops(1, by="lost_seconds")[0].lost_seconds > 0


@pytest.mark.cuda
def test_op_markers_attribute_every_kernel_as_cuptis_api_records_do(monkeypatch):
    # The oracle: CUPTI's own external correlation (runtime and driver API records, each with the
    # external id open when the launch was made). The default, launch-order markers, must give
    # every kernel of the counted forward the same op and module, and leave no marker behind.
    model, x = _resnet50(8)

    def counted(r):
        return sorted((k.name, k.kind, k.op, k.module) for k in r.kernels if not k.timed)

    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", "api")
    api = torchutil.profile(model, x, warmup=3, iters=3, trace_forwards=1)
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", "markers")
    markers = torchutil.profile(model, x, warmup=3, iters=3, trace_forwards=1)
    assert api.trace_status == "on" and markers.trace_status == "on"
    print(f"resnet50 b8: {len(counted(markers))} kernels in the counted forward; markers and API records "
          f"agree on {sum(a == b for a, b in zip(counted(markers), counted(api)))}")
    assert len(counted(markers)) > 50
    assert counted(markers) == counted(api)
    assert all(k.op for k in markers.kernels if not k.timed)
    assert markers.unattributed_kernel_seconds == 0.0


@pytest.mark.cuda
@pytest.mark.parametrize("correlation", ["graph", "capture"])
def test_graph_nodes_attribute_every_replayed_kernel_as_cuptis_api_records_do(monkeypatch, correlation):
    # The oracle: CUPTI's external correlation of an eager counted forward (API records, each
    # with the external id open at the launch). Graph nodes (TORCHUTIL_CUPTI_CORRELATION=graph),
    # a capture whose nodes carry the op open when the capture made them, must give each
    # replayed kernel the same op and module: as multisets of (name, kind, op, module), one
    # replay against the counted forward. Capture nodes (=capture) get the same nodes' ops
    # from CUDA's capture queries instead of CUPTI's callbacks.
    model, x = _resnet50(8)
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", "api")
    api = torchutil.profile(model, x, warmup=3, iters=3, trace_forwards=1, timing="eager")
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", correlation)
    graph = torchutil.profile(model, x, warmup=3, iters=3, trace_forwards=2)
    monkeypatch.delenv("TORCHUTIL_CUPTI_CORRELATION")
    assert api.trace_status == "on" and graph.trace_status == "on", (api.trace_status, graph.trace_status)
    assert graph.timing_mode == "cuda_graph"
    reference = sorted((k.name, k.kind, k.op, k.module) for k in api.kernels if not k.timed)
    assert not [k for k in graph.kernels if not k.timed]  # nothing ran eagerly to be traced
    for f in (0, 1):
        replay = sorted((k.name, k.kind, k.op, k.module) for k in graph.kernels if k.forward == f)
        missing = [k for k in reference if k not in replay]
        extra = [k for k in replay if k not in reference]
        print(f"resnet50 b8 {correlation}: replay {f}: {len(replay)} kernels, API records {len(reference)}; "
              f"only in the replay {extra[:3]}, only in the eager forward {missing[:3]}")
        assert replay == reference
    assert graph.unattributed_kernel_seconds == 0.0
    assert graph.kernels_per_forward == len(reference)


@pytest.mark.cuda
def test_eager_timing_counts_in_a_capture_with_capture_nodes(monkeypatch):
    # With capture nodes, eager timing counts in a capture that is never replayed (no markers,
    # no GPU work), and the traced eager forwards are attributed against its nodes. Oracle: the
    # markers' eager counted forward (itself checked against CUPTI's API records above), as
    # multisets of (name, kind, op, module) per traced forward.
    model, x = _resnet50(8)
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", "markers")
    markers = torchutil.profile(model, x, warmup=3, iters=3, trace_forwards=2, timing="eager")
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", "capture")
    r = torchutil.profile(model, x, warmup=3, iters=3, trace_forwards=2, timing="eager")
    assert r.trace_status == "on" and r.timing_mode == "eager", r.trace_status
    assert (r.flops, r.bytes) == (markers.flops, markers.bytes)
    assert not [k for k in r.kernels if not k.timed]
    reference = sorted((k.name, k.kind, k.op, k.module) for k in markers.kernels if not k.timed)
    for f in (0, 1):
        forward = sorted((k.name, k.kind, k.op, k.module) for k in r.kernels if k.forward == f)
        print(f"resnet50 b8 eager, capture nodes: forward {f}: {len(forward)} kernels, markers {len(reference)}; "
              f"count phase {1e3 * r.phase_count_seconds:.2f} ms (markers {1e3 * markers.phase_count_seconds:.2f} ms)")
        assert forward == reference
    assert r.unattributed_kernel_seconds == 0.0


@pytest.mark.cuda
def test_cuda_graph_replays_are_traced_and_attributed():
    model, x = _resnet50(1)
    r = torchutil.profile(model, x, warmup=3, iters=10, cuda_graph=True)
    assert r.timing_mode == "cuda_graph" and r.trace_status == "on"
    timed = _column(r, "timed") == 1
    assert int(timed.sum()) > 0
    assert r.kernel_attribution == "timed"
    assert (_column(r, "graph_id")[timed] != 0).all()
    assert (_column(r, "op_row")[timed] >= 0).all()
    print(f"resnet50 b1 graph: {r.kernels_per_forward:.0f} kernels/forward, util {100 * r.utilization:.3f} %, "
          f"kernel util {100 * r.kernel_utilization:.3f} %, busy {100 * r.gpu_busy_fraction:.1f} %")


@pytest.mark.cuda
def test_trace_stages_count_each_stage_of_a_capture_node_trace_once(monkeypatch):
    # torchutil._C._trace_stages (what benchmarks/cost/trace_cost.py prints): one traced default call
    # starts, reads the capture's nodes, turns the records on, flushes and releases once; it
    # queries the node count at every change of the innermost op, at least twice per op that
    # launches (oracle for the launching ops: the nodes the capture made, kernel_table's rows).
    monkeypatch.delenv("TORCHUTIL_CUPTI_CORRELATION", raising=False)
    model, x = _resnet50(1)
    torchutil.profile(model, x, warmup=2, iters=2)
    torchutil._C._trace_stages()
    r = torchutil.profile(model, x, warmup=2, iters=2)
    stages = torchutil._C._trace_stages()
    assert r.trace_status == "on" and r.timing_mode == "cuda_graph", r.trace_status
    for stage in ("start", "read_nodes", "records_on", "flush", "attribute", "release"):
        assert stages[stage][0] == 1, (stage, stages)
    launching_ops = len({k.op_row for k in r.kernels if k.op_row is not None})
    assert stages["query"][0] >= 2 * launching_ops > 0, (stages["query"], launching_ops)
    assert all(seconds > 0 for times, seconds in stages.values() if times > 0)
    print("trace stages, resnet50 b1 default call (ms): "
          + ", ".join(f"{k} {1e3 * s:.3f} ({n}x)" for k, (n, s) in stages.items()))
    assert torchutil._C._trace_stages()["query"] == (0, 0.0)


@pytest.mark.cuda
def test_torch_compile_kernels_are_recorded():
    model, x = _resnet50(8)
    eager = torchutil.profile(model, x, warmup=1, iters=2)
    compiled = torch.compile(model)
    r = torchutil.profile(compiled, x, warmup=2, iters=3)
    assert r.trace_status.startswith("on"), r.trace_status
    print(f"compiled resnet50 b8: {r.kernels_per_forward:.0f} kernels/forward, matrix FLOPs {r.matrix_flops:.3e} "
          f"(eager {eager.matrix_flops:.3e}), unattributed {1e3 * r.unattributed_kernel_seconds:.3f} ms of "
          f"{1e3 * r.kernel_seconds:.3f} ms")
    # Inductor's fused (Triton) kernels are launched by no dispatcher op: they are recorded, and
    # tied to the ops they fused by Inductor's provenance (tests/test_compiled.py checks how).
    one = [k for k in r.kernels if not k.timed] or [k for k in r.kernels if k.forward == 0]
    fused = [k for k in one if k.name.startswith("triton_")]
    assert fused, [k.name for k in r.kernels[:20]]
    owners = sorted({k.op for k in fused})
    print(f"compiled resnet50 b8 ({r.timing_mode}): {len(fused)} Triton kernels a forward, launched inside: {owners}")
    assert 0 <= r.unattributed_kernel_seconds < r.kernel_seconds
    # Counted as its eager self (docs/counting.md, "Compiled models"): the eager forward's FLOPs,
    # bytes and op rows.
    assert (r.matrix_flops, r.vector_flops, r.bytes) == (eager.matrix_flops, eager.vector_flops, eager.bytes)
    assert sorted((o.op, o.module) for o in r.ops) == sorted((o.op, o.module) for o in eager.ops)
    per_op = sum(o.kernel_seconds for o in r.ops if o.kernel_seconds == o.kernel_seconds)
    assert per_op + r.unattributed_kernel_seconds == pytest.approx(r.kernel_seconds, rel=1e-6)


@pytest.mark.cuda
@pytest.mark.parametrize("correlation", ["markers", "capture"])
def test_timed_kernels_not_split_when_the_sequence_changes(correlation, monkeypatch):
    # A forward that launches one more kernel every other call: the timed forwards do not repeat
    # the counted forward's sequence, so position attribution refuses, and the timed kernels are
    # reported as timed with no forward index (never as counted-forward kernels). With markers,
    # per-op kernel figures come from the eager counted forward; with capture nodes (the
    # default) nothing ran eagerly to fall back on, and the status says why nothing is
    # attributed.
    monkeypatch.setenv("TORCHUTIL_CUPTI_CORRELATION", correlation)
    lin = torch.nn.Linear(64, 64).cuda().half()
    calls = [0]

    def forward(x):
        calls[0] += 1
        y = lin(x)
        return y.relu() if calls[0] % 2 else y

    r = torchutil.profile(forward, torch.randn(4, 64, device="cuda", dtype=torch.half), warmup=0, iters=4,
                          timing="eager")
    if correlation == "capture":
        assert r.trace_status.startswith("on, unattributed: the traced forwards' "), r.trace_status
        assert "do not repeat the captured sequence" in r.trace_status
        assert r.kernels and all(k.timed and k.op_row is None for k in r.kernels)
        return
    assert r.trace_status == "on", r.trace_status
    assert r.kernel_attribution == "counted"
    timed = [k for k in r.kernels if k.timed]
    counted = [k for k in r.kernels if not k.timed]
    assert counted and timed
    assert all(k.forward is None for k in r.kernels)
    assert all(k.op_row is None for k in timed)
    assert len(timed) != 4 * len(counted)


@pytest.mark.cuda
@pytest.mark.torch_profiler
def test_torch_profiler_works_after_a_trace():
    model, x = _resnet50(4)
    r = torchutil.profile(model, x, warmup=1, iters=2)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        with torch.inference_mode():
            model(x)
        torch.cuda.synchronize()
    gpu_events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"torch.profiler after torchutil: {len(gpu_events)} GPU events")
    assert len(gpu_events) > 50
    # Kernels, memcpys and memsets carry torch.profiler's names (demangled kernel names,
    # "Memcpy HtoD (Pageable -> Device)", "Memset (Device)"): a timed forward's are among them.
    timed = [n for n, f in zip(r.kernel_names, _column(r, "forward").tolist()) if f >= 0]
    assert timed and set(timed) <= {e.name for e in gpu_events}


@pytest.mark.cuda
@pytest.mark.torch_profiler
def test_inside_torch_profiler_degrades_to_flops_and_event_timing():
    """Under torch.profiler the call counts and times without a trace. Oracle for its time: CUDA
    events the test records around each of 10 forwards of its own, run as the call ran them
    (graph replays or eager forwards, back to back, one synchronization at the end), in the same
    profiler session. At batch 128 a resnet50 forward is GPU-bound (some 4 ms on an H200), so the
    two medians agree within 10 %."""
    model, x = _resnet50(128)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        r = torchutil.profile(model, x, warmup=1, iters=10)
        oracle = _event_seconds(model, x, graph=r.timing_mode == "cuda_graph", n=10)
    print(f"inside torch.profiler: {r.timing_mode}, {1e3 * r.seconds:.3f} ms a forward; "
          f"the test's CUDA events {1e3 * oracle:.3f} ms")
    assert r.trace_status.startswith("off: torch.profiler is running"), r.trace_status
    assert r.traced == 0.0 and r.kernel_table.shape[0] == 0
    assert r.flops > 0 and 0 < r.utilization < 1 and r.iterations == 10
    assert abs(r.seconds - oracle) / oracle < 0.10
    assert r.utilization == pytest.approx(r.flops / r.seconds / r.peak_flops_per_second, rel=1e-9)
    # And tracing works again once torch.profiler has stopped.
    assert torchutil.profile(model, x, warmup=1, iters=2).trace_status == "on"
    # Kineto's CUPTI subscriber stays, so graph nodes cannot be traced: an eager counted forward
    # is (markers), and the status says why; every kernel is still attributed.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHUTIL_CUPTI_CORRELATION", "graph")
        after = torchutil.profile(model, x, warmup=1, iters=2)
    print(f"after torch.profiler, graph nodes asked for: {after.trace_status}")
    assert after.trace_status.startswith("on; an eager counted forward traced, since graph nodes could not be:")
    assert "MULTIPLE_SUBSCRIBERS" in after.trace_status
    assert after.timing_mode == "cuda_graph" and after.kernel_attribution == "timed"
    assert after.kernels and all(k.op_row is not None for k in after.kernels)


@pytest.mark.cuda
def test_chrome_trace_opens_as_json(tmp_path):
    model, x = _resnet50(2)
    r = torchutil.profile(model, x, warmup=1, iters=2, chrome_trace=True)
    path = tmp_path / "trace.json"
    r.save_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    ops = [e for e in events if e.get("cat") == "op"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == int((_column(r, "kind") == 0).sum())
    assert any(e["name"] == "aten::convolution" and e["args"]["flops_per_call"] > 0 for e in ops)
    assert all(k["args"]["op"] for k in kernels if k["args"]["forward"] == "counted")
    # trace_forwards=1; counted in the capture (capture nodes), so no eager counted forward
    assert {k["args"]["forward"] for k in kernels} == {0}
    r.kernels_to_csv(str(tmp_path / "k.csv"))
    with open(tmp_path / "k.csv") as f:
        assert sum(1 for _ in f) == r.kernel_table.shape[0] + 1
