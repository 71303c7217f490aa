"""torchutil.fold: the FoldedCNN transform, and the models of torchutil.models."""
from __future__ import annotations

import math

import pytest
import torch
import torchvision

import torchutil
from torchutil.folding import folded_channels
from torchutil.models import FOLD_BENCH_MODELS, build, specialized_cnn

PEAK = 1e12


def conv_matrix_flops(result: torchutil.ProfileResult) -> dict[str, int]:
    """Matrix FLOPs of each conv / linear module in one forward."""
    out: dict[str, int] = {}
    for r in result.ops:
        if r.op in ("aten::convolution", "aten::linear", "aten::addmm", "aten::mm"):
            out[r.module] = out.get(r.module, 0) + r.matrix_flops
    return out


def test_folded_channels():
    assert [folded_channels(64, f) for f in (1, 2, 3, 4)] == [64, 90, 110, 128]
    assert folded_channels(16, 2) == math.floor(16 * math.sqrt(2))
    assert folded_channels(1, 1) == 1


@pytest.mark.parametrize("name", list(FOLD_BENCH_MODELS))
@pytest.mark.parametrize("f", [2, 3, 4])
def test_folded_shapes_and_run(name, f):
    model, size, classes = build(name)
    folded = torchutil.fold(model, f).eval()
    x = torch.randn(2 * f, 3, size, size)
    with torch.inference_mode():
        out = folded(x)
    assert out.shape == (2 * f, classes)
    assert folded.folded(x.reshape(2, 3 * f, size, size)).shape == (2, f * classes)
    first = next(m for m in folded.modules() if isinstance(m, torch.nn.Conv2d))
    assert first.in_channels == 3 * f
    assert first.out_channels == folded_channels(next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d)).out_channels, f)
    last = [m for m in folded.modules() if isinstance(m, torch.nn.Linear)][-1]
    assert last.out_features == f * classes


def test_fold_keeps_image_order():
    """Output row i depends on image i only: the reshape stacks consecutive images."""
    model = torchutil.fold(specialized_cnn((8, 16), classes=3), 2).eval()
    x = torch.randn(4, 3, 16, 16)
    with torch.inference_mode():
        out = model(x)
        y = x.clone()
        y[3] = torch.randn(3, 16, 16)  # changes the second stacked input only
        out2 = model(y)
    torch.testing.assert_close(out[:2], out2[:2])
    assert not torch.allclose(out[2:], out2[2:])


def test_batch_must_divide():
    folded = torchutil.fold(specialized_cnn(), 3).eval()
    with pytest.raises(ValueError, match="divisible by 3, got 4 images"):
        folded(torch.randn(4, 3, 32, 32))
    with pytest.raises(ValueError, match="N x 3 x H x W"):
        folded(torch.randn(3, 1, 32, 32))


def test_fold_errors():
    for f in (0, 1025):
        with pytest.raises(ValueError, match=rf"f must be an int in 1..1024 .*, got {f}$"):
            torchutil.fold(specialized_cnn(), f)
    with pytest.raises(ValueError, match="at least one Conv2d"):
        torchutil.fold(torch.nn.Sequential(torch.nn.Linear(3, 3)), 2)
    grouped = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 8, 3, groups=2),
                                  torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 2))
    with pytest.raises(NotImplementedError, match="groups=2"):
        torchutil.fold(grouped, 2)
    flat = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(), torch.nn.Linear(8 * 30 * 30 + 1, 2))
    with pytest.raises(NotImplementedError, match="8 channels, after global pooling or flattened, got 7201 inputs"):
        torchutil.fold(flat, 2)


def test_fold_does_not_touch_the_original():
    model = specialized_cnn((8, 16))
    before = [p.shape for p in model.parameters()]
    torchutil.fold(model, 4)
    assert [p.shape for p in model.parameters()] == before


