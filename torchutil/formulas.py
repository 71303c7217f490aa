"""Custom FLOP formulas: price an op torchutil has no formula for (a torch.library custom op,
a kernel package's op), in torchutil's convention (2 x multiply-accumulate; docs/counting.md).

    @torchutil.register_formula("mylib::scaled_mm")
    def _(a_shape, b_shape, scale, *, out_shape):
        m, k = a_shape
        return 2 * m * k * b_shape[1]          # matrix FLOPs

The formula goes into the one C++ registry the built-in formulas live in; a count then prices
each call of the op with it, and the op leaves `unknown_ops`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch

from torchutil import _ops  # noqa: F401  (loads torchutil._C)
from torchutil import _C  # type: ignore[attr-defined]

__all__ = ["register_formula", "registered_formula", "unregister_formula", "user_formulas"]

Formula = Callable[..., Any]


def _op_name(op: Any) -> str:
    """'ns::name' of an op given by name, as torch.ops.ns.name or as torch.ops.ns.name.overload
    (every overload of an op shares its formula, as the built-in formulas do)."""
    if isinstance(op, str):
        name = op
    elif isinstance(op, torch._ops.OpOverload):
        name = op._schema.name
    elif isinstance(op, torch._ops.OpOverloadPacket):
        name = op._qualified_op_name
    elif hasattr(op, "_opoverload"):  # torch.library.custom_op's CustomOpDef
        name = op._opoverload._schema.name
    else:
        raise TypeError(f"torchutil: an op is named by a string such as 'mylib::op' or by torch.ops.mylib.op, "
                        f"got {op!r}")
    if "::" not in name or "." in name.split("::", 1)[1]:
        raise ValueError(f"torchutil: an op name is 'namespace::name' without an overload, got {name!r}")
    return name


def register_formula(op: Any, fn: Formula | None = None, *, override: bool = False) -> Any:
    """Registers fn as the FLOP formula of op; without fn, returns a decorator that does.

    op: 'namespace::name' (as the dispatcher names it), torch.ops.ns.name, one of its overloads,
        or a torch.library.custom_op. One formula prices every overload.
    fn: called for each call of the op as fn(*arguments, out_shape=...): each tensor argument
        as its torch.Size (a list of tensors as a list of them), the others as passed (None
        where they have no Python value), out_shape the output's torch.Size (a tuple of them
        for several outputs). It returns the call's FLOPs in torchutil's convention, 2 per
        multiply-accumulate: an int (counted as matrix FLOPs, as FlopCounterMode's formulas
        count), or a dict with any of "matrix_flops", "vector_flops" and "bytes" (bytes read
        and written; by default the sizes of the op's tensors); None leaves the call unpriced
        (listed in unknown_ops). A formula that raises or returns anything else leaves the call
        unpriced with a warning saying why.
    override: replace an existing formula (a built-in one, which unregister_formula brings back,
        or one registered earlier); without it, that is a ValueError naming the op.

    Formulas cannot change while a count runs (RuntimeError).
    """
    name = _op_name(op)
    if fn is None:
        def decorator(f: Formula) -> Formula:
            _C._register_formula(name, f, override)
            return f
        return decorator
    _C._register_formula(name, fn, override)
    return fn


def unregister_formula(op: Any) -> None:
    """Removes the formula register_formula gave op (a built-in one it replaced comes back);
    ValueError where it has none."""
    _C._unregister_formula(_op_name(op))


@contextlib.contextmanager
def registered_formula(op: Any, fn: Formula, *, override: bool = False) -> Iterator[None]:
    """register_formula(op, fn) for the length of a with block, unregistered when it ends."""
    register_formula(op, fn, override=override)
    try:
        yield
    finally:
        unregister_formula(op)


def user_formulas() -> list[str]:
    """The ops with a formula registered by register_formula, sorted."""
    return list(_C._user_formulas())
