"""The reward inside the engines, on one GPU: the same NATS-Bench cells measured by `nas evaluate`
(the native rate), by Optuna processes sharing a journal file (their cells measured in the GPU's
one service, torchutil.nas.service), and by `nas evaluate --ray` (a local Ray cluster, an actor
per GPU Ray reports); each run's rate against the native one, and Spearman and the median level
of its utilization against the committed sweep (benchmarks/sweep_agreement.py,
torchutil/nas/data/sweep_h200_auto.csv.gz, the bytes of docs/results/nas/sweep_auto_a.csv.gz).

    python benchmarks/engines.py --out $OUT                       # cells 5000:8000
    python benchmarks/engines.py --out /tmp/e --device cpu --indices 0:4 --phases optuna4,ray   # rehearsal

Phases (default native, optuna8, ray): native; optuna8 (8 processes x 1 thread on a shared
journal: several Optuna processes, and the replacement of `--workers 8`, eight processes on one
GPU); optuna<N> (N processes x 2 threads; x 1 from 8 up); ray (skipped, and
said, where Ray is not installed; with torch's GPU count beside the one Ray reports and
schedules on). Every phase runs in
processes of its own, one after another: this driver never touches CUDA (another context on the
GPU changes what the phases measure). A phase's rate is its cells over the time from its first
cell to its last, set-up left out (Optuna: the trials' own times, the service started before;
--ray: after its actors are set up; nas evaluate: the sweep's seconds less its set-up stage);
each phase's command wall time is printed too. Results in --out: <phase>.sqlite,
<phase>.txt, agreement_<phase>.json and engines.json.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

# The checkout's root, wherever under benchmarks/ this file lives.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "torchutil").is_dir())
SWEEP = ROOT / "torchutil/nas/data/sweep_h200_auto.csv.gz"  # the packaged sweep (docs/results/nas/sweep_auto_a)


def run(cmd: list[str], log: Path, timeout: float) -> tuple[int, float, str]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = 124, f"{e.stdout or ''}{e.stderr or ''}\ntimed out after {timeout:.0f} s"
    wall = time.perf_counter() - t0
    text = "\n".join(line for line in text.splitlines() if "CUDA Graph is empty" not in line)
    log.write_text(text + "\n")
    return rc, wall, text


def agreement(db: Path, out: Path) -> dict:
    """sweep_agreement.py's figures of db against the committed sweep (its file, wherever
    benchmarks/ keeps it)."""
    path = next(iter(sorted(glob.glob(str(ROOT / "benchmarks/**/sweep_agreement.py"), recursive=True))))
    spec = importlib.util.spec_from_file_location("sweep_agreement", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    r = module.agreement(module.load(str(SWEEP)), module.load(str(db)))
    out.write_text(json.dumps(r, indent=1) + "\n")
    u = r.get("utilization", {})
    return {"cells": r["cells"], "spearman": u.get("spearman"), "median_level": u.get("median_level_difference")}


def config_args(a: argparse.Namespace) -> list[str]:
    return ["--device", a.device, *(["--batch", str(a.batch)] if a.batch else [])]


def phase_native(a: argparse.Namespace, out: Path) -> dict:
    db = out / "native.sqlite"
    rc, wall, text = run([sys.executable, "-m", "torchutil", "nas", "evaluate", "--db", str(db), "--indices",
                          a.indices, "--no-progress", *config_args(a)], out / "native.txt", a.timeout)
    m = re.search(r"evaluated (\d+) archs.* in ([\d.]+) s", text)
    t = re.search(r"over (\d+) thread\(s\)", text)
    u = re.search(r"ms per arch: setup ([\d.]+)", text)
    if rc or not m or not t or not u:
        return {"error": f"exit {rc}: {text[-1500:]}"}
    cells, seconds = int(m[1]), float(m[2])
    # The others' rates leave their set-up out (the service started, the actors placed): so does
    # this one. The stage line's setup is per arch, summed over the threads, which all wait for it.
    setup = float(u[1]) * 1e-3 * cells / int(t[1])
    return {"cells": cells, "seconds": seconds, "setup_seconds": setup, "rate": cells / (seconds - setup),
            "rate_with_setup": cells / seconds, "wall": wall, "db": db}


def phase_optuna(a: argparse.Namespace, out: Path, processes: int, jobs: int, name: str) -> dict:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from torchutil.nas import engines
    from torchutil.nas.service import ServiceClient
    from torchutil.studies.nas_evaluate import parse_indices

    # On tmpfs where there is one: a journal file on disk fsyncs each of a trial's ~10 writes
    # (4.6 ms each on the 2-core CI machine's disk: 50 ms a trial, more than a cell takes).
    journal = Path(a.journal_dir or out) / f"torchutil-engines-{name}-{os.getpid()}.journal"
    journal.unlink(missing_ok=True)
    cells = parse_indices(a.indices)
    storage = JournalStorage(JournalFileBackend(str(journal)))
    study = optuna.create_study(study_name=name, storage=storage, directions=["maximize", "maximize"])
    engines.enqueue_cells(study, cells)
    # The service up before the first trial (as a search's service is after its first cells):
    # the rate is then the trials'. This process connects and leaves; it never touches CUDA.
    # It stays connected until the workers are done, then the service leaves 3 s later.
    client = ServiceClient(worker_config(a), idle_seconds=3.0)
    server = client.connect()["pid"]
    shares = [len(cells) // processes + (k < len(cells) % processes) for k in range(processes)]
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "--optuna-worker", str(journal), name, str(n), str(jobs),
                               str(out / f"{name}.worker{k}.sqlite"), *sys.argv[1:]],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
             for k, n in enumerate(shares)]
    logs = [p.communicate(timeout=a.timeout)[0] for p in procs]
    wall = time.perf_counter() - t0
    client.close()
    (out / f"{name}.txt").write_text("\n".join(logs))
    bad = [f"process {k}: exit {p.returncode}: {log[-800:]}" for k, (p, log) in enumerate(zip(procs, logs)) if p.returncode]
    if bad:
        return {"error": "; ".join(bad)}
    trials = study.get_trials(states=[optuna.trial.TrialState.COMPLETE])
    for leftover in (journal, Path(f"{journal}.lock")):
        leftover.unlink(missing_ok=True)
    start = min(t.datetime_start for t in trials)
    end = max(t.datetime_complete for t in trials)
    seconds = (end - start).total_seconds()
    from torchutil.studies.nas_db import merge, remove_db

    db = out / f"{name}.sqlite"
    parts = sorted(out.glob(f"{name}.worker*.sqlite"))
    merge(db, parts)
    for part in parts:
        remove_db(part)
    measured_by = {t.user_attrs["measured_by"] for t in trials}
    return {"cells": len(trials), "distinct_cells": len({t.user_attrs["index"] for t in trials}), "journal": str(journal),
            "seconds": seconds, "rate": len(trials) / seconds, "wall": wall, "processes": processes,
            "jobs": jobs, "measuring_processes": sorted(measured_by), "service_pid": server, "db": db}


def worker_config(a: argparse.Namespace):
    from torchutil.nas.evaluator import eval_config

    return eval_config(a.device, **({"batch": a.batch} if a.batch else {}))


def optuna_worker(journal: str, name: str, trials: int, jobs: int, db: str, a: argparse.Namespace) -> None:
    """One Optuna process: `trials` of the queued cells, `jobs` threads, the rows into db."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from torchutil.nas import engines
    from torchutil.studies.nas_db import connect, insert_rows

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=name, storage=JournalStorage(JournalFileBackend(journal)))
    reward = engines.Reward(["accuracy", "utilization"], config=worker_config(a), idle_seconds=3.0)
    rows: list[dict] = []  # list.append is atomic: the jobs' threads share it

    def objective(trial: optuna.Trial) -> tuple[float, ...]:
        row = reward.row(engines.suggest_arch(trial))
        rows.append(row)
        trial.set_user_attr("index", row["idx"])
        trial.set_user_attr("measured_by", row["measured_by"])
        return tuple(reward.values(row).values())

    study.optimize(objective, n_trials=trials, n_jobs=jobs)
    reward.close()
    with contextlib.closing(connect(db)) as con:
        insert_rows(con, rows)


