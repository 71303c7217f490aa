"""torchutil.profile_generate on small decoder-only models written here (no transformers needed).

Oracles: closed forms written in this file from the models' dimensions. A forward of T tokens per
sequence at context L (tokens already in the KV cache) over a batch B does
    matrix FLOPs = 2·B·T·(parameters of the layers' matrices) + 2·B·d·V (the LM head, last
                   position only) + layers · 4·B·H·T·(L+T)·hd (attention's two products over
                   every key, FlopCounterMode's convention: causal masks are not discounted);
its weights are the parameters' bytes, its KV cache holds 2·layers·kv_heads·hd·4 bytes per
position and sequence, and its attention op reads q, K and V of L+T positions and writes its
output. A mixture-of-experts layer runs k of its E experts per token: 2·k·(expert parameters)
per token, and at batch 1 the bytes of k experts' weights, where serving engines' analytic
2·parameters counts all E.
"""
from __future__ import annotations

import csv
import math
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchutil

FP32 = 4
PEAK = dict(peak_flops=1e12)          # skips the CPU's timed GEMM; the bandwidth is still measured
QUICK = dict(warmup=1, iters=2, **PEAK)


class KVCache:
    """K and V of each layer, [B, kv_heads, S, hd], grown by concatenation."""

    def __init__(self, layers: int):
        self.k: list[torch.Tensor | None] = [None] * layers
        self.v: list[torch.Tensor | None] = [None] * layers

    def length(self) -> int:
        return 0 if self.k[0] is None else self.k[0].shape[2]

    def update(self, i, k, v):
        if self.k[i] is not None:
            k, v = torch.cat([self.k[i], k], 2), torch.cat([self.v[i], v], 2)
        self.k[i], self.v[i] = k, v
        return k, v

    def rewind(self, n: int) -> None:
        self.k = [None if t is None or n == 0 else t[:, :, :n] for t in self.k]
        self.v = [None if t is None or n == 0 else t[:, :, :n] for t in self.v]


class Attention(nn.Module):
    def __init__(self, d, heads, kv_heads, bias):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.q = nn.Linear(d, heads * self.hd, bias=bias)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=bias)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=bias)
        self.o = nn.Linear(heads * self.hd, d, bias=bias)

    def forward(self, x, cache, i):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv, self.hd).transpose(1, 2)
        k, v = cache.update(i, k, v)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1, enable_gqa=self.kv != self.h)
        return self.o(y.transpose(1, 2).reshape(b, t, self.h * self.hd))


class SwiGLU(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False), nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """Top-k routing over E SwiGLU experts, each token's outputs summed with its router weights."""

    def __init__(self, d, f, experts, k):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d, f) for _ in range(experts))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.router(flat).softmax(-1).topk(self.k, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel():
                out.index_add_(0, token, expert(flat[token]) * weights[token, slot, None])
        return out.view_as(x)


class Block(nn.Module):
    def __init__(self, style, d, heads, kv_heads, f, experts, k):
        super().__init__()
        gpt2 = style == "gpt2"
        norm = nn.LayerNorm if gpt2 else nn.RMSNorm
        self.norm1, self.norm2 = norm(d), norm(d)
        self.attn = Attention(d, heads, kv_heads, bias=gpt2)
        if gpt2:
            self.mlp = nn.Sequential(nn.Linear(d, f), nn.GELU(), nn.Linear(f, d))
        else:
            self.mlp = MoE(d, f, experts, k) if style == "moe" else SwiGLU(d, f)

    def forward(self, x, cache, i):
        x = x + self.attn(self.norm1(x), cache, i)
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """A decoder-only LM: "llama" (RMSNorm, no RoPE, GQA, SwiGLU, untied head), "gpt2" (learned
    positions, LayerNorm, biases, GELU, head tied to the embedding) or "moe" (llama with MoE MLPs)."""

    def __init__(self, style="llama", d=32, layers=2, heads=4, kv_heads=2, f=48, vocab=50, positions=64,
                 experts=4, k=2):
        super().__init__()
        kv_heads = heads if style == "gpt2" else kv_heads   # GPT-2: multi-head attention
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(positions, d) if style == "gpt2" else None
        self.blocks = nn.ModuleList(Block(style, d, heads, kv_heads, f, experts, k) for _ in range(layers))
        self.norm = nn.LayerNorm(d) if style == "gpt2" else nn.RMSNorm(d)
        self.head = None if style == "gpt2" else nn.Linear(d, vocab, bias=False)

    def forward(self, tokens, cache):
        start = cache.length()
        x = self.embed(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(start, start + tokens.shape[1]))
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i)
        x = self.norm(x[:, -1:])
        return self.head(x) if self.head is not None else F.linear(x, self.embed.weight)


