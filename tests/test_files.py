"""torchutil._files.atomic_open, which every output goes through: a symbolic link planted beside
an output (at the old fixed `OUT.tmp` name, or at any name the writer could draw) is never
followed, two writers of one path never share a temporary file, and a failure leaves the earlier
file or none. The commands of the security report (profile --json, a coded-train checkpoint, nas
correlate) are run against a planted link end to end."""
from __future__ import annotations

import json
import os
import stat
import threading

import pytest
from cli_status import status_and_err
from full_disk import fill

import torchutil
from torchutil import _files
from torchutil._files import atomic_open, write_json

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")


def _victim(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("the user's file")
    return victim


def _only_outputs(folder, *names):
    """The folder holds `names` (plus the victim and its planted link) and no temporary file."""
    left = sorted(n for n in os.listdir(folder) if n.endswith(".tmp") and not os.path.islink(folder / n))
    assert left == [], left
    for name in names:
        assert (folder / name).is_file() and not (folder / name).is_symlink()


def test_a_link_at_the_old_fixed_name_is_not_followed(tmp_path):
    victim = _victim(tmp_path)
    os.symlink(victim, tmp_path / "out.json.tmp")
    write_json(tmp_path / "out.json", {"a": 1})
    assert victim.read_text() == "the user's file"
    assert json.loads((tmp_path / "out.json").read_text()) == {"a": 1}
    assert os.path.islink(tmp_path / "out.json.tmp")  # left alone: not ours
    _only_outputs(tmp_path, "out.json")


def test_a_link_at_any_name_the_writer_draws_is_not_followed(tmp_path, monkeypatch):
    """The random name is forced to one where a link waits: the exclusive create refuses it and
    the writer draws again."""
    victim = _victim(tmp_path)
    draws = iter(["0" * 16, "1" * 16])
    monkeypatch.setattr(_files.secrets, "token_hex", lambda n: next(draws))
    os.symlink(victim, tmp_path / f"out.csv.{'0' * 16}.tmp")
    with atomic_open(tmp_path / "out.csv", "w", newline="") as f:
        assert (tmp_path / f"out.csv.{'1' * 16}.tmp").is_file()  # the second draw, created anew
        f.write("x,y\n")
    assert victim.read_text() == "the user's file"
    assert (tmp_path / "out.csv").read_text() == "x,y\n"
    _only_outputs(tmp_path, "out.csv")


def test_two_writers_of_one_path_do_not_share_a_temporary_file(tmp_path):
    path = tmp_path / "checkpoint.pt"
    barrier = threading.Barrier(2)
    temporary = []

    def write(tag: bytes) -> None:
        with atomic_open(path, "wb") as f:
            barrier.wait()  # both temporary files are open at once
            if tag == b"a":
                temporary.extend(n for n in os.listdir(tmp_path) if n.endswith(".tmp"))
            barrier.wait()
            f.write(tag * 100_000)

    threads = [threading.Thread(target=write, args=(tag,)) for tag in (b"a", b"b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(temporary) == 2  # one each
    assert path.read_bytes() in (b"a" * 100_000, b"b" * 100_000)  # one writer's whole file
    _only_outputs(tmp_path, "checkpoint.pt")


def test_permissions_and_failures(tmp_path, monkeypatch):
    umask = os.umask(0o022)
    try:
        write_json(tmp_path / "a.json", [1])
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "a.json").st_mode) == 0o644  # as open() would make it
    (tmp_path / "kept.json").write_text("earlier")
    with pytest.raises(RuntimeError), atomic_open(tmp_path / "kept.json") as f:
        f.write("half")
        raise RuntimeError("the writer failed")
    fill(monkeypatch, _files, room=3)
    with pytest.raises(OSError) as info:
        write_json(tmp_path / "kept.json", {"a long": "value"})
    assert info.value.filename == str(tmp_path / "kept.json")  # the output, not the temporary file
    assert (tmp_path / "kept.json").read_text() == "earlier"
    _only_outputs(tmp_path, "a.json", "kept.json")
    with pytest.raises(ValueError, match="mode 'w' or 'wb', got 'a'"), atomic_open(tmp_path / "x", "a"):
        pass


def test_library_writers_do_not_follow_a_planted_link(tmp_path):
    """ProfileResult.ops_to_csv / kernels_to_csv write through atomic_open too."""
    import torch

    result = torchutil.profile(torch.nn.Linear(4, 2), torch.randn(2, 4), warmup=0, iters=1)
    victim = _victim(tmp_path)
    for name in ("ops.csv", "kernels.csv"):
        os.symlink(victim, tmp_path / f"{name}.tmp")
    result.ops_to_csv(str(tmp_path / "ops.csv"))
    result.kernels_to_csv(str(tmp_path / "kernels.csv"))
    assert victim.read_text() == "the user's file"
    assert (tmp_path / "ops.csv").read_text().startswith("op,")


def test_commands_do_not_follow_a_planted_link(tmp_path, capsys):
    """The security report's three cases: profile --json, coded train's checkpoint.pt.tmp, nas
    correlate's correlations.json.tmp."""
    victim = _victim(tmp_path)
    os.symlink(victim, tmp_path / "p.json.tmp")
    assert status_and_err(["profile", "squeezenet1_1", "--device", "cpu", "--batch", "1", "--image-size", "32",
                           "--warmup", "0", "--iters", "1", "--json", str(tmp_path / "p.json")], capsys)[0] == 0
    (tmp_path / "c").mkdir()
    os.symlink(victim, tmp_path / "c" / "correlations.json.tmp")
    assert status_and_err(["nas", "correlate", "--db", "builtin:h200-auto", "--no-plots",
                           "--out", str(tmp_path / "c")], capsys)[0] == 0
    pytest.importorskip("sklearn", reason="the digits data set ships with scikit-learn (the coded extra)")
    (tmp_path / "t").mkdir()
    os.symlink(victim, tmp_path / "t" / "checkpoint.pt.tmp")
    assert status_and_err(["coded", "train", "--device", "cpu", "--no-progress", "--base-epochs", "1", "--epochs",
                           "1", "--out", str(tmp_path / "t")], capsys)[0] == 0
    assert victim.read_text() == "the user's file"
    _only_outputs(tmp_path, "p.json")
    _only_outputs(tmp_path / "c", "correlations.json")
    _only_outputs(tmp_path / "t", "checkpoint.pt", "metrics.json")
