"""Loads torchutil._C (which registers the util:: ops) and makes torch.ops.util.profile accept
eager models.

The dispatcher carries TorchScript modules and script objects, not Python objects: a schema
cannot name an nn.Module. So the C++ ops take `Any model`, and this module puts a thin packet
in front of the ops that take a model: it boxes an eager callable (nn.Module, torch.compile'd
module, function) in a util.PyModule script object, and passes TorchScript modules through.
Everything after that, counting and timing included, runs in C++.
"""
from __future__ import annotations

from typing import Any

import torch

REBUILD = "pip install --no-build-isolation --force-reinstall ."

try:
    from torchutil import _C
except ImportError as e:
    # A torch with another ABI (or without the CUDA libraries the build linked) fails here,
    # before the recorded version can be read.
    raise ImportError(f"torchutil: its extension (torchutil._C) does not load under torch {torch.__version__}: "
                      f"{e}. It was probably built against another torch; rebuild it for this one: "
                      f"{REBUILD}") from e


def _built_torch_version() -> str:
    """The torch.__version__ the extension was compiled against (recorded at build time)."""
    return _C._build_info()["torch_version"]


def check_torch_version() -> None:
    """ImportError unless the running torch is the one the extension was built against: the
    extension uses torch's C++ ABI, which changes between releases and builds (+cpu, +cu130)."""
    built, running = _built_torch_version(), torch.__version__
    if built != running:
        raise ImportError(f"torchutil was built against torch {built} but torch {running} is running; "
                          f"rebuild it for this torch: {REBUILD}")


check_torch_version()

_MODEL_OPS = ("profile", "_profile")


def as_dispatchable(model: Any) -> Any:
    """Returns model in a form the dispatcher can carry as `Any`."""
    if isinstance(model, (torch.jit.ScriptModule, torch.ScriptObject)):
        return model
    if not callable(model):
        raise TypeError(
            "torchutil: model must be an nn.Module, a TorchScript module or a callable, "
            f"got {type(model).__name__}"
        )
    return _C._wrap_module(model)


def counter_sets(counters: Any) -> list[str] | None:
    """counters= as the ops take it: None, or a list of set names ("flops", "throughput",
    "timeline", "all"); a single name is a list of one. The names are checked in C++."""
    if counters is None:
        return None
    if isinstance(counters, str):
        return [counters]
    if isinstance(counters, (list, tuple)) and all(isinstance(c, str) for c in counters):
        return list(counters)
    raise TypeError("torchutil: counters must be None, a counter set name ('flops', 'throughput', "
                    f"'timeline', 'all') or a list of them, got {counters!r}")


class ModelOpPacket:
    """torch.ops.util.<op> for ops whose first argument is a model.

    Calls box the model (see as_dispatchable) and go to the real OpOverloadPacket; attribute
    access (.default, .op, ._schema, ...) goes straight to it.
    """

    def __init__(self, packet: torch._ops.OpOverloadPacket) -> None:
        self._packet = packet
        self.__doc__ = packet.__doc__

    def __call__(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        if "counters" in kwargs:
            kwargs["counters"] = counter_sets(kwargs["counters"])
        return self._packet(as_dispatchable(model), *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._packet, name)

    def __repr__(self) -> str:
        return f"ModelOpPacket({self._packet!r})"


for _name in _MODEL_OPS:
    setattr(torch.ops.util, _name, ModelOpPacket(getattr(torch.ops.util, _name)))


def build_info() -> dict[str, Any]:
    """What this build of torchutil has compiled in: {'cuda': bool, 'cupti': bool,
    'torch_version': str (the torch it was built against)}."""
    return dict(_C._build_info())
