"""torchutil.coded: the loaders on files written here in MNIST's IDX and CIFAR-10's pickle formats,
the encoders and decoders against closed forms, and CPU-sized training on the digits data set,
where both paradigms must beat the trivial baselines for k = 2 and 4."""
from __future__ import annotations

import gzip
import io
import os
import pickle
import struct

import numpy as np
import pytest
import torch
from torch import nn

from torchutil import coded
from torchutil.coded import codes

pytest.importorskip("sklearn", reason="the digits data set ships with scikit-learn (the coded extra)")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These models are tiny: one CPU thread trains them faster than several, and far faster
    than several fighting other processes for a busy machine's cores."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


# --- data ------------------------------------------------------------------------------------------


def write_idx(path: str, array: np.ndarray) -> None:
    """array (uint8) as an IDX file: magic 0x00 0x00 0x08 ndim, big-endian int32 dims, data."""
    raw = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()
    if path.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(raw)
    else:
        with open(path, "wb") as f:
            f.write(raw)


def write_mnist(folder: str, gz: bool, seed: int = 0, n_train: int = 30, n_test: int = 12) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    arrays = {"train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
              "train-labels-idx1-ubyte": (np.arange(n_train) % 10).astype(np.uint8),
              "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
              "t10k-labels-idx1-ubyte": (np.arange(n_test)[::-1] % 10).astype(np.uint8)}
    for name, array in arrays.items():
        write_idx(os.path.join(folder, name + (".gz" if gz else "")), array)
    return arrays


def write_cifar(folder: str, per_batch: int = 4) -> dict[str, tuple[np.ndarray, list[int]]]:
    rng = np.random.default_rng(1)
    os.makedirs(folder, exist_ok=True)
    batches = {}
    for i, name in enumerate([f"data_batch_{j}" for j in range(1, 6)] + ["test_batch"]):
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        labels = [(i + j) % 10 for j in range(per_batch)]
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump({b"batch_label": name.encode(), b"labels": labels, b"data": data,
                         b"filenames": [b"x.png"] * per_batch}, f)
        batches[name] = (data, labels)
    return batches


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_idx_reader_and_mnist_loader(tmp_path, gz):
    arrays = write_mnist(str(tmp_path), gz)
    for name, array in arrays.items():
        assert np.array_equal(coded.read_idx(tmp_path / (name + (".gz" if gz else ""))), array)
    data = coded.load_dataset("mnist", str(tmp_path))
    assert data.shape == (1, 28, 28) and data.classes == 10
    assert data.train_y.tolist() == arrays["train-labels-idx1-ubyte"].tolist()
    assert data.test_y.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    # standardized with the training set's mean and std: the raw pixels come back by an affine map
    raw = arrays["train-images-idx3-ubyte"].astype(np.float32) / 255
    mean, std = raw.mean(), raw.std(ddof=1)
    assert np.allclose(data.train_x[:, 0].numpy() * std + mean, raw, atol=1e-5)


def test_fashion_in_torchvision_layout(tmp_path):
    arrays = write_mnist(str(tmp_path / "FashionMNIST" / "raw"), gz=True, seed=3)
    data = coded.load_dataset("fashion", str(tmp_path))
    assert len(data.train_x) == len(arrays["train-labels-idx1-ubyte"]) and data.name == "fashion"


def test_cifar10_loader(tmp_path):
    batches = write_cifar(str(tmp_path / "cifar-10-batches-py"))
    images, labels = coded.read_cifar10_batch(tmp_path / "cifar-10-batches-py" / "data_batch_2")
    data, expected = batches["data_batch_2"]
    assert images.shape == (4, 3, 32, 32) and labels.tolist() == expected
    assert np.array_equal(images[1, 0].reshape(-1), data[1, :1024])  # the red plane comes first
    assert np.array_equal(images[1, 2].reshape(-1), data[1, 2048:])
    ds = coded.load_dataset("cifar10", str(tmp_path))
    assert ds.shape == (3, 32, 32) and len(ds.train_x) == 20 and len(ds.test_x) == 4
    assert ds.train_y.tolist() == [y for i in range(1, 6) for y in batches[f"data_batch_{i}"][1]]


