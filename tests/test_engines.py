"""torchutil's reward in Optuna (torchutil.nas.engines), the evaluators it measures with (one in
this process, torchutil.nas.evaluator; the per-GPU service, torchutil.nas.service) and the
private folder its lock files and sockets live in (torchutil.gpu_sharing). On the meta device,
where a cell's FLOPs are counted and nothing is timed; accuracies are checked against the
packaged NATS-Bench table, FLOPs against a plain nas_evaluate.evaluate_arch call."""
from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from torchutil import gpu_sharing
from torchutil.nas import natsbench as nb
from torchutil.studies import nas_cells as cells
from torchutil.studies import nas_evaluate as ev

optuna = pytest.importorskip("optuna")

from torchutil.nas import engines  # noqa: E402
from torchutil.nas.evaluator import CellEvaluator, eval_config  # noqa: E402

META = eval_config("meta", batch=2, warmup=0, iters=1)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """A private runtime folder of the test's own (lock files, the service's socket)."""
    folder = tmp_path / "run"
    monkeypatch.setenv(gpu_sharing.RUNTIME_DIR_ENV, str(folder))
    return folder


@functools.lru_cache(maxsize=None)
def counted_flops(index):
    """The oracle for a trial's FLOPs: a plain evaluate_arch call on the cell's own network (built
    afresh by natsbench.network, not taken from a pool)."""
    return ev.evaluate_arch(index, META, cells.make_input(META, torch.device("meta")))["flops"]


def test_the_runtime_folder_is_made_private_and_a_shared_or_linked_one_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "mine"
    monkeypatch.setenv(gpu_sharing.RUNTIME_DIR_ENV, str(folder))
    assert gpu_sharing.runtime_dir() == folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    lock = folder / "gpu-x.lock"
    gpu_sharing.private_file(lock)
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600 and lock.stat().st_size == 0
    gpu_sharing.private_file(lock)  # there already: kept

    (folder / "elsewhere").write_text("")
    (folder / "link.lock").symlink_to(folder / "elsewhere")
    with pytest.raises(ValueError, match=r"link\.lock.*remove it"):
        gpu_sharing.private_file(folder / "link.lock")

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setenv(gpu_sharing.RUNTIME_DIR_ENV, str(shared))
    with pytest.raises(ValueError, match=r"open to other users \(mode 755\)"):
        gpu_sharing.runtime_dir()
    linked = tmp_path / "linked"
    linked.symlink_to(folder)
    monkeypatch.setenv(gpu_sharing.RUNTIME_DIR_ENV, str(linked))
    with pytest.raises(ValueError, match=r"must be a folder, not a symbolic link"):
        gpu_sharing.runtime_dir()


def test_a_cells_parameters_round_trip_and_a_missing_edge_is_named():
    arch = nb.arch_of_index(6111)
    params = engines.arch_params(6111)
    assert list(params) == list(engines.EDGE_PARAMS) and set(params.values()) <= set(nb.OPS)
    assert engines.arch_from_params(params) == arch
    with pytest.raises(ValueError, match=r"lack edge\(s\) edge_3_2"):
        engines.arch_from_params({k: v for k, v in params.items() if k != "edge_3_2"})


def test_a_metric_without_a_value_or_a_direction_is_named():
    with pytest.raises(ValueError, match=r"no direction known for speed"):
        engines.Reward(["accuracy", "speed"], config=META)
    reward = engines.Reward(["utilization"], config=META, shared=False)
    row = {"idx": 3, "utilization": float("nan"), "flops": 1.0}
    with pytest.raises(ValueError, match=r"'utilization' of cell 3 is NaN \(the meta device times nothing\)"):
        reward.values(row)
    with pytest.raises(ValueError, match=r"no metric 'inputs_per_joule' in a results row; there are accuracy, .*flops"):
        engines.Reward(["inputs_per_joule"], config=META).values(row)


def test_the_evaluator_measures_cells_from_several_threads_and_names_a_bad_cell():
    with CellEvaluator(META, threads=2) as evaluator:
        rows = evaluator.evaluate_many([0, 6111, str(nb.arch_of_index(42))])
        assert [r["idx"] for r in rows] == [0, 6111, 42]
        assert rows[1]["flops"] == counted_flops(6111)
        with pytest.raises(ValueError, match=r"cell index 15625 is outside the space's 0\.\.15624"):
            evaluator.evaluate(15625)
    with pytest.raises(ValueError, match=r"threads > 1 needs a CUDA device.*threads=2 on cpu"):
        CellEvaluator(eval_config("cpu"), threads=2)


