"""torch.compile'd models, counted as their eager selves (docs/counting.md, "Compiled models").

Compiling on this CPU uses Inductor's C++ backend (g++): the models are tiny so that a compile
takes seconds.
"""
from __future__ import annotations

import os
import re
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



# ---- Inductor's generated kernels, tied to the ops they fused (torchutil/_inductor.py) ------------

def test_module_paths_of_dynamo_module_stacks_are_the_eager_paths():
    from torchutil._inductor import _module_path

    class Node:
        def __init__(self, fqn):
            self.meta = {"nn_module_stack": {"k0": ("L['self']", object), "k": (fqn, object)}} if fqn else {}

    for fqn, path in [("L['self'].layer1[0].conv1", "layer1.0.conv1"), ("L['self']._modules['fc']", "fc"),
                      ("layer1.0.conv1", "layer1.0.conv1"), ("L['self'].blocks['a'].attn", "blocks.a.attn"),
                      (None, "")]:
        assert _module_path(Node(fqn)) == path


@pytest.mark.slow
def test_every_generated_kernel_is_recorded_with_its_ops_priced_against_flopcountermode():
    """Every kernel Inductor generates (oracle: the kernel definitions in the code Inductor wrote,
    from torch._inductor.utils.run_and_get_code) is recorded with the post-grad ops it fused, also
    where Inductor's FX-graph cache holds the graph (a plain compile filled it first); the ops are
    priced as FlopCounterMode (the convolution) and the closed forms (relu 1 per element, mean 1
    per input element) count them. A post-grad pass the user set still runs, and Inductor's
    configuration is as it was afterwards."""
    from torch._inductor import config
    from torch._inductor.utils import run_and_get_code
    from torch.utils.flop_counter import FlopCounterMode

    from torchutil._inductor import Recording

    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.randn(2, 3, 10, 12)
    with torch.inference_mode():
        run_and_get_code(torch.compile(net), x)  # a plain compile: Inductor's caches hold the graph
    seen = []
    level = config.trace.provenance_tracking_level
    with config.patch(post_grad_custom_post_pass=lambda graph: seen.append(len(graph.nodes))):
        users = config.post_grad_custom_post_pass
        recording = Recording()
        recording.start()
        try:
            with torch.inference_mode():
                _, code = run_and_get_code(torch.compile(net), x)
        finally:
            recording.stop()
        assert config.post_grad_custom_post_pass is users
    assert config.trace.provenance_tracking_level == level and seen
    status, kernels = recording.finish()
    defined = set(re.findall(r"^(\w+) = async_compile\.", "\n".join(code), re.M))
    assert defined and {name for name, _, _ in kernels} == defined, status
    assert status.startswith(f"Inductor kernels from provenance: {len(defined)} kernel(s) of 1 graph(s)"), status
    ops = {node: (names, module, matrix, vector, priced)
           for _, refusal, fused in kernels for node, names, module, matrix, vector, _, priced in fused}
    assert all(refusal == "" for _, refusal, _ in kernels)
    assert all(priced for *_, priced in ops.values())
    with FlopCounterMode(display=False) as flop_counter:
        net.conv(x)
    conv = [v for v in ops.values() if v[0] == ["aten::convolution"]]
    assert conv and conv[0][1:4] == ("conv", flop_counter.get_total_flops(), 2 * 8 * 10 * 12)
    assert [v[1:4] for v in ops.values() if v[0] == ["aten::relu"]] == [("", 0, 2 * 8 * 10 * 12)]
    assert [v[1:4] for v in ops.values() if v[0] == ["aten::mean"]] == [("", 0, 2 * 8 * 10 * 12)]
    # batch norm, decomposed by Inductor, its pieces named by the op they came from, in bn
    assert {v[1] for v in ops.values() if "aten::_native_batch_norm_legit_no_training" in v[0]} == {"bn"}


