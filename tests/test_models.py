"""Matrix FLOPs of torchvision classifiers equal torch.utils.flop_counter.FlopCounterMode's.

FlopCounterMode counts matrix products, convolutions and attention with the formulas torchutil's
matrix FLOPs follow (csrc/core/Convention.h), so on the same model and input the two totals
must agree exactly; and a classifier made of standard layers must have no op without a formula.
"""
from __future__ import annotations

import pytest
import torch
import torchvision.models as tvm
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from torchvision.models.vision_transformer import VisionTransformer

import torchutil

# name -> (constructor kwargs beyond weights=None, input side)
MODELS = {
    "alexnet": ({}, 64),
    "convnext_tiny": ({}, 64),
    "densenet121": ({}, 64),
    "efficientnet_b0": ({}, 64),
    "efficientnet_b1": ({}, 64),
    "efficientnet_v2_s": ({}, 64),
    "googlenet": ({"aux_logits": False, "init_weights": False}, 64),
    "inception_v3": ({"aux_logits": False, "init_weights": False}, 75),  # its smallest input
    "mnasnet0_5": ({}, 64),
    "mobilenet_v2": ({}, 64),
    "mobilenet_v3_large": ({}, 64),
    "mobilenet_v3_small": ({}, 64),
    "regnet_x_400mf": ({}, 64),
    "regnet_y_400mf": ({}, 64),
    "resnet18": ({}, 64),
    "resnet34": ({}, 64),
    "resnet50": ({}, 64),
    "resnext50_32x4d": ({}, 64),
    "shufflenet_v2_x0_5": ({}, 64),
    "squeezenet1_0": ({}, 64),
    "squeezenet1_1": ({}, 64),
    "swin_t": ({}, 64),
    "vgg11": ({}, 64),
    "wide_resnet50_2": ({}, 64),
}


def flop_counter_total(model, x) -> int:
    with FlopCounterMode(display=False) as oracle, torch.no_grad():
        model(x)
    return oracle.get_total_flops()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_matrix_flops_equal_flop_counter(name):
    kwargs, side = MODELS[name]
    torch.manual_seed(0)
    model = getattr(tvm, name)(weights=None, **kwargs).eval()
    x = torch.randn(1, 3, side, side)
    expected = flop_counter_total(model, x)
    assert expected > 0

    result = torchutil.profile(model, x, warmup=0, iters=1)

    assert result.matrix_flops == expected
    assert result.unknown_ops == {}
    assert result.unknown_op_calls == 0
    assert result.vector_flops > 0
    assert result.flops == result.matrix_flops + result.vector_flops


def test_vision_transformer_fused_attention():
    """In eval under inference mode, nn.MultiheadAttention runs the fused
    _native_multi_head_attention, which FlopCounterMode has no formula for (and on the CPU it has
    none for the flash kernel either). Its decomposed form is what FlopCounterMode can count: the
    fused op must cost the same as its parts."""
    torch.manual_seed(0)
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                              hidden_dim=64, mlp_dim=128).eval()
    x = torch.randn(1, 3, 32, 32)
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel(SDPBackend.MATH):  # attention as bmm, softmax, bmm
            expected = flop_counter_total(model, x)
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)

    result = torchutil.profile(model, x, warmup=0, iters=1)

    assert "aten::_native_multi_head_attention" in {r.op for r in result.ops}
    assert result.matrix_flops == expected
    assert result.unknown_ops == {}
