"""How a result reads to someone new: the summary with its interval, the peak's source said once,
a short repr, the roofline as a table, the parameter count, the views by operator type and by
module tree (checked against FlopCounterMode), and per-op time and a Chrome trace on the CPU."""
from __future__ import annotations

import copy
import json
import math
import re
import warnings

import pytest
import torch
import torchvision.models as tvm
from torch.utils.flop_counter import FlopCounterMode

import torchutil
from nets import SmallNet
from torchutil import _format

PEAK = 1e12  # a given peak keeps the timed CPU GEMM out of the tests that do not need it
X = torch.randn(2, 3, 10, 12)


class Shared(torch.nn.Module):
    """Two Linear modules holding one weight: a shared parameter counts once."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.fixture(scope="module")
def resnet():
    torch.manual_seed(0)
    model = tvm.resnet18(num_classes=10).eval()
    return model, torchutil.profile(model, torch.randn(1, 3, 64, 64), warmup=1, iters=5, peak_flops=PEAK)


# ---- the summary ---------------------------------------------------------------------------------

def test_the_time_line_says_how_sure_it_is(resnet):
    _, r = resnet
    line = next(t for t in r.format().splitlines() if t.startswith("time / forward"))
    m = re.search(r"([\d.]+) (µs|ms|s) ± (> 100|[\d.]+) % \(median of 5, (95 % CI|unreliable)\)", line)
    assert m, line
    assert float(m[1]) * {"µs": 1e-6, "ms": 1e-3, "s": 1.0}[m[2]] == pytest.approx(r.seconds, rel=1e-3)
    if r.seconds_relative_ci > 1:  # a loaded machine: wider than the median, said as unreliable
        assert m[3] == "> 100" and m[4] == "unreliable"
    else:
        assert float(m[3]) == pytest.approx(100 * r.seconds_relative_ci, rel=0.05, abs=0.05) and m[4] == "95 % CI"
    # The interval is the order statistics': seconds_ci_low/high around the median.
    assert r.seconds_ci_low <= r.seconds <= r.seconds_ci_high
    one = torchutil.profile(SmallNet().eval(), X, warmup=0, iters=1, peak_flops=PEAK)
    assert "(median of 1, no interval)" in one.format() and "±" not in one.format()


def test_the_peak_source_has_a_line_of_its_own_said_once(resnet):
    _, r = resnet
    lines = r.format().splitlines()
    assert [t for t in lines if t.startswith("peak source")] == [f"{'peak source':<18} given by the caller"]
    utilization = next(t for t in lines if t.startswith("utilization"))
    assert utilization.endswith("of 1 TFLOP/s (float32)"), utilization
    assert r.format().count(r.peak_source) == 1


def test_a_measured_peak_is_not_warned_about(resnet):
    # The spread of a measured peak, wide or not, is in peak_source; nothing else repeats it.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = torchutil.profile(SmallNet().eval(), X, warmup=0, iters=1, peak="measured")
    assert r.peak_source.startswith("measured: square float32 GEMMs")
    assert not [w for w in caught if "peak" in str(w.message)], [str(w.message) for w in caught]


def test_repr_is_one_short_line(resnet):
    _, r = resnet
    text = repr(r)
    assert len(text) <= 150 and "\n" not in text, text
    assert text.startswith("ProfileResult(ResNet, cpu, float32, batch 1: utilization ")
    for part in ("MFLOP / forward", "s ± ", "(median of 5, "):
        assert part in text, text


def test_the_roofline_prints_as_a_table(resnet):
    _, r = resnet
    roof = torchutil.roofline(r, bandwidth=1e11)
    text = str(roof)
    lines = text.splitlines()
    assert len(text) < 4000 and max(map(len, lines)) < 200, text
    assert lines[0].startswith("peak 1 TFLOP/s, bandwidth 100 GB/s (given by the caller); ridge 10 FLOP/B")
    assert lines[3].split()[:3] == ["op", "module", "dtype"]
    assert lines[-1] == f"... {len(roof.rows) - 20} more (format(top=None) shows every op)"
    assert len(roof.format(top=None).splitlines()) == 5 + len(roof.rows)
    assert len(repr(roof)) < 200 and "compute-bound" in repr(roof)


# ---- the parameter count -------------------------------------------------------------------------

def test_params_are_the_modules_parameters(resnet):
    model, r = resnet
    assert r.params == sum(p.numel() for p in model.parameters())  # oracle: torch
    assert r.params_note == "" and r.model == "ResNet"
    assert r.summary[torchutil.FIELDS.index("params")].item() == r.params
    shared = Shared()
    s = torchutil.profile(shared, torch.randn(4, 16), warmup=0, iters=1, peak_flops=PEAK)
    assert s.params == 16 * 16 + 2 * 16  # one weight, two biases
    assert s.module_tree()[0].params == s.params


def test_the_summary_op_counts_params_in_cpp_as_torchutil_profile_does():
    """params, model and params_note are filled by the C++ where it holds the model, so the
    summary-only op (the NAS op) has them too: every parameter, frozen ones included, a shared
    one once (nn.Module.parameters()), for an eager module, a TorchScript module and the
    Profiler's; NaN for a plain callable, whose reason the full result's params_note gives."""
    shared = Shared()
    shared.a.bias.requires_grad_(False)  # frozen: still a parameter of the model
    x = torch.randn(4, 16)
    expected = sum(p.numel() for p in shared.parameters())  # oracle: torch, a shared one once
    assert expected == 16 * 16 + 2 * 16
    assert expected != sum(p.numel() for p in shared.parameters() if p.requires_grad)
    summary = torch.ops.util.profile(shared, x, warmup=0, iters=1, peak_flops=PEAK)
    assert torchutil.field(summary, "params").item() == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated
        scripted = torch.jit.script(shared)
    assert torchutil.field(torch.ops.util.profile(scripted, x, warmup=0, iters=1, peak_flops=PEAK),
                           "params").item() == expected
    out = torch.ops.util._profile(scripted, [x], warmup=0, iters=1, peak_flops=PEAK)  # no Python after C++
    assert (out.text("model"), out.text("params_note")) == ("Shared", "")

    def forward(x):
        return torch.relu(x @ x)

    summary = torch.ops.util.profile(forward, torch.randn(8, 8), batch_size=1, warmup=0, iters=1, peak_flops=PEAK)
    assert math.isnan(torchutil.field(summary, "params").item())
    out = torch.ops.util._profile(torchutil._ops.as_dispatchable(forward), [torch.randn(8, 8)], batch_size=1,
                                  warmup=0, iters=1, peak_flops=PEAK)
    assert out.text("params_note") == "the model is a function, not an nn.Module: it has no parameters() to count"
    assert out.text("model").endswith("forward")


def test_params_of_a_function_are_nan_with_a_reason():
    def forward(x):
        return torch.relu(x @ x)

    r = torchutil.profile(forward, torch.randn(8, 8), batch_size=1, warmup=0, iters=1, peak_flops=PEAK)
    assert math.isnan(r.params) and math.isnan(r.to_dict()["summary"]["params"])
    assert r.params_note == "the model is a function, not an nn.Module: it has no parameters() to count"
    assert r.model.endswith("forward")
    with torch.inference_mode(), torchutil.Profiler(peak_flops=PEAK) as p:
        forward(torch.randn(8, 8))
    assert math.isnan(p.result.params) and p.result.params_note == "no model was given to the Profiler"
    net = SmallNet().eval()
    with torch.inference_mode(), torchutil.Profiler(net, batch_size=2, peak_flops=PEAK) as p:
        net(X)
    assert p.result.params == sum(t.numel() for t in net.parameters()) and p.result.model == "SmallNet"


# ---- by operator type ----------------------------------------------------------------------------

def test_by_op_type_adds_up_to_the_forward(resnet):
    _, r = resnet
    view = r.by_op_type()
    names = [row.op for row in view]
    assert len(names) == len(set(names)) == len({o.op for o in r.ops})
    assert sum(row.flops for row in view) == r.flops
    assert sum(row.matrix_flops for row in view) == r.matrix_flops
    assert sum(row.bytes for row in view) == r.bytes
    assert sum(row.calls for row in view) == r.counted_op_calls
    assert sum(row.share for row in view) == pytest.approx(1.0)
    assert sum(row.time_share for row in view) == pytest.approx(1.0)
    assert [row.flops for row in view] == sorted((row.flops for row in view), reverse=True)
    conv = view[0]
    assert conv.op == "aten::convolution" and conv.calls == 20  # resnet18's 20 convolutions
    lines = str(view).splitlines()
    assert lines[0].split() == ["op", "calls", "FLOPs", "share", "bytes", "time", "time", "share"]
    assert len(lines) == 2 + len(view) and lines[2].startswith("aten::convolution")
    assert view.to_dicts()[0]["op"] == "aten::convolution"


def test_views_as_pandas(resnet):
    pandas = pytest.importorskip("pandas")
    _, r = resnet
    frame = r.by_op_type().to_pandas()
    assert isinstance(frame, pandas.DataFrame) and frame["flops"].sum() == r.flops
    assert list(r.module_tree(depth=1).to_pandas()["module"])[:2] == ["", "conv1"]


# ---- by module tree ------------------------------------------------------------------------------

def test_module_tree_matches_flop_counter_mode_per_module(resnet):
    """Oracle: torch.utils.flop_counter.FlopCounterMode's FLOPs per module (it counts the matrix
    ops, as matrix_flops does), inclusive of the modules inside, for every module of resnet18."""
    model, r = resnet
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(torch.randn(1, 3, 64, 64))
    oracle = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    tree = r.module_tree()
    by_path = {row.module: row for row in tree}
    assert by_path[""].matrix_flops == oracle["Global"] == r.matrix_flops
    checked = 0
    for path, row in by_path.items():
        if path:
            assert row.matrix_flops == oracle.get(f"ResNet.{path}", 0), path
            checked += 1
    assert checked == len(dict(model.named_modules())) - 1  # every module, each once
    for path, module in model.named_modules():  # oracle: torch
        assert by_path[path].params == sum(p.numel() for p in module.parameters()), path


def test_module_tree_depth_order_and_text(resnet):
    model, r = resnet
    top = r.module_tree(depth=1)
    assert [row.module for row in top] == ["", *[name for name, _ in model.named_children()]]
    assert [row.depth for row in top] == [0] + [1] * (len(top) - 1)
    assert sum(row.flops for row in top[1:]) == r.flops  # resnet18 runs no op at its top level
    assert sum(row.share for row in top[1:]) == pytest.approx(1.0)
    lines = str(r.module_tree(depth=2)).splitlines()
    assert lines[0].split() == ["module", "params", "FLOPs", "share", "bytes", "time"]
    assert lines[2].startswith("ResNet ") and lines[3].startswith("  conv1 ")
    assert any(t.startswith("    0 ") for t in lines)  # layer1.0, two levels in
    tree = r.module_tree(depth=2).to_dict()
    assert tree["module"] == "" and [c["module"] for c in tree["children"]][:2] == ["conv1", "bn1"]
    layer1 = next(c for c in tree["children"] if c["module"] == "layer1")
    assert [c["module"] for c in layer1["children"]] == ["layer1.0", "layer1.1"]
    assert layer1["children"][0]["children"] == []  # depth 2 stops there
    with pytest.raises(ValueError, match=r"depth=\.\.\.\) takes None or an int >= 0, got -1"):
        r.module_tree(depth=-1)


def test_module_tree_without_module_parameters_still_nests_the_ops():
    def forward(x):
        return torch.relu(x @ x)

    r = torchutil.profile(forward, torch.randn(8, 8), batch_size=1, warmup=0, iters=1, peak_flops=PEAK)
    (root,) = r.module_tree()
    assert root.flops == r.flops and math.isnan(root.params) and root.name.endswith("forward")


# ---- per-op time and the Chrome trace on the CPU -------------------------------------------------

def test_every_counted_op_has_its_cpu_time(resnet):
    """On a CPU an op runs inside its call: each row's kernel_seconds is the wall time of its
    calls in the counted forward, and since counted ops never nest, they add up to at most the
    counted forward's wall time (phase_count_seconds, the steady clock around it)."""
    _, r = resnet
    assert r.kernel_attribution == "cpu" and r.traced == 0
    times = [o.kernel_seconds for o in r.ops]
    assert all(math.isfinite(t) and t > 0 for t in times), times
    assert all(math.isnan(o.kernels) for o in r.ops)  # a CPU launches no kernels
    assert sum(times) <= r.phase_count_seconds
    # The convolutions are most of the forward (oracle: they hold 99 % of its FLOPs).
    assert sum(o.kernel_seconds for o in r.ops if o.op == "aten::convolution") > 0.3 * r.phase_count_seconds
    conv = r.top_ops(1)[0]
    assert conv.kernel_flops_per_second == pytest.approx(conv.flops / conv.kernel_seconds)
    assert "n/a" not in r.format().split("top 10 ops")[1]
    off = torchutil.profile(SmallNet().eval(), X, warmup=0, iters=1, peak_flops=PEAK, trace=False)
    assert off.kernel_attribution == "none" and all(math.isnan(o.kernel_seconds) for o in off.ops)
    meta = torchutil.profile(SmallNet().eval().to("meta"), X.to("meta"))
    assert meta.kernel_attribution == "none" and all(math.isnan(o.kernel_seconds) for o in meta.ops)


