"""Event datasets binned into sparse input lists (never downloads anything).

A dataset is a list of samples, each a pair ``(channels int32 [E], times_ms float64 [E])``,
plus integer labels. :func:`events_to_input_list` bins a batch into the layer-0 input list:
bin ``t`` holds the *unique* channels with an event in ``[t·dt, (t+1)·dt)`` for
``t < timesteps``; when a bin has more than ``input_cap`` channels a uniformly random subset
is kept (seeded ``numpy.random.Generator``, as the paper's ``events_to_sparse_tensors``);
ids are stored ascending with a single count.

Synthetic generators (class-specific spatio-temporal patterns with jitter and noise):
:func:`synthetic` (sized from a layer string), :func:`shd_like` (700 channels, 20 classes),
:func:`nmnist_like` (2×34×34 = 2312, 10 classes), :func:`dvsgesture_like` (2×48×48 = 4608, 11
classes). Readers: :func:`read_shd` (SHD/SSC HDF5), :func:`read_nmnist_bin` /
:func:`read_nmnist_folder` (40-bit N-MNIST events), :func:`from_structured` (tonic-style
structured arrays with fields x, y, p, t). Channel of a camera event = ``p·H·W + y·W + x``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.io import regular_file
from tilesim.models.snn.kernels.spikes import SpikeList


@dataclass(frozen=True)
class EventDataset:
    """Event samples with labels.

    Attributes
    ----------
    name : str
    n_channels, n_classes : int
    samples : tuple of (np.ndarray, np.ndarray)
        Per sample ``(channels int32, times_ms float64)``.
    labels : np.ndarray
        int64 ``[n_samples]``.
    """

    name: str
    n_channels: int
    n_classes: int
    samples: tuple
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.samples)

    def batch(self, indices, timesteps: int, input_cap: int, rng: np.random.Generator, dt_ms: float = 1.0):
        """``(SpikeList [T, B, input_cap], labels [B])`` of the samples ``indices``."""
        idx = np.asarray(indices, np.int64)
        lst = events_to_input_list([self.samples[i] for i in idx], timesteps, input_cap, rng, dt_ms, self.n_channels)
        return lst, self.labels[idx]

    def batches(
        self,
        batch_size: int,
        timesteps: int,
        input_cap: int,
        rng: np.random.Generator,
        dt_ms: float = 1.0,
        shuffle: bool = True,
    ):
        """Iterate over full batches of one epoch (the last partial batch is dropped)."""
        order = rng.permutation(len(self)) if shuffle else np.arange(len(self))
        for s in range(0, len(self) - batch_size + 1, batch_size):
            yield self.batch(order[s : s + batch_size], timesteps, input_cap, rng, dt_ms)

    def endless_batches(self, batch_size: int, timesteps: int, input_cap: int, rng: np.random.Generator):
        """:meth:`batches` epoch after epoch, each drawn from ``rng`` when the previous one ends (as a
        training loop takes them); ends only if an epoch holds no full batch."""
        while True:
            got = False
            for item in self.batches(batch_size, timesteps, input_cap, rng):
                got = True
                yield item
            if not got:
                return


def events_to_input_list(
    samples, timesteps: int, input_cap: int, rng: np.random.Generator, dt_ms: float = 1.0, n_channels: int | None = None
) -> SpikeList:
    """Bin event samples into the layer-0 input list ``[T, B, input_cap]`` (see module doc)."""
    require(timesteps >= 1, "timesteps", timesteps, "must be >= 1")
    require(input_cap >= 1, "input_cap", input_cap, "must be >= 1")
    require(dt_ms > 0, "dt_ms", dt_ms, "must be > 0")
    B = len(samples)
    ids = np.zeros((timesteps, B, input_cap), np.uint32)
    counts = np.zeros((timesteps, B, 2), np.int32)
    for b, (ch, times) in enumerate(samples):
        ch = np.asarray(ch, np.int64)
        times = np.asarray(times, np.float64)
        require(
            ch.shape == times.shape,
            f"sample {b} shapes",
            (ch.shape, times.shape),
            "channels and times must have the same length",
        )
        if n_channels is not None and ch.size:
            require(
                ch.min() >= 0 and ch.max() < n_channels,
                f"sample {b} channels",
                (int(ch.min()), int(ch.max())),
                f"must lie in [0, {n_channels})",
            )
        inside = (times >= 0) & (times < timesteps * dt_ms)  # NaN is outside: nothing huge or NaN is cast
        bins = np.floor(times[inside] / dt_ms).astype(np.int64)
        ok = bins < timesteps
        bins, ch = bins[ok], ch[inside][ok]
        width = int(ch.max()) + 1 if ch.size else 1
        keys = np.unique(bins * width + ch)
        bins, ch = keys // width, keys % width
        starts = np.searchsorted(bins, np.arange(timesteps))
        ends = np.searchsorted(bins, np.arange(timesteps), side="right")
        for t in np.nonzero(ends > starts)[0]:
            sel = ch[starts[t] : ends[t]]
            if sel.size > input_cap:
                sel = np.sort(rng.choice(sel, size=input_cap, replace=False))
            ids[t, b, : sel.size] = sel
            counts[t, b, :] = sel.size
    return SpikeList(ids, counts)


def input_at_cap(timesteps: int, batch: int, n_channels: int, input_cap: int, rng: np.random.Generator) -> SpikeList:
    """The most input drive the authors' loader can deliver: ``input_cap`` distinct channels, drawn
    uniformly, in every time bin of every sample (``[T, B, input_cap]``, ids ascending).

    ``events_to_sparse_tensors`` (``benchmarking/nmnist_util.py``) keeps at most ``sparse_size`` unique
    events per 1 ms bin, so no real SHD sample (``--sparse_size_inp=48`` in ``runfile_multi_ipu.sh``)
    drives the first layer harder than this: an upper bound of the natural activity, whatever SHD's rate
    per channel and bin is."""
    require(0 < input_cap <= n_channels, "input_cap", input_cap, f"must be in [1, {n_channels}]")
    ids = np.zeros((timesteps, batch, input_cap), np.uint32)
    for t in range(timesteps):
        for b in range(batch):
            ids[t, b] = np.sort(rng.choice(n_channels, input_cap, replace=False))
    counts = np.full((timesteps, batch, 2), input_cap, np.int32)
    return SpikeList(ids, counts)


def from_first_event(ds: EventDataset) -> EventDataset:
    """``ds`` with every sample's times shifted so that its first event is at 0 ms, as the authors' loader
    bins them (``events_to_sparse_tensors``, ``benchmarking/nmnist_util.py``: ``t_start = times[0]``, bins
    ``[t_start + t·Δt, t_start + (t+1)·Δt)``): a T-step window then holds the first T ms *of the
    utterance*, not of the recording. Empty samples stay empty."""
    samples = tuple(
        (ch, np.asarray(tm, np.float64) - float(np.min(tm))) if len(tm) else (ch, tm) for ch, tm in ds.samples
    )
    return EventDataset(ds.name, ds.n_channels, ds.n_classes, samples, ds.labels)


# --------------------------------------------------------------------------------------
# synthetic generators
# --------------------------------------------------------------------------------------


def _template_dataset(
    name,
    n_channels,
    n_classes,
    n_samples,
    duration_ms,
    rng,
    template_events,
    keep_prob,
    jitter_ms,
    noise_per_ms,
    channel_jitter=0,
):
    """Samples = a class template (channels, times) with dropped events, time jitter,
    optional channel jitter, and uniform background noise (``noise_per_ms`` events/ms)."""
    labels = rng.integers(0, n_classes, n_samples)
    samples = []
    for y in labels:
        ch, tm = template_events[y]
        keep = rng.random(ch.size) < keep_prob
        ch = ch[keep]
        tm = tm[keep] + rng.normal(0.0, jitter_ms, ch.size)
        if channel_jitter:
            ch = np.clip(ch + rng.integers(-channel_jitter, channel_jitter + 1, ch.size), 0, n_channels - 1)
        n_noise = rng.poisson(noise_per_ms * duration_ms)
        ch = np.concatenate([ch, rng.integers(0, n_channels, n_noise)])
        tm = np.concatenate([tm, rng.uniform(0, duration_ms, n_noise)])
        ok = (tm >= 0) & (tm < duration_ms)
        order = np.argsort(tm[ok], kind="stable")
        samples.append((ch[ok][order].astype(np.int32), tm[ok][order]))
    return EventDataset(name, n_channels, n_classes, tuple(samples), labels.astype(np.int64))


#: spikes per active template channel and ms of the synthetic task: with 20 % active channels,
#: 1 % of all channels fire per 1 ms step, the order of SHD's ≈ 10 events/ms on 700 channels (1.4 %)
SYNTHETIC_CHANNEL_RATE = 0.05


def synthetic(
    layers,
    n_samples: int,
    timesteps: int,
    seed: int = 0,
    active_fraction: float = 0.2,
    spikes_per_channel: int | None = None,
    keep_prob: float = 0.9,
    jitter_ms: float = 1.0,
    noise_per_ms: float | None = None,
) -> EventDataset:
    """A learnable task sized from a layer string ``"N0-…-C"``: every class has a template in
    which a random ``active_fraction`` of the N0 channels fire ``spikes_per_channel`` times at
    class-specific times in ``[0, timesteps)`` ms; samples drop events (``keep_prob``), jitter
    them (Gaussian, ``jitter_ms``) and add uniform noise (default 2 % of the template rate).

    ``spikes_per_channel`` defaults to ``max(1, round(SYNTHETIC_CHANNEL_RATE · timesteps))`` (2 at
    T = 40, 5 at T = 100), so the input drive per time step — what decides whether the first
    layer fires — does not fall as T grows."""
    from tilesim.models.snn.training.network import (
        parse_layers,  # Numba kernels load only when they run (start-up time)
    )

    sizes = parse_layers(layers)
    n_ch, n_cls = sizes[0], sizes[-1]
    require(n_samples >= 1, "n_samples", n_samples, "must be >= 1")
    require(0 < active_fraction <= 1, "active_fraction", active_fraction, "must be in (0, 1]")
    if spikes_per_channel is None:
        spikes_per_channel = max(1, round(SYNTHETIC_CHANNEL_RATE * timesteps))
    require(spikes_per_channel >= 1, "spikes_per_channel", spikes_per_channel, "must be >= 1")
    rng = np.random.default_rng(seed)
    templates = []
    for _ in range(n_cls):
        active = rng.choice(n_ch, max(1, int(active_fraction * n_ch)), replace=False)
        ch = np.repeat(active, spikes_per_channel)
        tm = rng.uniform(0, timesteps, ch.size)
        templates.append((ch, tm))
    if noise_per_ms is None:
        noise_per_ms = 0.02 * templates[0][0].size / timesteps
    return _template_dataset(
        "synthetic", n_ch, n_cls, n_samples, float(timesteps), rng, templates, keep_prob, jitter_ms, noise_per_ms
    )


def shd_like(n_samples: int, seed: int = 0, duration_ms: float = 100.0, events_per_ms: float = 10.0) -> EventDataset:
    """SHD-shaped data: 700 cochlear channels, 20 classes, ≈10 events/ms (SHD averages about
    8–10 k spikes per ~1 s utterance). Each class is 3 "formant" bands whose centre channels
    sweep on class-specific straight lines; events scatter ±8 channels around a band."""
    rng = np.random.default_rng(seed)
    n_ch, n_cls = 700, 20
    templates = []
    for _ in range(n_cls):
        n_ev = rng.poisson(0.9 * events_per_ms * duration_ms)
        tm = rng.uniform(0, duration_ms, n_ev)
        band = rng.integers(0, 3, n_ev)
        start = rng.uniform(50, 650, 3)
        end = np.clip(start + rng.uniform(-250, 250, 3), 20, 680)
        centre = start[band] + (end[band] - start[band]) * tm / duration_ms
        ch = np.clip(np.round(centre + rng.normal(0, 8, n_ev)), 0, n_ch - 1).astype(np.int64)
        templates.append((ch, tm))
    return _template_dataset(
        "shd_like", n_ch, n_cls, n_samples, duration_ms, rng, templates, 0.85, 2.0, 0.1 * events_per_ms
    )


def _camera_templates(rng, n_cls, size, duration_ms, events_per_ms, shape_fn, path_fn):
    templates = []
    for c in range(n_cls):
        px, py = shape_fn(c)
        n_ev = rng.poisson(0.9 * events_per_ms * duration_ms)
        tm = np.sort(rng.uniform(0, duration_ms, n_ev))
        k = rng.integers(0, px.size, n_ev)
        dx, dy, pol = path_fn(c, tm)
        x = np.clip(np.round(px[k] + dx), 0, size - 1).astype(np.int64)
        y = np.clip(np.round(py[k] + dy), 0, size - 1).astype(np.int64)
        templates.append(((pol * size + y) * size + x, tm))
    return templates


def nmnist_like(n_samples: int, seed: int = 0, duration_ms: float = 100.0, events_per_ms: float = 15.0) -> EventDataset:
    """N-MNIST-shaped data: 2×34×34 = 2312 channels, 10 classes, ≈15 events/ms (N-MNIST has
    about 4–5 k events per 300 ms sample). Each class is a random-walk "digit" stroke of ~60
    pixels moved by the three triangular saccades of the N-MNIST recording; polarity follows
    the horizontal motion direction."""
    rng = np.random.default_rng(seed)
    size, n_cls = 34, 10
    shapes = []
    for _ in range(n_cls):
        pts = np.cumsum(rng.integers(-1, 2, (60, 2)), axis=0) + rng.integers(10, 24, 2)
        shapes.append((np.clip(pts[:, 0], 3, 30), np.clip(pts[:, 1], 3, 30)))

    def path(c, tm):
        phase = (tm / duration_ms * 3.0) % 1.0
        seg = np.minimum((tm / duration_ms * 3.0).astype(np.int64), 2)
        ramp = np.where(phase < 0.5, phase, 1.0 - phase) * 6.0
        dx = np.where(seg == 0, ramp, np.where(seg == 1, -ramp, ramp))
        dy = np.where(seg == 2, -ramp, ramp * (seg == 0))
        velocity = np.where(phase < 0.5, 1, -1) * np.where(seg == 1, -1, 1)
        return dx, dy, (velocity > 0).astype(np.int64)

    templates = _camera_templates(rng, n_cls, size, duration_ms, events_per_ms, lambda c: shapes[c], path)
    return _template_dataset(
        "nmnist_like", 2 * size * size, n_cls, n_samples, duration_ms, rng, templates, 0.85, 1.0, 0.05 * events_per_ms
    )


def dvsgesture_like(
    n_samples: int, seed: int = 0, duration_ms: float = 50.0, events_per_ms: float = 60.0
) -> EventDataset:
    """DVSGesture-shaped data: 2×48×48 = 4608 channels (128×128 × 0.375), 11 classes,
    ≈60 events/ms. Each class is a "hand" blob on a class-specific circular or linear path
    (centre, radius, angular speed, direction); polarity alternates with the motion phase."""
    rng = np.random.default_rng(seed)
    size, n_cls = 48, 11
    params = [
        (rng.uniform(14, 34, 2), rng.uniform(4, 12), rng.uniform(0.05, 0.3) * rng.choice([-1, 1]), rng.integers(0, 2))
        for _ in range(n_cls)
    ]
    ang = rng.uniform(0, 2 * np.pi, 40)
    rad = rng.uniform(0, 4, 40)
    blob = (rad * np.cos(ang), rad * np.sin(ang))

    def path(c, tm):
        centre, radius, omega, linear = params[c]
        phi = omega * tm
        if linear:
            dx, dy = centre[0] + radius * np.sin(phi), centre[1] + 0.0 * phi
        else:
            dx, dy = centre[0] + radius * np.cos(phi), centre[1] + radius * np.sin(phi)
        return dx, dy, (np.cos(phi) > 0).astype(np.int64)

    templates = _camera_templates(rng, n_cls, size, duration_ms, events_per_ms, lambda c: blob, path)
    return _template_dataset(
        "dvsgesture_like",
        2 * size * size,
        n_cls,
        n_samples,
        duration_ms,
        rng,
        templates,
        0.85,
        1.0,
        0.05 * events_per_ms,
    )


# --------------------------------------------------------------------------------------
# readers of real files
# --------------------------------------------------------------------------------------


#: the most input channels (or classes) a data file may name: channels are stored as int32
MAX_CHANNELS = 2**31 - 1
#: host bytes per byte of an events .npz member or N-MNIST file while it is read and binned: the
#: structured events, their float64 and int64 field copies and the per-sample (int32, float64) pairs
READ_BYTES_PER_FILE_BYTE = 8.0


def _check_read_memory(what: str, nbytes: float, fix: str) -> None:
    """Refuse reading ``nbytes`` of data (times :data:`READ_BYTES_PER_FILE_BYTE`) beyond the host's
    memory limit, before anything is loaded (:func:`tilesim.running.limits.check_memory`)."""
    from tilesim.running.limits import check_memory  # loaded only when a data file is read

    check_memory(what, READ_BYTES_PER_FILE_BYTE * nbytes, fix)


def _numeric(a, where: str, fix: str, integer: bool = False) -> np.ndarray:
    """``a`` as an array if its values are numbers (integers where ``integer``) and all finite; else a
    :class:`ConfigError` naming ``where``."""
    a = np.asarray(a)
    kinds = "iub" if integer else "iubf"
    if a.dtype.kind not in kinds:
        need = "integers" if integer else "numbers"
        raise ConfigError(config_message(where, f"dtype {a.dtype}", f"must hold {need}", fix))
    if a.dtype.kind == "f" and a.size and not np.all(np.isfinite(a)):
        bad = a.ravel()[~np.isfinite(a.ravel())][0]
        raise ConfigError(config_message(where, float(bad), "must be finite", fix))
    return a


def whole_labels(raw, where: str) -> np.ndarray:
    """Labels as int64: integers, or floats with whole values, all >= 0; anything else (0.5, -1,
    NaN, text) is a :class:`ConfigError` naming ``where`` (labels are never truncated)."""
    a = np.asarray(raw)
    ok = a.dtype.kind in "iub" or (
        a.dtype.kind == "f" and bool(np.all(np.isfinite(a))) and bool(np.all(a == np.round(a)))
    )
    if not ok or (a.size and (a.min() < 0 or a.max() >= MAX_CHANNELS)):
        bad = a.ravel()[:3].tolist() if a.size else []
        raise ConfigError(
            f"{where} labels = {bad}...: must be whole class numbers in [0, {MAX_CHANNELS:,}) (dtype {a.dtype}); "
            "store the class index of every sample as an integer"
        )
    return a.astype(np.int64)


def read_shd(path, n_channels: int = 700, n_classes: int | None = None, limit: int | None = None) -> EventDataset:
    """SHD / SSC HDF5 file (``spikes/times`` in seconds, ``spikes/units``, ``labels``).

    Raises
    ------
    ConfigError
        If the file lacks one of those datasets.
    """
    import h5py  # h5py loads only where used (start-up time)

    fix = "give an SHD/SSC .h5 file"
    name = f"--data {os.path.basename(str(path))}"
    regular_file(path, "--data", fix)  # a FIFO or device is never opened
    try:
        f = h5py.File(path, "r")
    except OSError as exc:  # empty, truncated or not HDF5 at all
        raise ConfigError(
            f"--data = {str(path)!r}: is not a readable HDF5 file ({str(exc)[:80]}); give an SHD/SSC .h5 file"
        ) from None
    with f:
        for key in ("spikes/times", "spikes/units", "labels"):
            if key not in f:
                raise ConfigError(
                    f"{path}: dataset {key!r} missing: an SHD/SSC file has "
                    "spikes/times, spikes/units and labels; give an SHD/SSC .h5 file"
                )
            if not isinstance(f[key], h5py.Dataset) or f[key].ndim != 1:
                shape = getattr(f[key], "shape", "a group")
                raise ConfigError(config_message(f"{name}: {key}", shape, "must be one entry per sample (1-D)", fix))
        times, units = f["spikes/times"], f["spikes/units"]
        n = len(f["labels"]) if limit is None else min(limit, len(f["labels"]))
        if min(len(times), len(units)) < n:
            raise ConfigError(
                config_message(
                    f"{name}: spikes/times, spikes/units",
                    (len(times), len(units)),
                    f"must have the {n} labels' samples",
                    fix,
                )
            )
        _check_read_memory(name, 8.0 * n, "give fewer samples")
        labels = whole_labels(f["labels"][:n], f"{name}:")
        samples = tuple(_shd_sample(units[i], times[i], f"{name}: sample {i}", fix) for i in range(n))
    n_classes = int(labels.max()) + 1 if n_classes is None and n else (n_classes or 0)
    return EventDataset(os.path.basename(str(path)), n_channels, n_classes, samples, labels)


def _shd_sample(units, times_s, where: str, fix: str) -> tuple:
    """``(channels int32, times_ms float64)`` of one SHD sample: integer units in ``[0, 2^31)``,
    finite times, as many of each (else a :class:`ConfigError` naming ``where``)."""
    u = _numeric(units, f"{where} units", fix, integer=True)
    t = _numeric(times_s, f"{where} times", fix)
    if u.shape != t.shape or u.ndim > 1:
        raise ConfigError(config_message(f"{where} shapes", (u.shape, t.shape), "must be equal lists of events", fix))
    if u.size and (u.min() < 0 or u.max() >= MAX_CHANNELS):
        raise ConfigError(
            config_message(f"{where} units", int(u.min() if u.min() < 0 else u.max()), "out of range", fix)
        )
    return u.astype(np.int32), t.astype(np.float64) * 1e3


NMNIST_SIZE = 34


def decode_nmnist_events(raw: bytes):
    """``(x, y, p, t_us)`` from the N-MNIST 40-bit event format: per event 5 bytes —
    x (8 bit), y (8 bit), polarity (bit 7 of byte 2), timestamp (23 bits: the low 7 bits of
    byte 2, bytes 3 and 4, big-endian, microseconds)."""
    require(len(raw) % 5 == 0, "N-MNIST file length", len(raw), "must be a multiple of 5 bytes")
    ev = np.frombuffer(raw, np.uint8).reshape(-1, 5).astype(np.int64)
    x, y = ev[:, 0], ev[:, 1]
    p = ev[:, 2] >> 7
    t = ((ev[:, 2] & 0x7F) << 16) | (ev[:, 3] << 8) | ev[:, 4]
    return x, y, p, t


def encode_nmnist_events(x, y, p, t_us) -> bytes:
    """Inverse of :func:`decode_nmnist_events` (to write test files)."""
    x, y, p, t = (np.asarray(a, np.int64) for a in (x, y, p, t_us))
    require(bool(np.all(t < (1 << 23))), "t_us", int(t.max()) if t.size else 0, "must be < 2**23")
    out = np.zeros((x.size, 5), np.uint8)
    out[:, 0], out[:, 1] = x, y
    out[:, 2] = (p << 7) | (t >> 16)
    out[:, 3] = (t >> 8) & 0xFF
    out[:, 4] = t & 0xFF
    return out.tobytes()


def read_nmnist_bin(path):
    """One N-MNIST ``.bin`` file → ``(channels int32, times_ms float64)`` over 2×34×34 (a regular file:
    a FIFO or device is refused before it is opened)."""
    with open(regular_file(path, "N-MNIST file", "give <digit>/<id>.bin files of 40-bit events"), "rb") as f:
        x, y, p, t = decode_nmnist_events(f.read())
    ok = (x < NMNIST_SIZE) & (y < NMNIST_SIZE)
    ch = (p[ok] * NMNIST_SIZE + y[ok]) * NMNIST_SIZE + x[ok]
    return ch.astype(np.int32), t[ok].astype(np.float64) / 1e3


def read_nmnist_folder(root, limit_per_class: int | None = None) -> EventDataset:
    """N-MNIST folder layout ``root/<digit>/<id>.bin`` → :class:`EventDataset`."""
    chosen = []
    for label in sorted(d for d in os.listdir(root) if d.isdigit() and os.path.isdir(os.path.join(root, d))):
        files = sorted(f for f in os.listdir(os.path.join(root, label)) if f.endswith(".bin"))
        chosen += [(int(label), os.path.join(root, label, f)) for f in files[:limit_per_class]]
    fix = "give <digit>/<id>.bin files of 40-bit events"
    total = sum(float(regular_file(f, "N-MNIST file", fix).stat().st_size) for _, f in chosen)
    _check_read_memory(f"N-MNIST folder {root} ({len(chosen):,} files, {total:,.0f} B)", total, "give fewer files")
    samples = [read_nmnist_bin(f) for _, f in chosen]
    labels = [label for label, _ in chosen]
    require(len(samples) > 0, "N-MNIST folder", str(root), "holds no <digit>/*.bin files")
    return EventDataset("nmnist", 2 * NMNIST_SIZE**2, 10, tuple(samples), np.asarray(labels, np.int64))


def from_structured(events, sensor_size, spatial_factor: float = 1.0):
    """A tonic-style structured array (fields ``x, y, p, t``; t in µs; ``sensor_size`` =
    (W, H, P)) → ``((channels, times_ms), n_channels)``; ``spatial_factor`` downsamples
    (``x' = ⌊x·f⌋``, e.g. 0.375 for DVSGesture 128 → 48)."""
    names = events.dtype.names or ()
    if "y" not in names and int(sensor_size[1]) == 1 and names:  # 1-D sensors (tonic's SHD: t, x, p)
        events = _with_y(events)
        names = events.dtype.names
    for fld in ("x", "y", "p", "t"):
        require(fld in names, "events fields", names, f"need field {fld!r}", "pass a tonic event array")
    for fld in ("x", "y", "p", "t"):
        _numeric(events[fld], f"events field {fld}", "pass a tonic event array of numbers")
    W, H, P = (int(s) for s in sensor_size)
    w, h = max(1, int(W * spatial_factor)), max(1, int(H * spatial_factor))
    x = np.floor(events["x"].astype(np.float64) * spatial_factor).astype(np.int64)
    y = np.floor(events["y"].astype(np.float64) * spatial_factor).astype(np.int64)
    p = events["p"].astype(np.int64) if P > 1 else np.zeros(len(events), np.int64)  # tonic's SHD: p = 1 of 1
    ok = (x >= 0) & (x < w) & (y >= 0) & (y < h) & (p >= 0) & (p < P)
    ch = (p[ok] * h + y[ok]) * w + x[ok]
    return (ch.astype(np.int32), events["t"][ok].astype(np.float64) / 1e3), P * h * w


def _with_y(events):
    out = np.zeros(events.shape, [*((n, events.dtype[n]) for n in events.dtype.names), ("y", np.int64)])
    for n in events.dtype.names:
        out[n] = events[n]
    return out


TONIC_DATASETS = {"shd": ("SHD", 1.0, 20), "nmnist": ("NMNIST", 1.0, 10), "dvsgesture": ("DVSGesture", 0.375, 11)}
"""``--dataset`` name → (tonic dataset class, spatial factor to this project's channels — DVSGesture's
128×128 sensor is pooled to 48×48 as in :func:`dvsgesture_like` —, classes)."""


def read_tonic(dataset: str, root, limit: int | None = None, train: bool = True) -> EventDataset:
    """The first ``limit`` samples of tonic's ``dataset`` (``shd``, ``nmnist``, ``dvsgesture``) kept
    under ``root`` (tonic's ``save_to``: ``root/SHD``, ``root/NMNIST``, ``root/DVSGesture``); tonic
    downloads it there when it is missing and the machine has network.

    Raises
    ------
    ConfigError
        If tonic is not installed, the dataset is unknown, or it is missing and cannot be downloaded.
    """
    require(
        dataset in TONIC_DATASETS, "--dataset", dataset, f"must be one of {', '.join(TONIC_DATASETS)} with --data-root"
    )
    try:
        import tonic  # an optional extra: pip install 'tilesim[data]'
    except ImportError:
        raise ConfigError(
            config_message(
                "--data-root", str(root), "needs tonic", "pip install 'tilesim[data]' (or pip install tonic)"
            )
        ) from None
    cls_name, factor, n_classes = TONIC_DATASETS[dataset]
    cls = getattr(tonic.datasets, cls_name)
    made = [p for p in (Path(root), Path(root) / cls_name) if not p.exists()]  # what a failed download leaves
    try:
        ds = cls(save_to=str(root), train=train)
    except Exception as exc:  # noqa: BLE001 (tonic raises what its download raises: URLError, OSError, ...)
        for p in reversed(made):  # the folders tonic made for the download, if it left them empty
            with contextlib.suppress(OSError):
                p.rmdir()
        raise ConfigError(
            config_message(
                "--data-root",
                str(root),
                f"holds no {cls_name} in tonic's layout and tonic could not download it ({type(exc).__name__}: "
                f"{str(exc)[:80]})",
                f"download it where there is network (tonic.datasets.{cls_name}(save_to=...)), copy {root}/{cls_name}",
            )
        ) from None
    samples, labels, n_channels, i = [], [], 0, 0
    try:  # tonic reads what it finds there: a file without labels fails in len(), a bad sample in ds[i]
        n = len(ds) if limit is None else min(limit, len(ds))
        for i in range(n):
            events, target = ds[i]
            sample, n_channels = from_structured(events, cls.sensor_size, factor)
            samples.append(sample)
            labels.append(target)
    except (KeyError, IndexError, OSError, ValueError, TypeError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(
            config_message(
                "--data-root",
                str(root),
                f"tonic's {cls_name} there cannot give sample {i} ({type(exc).__name__}: {str(exc)[:80]})",
                f"give {root}/{cls_name} as tonic downloads it (events and labels)",
            )
        ) from None
    require(n > 0, "--data-root", str(root), f"tonic's {cls_name} there holds no samples", "give a folder with data")
    labels_arr = whole_labels(np.asarray(labels) if labels else np.zeros(0, np.int64), f"--data-root {cls_name}")
    require(labels_arr.shape == (n,), "--data-root labels", labels_arr.shape, f"must be one class per sample ({n})")
    return EventDataset(f"tonic {cls_name}", int(n_channels), n_classes, tuple(samples), labels_arr)


NPZ_FORMAT = (
    "an events .npz holds `events` (tonic's structured events, fields x, y, p, t in µs, every sample "
    "one after the other), `offsets` (int, n_samples + 1 boundaries into events), `labels` (int, "
    "n_samples) and `sensor_size` (W, H, P); write it with numpy.savez"
)


def _npz_arrays(path, bad) -> tuple:
    """``(events, offsets, labels, sensor_size)`` of an events .npz, after refusing a special file and
    members whose uncompressed sizes (declared in the zip headers; numpy reads no more) exceed the
    host's memory limit (:func:`_check_read_memory`): a small file can expand a thousandfold."""
    import zipfile  # loaded only when a file is read

    regular_file(path, "--data", "give an events .npz file")
    try:
        with zipfile.ZipFile(path) as z:
            declared = float(sum(i.file_size for i in z.infolist()))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise bad("file", "unreadable", f"is not a numpy .npz ({str(exc)[:60]})") from None
    _check_read_memory(
        f"--data {os.path.basename(str(path))} ({declared:,.0f} B once uncompressed)",
        declared,
        "give a smaller file (or fewer samples per file)",
    )
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("events", "offsets", "labels", "sensor_size") if k not in z.files]
            if missing:
                raise bad("keys", sorted(z.files), f"misses {', '.join(missing)}")
            return z["events"], z["offsets"], z["labels"], z["sensor_size"]
    except ConfigError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise bad("file", "unreadable", f"is not a numpy .npz ({str(exc)[:60]})") from None


def read_events_npz(path) -> EventDataset:
    """A tonic-style event file (:data:`NPZ_FORMAT`): sample ``i`` is
    ``events[offsets[i]:offsets[i+1]]``, its channel ``p·H·W + y·W + x`` (:func:`from_structured`).

    Raises
    ------
    ConfigError
        If a key is missing, the offsets do not bound the events, or the labels do not match.
    """

    def bad(what, value, limit):
        return ConfigError(f"--data {os.path.basename(str(path))}: {what} = {value}: {limit}; {NPZ_FORMAT}")

    events, offsets, labels, size = _npz_arrays(path, bad)
    where = f"--data {os.path.basename(str(path))}:"
    if events.ndim != 1 or not events.dtype.names:
        raise bad("events", f"dtype {events.dtype} shape {events.shape}", "must be a 1-D structured array")
    for fld in set(events.dtype.names) & {"x", "y", "p", "t"}:
        _numeric(events[fld], f"{where} events field {fld}", NPZ_FORMAT)
    offsets = _numeric(offsets, f"{where} offsets", NPZ_FORMAT, integer=True).astype(np.int64)
    labels = whole_labels(labels, where)
    if (
        offsets.ndim != 1
        or offsets.size < 2
        or offsets[0] != 0
        or offsets[-1] != len(events)
        or np.any(np.diff(offsets) < 0)
    ):
        raise bad(
            "offsets",
            f"{offsets.size} values ending at {offsets.ravel()[-1] if offsets.size else '-'}",
            f"must rise from 0 to the {len(events)} events",
        )
    if labels.shape != (offsets.size - 1,) or (labels < 0).any():
        raise bad("labels", f"shape {labels.shape}", f"must be {offsets.size - 1} whole numbers >= 0")
    size = _numeric(size, f"{where} sensor_size", NPZ_FORMAT)
    if (
        size.shape != (3,)
        or np.any(size < 1)
        or np.any(size != np.round(size))
        or np.prod(size, dtype=float) > MAX_CHANNELS
    ):
        raise bad(
            "sensor_size",
            size.ravel()[:4].tolist(),
            f"must be (W, H, P), whole numbers >= 1, at most {MAX_CHANNELS:,} channels",
        )
    samples, n_channels = [], 0
    for i in range(offsets.size - 1):
        sample, n_channels = from_structured(events[offsets[i] : offsets[i + 1]], size)
        samples.append(sample)
    return EventDataset(
        os.path.basename(str(path)),
        int(n_channels),
        int(labels.max()) + 1 if labels.size else 0,
        tuple(samples),
        labels,
    )
