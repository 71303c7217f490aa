"""Output files written whole or not at all, without following a link someone planted: the
library's result tables, the study commands' reports and checkpoints all go through atomic_open.
Torch-free."""
from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import stat
from typing import IO, Any, Iterator

from torchutil._json import json_safe

__all__ = ["atomic_open", "named", "open_regular", "save_figure", "write_json"]


def named(e: OSError, path: str | os.PathLike[str]) -> OSError:
    """e as an OSError that names `path` (a failed write names no file: "No space left on
    device"), which the command line turns into one line: "torchutil: <why>: <path>"."""
    if e.filename is not None or e.errno is None:
        return e
    return OSError(e.errno, e.strerror, os.fspath(path))


def _create_temporary(path: str) -> tuple[int, str]:
    """A new file beside `path`, named `path`.<16 random hex digits>.tmp, created by this call
    (O_CREAT | O_EXCL: a name that exists, a planted symbolic link included, is never opened),
    with the permissions a plain open() would give it (0o666 less the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = f"{path}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # 2**-64 per try: someone else's file; draw another name
            continue
        except OSError as e:  # a missing or unwritable folder: say so of the output, not of a random name
            raise OSError(e.errno, e.strerror, path) from None


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """open(path, mode) for writing a whole file ("w" or "wb"): it is written into a temporary
    file of a random name in the same folder, created exclusively (a symbolic link planted at
    any name is not followed; two writers of one path never share a temporary file), and
    renamed over `path` (os.replace) only when the block ends without an error. So a reader
    never sees half a file, a failure (a full disk, an exception) leaves the earlier file or
    none, and the temporary file is removed; an OSError names `path`. A kill -9 can leave
    `path`.<random>.tmp behind. Special files (/dev/stdout, a pipe) are written in place."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes a whole new file: mode 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        with open(path, mode, **kwargs) as f:
            yield f
        return
    tmp = None
    try:
        fd, tmp = _create_temporary(path)
        with open(fd, mode, **kwargs) as f:
            yield f
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp)
        if isinstance(e, OSError):  # named after the output, not the temporary file
            raise named(OSError(e.errno, e.strerror) if e.filename == tmp else e, path) from None
        raise


def open_regular(path: str | os.PathLike[str], flags: int, what: str = "", follow: bool = False) -> int:
    """os.open(path, flags | O_CLOEXEC, 0o666) of a regular file, for the writers and readers
    that cannot work beside the file (an append, a db's lock, a read): a symbolic link at `path`
    (dangling or not) is not followed unless `follow`, and a FIFO, device or folder is refused
    without blocking (O_NONBLOCK while opening). Refusals are a ValueError "torchutil: <what>
    <path> is ..."; another failure an OSError naming path."""
    path = os.fspath(path)
    label = f"{what} {path}".strip()
    extra = os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags | extra, 0o666)
    except OSError as e:  # ELOOP: a link; ENXIO: a FIFO nobody reads; EISDIR: a folder
        try:
            mode = (os.stat if follow else os.lstat)(path).st_mode
        except OSError:
            mode = stat.S_IFREG
        if stat.S_ISLNK(mode):
            raise ValueError(f"torchutil: {label} is a symbolic link (to {os.readlink(path)}), which is not "
                             f"followed; remove it, or name the file it points to") from None
        _check_regular(label, mode)
        raise OSError(e.errno, e.strerror, path) from None
    try:
        _check_regular(label, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(label: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise ValueError(f"torchutil: {label} is not a regular file (it is a {_kind(mode)}); give a file's path")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISDIR, "folder"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def write_json(path: str | os.PathLike[str], value: Any, **kwargs: Any) -> None:
    """json.dumps(value, **kwargs) into `path` (atomic_open), non-finite floats written as null."""
    text = json.dumps(json_safe(value), **kwargs)
    with atomic_open(path) as f:
        f.write(text)


def save_figure(fig: Any, path: str | os.PathLike[str], **kwargs: Any) -> None:
    """fig.savefig(path, **kwargs) as a whole file (atomic_open): drawn in memory, then written."""
    image = io.BytesIO()
    fig.savefig(image, format=os.path.splitext(os.fspath(path))[1].lstrip(".") or "png", **kwargs)
    with atomic_open(path, "wb") as f:
        f.write(image.getvalue())