def closed_forms(style, d=32, layers=2, heads=4, kv_heads=2, f=48, vocab=50, positions=64, experts=4, k=2):
    """(parameters, matrix parameters a token multiplies, KV bytes per position and sequence,
    heads, head dim) of TinyLM(style, ...), from its dimensions."""
    hd = d // heads
    kv_heads = heads if style == "gpt2" else kv_heads
    attn = d * heads * hd + 2 * d * kv_heads * hd + heads * hd * d
    if style == "gpt2":
        per_token = attn + 2 * d * f
        params = layers * (per_token + (heads + 2 * kv_heads) * hd + d + f + d + 4 * d) + 2 * d + vocab * d + positions * d
    elif style == "moe":
        per_token = attn + d * experts + k * 3 * d * f
        params = layers * (attn + d * experts + experts * 3 * d * f + 2 * d) + d + 2 * vocab * d
    else:
        per_token = attn + 3 * d * f
        params = layers * (per_token + 2 * d) + d + 2 * vocab * d
    kv = 2 * layers * kv_heads * hd * FP32
    return params, layers * per_token, kv, heads, hd


def matrix_flops(style, batch, tokens, context, layers=2, **dims):
    _, per_token, _, heads, hd = closed_forms(style, layers=layers, **dims)
    d, vocab = dims.get("d", 32), dims.get("vocab", 50)
    return (2 * batch * tokens * per_token + 2 * batch * d * vocab
            + layers * 4 * batch * heads * tokens * (context + tokens) * hd)


def run(style, batch=2, prompt=5, new=6, steps="all", **kwargs):
    torch.manual_seed(0)
    model = TinyLM(style).eval()
    ids = torch.randint(0, 50, (batch, prompt))
    cache = KVCache(len(model.blocks))
    return torchutil.profile_generate(model, ids, new, step=model, cache=cache, rewind=KVCache.rewind, steps=steps,
                                      loop_repeats=1, **QUICK, **kwargs)


@pytest.mark.parametrize("style", ["llama", "gpt2", "moe"])
def test_prefill_and_decode_flops_equal_closed_form(style):
    batch, prompt, new = 2, 5, 6
    result = run(style, batch, prompt, new)
    assert result.prefill_row.matrix_flops == matrix_flops(style, batch, prompt, 0)
    assert [r.context for r in result.decode] == list(range(prompt, prompt + new - 1))
    for r in result.decode:
        assert r.matrix_flops == matrix_flops(style, batch, 1, r.context), r.context
        assert r.flops > r.matrix_flops  # norms, activations, softmax: vector FLOPs
    params = closed_forms(style)[0]
    assert result.parameters == params
    assert all(r.analytic_flops == 2 * params * batch * r.tokens for r in result.rows)


@pytest.mark.parametrize("style", ["llama", "gpt2", "moe"])
def test_decode_bytes_are_weights_and_kv_cache(style):
    batch, prompt = 2, 5
    result = run(style, batch, prompt, 4)
    params, _, kv, heads, hd = closed_forms(style)
    layers = 2
    assert result.weight_bytes == params * FP32  # the tied GPT-2 head counted once
    assert result.kv_bytes_per_token == kv * batch
    for r in result.rows:
        assert r.weight_bytes == params * FP32
        assert r.kv_read_bytes == kv * batch * r.context
        assert r.kv_write_bytes == kv * batch * r.tokens
        assert r.analytic_bytes == r.weight_bytes + r.kv_read_bytes + r.kv_write_bytes
        # The attention op reads q and K, V of context + tokens positions, writes its output:
        # the engine's bytes there are exactly the KV read and write plus q and the output.
        q_and_out = layers * 2 * batch * heads * r.tokens * hd * FP32
        assert r.attention_bytes == r.kv_read_bytes + r.kv_write_bytes + q_and_out
        assert r.bytes > r.weight_bytes  # every weight is read, and activations move too


