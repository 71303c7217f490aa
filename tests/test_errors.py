"""Bad input: a clear error that names the problem and the value, and nothing left behind (no
RecordFunction callback, no running count; the conftest fixture checks that after every test,
and each test here profiles again afterwards to show the state is usable)."""
from __future__ import annotations

import os
import threading
import warnings

import pytest
import torch
import torchvision.models as tvm

import torchutil
from conftest import module_hooks

PEAK = 1e12


@pytest.fixture
def linear():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 3).eval()


X = torch.randn(2, 4)
LINEAR_FLOPS = 2 * 2 * 4 * 3 + 2 * 3


def assert_clean_and_usable(model=None):
    assert torch.ops.util._live_callbacks() == 0
    assert torch.ops.util._counting() is False
    model = model if model is not None else torch.nn.Linear(4, 3)
    assert torchutil.profile(model, X, warmup=0, iters=1, peak_flops=PEAK).flops == LINEAR_FLOPS


@pytest.mark.parametrize("entry", ["profile", "op"])
def test_model_not_callable(entry):
    call = torchutil.profile if entry == "profile" else torch.ops.util.profile
    with pytest.raises(TypeError, match=r"model must be .*callable, got int"):
        call(42, X)
    with pytest.raises(TypeError, match=r"got str"):
        call("resnet18", X)
    assert_clean_and_usable()


def test_x_not_a_tensor(linear):
    with pytest.raises(TypeError, match=r"x must be a Tensor.*got str"):
        torchutil.profile(linear, "not a tensor")
    with pytest.raises(TypeError, match=r"got list"):
        torchutil.profile(linear, [X, 3])
    with pytest.raises(TypeError, match=r"got tuple"):
        torchutil.profile(linear, ())
    with pytest.raises(TypeError, match=r"x must be a Tensor.*got float"):
        torch.ops.util.profile(linear, 3.0)
    assert_clean_and_usable(linear)


def test_x_zero_dim(linear):
    with pytest.raises(ValueError, match="batch dimension, got a 0-d tensor"):
        torchutil.profile(linear, torch.tensor(1.0))
    with pytest.raises(ValueError, match="0-d"):
        torch.ops.util.profile(linear, torch.tensor(1.0))
    assert_clean_and_usable(linear)


@pytest.mark.parametrize("kwargs,message", [
    ({"iters": 0}, r"iters must be an integer in \[1, 10000000\], got 0"),
    ({"iters": -5}, r"iters must be an integer in \[1, 10000000\], got -5"),
    ({"warmup": -1}, r"warmup must be an integer in \[0, 10000000\], got -1"),
    ({"peak": "bogus"}, "peak must be 'auto', 'datasheet', 'computed' or 'measured', got 'bogus'"),
    ({"peak_flops": -1.0}, "peak_flops must be a finite number > 0, got -1"),
    ({"peak_flops": float("inf")}, "peak_flops must be a finite number > 0, got inf"),
])
def test_bad_options(linear, kwargs, message):
    model = CountsForwards(linear)
    with pytest.raises(ValueError, match=message):
        torchutil.profile(model, X, **kwargs)
    with pytest.raises(ValueError, match=message):
        torch.ops.util.profile(model, X, **kwargs)
    if "peak_flops" not in kwargs:
        assert model.calls == 0  # rejected before anything ran
    assert_clean_and_usable(linear)


