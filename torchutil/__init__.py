"""torchutil: how well a model uses the GPU (or CPU) during inference.

    import torch, torchutil
    summary = torch.ops.util.profile(model, x)        # float64 tensor, fields in FIELDS
    result = torchutil.profile(model, x)             # ProfileResult: summary, per-op table, ...
    with torchutil.Profiler() as prof: ...           # count any code
    torchutil.roofline(result)                       # each op on the device's roofline
    torchutil.fold(model, f)                         # the FoldedCNN of a CNN
    torchutil.profile_generate(lm, ids, 64)          # prefill and decode steps of an LLM

FLOPs and bytes are counted in C++ on the dispatcher path; the FLOP convention (2 x
multiply-accumulate; matrix versus vector FLOPs) is documented in docs/counting.md.
"""
from torchutil import _ops  # noqa: F401  (loads torchutil._C and the util:: ops)
from torchutil import _eager  # noqa: F401  (defines torchutil::flex_attention, registers run_eager with the C++)
from torchutil import _inductor  # noqa: F401  (registers Inductor's Recording with the C++)
from torchutil._ops import build_info
from torchutil._version import __version__ as __version__  # re-exported
from torchutil.fields import (FIELDS, KERNEL_FIELDS, OP_FIELDS, ROOFLINE_FIELDS, TEXT_FIELDS, FieldSpec,
                              field, schema)
from torchutil.folding import FoldedModel, fold
from torchutil.formulas import register_formula, registered_formula, unregister_formula, user_formulas
from torchutil.gpu_sharing import default_gpu_lock
from torchutil.generation import GenerationResult, GenerationRow, plot_generation, profile_generate
from torchutil.peaks import peak_flops
from torchutil.profiler import Profiler, free_capture_pools, profile, utilization
from torchutil.result import KernelRow, OpRow, ProfileResult, UnknownOp
from torchutil.rooflines import (RooflineResult, RooflineRow, memory_bandwidth, roofline,
                                 roofline_utilization)

__all__ = [
    "FIELDS",
    "FieldSpec",
    "FoldedModel",
    "GenerationResult",
    "GenerationRow",
    "KERNEL_FIELDS",
    "KernelRow",
    "OP_FIELDS",
    "OpRow",
    "ProfileResult",
    "Profiler",
    "RooflineResult",
    "ROOFLINE_FIELDS",
    "RooflineRow",
    "build_info",
    "default_gpu_lock",
    "field",
    "fold",
    "free_capture_pools",
    "memory_bandwidth",
    "peak_flops",
    "plot_generation",
    "profile",
    "profile_generate",
    "register_formula",
    "registered_formula",
    "roofline",
    "roofline_utilization",
    "schema",
    "TEXT_FIELDS",
    "UnknownOp",
    "unregister_formula",
    "user_formulas",
    "utilization",
]