def test_moe_decode_reads_only_the_routed_experts():
    # At batch 1 a decode token goes to k = 2 of E = 4 experts per layer: the engine counts
    # those experts' weights (and activations), the analytic figure all four.
    result = run("moe", batch=1, prompt=4, new=3, trace=False)
    d, f, layers, k = 32, 48, 2, 2
    for prof in result.decode_profiles:
        expert_mm = sum(o.bytes for o in prof.ops if o.op == "aten::mm" and ".experts." in o.module)
        assert expert_mm == layers * k * (3 * d * f + 3 * d + 3 * f) * FP32
        expert_flops = sum(o.matrix_flops for o in prof.ops if ".experts." in o.module)
        assert expert_flops == layers * k * 2 * 3 * d * f
    assert result.decode[0].analytic_bytes > result.decode[0].weight_bytes >= layers * 4 * 3 * d * f * FP32


def test_rates_follow_from_the_profiles():
    result = run("llama", batch=2, prompt=5, new=4)
    for r, prof in zip(result.rows, [result.prefill, *result.decode_profiles]):
        assert r.seconds == prof.seconds > 0
        assert r.mfu == prof.utilization == pytest.approx(r.flops / r.seconds / prof.peak_flops_per_second)
        assert r.mbu == prof.bandwidth_utilization
        assert r.analytic_mfu == pytest.approx(r.analytic_flops / r.seconds / result.peak_flops_per_second)
        assert r.analytic_mbu == pytest.approx(r.analytic_bytes / r.seconds / result.peak_bytes_per_second)
        assert r.tokens_per_second == pytest.approx(r.batch * r.tokens / r.seconds)
    assert result.profiled_seconds == pytest.approx(sum(r.seconds for r in result.rows))
    assert not result.decode_estimated
    assert result.loop_seconds > 0 and result.loop_first_token_seconds > 0
    assert result.loop_tokens_per_second == pytest.approx(2 * 4 / result.loop_seconds)
    assert result.loop_slowdown == pytest.approx(result.loop_seconds / result.profiled_seconds)


def test_geometric_steps_and_interpolated_decode_time():
    result = run("llama", batch=1, prompt=3, new=12, steps="geometric")
    assert [r.context - 3 for r in result.decode] == [0, 1, 2, 4, 8, 10]
    assert result.decode_estimated
    contexts = [r.context for r in result.decode]
    seconds = [r.seconds for r in result.decode]
    import numpy as np
    expected = result.prefill.seconds + float(np.interp(np.arange(3, 14), contexts, seconds).sum())
    assert result.profiled_seconds == pytest.approx(expected)
    chosen = run("llama", batch=1, prompt=3, new=12, steps=[7, 2])
    assert [r.context for r in chosen.decode] == [5, 10]


def test_each_profiled_step_leaves_the_generation_unchanged():
    # Greedy tokens of the profiled generation equal those of a plain loop: every profiled
    # forward was rewound, so the cache each later step sees is the real one.
    torch.manual_seed(0)
    model = TinyLM("llama").eval()
    ids = torch.randint(0, 50, (2, 5))
    seen = []

    def step(tokens, cache):
        seen.append((tokens.shape[1], cache.length()))
        return model(tokens, cache)

    result = torchutil.profile_generate(model, ids, 4, step=step, cache=KVCache(2), rewind=KVCache.rewind,
                                        steps="all", loop_repeats=1, **QUICK)
    # every forward ran at the context it was meant for: prefill at 0, decode step s at 5 + s
    assert {(t, c) for t, c in seen} == {(5, 0), (1, 5), (1, 6), (1, 7)}
    # and the tokens are those of a greedy loop written here, on a fresh cache
    cache, expected = KVCache(2), []
    with torch.inference_mode():
        token = model(ids, cache)[:, -1].argmax(-1, keepdim=True)
        for _ in range(4):
            expected.append(token)
            token = model(token, cache)[:, -1].argmax(-1, keepdim=True)
    assert torch.equal(result.tokens, torch.cat(expected, 1)) and result.loop_tokens_equal


def test_csv_and_json(tmp_path):
    result = run("gpt2", batch=1, prompt=4, new=3)
    path = tmp_path / "gen.csv"
    result.to_csv(str(path))
    rows = list(csv.DictReader(open(path)))
    assert [r["phase"] for r in rows] == ["prefill", "decode", "decode"]
    assert float(rows[1]["kv_read_bytes"]) == result.decode[0].kv_read_bytes
    assert set(rows[0]) == {f.name for f in torchutil.GenerationRow.__dataclass_fields__.values()}
    assert '"loop_slowdown"' in result.to_json()
    assert "decode" in str(result)


