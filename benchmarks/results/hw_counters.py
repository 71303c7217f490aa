"""Hardware counters beside the counted FLOPs (issue #11), on a CUDA GPU:

1. per-op hardware / nominal FLOP tables of resnet50, mobilenet_v3_large and vit_b_16 (fp16,
   channels_last, batch 32; counters=["flops", "throughput"]);
2. what the counters cost, side by side on resnet50: a plain profile call, counters="flops",
   counters="timeline" (wall time per call, interleaved rounds, medians), the timeline's timed
   forwards against untraced ones (PM sampling runs during them), and ncu reading the same
   metrics on the same forward (wall time of the whole ncu run);
3. ncu's values against torchutil's for the same metric and kernel (resnet50's kernels with the
   most tensor FLOPs), from `ncu --csv --page raw`.

    python benchmarks/results/hw_counters.py --json out.json --markdown out.md
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import torchutil
from torchutil.studies._common import Setup

MODELS = ("resnet50", "mobilenet_v3_large", "vit_b_16")
NCU = os.environ.get("NCU", "/usr/local/cuda/bin/ncu")
# Metrics ncu reads for the comparison: those seen on the H200 (ncu --query-metrics --chip gh100).
NCU_KEYS = ("tensor_hgmma_fp16", "tensor_hmma_fp16", "gmma_instructions", "fma_instructions",
            "sm_throughput_pct", "dram_throughput_pct")
# torchutil's hw_tensor_flops of an fp16 kernel is the sum of its fp16 tensor paths times
# kTensorOpFlopsPerUnit (1): compared with the sum of ncu's two path counters.
TENSOR_KEYS = ("tensor_hgmma_fp16", "tensor_hmma_fp16")


def build(name: str, batch: int):
    return Setup.on("cuda", torch.half).classifier(name, batch)  # channels_last on CUDA


def nan_to_none(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def op_table(name: str, batch: int) -> dict:
    model, x = build(name, batch)
    r = torchutil.profile(model, x, warmup=3, iters=10, counters=["flops", "throughput"])
    rows = [{"op": o.op, "module": o.module, "dtype": o.dtype, "calls": o.calls, "matrix_flops": o.matrix_flops,
             "hw_tensor_flops": nan_to_none(o.hw_tensor_flops), "hw_flops_ratio": nan_to_none(o.hw_flops_ratio),
             "kernel_seconds": nan_to_none(o.kernel_seconds), "sm_throughput_pct": nan_to_none(o.sm_throughput_pct),
             "dram_throughput_pct": nan_to_none(o.dram_throughput_pct),
             "tensor_active_pct": nan_to_none(o.tensor_active_pct)}
            for o in r.ops if o.matrix_flops > 0 or (o.hw_tensor_flops == o.hw_tensor_flops and o.hw_tensor_flops > 0)]
    summary = {k: nan_to_none(getattr(r, k)) for k in (
        "matrix_flops", "hw_tensor_flops", "hw_flops_ratio", "hw_tensor_flops_fp16", "hw_fma_instructions",
        "sm_throughput_pct", "dram_throughput_pct", "tensor_active_pct", "achieved_occupancy_pct",
        "counter_kernels", "counter_passes", "counter_seconds", "counter_setup_seconds", "counter_pass_seconds",
        "counter_decode_seconds", "seconds", "kernels_per_forward")}
    print(f"{name} b{batch}: {r.counters_status}; hw/nominal {summary['hw_flops_ratio']}; "
          f"{summary['counter_passes']} passes, {summary['counter_seconds']} s (set-up "
          f"{summary['counter_setup_seconds']}, passes {summary['counter_pass_seconds']}, decoding "
          f"{summary['counter_decode_seconds']})", flush=True)
    del model, x
    torch.cuda.empty_cache()
    return {"model": name, "batch": batch, "counters_status": r.counters_status, "summary": summary, "ops": rows}


def wall(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def spread(values: list[float]) -> dict:
    """Median, quartiles and extremes of one variant's rounds."""
    q = statistics.quantiles(values, n=4) if len(values) >= 2 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": q[0], "q3": q[2], "min": min(values), "max": max(values),
            "n": len(values)}