def test_a_half_models_casts_are_priced_as_the_bytes_they_move():
    """A half batch norm compiled by Inductor computes in float: its decomposition casts with
    prims.convert_element_type, which the kernels fuse with the rest. Each cast is priced as
    data movement: no FLOPs, its input's bytes read and its output's written (oracle: the
    numel and element sizes of the node's own tensors), so every kernel has its nominal bytes."""
    from torchutil._inductor import Recording

    torch.manual_seed(0)
    net = SmallNet().eval().half()
    x = torch.randn(2, 3, 10, 12).half()
    torch._dynamo.reset()
    recording = Recording()
    recording.start()
    try:
        with torch.inference_mode():
            torch.compile(net)(x)
    finally:
        recording.stop()
    status, kernels = recording.finish()
    fused = [op for _, _, ops in kernels for op in ops]
    assert fused and all(priced for *_, priced in fused), [op for op in fused if not op[-1]]
    casts = [op for op in fused if op[1][:1] == ["prims::convert_element_type"]]
    assert casts, status
    for node, _, _, matrix, vector, nbytes, _ in casts:
        # half to float or back, over one of the 2x8x10x12 activations (or 8 per-channel values)
        assert (matrix, vector) == (0, 0) and nbytes in {n * (2 + 4) for n in (2 * 8 * 10 * 12, 8)}, (node, nbytes)


# ---- compiled flex_attention ------------------------------------------------------------------

B, H, T, D = 1, 2, 512, 16  # four 128-blocks a side


def causal(b, h, q, k):
    return q >= k


def documents(b, h, q, k):
    """Three documents, of 128, 256 and 128 tokens: a query sees its own document only."""
    return ((q >= 128).int() + (q >= 384).int()) == ((k >= 128).int() + (k >= 384).int())