def phase_ray(a: argparse.Namespace, out: Path) -> dict:
    if importlib.util.find_spec("ray") is None:
        return {"skipped": "ray is not installed here (carry its wheel: benchmarks/engine_wheels.sh)"}
    # The GPUs torch sees, against those Ray reports to the scheduler (below).
    rc, _, text = run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"], out / "gpus.txt", 120)
    torch_gpus = int(text.split()[-1]) if rc == 0 else None
    db = out / "ray.sqlite"
    rc, wall, text = run([sys.executable, "-m", "torchutil", "nas", "evaluate", "--ray", "--db", str(db), "--indices",
                          a.indices, "--no-progress", *config_args(a)], out / "ray.txt", a.timeout)
    m = re.search(r"evaluated (\d+) archs.* in ([\d.]+) s", text)
    g = re.search(r"Ray reports ([\d.]+) GPU\(s\); (\d+) actor\(s\)", text)
    if rc or not m or not g:
        return {"error": f"exit {rc}: {text[-1500:]}"}
    return {"cells": int(m[1]), "seconds": float(m[2]), "rate": int(m[1]) / float(m[2]), "wall": wall,
            "ray_gpus": float(g[1]), "torch_gpus": torch_gpus, "actors": int(g[2]), "db": db}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--optuna-worker":
        journal, name, trials, jobs, db = sys.argv[2:7]
        optuna_worker(journal, name, int(trials), int(jobs), db, parse(sys.argv[7:]))
        return
    a = parse(sys.argv[1:])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCHUTIL_RUNTIME_DIR", str(out / "run"))  # its own service, its own lock
    results: dict[str, dict] = {}
    for phase in a.phases.split(","):
        t0 = time.perf_counter()
        if phase == "native":
            r = phase_native(a, out)
        elif phase.startswith("optuna"):
            processes = int(phase.removeprefix("optuna") or 4)
            r = phase_optuna(a, out, processes, 2 if processes < 8 else 1, phase)
        elif phase == "ray":
            r = phase_ray(a, out)
        else:
            sys.exit(f"engines.py: unknown phase {phase!r} (native, optuna<N>, ray)")
        if "db" in r:
            db = r.pop("db")
            if a.device != "cpu" and SWEEP.is_file():
                r["agreement"] = agreement(db, out / f"agreement_{phase}.json")
            if phase != "native" and "rate" in results.get("native", {}):
                r["rate_vs_native"] = r["rate"] / results["native"]["rate"]
        r["phase_wall"] = time.perf_counter() - t0
        results[phase] = r
        print(f"{phase}: {json.dumps(r, default=str)}", flush=True)
        _wait_for_services(out / "run")
    (out / "engines.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"{'phase':9} {'cells/s':>8} {'vs native':>9} {'Spearman':>9} {'level':>8}  bounds (>= 0.90, >= 0.999, |level| <= 0.5 %)")
    for phase, r in results.items():
        g = r.get("agreement", {})
        rho, level, ratio = g.get("spearman"), g.get("median_level"), r.get("rate_vs_native")
        ok = [ratio is None or ratio >= 0.9, rho is not None and rho >= 0.999, level is not None and abs(level) <= 0.005]
        print(f"{phase:9} {r.get('rate', float('nan')):8.1f} {ratio or float('nan'):9.3f} {rho or float('nan'):9.5f} "
              f"{100 * (level if level is not None else float('nan')):+7.2f}%  "
              f"{'met' if all(ok) else 'NOT met'}{'' if 'error' not in r and 'skipped' not in r else ': ' + str(r.get('error') or r.get('skipped'))[:200]}")


def _wait_for_services(runtime: Path, seconds: float = 40.0) -> None:
    """Until the phase's service has left (its socket gone): the next phase gets the GPU alone."""
    deadline = time.monotonic() + seconds
    while list(runtime.glob("nas-*.sock")) and time.monotonic() < deadline:
        time.sleep(0.5)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="engines-out")
    p.add_argument("--indices", default="5000:8000")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=None, help="default: nas evaluate's (256 on CUDA)")
    # optuna8 is both the "several processes on a shared storage" and the replacement of
    # --workers 8; optuna4 (4 processes x 2 threads) is there to add, ~1 minute more on an H200.
    p.add_argument("--phases", default="native,optuna8,ray")
    p.add_argument("--timeout", type=float, default=200.0, help="seconds per phase command")
    p.add_argument("--journal-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                   help="where Optuna's journal file lives (default /dev/shm, else --out)")
    return p.parse_args(argv)


if __name__ == "__main__":
    main()