def test_optuna_in_memory_with_n_jobs_gives_table_accuracies_and_counted_flops_and_a_pareto_plot(tmp_path):
    objective = engines.optuna_objective(["accuracy", "flops"], config=META, shared=False, threads=2)
    assert objective.directions == ["maximize", "minimize"]
    study = optuna.create_study(directions=objective.directions, sampler=optuna.samplers.RandomSampler(seed=1))
    try:
        study.optimize(objective, n_trials=3, n_jobs=2)
    finally:
        objective.reward.close()
    table = nb.load_accuracy_table()
    trials = study.get_trials(states=[optuna.trial.TrialState.COMPLETE])
    assert len(trials) == 3
    for t in trials:
        index = t.user_attrs["index"]
        assert nb.index_of_arch(t.user_attrs["arch"]) == index == nb.index_of_arch(engines.arch_from_params(t.params))
        assert t.values[0] == table[index].cifar10_test_acc
        assert t.values[1] == counted_flops(index)
        assert t.user_attrs["measured_by"] == os.getpid()
    png = engines.plot_pareto_front(study, str(tmp_path / "pareto.png"), ["accuracy", "flops"])
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


WORKER = textwrap.dedent("""
    import sys, optuna
    from torchutil.nas import engines
    from torchutil.nas.evaluator import eval_config
    storage = optuna.storages.RDBStorage(sys.argv[1], engine_kwargs={"connect_args": {"timeout": 60}})
    study = optuna.load_study(study_name="nas", storage=storage)
    objective = engines.optuna_objective(["accuracy", "flops"], threads=1, idle_seconds=3.0,
                                         config=eval_config("meta", batch=2, warmup=0, iters=1))
    study.optimize(objective, n_trials=int(sys.argv[2]))
    objective.reward.close()
""")


@pytest.mark.slow
def test_two_processes_sharing_sqlite_take_every_queued_cell_once_measured_by_one_service(tmp_path, runtime):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    cells = [5000, 6111, 7999, 42]
    study = optuna.create_study(study_name="nas", storage=url, directions=["maximize", "minimize"])
    engines.enqueue_cells(study, cells)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, url, "2"], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    trials = study.get_trials(states=[optuna.trial.TrialState.COMPLETE])
    assert sorted(t.user_attrs["index"] for t in trials) == sorted(cells)
    measured_by = {t.user_attrs["measured_by"] for t in trials}
    assert len(measured_by) == 1 and measured_by.isdisjoint({p.pid for p in procs} | {os.getpid()})
    for t in trials:
        assert t.values[1] == counted_flops(t.user_attrs["index"])
    # The service leaves once no client has been connected for idle_seconds (3 s), socket and all.
    sockets = lambda: list(runtime.glob("nas-*.sock"))  # noqa: E731
    deadline = time.monotonic() + 30
    while sockets() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sockets()
    assert stat.S_IMODE(next(runtime.glob("nas-*.log")).stat().st_mode) == 0o600


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA (a service that cannot start)")
def test_a_service_that_cannot_start_is_named_with_its_log(runtime):
    from torchutil.nas.service import ServiceClient

    client = ServiceClient(ev.EvalConfig(device="cuda:0", batch=2, dtype="float16"), idle_seconds=1.0)
    with pytest.raises(ValueError, match=r"(?s)service for cuda:0 failed before it was ready; its log .* says:.*exited"):
        client.evaluate(0)


@pytest.mark.cuda
def test_the_default_gpu_lock_is_one_private_file_per_physical_gpu(runtime):
    lock = gpu_sharing.default_gpu_lock("cuda:0")
    uuid = gpu_sharing.gpu_uuid(0)
    assert lock == str(runtime / f"gpu-{uuid}.lock") and gpu_sharing.default_gpu_lock(0) == lock
    assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
    with CellEvaluator(eval_config("cuda", batch=8), threads=2) as evaluator:
        assert evaluator.gpu_lock == lock
        row = evaluator.evaluate(6111)
        assert row["utilization"] > 0 and row["cuda_graph"] == 1.0
        assert evaluator.sharing is None  # alone on the GPU (NVML lists this process only)


@pytest.mark.cuda
def test_the_evaluator_names_another_process_holding_a_context_on_its_gpu(runtime):
    """Oracle: NVML's list of compute processes (nvidia-ml-py), with a second process that holds
    a CUDA context for the test's length."""
    pytest.importorskip("pynvml")
    other = subprocess.Popen([sys.executable, "-c", "import sys, torch; torch.zeros(1, device='cuda'); "
                              "torch.cuda.synchronize(); print('up', flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "up"
        with pytest.warns(RuntimeWarning, match=r"1 other process\(es\) hold a CUDA context on cuda:0"):
            evaluator = CellEvaluator(eval_config("cuda", batch=8), threads=1)
        evaluator.close()
        assert "not one process's" in evaluator.sharing
    finally:
        other.communicate("")