def costs(batch: int, rounds: int) -> dict:
    """Each round runs every variant once, in a new random order (seeded), so that no variant
    always follows the same one; medians and quartiles over the rounds. The timed forwards of a
    call are also grouped by the variant that ran just before it, which shows whether a call
    leaves something behind that slows the next (a clock or power state, a CUPTI subscription)."""
    model, x = build("resnet50", batch)
    variants = {
        "plain profile (traced)": dict(),
        "untraced profile": dict(trace=False),
        "counters='flops'": dict(counters="flops"),
        "counters='timeline'": dict(counters="timeline"),
        "counters='timeline', untraced": dict(counters="timeline", trace=False),
    }
    walls = {k: [] for k in variants}
    seconds = {k: [] for k in variants}
    after = {}  # (variant, previous variant) -> timed forward seconds
    last = {}
    for _ in range(2):  # warm
        for kw in variants.values():
            torchutil.profile(model, x, warmup=3, iters=10, **kw)
    rng = random.Random(0)
    previous = None
    order_log = []
    for _ in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        order_log.append(order)
        for k in order:
            holder = {}
            kw = variants[k]
            walls[k].append(wall(lambda: holder.setdefault("r", torchutil.profile(model, x, warmup=3, iters=10, **kw))))
            seconds[k].append(holder["r"].seconds)
            after.setdefault(f"{k} | after {previous}", []).append(holder["r"].seconds)
            last[k] = holder["r"]
            previous = k
    out = {k: {"wall_s": statistics.median(walls[k]), "wall": spread(walls[k]),
               "timed_forward_s": statistics.median(seconds[k]), "timed_forward": spread(seconds[k]),
               "rounds_timed_forward_s": seconds[k], "counters_status": last[k].counters_status} for k in variants}
    base = out["untraced profile"]["timed_forward_s"]
    for k in out:
        out[k]["timed_forward_vs_untraced"] = out[k]["timed_forward_s"] / base
    for k, v in out.items():
        t = v["timed_forward"]
        print(f"  {k:<32} wall {v['wall_s']:.3f} s/call, timed forward {1e3 * v['timed_forward_s']:.3f} ms "
              f"(IQR {1e3 * t['q1']:.3f}-{1e3 * t['q3']:.3f}, {t['n']} rounds; {v['timed_forward_vs_untraced']:.3f}x "
              f"untraced)  [{v['counters_status'][:60]}]", flush=True)
    print("  timed forward by the call before it (median ms, calls):", flush=True)
    by_previous = {k: {"median_s": statistics.median(v), "n": len(v)} for k, v in sorted(after.items())}
    for k, v in by_previous.items():
        print(f"    {k:<70} {1e3 * v['median_s']:.3f} ({v['n']})", flush=True)
    return {"variants": out, "by_previous_call": by_previous, "orders": order_log}


# The forward ncu profiles: the same model and input as build("resnet50"), without torchutil
# in the process (torchvision's builder is what build_classifier calls; Setup's placement, written out).
NCU_SCRIPT = """
import torch, torchvision
dev = torch.device("cuda")
model = torchvision.models.get_model("resnet50", weights=None)
model = model.eval().to(dev, torch.half).to(memory_format=torch.channels_last)
x = torch.randn({batch}, 3, 224, 224, device=dev, dtype=torch.half).contiguous(memory_format=torch.channels_last)
with torch.inference_mode():
    for _ in range(3):
        model(x)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    model(x)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
"""


def parse_ncu_raw(text: str, metrics: list[str]) -> list[dict]:
    """Rows of `ncu --csv --page raw --print-units base`: one per kernel, a column per metric."""
    start = text.find('"ID"')
    if start < 0:
        return []
    reader = csv.reader(io.StringIO(text[start:]))
    header = next(reader)
    rows = []
    for rec in reader:
        if len(rec) != len(header) or not rec[0].strip().isdigit():
            continue  # the units row, ncu's own messages
        row = dict(zip(header, rec))
        values = {}
        for m in metrics:
            raw = row.get(m, "").replace(",", "").strip()
            try:
                values[m] = float(raw)
            except ValueError:
                values[m] = None
        rows.append({"id": int(rec[0]), "kernel": row.get("Kernel Name", ""), "values": values})
    return rows


