"""Shared test setup: device parametrization, the CUDA skip, and the no-leak check.

Tests that need a GPU carry @pytest.mark.cuda (declared in pyproject.toml) and are skipped at
collection time where torch.cuda.is_available() is False, so the suite collects and passes on a
CPU-only machine.
"""
from __future__ import annotations

import pytest
import torch

import torchutil  # noqa: F401  (registers torch.ops.util)


def cpu_and_cuda():
    """Parameter values for a `device` argument: "cpu", and "cuda" carrying the cuda mark
    (torchvision's tests/common_utils.py helper of the same name)."""
    return ("cpu", pytest.param("cuda", marks=pytest.mark.cuda))


def pytest_collection_modifyitems(config, items):
    # torch.profiler leaves Kineto's CUPTI subscriber in the process, after which a traced
    # profile cannot subscribe to CUPTI's graph-node callbacks (it traces an eager counted
    # forward instead, and says so): the tests that run it go last.
    items.sort(key=lambda item: item.get_closest_marker("torch_profiler") is not None)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


def module_hooks() -> int:
    import torch.nn.modules.module as module

    return len(module._global_forward_pre_hooks) + len(module._global_forward_hooks)


@pytest.fixture(autouse=True)
def no_callback_survives():
    """Every test, whatever it does (errors included), must leave no RecordFunction callback
    registered, no count running on this thread, no global module hook more than it found
    (module paths of a root that is not an eager nn.Module use them) and no module's forward
    wrapped (module paths of an eager nn.Module)."""
    from torchutil import _C

    hooks = module_hooks()
    yield
    wrapped = _C._wrapped_forwards()
    assert wrapped == 0, f"{wrapped} module forward(s) still wrapped after the test"
    live = torch.ops.util._live_callbacks()
    assert live == 0, f"{live} torchutil RecordFunction callback(s) survived the test"
    assert torch.ops.util._counting() is False, "a torchutil count is still running"
    assert module_hooks() <= hooks, f"{module_hooks() - hooks} global module hook(s) survived the test"