def test_a_cpu_profile_writes_a_chrome_trace_of_its_ops(tmp_path):
    torch.manual_seed(0)
    model = tvm.resnet18(num_classes=10).eval()
    r = torchutil.profile(model, torch.randn(1, 3, 64, 64), warmup=1, iters=1, peak_flops=PEAK,
                          chrome_trace=True)
    r.save_trace(str(tmp_path / "trace.json"))
    events = json.load(open(tmp_path / "trace.json"))["traceEvents"]
    ops = [e for e in events if e["ph"] == "X"]
    counted = [e for e in ops if e["args"]["accounting"] == "counted"]
    assert len(counted) == r.counted_op_calls  # one event per counted op call
    assert {e["pid"] for e in events} == {0}  # no GPU process on a CPU
    # The events' durations are the op rows' times (microseconds, written to 3 decimals).
    assert sum(e["dur"] for e in counted) * 1e-6 == pytest.approx(sum(o.kernel_seconds for o in r.ops),
                                                                   abs=len(counted) * 1e-9)
    # Nested times: any two op events are disjoint or one holds the other; counted ones never nest.
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["args"]["accounting"]) for e in ops)
    for i, (s0, e0, _) in enumerate(spans):
        for s1, e1, _ in spans[i + 1:]:
            if s1 >= e0:
                break
            assert e1 <= e0 + 1e-3, (s0, e0, s1, e1)
    assert all(not (a[2] == b[2] == "counted" and b[0] < a[1] - 1e-3)
               for a, b in zip(spans, spans[1:]))


