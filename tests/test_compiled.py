"""torch.compile'd models, counted as their eager selves (docs/counting.md, "Compiled models").

Compiling on this CPU uses Inductor's C++ backend (g++): the models are tiny so that a compile
takes seconds.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torchutil
from nets import SmallNet


def test_an_eager_model_never_imports_dynamo():
    # Whether a model is compiled is asked of every Python model; nothing can be compiled before
    # torch._dynamo is imported, so asking must not import it (seconds on a first call).
    script = textwrap.dedent("""
        import sys, torch, torchutil
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        x = torch.randn(2, 8)
        torchutil.profile(m, x, warmup=1, iters=1, peak_flops=1e12)
        torchutil.profile(lambda t: m(t), x, warmup=1, iters=1, peak_flops=1e12)
        torch.ops.util.profile(m, x, warmup=1, iters=1)
        with torchutil.Profiler(m, peak_flops=1e12):
            m(x)
        print("torch._dynamo" in sys.modules)
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(torchutil.__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", out.stdout + out.stderr


# ---- compiled models count as their eager selves (Inductor's C++ backend on this CPU) -----------

PEAK = 1e12  # a given peak keeps the timed CPU GEMM out of the tests


def small_net_flops(n, h, w):
    """(matrix, vector) FLOPs of SmallNet on [n, 3, h, w], the closed form of the convention:
    the 3x3 convolution's and the Linear's 2·MACs; conv bias 1, batch norm (inference) 2, relu 1,
    adaptive pool 1 per element of the conv's output, the Linear's bias 1 per output."""
    positions = n * 8 * h * w
    return 2 * positions * 3 * 9 + 2 * n * 8 * 10, 5 * positions + n * 10


def rows(result):
    return sorted((o.op, o.module, o.calls, o.matrix_flops, o.vector_flops, o.bytes) for o in result.ops)


def compiles():
    """Graphs Dynamo has compiled in this process (torch._dynamo.utils.counters)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], counters["frames"]["total"]


@pytest.mark.slow
def test_compiled_cnn_counts_as_its_eager_self_against_the_closed_form():
    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.randn(2, 3, 10, 12)
    eager = torchutil.profile(net, x, warmup=1, iters=1, peak_flops=PEAK)
    compiled = torch.compile(net)
    first = torchutil.profile(compiled, x, warmup=1, iters=2, peak_flops=PEAK)
    matrix, vector = small_net_flops(2, 10, 12)
    assert (first.matrix_flops, first.vector_flops) == (matrix, vector)
    assert (eager.matrix_flops, eager.vector_flops) == (matrix, vector)
    # The same op table as the eager module's: ops, modules (the eager module's paths), calls,
    # FLOPs and nominal bytes.
    assert rows(first) == rows(eager)
    assert first.bytes == eager.bytes and first.unknown_ops == {}
    # The eager count under force_eager leaves the compiled code as it was: a second profile
    # (and its timed forwards) compiles nothing more.
    before = compiles()
    again = torchutil.profile(compiled, x, warmup=2, iters=3, peak_flops=PEAK)
    assert compiles() == before
    assert rows(again) == rows(eager)


def test_the_timed_forwards_run_the_compiled_code():
    # A backend that counts the calls of the code it compiled (aot_eager: no code generation, so
    # this runs in a second): every forward but the eager count runs the compiled code.
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    calls = []

    def counting(gm, example_inputs):
        def run(*args):
            calls.append(1)
            return gm(*args)

        return make_boxed_func(run)

    torch.manual_seed(0)
    net = SmallNet().eval()
    compiled = torch.compile(net, backend=aot_autograd(fw_compiler=counting))
    x = torch.randn(2, 3, 10, 12)
    result = torchutil.profile(compiled, x, warmup=3, iters=4, timing="eager", peak_flops=PEAK)
    assert (result.matrix_flops, result.vector_flops) == small_net_flops(2, 10, 12)
    assert len(calls) == 3 + 4  # the warm-ups (one of them counted as compiled code) and the timed



# ---- compiled flex_attention ------------------------------------------------------------------

B, H, T, D = 1, 2, 256, 16  # two 128-blocks a side: a causal mask computes 3 of 4 blocks


def causal(b, h, q, k):
    return q >= k


def documents(b, h, q, k):
    """Two documents of 96 and 160 tokens: a query sees its own document only."""
    return (q < 96) == (k < 96)


class FlexBlock(torch.nn.Module):
    """Projections around a compiled flex_attention: a module that calls a compiled function."""

    def __init__(self, attend):
        super().__init__()
        self.qkv = torch.nn.Linear(H * D, 3 * H * D)
        self.out = torch.nn.Linear(H * D, H * D)
        self.attend = attend

    def forward(self, x, block_mask):
        q, k, v = self.qkv(x).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
        y = self.attend(q, k, v, block_mask=block_mask)
        return self.out(y.transpose(1, 2).reshape(B, T, H * D))


def attention_matrix_flops():
    """The full score matrix, as the eager flex_attention computes it: Q·Kᵀ and P·V."""
    return 2 * B * H * T * T * D + 2 * B * H * T * T * D


@pytest.mark.slow
@pytest.mark.parametrize("mask", [causal, documents], ids=["causal", "documents"])
def test_compiled_flex_attention_counts_as_eager_against_the_closed_form(mask):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(0)
    block_mask = create_block_mask(mask, B, H, T, T, device="cpu")
    block = FlexBlock(flex_attention).eval()
    x = torch.randn(B, T, H * D)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
        eager = torchutil.profile(block, args=(x, block_mask), warmup=1, iters=1, peak_flops=PEAK)
    block.attend = torch.compile(flex_attention)
    compiled = torchutil.profile(block, args=(x, block_mask), warmup=1, iters=1, peak_flops=PEAK)
    projections = 2 * B * T * (H * D) * (3 * H * D) + 2 * B * T * (H * D) * (H * D)
    assert eager.matrix_flops == projections + attention_matrix_flops()
    assert compiled.matrix_flops == eager.matrix_flops
    assert (compiled.vector_flops, compiled.bytes) == (eager.vector_flops, eager.bytes)
    assert rows(compiled) == rows(eager)
