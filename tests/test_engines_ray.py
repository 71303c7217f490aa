"""torchutil's reward on Ray: a Ray Tune trainable with quarter GPUs, `nas evaluate --ray` and the
rehearsal of a multi-machine sweep, on a two-node Ray cluster started on this machine as on real
machines (`ray start --head --port P`, `ray start --address HEAD:P`, each on ports of its own; the
head declares one GPU, which Ray schedules as it would a real one). Cells on the meta device
(FLOPs counted, nothing timed), their FLOPs checked against a plain evaluate_arch call. One
cluster for the module (Ray's start is slow); the rehearsal, which kills the worker node, last."""
from __future__ import annotations

import functools
import os
import secrets
import signal
import socket
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import torch

# Ray reads its auth mode once, on import: a driver joining a token-authenticated cluster by
# address needs "token" before that. The token is the test's own, in the environment the nodes
# inherit: `ray start` makes none (a fresh machine has no ~/.ray/auth_token) and refuses to start
# a head without one. 32 random bytes in hex, as Ray's own generator makes them.
os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
ray = pytest.importorskip("ray")
pytest.importorskip("ray.tune")

from torchutil import gpu_sharing  # noqa: E402
from torchutil.nas import engines  # noqa: E402
from torchutil.nas import natsbench as nb  # noqa: E402
from torchutil.nas.evaluator import eval_config  # noqa: E402
from torchutil.studies import nas_cells as cells  # noqa: E402
from torchutil.studies import nas_evaluate as ev  # noqa: E402
from torchutil.studies.nas_ray import actor_plan, ray_sweep  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray cluster's start and its processes' imports: minutes on 2 cores

