"""Energy in the same call (energy=True): joules per forward, its interval, watts, FLOPs and
inputs per joule, and the text that names the source. The window logic is tested in C++ on a
simulated counter (tests/cpp/EnergyWindowsTest.cpp), NVML's loader on a stand-in library and
RAPL's reader on fake powercap folders (tests/cpp/energy); here the call itself: on a CPU, RAPL
where it is readable, else NaN and the reason; on a GPU, NVML, checked against nvidia-ml-py's
reading of the same counter (an independent binding) and against watts x seconds."""
from __future__ import annotations

import glob
import math
import os
import time

import pytest
import torch

import torchutil

ENERGY_FIELDS = ("joules", "joules_ci_low", "joules_ci_high", "watts", "flops_per_joule", "inputs_per_joule",
                 "energy_seconds", "energy_wait_seconds", "energy_drain_seconds")


def _mlp(device="cpu"):
    return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256)).to(device)


def _rapl_readable() -> bool:
    files = glob.glob("/sys/class/powercap/intel-rapl:[0-9]*/energy_uj")
    return bool(files) and all(os.access(f, os.R_OK) for f in files)


def test_energy_is_off_unless_asked_for_and_never_zero():
    r = torchutil.profile(_mlp(), torch.randn(32, 256), warmup=1, iters=2)
    assert r.energy_source == "off: energy=False"
    assert all(math.isnan(getattr(r, f)) for f in ENERGY_FIELDS)
    assert r.phase_energy_seconds == 0
    assert "energy" not in format(r)


def test_energy_on_the_cpu_is_rapl_or_nan_with_the_reason():
    x = torch.randn(32, 256)
    r = torchutil.profile(_mlp(), x, warmup=1, iters=2, energy=True)
    if _rapl_readable():
        assert r.energy_source.startswith("RAPL energy of package-0"), r.energy_source
        assert 0 < r.joules_ci_low <= r.joules <= r.joules_ci_high
        assert r.inputs_per_joule == pytest.approx(32 / r.joules)
        assert r.flops_per_joule == pytest.approx(r.flops / r.joules)
        assert r.watts > 0 and r.energy_seconds >= 0.45
    else:
        # This machine (or container) has no readable RAPL counter: the reason, and NaN, not 0.
        assert r.energy_source.startswith("off: "), r.energy_source
        assert "RAPL" in r.energy_source and "/sys/class/powercap" in r.energy_source, r.energy_source
        assert all(math.isnan(getattr(r, f)) for f in ENERGY_FIELDS)
        assert r.phase_energy_seconds < 0.1  # refused before any forward
        assert r.energy_source in format(r)
    # The summary op carries the same fields in its tensor.
    s = torch.ops.util.profile(_mlp(), x, warmup=1, iters=2, energy=True)
    assert (torchutil.field(s, "joules").item() > 0) == _rapl_readable()


def test_the_summary_line_shows_the_interval_where_there_is_one():
    r = torchutil.profile(_mlp(), torch.randn(32, 256), warmup=1, iters=2)
    measured = {"joules": 2.0, "joules_ci_low": 1.9, "joules_ci_high": 2.1, "watts": 500.0,
                "inputs_per_joule": 16.0, "flops_per_joule": 1e10}
    r._values.update(measured)
    r.texts["energy_source"] = "fake counter, changes every 100 ms, 0.5 s of graph replays in 5 windows"
    assert "2 J (1.9-2.1), 500 W, 16 inputs/J, 10 GFLOP/J" in format(r)
    # One window (energy_windows=1): a figure without an interval, not "(nan-nan)".
    r._values.update(joules_ci_low=math.nan, joules_ci_high=math.nan)
    line = next(t for t in format(r).splitlines() if t.startswith("energy / forward"))
    assert line.split(None, 3)[3] == "2 J, 500 W, 16 inputs/J, 10 GFLOP/J", line


def test_energy_on_the_meta_device_says_nothing_runs():
    r = torchutil.profile(_mlp("meta"), torch.randn(4, 256, device="meta"), energy=True)
    assert r.energy_source == "off: nothing runs on the meta device"
    assert math.isnan(r.joules)


