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


# ---- sparse products: priced by the values they store ------------------------------------------

def _sparse(m, k, density=0.025, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = torch.randn(m, k, generator=g)
    d[torch.rand(m, k, generator=g) > density] = 0
    return d


def _stored_bytes(s):
    """Bytes a sparse tensor holds: its values and indices (the closed form of the count's bytes)."""
    if s.layout == torch.sparse_coo:
        return s._values().nbytes + s._indices().nbytes
    return s.values().nbytes + s.crow_indices().nbytes + s.col_indices().nbytes


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_times_dense_is_priced_by_its_stored_values(layout):
    """Oracle: the closed form 2·nnz·N (each stored value of the [M, K] sparse operand meets the
    N columns of the dense one), never the dense 2·M·K·N (x40 on a 2.5 %-dense matrix); bytes
    from the stored values and indices."""
    m, k, n = 64, 128, 32
    dense = _sparse(m, k)
    s = dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()
    nnz = int((dense != 0).sum())
    b = torch.randn(k, n)
    calls = [lambda: torch.sparse.mm(s, b), lambda: s @ b] if layout == "coo" else [lambda: s @ b]
    for call in calls:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CSR's "beta state" warning
            r = count(call)
        assert r.unknown_ops == {}, r.unknown_ops
        assert r.matrix_flops == 2 * nnz * n, (r.matrix_flops, 2 * nnz * n, 2 * m * k * n)
        product = max(r.ops, key=lambda o: o.matrix_flops)
        # Nominal bytes: the stored values and indices, the dense operand, the output, and an
        # addmm's self (torch.sparse.mm adds into zeros, with beta 0).
        self_bytes = m * n * 4 if product.op in ("aten::_sparse_addmm", "aten::addmm") else 0
        assert product.bytes == _stored_bytes(s) + b.nbytes + m * n * 4 + self_bytes, product.op
    # addmm: the product, and the bias added once per output element.
    c = torch.randn(m, n)
    if layout == "coo":
        r = count(lambda: torch.sparse.addmm(c, s, b))
        assert (r.matrix_flops, r.vector_flops, r.unknown_ops) == (2 * nnz * n, m * n, {})


def test_dense_times_sparse_is_priced_by_its_stored_values():
    """Oracle: 2·nnz·M for [M, K] @ sparse [K, N] (each stored value meets the M rows)."""
    m, k, n = 16, 128, 64
    dense = _sparse(k, n, seed=1)
    nnz = int((dense != 0).sum())
    a = torch.randn(m, k)
    for s in (dense.to_sparse(), dense.to_sparse_csr()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = count(lambda: torch.mm(a, s))
        assert r.matrix_flops == 2 * nnz * m, (r.matrix_flops, 2 * nnz * m)


def test_dense_times_sparse_coo_in_a_profile_is_refused_in_one_line():
    """torch itself cannot run torch.mm(dense, sparse COO) in inference mode, where a profile
    runs its forwards: the refusal says so and how to write it (oracle: torch.inference_mode
    raising the same)."""
    s = _sparse(64, 32).to_sparse()
    x = torch.randn(8, 64)
    with torch.inference_mode(), pytest.raises(RuntimeError, match="version_counter"):
        torch.mm(x, s)
    with pytest.raises(RuntimeError, match=r"^torchutil: the model cannot run in inference mode"):
        torchutil.profile(lambda t: torch.mm(t, s), x, warmup=0, iters=1)
    # The CSR layout it suggests runs and counts the same product.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        csr = s.to_sparse_csr()
    r = torchutil.profile(lambda t: torch.mm(t, csr), x, warmup=0, iters=1, peak_flops=PEAK)
    assert r.matrix_flops == 2 * s._nnz() * 8


def test_sparse_times_sparse_is_one_unknown_product_and_its_metadata_is_free():
    """The product of two sparse matrices depends on where their values lie (data): it is named
    as one unknown call, and the sparse metadata ops around it (_nnz, _indices, coalesce, ...)
    are neither priced nor unknown."""
    s = _sparse(64, 128).to_sparse()
    t = _sparse(128, 32, seed=2).to_sparse()
    r = count(lambda: torch.sparse.mm(s, t))
    assert r.unknown_ops == {"aten::_sparse_sparse_matmul": 1}
    assert r.flops == 0
    r = count(lambda: torch.mm(s, t))
    assert r.unknown_ops == {"aten::mm": 1}


# ---- accumulations at indices, weight norm, quantized transposed convolutions -----------------

def test_index_add_and_scatter_reduce_against_closed_forms():
    """Oracle: 1 add per source element (index_add_, whose inner scatter_add_ is not listed
    again; alpha != 1 scales it first: 2), scatter_reduce 1 per source element (and 1 per
    output element for "mean", its division)."""
    x, src = torch.zeros(10, 16), torch.randn(40, 16)
    index = torch.randint(0, 10, (40,))
    r = count(lambda: x.clone().index_add_(0, index, src))
    assert r.unknown_ops == {} and r.vector_flops == src.numel()
    assert [o.op for o in r.ops if o.vector_flops] == ["aten::index_add_"]
    r = count(lambda: torch.index_add(x, 0, index, src, alpha=0.5))
    assert r.vector_flops == 2 * src.numel()
    index2 = torch.randint(0, 10, (40, 16))
    for reduce, extra in [("sum", 0), ("amax", 0), ("mean", x.numel())]:
        r = count(lambda: x.scatter_reduce(0, index2, src, reduce=reduce))
        assert r.unknown_ops == {} and r.vector_flops == src.numel() + extra, reduce
    r = count(lambda: x.scatter_add(0, index2, src))
    assert r.unknown_ops == {} and r.vector_flops == src.numel()


def test_weight_norm_against_its_closed_form():
    """Oracle: w = g · v / ||v||: per element of v its square, its add and the multiply (3), per
    element of g the square root and the divide (2)."""
    v, g = torch.randn(32, 16, 3, 3), torch.randn(32, 1, 1, 1)
    for fn in (torch._weight_norm, lambda a, b: torch.ops.aten._weight_norm_interface(a, b, 0)):
        r = count(fn, v, g)
        assert r.unknown_ops == {} and r.vector_flops == 3 * v.numel() + 2 * g.numel()
    layer = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(16, 8))
    r = count(layer, torch.randn(4, 16))
    assert r.unknown_ops == {}
    assert r.vector_flops == 3 * 16 * 8 + 2 * 8 + 4 * 8  # the norm, and the Linear's bias


def test_no_work_ops_are_not_unknown():
    z = torch.randn(3, dtype=torch.complex64)
    r = count(lambda: (torch.tril_indices(6, 6), z.resolve_conj(), z.conj().resolve_conj()))
    assert r.unknown_ops == {}


@pytest.mark.skipif("fbgemm" not in torch.backends.quantized.supported_engines, reason="needs fbgemm (x86)")
def test_quantized_conv_transpose2d_against_flop_counter_mode():
    """Oracle: FlopCounterMode on the float ConvTranspose2d (the same MACs, in 8-bit integers);
    the vector FLOPs as a quantized convolution's: 2 per output element."""
    import torch.ao.nn.quantized as nnq

    x = torch.randn(2, 8, 10, 10)
    float_layer = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, groups=2)
    with FlopCounterMode(display=False) as fcm:
        out = float_layer(x)
    layer = nnq.ConvTranspose2d(8, 4, 3, stride=2, groups=2)
    qx = torch.quantize_per_tensor(x, 0.1, 128, torch.quint8)
    r = count(layer, qx)
    row = [o for o in r.ops if o.op == "quantized::conv_transpose2d"]
    assert r.unknown_ops == {} and len(row) == 1
    assert row[0].matrix_flops == fcm.get_total_flops()
    assert row[0].vector_flops == 2 * out.numel()
