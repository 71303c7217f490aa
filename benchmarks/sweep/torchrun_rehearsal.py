"""A multi-host rehearsal of `nas evaluate` on one machine: two torchrun agents (--nnodes 2, one
process each) that meet through torchrun's c10d rendezvous on 127.0.0.1, each with its own --db
folder (two hosts without a shared filesystem), sweep a few cells on the CPU; the worker of one
rank is SIGKILLed (by its pid) once it has committed a cell, and the sweep is restarted, by
running both agents again (`rerun`, torchrun's default --max-restarts 0) or by torchrun itself
(`elastic`, --max-restarts 1).

    python benchmarks/sweep/torchrun_rehearsal.py [--cells 10] [--scenarios rerun elastic] [--out DIR]

Prints for each scenario the agents' command, each run's wall time and exit codes, what the
killed rank had committed, what the restarted ranks evaluated and skipped, and the check of the
merged db (every cell exactly once, the committed rows not measured again, no shard left); the
same as JSON in --out (default ./torchrun-rehearsal). tests/test_torchrun_rehearsal.py runs it.
Every process it starts (agents and their workers, found under /proc) is stopped by its pid on
every path. Linux only (/proc).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DB = "r.sqlite"
# What each agent's workers run: a handful of cells, as cheap as a cell gets on the CPU.
# 25 timed forwards a cell (~50 ms on a 2-core machine): the kill after rank 1's first commit
# then has ~1 s to land before the rank's last commit, even where the watcher shares the cores
# with both ranks (with 1, ~12 ms a cell, it once missed all 20 cells of the rank).
SWEEP = ["-m", "torchutil", "nas", "evaluate", "--device", "cpu", "--dataset", "ImageNet16-120",
         "--batch", "1", "--warmup", "0", "--iters", "25", "--no-progress"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- processes, by pid, through /proc ------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def _parents() -> dict[int, list[int]]:
    """parent pid -> pids of its live children, from one pass over /proc."""
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            out.setdefault(st[0], []).append(int(entry.name))
    return out


def _rank_of(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    ranks = [int(v[5:]) for v in env if v.startswith(b"RANK=")]
    return ranks[0] if ranks else None


class Processes:
    """The agents this rehearsal starts and every descendant seen of them, each kept as (pid,
    start time) so that a pid the system has given to another process is never signalled."""

    def __init__(self) -> None:
        self.agents: list[subprocess.Popen[bytes]] = []
        self.seen: dict[int, int] = {}
        self.ranks: dict[int, int] = {}  # worker pid -> its RANK

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as f:
            p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        self.agents.append(p)
        self.look()
        return p

    def look(self) -> None:
        """Records the live descendants of the agents (before an agent dies and its workers lose
        their parent)."""
        children = _parents()
        todo = [p.pid for p in self.agents]
        while todo:
            pid = todo.pop()
            st = _stat(pid)
            if st is not None:
                # Asked again until it has one: a worker seen between fork and exec still has
                # its agent's environment, with no RANK.
                if pid not in self.ranks and (rank := _rank_of(pid)) is not None:
                    self.ranks[pid] = rank
                self.seen.setdefault(pid, st[1])
                todo.extend(children.get(pid, []))


    def workers(self) -> dict[int, int]:
        """rank -> pid of the agents' live workers (their children with a RANK)."""
        children = _parents()
        return {rank: child for p in self.agents for child in children.get(p.pid, [])
                if (rank := _rank_of(child)) is not None}

    def alive(self) -> list[int]:
        return [pid for pid, start in self.seen.items() if (st := _stat(pid)) is not None and st[1] == start]

    def stop(self, grace: float = 10.0) -> list[int]:
        """SIGTERM to every live process seen, SIGKILL after `grace` s; returns those still alive."""
        self.look()
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            for pid in self.alive():
                with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while self.alive() and time.monotonic() < deadline:
                for p in self.agents:
                    p.poll()  # reaps the agents (their workers are reaped by the agents or by init)
                time.sleep(0.05)
        for p in self.agents:
            p.poll()
        return self.alive()

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc: Any) -> None:
        left = self.stop()
        if left and exc[0] is None:
            raise RuntimeError(f"processes {left} survived SIGKILL")




# --- one rehearsal ---------------------------------------------------------------------------------


