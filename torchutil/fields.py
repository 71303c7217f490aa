"""Names of the result tensor's fields, as defined once in C++ (csrc/core/Metrics.h)."""
from __future__ import annotations

import torch

from torchutil import _C, _ops  # noqa: F401  (registers the ops)

#: Field names of the float64 summary tensor returned by torch.ops.util.profile, in order.
FIELDS: tuple[str, ...] = tuple(torch.ops.util.result_fields())
#: What each field means, with units.
FIELD_DOCS: dict[str, str] = dict(zip(FIELDS, _C._field_descriptions()))
#: Columns of ProfileResult.op_table, in order.
OP_FIELDS: tuple[str, ...] = tuple(torch.ops.util.op_fields())
#: Columns of ProfileResult.kernel_table, in order.
KERNEL_FIELDS: tuple[str, ...] = tuple(torch.ops.util.kernel_fields())


def field(summary: torch.Tensor, name: str) -> torch.Tensor:
    """The named field of a summary tensor (or of a stack of them, on the last dimension)."""
    try:
        index = FIELDS.index(name)
    except ValueError:
        raise KeyError(f"torchutil: no result field {name!r}; fields are {', '.join(FIELDS)}") from None
    if summary.shape[-1] != len(FIELDS):
        raise ValueError(
            f"torchutil: a summary has {len(FIELDS)} fields on its last dimension, got shape "
            f"{tuple(summary.shape)}"
        )
    return summary[..., index]