class CountsForwards(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.inner(x)


def test_wrong_device(linear):
    # Parameters on meta, input on the CPU: the wrong-device case a CPU-only machine can build.
    meta = torch.nn.Linear(4, 3).to("meta")
    with pytest.raises(ValueError, match=r"input is on cpu but the model's parameters are on meta"):
        torchutil.profile(meta, X)
    with pytest.raises(ValueError, match=r"input is on meta but the model's parameters are on cpu"):
        torch.ops.util.profile(linear, X.to("meta"))
    with pytest.raises(ValueError, match=r"different devices: input 0 on cpu, input 1 on meta"):
        torchutil.profile(lambda a, b: a, (X, X.to("meta")))
    assert_clean_and_usable(linear)


def test_cuda_graph_needs_cuda_input(linear):
    with pytest.raises(ValueError, match=r"timing='cuda_graph' needs CUDA inputs, got cpu"):
        torchutil.profile(linear, X, cuda_graph=True)
    with pytest.raises(ValueError, match=r"timing='cuda_graph' needs CUDA inputs, got cpu"):
        torch.ops.util.profile(linear, X, timing="cuda_graph")
    assert_clean_and_usable(linear)


@pytest.mark.parametrize("option, refuse", [
    ("timing", lambda m, v: torch.ops.util.profile(m, X, timing=v)),
    ("peak", lambda m, v: torch.ops.util.profile(m, X, peak=v)),
    ("counters", lambda m, v: torch.ops.util.profile(m, X, counters=[v])),
    ("counter_replay", lambda m, v: torch.ops.util.profile(m, X, counter_replay=v)),
    ("peak", lambda m, v: torchutil.peak_flops("cpu", "float32", v)),
    ("peak", lambda m, v: torchutil.memory_bandwidth("cpu", v)),
])
def test_python_names_table_lists_what_the_cpp_parsers_take(linear, option, refuse):
    """_ops.CHOICES (the command line's choices, the Python messages) against the C++ parser
    itself: its refusal of an unknown name lists exactly the table's names."""
    import re

    from torchutil._ops import CHOICES

    with pytest.raises(ValueError) as refused:
        refuse(linear, "bogus")
    named = re.findall(r"'([^']+)'", str(refused.value).splitlines()[0])
    assert sorted(set(named) - {"bogus"}) == sorted(CHOICES[option]), str(refused.value)
    assert_clean_and_usable(linear)


def test_python_names_are_refused_with_the_table():
    from torchutil._ops import CHOICES, check_choice

    assert check_choice("timing", "auto", CHOICES["timing"]) == "auto"
    with pytest.raises(ValueError, match=r"^torchutil: timing must be one of 'eager', 'cuda_graph', 'auto', "
                                         r"got 'graph'$"):
        check_choice("timing", "graph", CHOICES["timing"])
    with pytest.raises(ValueError, match=r"^torchutil.nas: timing must be one of 'eager', 'cuda_graph', 'auto'"):
        from torchutil.studies.nas_evaluate import EvalConfig
        EvalConfig(timing="graph")
    with pytest.raises(TypeError, match=r"counters must be None, a counter set name \('flops', 'throughput', "
                                        r"'timeline', 'all'\) or a list of them, got 3"):
        torchutil.profile(torch.nn.Linear(4, 3), X, counters=3)


@pytest.mark.parametrize("kwargs, message", [
    ({"timing": "graph"}, r"timing must be 'eager', 'cuda_graph' or 'auto', got 'graph'"),
    ({"timing": "eager", "cuda_graph": True}, r"cuda_graph=True contradicts timing='eager'"),
    ({"target_ci": -0.1}, r"target_ci must be a number in \(0, 1\), got -0.1"),
    ({"target_ci": 2.0}, r"target_ci must be a number in \(0, 1\), got 2"),
    ({"target_ci": 0.0}, r"target_ci must be a number in \(0, 1\), got 0"),
    ({"target_ci": 0.01, "max_time": 0.0}, r"max_time must be a finite number > 0, got 0"),
    ({"max_time": 0.0}, r"max_time must be a finite number > 0, got 0"),  # without target_ci too
    ({"max_time": -1.0}, r"max_time must be a finite number > 0, got -1"),
    ({"warmup": 2**40}, r"warmup must be an integer in \[0, 10000000\], got 1099511627776"),
    ({"trace_forwards": 2**40}, r"trace_forwards must be an integer in \[0, 10000000\], got 1099511627776"),
    ({"batch_size": 0}, r"batch_size must be an integer >= 1, got 0"),
    ({"target_ci": 0.01, "iters": 10, "max_iters": 5}, r"max_iters must be >= iters \(10\), got 5"),
    ({"iters": 5, "max_iters": 8}, r"max_iters applies with target_ci.*got max_iters=8"),
    ({"iters": 2**40}, r"iters must be an integer in \[1, 10000000\], got 1099511627776"),
    ({"target_ci": 0.01, "max_time": float("inf")}, r"max_time must be a finite number > 0, got inf"),
    ({"trace_forwards": -1}, r"trace_forwards must be an integer in \[0, 10000000\], got -1"),
])
def test_bad_timing_arguments_are_named_before_anything_runs(linear, kwargs, message):
    with pytest.raises(ValueError, match=message):
        torchutil.profile(linear, X, **kwargs)
    assert_clean_and_usable(linear)


class ModelError(Exception):
    pass


class Raises(torch.nn.Module):
    def __init__(self, exc, on_call=1):
        super().__init__()
        self.exc, self.on_call, self.calls = exc, on_call, 0
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.calls += 1
        x = self.fc(x)
        if self.calls == self.on_call:
            raise self.exc
        return x


@pytest.mark.parametrize("on_call", [1, 2, 3])  # in warm-up, the counted forward, timing
def test_exception_in_forward_propagates(linear, on_call):
    model = Raises(ModelError("shape mismatch in block 7"), on_call)
    with pytest.raises(ModelError, match="shape mismatch in block 7"):
        torchutil.profile(model, X, warmup=2, iters=3, peak_flops=PEAK)
    model = Raises(ValueError("bad value 0.5"), on_call)
    with pytest.raises(ValueError, match="bad value 0.5"):
        torch.ops.util.profile(model, X, warmup=2, iters=3, peak_flops=PEAK)
    assert_clean_and_usable(linear)


@pytest.mark.parametrize("warmup", [0, 1])  # raised while counting, or while timing
def test_keyboard_interrupt_in_forward(linear, warmup):
    model = Raises(KeyboardInterrupt(), on_call=warmup + 1 if warmup else 1)
    with pytest.raises(KeyboardInterrupt):
        torchutil.profile(model, X, warmup=warmup, iters=2, peak_flops=PEAK)
    assert_clean_and_usable(linear)


def test_exception_inside_profiler_block(linear):
    with pytest.raises(ModelError, match="inside the block"):
        with torchutil.Profiler(peak_flops=PEAK) as prof:
            linear(X)
            raise ModelError("inside the block")
    assert prof.result is None
    with pytest.raises(KeyboardInterrupt):
        with torchutil.Profiler(linear, peak_flops=PEAK):
            raise KeyboardInterrupt
    assert_clean_and_usable(linear)


class ProfilesItself(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        torchutil.profile(self.inner, x, warmup=0, iters=1, peak_flops=PEAK)
        return self.inner(x)


def test_nested_profile_in_forward(linear):
    with pytest.raises(RuntimeError, match="nested"):
        torchutil.profile(ProfilesItself(linear), X, warmup=0, iters=1, peak_flops=PEAK)
    assert_clean_and_usable(linear)


def test_nested_profilers(linear):
    with pytest.raises(RuntimeError, match="nested"):
        with torchutil.Profiler(peak_flops=PEAK):
            with torchutil.Profiler(peak_flops=PEAK):
                pass
    with pytest.raises(RuntimeError, match="nested"):
        with torchutil.Profiler(peak_flops=PEAK):
            torchutil.profile(linear, X)
    assert_clean_and_usable(linear)


def test_outer_profiler_survives_a_rejected_inner_one(linear):
    with torchutil.Profiler(peak_flops=PEAK) as outer:
        linear(X)
        with pytest.raises(RuntimeError, match="nested"):
            with torchutil.Profiler(peak_flops=PEAK):
                pass
        linear(X)
    assert outer.result.flops == 2 * LINEAR_FLOPS
    assert_clean_and_usable(linear)


def test_bad_profiler_arguments(linear):
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        torchutil.Profiler(batch_size=0)
    with pytest.raises(ValueError, match="peak must be 'auto', 'datasheet', 'computed' or 'measured', got 'bogus'"):
        torchutil.Profiler(peak="bogus")  # before the block runs, not when it ends
    with pytest.raises(ValueError, match="peak_flops must be a finite number > 0, got -3"):
        torchutil.Profiler(peak_flops=-3.0)
    with pytest.raises(TypeError, match=r"peak_flops must be a number or None, got 'x' \(str\)"):
        torchutil.Profiler(peak_flops="x")
    with pytest.raises(ValueError, match=r"batch_size must fit a 64-bit int \(-9223372036854775808 \.\. "
                                         r"9223372036854775807\), got 9223372036854775808"):
        torchutil.Profiler(batch_size=2**63)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got True"):
        torchutil.Profiler(batch_size=True)  # a bool is not a count
    with pytest.raises(ValueError, match=r"device must be a torch.device or a device string .*got 'bogus'"):
        torchutil.Profiler(device="bogus")
    with pytest.raises(TypeError, match=r"model must be an nn.Module .* or None, got str"):
        torchutil.Profiler("resnet18")
    with pytest.raises(RuntimeError, match=r"__exit__ without __enter__"):
        torchutil.Profiler().__exit__(None, None, None)
    p = torchutil.Profiler(linear, peak_flops=PEAK)
    with p:
        linear(X)
    with pytest.raises(RuntimeError, match=r"__exit__ without __enter__"):  # not twice either
        p.__exit__(None, None, None)
    assert_clean_and_usable(linear)


def test_bad_peak_requests():
    with pytest.raises(ValueError, match="got 'bogus'"):
        torchutil.peak_flops("cpu", torch.float32, "bogus")
    with pytest.raises(ValueError, match="unknown dtype 'float7'"):
        torchutil.peak_flops("cpu", "float7")
    with pytest.raises(ValueError, match="not for cpu"):
        torchutil.peak_flops("cpu", torch.float32, "datasheet")


def test_two_threads_profile_at_once():
    torch.manual_seed(0)
    models = {"resnet18": tvm.resnet18(weights=None).eval(),
              "mobilenet_v3_small": tvm.mobilenet_v3_small(weights=None).eval()}
    x = torch.randn(1, 3, 64, 64)

    def summary(result):
        return (result.matrix_flops, result.vector_flops, result.bytes,
                [(r.op, r.module, r.calls) for r in result.ops])

    alone = {name: summary(torchutil.profile(m, x, warmup=0, iters=1, peak_flops=PEAK))
             for name, m in models.items()}
    barrier = threading.Barrier(len(models))
    seen: dict[str, list] = {name: [] for name in models}
    errors: list[BaseException] = []

    def work(name):
        try:
            barrier.wait()
            for _ in range(6):
                result = torchutil.profile(models[name], x, warmup=1, iters=2, peak_flops=PEAK)
                seen[name].append(summary(result))
            assert torch.ops.util._counting() is False
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(name,)) for name in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name in models:
        assert len(seen[name]) == 6
        for s in seen[name]:
            # FLOPs, bytes and the module of every row as when profiled alone: the other
            # thread's ops and module hooks do not leak into this thread's count.
            assert s == alone[name], name


@pytest.mark.parametrize("kwargs, message", [
    ({"warmup": True}, r"warmup must be an int, got True \(bool\)"),
    ({"iters": 2.0}, r"iters must be an int, got 2.0 \(float\)"),
    ({"trace": 1}, r"trace must be a bool \(True or False\), got 1 \(int\)"),
    ({"peak": None}, r"peak must be a str, got None \(NoneType\)"),
    ({"max_time": "2"}, r"max_time must be a number, got '2' \(str\)"),
    ({"batch_size": 2.5}, r"batch_size must be an int or None, got 2.5 \(float\)"),
    ({"timing": 3}, r"timing must be a str or None, got 3 \(int\)"),
])
def test_wrong_typed_options_are_named_not_the_schema_dumped(linear, kwargs, message):
    model = CountsForwards(linear)
    for call in (torchutil.profile, torch.ops.util.profile):
        with pytest.raises(TypeError, match=message):
            call(model, X, **kwargs)
    assert model.calls == 0  # rejected before anything ran
    assert_clean_and_usable(linear)


@pytest.mark.parametrize("kwargs, message", [
    ({"warmup": 2**63}, r"warmup must fit a 64-bit int \(-9223372036854775808 \.\. 9223372036854775807\), "
                        r"got 9223372036854775808"),
    ({"iters": 2**63}, r"iters must fit a 64-bit int .*, got 9223372036854775808"),
    ({"batch_size": 2**63}, r"batch_size must fit a 64-bit int .*, got 9223372036854775808"),
    ({"max_iters": -2**63 - 1}, r"max_iters must fit a 64-bit int .*, got -9223372036854775809"),
    ({"peak_flops": 10**400}, r"peak_flops must be a number within a double's range \(about 1.8e308\), got an int "
                              r"of 1329 bits"),
])
def test_out_of_range_options_are_one_line_not_the_schema_dumped(linear, kwargs, message):
    """The report's 2**63 cases: the dispatcher dumped its schema (about 700 characters)."""
    model = CountsForwards(linear)
    for call in (torchutil.profile, torch.ops.util.profile):
        with pytest.raises(ValueError, match=message) as info:
            call(model, X, **kwargs)
        assert "Declaration" not in str(info.value) and "\n" not in str(info.value)
    assert model.calls == 0
    assert_clean_and_usable(linear)


def test_utilization_takes_numbers_and_names_a_wrong_argument():
    """torchutil.utilization(1e9, 1.0, 1e12) dumped the op's schema."""
    assert torchutil.utilization(1e9, 1.0, 1e12).item() == pytest.approx(1e-3)
    assert torchutil.utilization(torch.tensor([2e9]), 2, 1e12).tolist() == pytest.approx([1e-3])
    with pytest.raises(TypeError, match="utilization's seconds must be a tensor or a number, got str"):
        torchutil.utilization(1e9, "1", 1e12)


def test_helpers_name_a_wrong_argument(linear):
    """roofline(None), fold(None, 2) and top_ops(by='bogus') were bare AttributeErrors."""
    result = torchutil.profile(linear, X, warmup=0, iters=1, peak_flops=PEAK)
    with pytest.raises(TypeError, match="roofline takes the ProfileResult .*, got NoneType"):
        torchutil.roofline(None)
    with pytest.raises(TypeError, match=r"fold takes a CNN \(an nn.Module\), got NoneType"):
        torchutil.fold(None, 2)
    with pytest.raises(ValueError, match=r"top_ops\(by=\) takes one of flops, calls, .*got 'bogus'"):
        result.top_ops(by="bogus")
    with pytest.raises(ValueError, match=r"top_ops\(n=\) takes an int >= 0, got -1"):
        result.top_ops(n=-1)  # it dropped the last row
    assert result.top_ops(by="bytes", n=1) == sorted(result.ops, key=lambda r: -r.bytes)[:1]


def test_a_source_tree_without_its_extension_says_so(tmp_path):
    """`import torchutil` from a checkout's root imports the source tree, which has no built
    extension: the message said "built against another torch; rebuild it"."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    package = Path(torchutil.__file__).parent
    shutil.copytree(package, tmp_path / "torchutil", ignore=shutil.ignore_patterns("_C.*", "__pycache__"))
    # -S: no site hooks (an editable install's finder would supply its own _C); torch from its folder.
    site = str(Path(torch.__file__).parents[1])
    p = subprocess.run([sys.executable, "-S", "-c", "import torchutil"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": site})
    assert p.returncode == 1
    assert f"torchutil: {tmp_path / 'torchutil'} has no built extension (torchutil._C): this is a source tree" in p.stderr
    assert "another torch" not in p.stderr


def test_an_unknown_option_is_named_with_the_ones_there_are(linear):
    with pytest.raises(TypeError, match=r"profile\(\) got an unexpected keyword argument 'itters'; its options "
                                        r"are warmup, iters, timing"):
        torch.ops.util.profile(linear, X, itters=3)
    # The summary op takes no per-op options.
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'module_paths'"):
        torch.ops.util.profile(linear, X, module_paths=False)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'itters'"):
        torchutil.profile(linear, X, itters=3)
    assert_clean_and_usable(linear)


def test_inputs_given_twice_or_not_at_all(linear):
    with pytest.raises(TypeError, match=r"pass the inputs as x or as args=/kwargs=, not both"):
        torchutil.profile(linear, X, args=(X,))
    with pytest.raises(TypeError, match=r"profile needs the model's inputs"):
        torchutil.profile(linear)
    with pytest.raises(TypeError, match=r"args/kwargs hold no tensor"):
        torch.ops.util.profile(linear, args=(3,))
    with pytest.raises(TypeError, match=r"args must be a tuple .*got Tensor"):
        torchutil.profile(linear, args=X)
    with pytest.raises(TypeError, match=r"kwargs must be a dict .*got list"):
        torchutil.profile(linear, kwargs=[X])
    with pytest.raises(ValueError, match=r"cannot tell the batch size from args/kwargs.*pass batch_size="):
        torchutil.profile(lambda v: linear(v[None]), args=(torch.randn(4),))
    assert_clean_and_usable(linear)


def test_ctrl_c_inside_the_hooks_removal_removes_them_and_reaches_the_caller(linear, monkeypatch):
    """A Ctrl-C pending when the module hooks are removed is raised inside
    RemovableHandle.remove() (Python code): it was discarded there as unraisable, with the hook
    left installed and the profile timing on. Now the hooks go and the KeyboardInterrupt comes out
    of the call (of a Profiler block too), whatever SIGINT's disposition (a background job's
    children start with it ignored). The signal is stood in for by a remove() that raises it.
    Global hooks serve a root that is not an eager nn.Module: here a function and a scripted
    module."""
    import torch.utils.hooks

    original = torch.utils.hooks.RemovableHandle.remove
    raised = []

    def interrupted_once(self):
        if len(raised) < want:
            raised.append(self.id)
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(torch.utils.hooks.RemovableHandle, "remove", interrupted_once)
    model = CountsForwards(linear)
    for want in (1, 2):  # an interrupt in the first removal, and in both
        raised.clear()
        with pytest.raises(KeyboardInterrupt):
            torchutil.profile(lambda v: model(v), X, warmup=0, iters=10**6, peak_flops=PEAK, timing="eager")
        assert len(raised) == want and module_hooks() == 0
        assert model.calls < 10**5  # the timing loop stopped at its next signal check
    raised.clear()
    want = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated
        scripted = torch.jit.script(linear)
    with pytest.raises(KeyboardInterrupt):
        with torchutil.Profiler(scripted, peak_flops=PEAK):
            scripted(X)
    assert len(raised) == 1 and module_hooks() == 0
    monkeypatch.undo()
    assert_clean_and_usable(linear)


def test_ctrl_c_while_the_hooks_are_installed_leaves_none(linear, monkeypatch):
    """An interrupt between installing the pre-hook and the post-hook: the pre-hook goes too."""
    import torch.nn.modules.module as module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "register_module_forward_hook", interrupted)
    with pytest.raises(KeyboardInterrupt):
        torchutil.profile(lambda v: linear(v), X, warmup=0, iters=1, peak_flops=PEAK)
    assert module_hooks() == 0
    monkeypatch.undo()
    assert_clean_and_usable(linear)