# ---- how numbers read ----------------------------------------------------------------------------

def test_numbers_switch_units_and_never_take_an_exponent():
    assert [_format.seconds(t) for t in (151.2e-6, 2.048e-3, 1.2, 3e-9, 0.0, math.nan)] == \
        ["151.2 µs", "2.048 ms", "1.2 s", "3 ns", "0 s", "n/a"]
    assert [_format.si(v, "FLOP") for v in (204.8e6, 520, 2.056e3, 0, 1.5e15)] == \
        ["204.8 MFLOP", "520 FLOP", "2.056 kFLOP", "0 FLOP", "1.5 PFLOP"]
    assert [_format.number(v) for v in (0.0006436, 2.048e-6, 139.6, 12345, 1.0)] == \
        ["0.0006436", "0.000002048", "139.6", "12340", "1"]


def test_each_column_of_the_top_ops_reads_alike(resnet):
    """One format per column: every FLOPs cell a number and a FLOP unit, every time cell a number
    and a time unit, no exponent anywhere (0.151 beside 2.048e-06 was the old table)."""
    _, r = resnet
    lines = r.format(top=30).splitlines()
    start = lines.index(next(t for t in lines if t.startswith("top 30 ops"))) + 2
    rows = lines[start:]
    assert len(rows) == min(30, len(r.ops))
    assert not re.search(r"\de[-+]\d", "\n".join(lines))
    for line in rows:
        cells = re.findall(r"(\S+) [kMGTP]?FLOP\s+(\S+) [kMGTP]?B\s+(\S+)\s+(?:\S+ (?:ns|µs|ms|s)|n/a)$", line)
        assert cells, line
        flops, bytes_, intensity = map(float, cells[0])
        assert flops < 1000 and bytes_ < 1000 and intensity >= 0, line


