"""The base models F that the codes protect, as in the papers' experiments:

- mlp: Flatten, then Linear in->200, ReLU, 200->100, ReLU, 100->classes ("in" from the data:
  64 for digits, 784 for MNIST / Fashion-MNIST, 3072 for CIFAR-10).
- resnet18: ResNet-18 for 32x32 images (3x3 stem of stride 1, no max-pool; four stages of two
  basic blocks, 64/128/256/512 channels), as ParM uses on CIFAR-10.
- resnet18_3stage: its first three stages (64/128/256, global pooling over the 7x7 map, a
  256 -> classes classifier): the "ResNet-18" both papers use for MNIST and Fashion-MNIST
  (ResNet18(size_for_cifar=False) in the learned-code and parity-model repositories, itself
  adapted from a Fashion-MNIST ResNet).

Convolutions start from He-normal weights (std sqrt(2 / (3*3*out_channels)), as the papers'
ResNet), batch norms from weight 1, bias 0.

Written here (no torchvision needed); they take images [N, C, H, W] and return logits [N, classes].
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

__all__ = ["BASE_MODELS", "BasicBlock", "ResNet", "build_base_model", "default_base_model", "mlp"]

BASE_MODELS = ("mlp", "resnet18", "resnet18_3stage")


def mlp(in_features: int, classes: int = 10) -> nn.Sequential:
    """The papers' MLP: in_features -> 200 -> 100 -> classes, ReLU between."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_features, 200), nn.ReLU(), nn.Linear(200, 100), nn.ReLU(),
                         nn.Linear(100, classes))


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 conv-BN, ReLU between and after the residual sum; a 1x1
    conv-BN shortcut where the stride or width changes."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """A CIFAR-style ResNet: 3x3 stem of stride 1, stages of basic blocks (the first at stride
    1, the others at stride 2), global average pooling, a linear classifier."""

    def __init__(self, in_channels: int, classes: int, widths: Sequence[int] = (64, 128, 256, 512),
                 blocks: int = 2) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU())
        layers: list[nn.Module] = []
        c_in = widths[0]
        for i, width in enumerate(widths):
            for b in range(blocks):
                layers.append(BasicBlock(c_in, width, 2 if i > 0 and b == 0 else 1))
                c_in = width
        self.stages = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)))


def default_base_model(dataset: str) -> str:
    """The papers' choice: the MLP for digits, MNIST and Fashion-MNIST, ResNet-18 for CIFAR-10
    (on MNIST and Fashion-MNIST the papers also run resnet18_3stage)."""
    return "resnet18" if dataset == "cifar10" else "mlp"


def build_base_model(name: str, shape: Sequence[int], classes: int = 10) -> nn.Module:
    """The base model `name` (one of BASE_MODELS) for images of `shape` (C, H, W)."""
    if name == "mlp":
        c, h, w = shape
        return mlp(c * h * w, classes)
    if name == "resnet18":
        return ResNet(shape[0], classes)
    if name == "resnet18_3stage":
        return ResNet(shape[0], classes, widths=(64, 128, 256))
    raise ValueError(f"torchutil.coded: unknown base model {name!r}; choose from {', '.join(BASE_MODELS)}")
