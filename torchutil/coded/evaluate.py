"""The two metrics of learned coded computation, over erased outputs only, and the trivial
baselines they must beat.

The test set is shuffled (seeded) and cut into groups of k; in every group each of the k outputs
is erased in turn and reconstructed, so every test query is reconstructed once per pass.
- reconstruction accuracy: the reconstruction's argmax equals F's argmax on that query;
- degraded-mode accuracy: the reconstruction's argmax equals the label.
Baselines, scored the same way: the most frequent training class as the "reconstruction", and
the parity output returned unchanged as the reconstruction. The base model's own test accuracy
is the ceiling of degraded-mode accuracy as F's argmax is of reconstruction accuracy.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from torchutil.coded.codes import Code
from torchutil.coded.data import Dataset
from torchutil.coded.train import epoch_generator, groups

__all__ = ["CodedMetrics", "base_accuracy", "evaluate"]


@dataclass
class CodedMetrics:
    """Accuracies (fractions) over `reconstructions` erased outputs of the test set."""

    k: int
    reconstructions: int
    reconstruction_accuracy: float
    degraded_accuracy: float
    base_accuracy: float
    most_frequent_reconstruction: float
    most_frequent_degraded: float
    parity_output_reconstruction: float
    parity_output_degraded: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@torch.no_grad()
def base_accuracy(model: nn.Module, data: Dataset, *, batch_size: int = 1024,
                  device: torch.device | str = "cpu") -> float:
    """F's accuracy on the test set."""
    model.eval()
    correct = sum(int((model(x.to(device)).argmax(-1).cpu() == y).sum())
                  for x, y in zip(data.test_x.split(batch_size), data.test_y.split(batch_size)))
    return correct / len(data.test_y)


@torch.no_grad()
def evaluate(code: Code, base_model: nn.Module, data: Dataset, *, seed: int = 0, passes: int = 1,
             groups_per_batch: int = 256, device: torch.device | str = "cpu") -> CodedMetrics:
    """Both metrics and the baselines over `passes` seeded groupings of the test set."""
    if passes < 1:
        raise ValueError(f"torchutil.coded: passes must be >= 1, got {passes}")
    code.eval()
    base_model.eval()
    frequent = data.most_frequent_class()
    hits = torch.zeros(6, dtype=torch.long)
    n = 0
    for p in range(passes):
        for idx in groups(len(data.test_x), code.k, groups_per_batch, epoch_generator(seed, -1 - p)):
            x, y = data.test_x[idx].to(device), data.test_y[idx]
            outputs = base_model(x.flatten(0, 1)).view(*idx.shape, -1)
            parity = code.parity(x)
            wanted = outputs.argmax(-1).cpu()  # F's prediction of each query
            guess = code.reconstruct_each(outputs, parity).argmax(-1).cpu()
            unchanged = parity.argmax(-1).cpu()[:, None].expand_as(y)
            for i, predicted in enumerate((guess, torch.full_like(y, frequent), unchanged)):
                hits[2 * i] += int((predicted == wanted).sum())
                hits[2 * i + 1] += int((predicted == y).sum())
            n += y.numel()
    if n == 0:
        raise ValueError(f"torchutil.coded: the test set ({len(data.test_x)} images) holds no group of k = {code.k}")
    rates = (hits.double() / n).tolist()
    return CodedMetrics(k=code.k, reconstructions=n, reconstruction_accuracy=rates[0], degraded_accuracy=rates[1],
                        base_accuracy=base_accuracy(base_model, data, device=device),
                        most_frequent_reconstruction=rates[2], most_frequent_degraded=rates[3],
                        parity_output_reconstruction=rates[4], parity_output_degraded=rates[5])
