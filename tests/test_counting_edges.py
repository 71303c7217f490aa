"""The places where counts were silently wrong (issue 13), each against an oracle nobody here
wrote: a closed form from the op's definition, FlopCounterMode where it has the formula.

* RNNs: 2*T*B*G*H*(I + R) matrix FLOPs per layer and direction (G = 4 LSTM, 3 GRU, 1 RNN;
  R = H, the recurrent width), on oneDNN's path and with oneDNN off (FlopCounterMode there too);
  the vector FLOPs are docs/counting.md's: 2*G per T*B*H for the two biases plus the gate math
  (LSTM 13, GRU 10, RNN 2).
* The Transformer encoder's nested fast path: its projections on the real tokens, attention on
  the padded length (closed form).
* Fused epilogues, beta = 0, int64 overflow, forked work, a Profiler exited on another thread,
  Ctrl-C during timing, a peak below the achieved rate.
"""
from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import torchutil
from conftest import cpu_and_cuda

PEAK = 1e12
INT64_MAX = 2**63 - 1
GATES = {torch.nn.LSTM: 4, torch.nn.GRU: 3, torch.nn.RNN: 1}
GATE_MATH = {torch.nn.LSTM: 13, torch.nn.GRU: 10, torch.nn.RNN: 2}


def rnn_closed_form(cls, steps, batch, inputs, hidden, layers, directions):
    """(matrix, vector) FLOPs of an nn.LSTM/GRU/RNN forward with biases."""
    g = GATES[cls]
    matrix = vector = 0
    for layer in range(layers):
        width = inputs if layer == 0 else hidden * directions
        matrix += directions * 2 * steps * batch * g * hidden * (width + hidden)
        vector += directions * steps * batch * hidden * (2 * g + GATE_MATH[cls])
    return matrix, vector


