"""One measuring process per GPU, asked by any number of processes: NATS-Bench cells measured for
several Optuna processes, Ray Tune trials or anything else on one machine, with the figures of
one process.

    client = ServiceClient(eval_config("cuda:0"))   # starts the GPU's service where none runs
    row = client.evaluate(6111)                     # measured in the service's process

Processes that each measured on one GPU would each be a CUDA context, and another context's GPU
work makes an H200 time forwards faster whatever lock they share (torchutil.gpu_sharing). So the
processes of a search do not measure: the first to ask starts a service for the GPU and the
config (`python -m torchutil.nas.service`, detached, its log beside its socket), which runs one
CellEvaluator (its threads take turns on the GPU through its lock file, as `nas evaluate`'s do),
and every process sends it cell indices over a Unix socket. A process that asks never touches
CUDA. The service leaves when no process has been connected for `idle_seconds`.

Where: runtime_dir() (gpu_sharing: the user's own 0700 folder), nas-<key>.sock, .start (the lock
that elects who starts it), .log; the key hashes the physical GPU (the CUDA_VISIBLE_DEVICES entry
the device picks, so a Ray trial's numbering finds the same service as a plain process's) and
the config. Only this user can reach the socket (the folder is 0700); messages are pickles.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Iterable, Iterator

import torch

from torchutil.gpu_sharing import private_file, runtime_dir
from torchutil.nas import natsbench as nb
from torchutil.nas.cells import EvalConfig
from torchutil.nas.errors import nas_error
from torchutil.nas.evaluator import CellEvaluator, index_of

__all__ = ["ServiceClient", "serve", "service_paths"]

# How long a client waits for a service it started to be ready (torch's import, the set-up).
START_TIMEOUT = 300.0


def _gpu_key(device: str) -> str:
    """The physical device without touching CUDA: the CUDA_VISIBLE_DEVICES entry (an index or a
    UUID) that `device` picks, or the device type off CUDA."""
    d = torch.device(device)
    if d.type != "cuda":
        return d.type
    index = d.index or 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return str(index)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        raise nas_error(f"{device} is not among CUDA_VISIBLE_DEVICES={visible!r}")
    return entries[index]


def service_paths(config: EvalConfig) -> dict[str, Path]:
    """The socket, start lock and log of the service for config's GPU and config."""
    key = json.dumps({"gpu": _gpu_key(config.device), **asdict(config), "device": None}, sort_keys=True)
    stem = runtime_dir() / f"nas-{hashlib.sha256(key.encode()).hexdigest()[:20]}"
    return {"socket": stem.with_suffix(".sock"), "start": stem.with_suffix(".start"), "log": stem.with_suffix(".log")}


