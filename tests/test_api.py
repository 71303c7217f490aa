"""The public surface: torch.ops.util.*, torchutil.profile / Profiler / ProfileResult, fields,
peaks and build information."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
import warnings
from html.parser import HTMLParser
from pathlib import Path
from typing import Optional

import pytest
import torch
import torchvision.models as tvm
from torch.utils.flop_counter import FlopCounterMode

import torchutil
from nets import SmallNet

ROOT = Path(__file__).resolve().parents[1]
PEAK = 1e12  # a given peak keeps the timed CPU GEMM out of the tests that do not need it


def net_flops(n, h, w):
    """(matrix, vector) FLOPs of Net on [n, 3, h, w], from the convention."""
    positions = n * 8 * h * w
    matrix = 2 * positions * 3 * 9 + 2 * n * 8 * 10
    # conv bias 1, batch norm (inference) 2, relu 1, adaptive pool 1 per element; fc bias
    vector = 5 * positions + n * 10
    return matrix, vector


def values(summary: torch.Tensor) -> dict[str, float]:
    assert summary.dtype == torch.float64
    assert summary.shape == (len(torchutil.FIELDS),)
    return dict(zip(torchutil.FIELDS, summary.tolist()))


@pytest.fixture
def net():
    torch.manual_seed(0)
    return SmallNet().eval()


X = torch.randn(2, 3, 10, 12)
MATRIX, VECTOR = net_flops(2, 10, 12)


# ---- torch.ops.util.profile over every kind of model -----------------------------------------

def test_profile_op_eager_module(net):
    v = values(torch.ops.util.profile(net, X, warmup=1, iters=2, peak_flops=PEAK))
    assert (v["matrix_flops"], v["vector_flops"]) == (MATRIX, VECTOR)
    assert v["unknown_op_calls"] == 0


def test_profile_op_scripted_module(net):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated
        scripted = torch.jit.script(net)
    v = values(torch.ops.util.profile(scripted, X, warmup=1, iters=2, peak_flops=PEAK))
    assert (v["matrix_flops"], v["vector_flops"]) == (MATRIX, VECTOR)
    assert v["unknown_op_calls"] == 0


def test_profile_op_compiled_module(net):
    # backend="aot_eager" runs AOTAutograd's captured aten graph with eager kernels: the same
    # dispatcher path (and so the same counting) as Inductor's fallbacks, without Inductor's
    # C++ code generation, which takes minutes on a 2-core CPU. The warm-up forward does the
    # tracing, so the counted forward sees only the compiled graph's ops.
    compiled = torch.compile(net, backend="aot_eager")
    v = values(torch.ops.util.profile(compiled, X, warmup=1, iters=2, peak_flops=PEAK))
    assert (v["matrix_flops"], v["vector_flops"]) == (MATRIX, VECTOR)
    assert v["unknown_op_calls"] == 0  # dynamo's own RecordFunctions are not ops
    result = torchutil.profile(compiled, X, warmup=1, iters=1, peak_flops=PEAK)
    assert result.unknown_ops == {}
    # A fresh compile with warmup=0: the compiling call is still kept out of the count.
    fresh = torch.compile(net, backend="aot_eager")
    result = torchutil.profile(fresh, X, warmup=0, iters=1, peak_flops=PEAK)
    assert (result.matrix_flops, result.vector_flops) == (MATRIX, VECTOR)
    assert result.unknown_ops == {}
    assert {r.op_class for r in result.ops} <= {"matrix", "vector"}  # no tracing-time copies


def test_profile_op_plain_function(net):
    a = torch.randn(6, 5)
    v = values(torch.ops.util.profile(lambda x: x @ x.T, a, warmup=0, iters=1, peak_flops=PEAK))
    assert (v["matrix_flops"], v["vector_flops"]) == (2 * 6 * 5 * 6, 0)
    v = values(torch.ops.util.profile(lambda x: net(x), X, warmup=0, iters=1, peak_flops=PEAK))
    assert (v["matrix_flops"], v["vector_flops"]) == (MATRIX, VECTOR)


def test_profile_several_inputs():
    a, b = torch.randn(3, 4), torch.randn(4, 7)
    result = torchutil.profile(torch.mm, (a, b), warmup=0, iters=1, peak_flops=PEAK)
    assert result.matrix_flops == 2 * 3 * 4 * 7
    assert result.batch_size == 3


class _TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 4), torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor, y: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.a(x) if y is None else self.a(x) + self.b(y)


@pytest.mark.parametrize("script", [False, True], ids=["eager", "torchscript"])
def test_summary_op_takes_every_input_of_a_list(script):
    """torch.ops.util.profile(m, [x, y]) runs m(x, y), as torchutil.profile does (it ran m(x):
    264 FLOPs for 536). Oracle: FlopCounterMode on m(x, y), plus the elementwise add it skips."""
    m = _TwoInputs()
    m = torch.jit.script(m) if script else m
    x, y = torch.randn(2, 16), torch.randn(2, 16)
    with FlopCounterMode(display=False) as mode:
        m(x, y)
    matrix = mode.get_total_flops()
    summary = values(torch.ops.util.profile(m, [x, y], warmup=0, iters=1, peak_flops=PEAK))
    result = torchutil.profile(m, [x, y], warmup=0, iters=1, peak_flops=PEAK)
    assert summary["matrix_flops"] == result.matrix_flops == matrix == 2 * 2 * 2 * 16 * 4
    assert summary["flops"] == result.flops and summary["bytes"] == result.bytes
    assert summary["batch_size"] == 2
    assert values(torch.ops.util.profile(m, (x, y), batch_size=5, warmup=0, iters=1))["batch_size"] == 5


def test_summary_fields_consistent(net):
    v = values(torch.ops.util.profile(net, X, warmup=1, iters=3, peak_flops=PEAK))
    assert v["seconds"] > 0
    assert v["flops"] == v["matrix_flops"] + v["vector_flops"]
    assert v["utilization"] == pytest.approx(v["achieved_flops_per_second"] / PEAK, rel=1e-12)
    assert v["peak_flops_per_second"] == PEAK
    assert v["achieved_flops_per_second"] == pytest.approx(v["flops"] / v["seconds"], rel=1e-12)
    assert v["matrix_utilization"] == pytest.approx(v["matrix_flops"] / v["seconds"] / PEAK,
                                                    rel=1e-12)
    assert v["inputs_per_second"] == pytest.approx(X.shape[0] / v["seconds"], rel=1e-12)
    assert v["arithmetic_intensity"] == pytest.approx(v["flops"] / v["bytes"], rel=1e-12)
    assert v["batch_size"] == X.shape[0]
    assert v["iterations"] == 3
    assert v["cuda_graph"] == 0
    assert v["counted_op_calls"] > 0


def test_field_helper(net):
    s = torch.ops.util.profile(net, X, warmup=0, iters=1, peak_flops=PEAK)
    for name in ("flops", "seconds", "utilization"):
        assert torchutil.field(s, name).item() == s[torchutil.FIELDS.index(name)].item()
    stacked = torch.stack([s, 2 * s])
    assert torchutil.field(stacked, "matrix_flops").tolist() == [MATRIX, 2 * MATRIX]
    with pytest.raises(KeyError, match="no_such_field"):
        torchutil.field(s, "no_such_field")
    with pytest.raises(ValueError, match=r"\(3,\)"):
        torchutil.field(torch.zeros(3), "flops")


def test_fields_named_and_documented():
    assert len(set(torchutil.FIELDS)) == len(torchutil.FIELDS)
    assert {"utilization", "matrix_utilization", "flops", "matrix_flops", "vector_flops", "bytes",
            "arithmetic_intensity", "seconds", "inputs_per_second", "achieved_flops_per_second",
            "peak_flops_per_second", "batch_size", "iterations", "counted_op_calls",
            "unknown_op_calls", "cuda_graph"} <= set(torchutil.FIELDS)
    docs = torchutil.fields.FIELD_DOCS
    assert set(docs) == set(torchutil.FIELDS) and all(docs.values())
    assert {"calls", "matrix_flops", "vector_flops", "bytes"} <= set(torchutil.OP_FIELDS)


# ---- ProfileResult ---------------------------------------------------------------------------

@pytest.fixture
def result(net):
    return torchutil.profile(net, X, warmup=1, iters=2, peak_flops=PEAK)


def test_result_attributes_mirror_summary(result):
    assert result.summary.shape == (len(torchutil.FIELDS),)
    for name, value in zip(torchutil.FIELDS, result.summary.tolist()):
        got = getattr(result, name)
        assert got == value or (math.isnan(got) and math.isnan(value)), name
    assert (result.matrix_flops, result.vector_flops) == (MATRIX, VECTOR)
    assert result.device == "cpu"
    assert result.timing_mode == "eager"
    assert result.peak_source == "given by the caller"
    assert result.peak_dtype == "float32"
    with pytest.raises(AttributeError, match="not_a_field"):
        result.not_a_field


def test_top_ops(result):
    top = result.top_ops(3)
    assert len(top) == 3
    assert [r.flops for r in top] == sorted((r.flops for r in result.ops), reverse=True)[:3]
    assert top[0].op == "aten::convolution" and top[0].module == "conv"
    by_bytes = result.top_ops(1, by="bytes")[0]
    assert by_bytes.bytes == max(r.bytes for r in result.ops)


def nan_to_none(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_to_none(v) for v in value]
    return value


def test_to_dict_and_json_round_trip(result):
    d = result.to_dict()
    assert d["summary"]["matrix_flops"] == MATRIX
    assert [row["op"] for row in d["ops"]] == [r.op for r in result.ops]
    assert d["unknown_ops"] == {}
    assert d["device"] == "cpu"
    assert json.loads(result.to_json()) == nan_to_none(d)


def test_to_json_of_meta_result_has_no_nan(net):
    meta = torchutil.profile(SmallNet().eval().to("meta"), X.to("meta"))
    loaded = json.loads(meta.to_json())  # NaN is not JSON: it must come out as null
    assert loaded["summary"]["seconds"] is None
    assert loaded["summary"]["matrix_flops"] == MATRIX


def _profile_in_a_worker(_: int) -> torchutil.ProfileResult:
    return torchutil.profile(torch.nn.Linear(16, 4), torch.randn(2, 16), warmup=0, iters=1, peak_flops=PEAK)


def test_a_result_pickles_and_deep_copies(result):
    """pickle.dumps(result) raised (the C++ output has no __getstate__), so a result could not
    come back from a multiprocessing worker. Every table, text and figure survives the trip."""
    import copy
    import multiprocessing
    import pickle

    for back in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result)):
        torch.testing.assert_close(back.summary, result.summary, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(back.op_table, result.op_table, rtol=0, atol=0, equal_nan=True)
        assert back.texts == result.texts and back.format() == result.format()
        assert json.dumps(back.to_dict()) == json.dumps(result.to_dict())  # NaN != NaN in ==
        assert back.unknown_ops == result.unknown_ops and back.device == result.device
        assert [r.op for r in back.ops] == [r.op for r in result.ops] and len(back.kernels) == len(result.kernels)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        sent = pool.map(_profile_in_a_worker, [0])[0]
    assert sent.matrix_flops == 2 * 2 * 16 * 4 and [r.op for r in sent.ops] == ["aten::addmm"]


def test_format(result):
    text = result.format()
    assert re.search(r"^device +cpu,", text, re.MULTILINE)
    assert "timing eager" in text
    assert "aten::convolution" in text
    assert f"{MATRIX / 1e9:.3f}" in text
    assert str(result) == text


def test_repr_is_a_short_summary(result):
    text = repr(result)
    assert text.startswith("ProfileResult(") and "\n" not in text and len(text) <= 150
    assert "tensor(" not in text  # no raw tensors
    for part in ("cpu", "utilization", "FLOP / forward", " ms"):
        assert part in text


class _Tables(HTMLParser):
    """The cells of each <table> of a page: tables[i][row][column], text only."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: str | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


