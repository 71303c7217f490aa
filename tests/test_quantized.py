"""Statically quantized models (torch.ao.quantization, fbgemm) on the CPU: their convolutions
take the weight packed in a custom class, which the count unpacks for its shape.

Oracles: FlopCounterMode on the float model before quantization (the matrix FLOPs: the same
products, in 8-bit integers), and the closed forms of docs/counting.md's quantized rows: per
output element 2 (the accumulator's rescale and the bias), 1 more for a fused relu; 2 per
element to quantize and to dequantize.
"""
from __future__ import annotations

import pytest
import torch
from torch.ao import quantization as q
from torch.utils.flop_counter import FlopCounterMode

import torchutil

pytestmark = pytest.mark.skipif("fbgemm" not in torch.backends.quantized.supported_engines,
                                reason="needs the fbgemm quantized engine (x86)")


class _Net(torch.nn.Module):
    def __init__(self, conv: type[torch.nn.Module]) -> None:
        super().__init__()
        self.quant, self.dequant = q.QuantStub(), q.DeQuantStub()
        self.conv = conv(3, 16, 3)
        self.relu = torch.nn.ReLU()
        self.depthwise = conv(16, 16, 3, groups=16, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dequant(self.depthwise(self.relu(self.conv(self.quant(x)))))


def _quantized(conv, x, fuse: bool):
    model = _Net(conv).eval()
    with FlopCounterMode(display=False) as fcm:
        model(x)
    if fuse:
        model = q.fuse_modules(model, [["conv", "relu"]])
    model.qconfig = q.get_default_qconfig("fbgemm")
    prepared = q.prepare(model)
    prepared(x)
    return q.convert(prepared), fcm.get_total_flops()


@pytest.mark.parametrize("conv, shape", [(torch.nn.Conv2d, (2, 3, 32, 32)), (torch.nn.Conv3d, (1, 3, 8, 16, 16)),
                                         (torch.nn.Conv1d, (2, 3, 64))], ids=["2d", "3d", "1d"])
@pytest.mark.parametrize("fuse", [False, True], ids=["conv_relu", "fused"])
def test_a_quantized_cnn_is_counted(conv, shape, fuse):
    x = torch.randn(*shape)
    model, float_flops = _quantized(conv, x, fuse)
    r = torchutil.profile(model, x, warmup=1, iters=1, peak_flops=1e12)
    assert r.unknown_ops == {}
    assert r.matrix_flops == float_flops
    rows = {}
    for o in r.ops:
        rows.setdefault(o.op, []).append(o)
    first = model.conv(model.quant(x))  # the first convolution's output (relu fused or not)
    second = model.depthwise(first if fuse else torch.relu(first))
    name = f"quantized::conv{len(shape) - 2}d"
    if fuse:
        assert rows[name + "_relu"][0].vector_flops == 3 * first.numel()
        assert rows[name][0].vector_flops == 2 * second.numel()
    else:
        assert sorted(o.vector_flops for o in rows[name]) == sorted([2 * first.numel(), 2 * second.numel()])
    assert sum(o.vector_flops for o in rows["aten::quantize_per_tensor"]) == 2 * x.numel()
    assert sum(o.vector_flops for o in rows["aten::dequantize"]) == 2 * second.numel()


@pytest.mark.parametrize("name", ["resnet18", "shufflenet_v2_x1_0", "mobilenet_v3_large"])
def test_torchvision_quantized_models_are_counted_whole(name):
    """torchvision's quantized classifiers (random weights, quantized by torchvision's own
    recipe): no op left unpriced, the matrix FLOPs of the float model (FlopCounterMode), and
    resnet18's residual add_relu at 3 per output element (each block's output)."""
    tvq = pytest.importorskip("torchvision.models.quantization")
    x = torch.randn(1, 3, 64, 64)
    model = getattr(tvq, name)(weights=None, quantize=True).eval()
    with FlopCounterMode(display=False) as fcm:
        getattr(tvq, name)(weights=None, quantize=False).eval()(x)
    r = torchutil.profile(model, x, warmup=1, iters=1)
    assert r.unknown_ops == {}
    assert r.matrix_flops == fcm.get_total_flops()
    assert r.peak_source.startswith(("computed: ", "measured: square int8 GEMMs")) and "int8" in r.peak_source
    if name == "resnet18":
        outputs = []
        hooks = [m.register_forward_hook(lambda _m, _i, out: outputs.append(out.numel()))
                 for m in model.modules() if type(m).__name__ == "QuantizableBasicBlock"]
        model(x)
        for h in hooks:
            h.remove()
        assert len(outputs) == 8
        assert sum(o.vector_flops for o in r.ops if o.op == "quantized::add_relu") == 3 * sum(outputs)