class _Payload:
    """What a crafted batch holds: unpickling it calls os.system (the security report's case)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_cifar_batch_cannot_run_code(tmp_path):
    """A pickle whose __reduce__ runs a shell command is refused by name before anything runs;
    plain pickle.load runs it (the check that the payload is live)."""
    marker = tmp_path / "PWNED"
    batch = tmp_path / "data_batch_1"
    batch.write_bytes(pickle.dumps({b"data": _Payload(str(marker)), b"labels": [0]}, protocol=4))
    with pytest.raises(ValueError, match=r"data_batch_1 is not a CIFAR-10 python batch .*global posix\.system"):
        coded.read_cifar10_batch(batch)
    with pytest.raises(ValueError, match="global posix.system"):
        coded.load_dataset("cifar10", str(tmp_path))
    assert not marker.exists()
    pickle.loads(batch.read_bytes())  # the unrestricted loader runs the payload
    assert marker.exists()
    eval_call = b"\x80\x02cbuiltins\neval\nX\x05\x00\x00\x001 + 1\x85R."  # builtins.eval("1 + 1")
    (tmp_path / "evil").write_bytes(eval_call)
    assert pickle.loads(eval_call) == 2
    with pytest.raises(ValueError, match="global builtins.eval"):
        coded.read_cifar10_batch(tmp_path / "evil")


class _Py2Pickler(pickle._Pickler):
    """Writes bytes as Python 2 str (BINSTRING), as CIFAR-10's own batches were written."""

    dispatch = dict(pickle._Pickler.dispatch)

    def _save_py2_str(self, obj: bytes) -> None:
        self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = _save_py2_str


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar_batch_formats_still_read(tmp_path, protocol):
    """The restricted unpickler reads what the real batches hold (protocol 2, Python 2 strings,
    numpy 1's module names) and what numpy 2 writes at protocols 4 and 5."""
    data = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    batch = {b"batch_label": b"x", b"labels": [3, 7], b"data": data, b"filenames": [b"a.png", b"b.png"]}
    if protocol == 2:
        out = io.BytesIO()
        _Py2Pickler(out, protocol=2).dump(batch)
        raw = out.getvalue().replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
        assert b"numpy.core.multiarray\n_reconstruct" in raw and b"_codecs" not in raw
    else:
        raw = pickle.dumps(batch, protocol=protocol)
    (tmp_path / "b").write_bytes(raw)
    images, labels = coded.read_cifar10_batch(tmp_path / "b")
    assert np.array_equal(images.reshape(2, -1), data) and labels.tolist() == [3, 7]


def test_digits_split_is_seeded():
    a, b, c = coded.load_dataset("digits"), coded.load_dataset("digits"), coded.load_dataset("digits", seed=1)
    assert a.shape == (1, 8, 8) and len(a.train_x) + len(a.test_x) == 1797
    assert len(a.test_x) == round(0.2 * 1797)
    assert torch.equal(a.test_x, b.test_x) and torch.equal(a.train_y, b.train_y)
    assert not torch.equal(a.test_y, c.test_y)
    assert abs(float(a.train_x.mean())) < 1e-4 and float(a.train_x.std()) == pytest.approx(1, abs=1e-3)


@pytest.mark.parametrize("call,names", [
    (lambda d: coded.load_dataset("imagenet"), "'imagenet'"),
    (lambda d: coded.load_dataset("mnist"), "--data-dir"),
    (lambda d: coded.load_dataset("mnist", os.path.join(d, "absent")), "absent"),
    (lambda d: coded.load_dataset("mnist", d), "train-images-idx3-ubyte"),
    (lambda d: coded.load_dataset("cifar10", d), "data_batch_1"),
    (lambda d: coded.load_dataset("digits", d), "digits"),
])
def test_data_errors_name_the_problem(tmp_path, call, names):
    with pytest.raises(ValueError, match="torchutil.coded") as info:
        call(str(tmp_path))
    assert names in str(info.value)
    if "ubyte" in names or "batch" in names:
        assert str(tmp_path) in str(info.value)  # and the folder


