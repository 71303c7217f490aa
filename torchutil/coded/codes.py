"""Codes over k queries with one parity query (r = 1): encoders, decoders and the `Code` that
joins them to a parity model.

A group is k queries X_1..X_k, images [G, k, C, H, W] for G groups. The encoder makes one
parity query P [G, C, H, W]; the parity model runs it, F_P(P) [G, classes]; when one output
F(X_i) is unavailable, the decoder reconstructs it from the k outputs with the erased one
zeroed, [G, k, classes], and F_P(P).

- Learned codes (Kosaian, Rashmi, Venkataraman, arXiv 1806.01259): a trained encoder
  (MLPEncoder, ConvEncoder), the deployed model F itself as the parity model (frozen), a
  trained decoder (MLPDecoder).
- Parity models (ParM, SOSP 2019): a fixed encoder (SumEncoder, or ConcatEncoder for k = 2, 4),
  a trained parity model F_P of F's architecture, and the SubtractionDecoder
  F_P(P) - sum of the available F(X_i).
"""
from __future__ import annotations

import copy
import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ENCODERS", "PARADIGMS", "Code", "ConcatEncoder", "ConvEncoder", "MLPDecoder", "MLPEncoder",
           "SubtractionDecoder", "SumEncoder", "build_code", "check_k"]

PARADIGMS = ("learned", "parity")
# Encoders each paradigm can use; the first is its default.
ENCODERS = {"learned": ("mlp", "conv"), "parity": ("sum", "concat")}


def _error(message: str) -> ValueError:
    return ValueError(f"torchutil.coded: {message}")


def check_k(k: int, encoder: str | None = None) -> None:
    """ValueError naming k unless it is a group size the encoder takes (k >= 2; 2 or 4 for concat)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise _error(f"k (queries per group) must be an integer >= 2, got {k!r}")
    if encoder == "concat" and k not in (2, 4):
        raise _error(f"the concat encoder downsamples k = 2 or 4 images into one, got k = {k}")


class MLPEncoder(nn.Module):
    """The k images flattened and concatenated (k*d), Linear k*d -> k*d, ReLU, Linear k*d -> d,
    shaped as one image."""

    def __init__(self, k: int, shape: Sequence[int]) -> None:
        super().__init__()
        check_k(k)
        self.shape = tuple(shape)
        d = math.prod(self.shape)
        self.net = nn.Sequential(nn.Linear(k * d, k * d), nn.ReLU(), nn.Linear(k * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1)).view(x.shape[0], *self.shape)


class ConvEncoder(nn.Module):
    """The learned-code paper's dilated-convolution encoder: the k images of a group as k
    channels, 3x3 convolutions of dilations 1, 1, 2, 4, 8, 1 with 20*k channels and ReLU, then
    a 1x1 convolution to one channel. Colour images are encoded channel by channel with the
    same weights."""

    DILATIONS = (1, 1, 2, 4, 8, 1)

    def __init__(self, k: int) -> None:
        super().__init__()
        check_k(k)
        width, layers, c_in = 20 * k, [], k
        for d in self.DILATIONS:
            layers += [nn.Conv2d(c_in, width, 3, padding=d, dilation=d), nn.ReLU()]
            c_in = width
        layers.append(nn.Conv2d(width, 1, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g, k, c, h, w = x.shape
        per_channel = x.transpose(1, 2).reshape(g * c, k, h, w)
        return self.net(per_channel).view(g, c, h, w)


class SumEncoder(nn.Module):
    """ParM's addition encoder: P = X_1 + ... + X_k."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


