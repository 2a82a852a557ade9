"""PopSparse's static planner: its choice of partition, from its own cost estimate.

PopSparse (``lib/popsparse/StaticMatMulPartitioner.cpp``, ``getPartition``) does not build every
candidate partition: it scores each ``(S_n, S_k)`` — every whole number of dense-column parts up to
32 and of column bands up to 128, ``S_n S_k`` at most the chip's tile pairs — with a closed-form
estimate and keeps the cheapest whose temporary bytes meet ``availableMemoryProportion`` [S]. This
module ports that estimate, so the simulator picks the partition PopSparse would pick (then times it
tile by tile in :mod:`tilesim.models.linear.blocksparse`). Per candidate and per distinct ``(n per part,
tiles per part)``, for the band with the most non-zero blocks per tile::

    cycles = ceil(rhs bytes / (2 E)) · (k_tile / k_sparse)        # dense rows in, multicast bias
           + [S_n > 1] ceil(non-zero bytes / E)                     # values copied to the other parts
           + matmulComputeCycles + zeroing                          # the codelet (StaticBlockCosts)
           + ceil(partial bytes / E) + reduce(outputs / r, r)       # partials to their reduction
           + ceil(m n_pad bytes / tiles)                            # the result to its final place

``E`` = exchange bytes per cycle; ``k_sparse``, ``m_sparse`` the expected distinct block columns and
rows on a tile (binomial mean + 1 standard deviation), ``r`` the expected number of tiles holding a
row. Bands hold about equal numbers of non-zero blocks (greedy over the column counts); tiles go to
bands in proportion to their blocks, in whole tile pairs. Row/column pre-processing (pruning) is off,
as by default. Partials are in the input type (``sparseDenseMatMul`` sets ``partialsType`` to it).
Every candidate of a batch is scored at once (NumPy arrays over ``(S_n, S_k)``); the band cuts of every
``S_k`` and the worst band's geometry per tile count, which do not depend on the batch, are kept per layout.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tilesim.errors import SramOverflowError, require
from tilesim.models.linear.phases import ceil_div

__all__ = ["StaticChoice", "choose_static_partition", "band_boundaries"]

MAX_N_SPLIT = 32
MAX_K_SPLIT = 128
"""``maxNSplit``, ``maxKSplit`` of ``getPartition`` [S]."""

USHORT_MAX = 65535
"""Metadata is ``unsigned short``: a band's offsets and a tile's worklist must fit it [S]."""


@dataclass(frozen=True)
class StaticChoice:
    """The partition PopSparse's planner picks: ``n_split`` (``S_n``), ``bands`` (``S_k``) and the
    band boundaries (block columns), its estimated cycles and temporary bytes on the worst tile."""

    n_split: int
    bands: int
    boundaries: tuple
    estimate_cycles: int
    estimate_bytes: int


def band_boundaries(col_count: np.ndarray, bands: int) -> tuple:
    """``buildColumnBandInfo``: bands of about ``ceil(nnz / bands)`` non-zero blocks, cut greedily along
    the block columns. Returns ``(boundaries, blocks per band, widest band without empty columns)``."""
    total = int(col_count.sum())
    avg = ceil_div(total, bands)
    csum = np.concatenate([[0], np.cumsum(col_count)]).tolist()  # bisect on a list: the loop is per band
    filled = np.concatenate([[0], np.cumsum(col_count > 0)]).tolist()  # columns holding a block, cumulated
    cols = len(csum) - 1
    bounds, per, widest = [0], [], 0
    for _ in range(bands):
        start = bounds[-1]
        if start >= cols:
            break
        end = bisect.bisect_left(csum, csum[start] + avg)
        end = min(max(end, start + 1), cols)
        count = csum[end] - csum[start]
        if count == 0:
            break
        bounds.append(end)
        per.append(count)
        widest = max(widest, filled[end] - filled[start])
    return tuple(bounds), tuple(per), widest


@lru_cache(maxsize=4096)
def _bands(counts: bytes, bands: int) -> tuple:
    """:func:`band_boundaries` of the column counts ``counts`` (int64 bytes), kept for the next batch."""
    return band_boundaries(np.frombuffer(counts, dtype=np.int64), bands)


def _n_partition(n_pad: int, splits: int, grain: int) -> list:
    """``buildPartitionForN``: sizes of up to ``splits`` parts of whole grains (empty tails dropped)."""
    grains = n_pad // grain
    per = ceil_div(grains, splits)
    sizes = []
    for s in range(splits):
        lo, hi = min(per * s, grains), min(per * (s + 1), grains)
        if lo == hi:
            break
        sizes.append((hi - lo) * grain)
    return sizes


def _tile_partition(sizes: list, tiles: int, grain: int) -> list:
    """``buildTilePartitionForN``: tiles per part in proportion to its columns, in whole tile grains
    (the total counts one more column than the parts hold, as PopSparse's accumulate starts at 1), one grain
    less than that share but at least an equal share (``max(maxGrainsPerSplit - 1, minGrainsPerSplit)``); the
    last part takes the tiles left, a part after the tiles ran out none [S]."""
    total = 1 + sum(sizes)
    grains = ceil_div(tiles, grain)
    least = ceil_div(grains, len(sizes))
    out, start = [], 0
    for i, size in enumerate(sizes):
        this = max(ceil_div(grains * size, total) - 1, least)
        end = min(start + this * grain, tiles)
        if i == len(sizes) - 1:
            end = tiles
        out.append(end - start)
        start = end
    return out


@lru_cache(maxsize=1 << 16)
def _tiles_for_bands(per_band: tuple, tiles: int, grain: int) -> tuple:
    """``allocateTilesForBands``: tiles per band in proportion to its blocks, in whole grains, at least
    one grain each, the rest to the last band; empty when the tiles run out. (Kept: a layout is planned
    for many batches, and the allocation depends only on its bands and the tiles of a part.)"""
    if len(per_band) < 64:  # NumPy's ~1 us per operation beats a Python loop only over many bands
        return _tiles_for_bands_stepwise(_tile_wants(per_band, tiles, grain), tiles, grain)
    count = np.asarray(per_band, dtype=np.int64)
    this = count * tiles // int(count.sum())
    this[this == 0] = min(tiles, grain)
    needed = -(-count // -(-count // this))  # tiles that hold every block at ceil(count / this) each
    this = np.minimum(-(-needed // grain) * grain, this)
    want = np.maximum(this // grain * grain, grain)[:-1]  # every band but the last, while tiles remain
    used = np.concatenate([[0], np.cumsum(want)])
    last = len(per_band) - 1
    if (want <= tiles - used[:-1]).all() and (want <= tiles - (last - np.arange(last)) * grain).all():
        rest = tiles - int(used[-1])  # no band ran short: the last takes the rest
        avail = min(max(rest // grain * grain, grain), rest)
        return tuple(want.tolist()) + (avail,) if avail > 0 else ()
    return _tiles_for_bands_stepwise(this.tolist(), tiles, grain)


def _tile_wants(per_band: tuple, tiles: int, grain: int) -> list:
    """The tiles each band asks for before the tiles run out (:func:`_tiles_for_bands`), band by band."""
    total = sum(per_band)
    first = min(tiles, grain)
    out = []
    for count in per_band:
        this = count * tiles // total or first
        needed = -(-count // -(-count // this))  # tiles that hold every block at ceil(count / this) each
        out.append(min(-(-needed // grain) * grain, this))
    return out


def _tiles_for_bands_stepwise(this: list, tiles: int, grain: int) -> tuple:
    """:func:`_tiles_for_bands` band by band, for the allocations where the tiles run short."""
    used, out = 0, []
    last = len(this) - 1
    for b, want in enumerate(this):
        if b == last:
            want = tiles - used
        avail = min(max(want // grain * grain, grain), tiles - used, tiles - (last - b) * grain)
        if avail <= 0:
            return ()
        out.append(avail)
        used += avail
    return tuple(out)


def _spread(prob, count):
    """One standard deviation of a binomial count, rounded up (``prob`` and ``count`` arrays or numbers)."""
    return np.ceil(np.sqrt(prob * (1 - prob) * count))


@dataclass(frozen=True)
class _Problem:
    m_blocks: int
    k_blocks: int
    n_pad: int
    block: int
    eb: int
    tiles: int
    tile_grain: int
    workers: int
    exchange_bytes_per_cycle: float
    density: float


@lru_cache(maxsize=16)
def _band_table(counts: bytes, k_end: int) -> tuple:
    """The bands of every ``S_k`` up to ``k_end`` (:func:`band_boundaries`, the cuts of all band counts made
    together, band by band), one row each, zero past a row's bands: ``(blocks per band, band widths, bands,
    widest band without empty columns)``."""
    col_count = np.frombuffer(counts, dtype=np.int64)
    csum = np.concatenate([[0], np.cumsum(col_count)])
    filled = np.concatenate([[0], np.cumsum(col_count > 0)])
    cols, sk = col_count.size, np.arange(1, k_end + 1)
    avg = ceil_div(int(csum[-1]), sk)
    per, width = np.zeros((k_end, k_end), dtype=np.int64), np.zeros((k_end, k_end), dtype=np.int64)
    count, widest = np.zeros(k_end, dtype=np.int64), np.zeros(k_end, dtype=np.int64)
    start, alive = np.zeros(k_end, dtype=np.int64), np.ones(k_end, dtype=bool)
    for b in range(k_end):
        alive &= (b < sk) & (start < cols)
        end = np.minimum(np.maximum(np.searchsorted(csum, csum[start] + avg, side="left"), start + 1), cols)
        blocks = csum[end] - csum[start]
        alive &= blocks > 0
        if not alive.any():
            break
        per[:, b], width[:, b] = np.where(alive, blocks, 0), np.where(alive, end - start, 0)
        widest = np.maximum(widest, np.where(alive, filled[end] - filled[start], 0))
        count += alive
        start = np.where(alive, end, start)
    return per, width, count, widest


def _tiles_of_bands(per: np.ndarray, count: np.ndarray, tiles: np.ndarray, grain: int) -> tuple:
    """:func:`_tiles_for_bands` of every row of ``per`` (blocks per band, ``count`` bands) on ``tiles[row]``
    tiles at once: ``(tiles per band, valid)``. A row whose bands ask for more tiles than remain is allocated
    band by band (:func:`_tiles_for_bands_stepwise`)."""
    rows, width = per.shape
    band = np.arange(width)[None, :]
    t = tiles[:, None]
    this = per * t // per.sum(axis=1)[:, None]
    this = np.where(this == 0, np.minimum(t, grain), this)
    needed = -(-per // np.maximum(-(-per // this), 1))  # tiles that hold every block at ceil(count / this) each
    want = np.minimum(-(-needed // grain) * grain, this)
    last = (count - 1)[:, None]
    body = band < last  # every band but the last takes what it asks for while tiles remain
    take = np.where(body, np.maximum(want // grain * grain, grain), 0)
    used = np.cumsum(take, axis=1) - take
    ok = (((take <= t - used) & (take <= t - (last - band) * grain)) | ~body).all(axis=1)
    rest = tiles - take.sum(axis=1)  # the last band takes the rest
    out = take.copy()
    out[np.arange(rows), count - 1] = np.minimum(np.maximum(rest // grain * grain, grain), rest)
    valid = ok & (out[np.arange(rows), count - 1] > 0)
    for i in np.flatnonzero(~ok).tolist():
        got = _tiles_for_bands_stepwise(want[i, : count[i]].tolist(), int(tiles[i]), grain)
        valid[i] = bool(got)
        out[i, : count[i]] = got or 0
    return out, valid


@lru_cache(maxsize=64)
def _powers(base: float, top: int) -> np.ndarray:
    """``base ** i`` for ``i`` up to ``top``, each as Python computes it (so the arrays agree with a scalar
    evaluation bit for bit)."""
    return np.array([base**i for i in range(top + 1)])


def _band_geometry(counts: bytes, k_end: int, tiles: np.ndarray, sk: np.ndarray, shape: tuple) -> tuple:
    """What a candidate's estimate needs of its worst band (``findBandWithMaxNzPerTile``: the most blocks per
    tile, the first of equals) with ``sk`` bands (of the :func:`_band_table` up to ``k_end``) on ``tiles`` tiles
    (arrays, one row each), which does not depend on the batch: ``(valid, blocks per tile, band width, k_tile,
    m_sparse, k_sparse, r)``; not valid where the bands cannot all have tiles. ``shape``: the layout's block
    rows and columns, its density and the tile grain."""
    m_blocks, k_blocks, density, grain = shape
    per, width, count, _ = _band_table(counts, k_end)
    top = int(sk.max())
    per, width, count = per[sk - 1, :top], width[sk - 1, :top], count[sk - 1]
    alloc, valid = _tiles_of_bands(per, count, tiles, grain)
    live = (np.arange(top)[None, :] < count[:, None]) & valid[:, None]
    worst = np.where(live, per / np.maximum(alloc, 1), -np.inf).argmax(axis=1)
    at = np.arange(len(sk))
    blocks_band, k_band = per[at, worst], width[at, worst]
    tiles_band = np.where(valid, alloc[at, worst], 1)
    nz_tile = -(-blocks_band // tiles_band)
    m_tile = -(-m_blocks // tiles_band)
    k_tile = np.where(m_tile == 1, np.minimum(np.ceil(blocks_band / density), k_blocks), k_band).astype(np.int64)
    k_tile = np.maximum(k_tile, 1)
    power = _powers(1.0 - density, max(m_blocks, k_blocks))
    row_prob = 1.0 - power[k_tile]
    m_sparse = np.minimum(np.ceil(row_prob * m_tile + _spread(row_prob, m_tile)), m_tile).astype(np.int64)
    col_prob = 1.0 - power[m_tile]
    k_sparse = np.minimum(np.ceil(col_prob * k_tile + _spread(col_prob, k_tile)), k_tile).astype(np.int64)
    r = np.maximum(np.ceil((row_prob * sk + _spread(row_prob, sk)) * k_band / k_tile), 1).astype(np.int64)
    return valid, nz_tile, k_band, k_tile, m_sparse, np.maximum(k_sparse, 1), r


@lru_cache(maxsize=8)
def _geometry_store(counts: bytes, k_end: int, shape: tuple) -> dict:
    """The worst-band geometry (:func:`_band_geometry`) of one layout per tile count, for ``S_k`` from 1 up,
    filled as the planner asks for it (a layout is planned for many batches, which share most tile counts)."""
    return {}


def _geometry(counts: bytes, k_end: int, shape: tuple, wanted: dict) -> dict:
    """:func:`_band_geometry` of ``S_k`` up to ``wanted[tiles]`` for each tile count, computing the ones not
    kept yet (or kept for fewer band counts) at once: ``{tiles: columns over S_k = 1, 2, ...}``."""
    store = _geometry_store(counts, k_end, shape)
    new = sorted((t, top) for t, top in wanted.items() if t not in store or len(store[t][0]) < top)
    if new:
        tiles = np.concatenate([np.full(top, t) for t, top in new])
        sk = np.concatenate([np.arange(1, top + 1) for _, top in new])
        cols = _band_geometry(counts, k_end, tiles, sk, shape)
        ends = np.cumsum([top for _, top in new])
        for (t, _), parts in zip(new, zip(*(np.split(c, ends[:-1]) for c in cols))):
            store[t] = parts
    return store


def _codelet(vertex, block: int, eb: int, workers: int, rows, nonzeros, n: int):
    """The codelet estimate of ``rows`` block rows holding ``nonzeros`` blocks over ``n`` columns."""
    if block == 1:
        return vertex.elementwise_cycles(rows, nonzeros, n, eb, workers)
    return vertex.cycles(rows, nonzeros, n, block, eb, workers, eb)


def _sub_estimates(p: _Problem, vertex, sn, geo: tuple, widest, n_part) -> tuple:
    """``(cycles, bytes, valid)`` of ``(n per part, tiles per part)`` of candidates, arrays over them: ``sn``
    (``S_n``), ``geo`` (:func:`_band_geometry`'s columns at each one's tiles and ``S_k``), ``widest`` (its
    ``S_k``'s widest band) and ``n_part``."""
    valid, nz_tile, k_band, k_tile, m_sparse, k_sparse, r = geo
    factor = 1 if p.block == 1 else 8 * p.block
    valid = valid & (widest * p.block * n_part * p.eb <= USHORT_MAX * factor)  # a band's offsets fit the metadata
    e = p.exchange_bytes_per_cycle
    rhs_bytes = n_part * k_sparse * p.block * p.eb
    rhs = (ceil_div(rhs_bytes, int(2 * e)) * (k_tile / k_sparse)).astype(np.int64)
    nz_bytes = nz_tile * p.block * p.block * p.eb
    nz = np.where(sn > 1, ceil_div(nz_bytes, int(e)), 0)
    compute = _codelet(vertex, p.block, p.eb, p.workers, m_sparse, nz_tile, n_part)
    out_bytes = m_sparse * n_part * p.eb * p.block
    partial_bytes = ceil_div(out_bytes * (r - 1), r)
    move = ceil_div(p.m_blocks * p.block * p.n_pad * p.eb, p.tiles)
    reduce = np.where(r == 1, 0, _reduce_cycles(ceil_div(out_bytes // p.eb, r), p.eb, r, p.workers))
    cycles = rhs + nz + compute + ceil_div(partial_bytes, int(e)) + reduce + move
    memory = np.maximum(rhs_bytes + nz_bytes + out_bytes, partial_bytes + out_bytes)
    return cycles, memory, valid


def _reduce_cycles(outputs, eb: int, factor, workers: int):
    """``reductionCycleEstimate`` (a strided reduce of ``factor`` partials per output, input type) [S]; numbers
    or arrays."""
    outer = (8 if eb == 2 else 5) + 6 + (factor - 1)
    loops = ceil_div(ceil_div(outputs, workers), 8 if eb == 2 else 4)
    return (16 + loops * outer) * workers


@lru_cache(maxsize=256)
def _candidates(n_pad: int, n_end: int, k_end: int, tiles: int, grain: int, tile_grain: int) -> tuple:
    """``(S_n, its distinct (n per part, tiles per part), S_k up to)`` of every ``S_n`` whose parts all have
    tiles, in PopSparse's search order (kept: the layouts planned for a batch share them)."""
    pairs = tiles // tile_grain
    out = []
    for sn in range(1, n_end + 1):
        sizes = _n_partition(n_pad, sn, grain)
        tiles_n = _tile_partition(sizes, tiles, tile_grain)
        if all(t > 0 for t in tiles_n) and min(k_end, pairs // sn) >= 1:
            out.append((sn, tuple(sorted(set(zip(sizes, tiles_n)))), min(k_end, pairs // sn)))
    return tuple(out)


def _scores(p: _Problem, vertex, counts: bytes, k_end: int, candidates: tuple) -> tuple:
    """``(cycles, temporary bytes, valid, S_n, S_k)`` of every candidate ``(S_n, S_k)`` (arrays in search
    order): each the worst of its ``(n per part, tiles per part)`` (:func:`_sub_estimates`, all at once)."""
    if not candidates:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0, bool),) + (np.zeros(0, np.int64),) * 2
    shape = (p.m_blocks, p.k_blocks, p.density, p.tile_grain)
    wanted: dict = {}  # the most band counts asked of each tile count
    for _, unique, kk in candidates:
        for _, t in unique:
            wanted[t] = max(wanted.get(t, 0), kk)
    geo = _geometry(counts, k_end, shape, wanted)
    widest = _band_table(counts, k_end)[3]
    rows: list = []  # per (S_n, n per part, tiles per part): its geometry, S_n, n per part, widest, candidate
    sn_of, sk_of, first = [], [], 0
    for sn, unique, kk in candidates:
        for n_part, t in unique:
            span = np.arange(kk)
            rows.append((*(a[:kk] for a in geo[t]), np.full(kk, sn), np.full(kk, n_part), widest[:kk], span + first))
        sn_of.append(np.full(kk, sn))
        sk_of.append(np.arange(1, kk + 1))
        first += kk
    cols = [np.concatenate(c) for c in zip(*rows)]
    cycles, memory, valid = _sub_estimates(p, vertex, cols[7], tuple(cols[:7]), cols[9], cols[8])
    worst_c, worst_m, ok = np.zeros(first, np.int64), np.zeros(first, np.int64), np.ones(first, bool)
    np.maximum.at(worst_c, cols[10], cycles)
    np.maximum.at(worst_m, cols[10], memory)
    np.logical_and.at(ok, cols[10], valid)
    return worst_c, worst_m, ok, np.concatenate(sn_of), np.concatenate(sk_of)


_LAST_COUNTS: list = [None, None]
"""The last read-only layout :func:`_column_counts` saw and its counts (its batches are planned one after another)."""


def _column_counts(layout: np.ndarray) -> np.ndarray:
    """Non-zero blocks per block column (int64), kept for the last read-only layout (one that cannot change
    under the cache; counting a 4096-wide element-wise mask takes ~20 ms)."""
    if _LAST_COUNTS[0] is layout:
        return _LAST_COUNTS[1]
    counts = np.count_nonzero(layout, axis=0).astype(np.int64)
    if not layout.flags.writeable:
        counts.setflags(write=False)
        _LAST_COUNTS[:] = [layout, counts]
    return counts


def choose_static_partition(
    layout: np.ndarray,
    n: int,
    *,
    block: int,
    element_bytes: int,
    tiles: int,
    workers: int,
    exchange_bytes_per_cycle: float,
    tile_grain: int,
    sram_bytes: int,
    memory_proportion: float,
    vertex,
) -> StaticChoice:
    """The ``(S_n, S_k)`` PopSparse's static planner picks for ``layout`` (bool block mask) and ``n``
    dense columns (module docstring); ``vertex``: the codelet estimate
    (:class:`~tilesim.models.linear.blocksparse.StaticBlockCosts`)."""
    grain = 4 if element_bytes == 2 else 2  # the vector width: n is padded to it [S]
    n_pad = ceil_div(n, grain) * grain
    col_count = _column_counts(layout)
    nnz = int(col_count.sum())
    m_blocks, k_blocks = layout.shape
    p = _Problem(
        m_blocks, k_blocks, n_pad, block, element_bytes, tiles, tile_grain, workers,
        float(exchange_bytes_per_cycle), min(nnz / (m_blocks * k_blocks), 1.0),
    )  # fmt: skip
    k_grain = 1 if block == 1 else grain
    bound = memory_proportion * sram_bytes
    n_end = min(MAX_N_SPLIT, ceil_div(n_pad, grain))
    k_end = min(MAX_K_SPLIT, ceil_div(k_blocks, k_grain))
    counts_key = col_count.tobytes()  # the band layouts are kept per column counts (:func:`_bands`)
    candidates = _candidates(n_pad, n_end, k_end, tiles, grain, tile_grain)
    cycles, memory, ok, sn_of, sk_of = _scores(p, vertex, counts_key, k_end, candidates)
    require(
        bool(ok.any()),
        "n",
        n,
        f"has no partition PopSparse's static planner accepts for a {m_blocks * block}x{k_blocks * block} "
        f"block-{block} matrix on {tiles} tiles (a band's offsets overflow its 16-bit metadata)",
        "use a smaller batch (split it into several matmuls)",
    )
    within = ok & (memory <= bound)
    if not within.any():
        least = int(memory[ok].min())
        raise SramOverflowError(
            f"block-sparse matmul (m, k, n) = ({m_blocks * block}, {k_blocks * block}, {n}), block {block}, {nnz} "
            f"blocks on {tiles} tiles: no partition fits: PopSparse's static planner needs {least} B of temporary "
            f"memory on a tile at least > memory_proportion {memory_proportion} x {sram_bytes} B (it stops with "
            f"'Could not find valid partition'); raise the memory proportion, use more tiles, fp16, a lower density "
            f"or a smaller batch"
        )
    at = np.flatnonzero(within)
    best = int(at[np.argmin(cycles[at])])  # ties: the first in PopSparse's order, as it keeps
    sn, sk = int(sn_of[best]), int(sk_of[best])
    bounds, per_band, _ = _bands(counts_key, sk)
    return StaticChoice(sn, len(per_band), bounds, int(cycles[best]), int(memory[best]))