def count(device, fn, *args):
    with torch.inference_mode(), torchutil.Profiler(device=device, peak_flops=PEAK) as prof:
        fn(*args)
    return prof.result


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN],
                         ids=["lstm", "gru", "rnn"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("onednn", [True, False], ids=["onednn", "native"])
def test_rnn_counts_its_closed_form_on_the_cpu(cls, bidirectional, onednn):
    steps, batch, inputs, hidden, layers = 6, 3, 10, 12, 2
    torch.manual_seed(0)
    model = cls(inputs, hidden, num_layers=layers, bidirectional=bidirectional).eval()
    x = torch.randn(steps, batch, inputs)
    with torch.backends.mkldnn.flags(enabled=onednn):
        result = count("cpu", model, x)
        with torch.inference_mode(), FlopCounterMode(display=False) as fcm:
            model(x)
    matrix, vector = rnn_closed_form(cls, steps, batch, inputs, hidden, layers,
                                     2 if bidirectional else 1)
    assert (result.matrix_flops, result.vector_flops) == (matrix, vector), result.ops
    assert result.unknown_ops == {}  # cudnn_is_acceptable, unsafe_split/chunk: transparent
    if not onednn:  # FlopCounterMode has no formula for mkldnn_rnn_layer
        assert fcm.get_total_flops() == matrix
    if onednn and cls is torch.nn.LSTM:  # the path that used to count nothing
        assert "aten::mkldnn_rnn_layer" in {r.op for r in result.ops}


@pytest.mark.cuda
@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN],
                         ids=["lstm", "gru", "rnn"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_cudnn_rnn_counts_its_closed_form(cls, bidirectional):
    steps, batch, inputs, hidden, layers = 6, 3, 10, 12, 2
    torch.manual_seed(0)
    model = cls(inputs, hidden, num_layers=layers, bidirectional=bidirectional,
                batch_first=True).eval().cuda()
    x = torch.randn(batch, steps, inputs, device="cuda")
    result = count("cuda", model, x)
    matrix, vector = rnn_closed_form(cls, steps, batch, inputs, hidden, layers,
                                     2 if bidirectional else 1)
    assert "aten::_cudnn_rnn" in {r.op for r in result.ops}, result.ops
    assert (result.matrix_flops, result.vector_flops) == (matrix, vector), result.ops


def test_a_priced_trivial_callee_does_not_hide_an_unpriced_heavy_op():
    """An op with no formula whose counted callees read less than its inputs is reported (as
    oneDNN's LSTM layer was, covered by the bias add inside it): a custom op with no formula
    whose only priced callee reads one element of its input."""
    lib = torch.library.Library("torchutil_test_heavy", "DEF")  # noqa: TOR901
    lib.define("heavy(Tensor x) -> Tensor")
    lib.impl("heavy", lambda x: x[:1, :1] * 2, "CPU")
    result = count("cpu", torch.ops.torchutil_test_heavy.heavy, torch.randn(64, 64))
    assert result.unknown_ops == {"torchutil_test_heavy::heavy": 1}
    assert result.vector_flops == 1  # the callee is still counted


def test_addmm_activation_counts_its_fused_activation():
    m, k, n = 7, 9, 5
    for use_gelu in (False, True):
        result = count("cpu", lambda: torch.ops.aten._addmm_activation(
            torch.randn(n), torch.randn(m, k), torch.randn(k, n), use_gelu=use_gelu))
        # closed form: 2*M*K*N, then the bias and the ReLU/GELU once per output element
        assert (result.matrix_flops, result.vector_flops) == (2 * m * k * n, 2 * m * n)


def test_baddbmm_with_beta_zero_adds_no_bias():
    b, m, k, n = 3, 4, 6, 5
    args = (torch.empty(b, m, n), torch.randn(b, m, k), torch.randn(b, k, n))
    result = count("cpu", lambda: torch.baddbmm(*args, beta=0))
    with FlopCounterMode(display=False) as fcm:
        torch.baddbmm(*args, beta=0)
    assert result.matrix_flops == fcm.get_total_flops() == 2 * b * m * k * n
    assert result.vector_flops == 0
    assert count("cpu", lambda: torch.baddbmm(*args)).vector_flops == b * m * n


def test_metadata_queries_and_unsafe_views_are_not_unknown():
    x = torch.randn(6, 4)
    result = count("cpu", lambda: (torch.unsafe_chunk(x, 3), torch.unsafe_split(x, 2),
                                   torch.cudnn_is_acceptable(x)))
    assert result.unknown_ops == {}


def test_nested_fast_path_of_the_transformer_encoder_counts_every_layer():
    """Eval with a padding mask runs on nested tensors. Closed form: every projection on the
    real tokens (n = sum of lengths), attention's two products on the padded length L."""
    d, heads, ff, layers, batch, length = 64, 4, 128, 2, 2, 10
    lengths = [7, 10]
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, heads, ff, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=True).eval()
    x = torch.randn(batch, length, d)
    mask = torch.tensor([[i >= n for i in range(length)] for n in lengths])

    def forward():
        encoder(x, src_key_padding_mask=mask)
        torch.mm(torch.randn(3, 4), torch.randn(4, 5))  # what follows is still counted

    result = count("cpu", forward)
    n = sum(lengths)
    per_layer = (2 * n * d * 3 * d          # q, k, v
                 + 2 * n * d * d            # output projection
                 + 2 * 2 * n * d * ff       # feed-forward
                 + 2 * 2 * batch * length * length * d)  # QK^T and PV over all heads
    assert result.matrix_flops == layers * per_layer + 2 * 3 * 4 * 5
    assert result.unknown_ops == {}
    ops = {r.op for r in result.ops}
    assert {"aten::mm", "aten::bmm", "aten::_addmm_activation", "aten::layer_norm"} <= ops


def test_flop_counts_that_overflow_int64_saturate_and_say_so():
    linear = torch.nn.Linear(2**20, 2**30, bias=False, device="meta")
    with torchutil.Profiler(device="meta", peak_flops=PEAK) as prof:
        linear(torch.empty(2**30, 2**20, device="meta"))
    result = prof.result
    # closed form 2 * 2^30 * 2^20 * 2^30 = 2^81 does not fit: held at 2^63 - 1, flagged
    assert result.matrix_flops == float(INT64_MAX)
    assert result.count_saturated == 1
    small = count("cpu", torch.mm, torch.randn(2, 3), torch.randn(3, 4))
    assert small.count_saturated == 0


class _Forked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 64)
        self.b = torch.nn.Linear(64, 64)

    def forward(self, x):
        fut = torch.jit.fork(self.a, x)
        return torch.jit.wait(fut) + self.b(x)