def test_bad_files_are_refused(tmp_path):
    (tmp_path / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03" + struct.pack(">3I", 5, 28, 28) + b"x")
    with pytest.raises(ValueError, match="need 3920 bytes"):
        coded.read_idx(tmp_path / "train-images-idx3-ubyte")
    (tmp_path / "junk").write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(ValueError, match="not an IDX file"):
        coded.read_idx(tmp_path / "junk")
    with pytest.raises(ValueError, match="not a CIFAR-10 python batch"):
        coded.read_cifar10_batch(tmp_path / "junk")


# --- encoders, decoders, codes -----------------------------------------------------------------------


def test_k_and_encoder_are_checked():
    f = coded.build_base_model("mlp", (1, 8, 8))
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match=f"got {bad!r}"):
            coded.build_code("learned", bad, f, (1, 8, 8), 10)
    with pytest.raises(ValueError, match="k = 3"):
        coded.build_code("parity", 3, f, (1, 8, 8), 10, "concat")
    with pytest.raises(ValueError, match="'sum'"):
        coded.build_code("learned", 2, f, (1, 8, 8), 10, "sum")
    with pytest.raises(ValueError, match="'magic'"):
        coded.build_code("magic", 2, f, (1, 8, 8), 10)


def test_encoder_shapes():
    x = torch.randn(5, 4, 3, 8, 8)
    assert codes.MLPEncoder(4, (3, 8, 8))(x).shape == (5, 3, 8, 8)
    assert codes.ConvEncoder(4)(x).shape == (5, 3, 8, 8)
    assert torch.equal(codes.SumEncoder()(x), x.sum(1))
    # the conv encoder encodes each colour channel alike: the same images in another channel order
    # give the same outputs in that order
    enc = codes.ConvEncoder(4)
    assert torch.allclose(enc(x)[:, [2, 0, 1]], enc(x[:, :, [2, 0, 1]]), atol=1e-6)


def test_concat_encoder_places_downsampled_images():
    x = torch.randn(3, 4, 1, 8, 6)
    p = codes.ConcatEncoder(4)(x)
    assert p.shape == (3, 1, 8, 6)
    small = torch.nn.functional.avg_pool2d(x[:, 2], 2)
    assert torch.allclose(p[:, :, 4:, :3], small)  # the third image: bottom left quadrant
    x2 = torch.randn(3, 2, 1, 8, 6)
    p2 = codes.ConcatEncoder(2)(x2)
    assert torch.allclose(p2[..., 3:], torch.nn.functional.avg_pool2d(x2[:, 1], (1, 2)))


def test_parity_model_of_a_linear_model_reconstructs_exactly():
    """F linear without bias, F_P = F, P = sum: F_P(P) - sum of the others = F(X_i) exactly."""
    torch.manual_seed(0)
    f = nn.Sequential(nn.Flatten(), nn.Linear(64, 10, bias=False)).double()
    code = coded.build_code("parity", 3, f, (1, 8, 8), 10)
    x = torch.randn(7, 3, 1, 8, 8, dtype=torch.float64)
    outputs = f(x.flatten(0, 1)).view(7, 3, 10)
    assert torch.allclose(code.reconstruct_each(outputs, code.parity(x)), outputs, atol=1e-10)


def test_decoder_never_sees_the_erased_output():
    torch.manual_seed(0)
    f = coded.build_base_model("mlp", (1, 8, 8))
    code = coded.build_code("learned", 4, f, (1, 8, 8), 10)
    outputs, parity = torch.randn(6, 4, 10), torch.randn(6, 10)
    erased = torch.tensor([0, 1, 2, 3, 0, 1])
    changed = outputs.clone()
    changed[torch.arange(6), erased] = 1e6
    assert torch.equal(code.reconstruct(outputs, parity, erased), code.reconstruct(changed, parity, erased))
    assert code.reconstruct_each(outputs, parity).shape == (6, 4, 10)
    assert all(not p.requires_grad for p in f.parameters())  # a learned code freezes F
    assert {id(p) for p in code.trainable_parameters()}.isdisjoint(id(p) for p in f.parameters())


