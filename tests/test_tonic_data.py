"""``--dataset shd|nmnist|dvsgesture --data-root DIR`` reads tonic's datasets (issue 29), tested on
small files this test writes in tonic's own layout (nothing is downloaded)."""

import sys
import urllib.error

import h5py
import numpy as np
import pytest

from tilesim.cli import main
from tilesim.errors import ConfigError
from tilesim.models.snn.training.data import NMNIST_SIZE, encode_nmnist_events, read_tonic

pytest.importorskip("tonic")


@pytest.fixture(autouse=True)
def no_download(monkeypatch):
    """A missing dataset fails as it does offline, whatever the network of the machine."""
    import tonic.dataset

    def refuse(self):
        raise urllib.error.URLError("no network in the tests")

    monkeypatch.setattr(tonic.dataset.Dataset, "download", refuse)


def _shd(root, n=6, seed=0):
    rng = np.random.default_rng(seed)
    d = root / "SHD"
    d.mkdir(parents=True)
    (d / "shd_train.h5.zip").write_bytes(b"")  # tonic checks that the archive is there, not its hash
    samples = [(np.sort(rng.random(30)).astype(np.float32) * 0.5, rng.integers(0, 700, 30)) for _ in range(n)]
    with h5py.File(d / "shd_train.h5", "w") as f:
        t = f.create_dataset("spikes/times", (n,), dtype=h5py.vlen_dtype(np.float32))
        u = f.create_dataset("spikes/units", (n,), dtype=h5py.vlen_dtype(np.uint16))
        for i, (ti, ui) in enumerate(samples):
            t[i], u[i] = ti, ui
        f["labels"] = np.arange(n) % 20
        f["extra/keys"] = np.array([b"k%d" % i for i in range(20)])
        f["extra/speaker"] = np.zeros(n, int)
    return samples


def test_shd_in_tonics_layout_is_read_as_tonic_reads_it(tmp_path):
    samples = _shd(tmp_path)
    ds = read_tonic("shd", tmp_path, limit=4)
    assert (ds.n_channels, ds.n_classes, len(ds)) == (700, 20, 4)
    for (ch, t_ms), (times_s, units) in zip(ds.samples, samples):
        order = np.argsort(times_s, kind="stable")
        assert np.array_equal(np.sort(ch), np.sort(units.astype(np.int32)))
        assert np.allclose(np.sort(t_ms), np.sort(times_s[order].astype(np.float64) * 1e3), atol=1e-3)
    assert ds.labels.tolist() == [0, 1, 2, 3]


def test_nmnist_in_tonics_layout(tmp_path):
    d = tmp_path / "NMNIST"
    (d / "Train").mkdir(parents=True)
    (d / "train.zip").write_bytes(b"")
    rng = np.random.default_rng(1)
    raw = {}
    for i in range(10_000):  # tonic wants its 10,000 files before it believes the archive was unpacked
        digit = i % 10
        folder = d / "Train" / str(digit)
        folder.mkdir(exist_ok=True)
        x, y, p = rng.integers(0, NMNIST_SIZE, 5), rng.integers(0, NMNIST_SIZE, 5), rng.integers(0, 2, 5)
        t = np.sort(rng.integers(0, 300_000, 5))
        (folder / f"{i:05d}.bin").write_bytes(encode_nmnist_events(x, y, p, t))
        raw[(digit, f"{i:05d}")] = (x, y, p)
    ds = read_tonic("nmnist", tmp_path, limit=3)
    assert (ds.n_channels, ds.n_classes, len(ds)) == (2 * NMNIST_SIZE**2, 10, 3)
    x, y, p = raw[(0, "00000")]  # tonic lists digit 0's files first, sorted
    assert sorted(ds.samples[0][0].tolist()) == sorted(((p * NMNIST_SIZE + y) * NMNIST_SIZE + x).tolist())


def test_dvsgesture_in_tonics_layout_is_pooled_to_48x48(tmp_path):
    d = tmp_path / "DVSGesture"
    (d / "ibmGestureTrain").mkdir(parents=True)
    (d / "ibmGestureTrain.tar.gz").write_bytes(b"")
    rng = np.random.default_rng(2)
    for user in range(10):
        folder = d / "ibmGestureTrain" / f"user{user + 1:02d}_fluorescent"
        folder.mkdir()
        for label in range(11):
            ev = np.stack([rng.integers(0, 128, 8), rng.integers(0, 128, 8), rng.integers(0, 2, 8),
                           np.sort(rng.integers(0, 1000, 8))], axis=1)  # fmt: skip
            np.save(folder / f"{label}.npy", ev.astype(np.float64))
    ds = read_tonic("dvsgesture", tmp_path, limit=5)
    assert (ds.n_channels, ds.n_classes, len(ds)) == (2 * 48 * 48, 11, 5)
    assert all(0 <= c.min() and c.max() < 4608 for c, _ in ds.samples)


def test_a_run_trains_on_tonics_shd(tmp_path, capsys):
    _shd(tmp_path, n=8)
    argv = ["run", "--dataset", "shd", "--data-root", str(tmp_path), "--layers", "700-64-20", "--caps", "32-8"]
    assert main([*argv, "--batch", "4", "--timesteps", "20", "--steps", "2", "--quiet"]) == 0
    assert "loss" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--dataset", "synthetic", "--layers", "700-64-20"], "must be one of shd, nmnist, dvsgesture with data_root"),
        (["--dataset", "shd", "--data", "x.h5", "--layers", "700-64-20"], "cannot be given with data"),
    ],
)
def test_bad_combinations_are_refused(tmp_path, capsys, argv, says):
    assert main(["run", "--data-root", str(tmp_path), *argv, "--steps", "1"]) == 2
    assert says in capsys.readouterr().err


def test_missing_data_and_missing_tonic_say_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="holds no SHD in tonic's layout and tonic could not download it"):
        read_tonic("shd", tmp_path / "empty", limit=2)
    import os

    import tonic.dataset

    def refuse_after_making_the_folder(self):  # what tonic's download does offline: the folder, then the error
        os.makedirs(self.location_on_system, exist_ok=True)
        raise urllib.error.URLError("no network in the tests")

    monkeypatch.setattr(tonic.dataset.Dataset, "download", refuse_after_making_the_folder)
    with pytest.raises(ConfigError, match="could not download it"):
        read_tonic("shd", tmp_path / "empty", limit=2)
    assert not (tmp_path / "empty").exists()  # issue 39: a refused download leaves no empty SHD/ behind
    (tmp_path / "mine").mkdir()
    with pytest.raises(ConfigError, match="could not download it"):
        read_tonic("shd", tmp_path / "mine", limit=2)
    assert (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())  # the user's folder stays
    monkeypatch.setitem(sys.modules, "tonic", None)
    with pytest.raises(ConfigError, match=r"needs tonic; pip install 'tilesim\[data\]'"):
        read_tonic("shd", tmp_path, limit=2)
