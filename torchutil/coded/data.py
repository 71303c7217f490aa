"""The data sets of learned coded computation, read from local files only (nothing is
downloaded).

- digits: scikit-learn's handwritten digits (1,797 8x8 grey images, 10 classes), read from the
  CSV that ships inside scikit-learn; split into train and test by a seeded permutation, the
  same for every run with the same seed. The default: it runs on any machine with scikit-learn.
- mnist, fashion: the IDX files of MNIST / Fashion-MNIST (train-images-idx3-ubyte,
  train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each plain or .gz)
  in a folder the user has, or in its torchvision layout (MNIST/raw, FashionMNIST/raw).
  Fashion-MNIST is also a Debian package (`apt-get install dataset-fashion-mnist` puts the four
  .gz files in /usr/share/datasets/fashion-mnist), which is looked in when no folder is given
  (DEFAULT_DIRS). No package was found that ships MNIST or CIFAR-10: those need a folder.
- cifar10: CIFAR-10's python batches (data_batch_1..5, test_batch: pickled dicts of b"data",
  a uint8 [N, 3072] array, and b"labels") in the folder or in its cifar-10-batches-py. They are
  read by a restricted unpickler (_BatchUnpickler) that builds only numpy arrays and dtypes, so a
  crafted batch cannot run code: any other global it names is refused, by name.

Images come back as float32 [N, C, H, W], standardized per channel with the training set's
mean and standard deviation; labels as int64 [N].
"""
from __future__ import annotations

import gzip
import os
import pickle
import struct
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["CLASSES", "DATASETS", "DEFAULT_DIRS", "SHAPES", "Dataset", "default_data_dir", "load_dataset",
           "read_cifar10_batch", "read_idx"]

DATASETS = ("digits", "mnist", "fashion", "cifar10")
CLASSES = 10  # every one of them has ten classes
# The shape (C, H, W) of one image of each, known before any file is read.
SHAPES = {"digits": (1, 8, 8), "mnist": (1, 28, 28), "fashion": (1, 28, 28), "cifar10": (3, 32, 32)}
# Folders looked in when no data_dir is given: where a system package puts the files.
DEFAULT_DIRS = {"fashion": ("/usr/share/datasets/fashion-mnist",), "mnist": (), "cifar10": ()}
_PACKAGES = {"fashion": "apt-get install dataset-fashion-mnist"}
# Where torchvision's downloaders put the same files, looked at after the folder itself.
_SUBFOLDERS = {"mnist": ("MNIST/raw",), "fashion": ("FashionMNIST/raw",), "cifar10": ("cifar-10-batches-py",)}
_IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
              "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
_CIFAR_FILES = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
# IDX type codes (the third byte of the magic number) -> big-endian numpy dtype.
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def _error(message: str) -> ValueError:
    return ValueError(f"torchutil.coded: {message}")


@dataclass
class Dataset:
    """A data set split into train and test: x float32 [N, C, H, W] (standardized), y int64 [N]."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one image, (C, H, W)."""
        return tuple(self.train_x.shape[1:])

    def most_frequent_class(self) -> int:
        """The most frequent training label (the trivial classifier's answer)."""
        return int(torch.bincount(self.train_y, minlength=self.classes).argmax())


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """An IDX file (MNIST's format; gzip-compressed when the name ends in .gz) as a numpy array."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise _error(f"{path} is not an IDX file (magic number {data[:4].hex() or 'missing'})")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise _error(f"{path}: IDX header cut short ({len(data)} bytes)")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    dtype = np.dtype(_IDX_TYPES[data[2]])
    expected = int(np.prod(dims)) * dtype.itemsize
    if len(data) - header != expected:
        raise _error(f"{path}: IDX dimensions {list(dims)} need {expected} bytes of data, the file has "
                     f"{len(data) - header}")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)


class _BatchUnpickler(pickle.Unpickler):
    """pickle.Unpickler that resolves only the globals a CIFAR-10 batch names: numpy's array
    reconstruction (protocols 0-4: _reconstruct, ndarray; 5: _frombuffer) and dtype, under
    numpy 1's module names (CIFAR-10's own files) and numpy 2's, and _codecs.encode of latin-1
    (protocol-2 bytes written by Python 3). Any other global (os.system,
    builtins.eval, ...) is refused, so nothing in the file runs: the dicts, lists, strings and
    numbers of a batch need no global at all."""

    ALLOWED = frozenset((module, name) for package in ("numpy.core", "numpy._core")
                        for module, name in ((f"{package}.multiarray", "_reconstruct"),
                                             (f"{package}.numeric", "_frombuffer"))) | {
        ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module: str, name: str) -> object:
        if (module, name) == ("_codecs", "encode"):
            # Python 3 writes bytes at protocol 2 as _codecs.encode(text, "latin1"); only that
            # encoding is let through, so the global builds bytes and nothing else.
            return _latin1_bytes
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it names the global {module}.{name}, which a CIFAR-10 batch does "
                                         f"not hold (only numpy arrays are read, nothing is run)")
        return super().find_class(module, name)


def _latin1_bytes(text: str, encoding: str = "utf-8") -> bytes:
    """_codecs.encode as a protocol-2 pickle of bytes calls it: (str, "latin1") only."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"it calls _codecs.encode with {type(text).__name__}, {encoding!r}, not "
                                     f"as pickled bytes do (str, 'latin1')")
    return text.encode("latin1")