META = eval_config("meta", batch=2, warmup=0, iters=1)
ROOT = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=None)
def counted_flops(index):
    """The oracle: a plain evaluate_arch call on the cell's own network (natsbench.network)."""
    return ev.evaluate_arch(index, META, cells.make_input(META, torch.device("meta")))["flops"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    """(pid, name) of the processes whose parent is pid, from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            if int(rest[1]) == pid:
                out.append((int(entry), name))
    return out


def descendants(pid):
    """The pids below pid, children first."""
    out = []
    for child, _ in children(pid):
        out += [child, *descendants(child)]
    return out


# Ray's command, beside the interpreter that runs the tests: a virtual environment that is not
# activated (make test's .venv) is not on PATH.
RAY = os.path.join(os.path.dirname(sys.executable), "ray")


class Node:
    """One `ray start --block` process (a node): its log, and stopped by its pid."""

    def __init__(self, args, log, env):
        self.log = log
        self.proc = subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats",
                                      "--dashboard-agent-listen-port", str(free_port()), *args],
                                     env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)

    def wait_for(self, text, seconds=180):
        deadline = time.monotonic() + seconds
        while text not in self.log.read_text():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.5)

    def raylet(self):
        return next(pid for pid, name in children(self.proc.pid) if name == "raylet")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head (2 CPUs, one declared GPU) and a worker node (1 CPU) on ports of their own; this
    process connects as the driver. Both stopped by pid at the end."""
    tmp = tmp_path_factory.mktemp("ray")
    saved = dict(os.environ)
    runtime = tmp / "run"
    os.environ.update({
        gpu_sharing.RUNTIME_DIR_ENV: str(runtime),
        "RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "4",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    })
    port = free_port()
    # Its own temp folder, short (Ray's socket paths live there): `ray start --head` writes the
    # address of "the cluster on this machine" there, not into /tmp/ray for every later ray.init.
    temp = tempfile.mkdtemp(prefix="tu-ray-")
    nodes = [Node(["--head", "--port", str(port), "--temp-dir", temp, "--include-dashboard", "false",
                   "--num-cpus", "2", "--num-gpus", "1"], tmp / "head.log",
                  dict(os.environ))]
    try:
        nodes[0].wait_for("Ray runtime started")
        nodes.append(Node(["--address", f"127.0.0.1:{port}", "--num-cpus", "1"], tmp / "worker.log",
                          dict(os.environ)))
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
        deadline = time.monotonic() + 180
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            alive = nodes[1].proc.poll() is None
            assert alive and time.monotonic() < deadline, (tmp / "worker.log").read_text()[-3000:]
            time.sleep(0.5)
        yield {"head": nodes[0], "worker": nodes[1], "tmp": tmp, "runtime": runtime}
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for node in reversed(nodes):
            node.stop()
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(temp, ignore_errors=True)


def test_actors_follow_the_gpus_ray_reports_one_per_gpu_or_per_share():
    assert actor_plan({"GPU": 8.0, "CPU": 64.0}, "cuda") == (8, {"num_gpus": 1.0})
    assert actor_plan({"GPU": 2.0}, "cuda", gpus_per_actor=0.25) == (8, {"num_gpus": 0.25})
    assert actor_plan({"CPU": 3.0}, "cpu") == (3, {"num_cpus": 1})
    with pytest.raises(ValueError, match=r"reports 0 GPUs; a CUDA sweep needs at least 1"):
        actor_plan({"CPU": 3.0}, "cuda")
    with pytest.raises(ValueError, match=r"gpus_per_actor must be in \(0, 1\], got 1.5"):
        actor_plan({"GPU": 2.0}, "cuda", gpus_per_actor=1.5)


def test_ray_tune_trials_on_quarter_gpus_all_measure_in_the_gpus_one_service(cluster):
    from ray import tune

    assert ray.cluster_resources()["GPU"] == 1.0
    trainable = engines.tune_trainable(["accuracy", "flops"], config=META, threads=1, idle_seconds=3.0)
    tuner = tune.Tuner(tune.with_resources(trainable, {"cpu": 0, "gpu": 0.25}), param_space=engines.tune_space(),
                       tune_config=tune.TuneConfig(num_samples=4),
                       run_config=tune.RunConfig(storage_path=str(cluster["tmp"] / "tune"), verbose=0))
    results = tuner.fit()
    assert not results.errors, results.errors
    table = nb.load_accuracy_table()
    seen = [r.metrics for r in results]
    assert len(seen) == 4
    for m in seen:
        assert m["accuracy"] == table[m["index"]].cifar10_test_acc and m["flops"] == counted_flops(m["index"])
    assert len({m["measured_by"] for m in seen}) == 1  # four trials, one measuring process


def test_nas_evaluate_ray_writes_every_cell_once_through_the_cli(cluster):
    db = cluster["tmp"] / "cli.sqlite"
    out = subprocess.run([sys.executable, "-m", "torchutil", "nas", "evaluate", "--ray", ray.get_runtime_context().gcs_address,
                          "--device", "cpu", "--batch", "1", "--warmup", "0", "--iters", "1", "--indices", "0:3",
                          "--db", str(db), "--no-progress"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    # --device cpu: one actor of a CPU per chunk of four cells, at most Ray's three CPUs.
    assert "Ray reports 1 GPU(s); 1 actor(s), 1 thread(s) each, on 1 node(s): 3 cells" in out.stdout
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT idx FROM results ORDER BY idx").fetchall() == [(0,), (1,), (2,)]


def test_a_node_killed_mid_run_costs_only_its_cells_in_flight_and_every_cell_lands_once(cluster):
    """The rehearsal: two actors, one per node; the worker node is lost once it has committed a
    chunk (its raylet and every process under it, its actor among them, SIGKILLed by pid, as
    when a machine goes down: a raylet killed alone leaves its actor answering for a while, and
    a short run could end before Ray saw the node die); Ray restarts the actor on the head and
    retries the calls it had in flight; the driver writes every cell once."""
    db = cluster["tmp"] / "rehearsal.sqlite"
    worker_node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and "node:__internal_head__" not in n["Resources"])
    done, result, killed = [], {}, threading.Event()

    def on_rows(node, pid, cells):
        done.append((node, pid, cells, killed.is_set()))

    def run():
        try:
            result["stats"] = ray_sweep(META, range(12), db, actors=2, chunk=1, depth=1, stall_seconds=240,
                                        progress=False, on_rows=on_rows)
        except BaseException as e:  # raised in the test below
            result["error"] = e

    driver = threading.Thread(target=run)
    driver.start()
    deadline = time.monotonic() + 240
    while not any(node == worker_node for node, *_ in done):
        assert driver.is_alive() and time.monotonic() < deadline, result.get("error")
        time.sleep(0.1)
    raylet = cluster["worker"].raylet()
    for pid in [*descendants(raylet), raylet]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    killed.set()
    before = sum(len(cells) for *_, cells, after in done if not after)
    driver.join(timeout=300)
    assert not driver.is_alive() and "error" not in result, result.get("error")
    stats = result["stats"]
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT idx, flops FROM results ORDER BY idx").fetchall()
    assert [i for i, _ in rows] == list(range(12))  # every cell exactly once
    assert all(flops == counted_flops(i) for i, flops in rows)
    said = f"chunks (node, pid, cells, after the kill): {done}; {stats}"
    assert stats.evaluated == 12 and before < 12, said  # the kill landed mid-run
    pids = {pid: node for node, pid, *_ in done}
    assert len(pids) == 3, said  # the two actors, and the worker node's restarted by Ray on the head
    assert list(pids.values()).count(worker_node) == 1, said
    assert sorted(i for *_, cells, _ in done for i in cells) == list(range(12))
