"""torchutil.coded.sim against closed forms: service time alone without queueing or stragglers,
M/M/1, the fraction of queries a code reconstructs and the fraction left unanswered without
queueing, and a code or a replica never making a query later (common random numbers)."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from torchutil.coded import sim
from torchutil.coded.sim import SimConfig, simulate, summarize


def _spaced(k: int, **kwargs) -> SimConfig:
    """Periodic arrivals spaced so that no worker ever queues: a group's queries are done long
    before the next query reaches the same worker."""
    return SimConfig(**{"k": k, "service_seconds": 1.0, "arrivals": "periodic", "load": 0.01, "queries": 40_000,
                        **kwargs})


def test_latency_is_the_service_time_without_queueing_or_stragglers():
    config = _spaced(3, encode_seconds=0.1, decode_seconds=0.1)
    for policy in sim.POLICIES:
        result = simulate(config, policy)
        assert np.all(result.latencies == 1.0), policy  # exactly: no queueing, no straggler
        assert not result.reconstructed.any()
        s = summarize(result, config)
        assert s.median == s.p999 == s.mean == 1.0 and s.fraction_unanswered == 0


def test_fifo_recursion():
    arrivals = np.array([0.0, 0.5, 0.6, 5.0])
    services = np.array([1.0, 1.0, 2.0, 1.0])
    assert sim.fifo_completions(arrivals, services).tolist() == [1.0, 2.0, 4.0, 6.0]


@pytest.mark.parametrize("load", [0.5, 0.7])
def test_mm1_against_its_closed_form(load):
    """One worker, Poisson arrivals of rate lam, exponential service of rate mu: the time in the
    system is exponential with rate mu - lam (mean 1/(mu - lam), median ln 2/(mu - lam))."""
    mu = 1.0
    config = SimConfig(k=1, service_seconds=1 / mu, straggler="exponential", load=load, queries=300_000, seed=3)
    s = summarize(simulate(config, "none"), config)
    rate = mu - load * mu
    assert s.mean == pytest.approx(1 / rate, rel=0.05)
    assert s.median == pytest.approx(math.log(2) / rate, rel=0.05)
    assert s.p99 == pytest.approx(math.log(100) / rate, rel=0.07)


@pytest.mark.parametrize("k", [2, 4])
def test_fraction_reconstructed_without_queueing(k):
    """Bimodal stragglers (p, x10), no queueing: only a group's last query can be rebuilt before
    it finishes itself (the others are done or late together with it), and it is when it
    straggles and the parity query does not: a fraction p (1 - p) / k of all queries."""
    p = 0.1
    config = _spaced(k, straggler="bimodal", straggler_probability=p, slowdown=10.0, decode_seconds=0.01, seed=1)
    result = simulate(config, "coded")
    expected = p * (1 - p) / k
    n = len(result.reconstructed)
    assert result.reconstructed.mean() == pytest.approx(expected, abs=4 * math.sqrt(expected / n))
    last = np.arange(n) % k == k - 1
    assert not result.reconstructed[~last].any()
    assert np.all(result.latencies[result.reconstructed] == pytest.approx(1.01))  # parity 1 s + decode


def test_fraction_unanswered_without_queueing():
    """A failed query is lost for none; replication loses it unless it was the copied one and the
    copy survived; a code unless the parity and the k-1 others all survived."""
    q, k = 0.05, 2
    config = _spaced(k, failure_probability=q, seed=2, queries=100_000)
    n = config.queries * (1 - config.warmup_fraction)
    expected = {"none": q, "replication": q * (1 - (1 - q) / k), "coded": q * (1 - (1 - q) ** k)}
    for policy, value in expected.items():
        got = summarize(simulate(config, policy), config).fraction_unanswered
        assert got == pytest.approx(value, abs=4 * math.sqrt(value / n)), policy
    assert summarize(simulate(config, "none"), config).p999 == math.inf


@pytest.mark.parametrize("straggler", ["bimodal", "shifted-exp"])
def test_redundancy_never_makes_a_query_later(straggler):
    """The data workers draw the same service times under every policy, so a code or a replica can
    only answer earlier: per query, and so at every quantile."""
    config = SimConfig(k=4, service_seconds=2e-3, parity_seconds=2e-3, encode_seconds=1e-4, decode_seconds=1e-4,
                       load=0.7, queries=60_000, straggler=straggler, straggler_probability=0.05, slowdown=8.0,
                       tail=0.5, seed=5)
    none = simulate(config, "none")
    for policy in ("replication", "coded"):
        other = simulate(config, policy)
        assert np.array_equal(other.arrivals, none.arrivals)
        assert np.all(other.answers <= none.answers)
        a, b = summarize(none, config), summarize(other, config)
        assert b.median <= a.median and b.p999 <= a.p999
    coded = summarize(simulate(config, "coded"), config)
    assert coded.p999 < summarize(none, config).p999  # and the code does help the tail here
    assert 0 < coded.fraction_reconstructed < 0.5


def test_seeded():
    config = SimConfig(k=2, service_seconds=1.0, straggler="bimodal", straggler_probability=0.1, slowdown=5.0,
                       queries=5_000)
    a, b = simulate(config, "coded"), simulate(config, "coded")
    assert np.array_equal(a.answers, b.answers)
    c = simulate(SimConfig(**{**config.__dict__, "seed": 1}), "coded")
    assert not np.array_equal(a.answers, c.answers)


@pytest.mark.parametrize("change,names", [
    ({"k": 0}, "k must be"),
    ({"load": 1.5}, "1.5"),
    ({"straggler": "gamma"}, "'gamma'"),
    ({"straggler_probability": 1.0}, "straggler_probability"),
    ({"slowdown": 0.5}, "slowdown"),
    ({"service_seconds": -1.0}, "service_seconds"),
    ({"arrivals": "bursty"}, "'bursty'"),
])
def test_bad_configs_are_named(change, names):
    config = SimConfig(**{**SimConfig(k=2, service_seconds=1.0).__dict__, **change})
    with pytest.raises(ValueError, match="torchutil.coded") as info:
        simulate(config, "none")
    assert names in str(info.value)
    with pytest.raises(ValueError, match="'fastest'"):
        simulate(SimConfig(k=2, service_seconds=1.0, queries=10), "fastest")


def test_sim_needs_no_torch():
    """sim.py imports numpy alone: loaded by path in a process where `import torch` fails."""
    code = ("import importlib.util, sys; sys.modules['torch'] = None; "
            f"spec = importlib.util.spec_from_file_location('sim', {sim.__file__!r}); "
            "m = importlib.util.module_from_spec(spec); sys.modules['sim'] = m; spec.loader.exec_module(m); "
            "c = m.SimConfig(k=2, service_seconds=1.0, queries=1000); print(m.summarize(m.simulate(c, 'coded'), c).median)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert float(p.stdout) >= 1.0



def test_replay_without_queueing_follows_the_policies_by_hand():
    """Two groups of k = 2 far apart, so that nothing queues: every latency worked out by hand
    from the given service times (closed forms of the policies' rules)."""
    from torchutil.coded.sim import replay

    arrivals = np.array([0.0, 0.1, 100.0, 100.1])
    services = np.array([5.0, 1.0, 1.0, 1.0])  # query 0 is slow
    extra = np.array([0.5, 10.0])  # the extra worker's job of group 0 is fast, of group 1 slow
    assert np.allclose(replay("none", 2, arrivals, services).latencies, services)
    # replication copies query 2g + g % 2 (0 and 3); the faster copy answers
    assert np.allclose(replay("replication", 2, arrivals, services, extra).latencies, [0.5, 1.0, 1.0, 1.0])
    # the code: group 0's parity leaves with query 1 (t = 0.1), back at 0.6; query 1 is back at
    # 1.1, so query 0 is rebuilt at max(1.1, 0.6) + decode 0.25 = 1.35 instead of 5
    coded = replay("coded", 2, arrivals, services, extra, decode_seconds=0.25)
    assert np.allclose(coded.latencies, [1.35, 1.0, 1.0, 1.0])
    assert coded.reconstructed.tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="extra-worker service time per group"):
        replay("coded", 2, arrivals, services)
