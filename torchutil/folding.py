"""The FoldedCNN transform (Kosaian, Phanishayee, Rashmi: "Boosting the Throughput and
Accelerator Utilization of Specialized CNN Inference Beyond Increasing Batch Size", ICML 2021).

A FoldedCNN with folding factor f serves f images with one input: the f images are stacked
along channels (f x C input channels at batch N / f), every inner channel count c becomes
floor(c x sqrt(f)), and the classifier emits f x classes values, which are read back as f rows
of `classes`. An inner conv then does (sqrt(f))^2 = f times the work of the original for f
images: the same matrix FLOPs per image (less the floor), over fewer, wider layers, so its
arithmetic intensity rises by up to sqrt(f). Exceptions, as in the paper: the first layer
(f x C inputs, sqrt(f) x wider output) and the classifier (sqrt(f) x wider input, f x outputs)
each do sqrt(f) times their original FLOPs per image, and elementwise layers (BatchNorm,
activations, pooling) do 1 / sqrt(f) of theirs, since one activation map serves f images.

multiple_of (default 1: the paper's floor) rounds each folded inner width to the nearest
multiple, at least one multiple: tensor-core convolutions in float16 want channel counts that are
multiples of 8, and floor(32 x sqrt(2)) = 45 is not.

The folded network has new, untrained weights: it is an architecture, to be trained.
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

__all__ = ["MOST_FOLD", "FoldedModel", "fold", "folded_channels"]

# The largest folding factor fold() takes: an inner conv of the folded CNN has f times the
# weights of the original (f = 10**6 asked for 864 GB), and the paper folds 2 to 16 images.
MOST_FOLD = 1024


def folded_channels(c: int, f: int, multiple_of: int = 1) -> int:
    """floor(c x sqrt(f)), computed exactly (math.isqrt), at least 1; with multiple_of > 1,
    rounded to the nearest multiple of it (halves up), at least multiple_of."""
    if isinstance(multiple_of, bool) or not isinstance(multiple_of, int) or multiple_of < 1:
        raise ValueError(f"torchutil: multiple_of must be a positive int, got {multiple_of!r}")
    n = max(1, math.isqrt(c * c * f))
    if multiple_of > 1:
        n = max(multiple_of, (n + multiple_of // 2) // multiple_of * multiple_of)
    return n


def _like(new: nn.Module, old: nn.Module) -> nn.Module:
    p = next(old.parameters(), None)
    if p is None:
        p = next(old.buffers(), None)
    return new.to(device=p.device, dtype=p.dtype) if p is not None else new


def _fold_conv(conv: nn.Conv2d, f: int, first: bool, multiple_of: int) -> nn.Conv2d:
    c_in = conv.in_channels * f if first else folded_channels(conv.in_channels, f, multiple_of)
    c_out = folded_channels(conv.out_channels, f, multiple_of)
    groups = conv.groups
    if groups != 1:
        if not (groups == conv.in_channels == conv.out_channels and not first):
            raise NotImplementedError(
                f"torchutil: fold handles dense and depthwise convolutions, got groups={groups} "
                f"with {conv.in_channels} -> {conv.out_channels} channels")
        groups = c_in  # depthwise stays depthwise
    new = nn.Conv2d(c_in, c_out, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                    groups, conv.bias is not None, conv.padding_mode)
    return _like(new, conv)


def _fold_batchnorm(bn: nn.BatchNorm2d, f: int, multiple_of: int) -> nn.BatchNorm2d:
    new = nn.BatchNorm2d(folded_channels(bn.num_features, f, multiple_of), bn.eps, bn.momentum, bn.affine,
                         bn.track_running_stats)
    return _like(new, bn)


def _replace(root: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent_name) if parent_name else root, child, new)


def fold(model: nn.Module, f: int, multiple_of: int = 1) -> "FoldedModel":
    """The FoldedCNN of `model` with folding factor f, wrapped so that it takes and returns
    what `model` does: N x C x H x W images in, N x classes out (N divisible by f).

    model: a CNN of Conv2d (dense or depthwise), BatchNorm2d, activations, pooling and Linear
    layers, sequential or residual (torchvision ResNet blocks), whose first Conv2d in module
    order reads the image and whose last Linear is the classifier. The first Linear reads the
    last conv's channels after global pooling (ResNets), or its flattened C x H x W map
    (NoScope's networks): then it reads floor(C sqrt(f)) x H x W. Other modules with channel
    counts (GroupNorm, attention, ...) are refused.

    multiple_of: round every folded inner width (not the input's f x C channels, nor the
    classifier's f x classes outputs) to a multiple of this (see the module docstring).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"torchutil: fold takes a CNN (an nn.Module), got {type(model).__name__}")
    if isinstance(f, bool) or not isinstance(f, int) or not 1 <= f <= MOST_FOLD:
        raise ValueError(f"torchutil: the folding factor f must be an int in 1..{MOST_FOLD} (each inner conv gets f "
                         f"times its weights), got {f!r}")
    folded_channels(1, 1, multiple_of)  # checks multiple_of
    folded = copy.deepcopy(model)
    named = list(folded.named_modules())
    convs = [n for n, m in named if isinstance(m, nn.Conv2d)]
    linears = [n for n, m in named if isinstance(m, nn.Linear)]
    if not convs or not linears:
        raise ValueError("torchutil: fold needs a CNN with at least one Conv2d and a Linear "
                         f"classifier, got {len(convs)} Conv2d and {len(linears)} Linear layers")
    first_conv = folded.get_submodule(convs[0])
    in_channels = first_conv.in_channels
    classes = folded.get_submodule(linears[-1]).out_features
    last_channels = None
    for name, m in named:
        if isinstance(m, nn.Conv2d):
            if type(m) is not nn.Conv2d:
                raise NotImplementedError(f"torchutil: fold cannot fold {type(m).__name__} at {name!r}")
            _replace(folded, name, _fold_conv(m, f, name == convs[0], multiple_of))
            last_channels = m.out_channels
        elif isinstance(m, nn.BatchNorm2d):
            _replace(folded, name, _fold_batchnorm(m, f, multiple_of))
        elif isinstance(m, nn.Linear):
            if name == linears[0]:
                # Channels after global pooling, or a flattened C x H x W map (channel-major, as
                # nn.Flatten of NCHW gives): each of the H x W positions keeps its channels.
                if m.in_features % last_channels != 0:
                    raise NotImplementedError(
                        f"torchutil: fold needs the first Linear ({name!r}) to read the last conv's "
                        f"{last_channels} channels, after global pooling or flattened, got "
                        f"{m.in_features} inputs")
                c_in = folded_channels(last_channels, f, multiple_of) * (m.in_features // last_channels)
            else:
                c_in = folded_channels(m.in_features, f, multiple_of)
            out = classes * f if name == linears[-1] else folded_channels(m.out_features, f, multiple_of)
            _replace(folded, name, _like(nn.Linear(c_in, out, m.bias is not None), m))
        elif isinstance(m, (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm,
                            nn.MultiheadAttention, nn.ConvTranspose2d, nn.Conv1d, nn.Conv3d)):
            raise NotImplementedError(f"torchutil: fold cannot fold {type(m).__name__} at {name!r}")
    return FoldedModel(folded, f, in_channels, classes).train(model.training)


class FoldedModel(nn.Module):
    """Runs a folded network on N images: N x C x H x W -> N / f x (f C) x H x W (images
    i f ... i f + f - 1 stacked along channels, in order) -> N / f x (f classes) ->
    N x classes."""

    def __init__(self, folded: nn.Module, f: int, in_channels: int, classes: int) -> None:
        super().__init__()
        self.folded = folded
        self.f = f
        self.in_channels = in_channels
        self.classes = classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"torchutil: the folded model takes N x {self.in_channels} x H x W "
                             f"images, got shape {tuple(x.shape)}")
        n = x.shape[0]
        if n % self.f != 0:
            raise ValueError(f"torchutil: a model folded with f={self.f} needs a batch divisible "
                             f"by {self.f}, got {n} images")
        stacked = x.reshape(n // self.f, self.f * self.in_channels, *x.shape[2:])
        out = self.folded(stacked)
        return out.reshape(n, self.classes)

    def extra_repr(self) -> str:
        return f"f={self.f}, in_channels={self.in_channels}, classes={self.classes}"
