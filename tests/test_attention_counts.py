"""Attention counted three ways, grouped-query attention and mixture-of-experts (issue 22), each
against a closed form written here from the op's definition:

* nominal FLOPs (`flops`, `matrix_flops`; what `utilization` uses): the full Lq x Lk score
  matrix, as FlopCounterMode counts it: 2·B·H·Lq·Lk·E for QK^T, 2·B·H·Lq·Lk·Ev for PV (matrix),
  5·B·H·Lq·Lk for the softmax (vector);
* useful FLOPs (`useful_flops`): the same over the scores a causal mask keeps. PyTorch's
  is_causal aligns the mask top-left (query i keeps keys 0..i): L(L+1)/2 of the L·S scores for
  L <= S, S(S+1)/2 + (L - S)·S for L > S. A mask passed as a tensor is data, not read: useful
  equals nominal, as it does for eager attention (matmul, masked_fill, softmax, matmul);
* executed (`hw_tensor_flops`, counters="flops"): on a GPU only, between the two for a flash
  kernel that skips the blocks its mask discards (a cuda-marked test).
"""
from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

import torchutil
from conftest import cpu_and_cuda

PEAK = 1e12  # any positive peak: keeps the timed CPU GEMM out of these tests


def count(fn, *args, device="cpu", **kwargs):
    with torch.inference_mode(), torchutil.Profiler(device=device, peak_flops=PEAK) as prof:
        fn(*args, **kwargs)
    return prof.result


def attention(bh, lq, lk, e, ev, kept=None):
    """(matrix, vector, useful) FLOPs of bh attentions of lq queries over lk keys, of which
    `kept` scores (all by default) survive the mask."""
    kept = lq * lk if kept is None else kept
    matrix, vector = 2 * bh * lq * lk * (e + ev), 5 * bh * lq * lk
    return matrix, vector, bh * kept * (2 * e + 2 * ev + 5)


def top_left_kept(lq, lk):
    return lq * (lq + 1) // 2 if lq <= lk else lk * (lk + 1) // 2 + (lq - lk) * lk


def the_one_row(result, op):
    assert result.unknown_ops == {}, result.unknown_ops
    assert [(r.op, r.calls) for r in result.ops] == [(op, 1)], result.ops
    return result.ops[0]


@pytest.mark.parametrize("seed", range(6))
def test_causal_sdpa_counts_the_full_matrix_and_what_the_mask_keeps(seed):
    rng = random.Random(f"causal{seed}")
    b, h, e, ev = rng.randint(1, 3), rng.randint(1, 4), rng.choice([8, 16]), rng.choice([8, 16])
    lq = rng.randint(1, 24)
    lk = lq if seed < 2 else rng.randint(1, 24)  # square (self-attention), then any shape
    q, k, v = torch.randn(b, h, lq, e), torch.randn(b, h, lk, e), torch.randn(b, h, lk, ev)
    res = count(F.scaled_dot_product_attention, q, k, v, is_causal=True)
    matrix, vector, useful = attention(b * h, lq, lk, e, ev, top_left_kept(lq, lk))
    row = the_one_row(res, "aten::scaled_dot_product_attention")
    assert (row.matrix_flops, row.vector_flops, row.useful_flops) == (matrix, vector, useful)
    assert (res.matrix_flops, res.flops, res.useful_flops) == (matrix, matrix + vector, useful)
    assert math.isnan(res.hw_tensor_flops)  # the third count needs a GPU's counters
    # The same call without the mask: the same nominal FLOPs, all of them useful.
    full = count(F.scaled_dot_product_attention, q, k, v)
    assert (full.flops, full.useful_flops) == (matrix + vector, matrix + vector)