def test_plot(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    results = [run("llama", batch=b, prompt=4, new=3) for b in (1, 2)]
    path = tmp_path / "gen.png"
    torchutil.plot_generation(results, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        results[0].plot(str(tmp_path / "no.png"))


@pytest.mark.parametrize("kwargs, message", [
    (dict(input_ids=torch.zeros(5, dtype=torch.long)), "2-D integer tensor"),
    (dict(input_ids=torch.zeros(1, 5)), "torch.float32"),
    (dict(max_new_tokens=0), "max_new_tokens must be a positive int, got 0"),
    (dict(steps=[0, 9]), r"steps must be distinct ints in 0\.\.2"),
    (dict(steps="every"), "'every'"),
    (dict(rewind=None), "rewind= a function"),
    (dict(kv_bytes_per_token=-1), "kv_bytes_per_token must be a finite positive number, got -1"),
    (dict(kv_bytes_per_token=math.inf), "kv_bytes_per_token must be a finite positive number, got inf"),
    (dict(kv_bytes_per_token=True), "kv_bytes_per_token must be a finite positive number, got True"),
    (dict(steps=[]), r"steps=\[\] measures no decode step of the 3: the prefill alone would stand for the whole "
                     r"generation \(profiled_seconds, loop_slowdown\); give at least one step of 0\.\.2"),
    (dict(max_new_tokens=10**9), "max_new_tokens must be at most 1,048,576 .*, got 1,000,000,000"),
])
def test_bad_arguments_are_named(kwargs, message):
    model = TinyLM("llama").eval()
    args = dict(input_ids=torch.zeros(1, 3, dtype=torch.long), max_new_tokens=4, step=model, cache=KVCache(2),
                rewind=KVCache.rewind)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        torchutil.profile_generate(model, **args)


def test_steps_may_be_empty_when_there_is_no_decode_step():
    """max_new_tokens=1 is the prefill alone: steps=[] is then exact, not an estimate."""
    model = TinyLM("llama").eval()
    result = torchutil.profile_generate(model, torch.zeros(1, 3, dtype=torch.long), 1, step=model, cache=KVCache(2),
                                        rewind=KVCache.rewind, steps=[], kv_bytes_per_token=64, **QUICK)
    assert result.decode == [] and not result.decode_estimated


def test_unknown_option_and_hf_without_step():
    model = TinyLM("llama").eval()
    ids = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="no option 'itres'"):
        torchutil.profile_generate(model, ids, 2, step=model, cache=KVCache(2), rewind=KVCache.rewind, itres=3)
    with pytest.raises(ValueError, match="Hugging Face causal LM"):
        torchutil.profile_generate(model, ids, 2)


class StaticKV:
    """A preallocated cache written in place at a position: its tensors never grow."""

    def __init__(self, layers=2, batch=1, kv_heads=2, positions=16, hd=8):
        self.k = [torch.zeros(batch, kv_heads, positions, hd) for _ in range(layers)]
        self.v = [torch.zeros(batch, kv_heads, positions, hd) for _ in range(layers)]
        self.pos = 0

    def length(self):
        return self.pos

    def update(self, i, k, v):
        end = self.pos + k.shape[2]
        self.k[i][:, :, self.pos:end], self.v[i][:, :, self.pos:end] = k, v
        if i == len(self.k) - 1:
            self.pos = end
        return self.k[i][:, :, :end], self.v[i][:, :, :end]

    def rewind(self, n):
        self.pos = n


def test_preallocated_cache_needs_kv_bytes_per_token():
    model = TinyLM("llama").eval()
    ids = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="did not grow by a decode step.*pass kv_bytes_per_token="):
        torchutil.profile_generate(model, ids, 3, step=model, cache=StaticKV(), rewind=StaticKV.rewind,
                                   loop_repeats=1, **QUICK)
    kv = closed_forms("llama")[2]
    result = torchutil.profile_generate(model, ids, 3, step=model, cache=StaticKV(), rewind=StaticKV.rewind,
                                        kv_bytes_per_token=kv, loop_repeats=1, **QUICK)
    assert [r.kv_read_bytes for r in result.decode] == [kv * 3, kv * 4]
    assert result.decode[1].matrix_flops == matrix_flops("llama", 1, 1, 4)
