"""Counts of every op family against closed-form formulas, through the real dispatcher.

Each family runs small functional calls (or tiny modules) on seeded random shapes inside
torchutil.Profiler (or torchutil.profile) and compares the result with formulas written here
from the convention in csrc/core/Convention.h and the vector factors of csrc/core/Formulas.cpp:

* matrix FLOPs: 2 x multiply-accumulates of contractions;
* vector FLOPs: elementwise 1 per output element (fused multiply-adds 2), bias 1 per output
  element, batch norm 2 (inference) / 5 (training) per element, layer/group/instance norm and
  softmax 5 per element, pooling 1 per window element per output element, adaptive pooling and
  reductions 1 per input element (norms 2, variance and logsumexp 3), interpolation 1 per tap
  per output element;
* bytes: every tensor the counted op reads plus every tensor it writes, by nominal shape.

Sizes come from the arguments, never from torchutil: where an output shape has a formula
(convolution, pooling, interpolation) the test computes it and checks it against the tensor torch
returns; aten variants with several outputs count the tensors torch returns.
"""
from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F
from torch.autograd.profiler import profile as torch_profile
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import torchutil
from nets import SmallNet
from conftest import cpu_and_cuda

SEEDS = range(8)
# Any positive peak: keeps the timed CPU GEMM (the measured peak) out of these tests.
PEAK = 1e12
F32 = 4  # bytes per float32 element
I64 = 8  # bytes per int64 element (pooling indices)


def prod(values) -> int:
    return math.prod(int(v) for v in values)


def count_on(device, fn, *args, **kwargs):
    """Runs fn(*args, **kwargs) in a Profiler; returns (ProfileResult, fn's output)."""
    with torchutil.Profiler(device=device, peak_flops=PEAK) as prof:
        out = fn(*args, **kwargs)
    return prof.result, out


def count(fn, *args, **kwargs):
    return count_on("cpu", fn, *args, **kwargs)


def tensors_in(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v)]
    return []


def nbytes(*values) -> int:
    """Bytes of every tensor in values (nested tuples and lists included)."""
    return sum(t.numel() * t.element_size() for v in values for t in tensors_in(v))


def check_single(result, op, *, matrix, vector, bytes, useful=None):
    """result holds exactly one row, op called once, with these FLOPs and bytes; its totals
    are that row's. useful: its useful FLOPs, all of them (matrix + vector) unless given."""
    assert [(r.op, r.calls) for r in result.ops] == [(op, 1)], result.ops
    assert result.unknown_ops == {}
    row = result.ops[0]
    assert (row.matrix_flops, row.vector_flops, row.bytes) == (matrix, vector, bytes), row
    useful = matrix + vector if useful is None else useful
    assert row.useful_flops == useful, row
    assert result.useful_flops == useful
    assert result.matrix_flops == matrix
    assert result.vector_flops == vector
    assert result.flops == matrix + vector
    assert result.bytes == bytes
    assert result.counted_op_calls == 1
    assert result.unknown_op_calls == 0
    return row


# ---- matrix products -------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_mm(seed):
    rng = random.Random(f"mm{seed}")
    n, k, m = (rng.randint(1, 48) for _ in range(3))
    dtype, dtype_name = rng.choice(
        [(torch.float32, "float32"), (torch.float64, "float64"), (torch.bfloat16, "bfloat16")])
    a, b = torch.randn(n, k, dtype=dtype), torch.randn(k, m, dtype=dtype)
    size = torch.empty((), dtype=dtype).element_size()
    res, out = count(torch.mm, a, b)
    assert out.shape == (n, m)
    row = check_single(res, "aten::mm", matrix=2 * n * k * m, vector=0,
                       bytes=size * (n * k + k * m + n * m))
    assert row.dtype == dtype_name
    assert row.op_class == "matrix"


@pytest.mark.parametrize("seed", SEEDS)
def test_addmm_bias_is_vector(seed):
    rng = random.Random(f"addmm{seed}")
    n, k, m = (rng.randint(1, 48) for _ in range(3))
    bias_shape = rng.choice([(m,), (n, m), (1, m)])
    bias, a, b = torch.randn(bias_shape), torch.randn(n, k), torch.randn(k, m)
    res, out = count(torch.addmm, bias, a, b, beta=rng.choice([0.5, 1.0]), alpha=2.0)
    assert out.shape == (n, m)
    check_single(res, "aten::addmm", matrix=2 * n * k * m, vector=n * m,
                 bytes=F32 * (prod(bias_shape) + n * k + k * m + n * m))


@pytest.mark.parametrize("seed", SEEDS)
def test_bmm(seed):
    rng = random.Random(f"bmm{seed}")
    bt, n, k, m = rng.randint(1, 6), *(rng.randint(1, 24) for _ in range(3))
    a, b = torch.randn(bt, n, k), torch.randn(bt, k, m)
    res, out = count(torch.bmm, a, b)
    assert out.shape == (bt, n, m)
    check_single(res, "aten::bmm", matrix=2 * bt * n * k * m, vector=0,
                 bytes=F32 * bt * (n * k + k * m + n * m))


@pytest.mark.parametrize("seed", SEEDS)
def test_baddbmm(seed):
    rng = random.Random(f"baddbmm{seed}")
    bt, n, k, m = rng.randint(1, 6), *(rng.randint(1, 24) for _ in range(3))
    self_shape = rng.choice([(bt, n, m), (n, m), (1, 1, m)])
    c, a, b = torch.randn(self_shape), torch.randn(bt, n, k), torch.randn(bt, k, m)
    res, out = count(torch.baddbmm, c, a, b)
    assert out.shape == (bt, n, m)
    check_single(res, "aten::baddbmm", matrix=2 * bt * n * k * m, vector=bt * n * m,
                 bytes=F32 * (prod(self_shape) + bt * (n * k + k * m + n * m)))


MATMUL_KINDS = ["2d@2d", "1d@2d", "2d@1d", "nd@2d", "nd@nd", "broadcast", "2d@nd"]