def agent_command(db: Path, port: int, host: bool, cells: int, max_restarts: int) -> list[str]:
    """One host's command: `torchrun ... -m torchutil nas evaluate` (torch.distributed.run is torchrun)."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "rehearsal",
            # One machine plays both hosts: pin which agent serves the rendezvous store (on real
            # hosts the one named by the endpoint does), and keep every socket on the loopback.
            "--rdzv-conf", f"is_host={int(host)}", "--local-addr", "127.0.0.1",
            "--max-restarts", str(max_restarts), *SWEEP, "--db", str(db), "--indices", f"0:{cells}"]


def command_line(cells: int, max_restarts: int) -> str:
    """The agents' command for people: torchrun, PORT, the host's own folder, what the env adds."""
    argv = agent_command(Path("FOLDER") / DB, 0, True, cells, max_restarts)[3:]
    env = {k: v for k, v in _env(max_restarts).items() if os.environ.get(k) != v and k != "PYTHONPATH"}
    text = " ".join([*(f"{k}={v}" for k, v in env.items()), "torchrun", *argv])
    return text.replace("127.0.0.1:0", "127.0.0.1:PORT").replace("is_host=1", "is_host=<1 on host0, 0 on host1>")


def _env(max_restarts: int) -> dict[str, str]:
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    if max_restarts:
        # Else the restarted workers of two agents hang in init_process_group (torch 2.14,
        # pytorch/pytorch#135712; nas_distributed warns of it).
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _rows(path: Path) -> dict[int, float] | None:
    """idx -> eval_seconds of a db, read-only; None while it does not exist or cannot be read."""
    if not path.is_file():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as con:
            return dict(con.execute("SELECT idx, eval_seconds FROM results"))
    except sqlite3.Error:
        return None


@dataclass
class Run:
    seconds: float
    exit_codes: list[int | None]
    logs: list[str]
    evaluated: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (evaluated, skipped)
    restart: dict[int, int] = field(default_factory=dict)  # rank -> torchrun's restart count of its finishing worker
    killed: dict[str, Any] | None = None
    worker_pids: dict[int, list[int]] = field(default_factory=dict)  # rank -> its workers in this run


_STATS = re.compile(r"rank (\d+)/\d+(?: \(restart (\d+)\))?: .*evaluated (\d+) archs, skipped (\d+)")


def run_agents(procs: Processes, folders: list[Path], cells: int, max_restarts: int, timeout: float,
               kill_rank: int | None = None) -> Run:
    """Both agents, once, until both exit (or `timeout` s: then they are stopped, and an error
    raised). kill_rank: SIGKILL that rank's worker once its shard holds a committed cell."""
    before = set(procs.ranks)
    port, env = free_port(), _env(max_restarts)
    logs = [f / f"agent{k}.run{len(procs.agents) // 2}.log" for k, f in enumerate(folders)]
    agents = [procs.start(agent_command(f / DB, port, k == 0, cells, max_restarts), env, logs[k])
              for k, f in enumerate(folders)]
    t0 = time.monotonic()
    killed, looked = None, 0.0
    while any(a.poll() is None for a in agents):
        now = time.monotonic()
        if now - t0 > timeout:
            procs.stop()
            raise TimeoutError(f"the agents ran past {timeout:.0f} s; logs: {', '.join(map(str, logs))}")
        if now - looked > 0.25:  # one pass over /proc: the workers, before an agent dies
            procs.look()
            looked = now
        if kill_rank is not None and killed is None:
            killed = _kill_after_a_commit(procs, folders, kill_rank)
        time.sleep(0.02)
    run = Run(time.monotonic() - t0, [a.returncode for a in agents],
              [log.read_text(errors="replace") for log in logs], killed=killed)
    for pid, rank in procs.ranks.items():
        if pid not in before:
            run.worker_pids.setdefault(rank, []).append(pid)
    for log in run.logs:
        for m in _STATS.finditer(log):
            run.evaluated[int(m[1])] = (int(m[3]), int(m[4]))
            run.restart[int(m[1])] = int(m[2] or 0)
    return run


def _kill_after_a_commit(procs: Processes, folders: list[Path], rank: int) -> dict[str, Any] | None:
    # Only a shard in WAL mode (its -wal file exists) is read: a reader of it then never blocks
    # the rank's writes (before, it would hold up the rank's switch to WAL and its first commits).
    shards = [f / f"r.rank{rank}.sqlite" for f in folders]
    shard = next((s for s in shards if Path(f"{s}-wal").exists() and _rows(s)), None)
    pid = procs.workers().get(rank) if shard is not None else None
    if pid is None:
        return None
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)  # the kill has landed: what the shard holds now is what the rank committed
    return {"rank": rank, "pid": pid, "shard": str(shard), "committed": _rows(shard)}


