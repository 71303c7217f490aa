"""torchutil's FLOP count beside FlopCounterMode, the closed form and other counters, for the
models where counters disagree (RNNs on oneDNN, the Transformer encoder's fast and nested
paths, GPT-2-like attention):

    python benchmarks/results/peer_flops.py [--device cpu]

Matrix FLOPs (2 x multiply-accumulate) of one forward in eval. FlopCounterMode counts matrix
FLOPs only, so that is the column compared; "closed form" is the model's own arithmetic (RNN:
2*T*B*G*H*(I + H) per layer and direction; attention: projections on the real tokens, the two
products on the padded length). fvcore, ptflops and thop count multiply-accumulates and are
shown doubled; each is skipped, with a line saying so, where it is not installed. GPT-2's
attention needs transformers (skipped likewise).
"""
from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

import torchutil


def rnn_case(cls, gates, bidirectional=False, layers=2, steps=32, batch=1, inputs=128, hidden=256):
    model = cls(inputs, hidden, num_layers=layers, bidirectional=bidirectional).eval()
    x = torch.randn(steps, batch, inputs)
    dirs = 2 if bidirectional else 1
    closed = sum(dirs * 2 * steps * batch * gates * hidden
                 * ((inputs if layer == 0 else dirs * hidden) + hidden) for layer in range(layers))
    name = f"{cls.__name__}({inputs}, {hidden}) x{layers}{' bi' if bidirectional else ''}"
    return name, model, (x,), {}, closed


def encoder_case(masked: bool, d=256, heads=8, ff=1024, layers=2, batch=4, length=64):
    layer = torch.nn.TransformerEncoderLayer(d, heads, ff, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=True).eval()
    x = torch.randn(batch, length, d)
    lengths = [length - 16 * i for i in range(batch)] if masked else [length] * batch
    mask = torch.tensor([[i >= n for i in range(length)] for n in lengths])
    tokens = sum(lengths)
    closed = layers * (2 * tokens * d * 4 * d + 2 * 2 * tokens * d * ff
                       + 2 * 2 * batch * length * length * d)
    name = "TransformerEncoder " + ("padding mask (nested)" if masked else "fast path")
    return name, model, (x,), {"src_key_padding_mask": mask}, closed


def gpt2_case(d=256, heads=8, length=128, batch=2):
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(n_embd=d, n_head=heads, n_layer=2, n_positions=length,
                        reorder_and_upcast_attn=True)
    model = GPT2Model(config).eval()
    ids = torch.randint(0, config.vocab_size, (batch, length))
    tokens = batch * length
    closed = config.n_layer * (2 * tokens * d * 4 * d + 2 * 2 * tokens * d * 4 * d
                               + 2 * 2 * batch * length * length * d)
    return "GPT-2 (2 layers, reorder_and_upcast_attn)", model, (ids,), {}, closed


def torchutil_flops(model, args, kwargs) -> float:
    with torch.inference_mode(), torchutil.Profiler(peak_flops=1e12) as prof:
        model(*args, **kwargs)
    r = prof.result
    note = f" (unknown: {', '.join(r.unknown_ops)})" if r.unknown_ops else ""
    return r.matrix_flops, note


def flop_counter_flops(model, args, kwargs) -> float:
    with torch.inference_mode(), FlopCounterMode(display=False) as fcm:
        model(*args, **kwargs)
    return float(fcm.get_total_flops())


def peers() -> dict[str, Callable | None]:
    out: dict[str, Callable | None] = {}

    def fvcore(model, args, kwargs):
        from fvcore.nn import FlopCountAnalysis
        return 2.0 * FlopCountAnalysis(model, args).total()

    def ptflops(model, args, kwargs):
        from ptflops import get_model_complexity_info
        macs, _ = get_model_complexity_info(model, tuple(args[0].shape), as_strings=False,
                                            input_constructor=lambda _: dict(zip(["input"], args)),
                                            print_per_layer_stat=False)
        return 2.0 * macs

    def thop(model, args, kwargs):
        from thop import profile
        macs, _ = profile(model, inputs=args, verbose=False)
        return 2.0 * macs

    for name, fn in (("fvcore", fvcore), ("ptflops", ptflops), ("thop", thop)):
        out[name] = fn if importlib.util.find_spec(name) is not None else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args()
    torch.manual_seed(0)
    cases = [rnn_case(torch.nn.LSTM, 4), rnn_case(torch.nn.LSTM, 4, bidirectional=True),
             rnn_case(torch.nn.GRU, 3), rnn_case(torch.nn.RNN, 1),
             encoder_case(masked=False), encoder_case(masked=True)]
    if importlib.util.find_spec("transformers") is not None:
        cases.append(gpt2_case())
    else:
        print("skipped: GPT-2 attention (transformers is not installed)")
    available = peers()
    for name, fn in available.items():
        if fn is None:
            print(f"skipped: {name} (not installed)")
    columns = ["torchutil", "FlopCounterMode"] + [n for n, f in available.items() if f]
    print()
    print("| model | closed form | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 2) + "|")
    for name, model, args, kwargs, closed in cases:
        ours, note = torchutil_flops(model, args, kwargs)
        cells = [f"{ours:.4g}{note}", f"{flop_counter_flops(model, args, kwargs):.4g}"]
        for peer in columns[2:]:
            try:
                cells.append(f"{available[peer](model, args, kwargs):.4g}")
            except Exception as e:  # a peer that cannot trace the model
                cells.append(f"fails: {type(e).__name__}")
        print(f"| {name} | {closed:.4g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