@contextlib.contextmanager
def _flocked(path: Path, blocking: bool = True) -> Iterator[bool]:
    private_file(path)
    with open(path, "r+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# --- the service ------------------------------------------------------------------------------


def serve(config: EvalConfig, path: Path, *, threads: int | None = None, idle_seconds: float = 60.0) -> None:
    """Runs the service on socket `path` until no client has been connected for idle_seconds."""
    evaluator = CellEvaluator(config, threads=threads)
    hello = {"pid": os.getpid(), **evaluator.describe()}
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = path.with_name(f"{path.name}.{os.getpid()}")
    staging.unlink(missing_ok=True)
    srv.bind(str(staging))
    os.chmod(staging, 0o600)
    srv.listen(64)
    os.replace(staging, path)  # clients find it only once it listens
    srv.settimeout(0.5)
    lock = threading.Lock()
    state = {"clients": 0, "idle_since": time.monotonic()}

    def client(conn: Connection) -> None:
        try:
            conn.send(("hello", hello))
            while True:
                try:
                    kind, cells = conn.recv()
                except EOFError:
                    return
                futures = [evaluator.submit(i) for i in cells]
                answers = []
                for i, f in zip(cells, futures):
                    try:
                        answers.append(("row", f.result()))
                    except Exception as e:
                        answers.append(("error", f"cell {i}: {type(e).__name__}: {e}"))
                conn.send(answers)
        except OSError:  # the client went away mid-answer
            pass
        finally:
            conn.close()
            with lock:
                state["clients"] -= 1
                state["idle_since"] = time.monotonic()

    try:
        while True:
            try:
                sock, _ = srv.accept()
            except TimeoutError:
                with lock:
                    idle = state["clients"] == 0 and time.monotonic() - state["idle_since"] > idle_seconds
                if idle and _leave(path, srv):
                    return
                continue
            sock.settimeout(None)
            with lock:
                state["clients"] += 1
            threading.Thread(target=client, args=(Connection(sock.detach()),), daemon=True).start()
    finally:  # a socket file left by an error is a dead one, which the next client replaces
        srv.close()
        evaluator.close()


def _leave(path: Path, srv: socket.socket) -> bool:
    """Removes the socket under the start lock (so no client starts a service meanwhile), then
    turns away what connected before; False where a client is starting one now."""
    with _flocked(path.with_suffix(".start"), blocking=False) as locked:
        if not locked:
            return False
        path.unlink(missing_ok=True)
    srv.setblocking(False)
    with contextlib.suppress(OSError):
        while True:  # those clients read EOF and start a service again
            srv.accept()[0].close()
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m torchutil.nas.service", description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", required=True, type=Path)
    p.add_argument("--config", required=True, help="EvalConfig as JSON")
    p.add_argument("--threads", type=int, default=0, help="0: the evaluator's default")
    p.add_argument("--idle-seconds", type=float, default=60.0)
    p.add_argument("--detach", action="store_true",
                   help="run in a child of this process and return: the service then belongs to no process "
                        "that started it (Ray stops a worker's children with the worker)")
    args = p.parse_args(argv)
    if args.detach and os.fork() > 0:  # before any CUDA call or thread
        return 0
    try:
        serve(EvalConfig(**json.loads(args.config)), args.socket, threads=args.threads or None,
              idle_seconds=args.idle_seconds)
    except BaseException as e:
        print(f"{_EXITED} {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        raise
    return 0


# What the service's last line in its log starts with when it fails (the client shows the log).
_EXITED = "torchutil.nas.service: exited:"


# --- the client -------------------------------------------------------------------------------


class ServiceClient:
    """Measures cells in the service for config's GPU and config, starting it where none runs.
    Any number of threads may call it (each talks over a connection of its own); it pickles
    (a Ray trial gets a copy that connects on first use). threads, idle_seconds: the service's,
    when this client starts it."""

    def __init__(self, config: EvalConfig, *, threads: int | None = None, idle_seconds: float = 60.0,
                 start_timeout: float = START_TIMEOUT) -> None:
        self.config, self.threads, self.idle_seconds, self.start_timeout = config, threads, idle_seconds, start_timeout
        self._local = threading.local()
        self._conns: list[Connection] = []
        self._lock = threading.Lock()
        self.server: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("config", "threads", "idle_seconds", "start_timeout")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state.pop("config"), **state)  # type: ignore[misc]

    def connect(self) -> dict[str, Any]:
        """Connects this thread (starting the service where none runs); the service's hello:
        its pid, config, threads and lock file."""
        self._connection()
        return self.server

    @property
    def pid(self) -> int | None:
        """The service's process id (None before the first cell): the process that measures."""
        return self.server.get("pid")

    def evaluate(self, arch: nb.Arch | str | int) -> dict[str, Any]:
        """The result row of one cell, measured by the service."""
        return self.evaluate_many([arch])[0]

    def evaluate_many(self, archs: Iterable[nb.Arch | str | int]) -> list[dict[str, Any]]:
        """The rows of several cells, in order (the service measures them `threads` at a time)."""
        cells = [index_of(a) for a in archs]
        for attempt in range(2):  # a service that left as this connected: start one and ask again
            conn = self._connection()
            try:
                conn.send(("evaluate", cells))
                answers = conn.recv()
                break
            except (EOFError, OSError):
                self._drop(conn)
                if attempt:
                    raise nas_error(f"the service at {service_paths(self.config)['socket']} went away; "
                                    f"its log: {service_paths(self.config)['log']}") from None
        errors = [text for kind, text in answers if kind == "error"]
        if errors:
            raise nas_error("; ".join(errors))
        return [row for _, row in answers]

    def _connection(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn, self.server = self._connect()
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _drop(self, conn: Connection) -> None:
        self._local.conn = None
        with self._lock:
            self._conns.remove(conn)
        conn.close()

    def _connect(self) -> tuple[Connection, dict[str, Any]]:
        paths = service_paths(self.config)
        found = _try_connect(paths["socket"])
        if found is not None:
            return found
        with _flocked(paths["start"]):
            found = _try_connect(paths["socket"])  # another process may have started it meanwhile
            if found is not None:
                return found
            return self._start(paths)

    def _start(self, paths: dict[str, Path]) -> tuple[Connection, dict[str, Any]]:
        paths["socket"].unlink(missing_ok=True)  # a killed service's
        import torchutil

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(torchutil.__file__).parents[1]),
                                                          env.get("PYTHONPATH")]))
        cmd = [sys.executable, "-m", "torchutil.nas.service", "--detach", "--socket", str(paths["socket"]),
               "--config", json.dumps(asdict(self.config)), "--threads", str(self.threads or 0),
               "--idle-seconds", str(self.idle_seconds)]
        private_file(paths["log"])
        start = paths["log"].stat().st_size
        with open(paths["log"], "ab") as log:
            subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
                           check=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            found = _try_connect(paths["socket"])
            if found is not None:
                return found
            with open(paths["log"], "rb") as log:
                log.seek(start)
                said = log.read().decode(errors="replace")
            if _EXITED in said:
                raise nas_error(f"the measuring service for {self.config.device} failed before it was ready; "
                                f"its log ({paths['log']}) says:\n{said[-2000:]}")
            time.sleep(0.1)
        raise nas_error(f"the measuring service for {self.config.device} was not ready after "
                        f"{self.start_timeout:.0f} s; its log: {paths['log']}")

    def close(self) -> None:
        """Closes this client's connections (the service stays for its other clients)."""
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()

    def __enter__(self) -> "ServiceClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _try_connect(path: Path) -> tuple[Connection, dict[str, Any]] | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    conn = Connection(sock.detach())
    try:
        kind, hello = conn.recv()
    except (EOFError, OSError):  # a service leaving turned it away
        conn.close()
        return None
    return conn, hello


if __name__ == "__main__":
    sys.exit(main())
