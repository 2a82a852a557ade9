"""Where the step's rows are written (a :class:`RowSink`): the dense ``[S, tiles]`` arrays,
the calls recorded per chip for a compact program, or each chip's peaks for the mapping
search's fast path. None of them turns work into time: the machine's fabric does
(:meth:`tilesim.machine.fabric.OnChipFabric.reduce`)."""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import numpy as np

from tilesim.mapping.core import group_tiles
from tilesim.models.snn.step.table import ARRAYS, COMPUTE, LayerTerms, StepShape


class RowSink(Protocol):
    """What :func:`_emit` writes the step's terms into, slot by slot (:class:`StepShape`):
    the dense ``[S, tiles]`` arrays (:class:`DenseRows`) or their per-chip reduction
    (:class:`PeakRows`). ``array`` is one of :data:`ARRAYS`; ``values`` are [T] for a
    per-time-step slot or a scalar for a once-per-step slot (owner terms: [T, n] or [n])."""

    def owner(self, tiles: np.ndarray, terms: LayerTerms, table: tuple) -> None:
        """Add a layer's terms on its own ``tiles``: ``table`` = ((array, slot, term name), ...)."""

    def local(self, array: str, slot: int, tiles: np.ndarray, values) -> None:
        """Add ``values`` ([T, n] or [n]) to the distinct ``tiles`` of one chip."""

    def chip(self, array: str, slot: int, chip: int, values, masked: bool = False) -> None:
        """Add ``values`` to every tile of ``chip`` (not tile 0 of chip 0 if ``masked``)."""

    def spread(self, array: str, slot: int, tiles: np.ndarray, values) -> None:
        """Add ``values`` to ``tiles`` once per occurrence (tiles may repeat)."""

    def overhead(self, slot: int, cycles: float) -> None:
        """Add ``cycles`` of compute to every tile of the op (all but tile 0 of chip 0)."""

    def finish(self) -> dict:
        """The three arrays by name: float ``[S, tiles]`` or ``[S, chips]``."""


def _cols(tiles):
    """A slice for a run of consecutive tiles (cheap views), else the index array."""
    if tiles.size and tiles[-1] - tiles[0] + 1 == tiles.size:
        return slice(int(tiles[0]), int(tiles[-1]) + 1)
    return tiles


class _SlotViews(dict):
    """(array, slot) -> the slot's row view of that array (:meth:`StepShape.view`), made on first use."""

    def __init__(self, shape: StepShape, arrays: dict):
        super().__init__()
        self.shape, self.arrays = shape, arrays

    def __missing__(self, key):
        a, k = key
        v = self[key] = self.shape.view(self.arrays[a], k)
        return v


class DenseRows:
    """The program's [S, tiles] arrays, written through per-slot row views (:meth:`StepShape.view`)
    (a :class:`RowSink`)."""

    def __init__(self, shape: StepShape, C: int, TPC: int, active: np.ndarray, first_chip: int = 0):
        self.C, self.TPC, self.active = C, TPC, active
        self.c0, self.off = first_chip, first_chip * TPC  # a window of C chips from ``first_chip``
        self.arrays = {a: np.zeros((shape.supersteps, C * TPC), np.float32) for a in ARRAYS}
        self.views = _SlotViews(shape, self.arrays)  # made on first use: a chip window touches few slots
        self.acc: dict = {}
        self.uniq: dict = {}  # tile set (bytes) -> (distinct tiles, multiplicities)

    def owner(self, tiles, terms, table):
        for a, k, name in table:
            self.local(a, k, tiles, getattr(terms, name))

    def local(self, a, k, tiles, values):
        v = self.views[a, k]
        c = _cols(tiles - self.off if self.off else tiles)
        if v.ndim == 2:
            v[:, c] += values
        else:
            v[c] += values

    def chip(self, a, k, c, values, masked=False):
        """Collected per slot and applied once, in :meth:`finish`."""
        v = self.views[a, k]
        key = (a, k, masked)
        if key not in self.acc:
            self.acc[key] = (v, np.zeros((v.shape[0] if v.ndim == 2 else 1, self.C)))
        self.acc[key][1][:, c - self.c0] += values

    def spread(self, a, k, tiles, values):
        key = tiles.tobytes()
        if key not in self.uniq:
            u, cnt = np.unique(tiles - self.off if self.off else tiles, return_counts=True)
            self.uniq[key] = (_cols(u), cnt.astype(np.float64))
        u, cnt = self.uniq[key]
        v = self.views[a, k]
        val = np.asarray(values, np.float64)
        if v.ndim == 2:
            v[:, u] += (val[:, None] if val.ndim else val) * cnt[None, :]
        else:
            v[u] += val * cnt

    def overhead(self, k, cycles):
        self.views[COMPUTE, k][...] += self.active * cycles

    def finish(self):
        TPC = self.TPC
        for (_a, _k, masked), (v, acc) in self.acc.items():
            for c in np.flatnonzero(acc.any(axis=0)):
                cols = slice(c * TPC, (c + 1) * TPC)
                add = acc[:, c][:, None] if v.ndim == 2 else acc[0, c]
                v[..., cols] += add * self.active[cols] if masked else add
        return self.arrays


