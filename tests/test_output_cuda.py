"""What a result says on a GPU where it used to mislead: a failed CUDA-graph capture's note is one
line (the traceback is its detail), fp8 matrix work with no tensor-path counter on the chip reads
NaN with a reason (not 0.0 "on"), and the views and the summary's interval on a traced profile.

Every test prints what it measured (pytest -s), so one device run gives the figures."""
from __future__ import annotations

import math
import re

import pytest
import torch
import torchvision.models as tvm

import torchutil

pytestmark = pytest.mark.cuda

UNAVAILABLE = ("no permission to read GPU performance counters", "not supported on this GPU, driver or sandbox",
               "another profiler holds the GPU's counters")


class Syncs(torch.nn.Module):
    """A forward that synchronizes (.item()), which a CUDA-graph capture refuses, from Python: the
    error that reaches the profile carries a Python traceback."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 64)

    def forward(self, x):
        y = self.fc(x)
        if y.abs().sum().item() < 0:
            raise AssertionError
        return y


def test_a_failed_capture_is_one_line_and_its_traceback_the_detail():
    model = Syncs().cuda().eval()
    r = torchutil.profile(model, torch.randn(8, 64, device="cuda"), warmup=1, iters=3, timing="auto")
    print(f"timing_note: {r.timing_note!r}\ntiming_note_detail: {r.timing_note_detail!r}")
    assert r.timing_mode == "eager"
    assert r.timing_note.startswith("auto: eager, since the forward could not be captured in a CUDA graph: ")
    assert "\n" not in r.timing_note and "site-packages" not in r.timing_note and len(r.timing_note) < 400
    headline = r.timing_note.split("CUDA graph: ", 1)[1]
    assert headline and headline in r.timing_note_detail
    assert "\n" in r.timing_note_detail and "test_output_cuda.py" in r.timing_note_detail  # the traceback
    # The failed capture leaves CUDA's random generator usable (torch 2.11 left it capturing).
    assert torch.randn(4, device="cuda").isfinite().all()
    ok = torchutil.profile(torch.nn.Linear(64, 64).cuda(), torch.randn(8, 64, device="cuda"), iters=3)
    assert ok.timing_mode == "cuda_graph" and ok.timing_note == ok.timing_note_detail == ""


def test_fp8_matrix_work_without_a_tensor_counter_is_nan_with_a_reason():
    """H100/H200 (GH100) have no tensor-path counter for fp8: the paths they have read 0 for an
    fp8 GEMM, which says nothing of it. Oracle for the work: 2*M*N*K."""
    m = n = k = 4096
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
    one = torch.ones((), device="cuda")

    def fp8_gemm(x):
        return torch._scaled_mm(x, b, one, one, out_dtype=torch.bfloat16)

    r = torchutil.profile(fp8_gemm, a, warmup=2, iters=3, counters="flops")
    print(f"counters_status {r.counters_status!r}\ncounters_not_on_gpu {r.counters_not_on_gpu!r}\n"
          f"hw_tensor_flops {r.hw_tensor_flops} ratio {r.hw_flops_ratio} fp8 {r.hw_tensor_flops_fp8} "
          f"bf16 {r.hw_tensor_flops_bf16} matrix_flops {r.matrix_flops}")
    if r.counters_status.startswith("off") and any(u in r.counters_status for u in UNAVAILABLE):
        pytest.skip(f"hardware counters unavailable here: {r.counters_status}")
    assert r.matrix_flops == 2 * m * n * k
    row = next(o for o in r.ops if o.op == "aten::_scaled_mm")
    assert row.dtype == "float8_e4m3fn"
    if "tensor_hgmma_fp8" not in r.counters_not_on_gpu.split(", "):
        # A chip with an fp8 path reads the work itself.
        assert r.counters_status == "on" and r.hw_tensor_flops > 0 and r.hw_tensor_flops_fp8 > 0
        return
    assert r.counters_status.startswith("on, partial: flops: this GPU has no tensor-path counter for float8"), \
        r.counters_status
    assert "aten::_scaled_mm" in r.counters_status
    for value in (r.hw_tensor_flops, r.hw_flops_ratio, r.hw_tensor_flops_fp8, row.hw_tensor_flops,
                  row.hw_flops_ratio):
        assert math.isnan(value), value
    assert r.counter_kernels >= 1  # the kernels were read: the NaN is the missing path, not a failed read


def test_views_and_interval_on_a_traced_profile():
    torch.manual_seed(0)
    model = tvm.resnet18().cuda().half().eval()
    r = torchutil.profile(model, torch.randn(8, 3, 224, 224, device="cuda", dtype=torch.half), iters=20)
    print(r)
    print(repr(r))
    print(r.by_op_type())
    print(r.module_tree(depth=1))
    assert r.kernel_attribution in ("timed", "counted") and len(repr(r)) <= 150
    assert re.search(r"\d (µs|ms|s) ± ", r.format()) and "(median of 20, 95 % CI)" in r.format()
    view = r.by_op_type()
    total = math.fsum(o.kernel_seconds for o in r.ops)
    assert math.fsum(row.seconds for row in view) == pytest.approx(total)
    tree = r.module_tree(depth=1)
    assert tree[0].seconds == pytest.approx(total) and tree[0].params == sum(p.numel() for p in model.parameters())