@pytest.mark.parametrize("kind", MATMUL_KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_matmul_decomposes_to_mm_bmm(kind, seed):
    rng = random.Random(f"matmul{kind}{seed}")
    n, k, m = (rng.randint(1, 16) for _ in range(3))
    batch = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 2)))
    if kind == "2d@2d":
        sa, sb = (n, k), (k, m)
    elif kind == "1d@2d":
        n, sa, sb = 1, (k,), (k, m)
    elif kind == "2d@1d":
        m, sa, sb = 1, (n, k), (k,)
    elif kind == "nd@2d":
        sa, sb = (*batch, n, k), (k, m)
    elif kind == "nd@nd":
        sa, sb = (*batch, n, k), (*batch, k, m)
    elif kind == "broadcast":
        other = tuple(rng.randint(2, 3) for _ in batch)
        sa, sb = (*batch, 1, n, k), (*other, k, m)  # [*batch, 1] x [*other]: broadcast batch
    else:  # "2d@nd"
        sa, sb = (n, k), (*batch, k, m)
    a, b = torch.randn(sa), torch.randn(sb)
    batch_out = torch.broadcast_shapes(sa[:-2], sb[:-2]) if len(sa) > 1 and len(sb) > 1 else ()
    p = prod(batch_out)

    res, out = count(torch.matmul, a, b)
    assert out.numel() == p * n * m
    assert res.unknown_ops == {}
    assert res.matrix_flops == 2 * p * n * k * m
    assert res.vector_flops == 0
    matrix_rows = [r for r in res.ops if r.op_class == "matrix"]
    assert len(matrix_rows) == 1 and matrix_rows[0].calls == 1, res.ops
    row = matrix_rows[0]
    assert row.op in {"aten::mm", "aten::bmm", "aten::mv"}
    assert all(r.op_class == "memory" for r in res.ops if r is not row), res.ops
    # Bytes of the product itself, where the decomposition is fixed by the shapes.
    if kind in ("2d@2d", "1d@2d"):
        assert row.op == "aten::mm"
        assert row.bytes == F32 * (n * k + k * m + n * m)
    elif kind == "2d@1d":
        assert row.op == "aten::mv"
        assert row.bytes == F32 * (n * k + k + n)
    elif kind == "nd@2d":  # folded into one [p*n, k] x [k, m] product
        assert row.op == "aten::mm"
        assert row.bytes == F32 * (p * n * k + k * m + p * n * m)
    elif kind in ("nd@nd", "broadcast"):  # both sides expanded to [p, ...]
        assert row.op == "aten::bmm"
        assert row.bytes == F32 * p * (n * k + k * m + n * m)


@pytest.mark.parametrize("seed", SEEDS)
def test_linear(seed):
    rng = random.Random(f"linear{seed}")
    lead = tuple(rng.randint(1, 6) for _ in range(rng.randint(1, 2)))
    fin, fout = rng.randint(1, 32), rng.randint(1, 32)
    bias = rng.random() < 0.7
    layer = torch.nn.Linear(fin, fout, bias=bias).eval()
    x = torch.randn(*lead, fin)
    p = prod(lead)
    res = torchutil.profile(layer, x, warmup=0, iters=1, peak_flops=PEAK)
    check_single(res, "aten::addmm" if bias else "aten::mm",
                 matrix=2 * p * fin * fout, vector=p * fout if bias else 0,
                 bytes=F32 * (p * fin + fin * fout + (fout if bias else 0) + p * fout))


# ---- convolutions ------------------------------------------------------------------------------

