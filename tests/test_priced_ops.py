"""Ops whose arithmetic used to be unpriced (reported in unknown_ops): quantized Linear layers,
FFTs, embedding bags, the decompositions and solves, against independent counts; and the rule
that each op is listed once, by the op that did the work (docs/counting.md)."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import torchutil

PEAK = 1e12


def count(fn, *args):
    with torchutil.Profiler(peak_flops=PEAK) as prof:
        fn(*args)
    return prof.result


def only_row(result):
    assert result.unknown_ops == {}, result.unknown_ops
    priced = [o for o in result.ops if o.flops > 0]
    assert len(priced) == 1, [(o.op, o.flops) for o in result.ops]
    return priced[0]


# ---- FFTs: 5·N·log2 N real FLOPs per complex transform, half for real ones --------------------

def radix2_flops(n: int) -> int:
    """Real FLOPs of a textbook recursive radix-2 Cooley-Tukey FFT of n points, counted by
    running its recursion: each butterfly is one complex multiply (4 multiplies, 2 adds) and two
    complex adds (2 each)."""
    if n == 1:
        return 0
    return 2 * radix2_flops(n // 2) + (n // 2) * (6 + 4)


@pytest.mark.parametrize("n", [8, 64, 256])
def test_complex_fft_against_a_counted_radix2_fft(n):
    assert radix2_flops(n) == 5 * n * int(math.log2(n))
    x = torch.randn(3, n, dtype=torch.complex64)
    row = only_row(count(torch.fft.fft, x))
    assert row.op == "aten::_fft_c2c" and row.vector_flops == 3 * radix2_flops(n)


def test_real_ffts_are_half_a_complex_one_and_composites_are_not_listed():
    x = torch.randn(4, 64)
    r2c = only_row(count(torch.fft.rfft, x))
    assert (r2c.op, r2c.vector_flops) == ("aten::_fft_r2c", 4 * radix2_flops(64) // 2)
    c2r = only_row(count(lambda t: torch.fft.irfft(t, n=64), torch.fft.rfft(x)))
    # The backward transform's 1/N normalization scales each of the 4·64 real outputs.
    assert (c2r.op, c2r.vector_flops) == ("aten::_fft_c2r", 4 * radix2_flops(64) // 2 + 4 * 64)
    # A 2-d transform of 8 x 16 points: N = 128 (the 1-d transforms along each axis sum to it).
    two = only_row(count(torch.fft.rfft2, torch.randn(2, 8, 16)))
    assert (two.op, two.vector_flops) == ("aten::_fft_r2c", 2 * radix2_flops(128) // 2)


# ---- embedding bags: 1 FLOP per gathered value -----------------------------------------------

@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_against_a_counted_gather(mode):
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(100, 8, mode=mode)
    idx = torch.randint(0, 100, (12,))
    offsets = torch.tensor([0, 5, 9])
    # Independent count: each bag reduces the rows its indices gather, one add (or compare) per
    # gathered value.
    bounds = offsets.tolist() + [idx.numel()]
    gathered = sum((bounds[i + 1] - bounds[i]) * bag.embedding_dim for i in range(len(offsets)))
    with torch.inference_mode():
        row = only_row(count(bag, idx, offsets))
    assert row.op in {"aten::_embedding_bag", "aten::_embedding_bag_forward_only"}
    assert row.vector_flops == gathered


# ---- decompositions and solves: Golub & Van Loan's counts ---------------------------------------

def spd(batch, n):
    torch.manual_seed(0)
    a = torch.randn(batch, n, n, dtype=torch.float64)
    return a @ a.mT + n * torch.eye(n, dtype=torch.float64)


def test_linalg_solve_is_one_lu_and_two_triangular_solves():
    a, b = spd(2, 16), torch.randn(2, 16, 3, dtype=torch.float64)
    r = count(torch.linalg.solve, a, b)
    assert r.unknown_ops == {}  # linalg_solve, linalg_solve_ex, _linalg_solve_ex: their callees price them
    flops = {o.op: o.vector_flops for o in r.ops if o.flops > 0}
    assert flops == {"aten::linalg_lu_factor_ex": round(2 * 2 * 16**3 / 3), "aten::linalg_lu_solve": 2 * 2 * 16**2 * 3}


def test_cholesky_qr_triangular_solve_eigh_svd():
    a = spd(2, 12)
    n = 12
    assert only_row(count(torch.linalg.cholesky, a)).vector_flops == round(2 * n**3 / 3)
    b = torch.randn(2, n, 5, dtype=torch.float64)
    tri = only_row(count(lambda m, r: torch.linalg.solve_triangular(m, r, upper=False), a, b))
    assert tri.vector_flops == 2 * n * n * 5
    # Householder QR of m x n (m >= n): R 2mn² - 2n³/3, the thin Q as much again.
    m, k = 20, 6
    tall = torch.randn(m, k, dtype=torch.float64)
    assert only_row(count(torch.linalg.qr, tall)).vector_flops == round(2 * (2 * m * k**2 - 2 * k**3 / 3))
    assert only_row(count(lambda t: torch.linalg.qr(t, mode="r"), tall)).vector_flops == round(2 * m * k**2 - 2 * k**3 / 3)
    assert only_row(count(torch.linalg.eigh, a)).vector_flops == 2 * 9 * n**3
    assert only_row(count(torch.linalg.eigvalsh, a)).vector_flops == round(2 * 4 * n**3 / 3)
    assert only_row(count(lambda t: torch.linalg.svd(t, full_matrices=False), tall)).vector_flops == 14 * m * k**2 + 8 * k**3
    assert only_row(count(torch.linalg.svdvals, tall)).vector_flops == round(4 * m * k**2 - 4 * k**3 / 3)
    # The nonsymmetric eigenproblem: about 25n³ with the vectors, 10n³ for the values alone.
    assert only_row(count(torch.linalg.eig, a)).vector_flops == 2 * 25 * n**3
    assert only_row(count(torch.linalg.eigvals, a)).vector_flops == 2 * 10 * n**3


# ---- quantized Linear: int8 products, the int8 peak ------------------------------------------

def test_dynamic_quantized_linear_is_int8_matrix_work_against_flop_counter_mode():
    torch.manual_seed(0)
    lin = torch.nn.Sequential(torch.nn.Linear(64, 32)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation
        q = torch.ao.quantization.quantize_dynamic(lin, {torch.nn.Linear}, dtype=torch.qint8)
    x = torch.randn(4, 64)
    with FlopCounterMode(display=False) as fcm:
        lin(x)  # the float layer: the same products
    r = torchutil.profile(q, x, warmup=1, iters=1, peak_flops=PEAK)
    assert r.unknown_ops == {}
    row = only_row(r)
    assert (row.op, row.dtype) == ("quantized::linear_dynamic", "int8")
    assert row.matrix_flops == fcm.get_total_flops() == 2 * 4 * 64 * 32
    # The input's range and quantization (4 per element), rescale and bias (2 per output element).
    assert row.vector_flops == 4 * 4 * 64 + 2 * 4 * 32


# ---- zero-cost ops are never unknown -----------------------------------------------------------

def test_repeat_interleave_is_a_copy_and_views_are_free():
    x = torch.randn(4, 8)
    r = count(lambda t: (t.repeat_interleave(3, dim=1), t.repeat_interleave(torch.tensor([1, 2, 3, 4]), dim=0),
                         t.mH, t.adjoint()), x)
    assert r.unknown_ops == {}
    assert r.flops == 0 and r.bytes > 0
