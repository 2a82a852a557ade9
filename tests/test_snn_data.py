"""Datasets: binning with the input cap, synthetic generators, readers of real file formats."""

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.snn.training import data


def test_binning_by_hand():
    samples = [(np.array([3, 1, 3, 7, 2]), np.array([0.2, 0.9, 0.7, 1.5, 5.0]))]
    lst = data.events_to_input_list(samples, 3, 4, np.random.default_rng(0))
    assert lst.counts[:, 0, 0].tolist() == [2, 1, 0]  # duplicates merged; t = 5 ms dropped
    assert lst.ids[0, 0, :2].tolist() == [1, 3] and lst.ids[1, 0, 0] == 7
    lst = data.events_to_input_list(samples, 3, 4, np.random.default_rng(0), dt_ms=2.0)
    assert lst.ids[0, 0, :3].tolist() == [1, 3, 7]


def test_binning_caps_at_random_but_seeded():
    ch = np.arange(40)
    samples = [(ch, np.zeros(40))]
    a = data.events_to_input_list(samples, 1, 8, np.random.default_rng(5))
    b = data.events_to_input_list(samples, 1, 8, np.random.default_rng(5))
    c = data.events_to_input_list(samples, 1, 8, np.random.default_rng(6))
    assert a.counts[0, 0].tolist() == [8, 8]
    np.testing.assert_array_equal(a.ids, b.ids)
    assert not np.array_equal(a.ids, c.ids)
    assert (np.diff(a.ids[0, 0].astype(int)) > 0).all()
    with pytest.raises(ConfigError, match=r"sample 0 channels = \(0, 39\): must lie in \[0, 10\)"):
        data.events_to_input_list(samples, 1, 8, np.random.default_rng(0), n_channels=10)


@pytest.mark.parametrize(
    "fn, channels, classes, T, lo, hi",
    [
        (data.shd_like, 700, 20, 100, 4, 20),
        (data.nmnist_like, 2312, 10, 100, 5, 25),
        (data.dvsgesture_like, 4608, 11, 50, 25, 120),
    ],
)
def test_shaped_generators(fn, channels, classes, T, lo, hi):
    ds = fn(24, seed=0)
    assert (ds.n_channels, ds.n_classes, len(ds)) == (channels, classes, 24)
    rate = np.mean([s[0].size for s in ds.samples]) / T
    assert lo <= rate <= hi, rate
    for ch, tm in ds.samples:
        assert ch.min() >= 0 and ch.max() < channels and tm.min() >= 0 and tm.max() < T
    lst, y = ds.batch(np.arange(8), T, 32, np.random.default_rng(0))
    assert lst.ids.shape == (T, 8, 32) and y.shape == (8,)
    assert fn(24, seed=0).samples[3][0].tolist() == ds.samples[3][0].tolist()  # seeded


def test_synthetic_is_sized_from_layers_and_class_specific():
    ds = data.synthetic("50-30-3", 60, 20, seed=0)
    assert (ds.n_channels, ds.n_classes) == (50, 3)
    lst, y = ds.batch(np.arange(60), 20, 50, np.random.default_rng(0))
    dense = lst.to_dense(50).sum(axis=0).astype(float)  # [B, 50] channel counts
    means = np.stack([dense[y == c].mean(axis=0) for c in range(3)])
    same = np.mean([np.corrcoef(dense[i], means[y[i]])[0, 1] for i in range(60)])
    other = np.mean([np.corrcoef(dense[i], means[(y[i] + 1) % 3])[0, 1] for i in range(60)])
    assert same > other + 0.3


def test_batches_iterates_full_batches():
    ds = data.synthetic("10-5-2", 25, 8, seed=0)
    got = list(ds.batches(10, 8, 4, np.random.default_rng(0)))
    assert len(got) == 2 and got[0][0].ids.shape == (8, 10, 4)


