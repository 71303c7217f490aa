"""Hardware counters (counters=...) where no GPU counters can be read: bad values are refused
by name, a CPU or meta profile returns with a status saying why, nothing changes without the
option, and nothing is left behind (the next call works). The counters themselves are read in
tests/test_counters_cuda.py on a GPU; their decoding and aggregation are GoogleTested in
tests/cpp/HwCountersTest.cpp and HwResultTest.cpp."""
from __future__ import annotations

import math

import pytest
import torch

import torchutil

# Every hardware field of the summary (26) and of an op row (11): NaN, never 0, unless read.
HW_SUMMARY = ["hw_tensor_flops", "hw_flops_ratio", "hw_tensor_flops_fp16", "hw_tensor_flops_bf16",
              "hw_tensor_flops_tf32", "hw_tensor_flops_fp8", "hw_tensor_int8_ops", "hw_gmma_instructions",
              "hw_fma_instructions", "hw_alu_instructions", "sm_throughput_pct", "dram_throughput_pct",
              "tensor_active_pct", "achieved_occupancy_pct", "counter_kernels", "counter_passes",
              "counter_seconds", "counter_setup_seconds", "counter_pass_seconds", "counter_decode_seconds",
              "pm_sm_active_pct", "pm_tensor_active_pct", "pm_dram_throughput_pct",
              "pm_samples", "pm_interval_us", "pm_clock_offset_us"]
HW_OP = ["hw_tensor_flops", "hw_flops_ratio", "hw_fma_instructions", "hw_alu_instructions", "sm_throughput_pct",
         "dram_throughput_pct", "tensor_active_pct", "achieved_occupancy_pct", "pm_sm_active_pct",
         "pm_tensor_active_pct", "pm_dram_throughput_pct"]


def _hardware(names):
    return [n for n in names if n.startswith(("hw_", "pm_", "counter_")) or n.endswith("_pct")]


def test_the_lists_hold_every_hardware_field_of_the_schema():
    """A hardware field added to csrc/core/ResultSchema.h must be added above, so that the
    tests below check it too."""
    assert _hardware(torchutil.FIELDS) == HW_SUMMARY
    assert _hardware(torchutil.OP_FIELDS) == HW_OP


def assert_no_hardware_figure(r):
    for name in HW_SUMMARY:
        assert math.isnan(getattr(r, name)), name
        assert math.isnan(torchutil.field(r.summary, name)), name
    assert r.ops
    for row in r.ops:
        for name in HW_OP:
            assert math.isnan(getattr(row, name)), (row.op, name)


@pytest.fixture
def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def test_off_by_default_and_every_hardware_field_is_nan(model):
    r = torchutil.profile(model, torch.randn(2, 16), warmup=0, iters=1)
    assert r.counters_status == "off" and r.counters_not_on_gpu == ""
    assert_no_hardware_figure(r)
    assert "hardware counters" not in repr(r) and "hardware counters" not in str(r)


@pytest.mark.parametrize("counters", ["flops", "throughput", "timeline", "all", ["flops", "timeline"]])
def test_on_the_cpu_the_profile_returns_and_says_why(model, counters):
    x = torch.randn(2, 16)
    plain = torchutil.profile(model, x, warmup=0, iters=1)
    r = torchutil.profile(model, x, warmup=0, iters=1, counters=counters)
    assert r.counters_status == "off: hardware counters need a CUDA device, got cpu"
    assert r.counters_not_on_gpu == ""  # nothing was asked of a GPU
    assert r.flops == plain.flops and r.utilization > 0
    assert_no_hardware_figure(r)
    assert "hardware counters" in str(r) and r.counters_status in str(r)
    # The summary op takes it too.
    summary = torch.ops.util.profile(model, x, warmup=0, iters=1, counters=counters)
    for name in HW_SUMMARY:
        assert math.isnan(torchutil.field(summary, name)), name


def test_on_the_meta_device(model):
    meta = torch.nn.Linear(16, 4).to("meta")
    r = torchutil.profile(meta, torch.randn(2, 16, device="meta"), counters="flops")
    assert r.counters_status == "off: nothing runs on the meta device"
    assert_no_hardware_figure(r)


