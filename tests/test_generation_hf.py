"""torchutil.profile_generate on Hugging Face causal LMs built from configs (random weights,
nothing downloaded); skipped where transformers is not installed.

Oracle: closed forms from the config. A forward of T tokens per sequence at context L, batch B:
    matrix FLOPs = 2·B·T·(the layers' matrix parameters) + 2·B·d·V (the LM head on the last
                   position: generate's logits_to_keep=1) + layers · 4·B·H·T·K·hd (attention over
                   K keys: L+T with a DynamicCache, and with a StaticCache its max_cache_len in
                   decode steps, the prompt in the prefill)
                   + Llama's RoPE frequency product inv_freq x positions, 2·(hd/2)·T;
weights = the parameters' bytes; KV bytes per position = 2·layers·kv_heads·hd·4·B.
"""
from __future__ import annotations

import pytest
import torch

import torchutil

transformers = pytest.importorskip("transformers")

FP32 = 4
QUICK = dict(warmup=1, iters=2, peak_flops=1e12, loop_repeats=1)


def llama(**overrides):
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                      max_position_embeddings=128, bos_token_id=1, eos_token_id=2,
                                      pad_token_id=0, **overrides)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval(), config


def gpt2():
    config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=128,
                                     bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval(), config


def llama_forms(c):
    d, f, hd = c.hidden_size, c.intermediate_size, c.hidden_size // c.num_attention_heads
    h, kv, layers, vocab = c.num_attention_heads, c.num_key_value_heads, c.num_hidden_layers, c.vocab_size
    per_layer = d * h * hd + 2 * d * kv * hd + h * hd * d + 3 * d * f
    params = layers * (per_layer + 2 * d) + d + 2 * vocab * d
    return dict(per_layer=per_layer, params=params, heads=h, hd=hd, layers=layers, d=d, vocab=vocab,
                kv=2 * layers * kv * hd * FP32, rope=True)


def gpt2_forms(c):
    d, layers, vocab, h = c.n_embd, c.n_layer, c.vocab_size, c.n_head
    per_layer = 12 * d * d
    params = layers * (per_layer + 9 * d + 4 * d) + 2 * d + vocab * d + c.n_positions * d
    return dict(per_layer=per_layer, params=params, heads=h, hd=d // h, layers=layers, d=d, vocab=vocab,
                kv=2 * layers * d * FP32, rope=False)


