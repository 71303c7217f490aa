"""The eager forward of a model that runs torch.compile'd code, for the count (docs/counting.md,
"Compiled models"). The profile's C++ (csrc/python/PyModule.cpp) calls run_eager, which this
module registers with it when imported (torchutil._C._set_callback).

torch.compile's force_eager stance runs every compiled frame's own Python code, without looking
up or compiling anything, so that every op passes the dispatcher and the compiled code and its
guards are left as they were. FlexAttention's higher-order op, which is no dispatcher op, is
run inside torchutil::flex_attention, a dispatcher op that carries its shapes and the blocks its
BlockMask computes to the formula registry (csrc/core/FormulasAttention.cpp).
"""
from __future__ import annotations

import contextlib
import math
import sys
from typing import Any, Callable, Iterator

import torch

from torchutil._ops import _C

__all__ = ["CountedAs", "run_eager", "uncounted_reason"]


class CountedAs:
    """A model timed as given and counted as `eager` (torchutil.profile's count_as=): an
    AOTInductor package, whose kernels the dispatcher never sees, counted as the program it was
    exported from. The profile treats it as compiled code (csrc/python/PyModule.cpp): its
    forwards run `model`, its count runs `eager` (run_eager) on the same inputs."""

    def __init__(self, model: Callable[..., Any], eager: Callable[..., Any]) -> None:
        self.model = model
        self.eager = eager

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{self.model!r} counted as {type(self.eager).__name__}"


def _aoti_model_class() -> type | None:
    """torch's class of a loaded AOTInductor package, where one can exist: a package is loaded
    through torch._inductor.package, so without it imported there is none (and it is not
    imported here: seconds)."""
    package = sys.modules.get("torch._inductor.package")
    return getattr(package, "AOTICompiledModel", None)


def uncounted_reason(model: Any) -> str:
    """Why model's FLOPs cannot be counted, one line; "" when they can."""
    aoti = _aoti_model_class()
    if aoti is not None and isinstance(model, aoti):
        return ("an AOTInductor package (torch._inductor.aoti_load_package) runs compiled kernels the dispatcher "
                "never sees: its FLOPs are not counted; pass count_as= the torch.export.ExportedProgram it was "
                "compiled from to count them")
    return ""


def run_eager(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """fn(*args, **kwargs) as eager PyTorch (a CountedAs runs its eager model). Without
    torch._dynamo imported nothing can be compiled, and it is not imported here. The stance is
    process-wide: compiled code other threads run meanwhile runs eagerly too."""
    if isinstance(fn, CountedAs):
        fn = fn.eager
    if "torch._dynamo" not in sys.modules:
        return fn(*args, **kwargs)
    with torch.compiler.set_stance("force_eager"), _flex_attention_priced():
        return fn(*args, **kwargs)


# ---- FlexAttention ------------------------------------------------------------------------------

_pending: list[Callable[[], Any]] = []  # the higher-order op's call, for torchutil::flex_attention


@torch.library.custom_op("torchutil::flex_attention", mutates_args=())
def _flex_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    computed_blocks: int, total_blocks: int) -> list[torch.Tensor]:
    """Runs the pending flex_attention call, so that the ops of its eager implementation run
    inside this op and the registry prices the call as one: the shapes of query, key and value
    and, of the (query block, key block) pairs of its BlockMask, the computed ones."""
    out = _pending.pop()()
    return [t.clone() if t is query or t is key or t is value else t for t in out if t is not None]


class _BlockMaskProbe:
    """Stands in for a BlockMask in BlockMask.as_tuple, which only reads attributes: each reads
    as its own name, so the tuple says where it puts each (no tensor is made: this runs inside
    the count)."""

    BLOCK_SIZE = ("Q_BLOCK_SIZE", "KV_BLOCK_SIZE")
    seq_lengths = ("Q_LEN", "KV_LEN")

    def __getattr__(self, name: str) -> str:
        return name


def _block_mask_fields(module: Any) -> tuple[int, int, int]:
    """Where BlockMask.as_tuple() puts kv_num_blocks, full_kv_num_blocks and the KV block size
    (the layout changes between torch versions)."""
    fields = list(module.BlockMask.as_tuple(_BlockMaskProbe()))
    return fields.index("kv_num_blocks"), fields.index("full_kv_num_blocks"), fields.index("KV_BLOCK_SIZE")


@contextlib.contextmanager
def _flex_attention_priced() -> Iterator[None]:
    module = sys.modules.get("torch.nn.attention.flex_attention")
    hop = getattr(module, "flex_attention_hop", None)
    if hop is None:
        yield  # flex_attention not imported, or a torch whose flex_attention calls its op otherwise
        return
    try:
        kv_at, full_at, kv_block_at = _block_mask_fields(module)
    except (AttributeError, TypeError, ValueError):
        yield  # a BlockMask laid out otherwise: flex_attention is counted as its eager ops
        return

    def priced(query, key, value, score_mod, block_mask, *rest, **kwargs):
        kv, full = block_mask[kv_at], block_mask[full_at]
        computed = int(kv.sum()) + (int(full.sum()) if full is not None else 0)  # reads the device
        total = kv.numel() * math.ceil(key.shape[-2] / block_mask[kv_block_at])
        result: list[Any] = []

        def call():
            result.append(hop(query, key, value, score_mod, block_mask, *rest, **kwargs))
            return result[0]

        _pending.append(call)
        try:
            _flex_attention(query, key, value, computed, total)
        finally:
            if _pending and _pending[-1] is call:
                _pending.pop()
        return result[0]

    module.flex_attention_hop = priced
    try:
        yield
    finally:
        module.flex_attention_hop = hop


_C._set_callback("run_eager", run_eager)  # what the count's eager forward calls
_C._set_callback("uncounted_reason", uncounted_reason)  # what a profile asks of every model it runs
