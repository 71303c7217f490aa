"""Profile a model: utilization, FLOPs, the ops that cost the most.

    python examples/profile_model.py

It profiles torchvision's resnet18, or where torchvision is not installed (the CPU wheel of
torch), spec_4conv_64, a CNN of torchutil.models that needs torch alone.
"""
import torch

import torchutil
from torchutil.models import build_model, has_torchvision

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.float16 if device == "cuda" else torch.float32
model, size = build_model("resnet18" if has_torchvision() else "spec_4conv_64")
model = model.eval().to(device=device, dtype=dtype)
x = torch.randn(8, 3, size, size, device=device, dtype=dtype)

# The dispatcher op: one float64 tensor, fields named in torchutil.FIELDS.
summary = torch.ops.util.profile(model, x, warmup=2, iters=5)
print("utilization", torchutil.field(summary, "utilization").item())

# The rich call: the same numbers plus the per-op table.
result = torchutil.profile(model, x, warmup=2, iters=5)
print(result.format(top=5))
for row in result.top_ops(3, by="bytes"):
    print(f"{row.op} in {row.module or '<top>'}: {row.bytes / 1e6:.1f} MB, {row.arithmetic_intensity:.1f} FLOP/B")