@pytest.mark.parametrize("window", [0.0, -1.0, float("nan"), 1e6])
def test_a_bad_energy_window_is_a_value_error_naming_it(window):
    with pytest.raises(ValueError, match=r"energy_window .* got"):
        torchutil.profile(_mlp(), torch.randn(4, 256), energy=True, energy_window=window)


@pytest.mark.parametrize("windows", [0, -2, 101])
def test_a_bad_energy_windows_is_a_value_error_naming_it(windows):
    with pytest.raises(ValueError, match=rf"energy_windows .* got {windows}"):
        torchutil.profile(_mlp(), torch.randn(4, 256), energy=True, energy_windows=windows)


def test_energy_options_are_typed():
    with pytest.raises(TypeError, match="energy_window must be a number"):
        torchutil.profile(_mlp(), torch.randn(4, 256), energy=True, energy_window="1s")
    with pytest.raises(TypeError, match="energy_windows must be an int"):
        torchutil.profile(_mlp(), torch.randn(4, 256), energy=True, energy_windows=2.5)
    with pytest.raises(TypeError, match="energy must be a bool"):
        torchutil.profile(_mlp(), torch.randn(4, 256), energy=1)


# --- on the GPU (the lead's H200 run) ------------------------------------------------------------

def _nvml_handle(pynvml):
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    if hasattr(props, "pci_bus_id"):
        bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        return pynvml.nvmlDeviceGetHandleByPciBusId(bus.encode())
    return pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())


def _nvml_joules_per_forward(replay, seconds: float = 2.0) -> float:
    """An oracle written apart from the call: nvidia-ml-py reads the same counter over one long
    window of replays that starts and ends at changes of the counter (polled from Python), the
    forwards counted by CUDA events at those polls (to one forward in ~2 s of them)."""
    pynvml = pytest.importorskip("pynvml")
    pynvml.nvmlInit()
    handle = _nvml_handle(pynvml)
    events: list[torch.cuda.Event] = []
    done = [0]

    def keep_busy():
        while done[0] < len(events) and events[done[0]].query():
            done[0] += 1
        while len(events) - done[0] < 2:
            replay()
            events.append(torch.cuda.Event())
            events[-1].record()

    def read():
        return pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)

    keep_busy()
    while done[0] == 0:
        keep_busy()
    base = read()
    while (start := read()) == base:
        keep_busy()
    n_start, t0, last = done[0], time.perf_counter(), start
    while True:
        keep_busy()
        now = read()
        if now != last:
            last = now
            if time.perf_counter() - t0 >= seconds:
                break
    n_end = done[0]
    torch.cuda.synchronize()
    return (last - start) / 1e3 / (n_end - n_start)


@pytest.mark.cuda
def test_energy_on_the_gpu_agrees_with_nvidia_ml_py_and_with_watts_times_seconds():
    tvm = pytest.importorskip("torchvision.models")
    model = tvm.resnet50(weights=None).eval().to("cuda", torch.float16)
    x = torch.randn(64, 3, 224, 224, device="cuda", dtype=torch.float16)
    r = torchutil.profile(model, x, energy=True)
    assert r.energy_source.startswith("NVML total energy of cuda:0 (PCI "), r.energy_source
    assert "graph replays in 5 windows" in r.energy_source, r.energy_source
    # The windows' replays ran at the timed pace: the device did not idle between them (with
    # 2 ms queued ahead of NVML's reads they took 1.12-1.35x the timed median on the H200).
    assert "idled or ran slower" not in r.energy_source, r.energy_source
    assert 0 < r.joules_ci_low <= r.joules <= r.joules_ci_high
    # Five windows: Student's t interval of the pooled figure (the calls' CV is under 1 %,
    # benchmarks/results/energy.py).
    assert (r.joules_ci_high - r.joules_ci_low) / r.joules < 0.10
    assert 50 < r.watts < 1500
    assert r.flops_per_joule == pytest.approx(r.flops / r.joules)
    assert r.inputs_per_joule == pytest.approx(64 / r.joules)
    # Two clocks that know nothing of each other: CUDA events' seconds per forward and the
    # energy counter's mean power.
    assert r.joules == pytest.approx(r.watts * r.seconds, rel=0.05)
    # What it cost (a second call: the first loads and initializes NVML): its windows, the wait
    # for the counter's first change after the first forward was queued (one 100 ms update, and
    # a few 3 ms reads more where a change fell inside the first read: up to 105 ms seen), and
    # the forwards queued when the last change came (10 ms of work, one forward more).
    again = torchutil.profile(model, x, energy=True)
    assert again.energy_seconds >= 0.9
    assert 0 < again.energy_wait_seconds < 0.1 + 0.03
    assert 0 < again.energy_drain_seconds < 0.01 + again.seconds + 0.005
    parts = again.energy_wait_seconds + again.energy_seconds + again.energy_drain_seconds
    assert parts <= again.phase_energy_seconds <= parts + 0.02
    # The oracle: the same replays, one 2 s window read by nvidia-ml-py.
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(x)
        oracle = _nvml_joules_per_forward(graph.replay)
    assert r.joules == pytest.approx(oracle, rel=0.03), (r.joules, oracle, r.energy_source)


