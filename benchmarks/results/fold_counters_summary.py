"""The FoldedCNN pairs with hardware counters (issue #11): from a `torchutil fold-bench --counters
flops throughput` CSV, per model and folding factor f, the nominal utilization gain beside the
gain in what the GPU's counters saw (tensor-pipe activity, SM throughput) and the hardware /
counted FLOP ratio. Answers: does folding raise tensor-pipe activity as much as it raises
nominal utilization?

    python benchmarks/results/fold_counters_summary.py docs/results/fold/counters/fold_bench_counters.csv
"""
from __future__ import annotations

import argparse
import csv
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    args = ap.parse_args()
    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    by_model = defaultdict(dict)
    for r in rows:
        by_model[r["model"]][int(r["f"])] = r
    print("| model | f | utilization | × util | tensor active % | × tensor active | SM throughput % | × SM | "
          "hw / counted FLOPs | status |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for model, fs in by_model.items():
        base = fs.get(1)
        for f in sorted(fs):
            r = fs[f]

            def ratio(key, r=r):
                return float(r[key]) / float(base[key]) if base and float(base[key]) > 0 else float("nan")

            print(f"| {model} | {f} | {100 * float(r['utilization']):.2f} % | {float(r['utilization_gain']):.2f} | "
                  f"{float(r['tensor_active_pct']):.1f} | {ratio('tensor_active_pct'):.2f} | "
                  f"{float(r['sm_throughput_pct']):.1f} | {ratio('sm_throughput_pct'):.2f} | "
                  f"{float(r['hw_flops_ratio']):.2f} | {r['counters_status']} |")


if __name__ == "__main__":
    main()
