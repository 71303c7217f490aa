"""Fashion-MNIST from Debian's dataset-fashion-mnist package: its folder is coded.data's default,
and its files match the data set's published description (Xiao, Rasul, Vollgraf, arXiv
1708.07747, and the zalandoresearch/fashion-mnist README: 60,000 training and 10,000 test
grey images of 28x28 in 10 balanced classes, 6,000 / 1,000 of each). The tests that read the
files are skipped, saying why, where the package is not installed."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from torchutil import coded
from torchutil.coded import data as coded_data

FOLDER = "/usr/share/datasets/fashion-mnist"
needs_package = pytest.mark.skipif(not os.path.isdir(FOLDER), reason=f"{FOLDER} is absent: Debian's "
                                   "dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)")


@needs_package
def test_the_debian_folder_is_the_default():
    assert FOLDER in coded.DEFAULT_DIRS["fashion"]
    assert coded.default_data_dir("fashion") == FOLDER
    assert coded.default_data_dir("mnist") is None and coded.default_data_dir("cifar10") is None


@needs_package
@pytest.mark.parametrize("split,n", [("train", 60_000), ("t10k", 10_000)])
def test_files_match_the_published_description(split, n):
    images = coded.read_idx(os.path.join(FOLDER, f"{split}-images-idx3-ubyte.gz"))
    labels = coded.read_idx(os.path.join(FOLDER, f"{split}-labels-idx1-ubyte.gz"))
    assert images.shape == (n, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (n,)
    assert np.bincount(labels, minlength=10).tolist() == [n // 10] * 10  # 6,000 / 1,000 per class


@needs_package
def test_load_dataset_needs_no_folder():
    data = coded.load_dataset("fashion")
    assert data.shape == (1, 28, 28) and data.classes == 10
    assert (len(data.train_x), len(data.test_x)) == (60_000, 10_000)
    assert abs(float(data.train_x.mean())) < 1e-3  # standardized with the training set's statistics


def test_a_missing_default_names_the_package_and_folders(monkeypatch, tmp_path):
    absent = str(tmp_path / "no-such-folder")
    monkeypatch.setitem(coded_data.DEFAULT_DIRS, "fashion", (absent,))
    with pytest.raises(ValueError, match="apt-get install dataset-fashion-mnist") as info:
        coded.load_dataset("fashion")
    assert absent in str(info.value) and "--data-dir" in str(info.value)
    with pytest.raises(ValueError, match="no system package ships it"):
        coded.load_dataset("cifar10")


@needs_package
def test_coded_train_on_fashion_without_data_dir(tmp_path, capsys):
    """`coded train --dataset fashion` as a user runs it after installing the package (one epoch
    each: the mechanics, not the accuracy the papers train for)."""
    from torchutil.studies.cli import main

    torch.set_num_threads(1)
    out = tmp_path / "run"
    status = main(["coded", "train", "--dataset", "fashion", "--paradigm", "parity", "--k", "3", "--base-epochs", "1",
                   "--epochs", "1", "--device", "cpu", "--no-progress", "--out", str(out)])
    assert status == 0
    record = json.loads((out / "metrics.json").read_text())
    assert record["config"]["dataset"] == "fashion" and record["config"]["data_dir"] is None
    m = record["metrics"]
    assert m["reconstructions"] == 10_000 // 3 * 3
    # One epoch of the MLP is already far above the trivial classifier's 10 %, and so is the code.
    assert m["base_accuracy"] > 0.7 and m["reconstruction_accuracy"] > m["most_frequent_reconstruction"] + 0.2
