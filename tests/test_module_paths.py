"""Module paths of an eager nn.Module root: each named module's forward is wrapped for the
counted forward (csrc/python/ModuleForwards.cpp) instead of global module hooks, which put every
module call on nn.Module's slow path. What must hold: the paths (oracle: FlopCounterMode's own
per-module breakdown, torch's ModuleTracker), nothing left behind after any call, and the module
behaving as itself while wrapped (its signature, copies, pickles, other threads)."""

import copy
import inspect
import pickle
import threading
import warnings

import pytest
import torch
import torchvision.models as tvm
from torch.utils.flop_counter import FlopCounterMode

import torchutil
from torchutil import _C

PEAK = 1e12


def nothing_wrapped(model):
    return _C._wrapped_forwards() == 0 and not any(
        type(m.__dict__.get("forward")).__name__ == "WrappedForward" for m in model.modules())


def test_paths_match_flopcountermodes_module_breakdown():
    """Every module FlopCounterMode names (its ModuleTracker, torch's own) holds the same matrix
    FLOPs in our rows under that path; on resnet18 its conv and addmm formulas are exact."""
    torch.manual_seed(0)
    model = tvm.resnet18(weights=None).eval()
    x = torch.randn(2, 3, 64, 64)
    with FlopCounterMode(display=False) as fcm:
        model(x)
    theirs = {name.partition(".")[2]: sum(ops.values()) for name, ops in fcm.get_flop_counts().items()
              if name.startswith("ResNet.")}
    result = torchutil.profile(model, x, warmup=0, iters=1, peak_flops=PEAK)
    assert nothing_wrapped(model)
    ours = {name: sum(r.matrix_flops for r in result.ops if r.module == name or r.module.startswith(name + "."))
            for name in theirs}
    assert len(theirs) == 36 and ours == theirs  # 20 convs (3 in downsamples), fc, 8 blocks, 4 layers, 3 downsamples


def test_a_forward_that_raises_leaves_nothing_wrapped_and_the_next_call_works():
    class Fails(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)
            self.fail = True

        def forward(self, x):
            y = self.inner(x)
            if self.fail:
                raise ValueError("bad forward")
            return y

    model = Fails()
    with pytest.raises(ValueError, match="bad forward"):
        torchutil.profile(model, torch.randn(2, 4), warmup=0, iters=1, peak_flops=PEAK)
    assert nothing_wrapped(model)
    model.fail = False
    result = torchutil.profile(model, torch.randn(2, 4), warmup=0, iters=1, peak_flops=PEAK)
    assert {r.module for r in result.ops if r.op == "aten::addmm"} == {"inner"}
    assert nothing_wrapped(model)


def test_a_forward_set_on_the_instance_is_wrapped_and_put_back():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    own = model[0].forward

    def patched(x):  # as accelerate and users do: an instance attribute in place of forward
        return own(x) * 2

    model[0].forward = patched
    result = torchutil.profile(model, torch.randn(2, 4), warmup=0, iters=1, peak_flops=PEAK)
    rows = {(r.op, r.module) for r in result.ops}
    assert ("aten::addmm", "0") in rows and ("aten::mul", "0") in rows and ("aten::relu", "1") in rows
    assert model[0].__dict__["forward"] is patched and "forward" not in model[1].__dict__
    assert _C._wrapped_forwards() == 0


def test_a_wrapped_module_behaves_as_itself():
    """Inside a Profiler block: the forward's signature, name and owner are the original's; a
    deep copy and a pickle carry the original forward, not the wrapper; all of it leaves the
    model as it was."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    want = inspect.signature(model[0].forward)
    with torch.inference_mode(), torchutil.Profiler(model, peak_flops=PEAK) as prof:
        forward = model[0].forward
        assert type(forward).__name__ == "WrappedForward"  # it is wrapped here
        assert inspect.signature(forward) == want
        assert forward.__name__ == "forward" and forward.__self__ is model[0]
        assert "Linear" in repr(forward)
        copied = copy.deepcopy(model)
        loaded = pickle.loads(pickle.dumps(model))
        model(torch.randn(2, 4))
    assert {r.module for r in prof.result.ops if r.op == "aten::addmm"} == {"0"}
    assert nothing_wrapped(model)
    for other in (copied, loaded):
        assert _C._wrapped_forwards() == 0
        assert other[0].forward.__self__ is other[0]  # bound to the copy, not to model
        x = torch.randn(2, 4)
        torch.testing.assert_close(other(x), torch.nn.functional.linear(x, other[0].weight, other[0].bias))


def test_a_module_the_root_does_not_name_counts_in_its_caller():
    """A module held in a plain list is not one of root.named_modules(): its ops are its
    caller's (global hooks named it by type; the wrappers only know the named ones)."""

    class Listed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.named = torch.nn.Linear(4, 4)
            self.hidden = [torch.nn.Linear(4, 4)]

        def forward(self, x):
            return self.hidden[0](self.named(x))

    model = Listed()
    result = torchutil.profile(model, torch.randn(2, 4), warmup=0, iters=1, peak_flops=PEAK)
    addmm = {r.module: r.calls for r in result.ops if r.op == "aten::addmm"}
    assert addmm == {"named": 1, "": 1}
    assert nothing_wrapped(model) and "forward" not in model.hidden[0].__dict__


