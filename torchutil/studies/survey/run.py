"""What a survey runs (SurveyConfig) and running it: each configuration is profiled and its
row appended to OUT/survey.jsonl at once (torchutil/studies/survey/store.py)."""
from __future__ import annotations

import datetime
import itertools
import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from torchutil._json import json_safe
from torchutil._ops import CHOICES, OPTION_DEFAULTS
from torchutil._version import __version__
from torchutil.fields import FIELDS
from torchutil.models import SPECIALIZED, build_model, classifier_image_size, has_torchvision
from torchutil.profiler import profile
from torchutil.rooflines import memory_bandwidth, roofline
from torchutil.studies._common import TORCH_DTYPES, Progress, Setup, tf32_flags
from torchutil.studies.survey.store import OP_KEYS, ResultsFile, key, load_results

__all__ = ["DTYPES", "MODES", "SurveyConfig", "default_models", "imagenet_top1", "run_survey"]

DTYPES = tuple(TORCH_DTYPES)  # float32, tf32 (float32 with TF32 allowed), float16, bfloat16
MODES = CHOICES["timing"]


@dataclass
class SurveyConfig:
    """What a survey runs. models: names of torchutil.models.build_model (torchvision names, the
    CNNs of torchutil.models), or "timm:<name>" for timm models. image_size None: the model's own
    (torchutil.models.classifier_image_size). channels_last None: on for CUDA."""

    models: list[str]
    batches: list[int]
    dtypes: list[str]
    modes: list[str]
    device: str = "cpu"
    out: str = "survey"
    image_size: int | None = None
    channels_last: bool | None = None
    warmup: int = OPTION_DEFAULTS["warmup"]
    iters: int = OPTION_DEFAULTS["iters"]
    peak: str = OPTION_DEFAULTS["peak"]
    progress: bool = True
    retry_failed: bool = False  # run the configurations recorded as failed again
    # Hardware counters per configuration (torchutil.profile's counters=; None: none). The
    # summary then holds the hw_* / pm_* fields, and the row its counters_status.
    counters: list[str] | None = None
    # Joules per forward per configuration (torchutil.profile's energy=): the summary's joules,
    # watts, flops_per_joule, inputs_per_joule, and the row's energy_source.
    energy: bool = False
    energy_window: float = OPTION_DEFAULTS["energy_window"]
    energy_windows: int = OPTION_DEFAULTS["energy_windows"]

    def check(self) -> None:
        """ValueError naming what this device cannot run: tf32 and the timing modes but eager
        run on CUDA only (on a CPU there is no TF32, no CUDA graph, and auto would time eagerly)."""
        if torch.device(self.device).type == "cuda":
            return
        modes = [m for m in self.modes if m != "eager"]
        if modes:
            raise ValueError(f"torchutil: survey --modes {' '.join(modes)}: only eager timing runs on "
                             f"{self.device} (cuda_graph and auto time CUDA-graph replays, a CUDA feature)")
        if "tf32" in self.dtypes:
            raise ValueError(f"torchutil: survey --dtypes tf32: TF32 is a CUDA tensor-core format; on "
                             f"{self.device} use float32")

    def plan(self) -> list[tuple[str, int, str, str]]:
        """The (model, batch, dtype, mode) configurations, in run order; check() first."""
        self.check()
        return list(itertools.product(self.models, self.batches, self.dtypes, self.modes))


def default_models() -> list[str]:
    """Every torchvision classification model; where torchvision is not installed, the CNNs of
    torchutil.models that need torch alone."""
    if not has_torchvision():
        return list(SPECIALIZED)
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def imagenet_top1(name: str) -> float | None:
    """ImageNet-1K top-1 (%) of the default torchvision weights, from torchvision's metadata
    (nothing is downloaded); None for timm models and models without it."""
    if name.startswith("timm:"):
        return None
    try:
        import torchvision

        return float(torchvision.models.get_model_weights(name).DEFAULT.meta["_metrics"]["ImageNet-1K"]["acc@1"])
    except (KeyError, ValueError, AttributeError, ImportError):
        return None