def matrix_flops(forms, batch, tokens, keys):
    f = forms
    return (2 * batch * tokens * f["layers"] * f["per_layer"] + 2 * batch * f["d"] * f["vocab"]
            + f["layers"] * 4 * batch * f["heads"] * tokens * keys * f["hd"]
            + (2 * (f["hd"] // 2) * tokens if f["rope"] else 0))


@pytest.mark.parametrize("name, cache", [("llama", "dynamic"), ("llama", "static"), ("gpt2", "dynamic")])
def test_hf_flops_bytes_and_loop(name, cache):
    model, config = llama() if name == "llama" else gpt2()
    forms = llama_forms(config) if name == "llama" else gpt2_forms(config)
    batch, prompt, new = 2, 6, 5
    ids = torch.randint(3, config.vocab_size, (batch, prompt))
    result = torchutil.profile_generate(model, ids, new, cache=cache, steps="all", **QUICK)
    max_len = prompt + new
    assert result.parameters == forms["params"]
    assert result.weight_bytes == forms["params"] * FP32
    assert result.kv_bytes_per_token == forms["kv"] * batch
    # The prefill attends over the prompt (transformers slices an empty StaticCache to it).
    assert result.prefill_row.matrix_flops == matrix_flops(forms, batch, prompt, prompt)
    assert [r.context for r in result.decode] == list(range(prompt, prompt + new - 1))
    q_and_out = forms["layers"] * 2 * batch * forms["heads"] * forms["hd"] * FP32  # q and the output
    for r in result.decode:
        assert r.kv_read_bytes == forms["kv"] * batch * r.context
        assert r.analytic_flops == 2 * forms["params"] * batch
        if cache == "dynamic":
            # SDPA over the context and the new token, K and V read once per KV head (enable_gqa)
            assert r.matrix_flops == matrix_flops(forms, batch, 1, r.context + 1), r.context
            assert r.attention_bytes == r.kv_read_bytes + r.kv_write_bytes + q_and_out
        else:
            # SDPA over all max_cache_len positions with a boolean mask [B, 1, 1, max_len]; with a
            # mask transformers repeats K and V to every query head (4 = 2 x the 2 KV heads)
            assert r.matrix_flops == matrix_flops(forms, batch, 1, max_len), r.context
            heads_per_kv = config.num_attention_heads // config.num_key_value_heads
            mask = forms["layers"] * batch * max_len  # one byte per key, each layer
            assert r.attention_bytes == heads_per_kv * forms["kv"] * batch * max_len + q_and_out + mask
    assert result.loop_seconds > result.loop_first_token_seconds > 0
    assert result.cache == cache


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_hf_profiled_generation_equals_generate(cache):
    # Oracle: transformers' own generate(). Every profiled forward was rewound, so the tokens of
    # the generation profile_generate steps through are generate's greedy tokens.
    model, config = llama()
    ids = torch.randint(3, config.vocab_size, (2, 4))
    with torch.inference_mode():
        expected = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, min_new_tokens=5,
                                  do_sample=False, pad_token_id=0)[:, 4:]
    result = torchutil.profile_generate(model, ids, 5, cache=cache, steps="all", **QUICK)
    assert torch.equal(result.tokens, expected)
    assert torch.equal(result.loop_tokens, expected) and result.loop_tokens_equal


def test_hf_errors():
    model, config = llama()
    ids = torch.randint(3, config.vocab_size, (1, 4))
    with pytest.raises(ValueError, match="cache must be 'dynamic' or 'static'.*got 'paged'"):
        torchutil.profile_generate(model, ids, 2, cache="paged")
    with pytest.raises(ValueError, match="max_cache_len must hold prompt \\+ max_new_tokens = 6 positions, got 5"):
        torchutil.profile_generate(model, ids, 2, cache="static", max_cache_len=5)


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_hf_generation_is_bounded_by_the_trained_positions(cache):
    """prompt + max_new_tokens beyond max_position_embeddings (128) is refused before a cache is
    made (the report's 10**9 ran on; a static cache would allocate that many positions)."""
    model, config = llama()
    ids = torch.randint(3, config.vocab_size, (1, 4))
    for new in (125, 10**6):
        with pytest.raises(ValueError, match=f"prompt \\+ max_new_tokens = {4 + new:,} positions exceed the model's "
                                             "max_position_embeddings \\(128\\)"):
            torchutil.profile_generate(model, ids, new, cache=cache)


def test_an_object_with_config_and_generate_is_not_taken_for_hugging_face():
    class Fake(torch.nn.Module):
        config = object()

        def generate(self):
            pass

    with pytest.raises(ValueError, match="its .config is a object, not a transformers PretrainedConfig"):
        torchutil.profile_generate(Fake(), torch.zeros(1, 3, dtype=torch.long), 2)


@pytest.mark.cuda
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_hf_steps_replay_as_cuda_graphs(cache):
    # On a GPU the prefill and every decode step capture: one CUDA graph per profiled step,
    # replayed with the cache put back before each replay, and the counts are the CPU's.
    model, config = llama()
    model = model.cuda()
    forms = llama_forms(config)
    batch, prompt, new = 2, 6, 5
    ids = torch.randint(3, config.vocab_size, (batch, prompt), device="cuda")
    result = torchutil.profile_generate(model, ids, new, cache=cache, steps="all", warmup=2, iters=5)
    for row, prof in zip(result.rows, [result.prefill, *result.decode_profiles]):
        assert row.timing_mode == "cuda_graph", (row.phase, row.context, prof.timing_note)
        assert row.seconds > 0 and row.mbu > 0
    keys = [prompt + new if cache == "static" else r.context + 1 for r in result.decode]
    assert [r.matrix_flops for r in result.decode] == [matrix_flops(forms, batch, 1, k) for k in keys]
    assert result.peak_bytes_per_second > 0 and result.loop_seconds > 0


@pytest.mark.parametrize("build", [llama, gpt2], ids=["llama", "gpt2"])
def test_our_calls_use_the_cache_argument_the_installed_transformers_takes(build, caplog):
    """transformers 5.2x renamed past_key_values to cache and warns (a logger warning, and a
    FutureWarning from generate's deprecate_kwarg) where the old name is passed: neither may come
    from profile_generate's own calls, with the installed transformers or a newer one
    (PYTHONPATH=/tmp/tf525 runs this file against 5.25)."""
    import logging
    import warnings

    model, config = build()
    ids = torch.randint(3, config.vocab_size, (1, 5))
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="transformers"):
        warnings.filterwarnings("error", category=FutureWarning)
        warnings.filterwarnings("error", category=DeprecationWarning, module="transformers")
        warnings.filterwarnings("error", message=".*deprecat.*")
        torchutil.profile_generate(model, ids, 3, **QUICK)
    deprecated = [r.getMessage() for r in caplog.records if "deprecat" in r.getMessage()]
    assert not deprecated, deprecated