def test_causal_self_attention_keeps_about_half():
    """Square causal attention keeps L(L+1)/2 of L^2 scores: half, plus the diagonal."""
    q = torch.randn(1, 2, 64, 16)
    res = count(F.scaled_dot_product_attention, q, q, q, is_causal=True)
    assert res.useful_flops / res.flops == pytest.approx((64 + 1) / (2 * 64))


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_masked_sdpa_counts_every_score_as_useful(kind):
    """A causal mask passed as a tensor is data: counts are shape functions and do not read it,
    so useful = nominal (while is_causal=True on the same shapes is discounted)."""
    b, h, lq, lk, e = 2, 3, 9, 13, 8
    q, k, v = torch.randn(b, h, lq, e), torch.randn(b, h, lk, e), torch.randn(b, h, lk, e)
    keep = torch.ones(lq, lk, dtype=torch.bool).tril()
    mask = keep if kind == "bool" else torch.zeros(lq, lk).masked_fill(~keep, float("-inf"))
    res = count(F.scaled_dot_product_attention, q, k, v, attn_mask=mask)
    matrix, vector, _ = attention(b * h, lq, lk, e, e)
    row = the_one_row(res, "aten::scaled_dot_product_attention")
    assert (row.matrix_flops, row.vector_flops, row.useful_flops) == (matrix, vector, matrix + vector)
    assert res.useful_flops == res.flops
    causal = count(F.scaled_dot_product_attention, q, k, v, is_causal=True)
    assert causal.flops == res.flops
    assert causal.useful_flops == attention(b * h, lq, lk, e, e, top_left_kept(lq, lk))[2]


