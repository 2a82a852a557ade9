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
"""

from __future__ import annotations

import bisect
import math
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


def _spread(prob: float, count: int) -> int:
    return math.ceil(math.sqrt(prob * (1 - prob) * count))


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


@lru_cache(maxsize=1 << 16)
def _worst_band(band_info: tuple, tiles: int, grain: int) -> tuple | None:
    """``findBandWithMaxNzPerTile``: the blocks, tiles and width of the band with the most blocks per tile
    (the first of equals), or None if the bands cannot all have tiles."""
    bounds, per_band, _ = band_info
    per_tile = _tiles_for_bands(per_band, tiles, grain)
    if not per_tile:
        return None
    b = int(np.argmax(np.asarray(per_band) / np.asarray(per_tile)))  # the first of equals, as max() keeps
    return per_band[b], per_tile[b], bounds[b + 1] - bounds[b]


@lru_cache(maxsize=1 << 16)
def _band_geometry(counts: bytes, sk: int, tiles: int, shape: tuple) -> tuple | None:
    """What a candidate's estimate needs of its worst band on ``tiles`` tiles, which does not depend on the
    batch: ``(blocks per tile, band width, k_tile, m_sparse, k_sparse, r)``, or None if the bands cannot all
    have tiles. ``shape``: the layout's block rows and columns, its density and the tile grain. (Kept per
    layout's column ``counts`` and band count: a layout is planned for many batches.)"""
    m_blocks, k_blocks, density, grain = shape
    worst = _worst_band(_bands(counts, sk), tiles, grain)
    if worst is None:
        return None
    blocks_band, tiles_band, k_band = worst
    nz_tile = ceil_div(blocks_band, tiles_band)
    m_tile = ceil_div(m_blocks, tiles_band)
    k_tile = min(math.ceil(blocks_band / density), k_blocks) if m_tile == 1 else k_band
    row_prob = 1.0 - (1.0 - density) ** k_tile
    m_sparse = min(math.ceil(row_prob * m_tile + _spread(row_prob, m_tile)), m_tile)
    col_prob = 1.0 - (1.0 - density) ** m_tile
    k_sparse = min(math.ceil(col_prob * k_tile + _spread(col_prob, k_tile)), k_tile)
    r = max(math.ceil((row_prob * sk + _spread(row_prob, sk)) * k_band / k_tile), 1)
    return nz_tile, k_band, k_tile, m_sparse, k_sparse, r


@lru_cache(maxsize=1 << 16)
def _codelet(vertex, block: int, eb: int, workers: int, rows: int, nonzeros: int, n: int) -> int:
    """The codelet estimate of ``rows`` block rows holding ``nonzeros`` blocks over ``n`` columns (kept: the
    search asks for the same few many times)."""
    if block == 1:
        return int(vertex.elementwise_cycles(rows, nonzeros, n, eb, workers))
    return int(vertex.cycles(rows, nonzeros, n, block, eb, workers, eb))


def _sub_estimate(p: _Problem, vertex, sn, sk, counts, n_part, tiles_part) -> tuple | None:
    """Cycles and bytes of one ``(n per part, tiles per part)`` of a candidate, or None if invalid."""
    geo = _band_geometry(counts, sk, tiles_part, (p.m_blocks, p.k_blocks, p.density, p.tile_grain))
    if geo is None:
        return None
    nz_tile, k_band, k_tile, m_sparse, k_sparse, r = geo
    widest = _bands(counts, sk)[2]
    factor = 1 if p.block == 1 else 8 * p.block
    if widest * p.block * n_part * p.eb > USHORT_MAX * factor:
        return None  # a band's offsets do not fit the metadata type
    e = p.exchange_bytes_per_cycle
    rhs_bytes = n_part * k_sparse * p.block * p.eb
    rhs = int(ceil_div(rhs_bytes, int(2 * e)) * (k_tile / k_sparse))
    nz_bytes = nz_tile * p.block * p.block * p.eb
    nz = ceil_div(nz_bytes, int(e)) if sn > 1 else 0
    compute = _codelet(vertex, p.block, p.eb, p.workers, m_sparse, nz_tile, n_part)
    out_bytes = m_sparse * n_part * p.eb * p.block
    partial_bytes = ceil_div(out_bytes * (r - 1), r)
    move = ceil_div(p.m_blocks * p.block * p.n_pad * p.eb, p.tiles)
    reduce = 0 if r == 1 else _reduce_cycles(ceil_div(out_bytes // p.eb, r), p.eb, r, p.workers)
    cycles = rhs + nz + compute + ceil_div(partial_bytes, int(e)) + reduce + move
    memory = max(rhs_bytes + nz_bytes + out_bytes, partial_bytes + out_bytes)
    return cycles, memory


def _reduce_cycles(outputs: int, eb: int, factor: int, workers: int) -> int:
    """``reductionCycleEstimate`` (a strided reduce of ``factor`` partials per output, input type) [S]."""
    outer = (8 if eb == 2 else 5) + 6 + (factor - 1)
    loops = ceil_div(ceil_div(outputs, workers), 8 if eb == 2 else 4)
    return (16 + loops * outer) * workers


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
    col_count = layout.sum(axis=0).astype(np.int64)
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
    pairs = tiles // tile_grain
    counts_key = col_count.tobytes()  # the band layouts are kept per column counts (:func:`_bands`)
    found: list[tuple[int, int, int, int]] = []  # (cycles, temporary bytes, S_n, S_k) of the valid candidates
    for sn in range(1, n_end + 1):
        sizes = _n_partition(n_pad, sn, grain)
        tiles_n = _tile_partition(sizes, tiles, tile_grain)
        if any(t <= 0 for t in tiles_n):
            continue
        unique = sorted(set(zip(sizes, tiles_n)))
        for sk in range(1, min(k_end, pairs // sn) + 1):
            subs = [_sub_estimate(p, vertex, sn, sk, counts_key, a, b) for a, b in unique]
            if all(sub is not None for sub in subs):
                found.append((max(sub[0] for sub in subs), max(sub[1] for sub in subs), sn, sk))  # type: ignore[index]
    require(
        bool(found),
        "n",
        n,
        f"has no partition PopSparse's static planner accepts for a {m_blocks * block}x{k_blocks * block} "
        f"block-{block} matrix on {tiles} tiles (a band's offsets overflow its 16-bit metadata)",
        "use a smaller batch (split it into several matmuls)",
    )
    within = [f for f in found if f[1] <= bound]
    if not within:
        least = min(f[1] for f in found)
        raise SramOverflowError(
            f"block-sparse matmul (m, k, n) = ({m_blocks * block}, {k_blocks * block}, {n}), block {block}, {nnz} "
            f"blocks on {tiles} tiles: no partition fits: PopSparse's static planner needs {least} B of temporary "
            f"memory on a tile at least > memory_proportion {memory_proportion} x {sram_bytes} B (it stops with "
            f"'Could not find valid partition'); raise the memory proportion, use more tiles, fp16, a lower density "
            f"or a smaller batch"
        )
    cycles, memory, sn, sk = min(within, key=lambda f: f[0])  # ties: the first in PopSparse's order, as it keeps
    bounds, per_band, _ = _bands(counts_key, sk)
    return StaticChoice(sn, len(per_band), bounds, int(cycles), int(memory))