def test_module_paths_are_cut_in_the_middle():
    cut = _format.cut_middle
    assert cut("layer4.1.downsample.0", 28) == "layer4.1.downsample.0"
    assert cut("features.denseblock4.denselayer16.conv2", 32) == "features.….denselayer16.conv2"
    assert cut("encoder.layer.11.attention.output.dense", 28) == "encoder.….output.dense"
    long_names = cut("a_very_long_first_name.another_very_long_leaf_name", 28)
    assert len(long_names) == 28 and long_names.startswith("a_very_long") and long_names.endswith("leaf_name")


class Deep(torch.nn.Module):
    """A Linear four modules down, with long names: the table must keep the head and the leaf."""

    def __init__(self):
        super().__init__()
        self.encoder_stack = torch.nn.ModuleDict({"attention_block": torch.nn.ModuleDict(
            {"output_projection": torch.nn.ModuleDict({"dense": torch.nn.Linear(8, 8)})})})

    def forward(self, x):
        return self.encoder_stack["attention_block"]["output_projection"]["dense"](x)


def test_the_op_table_keeps_the_head_and_leaf_of_a_long_module_path():
    r = torchutil.profile(Deep(), torch.randn(2, 8), warmup=0, iters=1, peak_flops=PEAK)
    (row,) = [t for t in r.format().splitlines() if "aten::addmm" in t]
    assert "encoder_stack.….dense" in row or "encoder_stack.….output_projection.dense" in row, row


def test_a_wide_interval_says_the_time_is_unreliable(resnet, monkeypatch):
    _, r = resnet
    wide = copy.deepcopy(r)
    wide._values["seconds_relative_ci"] = 2.4
    line = next(t for t in wide.format().splitlines() if t.startswith("time / forward"))
    assert "± > 100 % (median of 5, unreliable)" in line and "240" not in line, line
    assert len(repr(wide)) <= 150, repr(wide)


def test_the_peak_source_is_one_short_line(resnet):
    _, r = resnet
    long = copy.deepcopy(r)
    long.texts["peak_source"] = ("measured: square float32 GEMMs (1024x1024x1024) on cpu, best 170 GFLOP/s of 11 "
                                 "repetitions; median 126, quartiles 123-152, min 116 GFLOP/s (spread 23 %). The "
                                 "spread is wide: the rate moved while it was measured (a loaded machine?)")
    (line,) = [t for t in long.format().splitlines() if t.startswith("peak source")]
    assert len(line) <= 18 + 1 + 100 and line.endswith("(the rest: peak_source)"), line
    assert "measured: square float32 GEMMs (1024x1024x1024) on cpu" in line
    assert long.peak_source.endswith("(a loaded machine?)")  # the whole text stays in the result
