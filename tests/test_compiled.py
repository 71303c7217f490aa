"""torch.compile'd models, counted as their eager selves (docs/counting.md, "Compiled models").

Compiling on this CPU uses Inductor's C++ backend (g++): the models are tiny so that a compile
takes seconds.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torchutil


def test_an_eager_model_never_imports_dynamo():
    # Whether a model is compiled is asked of every Python model; nothing can be compiled before
    # torch._dynamo is imported, so asking must not import it (seconds on a first call).
    script = textwrap.dedent("""
        import sys, torch, torchutil
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        x = torch.randn(2, 8)
        torchutil.profile(m, x, warmup=1, iters=1, peak_flops=1e12)
        torchutil.profile(lambda t: m(t), x, warmup=1, iters=1, peak_flops=1e12)
        torch.ops.util.profile(m, x, warmup=1, iters=1)
        with torchutil.Profiler(m, peak_flops=1e12):
            m(x)
        print("torch._dynamo" in sys.modules)
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(torchutil.__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", out.stdout + out.stderr
