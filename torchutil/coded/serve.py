"""A measured serving run: this process is the frontend, k + 1 worker processes serve F (and the
parity model), queries arrive as a Poisson process, and some workers share their core with a
background process that really burns CPU in bursts. Latency is measured per query for no
redundancy, equal-resources replication and the code, and the simulation (torchutil.coded.sim)
is run on the service times the workers really took.

Set-up (what `measure` does):
- Processes: multiprocessing "spawn" processes, each started, stopped and joined by its object
  (stop message, then terminate, then kill, on every path out, errors included). One duplex
  pipe per worker (a Unix socket pair), no network. Worker w (0..k-1 the data workers, k the extra one) is pinned to
  one core: the frontend has the first core of this process's affinity, the workers the next
  ones (where there are fewer than k + 2 cores, the stragglers' workers take cores of their own
  first and the others share the rest, the frontend's too; `layout` says which).
  Workers run F with one thread at batch 1 (on `device`: the CPU, or a GPU), at nice
  `worker_nice` (19: a best-effort tier that yields its core to a co-located job; at nice 0 a
  woken worker often preempts the burner at once and a short forward is not slowed).
- Stragglers: for each worker in `stragglers`, a burner process pinned to that worker's core,
  at nice 0, alternates idle periods with bursts of busy looping (exponential lengths of mean
  `straggler_burst_seconds`, busy for `straggler_on_fraction` of the time). While it burns, the
  worker waits for the core: its results come late. No sleep is put in any worker.
- Load: before the burners start, each data worker's idle round trip (send to result back) is
  measured (median of `calibration_queries` each); queries then arrive at load * k / the mean of
  those medians.
  The same arrival times and test images are used for every policy.
- Policies, one after the other on the same processes: none (query j to data worker j mod k);
  replication (the extra worker also serves query g*k + g mod k of group g: the first answer
  wins); coded (once group g's last query has arrived the frontend encodes the group and sends
  the parity query to the extra worker; a query is answered by its own output or, if the other
  k-1 outputs and the parity output are in first, by the decoder, whichever comes first).
  Redundant work is never cancelled; each policy ends when every sent query has come back.
  At most Frontend.WINDOW messages are in flight to a worker (later ones wait at the frontend,
  in order), so that no pipe fills and no send blocks: without it a burst of arrivals hung.
- Latency = the time the frontend has the answer - the query's arrival time (perf_counter, one
  clock for all processes on Linux). The first warmup_fraction of queries are left out.
- Simulation beside it: for every message the worker's occupancy, end - max(send, end of its
  previous message), is the service time in the simulation's FIFO model. `replay` feeds these
  very times, in order, into sim.replay with the measured arrivals and encode/decode medians;
  `iid` draws each worker's times independently from its own measured ones (the simulation's
  assumption). What the measured run adds beyond replay is the frontend's dispatch delay and
  the result's trip back; what replay adds beyond iid is that a burner's burst slows several
  consecutive queries of one worker together.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from multiprocessing import resource_tracker
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from torchutil.coded import sim
from torchutil.coded.codes import Code
from torchutil.coded.serve_frontend import Frontend, PolicyRun
from torchutil.coded.serve_procs import TO_WORKER, WORKER_FAILED, burner, layout, stop, worker

__all__ = ["PolicyRun", "ServeConfig", "ServeReport", "format_report", "measure", "write_report"]

_ANSWERED_BY = ("own", "replica", "reconstruction")


def _error(message: str) -> ValueError:
    return ValueError(f"torchutil.coded: {message}")


@dataclass(frozen=True)
class ServeConfig:
    """One measured serving run; times in seconds."""

    k: int
    queries: int = 2000  # per policy
    load: float = 0.5
    stragglers: tuple[int, ...] = (0,)
    straggler_on_fraction: float = 0.2
    straggler_burst_seconds: float = 0.02
    worker_nice: int = 19
    device: str = "cpu"
    calibration_queries: int = 100
    warmup_fraction: float = 0.1
    policies: tuple[str, ...] = sim.POLICIES
    timeout_seconds: float = 60.0  # the longest wait for any result before the run is called broken
    seed: int = 0

    def check(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 2:
            raise _error(f"k must be an integer >= 2, got {self.k!r}")
        if self.queries < 2 * self.k:
            raise _error(f"queries must be at least 2k = {2 * self.k}, got {self.queries}")
        if not 0 < self.load < 1:
            raise _error(f"load must be in (0, 1), got {self.load}")
        bad = [w for w in self.stragglers if not 0 <= w <= self.k]
        if bad or len(set(self.stragglers)) != len(self.stragglers):
            raise _error(f"stragglers must be distinct worker numbers 0..{self.k} (k data workers, then the extra "
                         f"one; one burner each), got {list(self.stragglers)}")
        try:
            device = torch.device(self.device)
        except (RuntimeError, TypeError):
            device = None
        if device is None or device.type not in ("cpu", "cuda"):
            raise _error(f"device must be cpu or cuda[:N] (where the workers run F), got {self.device!r}")
        if not 0 < self.straggler_on_fraction < 1 or not self.straggler_burst_seconds > 0:
            raise _error(f"straggler_on_fraction must be in (0, 1) and straggler_burst_seconds > 0, got "
                         f"{self.straggler_on_fraction} and {self.straggler_burst_seconds}")
        unknown = [p for p in self.policies if p not in sim.POLICIES]
        if unknown or not self.policies:
            raise _error(f"policies must be some of {', '.join(sim.POLICIES)}, got {list(self.policies)}")
        if not 0 <= self.worker_nice <= 19 or self.calibration_queries < 1 or not 0 <= self.warmup_fraction < 1:
            raise _error(f"worker_nice must be 0..19, calibration_queries >= 1 and warmup_fraction in [0, 1), got "
                         f"{self.worker_nice}, {self.calibration_queries}, {self.warmup_fraction}")


@dataclass
class ServeReport:
    """The measured run, the simulation beside it, and the set-up (seconds)."""

    config: ServeConfig
    layout: dict[str, Any]
    calibration_round_trip: list[float]
    arrival_rate: float
    burner_on_fraction: list[float]
    measured: list[sim.SimSummary]
    replayed: list[sim.SimSummary]
    iid: list[sim.SimSummary]
    details: dict[str, dict[str, float]]
    runs: dict[str, PolicyRun] = field(repr=False, default_factory=dict)
    query_index: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0, np.int64))  # into `images`

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("runs", "query_index")}


def _summaries(config: ServeConfig, run: PolicyRun, burners: list[list[tuple[float, float]]],
               rng: np.random.Generator) -> tuple[sim.SimSummary, sim.SimSummary, sim.SimSummary, dict[str, float]]:
    k, n = config.k, len(run.arrivals)
    workers = k + (run.policy != "none")
    measured = sim.summarize_latencies(run.policy, config.load, workers, run.latencies, run.answered_by == 2,
                                       config.warmup_fraction)
    occ = run.occupancy()
    data, extra = occ[:n], occ[n:]
    extra_services = None if run.policy == "none" else np.where(np.isfinite(extra), extra, 0.0)
    enc = float(np.median(run.encode_seconds)) if run.encode_seconds else 0.0
    dec = float(np.median(run.decode_seconds)) if run.decode_seconds else 0.0
    rel = run.arrivals - run.arrivals[0]
    replayed = sim.replay(run.policy, k, rel, data, extra_services, encode_seconds=enc, decode_seconds=dec)
    iid_data = np.empty(n)
    for w in range(k):
        iid_data[w::k] = rng.choice(data[w::k], n // k)
    iid_extra = None
    if extra_services is not None:
        sent = extra_services[np.isfinite(run.send[n:])]
        iid_extra = np.where(np.isfinite(run.send[n:]), rng.choice(sent, len(extra)), 0.0)
    iid = sim.replay(run.policy, k, rel, iid_data, iid_extra, encode_seconds=enc, decode_seconds=dec)
    summary = [sim.summarize_latencies(run.policy, config.load, workers, r.latencies, r.reconstructed,
                                       config.warmup_fraction) for r in (replayed, iid)]
    sent = np.isfinite(run.send)
    details = {"dispatch_lag_median": float(np.median(run.send[:n] - run.arrivals)),
               "dispatch_lag_p99": float(np.quantile(run.send[:n] - run.arrivals, 0.99)),
               "return_lag_median": float(np.median((run.back - run.end)[sent])),
               "encode_median": enc if run.encode_seconds else None,  # None: this policy neither encodes nor decodes
               "decode_median": dec if run.decode_seconds else None,
               "answered_by_replica": float(np.mean(run.answered_by == 1)),
               "answered_by_reconstruction": float(np.mean(run.answered_by == 2))}
    for w in range(k + 1):
        mine = (run.worker == w) & sent
        if mine.any():
            details[f"worker{w}_service_median"] = float(np.median(occ[mine]))
            details[f"worker{w}_service_p99"] = float(np.quantile(occ[mine], 0.99))
    for w, bursts in zip(config.stragglers, burners):
        # Each of the worker's services (its occupancy, above) by whether it began during a burst.
        mine = np.flatnonzero((run.worker == w) & sent)
        began = run.end[mine] - occ[mine]
        during = np.zeros(len(mine), dtype=bool)
        if bursts:
            starts, ends = np.array(bursts).T
            pos = np.searchsorted(starts, began, side="right") - 1
            during = (pos >= 0) & (began < ends[np.maximum(pos, 0)])
        for name, sel in (("burst", during), ("quiet", ~during)):
            details[f"worker{w}_service_{name}_median"] = float(np.median(occ[mine][sel])) if sel.any() else np.nan
            details[f"worker{w}_service_{name}_count"] = int(sel.sum())
    return measured, summary[0], summary[1], details


def measure(config: ServeConfig, base_model: nn.Module, code: Code, images: torch.Tensor,
            labels: torch.Tensor | None = None) -> ServeReport:
    """The measured run of config.policies with F = base_model and `code` (its parity model on
    the extra worker), on queries drawn (seeded) from `images` [N, C, H, W]; with `labels` [N],
    the accuracy of what was answered too (details[policy]["served_accuracy"])."""
    config.check()
    if code.k != config.k:
        raise _error(f"the code is for k = {code.k}, the configuration says k = {config.k}")
    ctx = mp.get_context("spawn")
    rng = np.random.default_rng(config.seed)
    n = config.queries // config.k * config.k
    pool = images.detach().float().cpu().numpy()
    index = rng.integers(0, len(pool), n)
    queries = pool[index]
    shape = tuple(pool.shape[1:])
    cores = layout(config.k, config.stragglers)
    cores["worker_pids"], cores["burner_pids"] = [], []
    models = [[base_model]] * config.k + [[base_model, code.parity_model]]
    workers, burners, conns, burner_conns = [], [], [], []
    saved_affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    tracker_was_running = getattr(tracker, "_pid", None) is not None
    try:
        for w, ms in enumerate(models):
            here, there = ctx.Pipe()
            p = ctx.Process(target=worker, args=(there, ms, shape, config.device, cores["workers"][w],
                                                  config.worker_nice), name=f"coded-worker-{w}", daemon=True)
            p.start()
            there.close()
            workers.append(p)
            cores["worker_pids"].append(p.pid)
            conns.append(here)
        for w, c in enumerate(conns):
            try:
                said = c.recv_bytes() if c.poll(config.timeout_seconds * 5) else b""
            except EOFError:
                said = b""
            if said.startswith(WORKER_FAILED):  # its own exception, e.g. a device it cannot use
                raise _error(f"worker {w} could not start on {config.device}: "
                             f"{said[len(WORKER_FAILED):].decode(errors='replace')}")
            if said != b"ready":
                workers[w].join(1)
                raise RuntimeError(f"torchutil.coded: worker {w} did not start (exit code {workers[w].exitcode}); "
                                   f"a script that calls measure() needs `if __name__ == '__main__':`")
        if cores["frontend"] is not None:
            os.sched_setaffinity(0, {cores["frontend"]})
        front = Frontend(conns, code.eval(), queries, config.timeout_seconds, cores["frontend_spins"])
        calibration = [float(np.median([front.round_trip(w, queries[i % n]) for i in range(config.calibration_queries)]))
                       for w in range(config.k)]
        rate = config.load * config.k / float(np.mean(calibration))
        for j, w in enumerate(config.stragglers):
            here, there = ctx.Pipe()
            p = ctx.Process(target=burner, args=(there, cores["burners"][w], config.straggler_on_fraction,
                                                  config.straggler_burst_seconds, config.seed * 1000 + j),
                            name=f"coded-burner-{w}", daemon=True)
            p.start()
            there.close()
            burners.append(p)
            cores["burner_pids"].append(p.pid)
            burner_conns.append(here)
        for w, c in zip(config.stragglers, burner_conns):
            if not c.poll(config.timeout_seconds * 5) or c.recv() != "ready":
                raise RuntimeError(f"torchutil.coded: the burner of worker {w} did not start")
        offsets = np.cumsum(rng.exponential(1 / rate, n))
        t_first = time.perf_counter()
        runs = {policy: front.run(policy, offsets) for policy in config.policies}
        t_last = time.perf_counter()
        logs = []
        for c in burner_conns:
            c.send("stop")
            logs.append(c.recv() if c.poll(10) else [])
    finally:
        for c in conns:
            try:
                c.send_bytes(TO_WORKER.pack(-1, 0))
            except (BrokenPipeError, OSError):
                pass  # that worker is already gone
        for c in burner_conns:
            try:
                c.send("stop")
            except (BrokenPipeError, OSError):
                pass
        stop(workers + burners)
        for c in conns + burner_conns:
            c.close()
        if saved_affinity is not None:
            os.sched_setaffinity(0, saved_affinity)
        if not tracker_was_running and getattr(tracker, "_pid", None) is not None and hasattr(tracker, "_stop"):
            tracker._stop()  # the helper process that starting "spawn" processes started, stopped by its object
    on = [sum(e - s for s, e in log if e > t_first and s < t_last) / (t_last - t_first) for log in logs]
    results = [_summaries(config, runs[p], logs, np.random.default_rng([config.seed, i]))
               for i, p in enumerate(config.policies)]
    details = {p: r[3] for p, r in zip(config.policies, results)}
    if labels is not None:
        truth = labels.cpu().numpy()[index]
        for p in config.policies:
            details[p]["served_accuracy"] = float(np.mean(runs[p].predicted == truth))
    return ServeReport(config, cores, calibration, rate, on, [r[0] for r in results], [r[1] for r in results],
                       [r[2] for r in results], details, runs, index)


def format_report(report: ServeReport) -> str:
    """A markdown account: set-up, the three policies measured, the simulation beside them."""
    c, lay = report.config, report.layout
    us = 1e6
    lines = [f"k = {c.k}; {c.queries} queries per policy, Poisson at {report.arrival_rate:,.0f} /s (load {c.load} of "
             f"the data workers' median idle round trip, {', '.join(f'{us * t:.0f}' for t in report.calibration_round_trip)} µs); "
             f"workers on {c.device} at nice {c.worker_nice}, cores: frontend {lay['frontend']}, workers "
             f"{lay['workers']}{'' if lay['dedicated'] else ' (shared: fewer cores than k + 2)'}"
             f"{'' if lay.get('frontend_spins', True) else ', the frontend blocking between arrivals'}; stragglers: burners "
             f"on the cores of workers {list(c.stragglers)}, bursts of mean {1e3 * c.straggler_burst_seconds:g} ms, "
             f"busy {', '.join(f'{100 * f:.0f} %' for f in report.burner_on_fraction)} of the run.", "",
             "| policy | workers | measured median / p99 / p99.9 (µs) | replay of the measured service times | "
             "independent draws of them | answered by reconstruction / replica | answers correct |",
             "|---|---|---|---|---|---|---|"]
    for m, r, i in zip(report.measured, report.replayed, report.iid):
        d = report.details[m.policy]
        correct = f"{100 * d['served_accuracy']:.1f} %" if "served_accuracy" in d else "–"
        lines.append(f"| {m.policy} | {m.workers} | {us * m.median:.0f} / {us * m.p99:.0f} / {us * m.p999:.0f} | "
                     f"{us * r.median:.0f} / {us * r.p99:.0f} / {us * r.p999:.0f} | "
                     f"{us * i.median:.0f} / {us * i.p99:.0f} / {us * i.p999:.0f} | "
                     f"{100 * d['answered_by_reconstruction']:.1f} % / {100 * d['answered_by_replica']:.1f} % | "
                     f"{correct} |")
    lines += ["", "| policy | dispatch lag median / p99 (µs) | result trip back (µs) | encode / decode (µs) | "
              "service median / p99 per worker (µs) |", "|---|---|---|---|---|"]
    for m in report.measured:
        d = report.details[m.policy]
        per = ", ".join(f"{us * d[f'worker{w}_service_median']:.0f}/{us * d[f'worker{w}_service_p99']:.0f}"
                        for w in range(c.k + 1) if f"worker{w}_service_median" in d)
        coding = " / ".join("–" if d[x] is None else f"{us * d[x]:.0f}" for x in ("encode_median", "decode_median"))
        lines.append(f"| {m.policy} | {us * d['dispatch_lag_median']:.0f} / {us * d['dispatch_lag_p99']:.0f} | "
                     f"{us * d['return_lag_median']:.0f} | {coding} | {per} |")
    for w in c.stragglers:
        d = report.details[report.measured[0].policy]
        lines.append(f"\nStraggler worker {w} ({report.measured[0].policy} run): median service "
                     f"{us * d[f'worker{w}_service_burst_median']:.0f} µs when begun during a burst of its burner "
                     f"({d[f'worker{w}_service_burst_count']} queries), "
                     f"{us * d[f'worker{w}_service_quiet_median']:.0f} µs otherwise "
                     f"({d[f'worker{w}_service_quiet_count']}).")
    lines.append("\nReading the simulation columns: measured - replay is what the simulation leaves out (the "
                 "frontend's dispatch lag and the trip back, in the second table); replay - independent draws is "
                 "what assuming independent service times changes (a burst slows consecutive queries of one "
                 "worker together).")
    for m, r, i in zip(report.measured, report.replayed, report.iid):
        lines.append(f"- {m.policy}: p99.9 measured - replay {us * (m.p999 - r.p999):+.0f} µs, replay - independent "
                     f"{us * (r.p999 - i.p999):+.0f} µs; median {us * (m.median - r.median):+.0f} / "
                     f"{us * (r.median - i.median):+.0f} µs.")
    return "\n".join(lines)


def write_report(report: ServeReport, out: str) -> list[str]:
    """serve.json (everything but the per-query arrays) and serve.md into folder `out`."""
    from torchutil._files import atomic_open, write_json

    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "serve.json"), report.to_dict(), indent=2)
    with atomic_open(os.path.join(out, "serve.md")) as f:
        f.write(format_report(report) + "\n")
    return ["serve.json", "serve.md"]