def _setup(config: SurveyConfig, dtype: str) -> Setup:
    return Setup.on(config.device, TORCH_DTYPES[dtype], config.channels_last)


def _measure(config: SurveyConfig, model_name: str, model: torch.nn.Module, batch: int, dtype: str,
             mode: str, bandwidth: float) -> dict[str, Any]:
    setup = _setup(config, dtype)
    size = config.image_size or classifier_image_size(model_name)
    x = setup.input(batch, 3, size, size)
    with tf32_flags(dtype):
        result = profile(model, x, warmup=config.warmup, iters=config.iters,
                         timing=mode, peak=config.peak, counters=config.counters, energy=config.energy,
                         energy_window=config.energy_window,
                         energy_windows=config.energy_windows)
    roof = roofline(result, bandwidth=bandwidth)
    return {
        "image_size": size,
        "channels_last": setup.channels_last,
        "summary": dict(zip(FIELDS, result.summary.tolist())),
        "peak_source": result.peak_source,
        "timing_mode": result.timing_mode,
        "timing_note": result.timing_note,
        "peak_dtype": result.peak_dtype,
        "counters_status": result.counters_status,
        "energy_source": result.energy_source,
        "ridge_intensity": roof.ridge_intensity,
        "bounds": roof.counts(),
        "ops": [{k: getattr(r, k) for k in OP_KEYS} for r in roof.rows],
    }


def _build_on(name: str, device: torch.device) -> torch.nn.Module:
    """build_model's model with its parameters created and initialized on `device` (seconds for the
    largest models on a GPU, where a CPU takes minutes); on the CPU if that fails."""
    if device.type == "cpu":
        return build_model(name)[0]
    try:
        with device:
            return build_model(name)[0]
    except (RuntimeError, NotImplementedError):
        return build_model(name)[0]


def run_survey(config: SurveyConfig) -> list[dict[str, Any]]:
    """Runs every configuration of `config` not yet in OUT/survey.jsonl, appending each as it
    finishes, and returns all rows (old and new). Models are built once per (model, dtype)."""
    config.check()  # before anything is written
    os.makedirs(config.out, exist_ok=True)
    rows = load_results(config.out)
    done = {key(r) for r in rows if r["status"] == "ok" or not config.retry_failed}
    todo = [c for c in config.plan() if c not in done]
    device = torch.device(config.device)
    if not todo:
        return rows
    rerun = set(todo)
    rows = [r for r in rows if key(r) not in rerun]  # failed rows being retried: the new row replaces them
    bandwidth, bandwidth_source = memory_bandwidth(device)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    progress = Progress(len(todo), "survey", "config", enabled=config.progress, in_place=True)
    built: tuple[tuple[str, str], torch.nn.Module | Exception] | None = None
    try:
        with ResultsFile(config.out) as sink:
            for model_name, batch, dtype, mode in todo:
                row: dict[str, Any] = {
                    "model": model_name, "batch": batch, "dtype": dtype, "mode": mode,
                    "device": str(device), "device_name": device_name,
                    "top1": imagenet_top1(model_name), "bandwidth": bandwidth,
                    "bandwidth_source": bandwidth_source,
                    # What measured it, for the report's header.
                    "torch_version": torch.__version__, "torchutil_version": __version__,
                    "measured_at": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
                }
                t0 = time.perf_counter()
                try:
                    if built is None or built[0] != (model_name, dtype):
                        built = None  # free the last model before building the next
                        try:
                            built = ((model_name, dtype), _setup(config, dtype).model(_build_on(model_name, device)))
                        except Exception as e:  # noqa: BLE001  (recorded; every batch fails alike)
                            built = ((model_name, dtype), e)
                    if isinstance(built[1], Exception):
                        raise built[1]
                    row.update(_measure(config, model_name, built[1], batch, dtype, mode, bandwidth))
                    row["status"] = "ok"
                except Exception as e:  # noqa: BLE001  (one failure must not end the survey)
                    row["status"] = "error"
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                row["config_seconds"] = time.perf_counter() - t0
                sink.append(row)
                rows.append(json_safe(row))
                progress.update(f"{model_name} b{batch} {dtype} {mode}")
    finally:
        progress.close()
    return rows
