"""The roofline: torch.ops.util.roofline / _roofline_points / memory_bandwidth and
torchutil.roofline() on a profile. The arithmetic itself is tested in tests/cpp/RooflineTest.cpp."""
from __future__ import annotations

import math

import pytest
import torch

import torchutil
from conftest import cpu_and_cuda

PEAK = 1e12
BANDWIDTH = 1e11  # ridge at 10 FLOP/B


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_roofline(dtype):
    flops = torch.rand(5, dtype=dtype) * 1e9
    nbytes = torch.rand(5, dtype=dtype) * 1e8 + 1
    torch.library.opcheck(torch.ops.util.roofline.default, (flops, nbytes, PEAK, BANDWIDTH))
    torch.library.opcheck(torch.ops.util.roofline.default,
                          (torch.rand(2, 3, dtype=dtype), torch.rand(2, 3, dtype=dtype) + 0.1, PEAK, BANDWIDTH))


def test_roofline_values():
    flops = torch.tensor([1.0, 10.0, 1000.0, 5.0, 0.0], dtype=torch.float64)
    nbytes = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    out = torchutil.roofline_utilization(flops, nbytes, PEAK, BANDWIDTH)
    assert out[:4].tolist() == [0.1, 1.0, 1.0, 1.0]  # intensity 1, 10 (the ridge), 1000, inf
    assert math.isnan(out[4].item())  # neither FLOPs nor bytes


def test_roofline_errors():
    t = torch.ones(2)
    with pytest.raises(ValueError, match="floating-point"):
        torch.ops.util.roofline(torch.ones(2, dtype=torch.int64), t, PEAK, BANDWIDTH)
    with pytest.raises(ValueError, match="peak_flops must be a positive"):
        torch.ops.util.roofline(t, t, 0.0, BANDWIDTH)
    with pytest.raises(ValueError, match="bandwidth must be a positive"):
        torch.ops.util.roofline(t, t, PEAK, float("inf"))
    with pytest.raises(ValueError, match="non-negative"):
        torch.ops.util._roofline_points(torch.tensor([-1.0]), torch.tensor([1.0]), PEAK, BANDWIDTH)
    with pytest.raises(ValueError, match="kernel_seconds must match"):
        torch.ops.util._roofline_points(t, t, PEAK, BANDWIDTH, torch.ones(3))


def test_roofline_points_classify():
    flops = torch.tensor([100.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    nbytes = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    # roofline time of op 2: 1 byte / 1e11 B/s = 1e-11 s; a 1e-9 s kernel is overhead-bound.
    seconds = torch.tensor([1e-10, 1e-11, 1e-9, float("nan")], dtype=torch.float64)
    table, bounds = torch.ops.util._roofline_points(flops, nbytes, PEAK, BANDWIDTH, seconds)
    assert bounds == ["compute-bound", "memory-bound", "overhead-bound", "unknown"]
    fields = torch.ops.util._roofline_fields()
    assert table.shape == (4, len(fields))
    share = table[:, fields.index("roofline_share")]
    assert share[2].item() == pytest.approx(1e-2)
    _, no_trace = torch.ops.util._roofline_points(flops, nbytes, PEAK, BANDWIDTH)
    assert no_trace == ["compute-bound", "memory-bound", "memory-bound", "unknown"]


def test_memory_bandwidth_cpu():
    value, source = torchutil.memory_bandwidth("cpu")
    assert value > 1e8 and source.startswith("measured")
    assert torchutil.memory_bandwidth("cpu", "measured")[0] == value  # cached per device
    with pytest.raises(ValueError, match="only for CUDA"):
        torchutil.memory_bandwidth("cpu", "datasheet")
    with pytest.raises(ValueError, match="bandwidth source must be .auto., .datasheet., .computed. or .measured., got .guess."):
        torchutil.memory_bandwidth("cpu", "guess")


@pytest.mark.cuda
def test_memory_bandwidth_cuda():
    for source in ("auto", "computed", "measured"):
        value, where = torchutil.memory_bandwidth("cuda", source)
        assert value > 1e11, (source, where)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_roofline_of_a_profile(device):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(64, 10)).eval().to(device)
    x = torch.randn(8, 3, 32, 32, device=device)
    result = torchutil.profile(model, x, warmup=1, iters=2, peak_flops=PEAK)
    roof = torchutil.roofline(result, bandwidth=BANDWIDTH)
    assert roof.ridge_intensity == pytest.approx(10.0)
    assert len(roof.rows) == len(result.ops)
    by_op = {r.op: r for r in roof.rows}
    assert by_op["aten::convolution"].bound in ("compute-bound", "overhead-bound")
    relu = by_op["aten::relu"]
    assert relu.intensity == pytest.approx(relu.flops / relu.bytes)
    assert relu.attainable_utilization == pytest.approx(relu.intensity * BANDWIDTH / PEAK)
    if device == "cpu":
        assert relu.bound == "memory-bound"
        assert math.isnan(relu.achieved_flops_per_second)
    assert sum(roof.counts().values()) == len(roof.rows)
    assert roof.to_dict()["rows"][0]["op"] == roof.rows[0].op
    measured = torchutil.roofline(result)  # the device's own bandwidth
    assert measured.bandwidth > 0 and measured.bandwidth_source != "given by the caller"


def test_roofline_needs_a_peak():
    result = torchutil.profile(torch.nn.Linear(4, 4).to("meta"), torch.randn(2, 4, device="meta"))
    with pytest.raises(ValueError, match="no peak"):
        torchutil.roofline(result, bandwidth=BANDWIDTH)