def _batch_arrays(batch: object, path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """(data, labels) of an unpickled batch, each checked for type and shape before anything
    converts it: data a uint8 ndarray [N, 3072] (a nested list, a float array or a str would be
    walked or cast by np.asarray: 2**30 leaves shared through the pickle's memo kept a core busy
    for minutes, floats became arbitrary bytes); labels N ints in 0..CLASSES - 1, a list (as
    CIFAR-10's files hold them) or an integer ndarray."""
    def bad(what: str) -> ValueError:
        return _error(f"{path} is not a CIFAR-10 python batch: {what}")

    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise bad("no b'data' and b'labels'")
    data, labels = batch[b"data"], batch[b"labels"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        shown = (f"a {data.dtype} array of shape {list(data.shape)}" if isinstance(data, np.ndarray)
                 else f"a {type(data).__name__}")
        raise bad(f"b'data' is {shown}, not a uint8 array [N, 3072]")
    n = len(data)
    if isinstance(labels, np.ndarray):
        if labels.ndim != 1 or labels.dtype.kind not in "iu" or len(labels) != n:
            raise bad(f"b'labels' is a {labels.dtype} array of shape {list(labels.shape)}, not {n} integers")
        outside = np.flatnonzero((labels < 0) | (labels >= CLASSES))
        wrong = labels[outside[0]].item() if outside.size else None
    elif isinstance(labels, list):
        if len(labels) != n:
            raise bad(f"b'labels' holds {len(labels)} labels for {n} images")
        wrong = next((v for v in labels if type(v) is not int or not 0 <= v < CLASSES), None)
    else:
        raise bad(f"b'labels' is a {type(labels).__name__}, not a list of {n} integers")
    if wrong is not None:  # named by its type, or as an int: a crafted object is never repr'd (walked)
        shown = (f"a {type(wrong).__name__}" if type(wrong) is not int else
                 str(wrong) if wrong.bit_length() < 64 else f"an int of {wrong.bit_length()} bits")
        raise bad(f"a label is {shown}, not an int in 0..{CLASSES - 1}")
    return data, np.array(labels, dtype=np.int64)


def read_cifar10_batch(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 python batch: (uint8 images [N, 3, 32, 32], int64 labels [N]).

    The batches are pickles, read by a restricted unpickler: a file that names anything but
    numpy's array and dtype (a crafted pickle that would run code) is refused with a ValueError
    naming the global, and nothing in it runs. What it holds is checked before it is converted
    (_batch_arrays)."""
    with open(path, "rb") as f:
        try:
            batch = _BatchUnpickler(f, encoding="bytes").load()
        except Exception as e:  # a pickle can fail in many ways; all mean "not a CIFAR batch"
            raise _error(f"{path} is not a CIFAR-10 python batch ({type(e).__name__}: {e})") from None
    images, labels = _batch_arrays(batch, path)
    return images.reshape(-1, 3, 32, 32), labels


def default_data_dir(name: str) -> str | None:
    """The first folder of DEFAULT_DIRS[name] that exists, or None."""
    return next((d for d in DEFAULT_DIRS.get(name, ()) if os.path.isdir(d)), None)


def _find(name: str, data_dir: str, filename: str, gz: bool) -> str:
    folders = [data_dir] + [os.path.join(data_dir, sub) for sub in _SUBFOLDERS[name]]
    for folder in folders:
        for candidate in (filename, filename + ".gz") if gz else (filename,):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                return path
    wanted = f"{filename}[.gz]" if gz else filename
    raise _error(f"{name}: no {wanted} in {data_dir} (looked in {', '.join(folders)}); put the "
                 f"{name} files there (nothing is downloaded)")


def _load_idx(name: str, data_dir: str) -> tuple[np.ndarray, ...]:
    arrays = []
    for split in ("train", "test"):
        images_file, labels_file = _IDX_FILES[split]
        images = read_idx(_find(name, data_dir, images_file, gz=True))
        labels = read_idx(_find(name, data_dir, labels_file, gz=True)).astype(np.int64)
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise _error(f"{name} {split}: expected images [N, H, W] and N labels, got "
                         f"{list(images.shape)} and {list(labels.shape)}")
        arrays += [images[:, None].astype(np.float32) / 255.0, labels]
    return tuple(arrays)


def _load_cifar10(data_dir: str) -> tuple[np.ndarray, ...]:
    arrays = []
    for split in ("train", "test"):
        parts = [read_cifar10_batch(_find("cifar10", data_dir, f, gz=False)) for f in _CIFAR_FILES[split]]
        arrays += [np.concatenate([p[0] for p in parts]).astype(np.float32) / 255.0,
                   np.concatenate([p[1] for p in parts])]
    return tuple(arrays)


def _load_digits(seed: int, test_fraction: float) -> tuple[np.ndarray, ...]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise _error("the digits data set comes with scikit-learn: pip install scikit-learn "
                     "(torchutil's `coded` extra)") from None
    digits = load_digits()  # reads the CSV inside scikit-learn; no download
    x = digits.images.astype(np.float32)[:, None] / 16.0  # pixel values 0..16
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(test_fraction * len(x)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def load_dataset(name: str = "digits", data_dir: str | None = None, *, seed: int = 0,
                 test_fraction: float = 0.2) -> Dataset:
    """The data set `name` (one of DATASETS).

    digits needs no data_dir (it ships with scikit-learn) and splits its 1,797 images into
    train and test by a permutation seeded with `seed` (test_fraction of them for test); mnist,
    fashion and cifar10 read their files from data_dir (default: default_data_dir(name), the
    Debian package's folder for fashion) and use their own train/test split.
    Errors (ValueError) name the data set, the missing file and the folder.
    """
    if name not in DATASETS:
        raise _error(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    if name == "digits":
        if data_dir is not None:
            raise _error(f"the digits data set ships with scikit-learn and reads no folder; got data_dir "
                         f"{data_dir!r} (use it with {', '.join(DATASETS[1:])})")
        if not 0 < test_fraction < 1:
            raise _error(f"test_fraction must be in (0, 1), got {test_fraction}")
        arrays = _load_digits(seed, test_fraction)
    else:
        if data_dir is None:
            data_dir = default_data_dir(name)
        if data_dir is None:
            looked = f" (looked in {', '.join(DEFAULT_DIRS[name])})" if DEFAULT_DIRS[name] else ""
            package = (f"install it with `{_PACKAGES[name]}`, or " if name in _PACKAGES
                       else "no system package ships it: ")
            raise _error(f"{name}: no data folder given and none found{looked}; {package}pass data_dir "
                         f"(--data-dir on the command line) naming a folder with its files; nothing is downloaded")
        if not os.path.isdir(data_dir):
            raise _error(f"{name}: data folder {data_dir} does not exist")
        arrays = _load_cifar10(data_dir) if name == "cifar10" else _load_idx(name, data_dir)
    train_x, train_y, test_x, test_y = (torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)
    mean = train_x.mean(dim=(0, 2, 3), keepdim=True)
    std = train_x.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    for y in (train_y, test_y):
        if len(y) == 0 or int(y.min()) < 0 or int(y.max()) >= CLASSES:
            raise _error(f"{name}: labels must be 0..{CLASSES - 1}, got {len(y)} labels in "
                         f"[{int(y.min()) if len(y) else '-'}, {int(y.max()) if len(y) else '-'}]")
    return Dataset(name, (train_x - mean) / std, train_y, (test_x - mean) / std, test_y, CLASSES)
