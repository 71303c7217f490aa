"""Sharing one GPU between processes: the lock file they take turns through, and who else is there.

    lock = torchutil.default_gpu_lock("cuda:0")      # $XDG_RUNTIME_DIR/torchutil/gpu-<uuid>.lock
    torchutil.profile(model, x, gpu_lock=lock)       # every GPU phase holds it, in any process

A `gpu_lock` makes the timed (and counted) phases of processes sharing a GPU exclusive, so no
process's forwards run beside another's. That is necessary for the figures of one process and,
on an H200, not sufficient: a graph's kernels run ~0.6 us each faster while another CUDA context
does GPU work at all, even locked out of the timed replays (eight `nas evaluate` worker processes
measured cells 4.4-4.9 % faster than one process, with the lock exclusive and with it held
shared around every other CUDA call; docs/results/reward/README.md). So where figures must equal
one process's, one process per GPU measures and the others ask it (torchutil.nas.service, a Ray
actor per GPU), and sharing_note() tells a measuring process when that does not hold.

The lock files live in a folder of the user's own (runtime_dir()): created 0700, refused when
it is a symbolic link, another user's or open to others; each lock file is created O_EXCL and
0600 and never opened through a symbolic link.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import torch

__all__ = ["default_gpu_lock", "gpu_uuid", "gpu_processes", "runtime_dir", "sharing_note"]

# An override of the folder (tests, or a site that wants it elsewhere); checked like the default.
RUNTIME_DIR_ENV = "TORCHUTIL_RUNTIME_DIR"


def _error(message: str) -> ValueError:
    return ValueError(f"torchutil: {message}")


def _check_private_dir(path: Path) -> None:
    """An error naming path unless it is a real folder of this user that no one else can enter."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise _error(f"{path} must be a folder, not a symbolic link or a file; remove it or set {RUNTIME_DIR_ENV}")
    if st.st_uid != os.getuid():
        raise _error(f"{path} belongs to uid {st.st_uid}, not to this user ({os.getuid()}); set {RUNTIME_DIR_ENV} "
                     "to a folder of your own")
    if st.st_mode & 0o077:
        raise _error(f"{path} is open to other users (mode {stat.S_IMODE(st.st_mode):o}); make it 0700 "
                     f"(chmod 700 {path}) or set {RUNTIME_DIR_ENV}")


def runtime_dir() -> Path:
    """The user's folder for torchutil's lock files and sockets: $TORCHUTIL_RUNTIME_DIR, else
    $XDG_RUNTIME_DIR/torchutil, else <temp folder>/torchutil-<uid>; made 0700 where missing."""
    if os.environ.get(RUNTIME_DIR_ENV):
        path = Path(os.environ[RUNTIME_DIR_ENV])
    elif os.environ.get("XDG_RUNTIME_DIR") and os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "torchutil"
    else:
        path = Path(tempfile.gettempdir()) / f"torchutil-{os.getuid()}"
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    _check_private_dir(path)
    return path


def private_file(path: Path) -> None:
    """Creates path as an empty 0600 file unless it is there; an error unless it is then a
    regular file of this user (a symbolic link is never followed)."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            fd = os.open(path, flags)
        except OSError as e:  # ELOOP: a symbolic link
            raise _error(f"cannot open {path}: {e.strerror}; remove it") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise _error(f"{path} is not a regular file of this user; remove it")
    finally:
        os.close(fd)


def gpu_uuid(device: torch.device | str | int) -> str:
    """The CUDA device's UUID as NVML writes it ("GPU-..."): the same physical GPU whatever
    CUDA_VISIBLE_DEVICES numbers it."""
    device = _cuda_device(device)
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def _cuda_device(device: torch.device | str | int) -> torch.device:
    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if device.type != "cuda":
        raise _error(f"a GPU lock is for a CUDA device, got {device}")
    return torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)


def default_gpu_lock(device: torch.device | str | int = "cuda") -> str:
    """The lock file every torchutil process on this physical GPU takes turns through:
    runtime_dir()/gpu-<uuid>.lock (made 0600 where missing). Pass it as gpu_lock."""
    path = runtime_dir() / f"gpu-{gpu_uuid(device)}.lock"
    private_file(path)
    return str(path)


def gpu_processes(device: torch.device | str | int) -> list[int] | None:
    """Process ids of the processes holding a CUDA context on the device, as NVML lists them
    (in a container: possibly the host's numbers); None where that cannot be told (no
    nvidia-ml-py, no NVML, or a container that hides the processes: NVML then lists none)."""
    try:
        import pynvml
    except ImportError:
        return None
    uuid = gpu_uuid(device)
    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid.encode())
            pids = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None
    return sorted(set(pids)) or None


def sharing_note(device: torch.device | str | int) -> str | None:
    """A sentence where processes other than this one hold a CUDA context on the device (their
    GPU work makes an H200 time this process's forwards faster, whatever lock they share), else
    None (also where NVML cannot tell)."""
    pids = gpu_processes(device)
    if pids is None:
        return None
    others = len(pids) - (1 if torch.cuda.is_initialized() else 0)
    if others <= 0:
        return None
    shown = ", ".join(map(str, pids[:8])) + (", ..." if len(pids) > 8 else "")
    return (f"{others} other process(es) hold a CUDA context on {_cuda_device(device)} (NVML lists pid {shown}): "
            "while another context does GPU work an H200 runs a graph's kernels ~0.6 us each faster, even with "
            "every process holding the gpu_lock over its timed forwards (eight processes: cells measured ~4.5 % "
            "faster), so these figures are not one process's. Measure through one process per GPU "
            "(torchutil.nas.service, or a Ray actor per GPU) to keep them equal")