def test_a_scripted_submodule_of_an_eager_model_has_its_path():
    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated
                self.scripted = torch.jit.script(torch.nn.Linear(4, 4))
            self.eager = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.eager(self.scripted(x))

    model = Outer()
    method = model.scripted.__dict__["forward"]  # a ScriptMethod, in the instance's __dict__
    result = torchutil.profile(model, torch.randn(2, 4), warmup=0, iters=1, peak_flops=PEAK)
    mm = {r.module for r in result.ops if r.op in ("aten::addmm", "aten::linear")}
    assert mm == {"scripted", "eager"}, [(r.op, r.module) for r in result.ops]
    assert nothing_wrapped(model) and model.scripted.__dict__["forward"] is method


def test_one_model_profiled_by_two_threads_at_once():
    """The same modules wrapped for two live scopes (one per thread): each thread's rows as when
    profiled alone, and the wrappers gone once both are done, whichever ends last."""
    torch.manual_seed(0)
    model = tvm.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 32, 32)

    def summary(result):
        return [(r.op, r.module, r.calls, r.matrix_flops) for r in result.ops]

    alone = summary(torchutil.profile(model, x, warmup=0, iters=1, peak_flops=PEAK))
    barrier = threading.Barrier(2)
    seen: list = []
    errors: list = []

    def work():
        try:
            barrier.wait()
            for _ in range(5):
                seen.append(summary(torchutil.profile(model, x, warmup=0, iters=1, peak_flops=PEAK)))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(seen) == 10 and all(s == alone for s in seen)
    assert nothing_wrapped(model)


def test_another_threads_calls_are_not_counted_or_named():
    """While one thread's Profiler block is open, another thread runs the same model: its ops
    are not in the block's count, and its calls go through the wrapper unchanged."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    outputs = []
    with torch.inference_mode(), torchutil.Profiler(model, peak_flops=PEAK) as prof:
        other = threading.Thread(target=lambda: outputs.append(model(torch.ones(2, 4))))
        other.start()
        other.join()
        model(torch.ones(3, 4))
    assert outputs[0].shape == (2, 4)
    rows = [(r.op, r.module, r.calls) for r in prof.result.ops if r.op == "aten::addmm"]
    assert rows == [("aten::addmm", "0", 1)]
    assert prof.result.matrix_flops == 2 * 3 * 4 * 4
    assert nothing_wrapped(model)


def test_names_are_named_modules_own_for_shared_and_missing_children():
    """The names are walked in C++ over the _modules dicts: they must be named_modules()'s
    (oracle: torch's own), with a module reached twice named at its first path and a None
    child skipped."""
    shared = torch.nn.Linear(4, 4)

    class Tree(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = shared
            self.blocks = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(4, 4), shared)])
            self.register_module("absent", None)
            self.heads = torch.nn.ModuleDict({"out": torch.nn.Linear(4, 2)})

        def forward(self, x):
            return self.heads["out"](self.blocks[0](self.first(x)))

    model = Tree()
    names = dict((id(m), n) for n, m in model.named_modules())
    result = torchutil.profile(model, torch.randn(2, 4), warmup=0, iters=1, peak_flops=PEAK)
    addmm = {r.module: r.calls for r in result.ops if r.op == "aten::addmm"}
    assert addmm == {names[id(shared)]: 2, names[id(model.blocks[0][0])]: 1, names[id(model.heads["out"])]: 1}
    assert addmm == {"first": 2, "blocks.0.0": 1, "heads.out": 1}
    assert nothing_wrapped(model)