# Closed form of _Forked on [8, 64]: a and b (2*8*64*64 + bias 8*64 each) and the add (8*64).
FORKED_FLOPS = 2 * (2 * 8 * 64 * 64 + 8 * 64) + 8 * 64


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_forked_work_is_counted(device):
    model = torch.jit.script(_Forked().eval().to(device))
    x = torch.randn(8, 64, device=device)
    for _ in range(3):  # the fork runs on the inter-op pool, and wait() may resume there too
        result = torchutil.profile(model, x, peak_flops=PEAK, warmup=2, iters=2)
        assert result.flops == FORKED_FLOPS
        assert result.other_thread_op_calls == 0


def test_forked_work_during_another_count_is_reported_not_counted():
    """With two counts running, a forked task cannot be told whose it is: its op calls are
    reported in other_thread_op_calls, and what is counted is at most the whole forward."""
    entered, done = threading.Event(), threading.Event()

    def other_count():
        with torchutil.Profiler(peak_flops=PEAK):
            entered.set()
            done.wait(timeout=60)

    t = threading.Thread(target=other_count)
    t.start()
    try:
        assert entered.wait(timeout=60)
        model = torch.jit.script(_Forked().eval())
        result = torchutil.profile(model, torch.randn(8, 64), peak_flops=PEAK, warmup=2, iters=2)
    finally:
        done.set()
        t.join()
    assert result.other_thread_op_calls > 0
    assert result.flops < FORKED_FLOPS


def test_a_profiler_exited_on_another_thread_raises_and_leaves_no_callback():
    prof = torchutil.Profiler(peak_flops=PEAK)
    prof.__enter__()
    errors = []

    def exit_elsewhere():
        try:
            prof.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=exit_elsewhere)
    t.start()
    t.join()
    assert errors and "thread that entered it" in errors[0]
    torch.randn(2) + 1  # the entering thread drops the abandoned count at its next op
    assert torch.ops.util._live_callbacks() == 0
    with torchutil.Profiler(peak_flops=PEAK) as again:  # not refused as "nested"
        torch.mm(torch.randn(2, 3), torch.randn(3, 4))
    assert again.result.matrix_flops == 2 * 2 * 3 * 4


def test_a_thread_that_ends_inside_a_profiler_block_leaves_no_callback():
    """The report's case 201: a thread enters a Profiler, runs an op and ends without __exit__;
    _live_callbacks() stayed 1 for the rest of the process. The thread's state drops it."""
    assert torch.ops.util._live_callbacks() == 0
    counted = []

    def die_inside():
        prof = torchutil.Profiler(peak_flops=PEAK)
        prof.__enter__()
        torch.mm(torch.randn(2, 3), torch.randn(3, 4))
        counted.append(torch.ops.util._live_callbacks())

    def live_after_the_thread_is_gone() -> int:
        # join() returns when the thread's Python work is done; its C++ thread-locals are
        # destroyed a moment later, as the OS thread exits.
        deadline = time.monotonic() + 10
        while torch.ops.util._live_callbacks() and time.monotonic() < deadline:
            time.sleep(0.01)
        return torch.ops.util._live_callbacks()

    for _ in range(3):
        t = threading.Thread(target=die_inside)
        t.start()
        t.join()
        assert live_after_the_thread_is_gone() == 0
    assert counted == [1, 1, 1]  # each counted while it lived
    assert torch.ops.util._counting() is False
    with torchutil.Profiler(peak_flops=PEAK) as again:
        torch.mm(torch.randn(2, 3), torch.randn(3, 4))
    assert again.result.matrix_flops == 2 * 2 * 3 * 4


