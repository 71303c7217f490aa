"""The API and the command line refuse the same inputs: an empty batch (torchutil.profile with a
batch of 0 samples, --batch 0), the dtype spellings (--dtype and torchutil.peak_flops take the
same ones), and CUDA-graph timing on a CPU (refused before the model is built)."""
from __future__ import annotations

import pytest
import torch
from cli_status import status_and_err

import torchutil
from torchutil import models
from torchutil.studies.cli import _parser


@pytest.mark.parametrize("call", ["profile", "op", "args"])
def test_an_empty_batch_is_refused_like_batch_0(call, capsys):
    model = torch.nn.Linear(4, 2)
    x = torch.empty(0, 4)
    run = {"profile": lambda: torchutil.profile(model, x, iters=1),
           "op": lambda: torch.ops.util.profile(model, x, iters=1),
           "args": lambda: torchutil.profile(model, args=(x,), iters=1)}[call]
    with pytest.raises(ValueError, match=r"batch dimension is empty \(shape \(0, 4\)\)"):
        run()
    status, err = status_and_err(["profile", "--batch", "0", "--device", "cpu"], capsys)
    assert status == 2 and "--batch" in err


def test_a_batch_of_one_still_runs():
    result = torchutil.profile(torch.nn.Linear(4, 2), torch.randn(1, 4), warmup=0, iters=1)
    assert result.batch_size == 1 and result.flops > 0


def _peak_parses(name: str) -> bool:
    """Whether torchutil.peak_flops takes the dtype name: the datasheet source on a CPU fails
    after the dtype is parsed, so nothing is timed."""
    try:
        torchutil.peak_flops("cpu", name, "datasheet")
    except ValueError as e:
        if "unknown dtype" in str(e):
            return False
        assert "datasheet peak exists only for CUDA" in str(e), e
        return True
    raise AssertionError("a datasheet peak on a CPU")


SPELLINGS = [*models.DTYPES, *models.DTYPE_ALIASES, "FP16", "Half", "BFloat16"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_dtype_spellings_are_one_list(spelling):
    """Each spelling --dtype takes names the dtype peak_flops reads it as."""
    args = _parser().parse_args(["profile", "--dtype", spelling])
    assert args.dtype in models.DTYPES
    assert _peak_parses(spelling)
    assert str(models.DTYPES[args.dtype]).removeprefix("torch.") == args.dtype


@pytest.mark.parametrize("spelling", ["float12", "fp17", "halfish"])
def test_a_dtype_neither_knows_is_refused_by_both(spelling, capsys):
    assert not _peak_parses(spelling)
    status, err = status_and_err(["profile", "--dtype", spelling], capsys)
    assert status == 2 and "--dtype" in err and spelling in err


@pytest.mark.parametrize("line", [["--cuda-graph"], ["--timing", "cuda_graph"]])
def test_cuda_graph_on_a_cpu_is_refused_before_the_model_is_built(line, monkeypatch, capsys):
    def no_build(name):
        raise AssertionError(f"{name} was built")

    monkeypatch.setattr(models, "build_model", no_build)
    status, err = status_and_err(["profile", "resnet50", "--device", "cpu", *line], capsys)
    assert status == 2 and f"{line[0]}" in err and "needs a CUDA device; got cpu" in err, err