class ConcatEncoder(nn.Module):
    """ParM's downsample-and-concatenate encoder: for k = 2 each image is averaged over pairs of
    columns and the two halves are placed side by side; for k = 4 each is downsampled 2x2 and
    the four fill the quadrants. The parity query has one image's shape (H and W even)."""

    def __init__(self, k: int) -> None:
        super().__init__()
        check_k(k, "concat")
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g, k, c, h, w = x.shape
        if h % 2 or w % 2:
            raise _error(f"the concat encoder needs even image sides, got {h}x{w}")
        if k == 2:
            small = F.avg_pool2d(x.reshape(g * k, c, h, w), (1, 2)).view(g, k, c, h, w // 2)
            return torch.cat([small[:, 0], small[:, 1]], dim=-1)
        small = F.avg_pool2d(x.reshape(g * k, c, h, w), 2).view(g, k, c, h // 2, w // 2)
        top = torch.cat([small[:, 0], small[:, 1]], dim=-1)
        bottom = torch.cat([small[:, 2], small[:, 3]], dim=-1)
        return torch.cat([top, bottom], dim=-2)


class MLPDecoder(nn.Module):
    """The learned decoder: the k outputs (erased one zeroed) and the parity output, (k+1)*C
    values, through Linear (k+1)*C -> (k+1)*C, ReLU, -> k*C, ReLU, -> k*C; the erased query's
    C of the k*C are its reconstruction."""

    def __init__(self, k: int, classes: int) -> None:
        super().__init__()
        check_k(k)
        n = (k + 1) * classes
        self.net = nn.Sequential(nn.Linear(n, n), nn.ReLU(), nn.Linear(n, k * classes), nn.ReLU(),
                                 nn.Linear(k * classes, k * classes))

    def forward(self, masked: torch.Tensor, parity: torch.Tensor, erased: torch.Tensor) -> torch.Tensor:
        g, k, c = masked.shape
        out = self.net(torch.cat([masked, parity[:, None]], dim=1).flatten(1)).view(g, k, c)
        return out[torch.arange(g, device=out.device), erased]


class SubtractionDecoder(nn.Module):
    """ParM's decoder: F_P(P) minus the sum of the available outputs (the erased one is zero)."""

    def forward(self, masked: torch.Tensor, parity: torch.Tensor, erased: torch.Tensor) -> torch.Tensor:
        return parity - masked.sum(dim=1)


class Code(nn.Module):
    """k queries, one parity query: encoder, parity model and decoder.

    parity(x): x images [G, k, C, H, W] -> the parity model's output on the encoded query,
        [G, classes].
    reconstruct(outputs, parity, erased): outputs [G, k, classes] (the erased one's value is
        ignored: it is zeroed), parity [G, classes], erased int64 [G] -> [G, classes].
    With frozen_parity (learned codes: the parity model is F), the parity model stays in eval
    mode and takes no gradient, but gradients flow through it to the encoder.
    """

    def __init__(self, k: int, encoder: nn.Module, parity_model: nn.Module, decoder: nn.Module,
                 *, frozen_parity: bool) -> None:
        super().__init__()
        check_k(k)
        self.k, self.frozen_parity = k, frozen_parity
        self.encoder, self.parity_model, self.decoder = encoder, parity_model, decoder
        if frozen_parity:
            parity_model.requires_grad_(False)
            parity_model.eval()

    def train(self, mode: bool = True) -> "Code":
        super().train(mode)
        if self.frozen_parity:
            self.parity_model.eval()
        return self

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 5 or x.shape[1] != self.k:
            raise _error(f"expected a group of images [G, {self.k}, C, H, W], got {list(x.shape)}")
        return self.encoder(x)

    def parity(self, x: torch.Tensor) -> torch.Tensor:
        return self.parity_model(self.encode(x))

    def reconstruct(self, outputs: torch.Tensor, parity: torch.Tensor, erased: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(outputs.shape[0], device=outputs.device)
        masked = outputs.clone()
        masked[rows, erased] = 0
        return self.decoder(masked, parity, erased)

    def reconstruct_each(self, outputs: torch.Tensor, parity: torch.Tensor) -> torch.Tensor:
        """The reconstruction of every one of the k outputs, each erased in turn: [G, k, classes]."""
        g = outputs.shape[0]
        return torch.stack([self.reconstruct(outputs, parity, torch.full((g,), i, dtype=torch.long,
                                                                         device=outputs.device))
                            for i in range(self.k)], dim=1)


def build_code(paradigm: str, k: int, base_model: nn.Module, shape: Sequence[int], classes: int,
               encoder: str | None = None) -> Code:
    """The code of `paradigm` ("learned" or "parity") for base model F = base_model on images of
    `shape` (C, H, W).

    learned: encoder "mlp" (default) or "conv", F itself as the (frozen) parity model, the MLP
        decoder. parity: encoder "sum" (default) or "concat", a parity model F_P of F's
        architecture started from a copy of F's weights, the subtraction decoder.
    """
    if paradigm not in PARADIGMS:
        raise _error(f"unknown paradigm {paradigm!r}; choose from {', '.join(PARADIGMS)}")
    encoder = encoder or ENCODERS[paradigm][0]
    if encoder not in ENCODERS[paradigm]:
        raise _error(f"the {paradigm} paradigm takes encoder {' or '.join(ENCODERS[paradigm])}, got {encoder!r}")
    check_k(k, encoder)
    if paradigm == "learned":
        enc: nn.Module = MLPEncoder(k, shape) if encoder == "mlp" else ConvEncoder(k)
        return Code(k, enc, base_model, MLPDecoder(k, classes), frozen_parity=True)
    enc = SumEncoder() if encoder == "sum" else ConcatEncoder(k)
    parity_model = copy.deepcopy(base_model).requires_grad_(True)
    return Code(k, enc, parity_model, SubtractionDecoder(), frozen_parity=False)