@pytest.mark.parametrize("bad", ["flopz", "", "FLOPS", ["flops", "dram"]])
def test_unknown_set_names_are_refused_by_name(model, bad):
    name = bad if isinstance(bad, str) else bad[1]
    with pytest.raises(ValueError, match=f"unknown counter set '{name}'"):
        torchutil.profile(model, torch.randn(2, 16), warmup=0, iters=1, counters=bad)
    with pytest.raises(ValueError, match=f"unknown counter set '{name}'"):
        torch.ops.util.profile(model, torch.randn(2, 16), warmup=0, iters=1, counters=bad)
    # Nothing is left behind: the next call works.
    assert torchutil.profile(model, torch.randn(2, 16), warmup=0, iters=1).counters_status == "off"


def test_an_unknown_replay_mode_is_refused_by_name(model):
    with pytest.raises(ValueError, match="counter_replay must be 'user' or 'kernel', got 'application'"):
        torchutil.profile(model, torch.randn(2, 16), warmup=0, iters=1, counters="flops",
                          counter_replay="application")
    r = torchutil.profile(model, torch.randn(2, 16), warmup=0, iters=1, counters="flops", counter_replay="kernel")
    assert r.counters_status.startswith("off: hardware counters need a CUDA device")


@pytest.mark.parametrize("bad", [3, ["flops", 2], {"flops"}])
def test_counters_of_another_type_are_a_type_error(model, bad):
    with pytest.raises(TypeError, match="counters must be None, a counter set name"):
        torchutil.profile(model, torch.randn(2, 16), warmup=0, iters=1, counters=bad)


def test_the_schema_documents_the_option():
    schema = str(torch.ops.util._profile.default._schema)
    assert "str[]? counters=None" in schema
    assert "str[]? counters=None" in str(torch.ops.util.profile.default._schema)
    assert 'str counter_replay="user"' in schema
    names = [f.name for f in torchutil.schema("texts")]
    assert "counters_status" in names


def test_fold_bench_passes_counters_on(tmp_path):
    import json

    from torchutil.studies.cli import main

    assert main(["fold-bench", "--device", "cpu", "--models", "spec_2conv_32", "--batch", "4", "--f", "2",
                 "--warmup", "0", "--iters", "1", "--counters", "flops", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "fold_bench.json").read_text())
    assert [r["counters_status"] for r in rows] == ["off: hardware counters need a CUDA device, got cpu"] * 2
    assert rows[0]["hw_flops_ratio"] is None  # NaN, written as null
    header = (tmp_path / "fold_bench.csv").read_text().splitlines()[0].split(",")
    assert header[-1] == "counters_status" and "hw_flops_ratio" in header
    # Without the option the columns are the usual ones.
    assert main(["fold-bench", "--device", "cpu", "--models", "spec_2conv_32", "--batch", "4", "--f", "2",
                 "--warmup", "0", "--iters", "1", "--out", str(tmp_path)]) == 0
    assert "counters_status" not in (tmp_path / "fold_bench.csv").read_text()


def test_fold_bench_refuses_unknown_counter_sets(tmp_path, capsys):
    from torchutil.studies.cli import main

    with pytest.raises(SystemExit) as info:
        main(["fold-bench", "--device", "cpu", "--counters", "dram", "--out", str(tmp_path)])
    assert info.value.code == 2 and "--counters: invalid choice: 'dram'" in capsys.readouterr().err


def test_survey_passes_counters_on(tmp_path):
    from torchutil.studies import survey

    config = survey.SurveyConfig(models=["squeezenet1_1"], batches=[1], dtypes=["float32"], modes=["eager"],
                                 out=str(tmp_path), warmup=0, iters=1, image_size=64, progress=False,
                                 counters=["flops", "timeline"])
    rows = survey.run_survey(config)
    assert rows[0]["status"] == "ok", rows[0]
    assert rows[0]["counters_status"] == "off: hardware counters need a CUDA device, got cpu"
    assert "hw_tensor_flops" in rows[0]["summary"]