def _counts(db: Path) -> dict[int, int]:
    """idx -> how many rows of the db have it."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        return dict(con.execute("SELECT idx, count(*) FROM results GROUP BY idx"))


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(("r.rank", ".r.sqlite")))


def rehearse(work: Path, scenario: str, cells: int = 40, kill_rank: int = 1, timeout: float = 300.0) -> dict[str, Any]:
    """One scenario ("rerun" or "elastic") in fresh folders under work; returns its record."""
    if scenario not in ("rerun", "elastic"):
        raise ValueError(f"scenario must be rerun or elastic, got {scenario!r}")
    # The agents run in the repository root: an absolute folder is the same one for them and here.
    folders = [Path(work).resolve() / scenario / f"host{k}" for k in range(2)]
    for f in folders:
        f.mkdir(parents=True)
    restarts = 1 if scenario == "elastic" else 0
    record: dict[str, Any] = {"scenario": scenario, "cells": cells, "command": command_line(cells, restarts)}
    with Processes() as procs:
        runs = [run_agents(procs, folders, cells, restarts, timeout, kill_rank)]
        if runs[0].killed is None:
            raise RuntimeError(f"rank {kill_rank} finished before a committed cell of it was seen in its shard "
                               f"under {folders[0].parent}: it had too few of the {cells} cells for the kill to land "
                               f"mid-run, or the sweep failed (exit codes {runs[0].exit_codes}; logs in those folders)")
        record["after_kill"] = {f.name: _leftovers(f) for f in folders}
        if scenario == "rerun":
            runs.append(run_agents(procs, folders, cells, restarts, timeout))
        record["left_alive"] = procs.stop()
    record["runs"] = [asdict(r) | {"logs": None} for r in runs]
    merged = [f / DB for f in folders if _rows(f / DB)]
    record["merged_into"] = [str(p) for p in merged]
    final = _rows(merged[0]) if len(merged) == 1 else {}
    counts = _counts(merged[0]) if len(merged) == 1 else {}
    committed = runs[0].killed["committed"] or {}
    mine = [i for i in range(cells) if i % 2 == kill_rank]
    record["check"] = {
        "every_cell_once": sorted(counts) == list(range(cells)) and set(counts.values()) == {1},
        "killed_rank_had_committed": sorted(committed),
        # The rank evaluates its cells in order: the first one not committed was in flight.
        "in_flight": next((i for i in mine if i not in committed), None),
        "committed_rows_kept_unmeasured": all(final.get(i) == s for i, s in committed.items()),
        "leftovers": {f.name: _leftovers(f) for f in folders},
        "restart_evaluated": {r: e for r, (e, _) in runs[-1].evaluated.items()},
        "restart_skipped": {r: s for r, (_, s) in runs[-1].evaluated.items()},
        "workers_per_rank_in_first_run": {r: len(p) for r, p in sorted(runs[0].worker_pids.items())},
        # What the finishing worker of each rank said of itself (its TORCHELASTIC_RESTART_COUNT):
        # the /proc watch above, a poll, can miss a restarted worker that lives only briefly.
        "restart_of_finishing_workers": dict(sorted(runs[-1].restart.items())),
    }
    record["logs"] = [run.logs for run in runs]
    return record


def summary(record: dict[str, Any]) -> str:
    c = record["check"]
    runs = "; ".join(f"{r['seconds']:.1f} s, exit {r['exit_codes']}" for r in record["runs"])
    return (f"{record['scenario']}: {record['command']}\n"
            f"         {record['cells']} cells: runs {runs}\n"
            f"         killed rank {record['runs'][0]['killed']['rank']} after it had committed cells "
            f"{c['killed_rank_had_committed']} (cell {c['in_flight']} in flight); the restart evaluated "
            f"{c['restart_evaluated']} and skipped {c['restart_skipped']} (by rank)\n"
            f"         merged into {record['merged_into']}; every cell exactly once: {c['every_cell_once']}; "
            f"committed rows kept, not measured again: {c['committed_rows_kept_unmeasured']}; "
            f"leftovers: {c['leftovers']}; processes left: {record['left_alive']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", type=int, default=40, help="cells 0..N-1 over the two ranks")
    p.add_argument("--scenarios", nargs="+", default=["rerun", "elastic"], choices=["rerun", "elastic"])
    p.add_argument("--kill-rank", type=int, default=1, choices=[0, 1])
    p.add_argument("--out", type=Path, default=Path("torchrun-rehearsal"))
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per run of the agents")
    args = p.parse_args()
    out = args.out.resolve()  # relative to where the command runs, whatever folder that is
    out.mkdir(parents=True, exist_ok=True)
    work = out / time.strftime("%Y%m%d-%H%M%S")
    records = []
    for scenario in args.scenarios:
        try:
            record = rehearse(work, scenario, args.cells, args.kill_rank, args.timeout)
        except (RuntimeError, TimeoutError) as e:
            raise SystemExit(f"torchrun_rehearsal: {scenario}: {e}") from None
        records.append(record)
        print(summary(record), flush=True)
    (out / "rehearsal.json").write_text(json.dumps(records, indent=1, default=str) + "\n")
    print(f"wrote {out / 'rehearsal.json'}; agents' logs under {work}")


if __name__ == "__main__":
    main()
