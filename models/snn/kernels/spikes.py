"""The canonical sparse spike list and conversions to and from dense spikes.

A list holds, per time step ``t`` and sample ``b``, up to ``n_max`` neuron ids and two counts:

* ``ids[t, b, :]`` (uint32): the real spikes (``v > ϑ1``) in ascending neuron index, then the
  gradient-only entries (``ϑ2 < v ≤ ϑ1``) in ascending neuron index, cut at ``n_max``; slots
  at and after ``counts[t, b, 1]`` are padding (0).
* ``counts[t, b, 0]`` = kept real spikes (the only ones transmitted to the next layer),
  ``counts[t, b, 1]`` = kept entries in total (real + gradient-only) — the gradient slots.

Input (data) lists have a single count: ``counts[..., 0] == counts[..., 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilesim.errors import require


@dataclass(frozen=True)
class SpikeList:
    """Sparse spikes of one layer for a whole batch and all time steps.

    Attributes
    ----------
    ids : np.ndarray
        uint32 ``[T, B, n_max]``.
    counts : np.ndarray
        int32 ``[T, B, 2]``: kept real spikes, kept entries in total.
    """

    ids: np.ndarray
    counts: np.ndarray

    def __post_init__(self):
        require(
            self.ids.ndim == 3 and self.ids.dtype == np.uint32,
            "SpikeList.ids",
            (self.ids.shape, str(self.ids.dtype)),
            "must be uint32 [T, B, n_max]",
        )
        require(
            self.counts.shape == self.ids.shape[:2] + (2,) and self.counts.dtype == np.int32,
            "SpikeList.counts",
            (self.counts.shape, str(self.counts.dtype)),
            f"must be int32 {self.ids.shape[:2] + (2,)}",
        )

    @property
    def timesteps(self) -> int:
        return self.ids.shape[0]

    @property
    def batch(self) -> int:
        return self.ids.shape[1]

    @property
    def n_max(self) -> int:
        return self.ids.shape[2]

    @classmethod
    def empty(cls, timesteps: int, batch: int, n_max: int) -> SpikeList:
        return cls(np.zeros((timesteps, batch, n_max), np.uint32), np.zeros((timesteps, batch, 2), np.int32))

    def to_dense(self, n_neurons: int, which: int = 0) -> np.ndarray:
        """Dense 0/1 array ``[T, B, n_neurons]`` (uint8) of the first ``counts[..., which]`` ids."""
        T, B, n_max = self.ids.shape
        out = np.zeros((T, B, n_neurons), np.uint8)
        slot = np.arange(n_max)[None, None, :]
        keep = slot < self.counts[..., which][..., None]
        t, b, _ = np.nonzero(keep)
        out[t, b, self.ids[keep].astype(np.int64)] = 1
        return out

    def shifted(self, initial: SpikeList | None) -> SpikeList:
        """The list delayed by one step: step ``t`` holds step ``t−1``; step 0 holds ``initial``
        (one step of the same shape) or nothing. This is the input of the next layer."""
        ids = np.empty_like(self.ids)
        counts = np.empty_like(self.counts)
        ids[1:] = self.ids[:-1]
        counts[1:] = self.counts[:-1]
        if initial is None:
            ids[0] = 0
            counts[0] = 0
        else:
            ids[0] = initial.ids[0]
            counts[0] = initial.counts[0]
        return SpikeList(ids, counts)


def initial_list(batch: int, n_max: int, fixed: bool) -> SpikeList:
    """The list of step −1 of a layer: empty (natural activity) or ids ``0..n_max−1`` with
    both counts ``n_max`` (fixed activity, snn-on-ipu.md §4.3)."""
    lst = SpikeList.empty(1, batch, n_max)
    if fixed:
        lst.ids[0, :, :] = np.arange(n_max, dtype=np.uint32)[None, :]
        lst.counts[0, :, :] = n_max
    return lst


def dense_to_input_list(spikes: np.ndarray, cap: int, rng: np.random.Generator) -> SpikeList:
    """Input list from dense data spikes ``[T, B, N0]`` (nonzero = spike).

    Per (t, b), when more than ``cap`` channels spike, a uniformly random subset of ``cap`` of
    them is kept (``rng.choice`` without replacement, as ``events_to_sparse_tensors`` does with
    ``np.random.shuffle``); the kept ids are stored in ascending order. Single count.
    """
    require(spikes.ndim == 3, "batch_spikes.shape", spikes.shape, "must be [T, B, N0]")
    require(cap >= 1, "input_cap", cap, "must be >= 1")
    T, B, _ = spikes.shape
    ids = np.zeros((T, B, cap), np.uint32)
    counts = np.zeros((T, B, 2), np.int32)
    t_idx, b_idx, ch = np.nonzero(spikes)
    order = np.lexsort((ch, b_idx, t_idx))
    t_idx, b_idx, ch = t_idx[order], b_idx[order], ch[order]
    flat = t_idx * B + b_idx
    starts = np.searchsorted(flat, np.arange(T * B))
    ends = np.searchsorted(flat, np.arange(T * B), side="right")
    for f in np.nonzero(ends - starts)[0]:
        sel = ch[starts[f] : ends[f]]
        if sel.size > cap:
            sel = np.sort(rng.choice(sel, size=cap, replace=False))
        t, b = divmod(int(f), B)
        ids[t, b, : sel.size] = sel
        counts[t, b, :] = sel.size
    return SpikeList(ids, counts)
