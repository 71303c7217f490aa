"""What the study commands share: where and how a network and its input are placed (Setup, from
torchutil.models),
output files written whole or not at all (atomic_open, write_json: from torchutil._files), progress on stderr, how a command exits on a user's error, matplotlib
figures without pyplot, and the backend flags a measurement sets and restores (TF32, cuDNN
autotuning)."""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import IO, Any, Iterator

import torch

from torchutil._files import atomic_open, named, save_figure, write_json
# Re-exported: the studies' placement of a network (torchutil.models) and the NAS errors (torchutil.nas.errors).
from torchutil.models import Setup
from torchutil.nas.errors import NAS, nas_error

__all__ = ["NO_MATPLOTLIB", "TORCH_DTYPES", "Progress", "Setup", "StageLine", "atomic_open", "cudnn_autotune",
           "device_memory", "exit_on_error", "fail", "NAS", "nas_error", "figure", "named", "plots_available",
           "save_figure", "tf32_flags", "write_json"]

# The dtypes the survey and fold-bench measure in: "tf32" is float32 with TF32 allowed in
# cuBLAS and cuDNN (tf32_flags), "float32" the same with TF32 off.
TORCH_DTYPES = {"float32": torch.float32, "tf32": torch.float32, "float16": torch.float16,
                "bfloat16": torch.bfloat16}


def device_memory(device: torch.device) -> int | None:
    """Bytes of memory of the device (the host's physical memory for the CPU), None where unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def fail(message: str) -> SystemExit:
    """`raise fail("...")`: the command stops, printing "torchutil: ..." and exiting with 1."""
    return SystemExit(f"torchutil: {message}")


@contextlib.contextmanager
def exit_on_error() -> Iterator[None]:
    """A ValueError raised inside (a bad model name, factor or width: its message already says
    what and why) ends the command with that message instead of a traceback."""
    try:
        yield
    except ValueError as e:
        raise SystemExit(str(e)) from None


NO_MATPLOTLIB = "no plots: matplotlib is not installed (pip install matplotlib: the plot extra)"


def plots_available(wanted: bool = True) -> bool:
    """Whether a command draws its plots: they are `wanted` (no --no-plots) and matplotlib is
    importable. The one policy for a missing matplotlib, in every command that plots: the plots
    are left out, everything else is written, and one note (NO_MATPLOTLIB) on stderr says so."""
    if not wanted:
        return False
    try:
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    except ImportError:
        print(f"note: {NO_MATPLOTLIB}", file=sys.stderr)
        return False
    return True


def figure(**kwargs: Any) -> Any:
    """A matplotlib Figure drawn by the Agg canvas, for savefig() only: pyplot is not imported
    and matplotlib's backend is left as the user set it. ImportError without matplotlib: the
    commands ask plots_available() first."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


class Progress:
    """Progress through `total` pieces of work on stderr: a tqdm bar when tqdm is installed and
    stderr is a terminal, else a text line with the time per piece and the time left, rewritten
    in place (in_place=True, on a terminal only: a log gets no carriage-return frames) or
    printed anew at most every `every` seconds (for logs, and for several ranks sharing one
    terminal). Nothing at all with enabled=False or no work."""

    def __init__(self, total: int, desc: str, unit: str, *, enabled: bool = True,
                 in_place: bool = False, every: float = 0.0) -> None:
        terminal = sys.stderr.isatty()
        self.total, self.desc, self.unit = total, desc, unit
        self.enabled, self.in_place, self.every = enabled and total > 0, in_place and terminal, every
        self.done = 0
        self._bar = None
        if self.enabled and terminal:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, unit=unit)
            except ImportError:
                pass
        self._t0 = self._last = time.perf_counter()

    def update(self, label: str = "") -> None:
        """One more piece done; `label` names it."""
        self.done += 1
        if not self.enabled:
            return
        if self._bar is not None:
            if label:
                self._bar.set_postfix_str(label)
            self._bar.update(1)
            return
        now = time.perf_counter()
        if now - self._last < self.every and self.done < self.total:
            return
        self._last = now
        per = (now - self._t0) / self.done
        line = (f"{self.desc} [{self.done}/{self.total}] {now - self._t0:.0f} s elapsed, "
                f"{1e3 * per:.1f} ms/{self.unit}, ~{per * (self.total - self.done):.0f} s left"
                + (f": {label}" if label else ""))
        sys.stderr.write(f"\r{line}\033[K" if self.in_place else f"{line}\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self.in_place:
            sys.stderr.write("\n")


class StageLine:
    """What a command is doing while nothing else shows (building a model, timing the peak,
    counting and timing the forwards): one line on a terminal, a spinner and the seconds spent,
    rewritten in place by a thread and erased when the stage ends, so the output reads as it
    would without it. Nothing where `stream` (stderr) is not a terminal or enabled is False
    (piped output, logs, --json -)."""

    FRAMES = "|/-\\"

    def __init__(self, enabled: bool = True, stream: IO[str] | None = None, every: float = 0.1) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled and self.stream.isatty()
        self.every = every

    @contextlib.contextmanager
    def stage(self, text: str) -> Iterator[None]:
        """The line "<spinner> <text> (<seconds> s)" while the body runs."""
        if not self.enabled:
            yield
            return
        done = threading.Event()
        t0 = time.perf_counter()

        def draw() -> None:
            frame = 0
            while True:
                self.stream.write(f"\r{self.FRAMES[frame % len(self.FRAMES)]} {text} "
                                  f"({time.perf_counter() - t0:.0f} s)\033[K")
                self.stream.flush()
                frame += 1
                if done.wait(self.every):
                    return

        thread = threading.Thread(target=draw, name="torchutil-stage", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
            self.stream.write("\r\033[K")
            self.stream.flush()


@contextlib.contextmanager
def tf32_flags(dtype: str) -> Iterator[None]:
    """TF32 on for "tf32", off for "float32" (cuBLAS matmuls and cuDNN convolutions), untouched
    otherwise; restored on exit."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        if dtype in ("float32", "tf32"):
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
            torch.backends.cudnn.allow_tf32 = dtype == "tf32"
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@contextlib.contextmanager
def cudnn_autotune(on: bool) -> Iterator[None]:
    """torch.backends.cudnn.benchmark = on inside the block (cuDNN times its algorithms per
    shape; the warm-up forwards absorb the tuning); restored on exit."""
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = on
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = saved
