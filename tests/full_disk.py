"""A full disk, portably: `fill(monkeypatch, module, room)` replaces open() in one module by one
whose files opened for writing take `room` more bytes (shared), then fail as a full disk does:
what fits is written, then OSError(ENOSPC) with no file name (as os.write raises it)."""
from __future__ import annotations

import builtins
import errno
import os


class _FullFile:
    def __init__(self, f, disk: "FullDisk") -> None:
        self._f, self._disk = f, disk

    def write(self, data):
        n = min(len(data), self._disk.room)
        self._disk.room -= n
        self._f.write(data[:n])
        if n < len(data):  # what fitted is written, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return n

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


class FullDisk:
    def __init__(self, room: int) -> None:
        self.room = room

    def open(self, file, mode="r", *args, **kwargs):
        f = builtins.open(file, mode, *args, **kwargs)
        return _FullFile(f, self) if any(c in mode for c in "wax+") else f


def fill(monkeypatch, module, room: int = 0) -> FullDisk:
    disk = FullDisk(room)
    monkeypatch.setattr(module, "open", disk.open, raising=False)
    return disk