def test_eager_causal_attention_counts_every_score_as_useful():
    """Attention written out (GPT-2's eager path): the matmuls compute every score and the mask
    is a tensor applied after them, so useful = nominal; the closed form is that of SDPA plus the
    scaling and masked_fill, 1 per score each."""
    b, h, lq, lk, e, ev = 2, 4, 7, 11, 16, 8
    q, k, v = torch.randn(b, h, lq, e), torch.randn(b, h, lk, e), torch.randn(b, h, lk, ev)
    keep = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)

    def eager(q, k, v):
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(e)
        return scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v

    res = count(eager, q, k, v)
    matrix, vector, _ = attention(b * h, lq, lk, e, ev)
    scores = b * h * lq * lk
    assert res.unknown_ops == {}, res.unknown_ops
    assert res.matrix_flops == matrix
    assert res.vector_flops == vector + 2 * scores  # the softmax; the division, masked_fill
    assert res.useful_flops == res.flops


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_sdpa_counts_every_query_head(causal, device):
    """enable_gqa=True with Hq = 4 Hkv: each query head attends over all keys of its group's
    key/value head, so the count is that of Hq heads, with Hkv-headed keys and values."""
    b, hq, hkv, lq, lk, e = 2, 8, 2, 6, 10, 16
    q = torch.randn(b, hq, lq, e, device=device)
    k, v = torch.randn(b, hkv, lk, e, device=device), torch.randn(b, hkv, lk, e, device=device)
    res = count(F.scaled_dot_product_attention, q, k, v, is_causal=causal, enable_gqa=True,
                device=device)
    kept = top_left_kept(lq, lk) if causal else None
    matrix, vector, useful = attention(b * hq, lq, lk, e, e, kept)
    row = the_one_row(res, "aten::scaled_dot_product_attention")
    assert (row.matrix_flops, row.vector_flops, row.useful_flops) == (matrix, vector, useful)
    assert row.bytes == 4 * (q.numel() + k.numel() + v.numel() + b * hq * lq * e)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_mixture_of_experts_prices_its_routed_experts(device):
    """A small MoE layer as Mixtral's grouped_mm path runs it: a router (linear, softmax, top-k),
    the (token, expert) rows sorted by expert, each expert's up and down projections in one
    _grouped_mm each with the router's cumulative counts as offsets. Matrix FLOPs: the router's
    2·T·D·G and 2·(T·k)·D·F per projection (every routed row through one expert); the router's
    topk and sort stay reported, as ops with no formula. On CUDA _grouped_mm is one bfloat16
    kernel (Hopper and later), on the CPU one mm per group: the count is the same."""
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    tokens, d, f, experts, top_k = 12, 16, 32, 4, 2

    def randn(*shape):
        return torch.randn(*shape, device=device, dtype=dtype)

    x, router = randn(tokens, d), randn(experts, d)
    # Stored [experts, out, in] as nn.Linear keeps them, used transposed (column-major, as the
    # CUDA kernel wants its second operand).
    w_up, w_down = randn(experts, f, d).transpose(1, 2), randn(experts, d, f).transpose(1, 2)

    def moe(x):
        weights, chosen = F.linear(x, router).softmax(-1).topk(top_k, dim=-1)
        order = chosen.flatten().argsort(stable=True)
        counts = torch.histc(chosen.flatten().float(), bins=experts, min=0, max=experts - 1)
        offs = counts.cumsum(0).to(torch.int32)
        rows = x[order // top_k]
        h = F.silu(torch._grouped_mm(rows, w_up, offs=offs))
        y = torch._grouped_mm(h, w_down, offs=offs) * weights.flatten()[order, None]
        return torch.zeros_like(x).index_add_(0, order // top_k, y)

    res = count(moe, x, device=device)
    routed = tokens * top_k
    grouped = [r for r in res.ops if r.op == "aten::_grouped_mm"]
    assert [(r.calls, r.matrix_flops) for r in grouped] == [(2, 2 * (2 * routed * d * f))]
    assert res.matrix_flops == 2 * tokens * d * experts + 2 * (2 * routed * d * f)
    assert {"aten::topk", "aten::sort"} <= set(res.unknown_ops), res.unknown_ops
    assert res.useful_flops == res.flops


@pytest.mark.cuda
def test_the_tensor_cores_run_between_the_useful_and_the_nominal_flops():
    """On a GPU a flash kernel skips the blocks a causal mask discards: what its tensor cores
    execute (the GPU's counters) lies between the useful and the nominal matrix FLOPs. The
    lower-right causal bias (torch.nn.attention.bias) runs the CUDA flash kernel with its own
    bottom-right alignment, where Lq < Lk keeps Lq·Lk - Lq(Lq - 1)/2 scores."""
    from torch.nn.attention.bias import causal_lower_right

    b, h, e = 4, 8, 64
    for lq, lk, mask in [(1024, 1024, None), (256, 1024, causal_lower_right(256, 1024))]:
        q = torch.randn(b, h, lq, e, device="cuda", dtype=torch.float16)
        kv = torch.randn(b, h, lk, e, device="cuda", dtype=torch.float16)
        call = (lambda t: F.scaled_dot_product_attention(t, kv, kv, is_causal=True)) \
            if mask is None else (lambda t: F.scaled_dot_product_attention(t, kv, kv, attn_mask=mask))
        res = torchutil.profile(call, q, warmup=2, iters=3, counters="flops")
        kept = lq * lk - lq * (lq - 1) // 2  # bottom-right; for lq = lk the same as top-left
        nominal = 4 * b * h * lq * lk * e
        useful_matrix = 4 * b * h * kept * e
        assert res.matrix_flops == nominal
        assert res.useful_flops == attention(b * h, lq, lk, e, e, kept)[2]
        if res.counters_status.startswith("on"):
            assert useful_matrix * 0.99 <= res.hw_tensor_flops <= nominal * 1.01, (
                res.hw_tensor_flops, useful_matrix, nominal)


@pytest.mark.parametrize("op", ["_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                                "_scaled_dot_product_cudnn_attention"])
def test_the_cuda_backends_read_is_causal_where_their_schema_has_it(op):
    """The CUDA backends an eager SDPA runs, called on the CPU with meta tensors, by keyword as
    their schema (torch.ops.aten.<op>.default._schema) names the arguments: is_causal=True gives
    the causal discount, the same useful FLOPs as the composite (oracle: the closed form,
    L(L+1)/2 of the L² scores kept; the flash kernel's bottom-right alignment is the same for
    Lq = Lk), and is_causal=False none."""
    overload = getattr(torch.ops.aten, op).default
    names = [a.name for a in overload._schema.arguments]
    assert "is_causal" in names
    b, h, n, e = 2, 3, 16, 8
    q = torch.empty(b, h, n, e, device="meta")
    required = {"attn_bias": None, "compute_log_sumexp": False}
    kwargs = {k: v for k, v in required.items() if k in names}
    matrix, vector, useful = attention(b * h, n, n, e, e, kept=n * (n + 1) // 2)
    for causal in (True, False):
        r = count(lambda: overload(q, q, q, is_causal=causal, **kwargs), device="meta")
        assert (r.matrix_flops, r.vector_flops) == (matrix, vector), r.ops
        assert r.useful_flops == (useful if causal else matrix + vector)
    # The composite, eager on the CPU (real tensors), agrees.
    x = torch.randn(b, h, n, e)
    r = count(lambda: F.scaled_dot_product_attention(x, x, x, is_causal=True))
    assert r.useful_flops == useful