def test_ctrl_c_stops_the_timing_loop_promptly():
    # The child takes Ctrl-C as an interactive Python does, also where the test runs as a
    # background job of a shell, whose children start with SIGINT ignored (and a Python that
    # starts so keeps it ignored: the test then hung).
    script = textwrap.dedent("""
        import signal, time, torch, torchutil
        signal.signal(signal.SIGINT, signal.default_int_handler)
        model = torch.jit.script(torch.nn.Linear(64, 64).eval())
        print("ready", flush=True)
        t0 = time.time()
        try:
            torchutil.profile(model, torch.randn(4, 64), iters=10**7, warmup=1, peak_flops=1e12,
                              timing="eager")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(torchutil.__file__)))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=root)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(2.0)  # well inside 10^7 timed forwards
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert "interrupted" in out
        assert time.monotonic() - sent < 10
    finally:
        proc.kill()


def test_a_peak_below_the_achieved_rate_is_flagged():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    with torchutil.Profiler(peak_flops=1.0) as low:  # 1 FLOP/s: far below any CPU
        torch.mm(a, b)
    assert low.result.utilization > 1
    assert low.result.peak_exceeded == low.result.utilization
    with torchutil.Profiler(peak_flops=1e30) as high:
        torch.mm(a, b)
    assert high.result.peak_exceeded == 0


def test_the_printed_result_says_when_the_peak_was_exceeded_or_a_count_saturated():
    with torchutil.Profiler(peak_flops=1.0) as low:
        torch.mm(torch.randn(64, 64), torch.randn(64, 64))
    assert "below what this device reached" in str(low.result)
    linear = torch.nn.Linear(2**20, 2**30, bias=False, device="meta")
    with torchutil.Profiler(device="meta", peak_flops=PEAK) as prof:
        linear(torch.empty(2**30, 2**20, device="meta"))
    assert "lower bounds" in str(prof.result)


_SPREAD = re.compile(
    r"best ([\d.]+) (\w?)FLOP/s of (\d+) repetitions; median ([\d.]+), quartiles ([\d.]+)-([\d.]+),"
    r" min ([\d.]+) \w?FLOP/s \(spread (\d+) %\)")


def test_a_measured_peak_reports_its_own_spread():
    """The measured CPU peak moved 10x between runs of one loaded machine (issue 21): its text
    gives the timed GEMM's repetitions (best, median, quartiles, min, spread = quartile range /
    median), says when the spread is wide, and writes this CPU's rate in GFLOP/s, not TFLOP/s."""
    value, source = torchutil.peak_flops("cpu", torch.float32, "measured")
    match = _SPREAD.search(source)
    assert match, source
    assert source.startswith("measured: square float32 GEMMs (1024x1024x1024) on cpu, best ")
    best, prefix, reps = float(match[1]), match[2], int(match[3])
    median, q1, q3, low, spread = (float(match[i]) for i in range(4, 9))
    scale = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}[prefix]
    assert best * scale == pytest.approx(value, rel=5e-3)  # three significant digits
    assert 1 <= best < 1000  # the prefix that fits: a CPU's tens of GFLOP/s read as such
    assert 3 <= reps <= 11
    assert low <= q1 <= median <= q3 <= best
    assert spread == pytest.approx(100 * (q3 - q1) / median, abs=2)  # from rounded figures
    if spread >= 21:
        assert "The spread is wide" in source and "peak_flops=" in source
    elif spread <= 19:
        assert "wide" not in source
    r = torchutil.profile(torch.nn.Linear(8, 8), torch.randn(2, 8), warmup=0, iters=2,
                          peak="measured")
    assert r.peak_source == source and r.peak_flops_per_second == value


def _pool_block(channels: int) -> torch.nn.Module:
    """relu(bn(avgpool(x))) + x, of a class made for the call: TorchScript compiles a class
    once, and its methods' executors (with the plan of the first call's optimization setting)
    are shared by every instance."""

    class PoolBlock(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = torch.nn.BatchNorm2d(channels)
            self.pool = torch.nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.bn(self.pool(x))) + x

    return PoolBlock()