@pytest.mark.parametrize("top", [10, 3])
def test_repr_html_has_summary_and_top_ops(result, top):
    """The notebook view holds the whole summary (the lines of format(), label and text; the
    device line as the result's fields give it) and the top ops by FLOPs: exactly the rows a sort
    of result.ops by FLOPs gives, in that order, at most `top`."""
    page = result._repr_html_(top)
    assert page.startswith("<div>") and page.endswith("</div>")
    summary, ops = _Tables(page).tables
    lines = result.format(top).splitlines()
    assert [f"{label:<18} {text}" for label, text in summary] == lines[:lines.index(f"top {top} ops by FLOPs:")]
    assert dict(summary)["device"] == f"{result.device}, timing {result.timing_mode}, batch {result.batch_size:.0f}"
    assert " of 1 TFLOP/s " in dict(summary)["utilization"]  # PEAK
    header, *rows = ops
    assert header[:4] == ["op", "module", "dtype", "calls"]
    want = sorted(result.ops, key=lambda r: r.flops, reverse=True)[:top]
    assert len(rows) == len(want) == min(top, len(result.ops)) and len(result.ops) > 3
    assert [row[:4] for row in rows] == [[w.op, w.module, w.dtype, f"{w.calls:.0f}"] for w in want]


def test_to_pandas_tables(result):
    pandas = pytest.importorskip("pandas")
    ops = result.to_pandas()
    assert isinstance(ops, pandas.DataFrame)
    assert list(ops.columns)[:3] == ["op", "module", "dtype"]
    assert ops["matrix_flops"].sum() == MATRIX
    assert len(result.to_pandas("kernels")) == len(result.kernels)  # none traced on a CPU
    assert result.to_pandas("summary")["matrix_flops"].item() == MATRIX
    with pytest.raises(ValueError, match="'ops', 'kernels' or 'summary'"):
        result.to_pandas("bogus")


