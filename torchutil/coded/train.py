"""Training: the base model F, then the code with F frozen.

Every epoch draws its order from a generator seeded with (seed, epoch), so an epoch run after a
resume is the epoch an uninterrupted run would have run. Adam, lr 1e-3, weight decay 1e-5 (the
papers' settings) unless told otherwise.

Code training (both paradigms): the training set is shuffled and cut into groups of k queries;
for every group, every one of the k outputs is erased in turn and reconstructed from the other
k-1 outputs of F and the parity output. The loss compares the reconstructions with
- "kl": softmax(F(X_i)), as KL(softmax(F(X_i)) || softmax(reconstruction));
- "mse": F(X_i) itself (for ParM's subtraction decoder this is exactly ParM's loss, the mean
  squared error of F_P(P) to the sum of the F(X_i): the reconstruction's error is that
  difference);
- "xent": the label y_i (cross-entropy).
"""
from __future__ import annotations

from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from torchutil.coded.codes import Code
from torchutil.coded.data import Dataset

__all__ = ["LOSSES", "base_epoch", "code_epoch", "epoch_generator", "groups", "make_optimizer",
           "reconstruction_loss", "train_base", "train_code"]

LOSSES = ("kl", "mse", "xent")

EpochCallback = Callable[[int, float], None]


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """The generator of one epoch's order: the same for the same (seed, epoch)."""
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def make_optimizer(params: list[nn.Parameter], lr: float = 1e-3, weight_decay: float = 1e-5) -> torch.optim.Adam:
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)


def groups(n: int, k: int, per_batch: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Indices of n samples shuffled and cut into groups of k: batches of [<= per_batch, k]
    (the n mod k samples left over sit this epoch out)."""
    order = torch.randperm(n, generator=generator)
    usable = n // k * k
    yield from order[:usable].view(-1, k).split(per_batch)


def reconstruction_loss(reconstructed: torch.Tensor, outputs: torch.Tensor, labels: torch.Tensor,
                        loss: str) -> torch.Tensor:
    """The loss of reconstructions [G, k, C] against F's outputs [G, k, C] or labels [G, k]."""
    if loss == "kl":
        return F.kl_div(F.log_softmax(reconstructed.flatten(0, 1), -1), F.softmax(outputs.flatten(0, 1), -1),
                        reduction="batchmean")
    if loss == "mse":
        return F.mse_loss(reconstructed, outputs)
    if loss == "xent":
        return F.cross_entropy(reconstructed.flatten(0, 1), labels.flatten())
    raise ValueError(f"torchutil.coded: unknown loss {loss!r}; choose from {', '.join(LOSSES)}")


def base_epoch(model: nn.Module, optimizer: torch.optim.Optimizer, data: Dataset, *, epoch: int, seed: int,
               batch_size: int = 64, device: torch.device | str = "cpu") -> float:
    """One epoch of cross-entropy training of F; returns the mean loss."""
    model.train()
    total, count = 0.0, 0
    for idx in torch.randperm(len(data.train_x), generator=epoch_generator(seed, epoch)).split(batch_size):
        x, y = data.train_x[idx].to(device), data.train_y[idx].to(device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total, count = total + loss.item() * len(idx), count + len(idx)
    return total / count


def code_epoch(code: Code, base_model: nn.Module, optimizer: torch.optim.Optimizer, data: Dataset, *,
               epoch: int, seed: int, loss: str, groups_per_batch: int = 64,
               device: torch.device | str = "cpu") -> float:
    """One epoch of erasure-masked code training (F frozen); returns the mean loss."""
    if loss not in LOSSES:
        raise ValueError(f"torchutil.coded: unknown loss {loss!r}; choose from {', '.join(LOSSES)}")
    code.train()
    base_model.eval()
    total, count = 0.0, 0
    for idx in groups(len(data.train_x), code.k, groups_per_batch, epoch_generator(seed, epoch)):
        x, y = data.train_x[idx].to(device), data.train_y[idx].to(device)  # [G, k, C, H, W], [G, k]
        with torch.no_grad():
            outputs = base_model(x.flatten(0, 1)).view(*idx.shape, -1)
        value = reconstruction_loss(code.reconstruct_each(outputs, code.parity(x)), outputs, y, loss)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        total, count = total + value.item() * len(idx), count + len(idx)
    return total / count


def _epochs(epochs: int, run_epoch: Callable[[int], float], on_epoch: EpochCallback | None) -> list[float]:
    losses = []
    for epoch in range(epochs):
        losses.append(run_epoch(epoch))
        if on_epoch:
            on_epoch(epoch, losses[-1])
    return losses


def train_base(model: nn.Module, data: Dataset, *, epochs: int, seed: int = 0, batch_size: int = 64,
               lr: float = 1e-3, weight_decay: float = 1e-5, device: torch.device | str = "cpu",
               on_epoch: EpochCallback | None = None) -> list[float]:
    """Trains F for `epochs` epochs; the mean loss of each. on_epoch(epoch, loss) after each."""
    optimizer = make_optimizer(list(model.parameters()), lr, weight_decay)
    return _epochs(epochs, lambda epoch: base_epoch(model, optimizer, data, epoch=epoch, seed=seed,
                                                    batch_size=batch_size, device=device), on_epoch)


def train_code(code: Code, base_model: nn.Module, data: Dataset, *, epochs: int, loss: str, seed: int = 0,
               groups_per_batch: int = 64, lr: float = 1e-3, weight_decay: float = 1e-5,
               device: torch.device | str = "cpu", on_epoch: EpochCallback | None = None) -> list[float]:
    """Trains the code's encoder and decoder (learned) or parity model (parity) with F frozen;
    build the code after F is trained (a learned code freezes F)."""
    optimizer = make_optimizer(code.trainable_parameters(), lr, weight_decay)
    return _epochs(epochs, lambda epoch: code_epoch(code, base_model, optimizer, data, epoch=epoch, seed=seed,
                                                    loss=loss, groups_per_batch=groups_per_batch, device=device),
                   on_epoch)