@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "not_optimized"])
@pytest.mark.parametrize("device", cpu_and_cuda())
def test_a_scripted_model_counts_what_its_eager_self_counts(device, optimize):
    """A boxed call (Dispatcher::callBoxed, as TorchScript's interpreter makes) hands
    RecordFunction its whole stack: the values of the caller's frame came first, and were read as
    the op's arguments: without the executor's optimization (torch.jit.optimized_execution(False),
    where a submodule's call keeps its frame and its `self` lies under the op's arguments; in
    inference mode, as a sweep runs)
    avg_pool2d's kernel size was read from a tensor (0 FLOPs) and relu's bytes doubled. Oracle: the closed forms of docs/counting.md's
    conventions (a window's 9 adds per pooled element, 2 per element for inference batch norm,
    1 for relu and the add) and bytes = each op's inputs and outputs."""
    n, c, h, w = 2, 16, 32, 32
    e = n * c * h * w
    block = _pool_block(c).eval().to(device)
    x = torch.randn(n, c, h, w, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated
        scripted = torch.jit.script(block)
    with torch.jit.optimized_execution(optimize), torch.inference_mode():
        results = [torchutil.profile(m, x, peak_flops=PEAK, warmup=0, iters=1, timing="eager")
                   for m in (block, scripted)]
    for r in results:
        by_op = {}
        for o in r.ops:
            flops, nbytes = by_op.get(o.op, (0, 0))
            by_op[o.op] = (flops + o.flops, nbytes + o.bytes)
        b = 4 * e  # one float32 activation
        assert by_op["aten::avg_pool2d"] == (9 * e, 2 * b)
        assert by_op["aten::relu"] == (e, 2 * b)
        assert by_op["aten::add"] == (e, 3 * b)
        assert by_op["aten::batch_norm"][0] == 2 * e
        assert r.unknown_ops == {}
    assert results[0].flops == results[1].flops and results[0].bytes == results[1].bytes


def test_a_frozen_torchscript_model_is_counted_in_its_steady_state():
    """The profiling executor's first run of a frozen model checks its constants (hundreds of
    aten::equal, 1.4x the model's FLOPs at warmup=1 before): the counted forward comes after
    the JIT's profiling runs. Oracle: the eager model's matrix FLOPs (checked against
    FlopCounterMode in test_models.py); freezing folds the batch norms into the convolutions,
    so the frozen model's vector FLOPs are at most the eager ones."""
    import torchvision

    model = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    eager = torchutil.profile(model, x, warmup=1, iters=1, peak_flops=1e12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's deprecation
        frozen = torch.jit.freeze(torch.jit.script(model))
    r = torchutil.profile(frozen, x, warmup=1, iters=1, peak_flops=1e12)
    assert not [o for o in r.ops if o.op == "aten::equal"]
    assert r.unknown_ops == {}
    assert r.matrix_flops == eager.matrix_flops
    assert r.vector_flops <= eager.vector_flops


def test_optimized_torchscript_convolutions_are_priced_from_the_graph():
    """torch.jit.optimize_for_inference runs its convolutions as prim::mkldnn_convolution, which
    the interpreter runs without the dispatcher (0.34 % of resnet18's FLOPs were counted): they
    are priced from the graph, by the registry's convolution formula. Oracle: the eager model's
    matrix FLOPs, themselves FlopCounterMode's total."""
    import torchvision

    model = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    eager = torchutil.profile(model, x, warmup=1, iters=1, peak_flops=1e12)
    with torch.inference_mode(), FlopCounterMode(display=False) as oracle:
        model(x)
    assert eager.matrix_flops == oracle.get_total_flops()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's deprecation
        optimized = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(model)))
    assert "prim::mkldnn_convolution" in str(optimized.graph)
    r = torchutil.profile(optimized, x, warmup=1, iters=1, peak_flops=1e12)
    convs = [o for o in r.ops if o.op == "prim::mkldnn_convolution"]
    assert [(o.calls, o.op_class) for o in convs] == [(20, "matrix")]
    assert convs[0].matrix_flops == sum(o.matrix_flops for o in eager.ops if o.op == "aten::convolution")
    assert r.matrix_flops == eager.matrix_flops
    assert r.flops_note == "" and r.unknown_ops == {}
    # The layout conversions around them are memory (their bytes), not unknown.
    assert {o.op: o.op_class for o in r.ops if o.op in ("aten::to_mkldnn", "aten::_to_dense")} == \
        {"aten::to_mkldnn": "memory", "aten::_to_dense": "memory"}


class _ConvInABranch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3)
        self.b = torch.nn.Conv2d(8, 8, 3)

    def forward(self, x):
        y = self.a(x)
        if bool(x.sum() > -1e9):
            y = self.b(y)
        return y


def test_an_optimized_convolution_inside_control_flow_makes_the_flops_nan_and_says_why():
    """A prim::mkldnn_convolution inside an `if` of the graph cannot be returned from it, so its
    shapes are not read: the FLOPs are NaN and flops_note names the op and how many (never the
    silent count of the rest). Oracle: the optimized graph, which holds two such nodes, one in
    the branch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's deprecation
        optimized = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(_ConvInABranch().eval())))
    assert str(optimized.graph).count("prim::mkldnn_convolution(") == 2
    r = torchutil.profile(optimized, torch.randn(1, 3, 12, 12), warmup=1, iters=1, peak_flops=1e12)
    assert math.isnan(r.flops) and math.isnan(r.matrix_flops) and math.isnan(r.useful_flops)
    assert r.flops_note.startswith("2 prim::mkldnn_convolution") and "1 of them" in r.flops_note
    assert r.bytes > 0 and r.seconds > 0
