"""Eager against torch.compile'd: FLOPs, kernel attribution and utilization (docs/counting.md,
"Compiled models"). CUDA only; about 4 minutes on an H200, most of it compiling.

    python benchmarks/compiled.py [--out DIR] [--models resnet50,llama,...]

For each model: matrix, vector and useful FLOPs of the eager and the compiled profile and their
ratio, the share of kernel time attributed to no op, the op rows and the utilization. The
compiled FLOPs are those of the model run eagerly (the eager count), so the ratios are 1; the
unattributed share is what the compiled kernels' attribution leaves. Writes compiled.md to
--out (default $OUT, else the working directory).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import torchutil

DEVICE = "cuda"
DTYPE = torch.float16


# ---- models (random weights, plain torch; no downloads) ------------------------------------------

class LlamaBlock(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LlamaLike(nn.Module):
    """A Llama-like decoder: 4 layers, width 512, 8 heads, SwiGLU 1408, vocabulary 8192."""

    def __init__(self, vocab=8192, d=512, layers=4, heads=8, ffn=1408):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, ffn) for _ in range(layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class DiTBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False)
        self.ada = nn.Linear(d, 6 * d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x, c):
        s1, b1, g1, s2, b2, g2 = self.ada(F.silu(c)).unsqueeze(1).chunk(6, dim=-1)
        b, t, d = x.shape
        h = self.norm1(x) * (1 + s1) + b1
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + g1 * self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        return x + g2 * self.mlp(self.norm2(x) * (1 + s2) + b2)


class DiT(nn.Module):
    """A small DiT: 32x32x4 latents in 2x2 patches (256 tokens), width 384, 6 heads, 6 blocks."""

    def __init__(self, d=384, heads=6, depth=6):
        super().__init__()
        self.patch = nn.Conv2d(4, d, 2, stride=2)
        self.pos = nn.Parameter(torch.randn(1, 256, d) * 0.02)
        self.time = nn.Sequential(nn.Linear(256, d), nn.SiLU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList(DiTBlock(d, heads) for _ in range(depth))
        self.out = nn.Linear(d, 2 * 2 * 4)

    def forward(self, x, t):
        half = torch.arange(128, device=x.device, dtype=x.dtype)
        freqs = torch.exp(-math.log(10000.0) * half / 128)
        c = self.time(torch.cat([torch.cos(t[:, None] * freqs), torch.sin(t[:, None] * freqs)], dim=-1))
        h = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        for block in self.blocks:
            h = block(h, c)
        return self.out(h)


class FlexBlock(nn.Module):
    """Projections around a compiled flex_attention (B 4, H 8, T 1024, D 64)."""

    def __init__(self, attend, heads=8, dim=64):
        super().__init__()
        self.heads, self.dim = heads, dim
        self.qkv = nn.Linear(heads * dim, 3 * heads * dim)
        self.out = nn.Linear(heads * dim, heads * dim)
        self.attend = attend

    def forward(self, x, block_mask):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.dim).permute(2, 0, 3, 1, 4)
        y = self.attend(q, k, v, block_mask=block_mask)
        return self.out(y.transpose(1, 2).reshape(b, t, self.heads * self.dim))


class MLP(nn.Module):
    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, d_in)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def cases(names):
    """(name, eager model, compiled model, profile kwargs) for each name."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(0)
    if "resnet50" in names:
        import torchvision

        m = torchvision.models.resnet50().to(DEVICE, DTYPE).eval().to(memory_format=torch.channels_last)
        x = torch.randn(32, 3, 224, 224, device=DEVICE, dtype=DTYPE).to(memory_format=torch.channels_last)
        yield "resnet50 b32", m, torch.compile(m), dict(x=x)
    if "llama" in names:
        m = LlamaLike().to(DEVICE, DTYPE).eval()
        yield "Llama-like 4L b8x256", m, torch.compile(m), dict(x=torch.randint(0, 8192, (8, 256), device=DEVICE))
    if "flex" in names:
        x = torch.randn(4, 1024, 512, device=DEVICE, dtype=DTYPE)

        def causal(b, h, q, k):
            return q >= k

        def documents(b, h, q, k):  # documents of 256, 512 and 256 tokens
            return ((q >= 256).int() + (q >= 768).int()) == ((k >= 256).int() + (k >= 768).int())

        for label, mask in (("causal", causal), ("documents", documents)):
            bm = create_block_mask(mask, None, None, 1024, 1024, device=DEVICE)
            eager = FlexBlock(flex_attention).to(DEVICE, DTYPE).eval()
            compiled = FlexBlock(torch.compile(flex_attention)).to(DEVICE, DTYPE).eval()
            compiled.load_state_dict(eager.state_dict())
            yield f"FlexAttention {label} B4 H8 T1024", eager, compiled, dict(args=(x, bm))
    if "dit" in names:
        m = DiT().to(DEVICE, DTYPE).eval()
        x = torch.randn(16, 4, 32, 32, device=DEVICE, dtype=DTYPE)
        t = torch.rand(16, device=DEVICE, dtype=DTYPE) * 1000
        yield "DiT-S/2 b16", m, torch.compile(m), dict(args=(x, t), batch_size=16)
    if "mlp" in names:
        for shape, hidden in (((64, 1024), 1024), ((512, 768), 3072)):
            m = MLP(shape[1], hidden).to(DEVICE, DTYPE).eval()
            yield (f"MLP {list(shape)}->{hidden} max-autotune", m,
                   torch.compile(m, mode="max-autotune-no-cudagraphs"),
                   dict(x=torch.randn(*shape, device=DEVICE, dtype=DTYPE)))


