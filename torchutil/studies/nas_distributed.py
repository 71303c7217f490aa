"""nas evaluate over the ranks of torchrun, on one host or several, with or without a shared disk.

    torchrun --nproc-per-node 8 -m torchutil nas evaluate --db results.sqlite    # one host
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST0:29400 \\
        --rdzv-id sweep1 -m torchutil nas evaluate --db results.sqlite         # on each host

Rank r evaluates the cells i with i % world_size == r into its shard, <db stem>.rank<r>.sqlite
next to its own --db, one commit per cell (a kill loses the cell in flight). No rank reads
another rank's files, so the hosts need no shared filesystem: at the end every rank sends the
rows of its shard to rank 0 over a gloo group (gather_object), rank 0 writes them into its db,
and each rank removes its shard once rank 0 has committed them. A run begins with the same
exchange for what an earlier, killed run left: the shards next to each rank's --db (of any rank
number, since a rerun may number the ranks otherwise) and, on a rank other than 0, the rows of
this config in a db at its --db (its host held rank 0 before). Rank 0 then tells every rank
which cells its db holds, and those are skipped. So rerunning the same command on every host
resumes a killed sweep, and so does torchrun's own restart (--max-restarts).

Several ranks may see one folder (the ranks of one host, or hosts sharing a filesystem): a probe
file finds them, and only the lowest of them reads the leftovers there.
"""
from __future__ import annotations

import contextlib
import os
import socket
import sys
import uuid
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from torchutil.studies import nas_evaluate as ev
from torchutil.studies._common import nas_error

__all__ = ["WAIT", "distributed_sweep"]

# How long a rank waits in an exchange for the slowest rank to get there: as long as a sweep can
# take. A rank whose process dies is noticed at once (its sockets close); a hung one waits this out.
WAIT = timedelta(days=1)

_RESUME = "every committed cell is kept in the shards; run the same command again on every host to resume"