def test_to_pandas_without_pandas_names_the_install(result, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match="pip install pandas"):
        result.to_pandas()


def test_package_is_typed():
    import pathlib
    assert (pathlib.Path(torchutil.__file__).parent / "py.typed").is_file()


def test_module_paths_in_rows():
    torch.manual_seed(0)
    model = tvm.resnet18(weights=None).eval()
    result = torchutil.profile(model, torch.randn(1, 3, 64, 64), warmup=0, iters=1,
                               peak_flops=PEAK)
    rows = {(r.op, r.module): r for r in result.ops}
    convs = {name for name, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)}
    assert {m for op, m in rows if op == "aten::convolution"} == convs
    assert rows["aten::convolution", "layer1.0.conv1"].calls == 1
    assert rows["aten::convolution", "layer1.0.conv1"].matrix_flops == 2 * 64 * 16 * 16 * 64 * 9
    assert ("aten::batch_norm", "bn1") in rows
    assert ("aten::max_pool2d", "maxpool") in rows
    assert ("aten::adaptive_avg_pool2d", "avgpool") in rows
    assert ("aten::addmm", "fc") in rows
    assert rows["aten::relu_", "layer1.0.relu"].calls == 2  # a block's ReLU runs twice
    assert rows["aten::add_", "layer1.0"].calls == 1  # the residual, in the block itself

    # Without module hooks: the same counts, every op at the top level.
    bare = torchutil.profile(model, torch.randn(1, 3, 64, 64), warmup=0, iters=1,
                             peak_flops=PEAK, module_paths=False)
    assert {r.module for r in bare.ops} == {""}
    assert (bare.matrix_flops, bare.vector_flops, bare.bytes) == (
        result.matrix_flops, result.vector_flops, result.bytes)