@pytest.mark.cuda
def test_energy_of_eager_forwards_and_a_refused_short_window():
    model = _mlp("cuda")
    r = torchutil.profile(model, torch.randn(64, 256, device="cuda"), timing="eager", energy=True)
    assert "eager forwards in 5 windows" in r.energy_source, r.energy_source
    assert r.joules > 0
    short = torchutil.profile(model, torch.randn(64, 256, device="cuda"), energy=True, energy_window=0.05)
    assert "shorter than half the time between the counter's changes" in short.energy_source, short.energy_source
    assert math.isnan(short.joules)


def test_profile_generate_gives_joules_per_token_or_nan():
    from test_generation import run

    result = run("llama", batch=1, prompt=4, new=3, energy=True, energy_window=0.25)
    for row in result.rows:
        if _rapl_readable():
            assert row.joules > 0
            assert row.joules_per_token == pytest.approx(row.joules / (row.batch * row.tokens))
        else:
            assert math.isnan(row.joules) and math.isnan(row.joules_per_token)
    assert result.prefill.energy_source.startswith("RAPL" if _rapl_readable() else "off: ")
    assert "J/token" in str(result)
    assert "joules_per_token" in result.to_dict()["rows"][0]


@pytest.mark.cuda
def test_profile_generate_on_the_gpu_prefill_amortizes_joules_over_its_tokens():
    from test_generation import KVCache, TinyLM

    torch.manual_seed(0)
    model = TinyLM("llama").eval().cuda()
    ids = torch.randint(0, 50, (4, 64), device="cuda")
    result = torchutil.profile_generate(model, ids, 4, step=model, cache=KVCache(len(model.blocks)),
                                        rewind=KVCache.rewind, steps="all", loop_repeats=1, energy=True)
    assert all(r.joules > 0 for r in result.rows), [r.joules for r in result.rows]
    assert all(p.energy_source.startswith("NVML total energy") for p in [result.prefill, *result.decode_profiles])
    # One forward over 64 tokens a sequence against one over a single token: per token, the
    # prefill's joules are far fewer.
    assert result.prefill_row.joules_per_token < min(r.joules_per_token for r in result.decode) / 4


def test_the_command_line_and_the_op_refuse_the_same_window_counts(capsys):
    from cli_status import status_and_err

    most = int(torchutil._ops.OPTIONS["energy_windows"]["high"])
    status, err = status_and_err(["profile", "spec_4conv_64", "--device", "cpu", "--energy",
                                  "--energy-windows", str(most + 1)], capsys)
    assert status == 2 and f"an integer in [1, {most}], got {most + 1}" in err, (status, err)
    with pytest.raises(ValueError, match=rf"energy_windows .* in \[1, {most}\], got {most + 1}"):
        torchutil.profile(_mlp(), torch.randn(4, 256), energy=True, energy_windows=most + 1)