def distributed_sweep(config: ev.EvalConfig, indices: Sequence[int], db: str | os.PathLike[str], *,
                      wait: timedelta = WAIT, **kwargs: Any) -> ev.SweepStats:
    """sweep() on every rank of an initialized torch.distributed group (any backend: the ranks
    talk over a gloo group of their own, made here), on cuda:LOCAL_RANK for a CUDA config;
    rank 0's db gets every row at the end. kwargs go to sweep(). Returns this rank's stats; a
    rank that failed or vanished is an error on every rank that is left, naming it."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    if torch.device(config.device).type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", rank % max(torch.cuda.device_count(), 1)))
        config = ev.EvalConfig(**{**asdict(config), "device": f"cuda:{local}"})
    _warn_of_elastic_restarts_across_hosts()
    group = dist.new_group(backend="gloo", timeout=wait)
    try:
        link = _Link(group, rank, world)
        done = _recover(link, config, db)
        shard = ev.shard_path(db, rank)
        failure, stats = None, None
        try:
            stats = ev.sweep(config, indices, shard, rank=rank, world_size=world, skip=done, **kwargs)
        except Exception as e:  # the others still get what this rank committed, then all stop
            failure = e
        rows = ev.read_rows(shard) if shard.is_file() else []
        said = None if failure is None else f"{type(failure).__name__}: {str(failure).removeprefix('torchutil.nas: ')}"
        failed = link.to_rank0((rows, said),
                               lambda sent: _write(db, sent, "merged {rows:,} rows of {world} ranks"))
        ev.remove_db(shard)  # its rows are in rank 0's db
    finally:
        dist.destroy_process_group(group)
    _raise(failed, "the cells committed are in rank 0's db, a rerun measures the rest", failure)
    assert stats is not None
    return stats


def _raise(failed: list[str], then: str, cause: BaseException | None = None) -> None:
    """The error of every rank when some failed (their own words, by rank)."""
    if failed:
        raise nas_error(f"rank {'; rank '.join(failed)}; {then}") from cause


def _warn_of_elastic_restarts_across_hosts() -> None:
    """torchrun --max-restarts over several hosts hangs at its restart (torch 2.14) unless its
    agents do not share their rendezvous store with the workers (pytorch/pytorch#135712): a
    restart bumps only the failed host's restart count, which names the workers' store keys."""
    env = os.environ
    if (int(env.get("TORCHELASTIC_MAX_RESTARTS", "0")) > 0 and int(env.get("GROUP_WORLD_SIZE", "1")) > 1
            and env.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and env.get("LOCAL_RANK", "0") == "0"):
        sys.stderr.write("nas evaluate: warning: torchrun's restarts (--max-restarts) over several hosts hang unless "
                         "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 is set for torchrun on every host "
                         "(pytorch/pytorch#135712); without restarts, rerun the command on every host to resume\n")


def _recover(link: _Link, config: ev.EvalConfig, db: str | os.PathLike[str]) -> set[int]:
    """Sends what an earlier run left in this rank's folder to rank 0's db, removes it here, and
    returns the indices of config that rank 0's db then holds."""
    shards: list[Path] = []
    rows: list[dict[str, Any]] = []
    error = None
    reader = link.first_in_folder(db)
    try:
        if reader:
            shards = _leftover_shards(db)
            rows = [row for shard in shards for row in ev.read_rows(shard)]
            if link.rank != 0 and Path(db).is_file():
                key = dict(zip(ev.CONFIG_COLUMNS, config.key(0)[1:]))
                rows += ev.read_rows(db, **key)  # its host held rank 0 in an earlier run
    except ValueError as e:  # nas_error: a file there that is no results db, named
        shards, rows, error = [], [], str(e).removeprefix("torchutil.nas: ")
    failed = link.to_rank0((rows, error), lambda sent: _write(db, sent, "recovered {rows:,} rows an earlier run left"))
    _raise(failed, "nothing was measured or removed")

    def finished() -> set[int]:
        with contextlib.closing(ev.connect(db)) as con, ev.db_errors(db):
            return ev.finished_indices(con, config)

    done = link.from_rank0(finished)
    for shard in shards:
        ev.remove_db(shard)
    link.barrier()  # no shard of this run is written before the leftovers in its folder are gone
    return done


def _leftover_shards(db: str | os.PathLike[str]) -> list[Path]:
    """The shards next to db, each with its worker dbs merged into it first (a killed run with
    workers can leave only those)."""
    pattern = ev.shard_pattern(db)
    ranks = sorted({int(m[1]) for p in Path(db).parent.iterdir() if (m := pattern.fullmatch(p.name))})
    shards = [ev.shard_path(db, r) for r in ranks]
    for shard in shards:
        with ev.db_errors(shard):
            ev.merge_workers(shard)
    return shards


def _write(db: str | os.PathLike[str], sent: list[tuple[list[dict[str, Any]], str | None]], what: str) -> list[str]:
    """Rank 0: writes the rows every rank sent into db, saying `what` (a format of rows and
    world) on stderr; returns the failures the ranks reported."""
    rows = [row for rank_rows, _ in sent for row in rank_rows]
    if rows:
        with contextlib.closing(ev.connect(db)) as con, ev.db_errors(db):
            ev.insert_rows(con, rows)
        sys.stderr.write(f"nas evaluate: {what.format(rows=len(rows), world=len(sent))} into {db} "
                         f"on {socket.gethostname()}\n")
    return [f"{r} failed: {error}" for r, (_, error) in enumerate(sent) if error is not None]


class _Link:
    """The ranks' exchanges over their gloo group. A rank that is gone (its process killed)
    closes its sockets: the collective fails at once, and that becomes an error saying so."""

    def __init__(self, group: Any, rank: int, world: int) -> None:
        self.group, self.rank, self.world = group, rank, world

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, group=self.group, **kwargs)
        except RuntimeError as e:  # gloo's "Connection closed by peer" is a RuntimeError, its timeout a DistError
            raise nas_error(f"rank {self.rank} lost touch with the other ranks (one was killed or failed?); "
                            f"{_RESUME}. {type(e).__name__}: {e}") from e

    def barrier(self) -> None:
        import torch.distributed as dist

        self._call(dist.barrier)

    def from_rank0(self, compute: Callable[[], Any]) -> Any:
        """What compute() returns on rank 0, on every rank; its error, raised on every rank."""
        import torch.distributed as dist

        answer: list[Any] = [None, None]
        error: Exception | None = None
        if self.rank == 0:
            try:
                answer[0] = compute()
            except Exception as e:
                error, answer[1] = e, str(e).removeprefix("torchutil.nas: ")
        self._call(dist.broadcast_object_list, answer, src=0)
        if error is not None:
            raise error
        if answer[1] is not None:
            raise nas_error(f"rank 0: {answer[1]}")
        return answer[0]

    def to_rank0(self, payload: Any, write: Callable[[list[Any]], Any]) -> Any:
        """Every rank's payload to rank 0, which calls write(payloads by rank); returns what it
        returned, on every rank."""
        import torch.distributed as dist

        gathered: list[Any] | None = [None] * self.world if self.rank == 0 else None
        self._call(dist.gather_object, payload, gathered, dst=0)
        return self.from_rank0(lambda: write(gathered))

    def first_in_folder(self, db: str | os.PathLike[str]) -> bool:
        """Whether this rank is the lowest of those whose db is this same file (a probe file
        next to it that each rank makes, looks for the others' and removes)."""
        import torch.distributed as dist

        token = [uuid.uuid4().hex if self.rank == 0 else None]
        self._call(dist.broadcast_object_list, token, src=0)
        db = Path(db)

        def probe(r: int) -> Path:
            return db.with_name(f".{db.name}.{token[0]}.rank{r}.probe")

        mine = probe(self.rank)
        mine.touch()
        try:
            self.barrier()
            first = min(r for r in range(self.world) if probe(r).exists())
            self.barrier()  # every rank has looked before any removes its probe
        finally:
            mine.unlink(missing_ok=True)
        return first == self.rank