def conv_out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def conv_transpose_out(size, k, s, p, d, op):
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("seed", SEEDS)
def test_conv(nd, seed):
    rng = random.Random(f"conv{nd}-{seed}")
    groups = rng.choice([1, 1, 2, 3])
    n, cin, cout = rng.randint(1, 3), groups * rng.randint(1, 3), groups * rng.randint(1, 3)
    k = tuple(rng.randint(1, 3) for _ in range(nd))
    stride = tuple(rng.randint(1, 3) for _ in range(nd))
    pad = tuple(rng.randint(0, kk // 2 + 1) for kk in k)
    dil = tuple(rng.randint(1, 2) for _ in range(nd))
    top = 9 if nd < 3 else 5
    size = tuple(max(1, dd * (kk - 1) + 1 - 2 * pp) + rng.randint(0, top)
                 for kk, pp, dd in zip(k, pad, dil))
    with_bias = rng.random() < 0.5
    x, w = torch.randn(n, cin, *size), torch.randn(cout, cin // groups, *k)
    b = torch.randn(cout) if with_bias else None
    out_size = tuple(conv_out(*a) for a in zip(size, k, stride, pad, dil))

    res, out = count(CONV[nd], x, w, b, stride=stride, padding=pad, dilation=dil, groups=groups)
    assert tuple(out.shape) == (n, cout, *out_size)
    outputs = n * cout * prod(out_size)
    check_single(res, "aten::convolution",
                 matrix=2 * outputs * (cin // groups) * prod(k),
                 vector=outputs if with_bias else 0,
                 bytes=F32 * (x.numel() + prod(w.shape) + (cout if with_bias else 0) + outputs))


@pytest.mark.parametrize("seed", SEEDS)
def test_depthwise_conv_module(seed):
    rng = random.Random(f"depthwise{seed}")
    c, mult, k = rng.randint(1, 8), rng.choice([1, 2]), rng.choice([3, 5])
    stride, dil = rng.randint(1, 2), rng.randint(1, 2)
    extent = dil * (k - 1) + 1
    h, w = rng.randint(extent, extent + 10), rng.randint(extent, extent + 10)
    layer = torch.nn.Conv2d(c, c * mult, k, stride=stride, padding=k // 2, dilation=dil,
                            groups=c).eval()
    x = torch.randn(2, c, h, w)
    oh, ow = (conv_out(s, k, stride, k // 2, dil) for s in (h, w))
    outputs = 2 * c * mult * oh * ow
    res = torchutil.profile(layer, x, warmup=0, iters=1, peak_flops=PEAK)
    check_single(res, "aten::convolution", matrix=2 * outputs * k * k, vector=outputs,
                 bytes=F32 * (x.numel() + c * mult * k * k + c * mult + outputs))


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("seed", SEEDS)
def test_conv_transpose(nd, seed):
    rng = random.Random(f"convT{nd}-{seed}")
    groups = rng.choice([1, 1, 2])
    n, cin, cout = rng.randint(1, 3), groups * rng.randint(1, 3), groups * rng.randint(1, 3)
    k = tuple(rng.randint(1, 3) for _ in range(nd))
    stride = tuple(rng.randint(1, 3) for _ in range(nd))
    dil = tuple(rng.randint(1, 2) for _ in range(nd))
    # output_padding must be smaller than stride or dilation.
    out_pad = tuple(rng.randint(0, max(s, d) - 1) for s, d in zip(stride, dil))
    size = tuple(rng.randint(2, 6 if nd < 3 else 4) for _ in range(nd))
    # Padding trims the output; at most what keeps it non-empty.
    pad = tuple(rng.randint(0, min(1, ((s - 1) * st + d * (kk - 1)) // 2))
                for s, st, d, kk in zip(size, stride, dil, k))
    with_bias = rng.random() < 0.5
    x, w = torch.randn(n, cin, *size), torch.randn(cin, cout // groups, *k)
    b = torch.randn(cout) if with_bias else None
    out_size = tuple(conv_transpose_out(*a) for a in zip(size, k, stride, pad, dil, out_pad))

    res, out = count(CONV_T[nd], x, w, b, stride=stride, padding=pad, output_padding=out_pad,
                     groups=groups, dilation=dil)
    assert tuple(out.shape) == (n, cout, *out_size)
    outputs = n * cout * prod(out_size)
    # Every input position multiplies the whole [cin, cout/groups, k...] weight once.
    check_single(res, "aten::convolution",
                 matrix=2 * n * prod(size) * cin * (cout // groups) * prod(k),
                 vector=outputs if with_bias else 0,
                 bytes=F32 * (x.numel() + prod(w.shape) + (cout if with_bias else 0) + outputs))


# ---- attention ---------------------------------------------------------------------------------

def attention_flops(bh, lq, lk, e, ev):
    scores = bh * lq * lk
    return 2 * scores * e + 2 * scores * ev, 5 * scores  # QK^T + PV; softmax


@pytest.mark.parametrize("seed", SEEDS)
def test_scaled_dot_product_attention(seed):
    rng = random.Random(f"sdpa{seed}")
    lead = tuple(rng.randint(1, 3) for _ in range(rng.choice([1, 2])))  # [B] or [B, H]
    lq, lk = rng.randint(1, 12), rng.randint(1, 12)
    e, ev = rng.choice([4, 8, 16]), rng.choice([4, 8, 16])
    q, k, v = torch.randn(*lead, lq, e), torch.randn(*lead, lk, e), torch.randn(*lead, lk, ev)
    mask = torch.randn(lq, lk) if rng.random() < 0.3 else None
    res, out = count(F.scaled_dot_product_attention, q, k, v, attn_mask=mask)
    assert tuple(out.shape) == (*lead, lq, ev)
    matrix, vector = attention_flops(prod(lead), lq, lk, e, ev)
    check_single(res, "aten::scaled_dot_product_attention", matrix=matrix, vector=vector,
                 bytes=nbytes(q, k, v, mask) + F32 * prod(lead) * lq * ev)


@pytest.mark.parametrize("backend", ["aten::_scaled_dot_product_flash_attention_for_cpu",
                                     "aten::_scaled_dot_product_attention_math"])
@pytest.mark.parametrize("seed", range(4))
def test_attention_cpu_backends(backend, seed):
    """The CPU kernels, called directly: priced like the op that dispatches to them."""
    rng = random.Random(f"{backend}{seed}")
    b, h, lq, lk, e = (rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 12),
                       rng.randint(1, 12), rng.choice([8, 16]))
    q, k, v = torch.randn(b, h, lq, e), torch.randn(b, h, lk, e), torch.randn(b, h, lk, e)
    op = getattr(torch.ops.aten, backend.removeprefix("aten::"))
    res, outs = count(op, q, k, v)
    assert tuple(outs[0].shape) == (b, h, lq, e)
    matrix, vector = attention_flops(b * h, lq, lk, e, e)
    check_single(res, backend, matrix=matrix, vector=vector, bytes=nbytes(q, k, v, outs))


def test_sdpa_math_backend_not_counted_twice():
    """Under the math backend the op decomposes into bmm/softmax/...: still one priced call."""
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 6)
    with sdpa_kernel(SDPBackend.MATH):
        with torch_profile() as trace:
            F.scaled_dot_product_attention(q, k, v)
        inner = {e.name for e in trace.function_events}
        res, _ = count(F.scaled_dot_product_attention, q, k, v)
    assert "aten::_scaled_dot_product_attention_math" in inner
    matrix, vector = attention_flops(6, 5, 7, 8, 6)
    check_single(res, "aten::scaled_dot_product_attention", matrix=matrix, vector=vector,
                 bytes=nbytes(q, k, v) + F32 * 6 * 5 * 6)


class SelfAttention(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


class CrossAttention(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x, memory):
        return self.mha(x, memory, memory)[0]


def mha_matrix_flops(b, lq, lk, d, heads):
    projections = 2 * b * lq * d * d + 2 * (2 * b * lk * d * d) + 2 * b * lq * d * d  # q; k, v; out
    return projections + attention_flops(b * heads, lq, lk, d // heads, d // heads)[0]


@pytest.mark.parametrize("seed", range(5))
def test_multihead_attention_eval_fast_path(seed):
    rng = random.Random(f"mha{seed}")
    heads = rng.choice([2, 4, 6])  # the fast path wants an even number of heads
    d, b, length = heads * rng.choice([4, 8]), rng.randint(1, 3), rng.randint(2, 10)
    model = SelfAttention(d, heads).eval()
    x = torch.randn(b, length, d)
    # torchutil.profile runs in inference mode: eval self-attention takes the fused fast path.
    res = torchutil.profile(model, x, warmup=0, iters=1, peak_flops=PEAK)
    matrix = mha_matrix_flops(b, length, length, d, heads)
    vector = 4 * b * length * d + attention_flops(b * heads, length, length, 1, 1)[1]  # biases
    row = check_single(res, "aten::_native_multi_head_attention", matrix=matrix, vector=vector,
                       bytes=F32 * (3 * b * length * d + 4 * d * d + 4 * d + b * length * d))
    assert row.module == "mha"


@pytest.mark.parametrize("seed", range(3))
def test_multihead_attention_cross_lengths(seed):
    """Query and key lengths differ: the decomposed path (projections, bmm, softmax)."""
    rng = random.Random(f"mha-cross{seed}")
    heads = rng.choice([1, 2, 4])
    d, b = heads * rng.choice([4, 8]), rng.randint(1, 3)
    lq, lk = rng.randint(2, 8), rng.randint(9, 14)
    model = CrossAttention(d, heads).eval()
    x, memory = torch.randn(b, lq, d), torch.randn(b, lk, d)
    res = torchutil.profile(model, (x, memory), warmup=0, iters=1, peak_flops=PEAK)
    assert res.unknown_ops == {}
    assert res.matrix_flops == mha_matrix_flops(b, lq, lk, d, heads)
    assert "aten::_native_multi_head_attention" not in {r.op for r in res.ops}
    assert {r.op for r in res.ops if r.op_class == "matrix"} <= {
        "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
        "aten::scaled_dot_product_attention"}


# ---- elementwise ---------------------------------------------------------------------------

UNARY = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp,
         "neg": torch.neg, "abs": torch.abs, "gelu": F.gelu, "silu": F.silu,
         "hardswish": F.hardswish, "sqrt": torch.sqrt}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "maximum": torch.maximum}


def random_shape(rng, dims=(1, 4), top=6, low=1):
    return tuple(rng.randint(low, top) for _ in range(rng.randint(*dims)))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_elementwise_unary(name):
    rng = random.Random(f"unary{name}")
    for _ in range(3):
        shape = random_shape(rng)
        x = torch.rand(shape) + 0.1
        res, out = count(UNARY[name], x)
        n = prod(shape)
        check_single(res, f"aten::{name}", matrix=0, vector=n, bytes=2 * F32 * n)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_elementwise_binary_broadcast(name):
    rng = random.Random(f"binary{name}")
    for _ in range(3):
        shape = random_shape(rng, dims=(2, 4))
        # Broadcast: drop leading dims of the second operand and set some of its dims to 1.
        other = tuple(1 if rng.random() < 0.4 else s for s in shape[rng.randint(0, 1):])
        a, b = torch.randn(shape), torch.rand(other) + 0.5
        res, out = count(BINARY[name], a, b)
        assert tuple(out.shape) == shape
        check_single(res, f"aten::{name}", matrix=0, vector=prod(shape),
                     bytes=F32 * (prod(shape) + prod(other) + prod(shape)))


@pytest.mark.parametrize("seed", range(4))
def test_elementwise_fused_and_where(seed):
    rng = random.Random(f"fused{seed}")
    shape = random_shape(rng, dims=(1, 3))
    a, b, c = torch.randn(shape), torch.randn(shape), torch.randn(shape)
    n = prod(shape)
    res, _ = count(torch.addcmul, a, b, c, value=0.5)  # a + 0.5 * b * c: 2 per element
    check_single(res, "aten::addcmul", matrix=0, vector=2 * n, bytes=4 * F32 * n)
    res, _ = count(torch.lerp, a, b, c)
    check_single(res, "aten::lerp", matrix=0, vector=2 * n, bytes=4 * F32 * n)
    cond = a > 0
    res, _ = count(torch.where, cond, b, c)
    check_single(res, "aten::where", matrix=0, vector=n, bytes=n * 1 + 3 * F32 * n)


def test_inplace_elementwise_uses_base_formula():
    x = torch.randn(3, 5, 7)
    res, _ = count(torch.relu_, x)
    check_single(res, "aten::relu_", matrix=0, vector=x.numel(), bytes=2 * F32 * x.numel())


BOOLEAN_OPS = {
    "aten::__and__": lambda m, n: m & n, "aten::__or__": lambda m, n: m | n,
    "aten::__xor__": lambda m, n: m ^ n, "aten::bitwise_not": lambda m, n: ~m,
    "aten::bitwise_and": torch.bitwise_and, "aten::bitwise_or": torch.bitwise_or,
    "aten::logical_and": torch.logical_and, "aten::logical_not": lambda m, n: torch.logical_not(m),
}


@pytest.mark.parametrize("op", sorted(BOOLEAN_OPS))
def test_boolean_mask_ops_cost_bytes_and_no_flops(op):
    """Attention masks combined with &, |, ~ (450 calls in one Hugging Face generate): integer
    work, priced at 0 FLOPs with their bytes, not listed as unknown."""
    m, n = torch.rand(3, 1, 7) > 0.5, torch.rand(3, 5, 7) > 0.5
    res, out = count(BOOLEAN_OPS[op], m, n)
    assert out.dtype == torch.bool
    unary = op in ("aten::bitwise_not", "aten::logical_not")
    check_single(res, op, matrix=0, vector=0, bytes=nbytes(m, out) + (0 if unary else n.numel()))


def test_inplace_and_out_boolean_ops_cost_no_flops():
    m, n = torch.rand(4, 6) > 0.5, torch.rand(4, 6) > 0.5
    res, _ = count(lambda: (m.__iand__(n), m.__ior__(n), m.bitwise_and_(n),
                            torch.bitwise_or(m, n, out=torch.empty_like(m))))
    assert res.unknown_ops == {}, res.unknown_ops
    assert {r.op for r in res.ops} >= {"aten::__iand__", "aten::__ior__", "aten::bitwise_and_",
                                       "aten::bitwise_or"}, res.ops
    assert res.flops == 0
    # Each reads two masks and writes one; the out= call's out tensor is an argument too.
    assert sum(r.bytes for r in res.ops if r.op != "aten::empty_like") == (3 * 3 + 4) * m.numel()


def test_integer_shifts_cost_no_flops():
    x = torch.arange(24, dtype=torch.int32).reshape(4, 6)
    res, _ = count(lambda: (x << 2, x >> 1, x ^ 3))
    assert res.unknown_ops == {}, res.unknown_ops
    assert [r.op for r in res.ops] == ["aten::__lshift__", "aten::__rshift__", "aten::__xor__"]
    assert res.flops == 0
    assert res.bytes == 3 * 2 * x.numel() * 4  # each reads x and writes its like (scalars: none)


def test_broadcast_to_and_meshgrid_are_views():
    x, a, b = torch.randn(3, 1), torch.arange(4.0), torch.arange(5.0)
    res, out = count(lambda: (torch.broadcast_to(x, (2, 3, 6)),
                              torch.meshgrid(a, b, indexing="ij")))
    assert res.unknown_ops == {}, res.unknown_ops
    assert res.ops == [] and res.flops == 0 and res.bytes == 0
    assert out[0].shape == (2, 3, 6) and out[1][0].shape == (4, 5)


# ---- normalization -------------------------------------------------------------------------

@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_batch_norm(training, seed):
    rng = random.Random(f"bn{training}{seed}")
    c = rng.randint(1, 6)
    shape = (rng.randint(2, 4), c, *(rng.randint(1, 6) for _ in range(rng.randint(0, 3))))
    x = torch.randn(shape)
    stats = rng.random() < 0.7 or not training
    rm, rv = (torch.zeros(c), torch.ones(c)) if stats else (None, None)
    affine = rng.random() < 0.5
    w, b = (torch.rand(c), torch.rand(c)) if affine else (None, None)
    n = prod(shape)
    res, _ = count(F.batch_norm, x, rm, rv, w, b, training=training)
    params = (2 * c if stats else 0) + (2 * c if affine else 0)
    row = check_single(res, "aten::batch_norm", matrix=0, vector=(5 if training else 2) * n,
                       bytes=F32 * (2 * n + params))
    assert row.op_class == "vector"


# The aten variants torch.compile and export graphs call directly, by their training mode.
BN_VARIANTS = {
    "native_batch_norm-eval": (lambda x, s: torch.ops.aten.native_batch_norm(
        x, None, None, *s, False, 0.1, 1e-5), 2),
    "native_batch_norm-train": (lambda x, s: torch.ops.aten.native_batch_norm(
        x, None, None, *s, True, 0.1, 1e-5), 5),
    "_native_batch_norm_legit_no_training": (lambda x, s: torch.ops.aten.
        _native_batch_norm_legit_no_training(x, None, None, *s, 0.1, 1e-5), 2),
    "_native_batch_norm_legit_functional": (lambda x, s: torch.ops.aten.
        _native_batch_norm_legit_functional(x, None, None, *s, True, 0.1, 1e-5), 5),
    "_batch_norm_with_update": (lambda x, s: torch.ops.aten._batch_norm_with_update(
        x, None, None, *s, 0.1, 1e-5), 5),
    "_batch_norm_no_update": (lambda x, s: torch.ops.aten._batch_norm_no_update(
        x, None, None, *s, 0.1, 1e-5), 2),
}


@pytest.mark.parametrize("variant", sorted(BN_VARIANTS))
def test_batch_norm_aten_variants(variant):
    fn, per_element = BN_VARIANTS[variant]
    x = torch.randn(3, 4, 5, 6)
    stats = (torch.zeros(4), torch.ones(4))
    res, outs = count(fn, x, stats)
    check_single(res, "aten::" + variant.split("-")[0], matrix=0, vector=per_element * x.numel(),
                 bytes=nbytes(x, stats, outs))


@pytest.mark.parametrize("seed", range(6))
def test_layer_group_instance_norm(seed):
    rng = random.Random(f"norm{seed}")
    groups = rng.randint(1, 3)
    shape = (rng.randint(1, 3), groups * rng.randint(1, 3), *random_shape(rng, dims=(1, 2)))
    x, n, c = torch.randn(shape), prod(shape), shape[1]
    normalized = shape[-rng.randint(1, 2):]
    affine = rng.random() < 0.5
    w, b = (torch.rand(normalized), torch.rand(normalized)) if affine else (None, None)
    res, _ = count(F.layer_norm, x, normalized, w, b)
    check_single(res, "aten::layer_norm", matrix=0, vector=5 * n,
                 bytes=F32 * (2 * n + (2 * prod(normalized) if affine else 0)))

    w, b = (torch.rand(c), torch.rand(c)) if affine else (None, None)
    res, _ = count(F.group_norm, x, groups, w, b)
    check_single(res, "aten::group_norm", matrix=0, vector=5 * n,
                 bytes=F32 * (2 * n + (2 * c if affine else 0)))

    res, _ = count(F.instance_norm, x)  # composite of batch_norm: priced once, as itself
    check_single(res, "aten::instance_norm", matrix=0, vector=5 * n, bytes=F32 * 2 * n)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
@pytest.mark.parametrize("seed", range(4))
def test_softmax(fn, seed):
    rng = random.Random(f"softmax{fn.__name__}{seed}")
    shape = random_shape(rng, dims=(1, 4))
    x = torch.randn(shape)
    res, _ = count(fn, x, dim=rng.randrange(len(shape)))
    check_single(res, f"aten::{fn.__name__}", matrix=0, vector=5 * prod(shape),
                 bytes=2 * F32 * prod(shape))


# ---- pooling -------------------------------------------------------------------------------

POOL = {("max", 1): F.max_pool1d, ("max", 2): F.max_pool2d, ("max", 3): F.max_pool3d,
        ("avg", 1): F.avg_pool1d, ("avg", 2): F.avg_pool2d, ("avg", 3): F.avg_pool3d}


@pytest.mark.parametrize("kind,nd", sorted(POOL))
@pytest.mark.parametrize("seed", range(4))
def test_pooling(kind, nd, seed):
    rng = random.Random(f"pool{kind}{nd}{seed}")
    k = tuple(rng.randint(1, 3) for _ in range(nd))
    stride = tuple(rng.randint(1, 3) for _ in range(nd))
    pad = tuple(rng.randint(0, kk // 2) for kk in k)
    size = tuple(kk + rng.randint(0, 6 if nd < 3 else 3) for kk in k)
    lead = (rng.randint(1, 2), rng.randint(1, 3))
    x = torch.randn(*lead, *size)
    indices = kind == "max" and rng.random() < 0.5
    kwargs = {"return_indices": True} if indices else {}
    res, out = count(POOL[kind, nd], x, k, stride, pad, **kwargs)
    out_size = tuple(conv_out(s, kk, st, p, 1) for s, kk, st, p in zip(size, k, stride, pad))
    outputs = prod(lead) * prod(out_size)
    assert tuple(tensors_in(out)[0].shape) == (*lead, *out_size)
    op = f"aten::{kind}_pool{nd}d" + ("_with_indices" if indices else "")
    check_single(res, op, matrix=0, vector=prod(k) * outputs,
                 bytes=F32 * (x.numel() + outputs) + (I64 * outputs if indices else 0))


ADAPTIVE = {("avg", 1): F.adaptive_avg_pool1d, ("avg", 2): F.adaptive_avg_pool2d,
            ("avg", 3): F.adaptive_avg_pool3d, ("max", 1): F.adaptive_max_pool1d,
            ("max", 2): F.adaptive_max_pool2d, ("max", 3): F.adaptive_max_pool3d}


@pytest.mark.parametrize("kind,nd", sorted(ADAPTIVE))
@pytest.mark.parametrize("seed", range(3))
def test_adaptive_pooling(kind, nd, seed):
    rng = random.Random(f"adaptive{kind}{nd}{seed}")
    size = tuple(rng.randint(1, 7) for _ in range(nd))
    out_size = tuple(rng.randint(1, s) for s in size)
    lead = (rng.randint(1, 2), rng.randint(1, 3))
    x = torch.randn(*lead, *size)
    res, out = count(ADAPTIVE[kind, nd], x, out_size)
    outputs = prod(lead) * prod(out_size)
    assert tuple(tensors_in(out)[0].shape) == (*lead, *out_size)
    check_single(res, f"aten::adaptive_{kind}_pool{nd}d", matrix=0, vector=x.numel(),
                 bytes=F32 * (x.numel() + outputs) + (I64 * outputs if kind == "max" else 0))


# ---- reductions ----------------------------------------------------------------------------

# name -> (call, FLOPs per input element, output dtype sizes per output element)
REDUCTIONS = {
    "sum": (lambda x, d: torch.sum(x, d), 1, [F32]),
    "mean": (lambda x, d: torch.mean(x, d), 1, [F32]),
    "amax": (lambda x, d: torch.amax(x, d), 1, [F32]),
    "prod": (lambda x, d: torch.prod(x, d), 1, [F32]),
    "argmax": (lambda x, d: torch.argmax(x, d), 1, [I64]),
    "max": (lambda x, d: torch.max(x, d), 1, [F32, I64]),
    "linalg_vector_norm": (lambda x, d: torch.linalg.vector_norm(x, dim=d), 2, [F32]),
    "var": (lambda x, d: torch.var(x, d), 3, [F32]),
    "std": (lambda x, d: torch.std(x, d), 3, [F32]),
    "logsumexp": (lambda x, d: torch.logsumexp(x, d), 3, [F32]),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name):
    call, per_element, out_sizes = REDUCTIONS[name]
    rng = random.Random(f"reduce{name}")
    for _ in range(3):
        shape = random_shape(rng, dims=(2, 4), low=2)  # var/std need 2 values per output
        dim = rng.randrange(len(shape))
        x = torch.randn(shape) + 2
        res, _ = count(call, x, dim)
        outputs = prod(shape) // shape[dim]
        check_single(res, f"aten::{name}", matrix=0, vector=per_element * prod(shape),
                     bytes=F32 * prod(shape) + sum(out_sizes) * outputs)


def test_full_reduction_and_scan():
    x = torch.randn(4, 5, 6)
    res, _ = count(torch.sum, x)
    check_single(res, "aten::sum", matrix=0, vector=120, bytes=F32 * (120 + 1))
    res, _ = count(torch.cumsum, x, 1)
    check_single(res, "aten::cumsum", matrix=0, vector=120, bytes=F32 * 240)


# ---- interpolation -------------------------------------------------------------------------

# mode -> (spatial dims, taps per output element, op)
INTERPOLATION = {
    "linear": (1, 2, "aten::upsample_linear1d"),
    "bilinear": (2, 4, "aten::upsample_bilinear2d"),
    "bicubic": (2, 16, "aten::upsample_bicubic2d"),
    "trilinear": (3, 8, "aten::upsample_trilinear3d"),
}


@pytest.mark.parametrize("mode", sorted(INTERPOLATION))
@pytest.mark.parametrize("seed", range(4))
def test_interpolate(mode, seed):
    nd, taps, op = INTERPOLATION[mode]
    rng = random.Random(f"interp{mode}{seed}")
    size = tuple(rng.randint(2, 6) for _ in range(nd))
    out_size = tuple(rng.randint(1, 9) for _ in range(nd))
    lead = (rng.randint(1, 2), rng.randint(1, 3))
    x = torch.randn(*lead, *size)
    res, out = count(F.interpolate, x, size=out_size, mode=mode,
                     align_corners=rng.choice([False, True]))
    outputs = prod(lead) * prod(out_size)
    assert tuple(out.shape) == (*lead, *out_size)
    check_single(res, op, matrix=0, vector=taps * outputs, bytes=F32 * (x.numel() + outputs))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_interpolate_nearest_is_memory(nd):
    x = torch.randn(2, 3, *([4] * nd))
    out_size = (7, 5, 3)[:nd]
    res, out = count(F.interpolate, x, size=out_size, mode="nearest")
    row = check_single(res, f"aten::upsample_nearest{nd}d", matrix=0, vector=0,
                       bytes=F32 * (x.numel() + 6 * prod(out_size)))
    assert row.op_class == "memory"


def test_interpolate_antialias():
    x = torch.randn(2, 3, 12, 10)
    res, out = count(F.interpolate, x, size=(5, 4), mode="bilinear", antialias=True)
    check_single(res, "aten::_upsample_bilinear2d_aa", matrix=0, vector=4 * 6 * 20,
                 bytes=F32 * (x.numel() + 6 * 20))


# ---- sampling at points (grid_sample, torchvision's roi_align and nms) ---------------------
# Per sampled value (point and channel) one FLOP per tap, as interpolation counts them (bilinear
# 2^dims, bicubic 16, nearest none); per point, shared by the channels, 2 per axis for its
# coordinate and one per tap weight (docs/counting.md).

GRID_TAPS = {"bilinear": 4, "nearest": 0, "bicubic": 16}


@pytest.mark.parametrize("mode", sorted(GRID_TAPS))
@pytest.mark.parametrize("seed", range(3))
def test_grid_sample_2d(mode, seed):
    rng = random.Random(f"grid{mode}{seed}")
    n, c, h, w = rng.randint(1, 3), rng.randint(1, 4), rng.randint(2, 9), rng.randint(2, 9)
    ho, wo = rng.randint(1, 8), rng.randint(1, 8)
    x, grid = torch.randn(n, c, h, w), torch.rand(n, ho, wo, 2) * 2 - 1
    res, out = count(F.grid_sample, x, grid, mode=mode, align_corners=rng.choice([False, True]),
                     padding_mode=rng.choice(["zeros", "border", "reflection"]))
    assert tuple(out.shape) == (n, c, ho, wo)
    taps, points = GRID_TAPS[mode], n * ho * wo
    check_single(res, "aten::grid_sampler", matrix=0,
                 vector=taps * points * c + (2 * 2 + taps) * points, bytes=nbytes(x, grid, out))


def test_grid_sample_3d_is_trilinear():
    x, grid = torch.randn(2, 3, 4, 5, 6), torch.rand(2, 3, 4, 5, 3) * 2 - 1
    res, out = count(F.grid_sample, x, grid, align_corners=False)
    points = 2 * 3 * 4 * 5
    check_single(res, "aten::grid_sampler", matrix=0, vector=8 * points * 3 + (2 * 3 + 8) * points,
                 bytes=nbytes(x, grid, out))


@pytest.mark.parametrize("ratio", [1, 2, 4])
def test_roi_align(ratio):
    """Each of the K x C x ph x pw output bins averages ratio^2 bilinear samples: 4 taps and an
    add per sample and channel, a divide per bin; per sample point 8 (coordinate and weights)."""
    torchvision = pytest.importorskip("torchvision")
    x = torch.randn(2, 5, 16, 20)
    boxes = torch.tensor([[0, 1.0, 2.0, 9.0, 12.0], [1, 0.0, 0.0, 15.0, 19.0],
                          [0, 3.5, 1.5, 7.5, 8.0]])
    k, c, ph, pw = 3, 5, 4, 3
    res, out = count(torchvision.ops.roi_align, x, boxes, (ph, pw), 0.5, ratio, True)
    assert tuple(out.shape) == (k, c, ph, pw)
    samples = k * ph * pw * ratio**2
    check_single(res, "torchvision::roi_align", matrix=0,
                 vector=samples * c * (4 + 1) + k * c * ph * pw + 8 * samples,
                 bytes=nbytes(x, boxes, out))


def test_roi_align_with_an_adaptive_ratio_is_reported():
    """sampling_ratio <= 0 samples each box as often as it is large: not a shape function."""
    torchvision = pytest.importorskip("torchvision")
    x, boxes = torch.randn(1, 2, 8, 8), torch.tensor([[0, 0.0, 0.0, 7.0, 7.0]])
    res, _ = count(torchvision.ops.roi_align, x, boxes, (2, 2), 1.0, -1)
    assert res.unknown_ops == {"torchvision::roi_align": 1}
    assert all(r.op != "torchvision::roi_align" for r in res.ops)


@pytest.mark.parametrize("n", [1, 2, 37])
def test_nms_prices_every_pair(n):
    """13 FLOPs per pair's IoU and threshold test, 3 per box's area; its sort is inside it."""
    torchvision = pytest.importorskip("torchvision")
    xy = torch.rand(n, 2) * 50
    boxes = torch.cat([xy, xy + torch.rand(n, 2) * 30 + 1], dim=1)
    scores = torch.rand(n)
    res, keep = count(torchvision.ops.nms, boxes, scores, 0.4)
    check_single(res, "torchvision::nms", matrix=0, vector=13 * n * (n - 1) // 2 + 3 * n,
                 bytes=nbytes(boxes, scores, keep))


# ---- data movement -------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_data_movement_costs_bytes_only(seed):
    rng = random.Random(f"memory{seed}")
    shape = random_shape(rng, dims=(2, 3), low=2)
    a, b = torch.randn(shape), torch.randn(shape)
    n = prod(shape)
    res, _ = count(torch.cat, [a, b], rng.randrange(len(shape)))
    row = check_single(res, "aten::cat", matrix=0, vector=0, bytes=F32 * 4 * n)
    assert row.op_class == "memory"
    res, _ = count(a.new_zeros, (3, *shape))
    check_single(res, "aten::new_zeros", matrix=0, vector=0, bytes=F32 * (n + 3 * n))
    pad = rng.randint(1, 2)
    res, out = count(F.pad, a, (pad, pad))
    padded = prod(shape[:-1]) * (shape[-1] + 2 * pad)
    check_single(res, "aten::constant_pad_nd", matrix=0, vector=0, bytes=F32 * (n + padded))


# ---- dispatch rules ------------------------------------------------------------------------

def dispatched(fn, *args):
    """Names of every op torch's own profiler sees fn(*args) call, nested ones included."""
    with torch_profile() as trace:
        fn(*args)
    return [e.name for e in trace.function_events]


COMPOSITES = {
    # name -> (call, the one op priced, an op of the nesting that torch dispatches as well)
    "conv2d": (lambda x: F.conv2d(x, torch.ones(4, 3, 3, 3)), "aten::convolution",
               "aten::_convolution"),
    "linear": (lambda x: F.linear(x.flatten(1), torch.ones(5, 192), torch.ones(5)),
               "aten::addmm", "aten::linear"),
    "matmul": (lambda x: torch.matmul(x, torch.ones(8, 6)), "aten::mm", "aten::matmul"),
    "instance_norm": (lambda x: F.instance_norm(x), "aten::instance_norm", "aten::batch_norm"),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_ops_counted_once(name):
    call, priced, nested = COMPOSITES[name]
    x = torch.randn(2, 3, 8, 8)
    names = dispatched(call, x)
    assert priced in names and nested in names  # the nesting this test is about happens
    res, _ = count(call, x)
    rows = [(r.op, r.calls) for r in res.ops if r.op_class != "memory"]
    assert rows == [(priced, 1)], res.ops
    # Everything torchutil priced is one call's worth: compare with the closed forms.
    expected = {"conv2d": 2 * 2 * 4 * 6 * 6 * 27, "linear": 2 * 2 * 192 * 5,
                "matmul": 2 * 2 * 3 * 8 * 8 * 6, "instance_norm": 0}[name]
    assert res.matrix_flops == expected


def test_conv2d_backend_is_nested_and_not_counted():
    x, w = torch.randn(1, 3, 10, 10), torch.randn(8, 3, 3, 3)
    names = dispatched(F.conv2d, x, w)
    chain = [n for n in names if "conv" in n]
    assert chain[:3] == ["aten::conv2d", "aten::convolution", "aten::_convolution"]
    assert len(chain) >= 4, chain  # and a backend kernel below _convolution
    res, _ = count(F.conv2d, x, w)
    check_single(res, "aten::convolution", matrix=2 * 8 * 8 * 8 * 27, vector=0,
                 bytes=F32 * (300 + 216 + 512))


def test_autocast_cpu_redispatch_counts_once_in_bfloat16():
    n, k, m = 12, 20, 7
    a, b = torch.randn(n, k), torch.randn(k, m)

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.mm(a, b)

    assert dispatched(run).count("aten::mm") == 2  # autocast re-dispatches mm
    res, out = count(run)
    assert out.dtype == torch.bfloat16
    row = check_single(res, "aten::mm", matrix=2 * n * k * m, vector=0,
                       bytes=2 * (n * k + k * m + n * m))  # the bfloat16 kernel's tensors
    assert row.dtype == "bfloat16"


def test_autocast_cpu_linear():
    layer = torch.nn.Linear(16, 8)
    x = torch.randn(4, 16)

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return layer(x)

    res, _ = count(run)
    matrix_rows = [r for r in res.ops if r.op_class == "matrix"]
    assert [(r.op, r.calls, r.dtype) for r in matrix_rows] == [("aten::addmm", 1, "bfloat16")]
    assert res.matrix_flops == 2 * 4 * 16 * 8
    assert res.vector_flops == 4 * 8
    assert all(r.op_class == "memory" for r in res.ops if r not in matrix_rows)  # the casts


def small_net_flops(n, h, w):
    conv_out = n * 8 * h * w
    matrix = 2 * conv_out * 3 * 9 + 2 * n * 8 * 10
    # conv bias, bn (inference), relu, adaptive pool (per input), fc bias
    vector = conv_out + 2 * conv_out + conv_out + conv_out + n * 10
    return matrix, vector


def test_meta_device_counts_without_running():
    torch.manual_seed(0)
    model = SmallNet().eval().to("meta")
    x = torch.randn(2, 3, 9, 7, device="meta")
    assert all(p.is_meta for p in model.parameters())
    res = torchutil.profile(model, x)
    matrix, vector = small_net_flops(2, 9, 7)
    assert (res.matrix_flops, res.vector_flops) == (matrix, vector)
    assert res.unknown_ops == {}
    assert math.isnan(res.seconds)
    assert math.isnan(res.utilization)
    assert math.isnan(res.peak_flops_per_second)
    assert res.iterations == 0
    assert res.timing_mode == "none"
    assert res.device == "meta"


def test_meta_matches_flop_counter_on_cpu():
    torch.manual_seed(0)
    model = SmallNet().eval()
    x = torch.randn(1, 3, 16, 16)
    with FlopCounterMode(display=False) as oracle, torch.no_grad():
        model(x)
    res = torchutil.profile(model.to("meta"), x.to("meta"))
    assert res.matrix_flops == oracle.get_total_flops()


def test_meta_functional_in_profiler():
    x, w = torch.randn(2, 4, 10, 10, device="meta"), torch.randn(6, 2, 3, 3, device="meta")
    with torchutil.Profiler(device="meta") as prof:
        F.conv2d(x, w, groups=2)
    res = prof.result
    check_single(res, "aten::convolution", matrix=2 * 2 * 6 * 8 * 8 * 2 * 9, vector=0,
                 bytes=F32 * (800 + 108 + 768))
    assert math.isnan(res.peak_flops_per_second)


# ---- ops with no formula -------------------------------------------------------------------

def test_unknown_op_listed_by_name_and_count():
    x = torch.randn(16)
    a, b = torch.randn(4, 5), torch.randn(5, 3)

    def run():
        for _ in range(3):
            torch.topk(x, 2)
        return torch.mm(a, b)

    assert "aten::topk" not in torch.ops.util.formula_ops()
    res, _ = count(run)
    assert res.unknown_ops.get("aten::topk") == 3, res.unknown_ops
    assert all("topk" not in r.op for r in res.ops), res.ops  # not a zero-FLOP row
    assert res.unknown_op_calls == sum(res.unknown_ops.values())
    assert [(r.op, r.calls) for r in res.ops if r.op == "aten::mm"] == [("aten::mm", 1)]
    assert res.matrix_flops == 2 * 4 * 5 * 3
    assert "aten::topk x3" in res.format()


def test_unknown_op_not_hidden_by_its_copies():
    """sort copies its input (a priced memory op) and then sorts outside the dispatcher: the
    copy must not make it look priced."""
    a = torch.randn(6, 6)
    res, _ = count(torch.sort, a)
    listed = [name for name in res.unknown_ops if name.startswith("aten::sort")]
    assert listed, (res.unknown_ops, res.ops)
    assert all(name not in torch.ops.util.formula_ops() for name in listed)
    assert res.unknown_op_calls == sum(res.unknown_ops.values()) >= 1


def test_every_reported_op_counted_or_listed():
    torch.manual_seed(0)
    model = SmallNet().eval()
    x = torch.randn(2, 3, 8, 8)

    def run():
        y = model(x)
        torch.topk(y, 2)
        return torch.softmax(y, -1)

    res, _ = count(run)
    assert res.counted_op_calls == sum(r.calls for r in res.ops)
    assert res.unknown_op_calls == sum(res.unknown_ops.values()) > 0
    assert res.matrix_flops == sum(r.matrix_flops for r in res.ops)
    assert res.vector_flops == sum(r.vector_flops for r in res.ops)
    assert res.bytes == sum(r.bytes for r in res.ops)
    assert res.flops == res.matrix_flops + res.vector_flops
    assert res.op_table.shape == (len(res.ops), len(torchutil.OP_FIELDS))
    columns = {name: res.op_table[:, i].tolist() for i, name in enumerate(torchutil.OP_FIELDS)}
    for name in ("calls", "matrix_flops", "vector_flops", "bytes"):
        assert columns[name] == [getattr(r, name) for r in res.ops], name
    for r in res.ops:
        assert r.op_class in {"matrix", "vector", "memory"}, r
        if r.op_class == "memory":
            assert r.flops == 0, r
        else:
            assert r.flops > 0, r
    matrix, vector = small_net_flops(2, 8, 8)
    assert res.matrix_flops == matrix
    assert res.vector_flops == vector + 5 * 2 * 10  # and the softmax


# ---- the same closed forms on every device --------------------------------------------------

@pytest.mark.parametrize("device", cpu_and_cuda())
def test_formulas_on_device(device):
    """Backends differ per device (mkldnn or cuDNN convolutions, flash or efficient attention,
    cuDNN batch norm): the op that is priced, and its price, must not."""
    rng = random.Random("device")
    n, k, m = 24, 40, 16
    a, b = torch.randn(n, k, device=device), torch.randn(k, m, device=device)
    res, _ = count_on(device, torch.mm, a, b)
    check_single(res, "aten::mm", matrix=2 * n * k * m, vector=0,
                 bytes=F32 * (n * k + k * m + n * m))

    x, w = torch.randn(2, 6, 11, 9, device=device), torch.randn(4, 3, 3, 3, device=device)
    res, out = count_on(device, F.conv2d, x, w, None, 2, 1, 1, 2)  # stride 2, padding 1, groups 2
    assert tuple(out.shape) == (2, 4, 6, 5)
    check_single(res, "aten::convolution", matrix=2 * 2 * 4 * 30 * 3 * 9, vector=0,
                 bytes=F32 * (x.numel() + w.numel() + 2 * 4 * 30))

    q = torch.randn(2, 4, 9, 16, device=device)
    kv = torch.randn(2, 4, 13, 16, device=device)
    res, _ = count_on(device, F.scaled_dot_product_attention, q, kv, kv)
    matrix, vector = attention_flops(8, 9, 13, 16, 16)
    check_single(res, "aten::scaled_dot_product_attention", matrix=matrix, vector=vector,
                 bytes=nbytes(q, kv, kv, q))

    x = torch.randn(4, 6, 5, 5, device=device)
    stats = [torch.rand(6, device=device) + 0.5 for _ in range(4)]
    for training in (False, True):
        res, _ = count_on(device, F.batch_norm, x, *stats, training=training)
        check_single(res, "aten::batch_norm", matrix=0,
                     vector=(5 if training else 2) * x.numel(),
                     bytes=F32 * (2 * x.numel() + 4 * 6))
    shape = (3, rng.randint(2, 9), 7)
    res, _ = count_on(device, F.softmax, torch.randn(shape, device=device), -1)
    check_single(res, "aten::softmax", matrix=0, vector=5 * prod(shape),
                 bytes=2 * F32 * prod(shape))


# Names that the registry prices but the installed torch may not register as operators, each
# with why it is kept. Everything else must be a dispatcher operator of this torch, so that a
# misspelt or retired name (aten::_cat, gone from the dispatcher) cannot sit in the registry
# unnoticed.
_ONEDNN = "registered only by torch builds with oneDNN (x86-64 Linux and Windows wheels)"
VERSION_SPECIFIC: dict[str, str] = {
    "mkldnn::_linear_pointwise": _ONEDNN,
    "mkldnn::_convolution_pointwise": _ONEDNN,
    "mkldnn::_convolution_transpose_pointwise": _ONEDNN,
}


def test_every_formula_name_is_an_operator_of_this_torch():
    try:
        import torchvision  # noqa: F401  (registers the torchvision:: operators priced here)
        torchvision_ops = True
    except ImportError:
        torchvision_ops = False
    operators = {name.split(".")[0] for name in torch._C._dispatch_get_all_op_names()}
    # The TorchScript interpreter's own operators (prim::mkldnn_convolution), priced from graphs.
    operators |= {s.name for s in torch._C._jit_get_all_schemas() if s.name.startswith("prim::")}
    unknown = [name for name in torch.ops.util.formula_ops()
               if name not in operators and name not in VERSION_SPECIFIC
               and (torchvision_ops or not name.startswith("torchvision::"))]
    assert unknown == [], f"formula names that are no operator of torch {torch.__version__}: {unknown}"
    stale = [name for name in VERSION_SPECIFIC if name not in torch.ops.util.formula_ops()]
    assert stale == []
