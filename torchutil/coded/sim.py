"""Tail latency of a served classifier under stragglers: a discrete-event simulation of k workers
serving F with no redundancy, with equal-resources replication, and with a code (numpy only).

The model and its assumptions:
- Queries arrive one at a time, a Poisson process (or periodically, `arrivals="periodic"`) of
  rate load * k / E[service]: `load` is the utilization the k data workers would have serving F
  alone. All three policies see the same arrivals.
- Query j goes to data worker j mod k (static round-robin); queries j = gk .. gk+k-1 form group
  g. Each worker serves one query at a time, first come first served, with no batching;
  redundant work is never cancelled. Network and front-end times other than encoding and
  decoding are ignored.
- Service times are independent per query: the measured time of F on one query (batch 1),
  times the straggler model: "none" (always that time), "bimodal" (with probability p it takes
  `slowdown` times longer), "shifted-exp" (that time plus an exponential of mean `tail` times
  it: background load), "exponential" (exponential of that mean; the M/M/1 case). Failures:
  with probability `failure_probability` a query's result never comes back (its worker is busy
  for the service time all the same). The extra worker's services follow the same model from
  its own (measured) time. The data workers draw the same service times and failures under
  every policy (common random numbers), so the policies differ only by what they add.
- none: k workers. replication (equal resources, r = 1): one more worker, which serves a copy of
  one query of every group (query g mod k of group g, rotating); the query is answered by
  whichever copy finishes first. coded (r = 1): one more worker serves the group's parity query,
  encoded at the front end once the group's last query has arrived (`encode_seconds`); query
  i is answered at min(its own completion, reconstruction), where reconstruction = the latest of
  the parity output and the other k-1 outputs, plus `decode_seconds`.
- Latency = answer time - arrival time (infinite for a query never answered). The first
  `warmup_fraction` of the queries are left out of the statistics (the system starts empty).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

import numpy as np

__all__ = ["POLICIES", "STRAGGLERS", "SimConfig", "SimResult", "SimSummary", "config_from_cost", "fifo_completions", "replay", "simulate",
           "summarize", "summarize_latencies", "sweep"]

POLICIES = ("none", "replication", "coded")
STRAGGLERS = ("none", "bimodal", "shifted-exp", "exponential")


def _error(message: str) -> ValueError:
    return ValueError(f"torchutil.coded: {message}")


@dataclass(frozen=True)
class SimConfig:
    """One simulated system. Times in seconds."""

    k: int
    service_seconds: float
    parity_seconds: float | None = None  # the parity model on one query; None: service_seconds
    encode_seconds: float = 0.0
    decode_seconds: float = 0.0
    load: float = 0.5
    queries: int = 100_000
    arrivals: str = "poisson"
    straggler: str = "none"
    straggler_probability: float = 0.0
    slowdown: float = 1.0
    tail: float = 1.0
    failure_probability: float = 0.0
    warmup_fraction: float = 0.1
    seed: int = 0

    def check(self) -> None:
        """ValueError naming the first field out of range."""
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise _error(f"k must be an integer >= 1, got {self.k!r}")
        for name in ("service_seconds", "encode_seconds", "decode_seconds", "tail"):
            if not np.isfinite(getattr(self, name)) or getattr(self, name) < 0:
                raise _error(f"{name} must be a finite number >= 0, got {getattr(self, name)}")
        if self.parity_seconds is not None and not (np.isfinite(self.parity_seconds) and self.parity_seconds >= 0):
            raise _error(f"parity_seconds must be a finite number >= 0, got {self.parity_seconds}")
        if not 0 < self.load < 1 and self.arrivals == "poisson":
            raise _error(f"load must be in (0, 1) for Poisson arrivals (a queue above 1 grows without end), "
                         f"got {self.load}")
        if not self.load > 0:
            raise _error(f"load must be > 0, got {self.load}")
        if self.arrivals not in ("poisson", "periodic"):
            raise _error(f"arrivals must be poisson or periodic, got {self.arrivals!r}")
        if self.straggler not in STRAGGLERS:
            raise _error(f"unknown straggler model {self.straggler!r}; choose from {', '.join(STRAGGLERS)}")
        for name in ("straggler_probability", "failure_probability", "warmup_fraction"):
            if not 0 <= getattr(self, name) < 1:
                raise _error(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not self.slowdown >= 1:
            raise _error(f"slowdown must be >= 1, got {self.slowdown}")
        if self.queries < self.k or self.mean_service(self.service_seconds) <= 0:
            raise _error(f"need at least k = {self.k} queries and a service time > 0, got {self.queries} queries "
                         f"of {self.service_seconds} s")

    def mean_service(self, base: float) -> float:
        """E[service] of a worker whose straggler-free time is `base`."""
        if self.straggler == "bimodal":
            return base * (1 + self.straggler_probability * (self.slowdown - 1))
        if self.straggler == "shifted-exp":
            return base * (1 + self.tail)
        return base

    @property
    def arrival_rate(self) -> float:
        """Queries per second: load times the capacity of k workers serving F."""
        return self.load * self.k / self.mean_service(self.service_seconds)


@dataclass
class SimResult:
    """Per query: arrival, answer time (inf: never answered), and whether reconstruction answered."""

    policy: str
    workers: int
    arrivals: np.ndarray
    answers: np.ndarray
    reconstructed: np.ndarray

    @property
    def latencies(self) -> np.ndarray:
        return self.answers - self.arrivals


@dataclass
class SimSummary:
    """Statistics of one policy at one load (seconds); the latency quantiles are inf when more
    queries than the quantile leaves were never answered."""

    policy: str
    load: float
    workers: int
    queries: int
    median: float
    p99: float
    p999: float
    mean: float
    fraction_reconstructed: float
    fraction_unanswered: float

    def to_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


def fifo_completions(arrivals: np.ndarray, services: np.ndarray) -> np.ndarray:
    """Completion times of one first-come-first-served worker (arrivals sorted):
    c_m = max(a_m, c_{m-1}) + s_m, in that order of operations, so that a query that finds the
    worker idle completes at exactly a_m + s_m."""
    done = np.empty(len(arrivals))
    free = -np.inf
    for m, (a, s) in enumerate(zip(arrivals.tolist(), services.tolist())):
        free = done[m] = (a if a > free else free) + s
    return done


def _services(rng: np.random.Generator, base: float, n: int, config: SimConfig) -> np.ndarray:
    if config.straggler == "bimodal":
        slow = rng.random(n) < config.straggler_probability
        return np.where(slow, base * config.slowdown, base)
    if config.straggler == "shifted-exp":
        return base + rng.exponential(base * config.tail, n) if base * config.tail > 0 else np.full(n, base)
    if config.straggler == "exponential":
        return rng.exponential(base, n) if base > 0 else np.zeros(n)
    return np.full(n, base)


def replay(policy: str, k: int, arrivals: np.ndarray, services: np.ndarray, extra_services: np.ndarray | None = None,
           *, encode_seconds: float = 0.0, decode_seconds: float = 0.0, lost: np.ndarray | None = None,
           extra_lost: np.ndarray | None = None) -> SimResult:
    """One run of `policy` with given service times (seconds), under the model above: query j
    (arrivals sorted, len a multiple of k) takes services[j] on data worker j mod k; the extra
    worker's g-th job (group g's copy under replication, its parity query under the code) takes
    extra_services[g]. lost / extra_lost (bool) mark results that never come back. Used by
    simulate(), and to replay the service times a measured run (torchutil.coded.serve) saw."""
    if policy not in POLICIES:
        raise _error(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    arrivals, services = np.asarray(arrivals, dtype=float), np.asarray(services, dtype=float)
    n = len(arrivals)
    if n % k or len(services) != n:
        raise _error(f"replay needs a multiple of k = {k} arrivals and one service time each, got {n} and "
                     f"{len(services)}")
    own = np.empty(n)
    for w in range(k):  # the data workers, in the same order under every policy
        own[w::k] = fifo_completions(arrivals[w::k], services[w::k])
    if lost is not None:
        own = np.where(lost, np.inf, own)
    answers, reconstructed = own.copy(), np.zeros(n, dtype=bool)
    g = np.arange(n // k)
    if policy != "none":
        if extra_services is None or len(extra_services) != len(g):
            raise _error(f"the {policy} policy needs one extra-worker service time per group ({len(g)})")
        jobs = g * k + g % k if policy == "replication" else g * k + k - 1
        extra_arrivals = arrivals[jobs] + (encode_seconds if policy == "coded" else 0.0)
        extra = fifo_completions(extra_arrivals, np.asarray(extra_services, dtype=float))
        if extra_lost is not None:
            extra = np.where(extra_lost, np.inf, extra)
        if policy == "replication":
            answers[jobs] = np.minimum(own[jobs], extra)
        else:
            outputs = own.reshape(-1, k)
            # The latest of the other k-1 outputs: the row's maximum, or its second largest where i holds it.
            top2 = np.sort(outputs, axis=1)[:, -2:] if k > 1 else np.full((len(g), 2), -np.inf)
            holds_max = np.arange(k)[None, :] == outputs.argmax(axis=1)[:, None]
            others = np.where(holds_max, top2[:, :1], top2[:, 1:])
            recon = np.maximum(others, extra[:, None]) + decode_seconds
            reconstructed = (recon < outputs).reshape(-1)
            answers = np.minimum(outputs, recon).reshape(-1)
    return SimResult(policy, k + (policy != "none"), arrivals, answers, reconstructed)


def simulate(config: SimConfig, policy: str) -> SimResult:
    """One run of `policy` (POLICIES) on the system `config`."""
    config.check()
    if policy not in POLICIES:
        raise _error(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    k = config.k
    n = config.queries // k * k
    arrival_rng, data_rng, extra_rng = (np.random.default_rng([config.seed, stream]) for stream in range(3))
    gaps = (arrival_rng.exponential(1 / config.arrival_rate, n) if config.arrivals == "poisson"
            else np.full(n, 1 / config.arrival_rate))
    arrivals = np.cumsum(gaps)
    services, lost = np.empty(n), np.empty(n, dtype=bool)
    for w in range(k):  # the data workers draw in the same order under every policy
        services[w::k] = _services(data_rng, config.service_seconds, n // k, config)
        lost[w::k] = data_rng.random(n // k) < config.failure_probability
    extra_services = extra_lost = None
    if policy != "none":
        base = (config.service_seconds if policy == "replication" or config.parity_seconds is None
                else config.parity_seconds)
        extra_services = _services(extra_rng, base, n // k, config)
        extra_lost = extra_rng.random(n // k) < config.failure_probability
    return replay(policy, k, arrivals, services, extra_services, encode_seconds=config.encode_seconds,
                  decode_seconds=config.decode_seconds, lost=lost, extra_lost=extra_lost)


def summarize_latencies(policy: str, load: float, workers: int, latencies: np.ndarray, reconstructed: np.ndarray,
                        warmup_fraction: float) -> SimSummary:
    """The statistics of per-query latencies (inf: never answered), the first warmup_fraction
    of them left out."""
    start = int(warmup_fraction * len(latencies))
    lat = np.asarray(latencies, dtype=float)[start:]
    finite = lat[np.isfinite(lat)]

    def quantile(q: float) -> float:
        return float(np.quantile(lat, q, method="inverted_cdf"))  # no interpolation towards inf

    return SimSummary(policy=policy, load=load, workers=workers, queries=len(lat),
                      median=quantile(0.5), p99=quantile(0.99), p999=quantile(0.999),
                      mean=float(finite.mean()) if len(finite) else float("inf"),
                      fraction_reconstructed=float(np.asarray(reconstructed)[start:].mean()),
                      fraction_unanswered=float(1 - len(finite) / len(lat)))


def summarize(result: SimResult, config: SimConfig) -> SimSummary:
    return summarize_latencies(result.policy, config.load, result.workers, result.latencies, result.reconstructed,
                               config.warmup_fraction)


def sweep(config: SimConfig, loads: Sequence[float], policies: Sequence[str] = POLICIES) -> list[SimSummary]:
    """summarize(simulate(...)) for every load and policy, load by load."""
    return [summarize(simulate(replace(config, load=load), policy), replace(config, load=load))
            for load in loads for policy in policies]


def config_from_cost(cost: Any, run: str | None, source: str = "the cost file",
                         **kwargs: Any) -> tuple[str, SimConfig]:
    """A SimConfig whose service, parity, encode and decode times are a cost table's medians
    (batch 1: one query per service) for run `run` (default: the table's first). A table that is
    not what `coded cost` writes is refused naming `source` and the field."""
    summaries = cost.get("summaries") if isinstance(cost, dict) else None
    if not summaries or not isinstance(summaries, list) or not all(isinstance(s, dict) for s in summaries):
        raise _error(f"{source} holds no runs (a cost.json of `coded cost` has a list 'summaries' of runs)")
    names = [s.get("run") for s in summaries]
    if run is not None and run not in names:
        raise _error(f"no run {run!r} in {source}; it has {', '.join(map(str, names))}")
    s = summaries[names.index(run) if run is not None else 0]
    if cost.get("batch") != 1:
        raise _error(f"the simulation serves one query at a time: measure the cost at --batch 1, "
                     f"not {cost.get('batch')}")
    def seconds(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0

    checks = {"run": (lambda v: isinstance(v, str), "a name"),
              "k": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 2, "an integer >= 2"),
              **{f: (seconds, "a number of seconds >= 0") for f in _COST_SECONDS.values()}}
    for field, (ok, what) in checks.items():
        if not ok(s.get(field)):
            raise _error(f"{source}: run {s.get('run')!r} has {field} {s.get(field)!r}, not {what}")
    return s["run"], SimConfig(k=s["k"], **{name: float(s[f]) for name, f in _COST_SECONDS.items()}, **kwargs)


# SimConfig's times -> the fields of a cost table's summary they are read from.
_COST_SECONDS = {"service_seconds": "base_model_seconds", "parity_seconds": "parity_model_seconds",
                 "encode_seconds": "encoder_seconds", "decode_seconds": "decoder_seconds"}
