"""Energy in the same call on a GPU (issue 39): is `torchutil.profile(model, x, energy=True)`'s
joules per forward a figure to rank networks by?

For each of four models (resnet50 and mobilenet_v3_large fp16 batch 64, torchvision's vit_b_16
fp16 batch 32, a 4-layer Llama built from transformers' LlamaConfig with random weights, prefill
of 8 x 512 tokens) and each of `--processes` separate processes, one after the other: twelve
calls with energy=True (the defaults otherwise: graph replays, a 0.5 s energy window), and three
without. Reported per model:

- the joules' CV over the twelve calls in each process (target <= 1 %) and the level of the
  second process against the first (mean joules, target within 2 %);
- agreement with Zeus (`zeus.monitor.ZeusMonitor`, the `zeus` package, an NVML reader of its
  own): in the first process, the same forward captured as a CUDA graph in Python and replayed
  inside one `begin_window`/`end_window` for at least --zeus-seconds (Zeus reads NVML's 100 ms
  counter at the window's ends without aligning to it, so its window must be long for its own
  figure to be known to 2 %: 6 s puts its quantum at <= 1.7 %); target within 2 %;
- the call's cost against its window: phase_energy_seconds / energy_window, and the median call
  with energy less the median call without, over energy_window (target <= 1.1); beside them the
  parts beyond the windows (energy_wait_seconds: queued to the first change; energy_drain_seconds:
  the last change to the last forward finished), and how long the GPU was held back by its power
  limit during each call (NVML's power violation time, read by nvidia-ml-py before and after;
  "n/a" without it).

    python benchmarks/results/energy.py --out $OUT/energy            # ~2.5 min on an H200
    python benchmarks/results/energy.py --models resnet50 --calls 3 --processes 1 --device cuda
    python benchmarks/results/energy.py --device meta --calls 2 --models resnet50   # a check of the script: NaN

Writes energy.json (every call's figures) and energy.md (the table) under --out.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import torchutil
from torchutil.studies._common import Setup

MODELS = ("resnet50", "mobilenet_v3_large", "vit_b_16", "llama4")


def cv(values: list[float]) -> float:
    """Coefficient of variation in percent (sample standard deviation over the mean)."""
    finite = [v for v in values if v == v]
    if len(finite) < 2:
        return math.nan
    return 100 * statistics.stdev(finite) / statistics.fmean(finite)


def build(name: str, device: torch.device) -> tuple[torch.nn.Module, dict, int]:
    """(model, the inputs as torchutil.profile takes them, batch)."""
    dtype = torch.float16
    if name == "llama4":
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                             num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024)
        model = LlamaForCausalLM(config).eval().to(device, dtype)
        ids = torch.randint(0, config.vocab_size, (8, 512), device=device)
        return model, {"kwargs": {"input_ids": ids, "use_cache": False}, "batch_size": 8}, 8
    batch = 32 if name == "vit_b_16" else 64
    model, x = Setup.on(device, dtype).classifier(name, batch)
    return model, {"x": x}, batch


def zeus_joules(model: torch.nn.Module, inputs: dict, seconds_per_forward: float, seconds: float) -> dict:
    """Joules per forward by Zeus over one window of graph replays of the same forward."""
    try:
        from zeus.monitor import ZeusMonitor
    except ImportError as e:
        return {"error": f"zeus is not installed ({e})"}
    args = (inputs["x"],) if "x" in inputs else ()
    kwargs = inputs.get("kwargs", {})
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(*args, **kwargs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(*args, **kwargs)
        for _ in range(20):
            graph.replay()
        device = torch.cuda.current_device()
        monitor = ZeusMonitor(gpu_indices=[device], cpu_indices=[])
        n = max(100, math.ceil(seconds / seconds_per_forward))
        monitor.begin_window("replays")
        for _ in range(n):
            graph.replay()
        m = monitor.end_window("replays")
    return {"forwards": n, "seconds": m.time, "joules_per_forward": m.gpu_energy[device] / n,
            "watts": m.gpu_energy[device] / m.time}


def power_violation(device: torch.device):
    """A function giving the cumulative seconds the GPU was held back by its power limit (NVML's
    violation time, through nvidia-ml-py), or None where that cannot be read."""
    try:
        import pynvml

        pynvml.nvmlInit()
        # NVML's numbering is CUDA's where CUDA_VISIBLE_DEVICES is unset (the benchmark's machine).
        handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
        pynvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_POWER)
    except Exception:  # noqa: BLE001 - a diagnostic: absent is "n/a"
        return None
    return lambda: pynvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_POWER).violationTime * 1e-9


def measure(args: argparse.Namespace) -> dict:
    """One process: every model, args.calls calls with energy and three without."""
    device = torch.device(args.device)
    violation = power_violation(device) if device.type == "cuda" else None
    rows = []
    for name in args.models:
        model, inputs, batch = build(name, device)
        calls = []
        for _ in range(args.calls):
            before = violation() if violation else math.nan
            r = torchutil.profile(model, **inputs, energy=True, energy_window=args.energy_window)
            calls.append({f: getattr(r, f) for f in ("joules", "joules_ci_low", "joules_ci_high", "watts",
                                                       "inputs_per_joule", "flops_per_joule", "energy_seconds",
                                                       "energy_wait_seconds", "energy_drain_seconds",
                                                       "phase_energy_seconds", "call_seconds", "seconds")})
            calls[-1]["power_limited_seconds"] = violation() - before if violation else math.nan
        plain = [torchutil.profile(model, **inputs).call_seconds for _ in range(3)]
        row = {"model": name, "batch": batch, "timing_mode": r.timing_mode, "energy_source": r.energy_source,
               "calls": calls, "plain_call_seconds": plain}
        if args.zeus:
            row["zeus"] = zeus_joules(model, inputs, statistics.median(c["seconds"] for c in calls), args.zeus_seconds)
        rows.append(row)
        print(f"  pid {os.getpid()}: {name}: {statistics.fmean(c['joules'] for c in calls):.4g} J, "
              f"{r.energy_source}", flush=True)
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    return {"device": where, "torch": torch.__version__, "rows": rows}


def table(processes: list[dict], window: float) -> str:
    lines = ["| model | J / forward (p1) | CV p1 | CV p2 | level p2/p1 | W | images or seqs / J | Zeus J | ours / Zeus | "
             "phase / window, median [q1, q3] | call delta / window | wait ms (min-max) | drain ms | power-limited ms / call | source |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k, row in enumerate(processes[0]["rows"]):
        per = [p["rows"][k] for p in processes]
        means = [statistics.fmean(c["joules"] for c in r["calls"]) for r in per]
        cvs = [cv([c["joules"] for c in r["calls"]]) for r in per]
        level = 100 * (means[1] / means[0] - 1) if len(means) > 1 else math.nan
        zeus = row.get("zeus", {})
        zj = zeus.get("joules_per_forward", math.nan)
        calls = row["calls"]
        q1, phase, q3 = statistics.quantiles([c["phase_energy_seconds"] / window for c in calls], n=4)
        waits = [c["energy_wait_seconds"] for c in calls]
        delta = (statistics.median(c["call_seconds"] for c in calls) - statistics.median(row["plain_call_seconds"])) / window
        lines.append(
            f"| {row['model']} b{row['batch']} | {means[0]:.4g} | {cvs[0]:.2f} % | "
            f"{cvs[1] if len(cvs) > 1 else math.nan:.2f} % | {level:+.2f} % | "
            f"{statistics.fmean(c['watts'] for c in calls):.0f} | "
            f"{statistics.fmean(c['inputs_per_joule'] for c in calls):.4g} | {zj:.4g} | {100 * (means[0] / zj - 1):+.2f} % | "
            f"{phase:.3f} [{q1:.3f}, {q3:.3f}] | {delta:.3f} | {1e3 * statistics.median(waits):.0f} ({1e3 * min(waits):.0f}-{1e3 * max(waits):.0f}) | "
            f"{1e3 * statistics.median(c['energy_drain_seconds'] for c in calls):.1f} | "
            f"{1e3 * statistics.median(c['power_limited_seconds'] for c in calls):.0f} | {row['energy_source']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--energy-window", type=float, default=0.5)
    ap.add_argument("--zeus-seconds", type=float, default=6.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default="energy-bench")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        args.zeus = args.child == 0
        Path(args.json).write_text(json.dumps(measure(args)))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    processes = []
    for k in range(args.processes):
        path = out / f"process{k}.json"
        cmd = [sys.executable, __file__, "--child", str(k), "--json", str(path), "--models", *args.models,
               "--calls", str(args.calls), "--energy-window", str(args.energy_window),
               "--zeus-seconds", str(args.zeus_seconds), "--device", args.device]
        subprocess.run(cmd, check=True)
        processes.append(json.loads(path.read_text()))
    text = table(processes, args.energy_window)
    text += "".join(f"\nZeus, {r['model']}: {r['zeus']['error']}" for r in processes[0]["rows"]
                    if "error" in r.get("zeus", {}))
    print(text)
    print(f"{args.calls} calls a model in each of {args.processes} processes, {time.perf_counter() - started:.0f} s "
          f"on {processes[0]['device']}")
    (out / "energy.json").write_text(json.dumps({"processes": processes, "energy_window": args.energy_window}, indent=1))
    (out / "energy.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
