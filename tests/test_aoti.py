"""AOTInductor packages (torch.export -> aoti_compile_and_package -> aoti_load_package): their
kernels never pass the dispatcher, so a package is counted as the ExportedProgram it was
compiled from (count_as=), and without it its FLOPs are NaN with the reason in flops_note,
never 0 (docs/counting.md, "AOTInductor packages").

Compiling a package on this CPU compiles C++ (g++): one tiny MLP is compiled once per test
session, and the tests skip, saying why, where that cannot be done.
"""
from __future__ import annotations

import math

import pytest
import torch

import torchutil

PEAK = 1e12


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """(the loaded package, the ExportedProgram, the eager model, an input)."""
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(4, 16)
    ep = torch.export.export(model, (x,))
    path = str(tmp_path_factory.mktemp("aoti") / "mlp.pt2")
    try:
        path = torch._inductor.aoti_compile_and_package(ep, package_path=path)
        loaded = torch._inductor.aoti_load_package(path)
    except Exception as e:  # no compiler, no headers: AOTInductor cannot build here
        pytest.skip(f"AOTInductor cannot compile a package here: {type(e).__name__}: {str(e)[:200]}")
    return loaded, ep, model, x


# The closed form: two Linears' 2·M·K·N, their biases and the relu 1 per output element.
MATRIX = 2 * 4 * 16 * 32 + 2 * 4 * 32 * 8
VECTOR = 4 * 32 + 4 * 8 + 4 * 32


@pytest.mark.slow
def test_a_package_is_named_never_counted_as_zero(package):
    loaded, _, _, x = package
    r = torchutil.profile(loaded, x, warmup=1, iters=1, peak_flops=PEAK)
    assert math.isnan(r.flops) and math.isnan(r.matrix_flops) and math.isnan(r.utilization)
    assert "AOTInductor package" in r.flops_note and "count_as=" in r.flops_note
    assert r.seconds > 0  # still timed


@pytest.mark.slow
def test_a_package_is_counted_as_the_program_it_came_from(package):
    """Oracle: the closed form, and the eager model's own count."""
    loaded, ep, model, x = package
    eager = torchutil.profile(model, x, warmup=1, iters=1, peak_flops=PEAK)
    assert (eager.matrix_flops, eager.vector_flops) == (MATRIX, VECTOR)
    for count_as in (ep, ep.module()):
        r = torchutil.profile(loaded, x, count_as=count_as, warmup=1, iters=2, peak_flops=PEAK)
        assert (r.matrix_flops, r.vector_flops) == (MATRIX, VECTOR)
        assert r.flops_note == "" and r.unknown_ops == {}
        assert r.seconds > 0


def test_count_as_must_be_a_program_or_a_model():
    with pytest.raises(TypeError, match=r"^torchutil: count_as must be a torch.export.ExportedProgram or a callable "
                                        r"model, got int"):
        torchutil.profile(MLP(), torch.randn(2, 16), count_as=3)
