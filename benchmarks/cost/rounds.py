"""Interleaved rounds for the call-cost benchmarks (bench_overhead.py, module_path_cost.py): every
round runs each variant once, in a new random order, with the device synchronized before and
after, so that a host whose speed drifts between rounds moves every variant alike and the
rounds' paired differences stay comparable."""
from __future__ import annotations

import random
import statistics
import time
from typing import Callable


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(q1, median, q3); the one value thrice for a single sample."""
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return q[0], statistics.median(values), q[2]


def timed_rounds(variants: dict[str, Callable[[], object]], rounds: int, seed: int,
                 sync: Callable[[], None], before_rounds: Callable[[], None] | None = None,
                 after_round: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """Seconds per call of each variant over `rounds` rounds. Each variant runs twice first (to
    warm every path: library init, lazy modules, CUPTI), then before_rounds(); after_round()
    after each round."""
    for fn in variants.values():
        fn()
        fn()
    if before_rounds is not None:
        before_rounds()
    rng = random.Random(seed)
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            sync()
            t0 = time.perf_counter()
            variants[name]()
            sync()
            samples[name].append(time.perf_counter() - t0)
        if after_round is not None:
            after_round()
    return samples