def test_base_models():
    assert coded.build_base_model("mlp", (1, 28, 28))(torch.randn(2, 1, 28, 28)).shape == (2, 10)
    r = coded.build_base_model("resnet18", (3, 32, 32))
    assert sum(isinstance(m, coded.models.BasicBlock) for m in r.modules()) == 8
    assert r(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    r3 = coded.build_base_model("resnet18_3stage", (1, 28, 28))
    assert sum(isinstance(m, coded.models.BasicBlock) for m in r3.modules()) == 6
    assert r3(torch.randn(2, 1, 28, 28)).shape == (2, 10)
    assert [m.out_features for m in coded.mlp(784) if isinstance(m, nn.Linear)] == [200, 100, 10]


# --- training on digits -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits():
    return coded.load_dataset("digits")


@pytest.fixture(scope="module")
def trained_f(digits):
    torch.manual_seed(0)
    f = coded.build_base_model("mlp", digits.shape)
    coded.train_base(f, digits, epochs=20)
    return f


def _fresh_f(trained_f, digits):
    """A copy of the trained F (a learned code freezes the F it is built on)."""
    f = coded.build_base_model("mlp", digits.shape)
    f.load_state_dict(trained_f.state_dict())
    return f


@pytest.mark.parametrize("paradigm,k,epochs", [("learned", 2, 30), ("learned", 4, 40), ("parity", 2, 15),
                                               ("parity", 4, 15)])
def test_codes_beat_the_trivial_baselines(digits, trained_f, paradigm, k, epochs):
    f = _fresh_f(trained_f, digits)
    torch.manual_seed(1)
    code = coded.build_code(paradigm, k, f, digits.shape, digits.classes)
    losses = coded.train_code(code, f, digits, epochs=epochs, loss="kl" if paradigm == "learned" else "mse")
    assert losses[-1] < 0.6 * losses[0]
    m = coded.evaluate(code, f, digits, passes=2)
    assert m.base_accuracy > 0.9
    assert m.reconstructions == 2 * (len(digits.test_x) // k * k)
    baselines = (m.most_frequent_reconstruction, m.parity_output_reconstruction)
    assert m.reconstruction_accuracy > max(baselines) + 0.15, m
    assert m.degraded_accuracy > m.most_frequent_degraded + 0.15, m
    assert m.degraded_accuracy <= m.base_accuracy + 0.05


@pytest.mark.parametrize("loss", coded.LOSSES)
def test_each_loss_trains(digits, trained_f, loss):
    f = _fresh_f(trained_f, digits)
    torch.manual_seed(2)
    code = coded.build_code("learned", 2, f, digits.shape, digits.classes)
    before = {n: p.clone() for n, p in f.named_parameters()}
    encoder = [p.clone() for p in code.encoder.parameters()]
    losses = coded.train_code(code, f, digits, epochs=6, loss=loss)
    assert losses[-1] < losses[0]
    # the encoder learned: its gradients come through the frozen F
    assert all(not torch.equal(p, e) for p, e in zip(code.encoder.parameters(), encoder))
    assert all(torch.equal(p, before[n]) for n, p in f.named_parameters())  # F stayed frozen


def test_reconstruction_loss_values():
    rec, out, y = torch.randn(3, 2, 10), torch.randn(3, 2, 10), torch.randint(0, 10, (3, 2))
    assert float(coded.reconstruction_loss(out, out, y, "kl")) == pytest.approx(0, abs=1e-6)
    assert float(coded.reconstruction_loss(rec, out, y, "mse")) == pytest.approx(float(((rec - out) ** 2).mean()))
    with pytest.raises(ValueError, match="'l1'"):
        coded.reconstruction_loss(rec, out, y, "l1")


@pytest.mark.cuda
def test_train_step_and_cost_on_cuda(digits):
    from torchutil.coded.cost import COMPONENTS, measure_cost

    torch.manual_seed(0)
    f = coded.build_base_model("mlp", digits.shape).cuda()
    coded.train_base(f, digits, epochs=1, device="cuda")
    code = coded.build_code("parity", 2, f, digits.shape, digits.classes).cuda()
    opt = coded.train.make_optimizer(code.trainable_parameters())
    loss = coded.code_epoch(code, f, opt, digits, epoch=0, seed=0, loss="mse", device="cuda")
    assert np.isfinite(loss)
    rows = measure_cost(code, f, digits.shape, digits.classes, batch=8, device="cuda")
    assert [r.component for r in rows] == list(COMPONENTS)
    assert all(r.device.startswith("cuda") and r.seconds > 0 for r in rows)
    assert rows[0].flops == rows[2].flops  # F_P has F's architecture