def test_profiler_matches_profile():
    torch.manual_seed(0)
    model = tvm.resnet18(weights=None).eval()
    x = torch.randn(2, 3, 64, 64)
    profiled = torchutil.profile(model, x, warmup=0, iters=1, peak_flops=PEAK)
    with torch.inference_mode(), torchutil.Profiler(model, batch_size=2, peak_flops=PEAK) as prof:
        model(x)
    block = prof.result
    assert (block.matrix_flops, block.vector_flops, block.bytes) == (
        profiled.matrix_flops, profiled.vector_flops, profiled.bytes)

    def key(r):
        return (r.op, r.module, r.dtype, r.calls, r.matrix_flops, r.vector_flops, r.bytes)

    assert [key(r) for r in block.ops] == [key(r) for r in profiled.ops]
    assert block.timing_mode == "wall"
    assert block.iterations == 1
    assert block.batch_size == 2
    assert block.inputs_per_second == pytest.approx(2 / block.seconds, rel=1e-12)


def test_profiler_block_summary_labels_the_block(net):
    """Three forwards inside one Profiler block: the figures are the block's totals (oracle: the
    closed-form FLOPs of three forwards), and every rendering of the summary says "/ block" and
    "one timed block", never "/ forward" or a median (issue #21: it said FLOPs / forward)."""
    with torch.inference_mode(), torchutil.Profiler(net, batch_size=2, peak_flops=PEAK) as prof:
        for _ in range(3):
            net(X)
    block = prof.result
    assert (block.matrix_flops, block.vector_flops) == (3 * MATRIX, 3 * VECTOR)
    assert block.timing_mode == "wall" and block.repetition == "one timed block"
    for text in (block.format(), block._repr_html_()):
        assert "FLOPs / block" in text and "time / block" in text and "one timed block" in text, text
        assert "/ forward" not in text and "median" not in text and "per forward" not in text, text
    assert "FLOP / block" in repr(block) and "(one timed block)" in repr(block), repr(block)
    assert "forward" not in repr(block) and "median" not in repr(block), repr(block)
    profiled = torchutil.profile(net, X, warmup=0, iters=2, peak_flops=PEAK)
    for text in (repr(profiled), profiled.format(), profiled._repr_html_()):
        assert "/ forward" in text and "median of 2" in text and "block" not in text, text


