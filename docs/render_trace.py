"""Renders a torchutil Chrome trace (ProfileResult.save_trace) as a timeline PNG, the way a trace
viewer shows it: the counted forward's ops on a CPU lane, kernels on one lane per GPU stream,
colored by the op that launched them. Used for the picture in the README; needs matplotlib.

    python docs/render_trace.py trace.json out.png [--forwards 2]
"""
from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

FAMILIES = [("convolution", "#4c72b0"), ("batch_norm", "#55a868"), ("relu", "#c44e52"),
            ("add", "#8172b2"), ("pool", "#ccb974"), ("addmm", "#64b5cd"), ("", "#999999")]


def family_color(op: str) -> str:
    return next(c for key, c in FAMILIES if key in op)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--forwards", type=int, default=2, help="timed forwards to show after the counted one")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    gpu_name = next(e["args"]["name"] for e in events if e.get("ph") == "M" and e["pid"] == 1)
    ops = [e for e in events if e.get("cat") == "op"]
    kernels = [e for e in events if e.get("cat") in ("kernel", "memcpy", "memset")
               and (e["args"]["forward"] == "counted" or e["args"]["forward"] < args.forwards)]
    streams = sorted({k["tid"] for k in kernels})
    lanes = {("cpu", 0): 0, **{("gpu", s): i + 1 for i, s in enumerate(streams)}}
    end = max([k["ts"] + k["dur"] for k in kernels] + [o["ts"] + o["dur"] for o in ops])

    fig, ax = plt.subplots(figsize=(14, 1.2 + 0.7 * len(lanes)))
    for o in ops:
        ax.broken_barh([(o["ts"] / 1e3, max(o["dur"], 0.5) / 1e3)], (-0.4, 0.8),
                       facecolors=family_color(o["name"]), edgecolor="none")
    for k in kernels:
        lane = lanes[("gpu", k["tid"])]
        ax.broken_barh([(k["ts"] / 1e3, max(k["dur"], 0.5) / 1e3)], (lane - 0.4, 0.8),
                       facecolors=family_color(k["args"]["op"]), edgecolor="none")
    forwards = sorted({k["args"]["forward"] for k in kernels}, key=lambda f: -1 if f == "counted" else f)
    for f in forwards:
        ks = [k for k in kernels if k["args"]["forward"] == f]
        t0 = min(k["ts"] for k in ks) / 1e3
        ax.annotate("counted forward" if f == "counted" else f"timed forward {f}", (t0, len(lanes) - 0.45),
                    fontsize=8, va="bottom")
    ax.set_yticks(list(lanes.values()))
    ax.set_yticklabels(["CPU: ops (counted forward)"] + [f"GPU stream {s}" for s in streams])
    ax.set_ylim(-0.6, len(lanes) - 0.1)
    ax.set_xlim(0, end / 1e3 * 1.01)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds")
    ax.set_title(args.title or f"torchutil trace on {gpu_name}", fontsize=10)
    ax.legend(handles=[Patch(color=c, label=key or "other") for key, c in FAMILIES],
              loc="upper center", bbox_to_anchor=(0.5, -0.35), fontsize=7, ncol=len(FAMILIES))
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