def computed_blocks(mask, block=128):
    """(query block, key block) pairs in which mask keeps any score, by evaluating it on every
    pair of positions: the blocks a BlockMask computes (full and partial)."""
    q = torch.arange(T).view(T, 1)
    k = torch.arange(T).view(1, T)
    kept = mask(0, 0, q, k).view(T // block, block, T // block, block)
    return int(kept.any(dim=3).any(dim=1).sum()), (T // block) ** 2


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
    # useful FLOPs: the attention's nominal FLOPs (its two products and 5 softmax FLOPs per
    # score) on the blocks the mask computes; the projections are all useful.
    computed, total = computed_blocks(mask)
    assert (computed, total) == ((10, 16) if mask is causal else (6, 16))
    attention = attention_matrix_flops() + 5 * B * H * T * T
    for result in (eager, compiled):
        assert result.flops - result.useful_flops == attention * (total - computed) // total
    flex = [o for o in compiled.ops if o.op == "torchutil::flex_attention"]
    assert len(flex) == 1 and flex[0].matrix_flops == attention_matrix_flops()


@pytest.mark.slow
def test_compiled_flex_attentions_kernel_is_tied_to_its_op_priced_as_the_closed_form():
    """The kernel Inductor generates for a compiled flex_attention fuses the higher-order op,
    named as the eager count names it (torchutil::flex_attention), priced at the full score
    matrix's products: the closed form 2·B·H·T²·D twice."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from torchutil._inductor import Recording

    block_mask = create_block_mask(causal, B, H, T, T, device="cpu")
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    recording = Recording()
    recording.start()
    try:
        with torch.inference_mode():
            torch.compile(flex_attention)(q, k, v, block_mask=block_mask)
    finally:
        recording.stop()
    status, kernels = recording.finish()
    fused = [op for _, _, ops in kernels for op in ops if "torchutil::flex_attention" in op[1]]
    assert len(fused) == 1, (status, kernels)
    _, names, module, matrix, _, _, priced = fused[0]
    assert (names, module, matrix, priced) == (["torchutil::flex_attention"], "", attention_matrix_flops(), True)


# ---- on the GPU: Triton templates and FlexAttention's kernels ------------------------------------

class MLP(torch.nn.Module):
    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(d_in, d_hidden), torch.nn.Linear(d_hidden, d_in)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("model", ["max-autotune MLP", "compiled flex_attention", "compiled resnet18"])
def test_compiled_on_cuda_counts_as_eager_and_ties_every_kernel_to_its_ops(model):
    """Inductor's kernels (Triton templates, fused pointwise and reductions, FlexAttention's) are
    tied to the ops they fused: at most 1 % of kernel time is left to no op (oracle: the trace's
    own kernel time), the op table is the eager one, and each generated kernel names its ops."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(0)
    if model == "max-autotune MLP":
        # Inductor runs Triton templates (triton_tem_fused_addmm_relu_...): no dispatcher op.
        eager_model = MLP(1024, 1024).cuda().half().eval()
        compiled_model = torch.compile(eager_model, mode="max-autotune-no-cudagraphs")
        inputs = dict(x=torch.randn(64, 1024, device="cuda", dtype=torch.half))
    elif model == "compiled resnet18":
        torchvision = pytest.importorskip("torchvision")
        eager_model = torchvision.models.resnet18().cuda().half().eval().to(memory_format=torch.channels_last)
        compiled_model = torch.compile(eager_model)
        inputs = dict(x=torch.randn(8, 3, 224, 224, device="cuda", dtype=torch.half).to(
            memory_format=torch.channels_last))
    else:
        bm = create_block_mask(causal, None, None, T, T, device="cuda")
        eager_model = FlexBlock(flex_attention).cuda().half().eval()
        compiled_model = FlexBlock(torch.compile(flex_attention)).cuda().half().eval()
        compiled_model.load_state_dict(eager_model.state_dict())
        inputs = dict(args=(torch.randn(B, T, H * D, device="cuda", dtype=torch.half), bm))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
        eager = torchutil.profile(eager_model, **inputs, warmup=2, iters=5)
        compiled = torchutil.profile(compiled_model, **inputs, warmup=2, iters=5)
    assert compiled.matrix_flops > 0
    assert (compiled.matrix_flops, compiled.vector_flops, compiled.useful_flops, compiled.bytes) == (
        eager.matrix_flops, eager.vector_flops, eager.useful_flops, eager.bytes)
    assert rows(compiled) == rows(eager)
    assert compiled.trace_status.startswith("on"), compiled.trace_status
    assert "Inductor kernels from provenance" in compiled.trace_status, compiled.trace_status
    per_op = sum(o.kernel_seconds for o in compiled.ops if o.kernel_seconds == o.kernel_seconds)
    assert per_op + compiled.unattributed_kernel_seconds == pytest.approx(compiled.kernel_seconds, rel=1e-6)
    share = compiled.unattributed_kernel_seconds / compiled.kernel_seconds
    print(f"{model}: matrix {compiled.matrix_flops:.4g} (eager {eager.matrix_flops:.4g}), unattributed "
          f"{100 * share:.2f} % of kernel time, timing {compiled.timing_mode}; {compiled.trace_status}")
    generated = [k for k in compiled.kernels if k.name.startswith("triton_")]
    assert generated, [k.name for k in compiled.kernels]
    for k in generated:
        assert k.op and k.op_row == k.op_row and k.fused_bytes == k.fused_bytes, (k.name, k.op, k.fused_bytes)
    assert share <= 0.01, [(k.name, k.op, k.duration_us) for k in compiled.kernels if k.op == ""]


class CausalBlock(torch.nn.Module):
    """One causal self-attention block: a fused QKV projection, SDPA with is_causal, the output
    projection."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)

    def forward(self, x):
        b, length, d = x.shape
        q, k, v = self.qkv(x).view(b, length, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, length, d))


@pytest.mark.slow
def test_a_compiled_causal_block_has_its_eager_useful_flops():
    """Useful FLOPs (the causal mask's discarded scores taken off) are the same eager and
    compiled. Oracle: the closed form of the masked scores (test_attention_counts.py's
    convention: per score 2·E + 2·Ev matrix and 5 vector FLOPs, top-left L(L+1)/2 kept of L²)."""
    torch.manual_seed(0)
    b, length, d, heads = 2, 16, 32, 4
    block = CausalBlock(d, heads).eval()
    x = torch.randn(b, length, d)
    eager = torchutil.profile(block, x, warmup=1, iters=1, peak_flops=PEAK)
    compiled = torchutil.profile(torch.compile(block), x, warmup=1, iters=1, peak_flops=PEAK)
    e = d // heads
    masked = b * heads * (length * length - length * (length + 1) // 2) * (4 * e + 5)
    assert eager.flops - eager.useful_flops == masked
    assert (compiled.flops, compiled.useful_flops) == (eager.flops, eager.useful_flops)
    assert compiled.unknown_ops == {} and eager.unknown_ops == {}