def test_profiler_without_model_counts_functional_code():
    a, b = torch.randn(5, 6), torch.randn(6, 7)
    with torchutil.Profiler(peak_flops=PEAK) as prof:
        torch.relu(torch.mm(a, b))
    assert prof.result.matrix_flops == 2 * 5 * 6 * 7
    assert prof.result.vector_flops == 5 * 7
    assert {r.module for r in prof.result.ops} == {""}


class CountsForwards(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * 2


@pytest.mark.parametrize("warmup,iters", [(0, 1), (2, 3), (4, 2)])
def test_warmup_and_iters_honored(warmup, iters):
    model = CountsForwards()
    result = torchutil.profile(model, torch.randn(1, 3), warmup=warmup, iters=iters,
                               peak_flops=PEAK)
    # warmup forwards, the last of which (or one extra when warmup=0) is counted; then iters
    assert model.calls == max(warmup, 1) + iters
    assert result.iterations == iters
    assert result.vector_flops == 3  # one counted forward, not warmup + iters of them
    model.calls = 0
    s = torch.ops.util.profile(model, torch.randn(1, 3), warmup=warmup, iters=iters,
                               peak_flops=PEAK)
    assert model.calls == max(warmup, 1) + iters
    assert torchutil.field(s, "iterations").item() == iters


def test_peak_flops_override(net):
    r = torchutil.profile(net, X, warmup=0, iters=2, peak_flops=5e9)
    assert r.peak_flops_per_second == 5e9
    assert r.peak_source == "given by the caller"
    assert r.utilization == pytest.approx(r.achieved_flops_per_second / 5e9, rel=1e-12)


def test_measured_peak_on_cpu(net):
    value, source = torchutil.peak_flops("cpu", torch.float32, "measured")
    assert value > 0 and math.isfinite(value)
    assert source.startswith("measured") and "cpu" in source
    assert torch.ops.util.peak_flops(torch.device("cpu"), "float32", "measured")[0] == value
    r = torchutil.profile(net, X, warmup=0, iters=2, peak="measured")
    assert r.peak_flops_per_second == value  # cached per device and dtype
    assert r.peak_source == source


def test_measured_int8_peak_on_cpu():
    """int8 on the CPU is measured with int8 x int8 -> int32 GEMMs (torch._int_mm). Oracle: a
    user's own timing of the same 1024^3 product, best of five, 2 n^3 operations each."""
    value, source = torchutil.peak_flops("cpu", torch.int8, "measured")
    assert source.startswith("measured: square int8 GEMMs (1024x1024x1024) on cpu")
    a = torch.randint(-128, 128, (1024, 1024), dtype=torch.int8)
    b = torch.randint(-128, 128, (1024, 1024), dtype=torch.int8)
    torch._int_mm(a, b)
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        torch._int_mm(a, b)
        best = min(best, time.perf_counter() - t0)
    assert 0.5 < value / (2 * 1024**3 / best) < 2.0
    with pytest.raises(ValueError, match="a measured peak for float8 on cpu is not implemented"):
        torchutil.peak_flops("cpu", "fp8", "measured")


def test_a_statically_quantized_model_profiles_with_the_defaults_on_cpu():
    """An int8 model's peak is the CPU's int8 one: computed where the CPU has int8 dot products
    (VNNI) or AMX tiles, else timed int8 GEMMs."""
    from torch.ao import quantization as q

    class Quantized(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant, self.linear, self.dequant = q.QuantStub(), torch.nn.Linear(256, 128), q.DeQuantStub()

        def forward(self, x):
            return self.dequant(self.linear(self.quant(x)))

    model = Quantized().eval()
    model.qconfig = q.get_default_qconfig("fbgemm")
    prepared = q.prepare(model)
    x = torch.randn(64, 256)
    prepared(x)
    r = torchutil.profile(q.convert(prepared), x, warmup=1, iters=2)
    assert r.peak_source.startswith(("computed: ", "measured: square int8 GEMMs")) and "int8" in r.peak_source
    assert r.peak_flops_per_second == torchutil.peak_flops("cpu", "int8")[0]
    assert r.matrix_flops == 2 * 64 * 256 * 128  # the quantized linear's products (closed form)
    assert 0 < r.utilization < 1


def test_peak_on_meta_is_nan():
    value, source = torchutil.peak_flops("meta", torch.float16)
    assert math.isnan(value)
    assert source.startswith("none")


def test_utilization_op():
    flops = torch.tensor([1e9, 4e9], dtype=torch.float64)
    seconds = torch.tensor([0.5, 2.0], dtype=torch.float64)
    peak = torch.tensor([4e9, 8e9], dtype=torch.float64)
    expected = [1e9 / 0.5 / 4e9, 4e9 / 2.0 / 8e9]
    assert torch.ops.util.utilization(flops, seconds, peak).tolist() == expected
    assert torchutil.utilization(flops, seconds, peak).tolist() == expected
    with pytest.raises(ValueError, match="Long"):
        torch.ops.util.utilization(torch.tensor([1]), seconds, peak)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_utilization(dtype):
    flops = torch.rand(4, dtype=dtype) * 1e9
    seconds = torch.rand(4, dtype=dtype) + 0.1
    peak = torch.full((4,), 1e10, dtype=dtype)
    torch.library.opcheck(torch.ops.util.utilization.default, (flops, seconds, peak))
    torch.library.opcheck(torch.ops.util.utilization.default,
                          (torch.rand(2, 3, dtype=dtype), torch.rand(2, 3, dtype=dtype) + 0.1,
                           torch.tensor(1e10, dtype=dtype)))


def test_formula_ops_cover_families():
    names = torch.ops.util.formula_ops()
    assert names == sorted(set(names))
    for op in ["mm", "addmm", "bmm", "baddbmm", "linear", "matmul", "convolution", "conv2d",
               "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
               "_native_multi_head_attention", "add", "mul", "relu", "gelu", "batch_norm",
               "layer_norm", "group_norm", "softmax", "max_pool2d", "avg_pool2d",
               "adaptive_avg_pool2d", "sum", "mean", "var", "upsample_bilinear2d", "cat"]:
        assert f"aten::{op}" in names, op
    assert "aten::fft_fft" not in names and "aten::_fft_c2c" in names  # the op that does the work


def test_build_info():
    info = torchutil.build_info()
    assert {"cuda", "cupti", "torch_version"} <= set(info)
    assert isinstance(info["cuda"], bool) and isinstance(info["cupti"], bool)
    # Built against the torch that runs it (a mismatch would break the ABI).
    assert info["torch_version"].split("+")[0] == torch.__version__.split("+")[0]
    assert not info["cupti"] or info["cuda"]


def test_free_capture_pools_without_a_gpu_gives_back_nothing_and_the_next_call_works():
    # No capture ran on this thread (CPU inputs capture nothing): nothing is kept, and the call
    # must not touch CUDA. The GPU side (segments, reserved bytes) is in test_cuda.py.
    model = torch.nn.Linear(16, 16)
    x = torch.randn(4, 16)
    first = torchutil.profile(model, x, iters=2)
    assert torchutil.free_capture_pools() is None
    assert torchutil.profile(model, x, iters=2).flops == first.flops == 2 * 4 * 16 * 16 + 4 * 16
    assert "free_capture_pools" in torchutil.__all__


# ---- timing modes, adaptive repetition, bandwidth (CPU; the CUDA side is in test_cuda.py) ----

def test_adaptive_repetition_reports_its_interval():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    x = torch.randn(8, 64)
    r = torchutil.profile(model, x, warmup=1, iters=10, target_ci=0.5, max_time=5.0)
    assert r.repetition.startswith("converged"), r.repetition
    assert r.iterations >= 10
    assert r.seconds_ci_low <= r.seconds <= r.seconds_ci_high
    assert 0 <= r.seconds_relative_ci <= 0.5
    assert r.seconds_relative_ci == pytest.approx((r.seconds_ci_high - r.seconds_ci_low) / 2 / r.seconds)
    # A target no CPU meets: the time budget ends it, and says so.
    r = torchutil.profile(model, x, warmup=0, iters=5, target_ci=1e-9, max_time=0.2)
    assert r.repetition.startswith("time budget of 0.2 s reached"), r.repetition
    assert r.iterations > 5
    # Without a target exactly iters forwards are timed.
    r = torchutil.profile(model, x, warmup=0, iters=7)
    assert r.iterations == 7 and r.repetition == "fixed count of 7"


def test_timing_auto_on_a_cpu_is_eager_and_says_why():
    r = torchutil.profile(torch.nn.Linear(4, 4), torch.randn(2, 4), warmup=0, iters=2, timing="auto")
    assert r.timing_mode == "eager" and r.cuda_graph == 0.0
    assert r.timing_note == "auto: eager, since CUDA graphs need a CUDA device, not cpu"
    assert torchutil.profile(torch.nn.Linear(4, 4), torch.randn(2, 4), iters=2).timing_note == ""


def test_bandwidth_utilization_is_bytes_over_time_over_bandwidth():
    r = torchutil.profile(torch.nn.Linear(256, 256), torch.randn(64, 256), warmup=1, iters=5)
    bandwidth, source = torchutil.memory_bandwidth("cpu")
    assert r.peak_bytes_per_second == bandwidth and r.bandwidth_source == source
    assert r.achieved_bytes_per_second == pytest.approx(r.bytes / r.seconds)
    assert r.bandwidth_utilization == pytest.approx(r.bytes / r.seconds / bandwidth)
    assert 0 < r.bandwidth_utilization
    # On a CPU an op's time is the wall time of its calls (kernel_attribution "cpu"), and its
    # bandwidth figure follows from it; the forward's kernel-time figure does not exist (NaN).
    assert r.kernel_attribution == "cpu"
    for o in r.ops:
        assert o.kernel_bandwidth_utilization == pytest.approx(o.bytes / o.kernel_seconds / bandwidth)
    assert r.kernel_bandwidth_utilization != r.kernel_bandwidth_utilization


def test_reward_times_with_auto_by_default():
    from torchutil.nas import reward

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    x = torch.randn(4, 16)
    summary = torch.ops.util.profile(model, x, warmup=1, iters=3, timing="auto", trace=False)
    assert torchutil.field(summary, "cuda_graph").item() == 0.0  # a CPU: auto is eager
    r = reward(model, x, accuracy=0.5, weight=0.0)
    assert r.item() == 0.5


def test_a_1d_input_needs_batch_size():
    lin = torch.nn.Linear(16, 4)
    with pytest.raises(ValueError, match=r"first input is 1-D \(shape \[16\]\).*pass batch_size="):
        torchutil.profile(lin, torch.randn(16))
    r = torchutil.profile(lin, torch.randn(16), batch_size=1, warmup=0, iters=1, peak_flops=PEAK)
    # Closed form: one 16 -> 4 product (2 x 16 x 4) and its bias (4); one input.
    assert (r.batch_size, r.flops) == (1, 2 * 16 * 4 + 4)
    assert r.inputs_per_second == pytest.approx(1 / r.seconds)


class ScaledSum(torch.nn.Module):
    """Takes a list of tensors and a keyword argument, as detection and Hugging Face models do."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, parts, *, scale):
        return [self.fc(p) * scale for p in parts]


def test_args_and_kwargs_reach_the_model_as_torch_export_takes_them():
    model = ScaledSum().eval()
    parts, scale = [torch.randn(2, 8), torch.randn(5, 8)], torch.tensor(3.0)
    r = torchutil.profile(model, args=(parts,), kwargs={"scale": scale}, warmup=0, iters=1, peak_flops=PEAK)
    # Closed form: rows x (2 x 8 x 8 + 8 bias + 8 scale) for 2 + 5 rows; the batch is the list's length.
    assert r.flops == (2 + 5) * (2 * 8 * 8 + 8 + 8)
    assert r.batch_size == 2
    with torchutil.Profiler(model, batch_size=2, peak_flops=PEAK) as p:
        model(parts, scale=scale)
    assert p.result.flops == r.flops
    s = torch.ops.util.profile(model, args=(parts,), kwargs={"scale": scale}, batch_size=7, warmup=0, iters=1,
                               peak_flops=PEAK)
    assert torchutil.field(s, "flops").item() == r.flops and torchutil.field(s, "batch_size").item() == 7


def test_the_options_table_is_torchutil_profiles_signature():
    import inspect

    params = inspect.signature(torchutil.profile).parameters
    options = {n: p.default for n, p in params.items() if n not in ("model", "x", "args", "kwargs", "count_as")}
    assert options == torchutil._ops.OPTION_DEFAULTS
    schema = str(torch.ops.util._profile.default._schema)
    for name, kind in torchutil._ops.OPTION_TYPES.items():
        assert f"{kind} {name}=" in schema


def test_the_call_is_split_into_phases_that_add_up():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    r = torchutil.profile(model, torch.randn(4, 8), warmup=2, iters=5, peak_flops=PEAK)
    phases = [getattr(r, f"phase_{p}_seconds") for p in
              ("warmup", "count", "capture", "trace", "time", "counters", "wait", "assemble")]
    assert all(p >= 0 for p in phases) and r.phase_count_seconds > 0 and r.phase_time_seconds > 0
    assert r.phase_capture_seconds == 0  # the CPU times eagerly
    assert sum(phases) <= r.call_seconds <= sum(phases) + 0.05


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_the_first_call_of_a_process_is_in_its_phases_too(device):
    """The first call of a process spent seconds in no phase (1.5-36 s in the report): the
    check for a torch.compile'd model imported torch._dynamo. A model nobody compiled needs no
    such import; the peak and bandwidth measurement of a first call are in the assemble phase."""
    script = (
        "import sys, torch, torchutil\n"
        f"m, x = torch.nn.Linear(16, 4).to('{device}'), torch.randn(2, 16, device='{device}')\n"
        "r = torchutil.profile(m, x, warmup=1, iters=2)\n"
        "phases = sum(getattr(r, f'phase_{p}_seconds') for p in ('warmup', 'count', 'capture', 'trace', 'time',"
        " 'counters', 'wait', 'assemble'))\n"
        "print(r.call_seconds, phases, 'torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    call, phases, dynamo = out.stdout.split()
    assert dynamo == "False" or device == "cuda", out.stderr  # on CUDA other code may import it
    assert float(phases) <= float(call) <= float(phases) + 0.05, out.stdout


def test_a_detection_model_takes_its_list_of_images():
    det = tvm.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None,
                                                               num_classes=3).eval()
    image = torch.rand(3, 160, 160, generator=torch.Generator().manual_seed(0))
    r = torchutil.profile(det, args=([image],), warmup=2, iters=1, peak_flops=PEAK)  # first call sets up
    with torch.inference_mode(), torchutil.Profiler(det, peak_flops=PEAK) as p:  # as profile runs it
        det([image])
    # Oracle: the same forward counted by a Profiler block; a list of one image is a batch of one.
    assert r.batch_size == 1 and r.flops > 1e8 and r.flops == p.result.flops


def test_small_rates_read_in_their_prefix():
    r = torchutil.profile(torch.nn.Linear(8, 8), torch.randn(2, 8), warmup=0, iters=1, peak_flops=3.83e10)
    assert "of 38.3 GFLOP/s (float32)" in r.format() and "\npeak source        given by the caller\n" in r.format()
    assert "TFLOP/s" not in r.format()


def test_a_hugging_face_model_takes_its_keyword_arguments():
    transformers = pytest.importorskip("transformers", reason="transformers builds the model from a config")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 100, (3, 12))
    mask = torch.ones_like(ids)
    r = torchutil.profile(model, kwargs={"input_ids": ids, "attention_mask": mask, "use_cache": False},
                          warmup=1, iters=1, peak_flops=PEAK)
    with torch.inference_mode(), torchutil.Profiler(model, batch_size=3, peak_flops=PEAK) as p:
        model(input_ids=ids, attention_mask=mask, use_cache=False)
    # Oracle: the same call counted by a Profiler block; the batch is the ids' first dimension.
    assert r.batch_size == 3 and r.flops > 0 and r.flops == p.result.flops
    assert r.matrix_flops == p.result.matrix_flops


def test_gpu_lock_waits_while_another_holder_shares_it(net, tmp_path):
    """Another holder of the lock (here a shared one) keeps the call's GPU phases waiting: they
    take it exclusively, and the wait is reported as phase_wait_seconds."""
    import fcntl
    import threading

    lock = tmp_path / "gpu.lock"
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        release = threading.Timer(0.3, fcntl.flock, (f, fcntl.LOCK_UN))
        release.start()
        r = torchutil.profile(net, X, warmup=1, iters=1, trace=False, peak_flops=PEAK, gpu_lock=str(lock))
        release.join()
    assert r.phase_wait_seconds >= 0.2
    with open(lock, "a") as f:  # free again once the call returns
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
