"""What the CUDA queries of capture-node attribution cost, at a real capture's size.

Capture nodes (torchutil's default attribution where the forward captures) ask CUDA, at every
change of the innermost op during the capture, which graph the stream captures into
(cudaStreamGetCaptureInfo) and how many nodes it holds (cudaGraphGetNodes with no array), and at
the capture's end read every node (cudaGraphNodeGetType, cudaGraphKernelNodeGetParams,
cudaFuncGetName); and the clock an op event reads (cuptiGetTimestamp, clock_gettime). This script captures a model's forward with torch.cuda.graph and, while the
capture is still open (all its nodes made), times each query N times through ctypes, against an
empty ctypes call (cudaGetLastError) as the floor, in the libcudart the process already loaded.
It also times a capture of the forward itself, to set the queries against. Medians of --repeats
batches with their range; one process.

    python benchmarks/cost/capture_query_cost.py --model resnet50 --batch 1
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import time


def _loaded(library: str) -> ctypes.CDLL:
    """A library this process already loaded (torch's libcudart, torchutil's libcupti), by its
    path in /proc/self/maps."""
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if library in line})
    if not paths:
        raise SystemExit(f"capture_query_cost: no {library} is loaded in this process")
    return ctypes.CDLL(paths[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calls", type=int, default=2000, help="queries per timed batch")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    import torchutil  # noqa: F401  (loads libcupti)
    from torchutil.studies._common import Setup

    dev = torch.device("cuda")
    model, x = Setup.on(dev, torch.half).classifier(args.model, args.batch)  # channels_last on CUDA
    rt = _loaded("libcudart.so")
    cupti = _loaded("libcupti.so")
    cupti.cuptiGetTimestamp.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
    libc = ctypes.CDLL(None)

    class Timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

    libc.clock_gettime.argtypes = [ctypes.c_int, ctypes.POINTER(Timespec)]
    stamp, ts = ctypes.c_uint64(), Timespec()
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    rt.cudaStreamGetCaptureInfo.argtypes = [vp, ctypes.POINTER(ctypes.c_int), vp, ctypes.POINTER(vp),
                                            ctypes.POINTER(vp), vp, ctypes.POINTER(sz)]
    rt.cudaGraphGetNodes.argtypes = [vp, vp, ctypes.POINTER(sz)]
    rt.cudaGraphNodeGetType.argtypes = [vp, ctypes.POINTER(ctypes.c_int)]
    rt.cudaGraphKernelNodeGetParams.argtypes = [vp, vp]
    rt.cudaFuncGetName.argtypes = [ctypes.POINTER(ctypes.c_char_p), vp]

    from torch.utils._python_dispatch import TorchDispatchMode

    class OpCount(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, a=(), kw=None):
            OpCount.calls += 1
            return func(*a, **(kw or {}))

    stream = torch.cuda.Stream()
    with torch.inference_mode():
        with OpCount():
            model(x)
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(x)
        torch.cuda.synchronize()
        captures = []
        for _ in range(args.repeats):
            g = torch.cuda.CUDAGraph()
            t0 = time.perf_counter()
            with torch.cuda.graph(g, stream=stream):
                model(x)
            captures.append(time.perf_counter() - t0)
            del g
        g = torch.cuda.CUDAGraph()
        timings: dict[str, list[float]] = {}
        with torch.cuda.graph(g, stream=stream):
            model(x)
            s = vp(stream.cuda_stream)
            status, graph, count, deps, ndeps = ctypes.c_int(), vp(), sz(), vp(), sz()
            assert rt.cudaStreamGetCaptureInfo(s, ctypes.byref(status), None, ctypes.byref(graph), None, None,
                                               None) == 0 and status.value == 1, "the stream is not capturing"
            assert rt.cudaGraphGetNodes(graph, None, ctypes.byref(count)) == 0
            n = count.value
            nodes = (vp * n)()
            assert rt.cudaGraphGetNodes(graph, nodes, ctypes.byref(count)) == 0
            queries = {
                "ctypes floor (cudaGetLastError)": lambda: rt.cudaGetLastError(),
                "cudaStreamGetCaptureInfo (graph)": lambda: rt.cudaStreamGetCaptureInfo(
                    s, ctypes.byref(status), None, ctypes.byref(graph), None, None, None),
                "cudaStreamGetCaptureInfo (graph, leaf nodes)": lambda: rt.cudaStreamGetCaptureInfo(
                    s, ctypes.byref(status), None, ctypes.byref(graph), ctypes.byref(deps), None, ctypes.byref(ndeps)),
                "cudaGraphGetNodes (count)": lambda: rt.cudaGraphGetNodes(graph, None, ctypes.byref(count)),
            }

            def time_calls(calls: dict) -> None:
                for name, q in calls.items():
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        for _ in range(args.calls):
                            q()
                        timings.setdefault(name, []).append((time.perf_counter() - t0) / args.calls)

            time_calls(queries)
            kind, params, fname = ctypes.c_int(), ctypes.create_string_buffer(64), ctypes.c_char_p()
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                for node in nodes:
                    rt.cudaGraphNodeGetType(node, ctypes.byref(kind))
                    if kind.value == 0 and rt.cudaGraphKernelNodeGetParams(node, params) == 0:
                        rt.cudaFuncGetName(ctypes.byref(fname), vp.from_buffer(params).value)
                timings.setdefault("read every node (type, params, name)", []).append(time.perf_counter() - t0)
            # An op event's clock, read twice per op call of a traced counted forward: CUPTI's
            # (what the tracer read until 2026-12-02) and the CLOCK_REALTIME every trace registers
            # with CUPTI (what it reads now). Last: cuptiGetTimestamp may attach CUPTI.
            time_calls({
                "clock_gettime(CLOCK_REALTIME)": lambda: libc.clock_gettime(0, ctypes.byref(ts)),
                "cuptiGetTimestamp": lambda: cupti.cuptiGetTimestamp(ctypes.byref(stamp)),
            })
        rt.cudaGetLastError()
    med = {k: statistics.median(v) for k, v in timings.items()}
    floor = med["ctypes floor (cudaGetLastError)"]
    print(f"{args.model} b{args.batch} fp16 on {torch.cuda.get_device_name(dev)}, torch {torch.__version__}: "
          f"the capture holds {n} nodes; capturing the forward takes {statistics.median(captures) * 1e3:.2f} ms "
          f"(median of {args.repeats}); one process. The forward makes {OpCount.calls} aten calls: "
          f"about twice as many changes of the innermost op, each one query of each kind above")
    print(f"medians of {args.repeats} batches of {args.calls} calls each, [min-max] over the batches:")
    for k, v in med.items():
        lo, hi = min(timings[k]), max(timings[k])
        if k.startswith("read"):
            print(f"  {k:<48} {v * 1e3:8.3f} ms for all {n} nodes [{lo * 1e3:.3f}-{hi * 1e3:.3f}]")
        else:
            print(f"  {k:<48} {v * 1e6:8.3f} us a call [{lo * 1e6:.3f}-{hi * 1e6:.3f}] "
                  f"({(v - floor) * 1e6:.3f} over the ctypes floor)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "nodes": n, "capture_seconds": captures, "timings": timings}, f, indent=2)


if __name__ == "__main__":
    main()