@pytest.mark.parametrize("name", ["spec_3conv_32", "noscope_32x2", "resnet18_cifar"])
@pytest.mark.parametrize("f", [2, 4])
def test_per_image_flops(name, f):
    """Inner layers: the same matrix FLOPs per image up to the floor of c x sqrt(f). First conv
    and classifier: sqrt(f) times theirs (docs/roofline.md). Whole model: within those bounds."""
    model, size, _ = build(name)
    folded = torchutil.fold(model, f).eval()
    n = 2 * f
    x = torch.randn(n, 3, size, size)
    orig = torchutil.profile(model, x, warmup=0, iters=1, peak_flops=PEAK)
    fold = torchutil.profile(folded, x, warmup=0, iters=1, peak_flops=PEAK)
    a, b = conv_matrix_flops(orig), conv_matrix_flops(fold)
    convs = [n_ for n_, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
    linears = [n_ for n_, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    edge = {convs[0], linears[-1]}
    for module, flops in a.items():
        folded_flops = b["folded." + module]
        m = model.get_submodule(module)
        if module in edge:
            assert folded_flops == pytest.approx(flops * math.sqrt(f), rel=0.05), module
            continue
        if isinstance(m, torch.nn.Conv2d):
            c_in, c_out, spatial = m.in_channels, m.out_channels, 1
        else:  # a Linear after Flatten reads (channels of the last conv) x (positions)
            spatial = m.in_features // [x for x in model.modules() if isinstance(x, torch.nn.Conv2d)][-1].out_channels \
                if module == linears[0] else 1
            c_in, c_out = m.in_features // spatial, m.out_features
        expected = flops * folded_channels(c_in, f) * folded_channels(c_out, f) / (f * c_in * c_out)
        assert folded_flops == pytest.approx(expected, rel=1e-9), module
        assert expected <= flops and expected >= flops * (1 - 1 / (c_in * math.sqrt(f))) * (1 - 1 / (c_out * math.sqrt(f)))
    edge_flops = sum(a[m] for m in edge)
    total_a, total_b = orig.matrix_flops, fold.matrix_flops
    assert total_b <= total_a + edge_flops * (math.sqrt(f) - 1) + 1
    assert total_b >= 0.97 * total_a
    # One activation map serves f images: fewer vector FLOPs per image.
    assert fold.vector_flops < orig.vector_flops


def test_fold_torchvision_resnet():
    """Residual blocks with downsampling (torchvision's BasicBlock and Bottleneck)."""
    for ctor in (torchvision.models.resnet18, torchvision.models.resnet50):
        model = ctor(weights=None, num_classes=7).eval()
        folded = torchutil.fold(model, 2).eval()
        with torch.inference_mode():
            assert folded(torch.randn(2, 3, 64, 64)).shape == (2, 7)


def test_fold_depthwise():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.Conv2d(16, 16, 3, groups=16),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(16, 5))
    folded = torchutil.fold(model, 4).eval()
    dw = folded.folded[1]
    assert dw.groups == dw.in_channels == dw.out_channels == 32
    with torch.inference_mode():
        assert folded(torch.randn(8, 3, 12, 12)).shape == (8, 5)


def test_fold_bench_cli(tmp_path):
    from torchutil.studies.cli import main

    assert main(["fold-bench", "--device", "cpu", "--models", "spec_2conv_32", "--batch", "12",
                 "--warmup", "0", "--iters", "1", "--out", str(tmp_path)]) == 0
    import json

    rows = json.loads((tmp_path / "fold_bench.json").read_text())
    assert [r["f"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["throughput_gain"] == 1.0
    assert (tmp_path / "fold_bench.csv").read_text().startswith("model,f,batch")
    # A factor that does not divide the batch runs at the largest batch it divides.
    assert main(["fold-bench", "--device", "cpu", "--models", "spec_2conv_32", "--batch", "10",
                 "--f", "3", "--warmup", "0", "--iters", "1", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "fold_bench.json").read_text())
    assert [(r["f"], r["batch"]) for r in rows] == [(1, 10), (3, 9)]
    with pytest.raises(SystemExit, match="batch >= every factor"):
        main(["fold-bench", "--device", "cpu", "--batch", "2", "--f", "3", "--out", str(tmp_path)])


def test_folded_channels_multiple_of():
    # floor(32 sqrt(2)) = 45 -> 48; floor(16 sqrt(2)) = 22 -> 24; floor(32 sqrt(3)) = 55 -> 56
    assert [folded_channels(c, f, 8) for c, f in ((32, 2), (16, 2), (32, 3), (32, 4), (1, 2))] == [48, 24, 56, 64, 8]
    assert folded_channels(45, 1, 10) == 50  # halves round up
    for bad in (0, -8, 2.0, True):
        with pytest.raises(ValueError, match="multiple_of must be a positive int"):
            folded_channels(32, 2, bad)
    with pytest.raises(ValueError, match="multiple_of must be a positive int, got 0"):
        torchutil.fold(specialized_cnn((8, 16)), 2, multiple_of=0)


def test_fold_multiple_of_widths():
    model = specialized_cnn((16, 32), classes=2)
    folded = torchutil.fold(model, 2, multiple_of=8).eval()
    convs = [m for m in folded.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [(6, 24), (24, 48)]
    bns = [m.num_features for m in folded.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns == [24, 48]
    last = [m for m in folded.modules() if isinstance(m, torch.nn.Linear)][-1]
    assert (last.in_features, last.out_features) == (48, 4)
    with torch.inference_mode():
        assert folded(torch.randn(6, 3, 16, 16)).shape == (6, 2)


@pytest.mark.parametrize("name", ["spec_3conv_32", "resnet18_cifar"])
def test_fuse_batchnorm_same_outputs_fewer_ops(name):
    from torchutil.studies.foldbench import fuse_batchnorm

    model, size, _ = build(name)
    # Non-trivial BatchNorm statistics, so that fusing them is checked.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    x = torch.randn(4, 3, size, size)
    for net in (model, torchutil.fold(model, 2).eval()):
        fused = fuse_batchnorm(net)
        assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in fused.modules())
        assert any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())  # untouched
        with torch.inference_mode():
            torch.testing.assert_close(fused(x), net(x), rtol=1e-4, atol=1e-4)
        ops = {r.op for r in torchutil.profile(fused, x, warmup=0, iters=1, peak_flops=PEAK).ops}
        assert not any("batch_norm" in op for op in ops), ops


def test_fold_bench_cli_variants(tmp_path, capsys):
    from torchutil.studies.cli import main
    import json

    assert main(["fold-bench", "--device", "cpu", "--models", "spec_2conv_32", "--batch", "8",
                 "--f", "2", "--fuse-bn", "--multiple-of", "8", "--warmup", "0", "--iters", "1",
                 "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "fold_bench.json").read_text())
    assert [(r["f"], r["mode"], r["fuse_bn"], r["multiple_of"], r["cudnn_benchmark"]) for r in rows] == [
        (1, "eager", True, 8, False), (2, "eager", True, 8, False)]
    saved = torch.backends.cudnn.benchmark
    assert main(["fold-bench", "--device", "cpu", "--models", "spec_2conv_32", "--batch", "4",
                 "--f", "2", "--cudnn-benchmark", "--warmup", "0", "--iters", "1", "--out", str(tmp_path)]) == 0
    assert [r["cudnn_benchmark"] for r in json.loads((tmp_path / "fold_bench.json").read_text())] == [True, True]
    assert torch.backends.cudnn.benchmark == saved  # restored
    with pytest.raises(SystemExit) as info:  # refused by argparse, before any work
        main(["fold-bench", "--device", "cpu", "--models", "spec_2conv_32", "--batch", "8",
              "--f", "2", "--multiple-of", "0", "--out", str(tmp_path)])
    assert info.value.code == 2 and "--multiple-of: expected an integer >= 1, got 0" in capsys.readouterr().err