def test_read_shd_hdf5(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "shd_tiny.h5"
    times = [np.array([0.0005, 0.0012, 0.0012], np.float16), np.array([0.003], np.float16)]
    units = [np.array([5, 699, 6], np.uint16), np.array([1], np.uint16)]
    with h5py.File(path, "w") as f:
        g = f.create_group("spikes")
        g.create_dataset("times", data=np.array(times, dtype=object), dtype=h5py.vlen_dtype(np.float16))
        g.create_dataset("units", data=np.array(units, dtype=object), dtype=h5py.vlen_dtype(np.uint16))
        f.create_dataset("labels", data=np.array([4, 19], np.uint16))
    ds = data.read_shd(path)
    assert (ds.n_channels, ds.n_classes, len(ds)) == (700, 20, 2)
    lst, y = ds.batch([0, 1], 4, 8, np.random.default_rng(0))
    assert y.tolist() == [4, 19]
    assert lst.ids[0, 0, 0] == 5 and lst.ids[1, 0, :2].tolist() == [6, 699]
    assert lst.ids[3, 1, 0] == 1 and lst.counts[3, 1, 0] == 1
    bad = tmp_path / "bad.h5"
    with h5py.File(bad, "w") as f:
        f.create_dataset("labels", data=np.zeros(1))
    with pytest.raises(ConfigError, match="dataset 'spikes/times' missing"):
        data.read_shd(bad)


def test_nmnist_40bit_roundtrip_and_folder(tmp_path):
    x, y, p, t = [3, 33, 0], [4, 0, 33], [1, 0, 1], [150, 70000, (1 << 23) - 1]
    raw = data.encode_nmnist_events(x, y, p, t)
    assert len(raw) == 15
    # byte layout of the first event: x, y, p<<7 | t[22:16], t[15:8], t[7:0]
    assert list(raw[:5]) == [3, 4, 0x80, 0, 150]
    assert [a.tolist() for a in data.decode_nmnist_events(raw)] == [x, y, p, t]
    for label in ("0", "7"):
        (tmp_path / label).mkdir()
        (tmp_path / label / "00001.bin").write_bytes(raw)
    ds = data.read_nmnist_folder(tmp_path)
    assert ds.n_channels == 2312 and ds.labels.tolist() == [0, 7]
    ch, tm = ds.samples[0]
    assert ch.tolist() == [(1 * 34 + 4) * 34 + 3, 33, (1 * 34 + 33) * 34 + 0]
    np.testing.assert_allclose(tm, [0.15, 70.0, ((1 << 23) - 1) / 1e3])
    with pytest.raises(ConfigError, match="must be a multiple of 5 bytes"):
        data.decode_nmnist_events(raw[:7])


def test_from_structured_tonic_events():
    dtype = np.dtype([("x", np.int16), ("y", np.int16), ("p", np.int8), ("t", np.int64)])
    ev = np.array([(127, 127, 1, 1000), (0, 0, 0, 2500), (64, 10, 1, 3000)], dtype=dtype)
    (ch, tm), n = data.from_structured(ev, (128, 128, 2), spatial_factor=0.375)
    assert n == 4608
    assert ch.tolist() == [(48 + 47) * 48 + 47, 0, (48 + 3) * 48 + 24]
    np.testing.assert_allclose(tm, [1.0, 2.5, 3.0])
    with pytest.raises(ConfigError, match="need field 'p'"):
        data.from_structured(np.zeros(2, [("x", int), ("y", int), ("t", int)]), (4, 4, 2))


def _shd_file(path, n, labels):
    import h5py

    with h5py.File(path, "w") as f:
        t = f.create_dataset("spikes/times", (n,), dtype=h5py.vlen_dtype(np.float32))
        u = f.create_dataset("spikes/units", (n,), dtype=h5py.vlen_dtype(np.uint16))
        for i in range(n):
            t[i] = np.array([0.001, 0.002], np.float32)
            u[i] = np.array([1, 2], np.uint16)
        f["labels"] = labels
    return path


@pytest.mark.parametrize(
    "case, match",
    [
        ("few", r"--batch = 8: the data file has 3 samples; give --batch <= 3"),
        ("float", r"labels = \[0.5, 1.2, 0.0\].*whole class numbers.*store the class index"),
        ("negative", r"labels = \[-1, 1, 0\].*whole class numbers"),
        ("empty", r"is not a readable HDF5 file.*give an SHD/SSC .h5 file"),
        ("corrupt", r"is not a readable HDF5 file.*give an SHD/SSC .h5 file"),
    ],
)
def test_bad_data_files_are_one_line_errors(tmp_path, capsys, case, match):
    """Issue 19: fewer samples than the batch raised StopIteration, float labels were truncated,
    a corrupt or empty HDF5 gave no file-specific message."""
    import re

    from tilesim.cli import main

    p = tmp_path / f"{case}.h5"
    if case == "few":
        _shd_file(p, 3, np.array([0, 1, 2]))
    elif case == "float":
        _shd_file(p, 8, np.array([0.5, 1.2, 0, 1, 2, 0, 1, 2]))
    elif case == "negative":
        _shd_file(p, 8, np.array([-1, 1, 0, 1, 2, 0, 1, 2]))
    elif case == "empty":
        p.write_bytes(b"")
    else:
        p.write_bytes(b"\x89HDF\r\n\x1a\n" + b"garbage" * 10)
    rc = main(
        [
            "run",
            "--data",
            str(p),
            "--layers",
            "700-64-20",
            "--caps",
            "8-2",
            "--batch",
            "8",
            "--timesteps",
            "5",
            "--steps",
            "1",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and re.search(match, err[0]), err
