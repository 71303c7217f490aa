"""torchutil.studies._common: what the study commands share (JSON without NaN, progress, exits)."""
from __future__ import annotations

import json
import math
import sys

import pytest
import torch

from torchutil._json import json_safe
from torchutil.studies._common import Progress, cudnn_autotune, exit_on_error, fail, tf32_flags, write_json


def test_json_safe_and_write_json(tmp_path):
    value = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": "x", "e": 3}}
    assert json_safe(value) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": "x", "e": 3}}
    write_json(tmp_path / "v.json", value, indent=1)
    text = (tmp_path / "v.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == json_safe(value)


def test_progress_text_lines(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # the fallback without tqdm
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    bar = Progress(3, "survey", "config", in_place=True)
    for label in ("a", "b", "c"):
        bar.update(label)
    bar.close()
    err = capsys.readouterr().err
    assert err.count("\r") == 3 and "survey [3/3]" in err and "ms/config" in err and err.endswith("\n")
    # every=: at most one line per period, and always the last.
    bar = Progress(5, "nas evaluate", "arch", every=3600.0)
    for _ in range(5):
        bar.update()
    bar.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nas evaluate [5/5]")
    # Not a terminal: no carriage-return frames (and no tqdm bar), one line per piece.
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.delitem(sys.modules, "tqdm")
    bar = Progress(2, "survey", "config", in_place=True)
    bar.update("a")
    bar.update("b")
    bar.close()
    err = capsys.readouterr().err
    assert "\r" not in err and err.count("\n") == 2 and "survey [2/2]" in err
    for quiet in (Progress(2, "x", "y", enabled=False), Progress(0, "x", "y")):
        quiet.update()
        quiet.close()
    assert capsys.readouterr().err == ""


def test_exits():
    with pytest.raises(SystemExit, match="^torchutil: no such thing$"):
        raise fail("no such thing")
    with pytest.raises(SystemExit, match="^torchutil: bad width$") as info:
        with exit_on_error():
            raise ValueError("torchutil: bad width")
    assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(KeyError):
        with exit_on_error():
            raise KeyError("not a user error")


def test_backend_flags_are_restored_even_after_an_error():
    flags = lambda: (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32,  # noqa: E731
                     torch.backends.cudnn.allow_tf32)
    before = flags()
    with pytest.raises(RuntimeError, match="inside"):
        with cudnn_autotune(not before[0]), tf32_flags("tf32" if not before[1] else "float32"):
            assert flags() != before
            raise RuntimeError("inside")
    assert flags() == before


def test_setup_places_model_and_input_alike():
    """Setup: one place for what the profile command, the survey, fold-bench and nas evaluate
    each did by hand (eval mode, device, dtype, channels_last on CUDA by default)."""
    from torchutil.studies._common import Setup

    assert Setup.on("cpu", torch.float32).channels_last is False
    assert Setup.on("cuda", torch.float16).channels_last is True  # the CUDA default (no GPU needed)
    assert Setup.on("cuda", torch.float16, channels_last=False).channels_last is False
    setup = Setup.on("cpu", torch.float64, channels_last=True)
    model = setup.model(torch.nn.Conv2d(3, 4, 3).train())
    x = setup.input(2, 3, 8, 8)
    assert not model.training and model.weight.dtype == torch.float64 and x.dtype == torch.float64
    assert x.shape == (2, 3, 8, 8) and x.is_contiguous(memory_format=torch.channels_last)
    assert model.weight.is_contiguous(memory_format=torch.channels_last)
    assert model(x).is_contiguous(memory_format=torch.channels_last)
    plain = Setup.on("cpu", torch.float32).input(2, 3, 8, 8)
    assert plain.is_contiguous() and not plain.is_contiguous(memory_format=torch.channels_last)


def test_setup_classifier_is_the_benchmarks_model_and_input():
    """Setup.classifier: the set-up the benchmarks share (a torchvision classifier and a batch of
    its images, placed alike)."""
    from torchutil.studies._common import Setup

    model, x = Setup.on("cpu", torch.float64, channels_last=True).classifier("resnet18", 2, image_size=32)
    assert not model.training and model.conv1.weight.dtype == torch.float64
    assert model.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    assert x.shape == (2, 3, 32, 32) and x.dtype == torch.float64
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert model(x).shape == (2, 1000)
    _, x = Setup.on("cpu", torch.float32).classifier("resnet18", 1)
    assert x.shape == (1, 3, 224, 224)  # classifier_image_size
