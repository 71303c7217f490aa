"""torchutil: how well a model uses the GPU (or CPU) during inference.

    import torch, torchutil
    summary = torch.ops.util.profile(model, x)        # float64 tensor, fields in FIELDS
    result = torchutil.profile(model, x)             # ProfileResult: summary, per-op table, ...
    with torchutil.Profiler() as prof: ...           # count any code

FLOPs and bytes are counted in C++ on the dispatcher path; the FLOP convention (2 x
multiply-accumulate; matrix versus vector FLOPs) is documented in docs/counting.md.
"""
from torchutil import _ops  # noqa: F401  (loads torchutil._C and the util:: ops)
from torchutil._ops import build_info
from torchutil.fields import FIELDS, KERNEL_FIELDS, OP_FIELDS, field
from torchutil.peaks import peak_flops
from torchutil.profiler import OpRow, ProfileResult, Profiler, profile, utilization

__all__ = [
    "FIELDS",
    "KERNEL_FIELDS",
    "OP_FIELDS",
    "OpRow",
    "ProfileResult",
    "Profiler",
    "build_info",
    "field",
    "peak_flops",
    "profile",
    "utilization",
]
__version__ = "0.1.0"