def figures(r):
    kernel = r.kernel_seconds
    unattributed = r.unattributed_kernel_seconds / kernel if kernel and kernel == kernel else float("nan")
    return dict(matrix=r.matrix_flops, vector=r.vector_flops, useful=r.useful_flops, rows=len(r.ops),
                unattributed=unattributed, utilization=r.utilization, unknown=len(r.unknown_ops),
                status=r.trace_status)


def ratio(a, b):
    return a / b if b else (1.0 if a == b else float("nan"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--models", default="resnet50,llama,flex,dit,mlp")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/compiled.py needs a CUDA GPU")
    warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
    header = ("| model | matrix FLOPs eager | compiled/eager matrix | vector eager | compiled/eager vector | "
              "useful eager | compiled/eager useful | unattributed eager | unattributed compiled | "
              "op rows eager / compiled | unknown ops compiled | utilization eager / compiled | compile + profile s |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    print(header, flush=True)
    t_all = time.time()
    statuses = []
    for name, eager_model, compiled_model, kw in cases(args.models.split(",")):
        options = dict(warmup=3, iters=20, **kw)
        inputs = options.pop("x", None)
        e = figures(torchutil.profile(eager_model, inputs, **options))
        t0 = time.time()
        c = figures(torchutil.profile(compiled_model, inputs, **options))
        seconds = time.time() - t0
        line = (f"| {name} | {e['matrix']:.4g} | {ratio(c['matrix'], e['matrix']):.6f} | {e['vector']:.4g} | "
                f"{ratio(c['vector'], e['vector']):.6f} | {e['useful']:.4g} | {ratio(c['useful'], e['useful']):.6f} | "
                f"{100 * e['unattributed']:.1f} % | {100 * c['unattributed']:.1f} % | {e['rows']} / {c['rows']} | "
                f"{c['unknown']} | {100 * e['utilization']:.1f} % / {100 * c['utilization']:.1f} % | {seconds:.0f} |")
        lines.append(line)
        statuses.append(f"- {name}: {c['status']}")
        print(line, flush=True)
    total = f"\ntorch {torch.__version__}, {torch.cuda.get_device_name()}, fp16; {time.time() - t_all:.0f} s in all"
    print("\ntrace_status of the compiled profiles:\n" + "\n".join(statuses) + total)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "compiled.md"), "w") as f:
        f.write("\n".join(lines) + "\n\ntrace_status of the compiled profiles:\n" + "\n".join(statuses)
                + "\n" + total + "\n")


if __name__ == "__main__":
    main()