def ncu_known_bases() -> set[str] | None:
    """Base metric names ncu lists for this GPU (None when the query fails): one unknown name
    makes ncu profile nothing, so the comparison asks only for names it knows."""
    try:
        proc = subprocess.run([NCU, "--query-metrics"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    bases = {line.split()[0] for line in proc.stdout.splitlines() if line.strip() and "__" in line.split()[0]}
    return bases or None


# How ncu replays: its default (each kernel replayed alone, caches flushed before each pass), the
# same without the flush, and application replay without the flush (the whole script runs once
# per pass, each kernel after its predecessors, as torchutil's user replay runs the forward).
NCU_CONFIGS = {
    "kernel": [],
    "kernel, no cache flush": ["--cache-control", "none"],
    "application, no cache flush": ["--replay-mode", "application", "--cache-control", "none"],
}
# Throughput percentages are compared on kernels at least this long: on shorter ones the
# elapsed-time denominator is a few microseconds and launch jitter dominates.
THROUGHPUT_MIN_US = 20.0


def ratio_stats(ratios: list[float]) -> dict:
    if not ratios:
        return {"kernels": 0}
    return {"kernels": len(ratios), "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "within_1pct": sum(abs(r - 1) <= 0.01 for r in ratios) / len(ratios),
            "within_5pct": sum(abs(r - 1) <= 0.05 for r in ratios) / len(ratios)}


def ncu_compare(batch: int, timeout: int, config: str = "kernel") -> dict:
    keys, names = torch.ops.util._counter_metrics(["flops", "throughput"])
    by_key = dict(zip(keys, names))
    known = ncu_known_bases()
    if known is not None:
        dropped = [n for k, n in by_key.items() if k in NCU_KEYS and n.split(".")[0] not in known]
        if dropped:
            print(f"  ncu does not list {dropped} on this GPU: left out", flush=True)
        by_key = {k: n for k, n in by_key.items() if n.split(".")[0] in known}
    metrics = [by_key[k] for k in NCU_KEYS if k in by_key]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(NCU_SCRIPT.format(batch=batch))
        script = f.name
    # The same script without ncu: what the process costs anyway (start-up, model, warm-up).
    t0 = time.perf_counter()
    try:
        plain = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=timeout)
        plain_wall = time.perf_counter() - t0 if plain.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        plain_wall = None
    cmd = [NCU, "--clock-control", "none", *NCU_CONFIGS[config], "--profile-from-start", "off",
           "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--print-units", "base", sys.executable, script]
    print(f"  [{config}] " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"config": config, "error": f"{type(e).__name__}: {e}", "metrics": metrics}
    ncu_wall = time.perf_counter() - t0
    rows = parse_ncu_raw(proc.stdout, metrics)
    out = {"config": config, "command": " ".join(cmd), "returncode": proc.returncode, "wall_s": ncu_wall,
           "script_without_ncu_s": plain_wall,
           "ncu_overhead_s": ncu_wall - plain_wall if plain_wall is not None else None,
           "kernels": len(rows), "metrics": metrics, "stderr_tail": proc.stderr[-1500:]}
    print(f"  ncu [{config}]: rc {proc.returncode}, {len(rows)} kernels, {ncu_wall:.1f} s (the script alone "
          f"{plain_wall if plain_wall is None else round(plain_wall, 1)} s)", flush=True)
    if not rows:
        out["stdout_tail"] = proc.stdout[-1500:]
        return out
    # torchutil on the same forward, same metrics (resolved names may differ from ncu's list
    # where the chip lacks the first candidate: compared by key).
    model, x = build("resnet50", batch)
    r = torchutil.profile(model, x, warmup=3, iters=3, counters=["flops", "throughput"])
    counted = sorted((k for k in r.kernels if not k.timed and k.kind == 0), key=lambda k: k.start_us)
    out["torchutil_kernels"] = len(counted)
    out["torchutil_status"] = r.counters_status
    field_of = {"gmma_instructions": "hw_gmma_instructions", "fma_instructions": "hw_fma_instructions",
                "sm_throughput_pct": "sm_throughput_pct", "dram_throughput_pct": "dram_throughput_pct"}
    pairs = []
    if len(counted) != len(rows):
        out["mismatch"] = f"ncu profiled {len(rows)} kernels, torchutil's counted forward launched {len(counted)}"
        print("  " + out["mismatch"], flush=True)
        out["pairs"] = pairs
        return out

    def compared(i: int) -> dict:
        k, n = counted[i], rows[i]
        tensor = [n["values"].get(by_key[t]) for t in TENSOR_KEYS if t in by_key]
        values = {"fp16 tensor paths (hgmma + hmma)": (k.hw_tensor_flops,
                                                       sum(v for v in tensor if v is not None) if tensor else None)}
        for key, fld in field_of.items():
            if key in by_key:
                values[by_key[key]] = (getattr(k, fld), n["values"].get(by_key[key]))
        return {name: {"torchutil": nan_to_none(tv), "ncu": nv, "ratio": (tv / nv) if nv and tv == tv else None}
                for name, (tv, nv) in values.items()}

    # Every kernel: counts over all of them, throughput percentages over the long ones.
    allk = [compared(i) for i in range(len(counted))]
    stats = {}
    for name in allk[0]:
        long_only = "pct" in name
        ratios = [c[name]["ratio"] for i, c in enumerate(allk) if c[name]["ratio"] is not None
                  and (not long_only or counted[i].duration_us >= THROUGHPUT_MIN_US)]
        stats[name] = ratio_stats(ratios)
        st = stats[name]
        if st["kernels"]:
            print(f"  {name.split('.')[0][-40:]:<40} torchutil/ncu over {st['kernels']} kernels"
                  f"{' >= %g us' % THROUGHPUT_MIN_US if long_only else ''}: median {st['median']:.4f}, "
                  f"range {st['min']:.4f}-{st['max']:.4f}, within 1 % {100 * st['within_1pct']:.0f} %, "
                  f"within 5 % {100 * st['within_5pct']:.0f} %", flush=True)
    out["all_kernels"] = stats
    order = sorted(range(len(counted)), key=lambda i: -(counted[i].hw_tensor_flops
                                                        if counted[i].hw_tensor_flops == counted[i].hw_tensor_flops else 0))
    for i in order[:5]:
        pairs.append({"index": i, "torchutil_kernel": counted[i].name[:120], "ncu_kernel": rows[i]["kernel"][:120],
                      "duration_us": counted[i].duration_us, "metrics": allk[i]})
    out["pairs"] = pairs
    return out


def markdown(result: dict) -> str:
    lines = [f"# Hardware counters beside the counted FLOPs ({result['device']})", "",
             *[f"- error: {e}" for e in result.get("errors", [])],
             f"torch {result['torch']}; fp16, channels_last, batch {result['batch']}; "
             "`counters=[\"flops\", \"throughput\"]`. hw/nominal: tensor-core FLOPs the counters saw "
             "÷ the matrix FLOPs the formulas count (docs/counters.md).", ""]
    for t in result["tables"]:
        s = t["summary"]
        lines += [f"## {t['model']}", "", f"status: {t['counters_status']}; forward: hw/nominal "
                  f"{s['hw_flops_ratio']}, SM {s['sm_throughput_pct']} %, DRAM {s['dram_throughput_pct']} %, "
                  f"tensor active {s['tensor_active_pct']} %, occupancy {s['achieved_occupancy_pct']} %, "
                  f"{s['counter_passes']} passes in {s['counter_seconds']} s", "",
                  "| op | module | GFLOP counted | GFLOP hw | hw/nominal | SM % | DRAM % | tensor % |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]

        def f(v, scale=1.0, fmt="{:.3f}"):
            return "n/a" if v is None else fmt.format(v / scale)

        for o in sorted(t["ops"], key=lambda o: -o["matrix_flops"])[:30]:
            lines.append(f"| {o['op']} | {o['module']} | {f(o['matrix_flops'], 1e9)} | {f(o['hw_tensor_flops'], 1e9)} | "
                         f"{f(o['hw_flops_ratio'])} | {f(o['sm_throughput_pct'], fmt='{:.1f}')} | "
                         f"{f(o['dram_throughput_pct'], fmt='{:.1f}')} | {f(o['tensor_active_pct'], fmt='{:.1f}')} |")
        lines.append("")
    c = result.get("costs", {}).get("variants", {})
    ncu = result.get("ncu", {})
    if c:
        lines += ["## Cost (resnet50)", "", "| call | wall s/call | timed forward ms (IQR) | × untraced |",
                  "|---|---:|---:|---:|"]
        for k, v in c.items():
            t = v["timed_forward"]
            lines.append(f"| {k} | {v['wall_s']:.3f} | {1e3 * v['timed_forward_s']:.3f} ({1e3 * t['q1']:.3f}–"
                         f"{1e3 * t['q3']:.3f}, {t['n']} rounds) | {v['timed_forward_vs_untraced']:.3f} |")
        for config, n in ncu.items():
            if "wall_s" in n:
                extra = (f" (its profiling: {n['ncu_overhead_s']:.1f} s over the {n['script_without_ncu_s']:.1f} s "
                         "the script takes alone)" if n.get("ncu_overhead_s") is not None else "")
                lines.append(f"| ncu [{config}], same metrics, one forward{extra} | {n['wall_s']:.1f} | | |")
        tables = {t["model"]: t for t in result.get("tables", [])}
        if "resnet50" in tables:
            s = tables["resnet50"]["summary"]
            lines.append(f"| torchutil range counters alone (`counter_seconds`, {s['counter_passes']} passes) | "
                         f"{s['counter_seconds']} | | |")
            for stage in ("setup", "pass", "decode"):
                lines.append(f"| of which `counter_{stage}_seconds` | {s.get(f'counter_{stage}_seconds')} | | |")
        lines.append("")
    for config, n in ncu.items():
        if n.get("all_kernels"):
            lines += [f"## ncu [{config}] against torchutil, every kernel of the forward", "",
                      "| metric | kernels | torchutil / ncu, median | min | max | within 1 % | within 5 % |",
                      "|---|---:|---:|---:|---:|---:|---:|"]
            for m, st in n["all_kernels"].items():
                if st["kernels"]:
                    lines.append(f"| {m} | {st['kernels']} | {st['median']:.4f} | {st['min']:.4f} | {st['max']:.4f} | "
                                 f"{100 * st['within_1pct']:.0f} % | {100 * st['within_5pct']:.0f} % |")
            lines += ["", f"Throughput percentages over kernels of at least {THROUGHPUT_MIN_US:g} µs.", ""]
        if n.get("pairs"):
            lines += [f"### ncu [{config}]: the five kernels with the most tensor FLOPs", "",
                      "| kernel | metric | torchutil | ncu | ratio |", "|---|---|---:|---:|---:|"]
            for p in n["pairs"]:
                for m, v in p["metrics"].items():
                    lines.append(f"| {p['index']} {p['torchutil_kernel'][:50]} | {m} | {v['torchutil']} | {v['ncu']} | "
                                 f"{v['ratio']} |")
            lines.append("")
        elif n:
            lines += [f"## ncu [{config}]", "", f"no comparison: {n.get('error') or n.get('mismatch') or 'ncu returned no rows'}", ""]
    return "\n".join(lines) + "\n"


def run_stage(stage: str, args: argparse.Namespace, model: str | None = None, ncu_config: str | None = None) -> dict:
    """One stage in a child process, so that a crash inside the CUDA/CUPTI stack (a signal, not
    an exception) costs that stage only: its result, or {"error": ...} saying how it ended."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, os.path.abspath(__file__), "--stage", stage, "--stage-out", out,
           "--batch", str(args.batch), "--rounds", str(args.rounds), "--ncu-timeout", str(args.ncu_timeout)]
    if model:
        cmd += ["--models", model]
    if ncu_config:
        cmd += ["--ncu-configs", ncu_config]
    # Each stage gets the stage timeout, but never more than what is left of the whole budget.
    limit = min(args.stage_timeout, max(args.deadline - time.monotonic(), 1.0))
    try:
        proc = subprocess.run(cmd, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"stage {stage} {model or ''} ran past {limit:.0f} s"}
    try:
        with open(out) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return {"error": f"stage {stage} {model or ''} ended with status {proc.returncode} and no result"}
    finally:
        os.unlink(out)


def stage_main(args: argparse.Namespace) -> None:
    if args.stage == "tables":
        result = op_table(args.models[0], args.batch)
    elif args.stage == "costs":
        result = costs(args.batch, args.rounds)
    else:
        result = ncu_compare(args.batch, args.ncu_timeout, args.ncu_configs[0])
    with open(args.stage_out, "w") as f:
        json.dump(result, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--ncu-timeout", type=int, default=150)
    ap.add_argument("--stage-timeout", type=int, default=240, help="seconds for one stage's child process")
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds for all stages together")
    ap.add_argument("--skip", nargs="*", default=[], choices=["tables", "costs", "ncu"])
    ap.add_argument("--ncu-configs", nargs="*", default=["kernel"], choices=list(NCU_CONFIGS),
                    help="how ncu replays (each one a separate ncu run)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--stage", choices=["tables", "costs", "ncu"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--stage-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stage:
        stage_main(args)
        return
    args.deadline = time.monotonic() + args.budget
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "batch": args.batch,
              "build": torchutil.build_info(), "tables": []}

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(markdown(result))

    if "tables" not in args.skip:
        for name in args.models:
            table = run_stage("tables", args, name)
            if "error" in table:
                print(f"{name}: {table['error']}", flush=True)
                result.setdefault("errors", []).append(table["error"])
            else:
                result["tables"].append(table)
            save()
    if "costs" not in args.skip:
        print("cost, resnet50:", flush=True)
        result["costs"] = run_stage("costs", args)
        if "error" in result["costs"]:
            print(result["costs"]["error"], flush=True)
            result.setdefault("errors", []).append(result.pop("costs")["error"])
        save()
    if "ncu" not in args.skip:
        result["ncu"] = {}
        for config in args.ncu_configs:
            print(f"ncu [{config}], resnet50:", flush=True)
            result["ncu"][config] = run_stage("ncu", args, ncu_config=config)
            save()


if __name__ == "__main__":
    main()
