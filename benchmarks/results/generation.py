"""LLM inference on one GPU: prefill MFU and decode MBU of a ~1B-parameter Llama-style model
(random weights, bf16) at batch 1, 8 and 32 and prompts of 512, 2048 and 8192 tokens, measured
by torchutil.profile_generate, beside the analytic MFU/MBU of serving engines and the plain
transformers generate() loop for the same tokens.

    python benchmarks/results/generation.py                    # the H200 run (CUDA; about 4 minutes)
    python benchmarks/results/generation.py --quick            # a tiny config on the CPU, end to end

The model (LlamaConfig): hidden 2048, 16 layers, 32 query heads and 8 KV heads (GQA, head dim
64), MLP 8192, vocab 32000, untied head: 1.10 B parameters, 2.21 GB of bf16 weights; the KV cache
holds 2 x 16 x 8 x 64 x 2 B = 32 KiB per token and sequence, so batch 32 x 8,256 positions (8k
prompt + 64 new) is 8.66 GB. Each configuration profiles the prefill and the geometric sample
of decode steps (0, 1, 2, 4, ..., 32, 62 of 63), then times generate() (one untimed and
--loop-repeats timed runs, for 64 tokens and for 1). The static cache runs first at every
configuration, then the dynamic one; a configuration that would start after --budget seconds
is skipped and listed as skipped.

Writes under --out (default $OUT, else ./generation-bench): generation.csv (every measured
forward), summary.csv and summary.md (one line per configuration), results.json, and
generation_<cache>.png (decode bandwidth and FLOP/s against context, a line per batch, with
the GPU's peaks drawn; needs matplotlib, else skipped with a line).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import time

import torch

import torchutil
from torchutil.generation import rows_to_csv

FULL = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
            num_key_value_heads=8, vocab_size=32000)
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=256)

SUMMARY = ["cache", "batch", "prompt", "prefill_ms", "prefill_mfu", "prefill_useful_mfu", "prefill_analytic_mfu",
           "prefill_timing", "decode_ms", "decode_mbu", "decode_analytic_mbu", "decode_mfu", "decode_analytic_mfu",
           "decode_kernel_mbu", "decode_timing", "profiled_tokens_per_second", "loop_tokens_per_second",
           "loop_slowdown", "loop_decode_ms", "profile_seconds", "loop_seconds", "profile_cost",
           "tokens_equal", "peak_memory_gb", "unknown_ops"]


def build_model(config_kwargs: dict, positions: int, device: torch.device, dtype: torch.dtype):
    import transformers

    config = transformers.LlamaConfig(**config_kwargs, max_position_embeddings=positions, tie_word_embeddings=False,
                                      bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(config)
    return model.to(dtype).eval(), config


def summarize(cache: str, result: torchutil.GenerationResult, peak_memory: float) -> dict:
    p, d = result.prefill_row, result.decode[0]   # the first decode step: context = the prompt
    unknown = sorted({op for prof in [result.prefill, *result.decode_profiles] for op in prof.unknown_ops})
    return {
        "cache": cache, "batch": result.batch, "prompt": result.prompt_length,
        "prefill_ms": 1e3 * p.seconds, "prefill_mfu": p.mfu, "prefill_useful_mfu": p.useful_mfu,
        "prefill_analytic_mfu": p.analytic_mfu, "prefill_timing": p.timing_mode,
        "decode_ms": 1e3 * d.seconds, "decode_mbu": d.mbu, "decode_analytic_mbu": d.analytic_mbu,
        "decode_mfu": d.mfu, "decode_analytic_mfu": d.analytic_mfu,
        "decode_kernel_mbu": result.decode_profiles[0].kernel_bandwidth_utilization, "decode_timing": d.timing_mode,
        "profiled_tokens_per_second": result.profiled_tokens_per_second,
        "loop_tokens_per_second": result.loop_tokens_per_second, "loop_slowdown": result.loop_slowdown,
        "loop_decode_ms": 1e3 * result.loop_decode_seconds_per_step, "profile_seconds": result.profile_seconds,
        "loop_seconds": result.loop_seconds, "profile_cost": result.profile_seconds / result.loop_seconds,
        "tokens_equal": result.loop_tokens_equal, "peak_memory_gb": peak_memory / 1e9,
        "unknown_ops": " ".join(unknown),
    }


def fmt(v) -> str:
    if isinstance(v, float):
        return "n/a" if v != v else f"{v:.4g}"
    return str(v)


def percent(v: float) -> str:
    return "n/a" if v != v else f"{100 * v:.3g} %"


def markdown(rows: list[dict], header: str, skipped: list[str], failed: list[str]) -> str:
    cols = [("cache", "cache"), ("batch", "batch"), ("prompt", "prompt"), ("prefill_ms", "prefill ms"),
            ("prefill_mfu", "prefill MFU"), ("prefill_useful_mfu", "useful"), ("prefill_analytic_mfu", "analytic"),
            ("decode_ms", "decode ms"), ("decode_mbu", "decode MBU"), ("decode_analytic_mbu", "analytic"),
            ("decode_kernel_mbu", "kernel-time MBU"), ("decode_mfu", "decode MFU"),
            ("decode_analytic_mfu", "analytic"), ("profiled_tokens_per_second", "tokens/s (forwards)"),
            ("loop_tokens_per_second", "tokens/s (generate)"), ("loop_slowdown", "loop / forwards"),
            ("profile_cost", "profile_generate / generate")]
    pct = {"prefill_mfu", "prefill_useful_mfu", "prefill_analytic_mfu", "decode_mbu", "decode_analytic_mbu",
           "decode_kernel_mbu", "decode_mfu", "decode_analytic_mfu"}
    lines = [header, "", "| " + " | ".join(c for _, c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(percent(r[k]) if k in pct else fmt(r[k]) for k, _ in cols) + " |")
    notes = sorted({f"{r['cache']} b{r['batch']} p{r['prompt']}: prefill {r['prefill_timing']}, decode "
                    f"{r['decode_timing']}" for r in rows if "graph" not in r["prefill_timing"] + r["decode_timing"]})
    if notes:
        lines += ["", "Not timed as CUDA-graph replays: " + "; ".join(notes)]
    unknown = sorted({op for r in rows for op in r["unknown_ops"].split()})
    if unknown:
        lines += ["", "Ops with no FLOP formula in these forwards (reported, not counted): " + ", ".join(unknown)]
    if skipped:
        lines += ["", "Skipped (time budget): " + ", ".join(skipped)]
    if failed:
        lines += ["", "Failed:", *(f"- {f}" for f in failed)]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a tiny config on the CPU: checks the script end to end")
    ap.add_argument("--out", default=os.environ.get("OUT", "generation-bench"))
    ap.add_argument("--batches", type=int, nargs="+")
    ap.add_argument("--prompts", type=int, nargs="+")
    ap.add_argument("--new-tokens", type=int)
    ap.add_argument("--caches", nargs="+", default=["static", "dynamic"], choices=["static", "dynamic"])
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--loop-repeats", type=int, default=2)
    ap.add_argument("--budget", type=float, default=290.0, help="seconds after which no configuration starts")
    args = ap.parse_args()
    try:
        import transformers
    except ImportError:
        raise SystemExit("benchmarks/results/generation.py needs transformers: pip install transformers") from None
    device = torch.device("cpu" if args.quick or not torch.cuda.is_available() else "cuda")
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    batches = args.batches or ([1, 2] if args.quick else [1, 8, 32])
    prompts = args.prompts or ([16, 32] if args.quick else [512, 2048, 8192])
    new = args.new_tokens or (6 if args.quick else 64)
    os.makedirs(args.out, exist_ok=True)
    started = time.perf_counter()
    model, config = build_model(TINY if args.quick else FULL, max(prompts) + new, device, dtype)
    params = sum(p.numel() for p in model.parameters())
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    dims = ", ".join(f"{k}={v}" for k, v in (TINY if args.quick else FULL).items())
    header = (f"# Generation on {where}\n\nLlamaForCausalLM from LlamaConfig({dims}), untied head, random weights, "
              f"{str(dtype).removeprefix('torch.')}: {params / 1e6:.2f} M parameters. "
              f"torch {torch.__version__}, transformers {transformers.__version__}, torchutil "
              f"{torchutil.__version__}, Python {platform.python_version()}. {new} new tokens per configuration; "
              f"decode figures are the first decode step's (context = the prompt). MFU counts attention at its "
              f"nominal FLOPs (the full score matrix); 'useful' counts what the causal mask keeps where this "
              f"build counts it; analytic = 2 x parameters per token and weights + KV bytes (docs/generation.md).")
    print(header.replace("# ", "", 1), flush=True)
    results, rows, skipped, failed = [], [], [], []
    options = dict(warmup=args.warmup, iters=args.iters, loop_repeats=args.loop_repeats)
    for cache in args.caches:
        for batch in batches:
            for prompt in prompts:
                name = f"{cache} b{batch} p{prompt}"
                if time.perf_counter() - started > args.budget:
                    skipped.append(name)
                    continue
                ids = torch.randint(3, config.vocab_size, (batch, prompt), device=device)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats(device)
                t0 = time.perf_counter()
                try:
                    result = torchutil.profile_generate(model, ids, new, cache=cache, steps="geometric", **options)
                except (RuntimeError, ValueError) as e:   # torch.cuda.OutOfMemoryError is a RuntimeError
                    failed.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
                    print(f"{name}: FAILED {failed[-1]}", flush=True)
                    continue
                peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else float("nan")
                row = summarize(cache, result, peak)
                rows.append(row)
                results.append((cache, result))
                print(f"{name}: prefill {row['prefill_ms']:.4g} ms MFU {percent(row['prefill_mfu'])} "
                      f"(analytic {percent(row['prefill_analytic_mfu'])}); decode {row['decode_ms']:.4g} ms MBU "
                      f"{percent(row['decode_mbu'])} (analytic {percent(row['decode_analytic_mbu'])}); generate "
                      f"{row['loop_tokens_per_second']:.4g} tok/s, {row['loop_slowdown']:.3g}x the forwards; "
                      f"{time.perf_counter() - t0:.1f} s", flush=True)
    all_rows = [r for _, res in results for r in res.rows]
    rows_to_csv(os.path.join(args.out, "generation.csv"), all_rows,
                extra={"cache": [c for c, res in results for _ in res.rows],
                       "prompt": [res.prompt_length for _, res in results for _ in res.rows]})
    with open(os.path.join(args.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SUMMARY)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"header": header, "skipped": skipped, "failed": failed,
                   "results": [{"cache": c, **json.loads(res.to_json())} for c, res in results]}, f, indent=1)
    table = markdown(rows, header, skipped, failed)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(table)
    for cache in args.caches:
        chosen = [res for c, res in results if c == cache]
        if not chosen:
            continue
        try:
            torchutil.plot_generation(chosen, os.path.join(args.out, f"generation_{cache}.png"))
        except ImportError as e:
            print(f"note: no plot: {e}")
    print("\n" + table.split("\n", 3)[3])
    print(f"wrote {args.out}/ in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