class ChipCalls:
    """A :class:`RowSink` that only records its calls, per chip they touch, in order; replayed
    chip by chip into a one-chip :class:`DenseRows` window (:func:`replay_chip_rows`), every tile of
    that chip gets the very additions, in the same order, as in the whole-machine arrays."""

    def __init__(self, C: int, TPC: int):
        self.TPC = TPC
        self.calls: list = [[] for _ in range(C)]

    def owner(self, tiles, terms, table):
        self.calls[int(tiles[0]) // self.TPC].append(("owner", tiles, terms, table))

    def local(self, a, k, tiles, values):
        self.calls[int(tiles[0]) // self.TPC].append(("local", a, k, tiles, values))

    def chip(self, a, k, c, values, masked=False):
        self.calls[c].append(("chip", a, k, c, values, masked))

    def spread(self, a, k, tiles, values):
        chips = tiles // self.TPC
        if chips[0] == chips[-1] and (chips == chips[0]).all():
            self.calls[int(chips[0])].append(("spread", a, k, tiles, values))
            return
        for c in np.unique(chips):
            self.calls[int(c)].append(("spread", a, k, tiles[chips == c], values))

    def overhead(self, k, cycles):
        for calls in self.calls:
            calls.append(("overhead", k, cycles))

    def finish(self):
        return self.calls


def replay_chip_rows(shape: StepShape, calls: list, c: int, TPC: int, active: np.ndarray) -> dict:
    """The three ``[S, TPC]`` float32 arrays of chip ``c``: its recorded calls replayed into a
    one-chip window (equal, bit for bit, to that chip's columns of the dense arrays)."""
    rows = DenseRows(shape, 1, TPC, active[c * TPC : (c + 1) * TPC], first_chip=c)
    for name, *args in calls:
        getattr(rows, name)(*args)
    return rows.finish()


def touched_rows(shape: StepShape, calls: list) -> np.ndarray:
    """Sorted superstep rows of the slots ``calls`` (one chip's, :class:`ChipCalls`) write: every
    other row of that chip's arrays stays zero."""
    slots = set()
    for name, *args in calls:
        if name == "owner":
            slots.update(k for _, k, _ in args[2])
        elif name == "overhead":
            slots.add(args[0])
        else:  # local, chip, spread: (array, slot, ...)
            slots.add(args[1])
    index = np.arange(shape.supersteps)
    rows = [np.atleast_1d(shape.view(index, k)) for k in sorted(slots)]
    return np.unique(np.concatenate(rows)) if rows else np.zeros(0, np.int64)


def memo_nbytes(hit) -> int:
    """Bytes of one cached spread-term reduction (the arrays it holds), for a byte-bounded cache."""
    return sum(a.nbytes for a in hit)


class PeakRows:
    """The same rows reduced to chips without the [S, tiles] arrays (a :class:`RowSink`): per
    slot and chip the maximum over the chip's tiles of (chip-wide terms + per-tile terms),
    which is all the engine takes from a row on an all-to-all fabric (slowest tile's compute;
    busiest port in and out). Per-tile terms of one slot that may overlap on a tile (spread
    terms) are summed on their tiles first; owner-tile terms of different layers never
    overlap (a tile holds one layer).

    Every slot of every array is one row of ``[3 · slots, T, C]`` accumulators (a once-per-step
    slot uses time step 0), so the reduction is a few whole-array operations. ``memo``: where
    to keep the tile sets of spread terms (a :class:`BytesLRU` a search keeps), or None."""

    def __init__(self, shape: StepShape, C: int, TPC: int, memo=None):
        self.T, self.C, self.TPC, self.shape = shape.T, C, TPC, shape
        self.memo = {} if memo is None else memo  # tile sets of spread terms -> (tiles, counts)
        K = self.K = len(shape.row)
        self.per_step = np.array(shape.stride) != 0
        shape3 = (3 * K, self.T, C)
        self.chip_wide = np.zeros(shape3)  # terms on every tile of a chip
        self.chip_wide_masked = np.zeros(shape3)  # terms on every tile of a chip but tile 0 of chip 0
        self.tile_max = np.zeros(shape3)  # per-tile terms: max over the chip's tiles but global tile 0
        self.tile0 = np.zeros((3 * K, self.T))  # per-tile terms on global tile 0
        self.parts: dict = {}  # (slot, chip) -> [(tiles, values)] spread terms

    def _slot(self, a, k):
        return ARRAYS.index(a) * self.K + k

    def owner(self, tiles, terms, table):
        """Per row of ``table`` the maximum over the tiles (but global tile 0) and the value on
        tile 0, kept in ``terms.memo`` (they do not depend on where the tiles are, only on
        whether tile 0 is one of them)."""
        t0 = int(tiles[0])
        key = (table, t0 == 0)
        hit = terms.memo.get(key)
        if hit is None:
            slots = np.array([self._slot(a, k) for a, k, _ in table])
            M = np.zeros((len(table), self.T))
            Z = np.zeros((len(table), self.T)) if t0 == 0 else None
            for j, (_, _, name) in enumerate(table):
                m, z = self._owner_max(tiles, getattr(terms, name))
                M[j, : m.size] = m
                if z is not None:
                    Z[j, : z.size] = z
            hit = terms.memo[key] = (slots, M, Z)
        slots, M, Z = hit
        c = t0 // self.TPC
        self.tile_max[slots, :, c] = np.maximum(self.tile_max[slots, :, c], M)  # one layer per tile: max
        if Z is not None:
            self.tile0[slots] += Z

    def local(self, a, k, tiles, values):
        m, z = self._owner_max(tiles, values)
        i = self._slot(a, k)
        col = self.tile_max[i, : m.size, int(tiles[0]) // self.TPC]
        np.maximum(col, m, out=col)  # owner tiles of different layers never overlap
        if z is not None:
            self.tile0[i, : z.size] += z

    def chip(self, a, k, c, values, masked=False):
        (self.chip_wide_masked if masked else self.chip_wide)[
            self._slot(a, k), : self.T if self.per_step[k] else 1, c
        ] += values

    def spread(self, a, k, tiles, values):
        self.parts.setdefault((self._slot(a, k), int(tiles[0]) // self.TPC), []).append((tiles, values))

    def overhead(self, k, cycles):
        self.chip_wide_masked[self._slot(COMPUTE, k)] += cycles

    @staticmethod
    def _owner_max(tiles, values):
        """(max over the tiles but global tile 0 [T'], value on tile 0 [T'] or None)."""
        has0 = bool(tiles[0] == 0)
        v = np.asarray(values, np.float64).reshape(-1, tiles.size)
        rest = v[:, 1:] if has0 else v
        return rest.max(axis=1) if rest.shape[1] else np.zeros(v.shape[0]), v[:, 0] if has0 else None

    def _spread_max(self):
        """Fold the spread terms into ``vmax`` / ``v0``: per tile, the sum over parts of value ×
        multiplicity (tiles may repeat and overlap) = V @ M, with M kept per tile sets."""
        T = self.T
        for (i, c), ps in self.parts.items():
            key = tuple(p[0].tobytes() for p in ps)
            hit = self.memo.get(key)
            if hit is None:
                u, inv = group_tiles(np.concatenate([p[0] for p in ps]))
                M = np.zeros((len(ps), u.size))
                part = np.repeat(np.arange(len(ps)), [p[0].size for p in ps])
                np.add.at(M, (part, inv), 1.0)
                hit = self.memo[key] = (u, M)
            u, M = hit
            V = np.empty((T, len(ps)))
            for j, p in enumerate(ps):
                V[:, j] = p[1]
            tot = V @ M
            if u[0] == 0:
                self.tile0[i] += tot[:, 0]
                tot = tot[:, 1:]
            if tot.shape[1]:
                col = self.tile_max[i, :, c]
                np.maximum(col, tot.max(axis=1), out=col)

    def finish(self):
        self._spread_max()
        out = self.chip_wide + self.chip_wide_masked + self.tile_max
        first = self.chip_wide[:, :, 0] + self.tile0
        out[:, :, 0] = np.maximum(out[:, :, 0], first) if self.TPC > 1 else first
        per, once = slot_rows(self.shape)
        K = self.K
        arrays = {}
        for j, a in enumerate(ARRAYS):
            arr = arrays[a] = np.zeros((self.shape.supersteps, self.C))
            blk = out[j * K : (j + 1) * K]
            arr[per[1]] = blk[per[0]]
            arr[once[1]] = blk[once[0], 0]
        return arrays


@lru_cache(maxsize=64)
def slot_rows(shape: StepShape) -> tuple:
    """((per-step slots [P], their supersteps [P, T]), (once slots [Q], their supersteps [Q]))."""
    per = [k for k in range(len(shape.row)) if shape.stride[k] != 0]
    once = [k for k in range(len(shape.row)) if shape.stride[k] == 0]
    return (
        (np.array(per, np.int64), np.stack([shape.rows_of(k) for k in per])),
        (np.array(once, np.int64), np.array([shape.start[k] for k in once], np.int64)),
    )
