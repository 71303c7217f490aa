"""The Python face of the profiler: torchutil.profile() and torchutil.Profiler.

All counting and timing runs in C++ (torch.ops.util._profile, _count_begin/_count_end); what
comes back is a ProfileResult (torchutil/result.py, with how it reads).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Sequence

import torch

from torchutil import _C, _ops  # noqa: F401  (registers the ops)
from torchutil._eager import CountedAs
from torchutil.result import KernelRow, OpRow, ProfileResult, UnknownOp
from torchutil.views import module_params

__all__ = ["KernelRow", "OpRow", "ProfileResult", "Profiler", "UnknownOp", "free_capture_pools", "profile",
           "utilization"]


_D = _ops.OPTION_DEFAULTS  # the defaults of the options table (csrc/core/Options.h)


def profile(
    model: Any,
    x: torch.Tensor | Sequence[torch.Tensor] | None = None,
    *,
    args: tuple[Any, ...] | None = None,
    kwargs: dict[str, Any] | None = None,
    count_as: Any = None,
    batch_size: int | None = _D["batch_size"],
    warmup: int = _D["warmup"],
    iters: int = _D["iters"],
    timing: str | None = _D["timing"],
    cuda_graph: bool = _D["cuda_graph"],
    target_ci: float | None = _D["target_ci"],
    max_time: float = _D["max_time"],
    max_iters: int | None = _D["max_iters"],
    peak: str = _D["peak"],
    peak_flops: float | None = _D["peak_flops"],
    trace: bool = _D["trace"],
    trace_forwards: int = _D["trace_forwards"],
    chrome_trace: bool = _D["chrome_trace"],
    module_paths: bool = _D["module_paths"],
    counters: str | Sequence[str] | None = _D["counters"],
    counter_replay: str = _D["counter_replay"],
    gpu_lock: str | None = _D["gpu_lock"],
    energy: bool = _D["energy"],
    energy_window: float = _D["energy_window"],
    energy_windows: int = _D["energy_windows"],
) -> ProfileResult:
    """Profiles model(*x), or model(*args, **kwargs): utilization, FLOPs, bytes, time and the
    per-op table.

    Runs `warmup` forwards (one of them, or one extra if warmup is 0, with counting on; a
    torch.compile'd model always gets one uncounted forward first, where it compiles; a model
    that runs compiled code is counted as its eager self, in one more forward under
    torch.compile's force_eager stance: docs/counting.md, "Compiled models"), then the
    timed forwards without any hook: device events on accelerators, a steady clock on the CPU.
    On CUDA with trace=True, CUPTI records the kernels of the counted forward and of
    `trace_forwards` more, which are taken from the warm-ups (after the counted one; replays
    when timing as a CUDA graph) while there are enough.
    On the meta device only the count runs. Everything runs in inference mode.

    model: nn.Module, torch.compile'd module, TorchScript module or any callable.
    x: a tensor or a list/tuple of tensors, the model's positional inputs. args, kwargs: the
        inputs as torch.export takes them, for models that take lists (torchvision's detection
        models: args=([image],)), keyword arguments (Hugging Face models: kwargs={"input_ids":
        ids}) or anything else; their tensors give the device.
    count_as: a model whose ops the dispatcher sees, counted in model's place on the same inputs
        while model itself is timed: for an AOTInductor package (torch._inductor.aoti_load_package),
        whose kernels the dispatcher never sees, the torch.export.ExportedProgram it was compiled
        from (its .module() is counted) or that module. Without it such a package's FLOPs are NaN
        and result.flops_note says why (docs/counting.md, "AOTInductor packages").
    batch_size: the inputs a forward holds (inputs_per_second is per input). By default the
        first tensor's first dimension, which must be unambiguous: a tensor of two or more
        dimensions (or, with args/kwargs, a list of tensors, whose length is the batch).
    timing: None (the default) is "auto" on CUDA and eager elsewhere; "auto": replays of one
        captured CUDA graph when the forward captures, else eager (result.timing_note says
        why): no host launch cost, a figure that repeats call to call, what a NAS reward needs;
        "eager": each timed forward launched from the host, as a deployed eager PyTorch model
        runs (at small batches this measures the host CPU as much as the model); "cuda_graph"
        (same as cuda_graph=True): graph replays or an error. `utilization` is measured in the
        mode that ran (result.timing_mode). A thread's captures on one device allocate from one
        memory pool kept between calls (the largest forward captured on the thread), which
        free_capture_pools() gives back (TORCHUTIL_KEEP_CAPTURE_POOL=0: a private pool per capture).
    iters: timed forwards; with target_ci (a relative half-width, 0.005 for +-0.5 %) the least
        number, and more are timed until the 95 % confidence interval of the median is that
        tight, max_time seconds have passed or max_iters forwards ran (result.repetition says
        which; seconds_ci_low/high and seconds_relative_ci give the interval).
    peak: where the peak FLOP/s comes from ("auto", "datasheet", "computed", "measured");
        peak_flops: a number that overrides it.
    trace: on CUDA, record kernels with CUPTI (kernel time, GPU-busy fraction, per-op kernel
        time; see trace_status). The counted forward and `trace_forwards` more are traced; the
        timed forwards never are. On a CPU, time each op call of the counted forward instead
        (kernel_seconds is then its wall time: kernel_attribution "cpu"; docs/views.md).
        chrome_trace: also build the Perfetto trace (save_trace()).
    module_paths: name each op's module, on the counted forward (an eager nn.Module's named
        modules have their forward wrapped for it; other roots get global module hooks; without
        them the rows' module is ""). torch.ops.util.profile, which returns the summary only,
        never records them.
    counters: the GPU's own hardware counters beside the counted FLOPs (CUDA, CUPTI; off by
        default, and nothing changes without them): "flops" (tensor-core FLOPs per path and
        dtype, FMA/ALU pipe instructions: hw_tensor_flops, hw_flops_ratio per op and forward),
        "throughput" (SM and DRAM throughput %, tensor-pipe active %, achieved occupancy),
        both read per kernel by CUPTI's range profiler in extra forwards after the timed ones
        (one per replay pass), and "timeline" (PM sampling of SM-active, tensor-active and DRAM
        throughput % over the traced forwards, else over forwards after the timed ones: pm_* fields, counter
        tracks in the Chrome trace); a list of them, or "all". Where counters cannot be read the profile
        still returns, and result.counters_status says why. See docs/counters.md.
    counter_replay: how the range profiler gets its passes: "user" (one more forward per pass)
        or "kernel" (CUPTI replays each kernel within one forward, restoring device memory, as
        ncu does: for forwards that cannot be run again unchanged; slower).
    gpu_lock: a file path: every phase that runs work on the GPU holds an exclusive lock on it
        (flock), so that processes sharing one GPU time their forwards one at a time (the
        host-only capture of an untraced graph profile runs without it).
    energy: also measure joules per forward (joules, its interval joules_ci_low/high, watts,
        flops_per_joule, inputs_per_joule): after the timed forwards, the same kind of forward
        (graph replays or eager) runs back to back for energy_window seconds, in energy_windows
        windows aligned to the counter's updates, while the device's cumulative energy counter is read:
        NVML's total energy on a CUDA GPU, RAPL on a CPU. The figure is the whole device's
        draw; result.energy_source names the source and windows, and says why where nothing
        was measured (the fields are then NaN). See docs/energy.md.
    """
    options = {name: value for name, value in locals().items() if name in _ops.OPTION_TYPES}
    timed = model
    if count_as is not None:
        if isinstance(count_as, torch.export.ExportedProgram):
            count_as = count_as.module()
        if not callable(count_as):
            raise TypeError(f"torchutil: count_as must be a torch.export.ExportedProgram or a callable model, got "
                            f"{type(count_as).__name__}")
        timed = CountedAs(model, count_as)
    output = torch.ops.util._profile(timed, x, args=args, kwargs=kwargs, **options)
    result = ProfileResult._from_output(output)
    result._module_params = module_params(model if count_as is None else count_as)
    return result


profile.__doc__ = (profile.__doc__ or "") + "\n" + _ops.options_doc()


def free_capture_pools() -> None:
    """Gives back the CUDA-graph memory pools that profile() keeps between calls on this thread
    (one per device, as large as the largest forward captured on the thread; a no-op when none
    is kept); torch.cuda.empty_cache() then returns that memory to the driver."""
    _C._free_capture_pools()


def utilization(flops: torch.Tensor, seconds: torch.Tensor, peak_flops_per_second: torch.Tensor) -> torch.Tensor:
    """flops / seconds / peak, elementwise (torch.ops.util.utilization): for batches of results.
    Python numbers are taken as float64 tensors."""
    values = []
    for name, v, low in (("flops", flops, ">= 0"), ("seconds", seconds, "> 0"),
                         ("peak_flops_per_second", peak_flops_per_second, "> 0")):
        if not isinstance(v, torch.Tensor):
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise TypeError(f"torchutil: utilization's {name} must be a tensor or a number, got "
                                f"{type(v).__name__}")
            try:
                v = torch.tensor(float(v), dtype=torch.float64)
            except OverflowError:
                raise ValueError(f"torchutil: utilization's {name} must be a finite number {low}, got an int of "
                                 f"{v.bit_length()} bits") from None
        _check_utilization_term(name, v, low)
        values.append(v)
    return torch.ops.util.utilization(*values)


def _check_utilization_term(name: str, v: torch.Tensor, low: str) -> None:
    """A ValueError naming the first value of `v` that is NaN, infinite or out of range (a NaN,
    zero or negative time made a NaN, inf or negative utilization without a word). Tensors on the
    meta device hold no values to check."""
    if v.device.type == "meta" or v.dtype.is_complex or v.dtype == torch.bool:  # the op refuses these itself
        return
    good = torch.isfinite(v) & ((v >= 0) if low == ">= 0" else (v > 0))
    if not bool(good.all()):
        flat = v.detach().reshape(-1)
        at = int((~good.reshape(-1)).nonzero()[0])
        where = f" (element {at} of {tuple(v.shape)})" if v.dim() else ""
        raise ValueError(f"torchutil: utilization's {name} must be finite and {low}, got {flat[at].item()}{where}")


def _model_device(model: Any) -> torch.device | None:
    if isinstance(model, torch.nn.Module):
        for t in model.parameters():
            return t.device
        for t in model.buffers():
            return t.device
    return None


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Profiler:
    """Counts every op the code inside the block runs on this thread.

        with torchutil.Profiler(model, batch_size=32) as prof:
            model(x)
        prof.result.utilization

    The block's wall time (with the device synchronized at both ends) is the time, so the
    utilization is that of everything inside, Python included. model (optional) names the
    modules in the per-op table; device defaults to the model's device, else the current CUDA
    device if CUDA is initialized, else the CPU. Blocks cannot nest, on one thread.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        *,
        batch_size: int = 1,
        device: torch.device | str | None = None,
        peak: str = _D["peak"],
        peak_flops: float | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"torchutil: batch_size must be a positive int, got {batch_size!r}")
        # Checked here, before the block runs, as _count_end would check them after it.
        _ops.check_options("_profile", {"batch_size": batch_size, "peak": peak, "peak_flops": peak_flops})
        torch.ops.util._check_peak_options(peak, peak_flops)
        self.model = model
        self.batch_size = batch_size
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"torchutil: Profiler's model must be an nn.Module (it names the modules in the "
                            f"per-op table) or None, got {type(model).__name__}")
        if device is None:
            device = _model_device(model)
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_initialized() else torch.device("cpu")
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError) as e:
            raise ValueError(f"torchutil: Profiler's device must be a torch.device or a device string such as "
                             f"'cpu' or 'cuda:0', got {device!r} ({e})") from None
        self.peak = peak
        self.peak_flops = peak_flops
        self.result: ProfileResult | None = None
        self._scope: Any = None
        self._t0 = 0.0
        self._token = 0
        self._thread = 0

    def __enter__(self) -> "Profiler":
        if torch.ops.util._counting():
            raise RuntimeError(
                "torchutil: a profile is already counting on this thread; profiles cannot be nested"
            )
        _synchronize(self.device)
        self._token = torch.ops.util._count_begin()
        self._thread = threading.get_ident()
        try:
            if isinstance(self.model, torch.nn.Module):
                self._scope = _C._ModuleScope(self.model)
        except BaseException:
            torch.ops.util._count_abort()
            raise
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._thread == 0:
            raise RuntimeError("torchutil: Profiler.__exit__ without __enter__: use it as `with torchutil.Profiler(...):`")
        if threading.get_ident() != self._thread:
            # The count (a thread-local callback) lives on the entering thread, which drops it
            # at its next op; nothing was measured here.
            torch.ops.util._count_abandon(self._token)
            if self._scope is not None:
                self._scope.close()
                self._scope = None
            raise RuntimeError(
                "torchutil: a Profiler must be exited on the thread that entered it; the count "
                "was abandoned"
            )
        try:
            if exc_type is not None:
                torch.ops.util._count_abort()
                return
            _synchronize(self.device)
            seconds = time.perf_counter() - self._t0
            model = None if self.model is None else _ops.as_dispatchable(self.model)
            output = torch.ops.util._count_end(self.device, self.batch_size, seconds, model, self.peak,
                                               self.peak_flops)
            self.result = ProfileResult._from_output(output)
            self.result._module_params = module_params(self.model)
        finally:
            torch.ops.util._count_abort()  # no-op unless _count_end failed
            self._thread = 0
            if self._scope is not None:
                self._scope.close()
                self._scope = None
