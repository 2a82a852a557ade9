"""`tilesim run --data FILE.npz` (issue 20: the help promised tonic .npz, the CLI refused it)."""

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.snn.commands.options import RunOptions
from tilesim.models.snn.commands.run import run_training
from tilesim.models.snn.training.data import read_events_npz

DTYPE = np.dtype([("x", np.int16), ("y", np.int16), ("p", np.int8), ("t", np.int64)])


def _write(path, n=12, W=4, H=4, P=2, classes=3, **over):
    rng = np.random.default_rng(0)
    parts, labels = [], []
    for i in range(n):
        k = 40
        ev = np.zeros(k, DTYPE)
        ev["x"], ev["y"], ev["p"] = rng.integers(0, W, k), rng.integers(0, H, k), rng.integers(0, P, k)
        ev["t"] = np.sort(rng.integers(0, 8000, k))  # µs: 8 time steps of 1 ms
        parts.append(ev)
        labels.append(i % classes)
    offsets = np.r_[0, np.cumsum([len(p) for p in parts])]
    d = dict(events=np.concatenate(parts), offsets=offsets, labels=np.array(labels), sensor_size=np.array([W, H, P]))
    d.update(over)
    np.savez(path, **d)
    return path


def test_run_trains_on_an_events_npz(tmp_path):
    p = _write(tmp_path / "ev.npz")
    ds = read_events_npz(p)
    assert (ds.n_channels, ds.n_classes, len(ds)) == (32, 3, 12)
    ch, t_ms = ds.samples[0]
    assert ch.max() < 32 and t_ms.max() < 8.0
    s = run_training(
        RunOptions(data=str(p), layers="32-16-3", caps="8-2", batch=4, timesteps=8, steps=1, memory_check="report")
    )
    assert np.isfinite(s.loss[0]) and s.predicted_step_s > 0


@pytest.mark.parametrize(
    "over,needle",
    [
        ({"offsets": np.array([0, 5])}, "offsets"),
        ({"labels": np.array([1, 2])}, "labels"),
        ({"sensor_size": np.array([4, 4])}, "sensor_size"),
    ],
)
def test_bad_npz_is_one_line(tmp_path, over, needle):
    p = _write(tmp_path / "bad.npz", **over)
    with pytest.raises(ConfigError, match=needle) as e:
        read_events_npz(p)
    assert "\n" not in str(e.value) and "numpy.savez" in str(e.value)
