"""Count any code with torchutil.Profiler: here, a hand-written attention block.

    python examples/profiler_context.py
"""
import torch
import torch.nn.functional as F

import torchutil

q = torch.randn(4, 8, 128, 64)
k = torch.randn(4, 8, 256, 64)
v = torch.randn(4, 8, 256, 64)
w = torch.randn(512, 512)

with torchutil.Profiler(batch_size=4) as prof:
    attn = F.scaled_dot_product_attention(q, k, v)
    out = attn.transpose(1, 2).reshape(4, 128, 512) @ w
    out = F.layer_norm(out, (512,))

r = prof.result
print(f"{r.flops / 1e9:.3f} GFLOP ({r.matrix_flops / 1e9:.3f} matrix) in {r.seconds * 1e3:.2f} ms "
      f"-> {100 * r.utilization:.1f} % of {r.peak_flops_per_second / 1e9:.0f} GFLOP/s ({r.peak_source})")
for row in r.ops:
    print(f"  {row.op:<50} calls {row.calls}  matrix {row.matrix_flops:>12,}  vector {row.vector_flops:>10,}")
