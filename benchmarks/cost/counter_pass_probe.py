"""What one counter replay pass costs and what it scales with: counters="flops" on models with
few and many kernels, graph-timed and eager, printing passes, kernels per forward, the pass
stage per pass and per kernel, and the forward's own time.

    python benchmarks/cost/counter_pass_probe.py
"""
from __future__ import annotations

import torch

import torchutil
from torchutil.studies._common import Setup


def main() -> None:
    dev = torch.device("cuda")
    cases = []
    for n in (1, 8, 64):
        cases.append((f"{n} x Linear 1024", torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(n)])
                      .to(dev, torch.half).eval(), torch.randn(512, 1024, device=dev, dtype=torch.half)))
    for name in ("resnet50",):
        m, x = Setup.on("cuda", torch.float16).classifier(name, 32)
        cases.append((name + " b32", m, x))
    with torch.inference_mode():
        for label, m, x in cases:
            for timing in ("auto", "eager"):
                for counters in ("flops",):
                    torchutil.profile(m, x, counters=counters, timing=timing)
                    r = torchutil.profile(m, x, counters=counters, timing=timing)
                    k = r.kernels_per_forward
                    per_pass = r.counter_pass_seconds / r.counter_passes
                    print(f"{label:<22} {timing:<6} {counters:<10} passes {r.counter_passes:.0f}, kernels {k:.0f}, "
                          f"forward {1e3 * r.seconds:.3f} ms; set-up {1e3 * r.counter_setup_seconds:.1f} ms, "
                          f"per pass {1e3 * per_pass:.1f} ms = {1e3 * per_pass / max(k, 1):.3f} ms a kernel, "
                          f"decode {1e3 * r.counter_decode_seconds:.1f} ms, counter_seconds {1e3 * r.counter_seconds:.1f}",
                          flush=True)


if __name__ == "__main__":
    main()
