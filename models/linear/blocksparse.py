"""Static block-sparse x dense matmul on tiles, modelled on PopSparse's static sparse matmul.

``Y^T (m x n) = W (m x k, block-sparse, pattern known at compile time) · X^T (k x n)``; for a layer
``m = n_out``, ``k = n_in``, ``n = batch``. PopSparse (``lib/popsparse/StaticMatMulPartitioner.cpp``;
Li et al. 2023, arXiv:2303.16999) partitions by **non-zero blocks**: the block columns of ``W`` are
cut into ``S_k`` contiguous *bands* of about equal non-zero blocks, the dense columns ``n`` into ``S_n``
parts, and each (band, part) gets ``T_g = tiles // (S_k S_n)`` tiles; ``(S_n, S_k)`` is the one
PopSparse's planner picks (:mod:`tilesim.models.linear.popsparse_plan`). (PopSparse allocates tiles to bands in
proportion to their non-zero blocks; equal groups are used here, which is the same for bands of equal
blocks.) A band's non-zero blocks, in row-major order, are cut into ``T_g`` near-equal contiguous chunks;
tile ``t = (j S_k + b) T_g + c`` holds chunk ``c`` of band ``b`` for part ``j``.

Phases (supersteps):

* ``sparse-mm``: a tile receives the dense rows of ``X^T`` its blocks touch (``k_sparse · B · n_j``
  elements; ``k_sparse`` distinct block columns) and, if ``S_n > 1`` and ``j > 0``, its non-zero values
  (their home is the ``j = 0`` tile, as PopSparse's ``exchangeNZDataCycles`` charges for ``S_n > 1``); home
  tiles send their flat chunk of ``X``. Compute: PopSparse's estimate of its static block codelets
  (:class:`StaticBlockCosts`) plus partials zeroing for FP32 partials.
* the "scatter-add" (PopSparse's ``popops::reduceMany`` of one reduction per block row and dense-column part into
  the result ``out[m/B][n][B]``, mapped linearly with grain ``nGrain · mGrain``; :func:`scatter_add`): every tile
  sends all its partial rows (``B · n_j`` each). ``sparse-reduce-copy``: rows whose partials sit on one tile are
  copied (``reduceWithMap``); ``sparse-reduce``: the others, merged by their number of sources ``d``, are reduced
  by popops' ``STRIDED_REDUCE`` vertices at their output or spread over every tile, whichever popops' own estimate
  prefers; ``sparse-reduce-write``: the spread ones' results written back. Partials are in the input type, as
  ``sparseDenseMatMul`` sets them.

Memory per tile: non-zero values, the ``X`` home chunk and the result's slice (persistent), the received
rows, values and partials and the reduction buffer (temporary; bounded by ``memory_proportion``). No serial
splits (PopSparse's static partitioner has none). Per-vertex worklists (metadata) are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from tilesim.errors import SramOverflowError, require
from tilesim.models.linear.ampestimate import popops_strided_reduce_cycles
from tilesim.models.linear.phases import (
    Phase,
    SuperstepCosts,
    TilePlan,
    as_tile_array,
    ceil_div,
    phases_cycles,
    require_int,
    require_precision,
    split_sizes,
)
from tilesim.models.linear.planner import DEFAULT_MEMORY_PROPORTION, PlanTarget, _check_proportion
from tilesim.models.linear.popsparse_plan import choose_static_partition

__all__ = ["StaticBlockCosts", "BlockSparsePlan", "plan_block_sparse", "weight_grad_phases", "SUPPORTED_BLOCKS"]

SUPPORTED_BLOCKS = (1, 4, 8, 16)
"""Block sizes of PopSparse's static codelets: element-wise (``StaticSparseDenseElementWise``, block 1) and
``StaticBlock{4x4,8x8,16x16}SparseDenseMatMul``."""


def _ints(v):
    """A Python (or NumPy scalar) integer as it is, anything else as an int64 array: the codelet estimates
    below serve both the planner's search (one tile at a time, where NumPy costs ~1 us an operation) and
    the built plan (every tile at once), from the same formulas."""
    return v if isinstance(v, (int, np.integer)) else np.asarray(v, dtype=np.int64)


def _where(cond, a, b):
    """``np.where`` for arrays (an int64 array out), a plain choice for a scalar condition."""
    if isinstance(cond, (bool, np.bool_)):
        return a if cond else b
    return np.where(cond, a, b).astype(np.int64)


def _maximum(a, b):
    """``np.maximum`` for arrays, ``max`` for scalars."""
    return max(a, b) if isinstance(a, (int, np.integer)) else np.maximum(a, b)


@dataclass(frozen=True)
class StaticBlockCosts:
    """Cycles of one PopSparse static block-sparse x dense vertex, PopSparse's own estimate
    (``matmulComputeCycles``, ``lib/popsparse/StaticMatMulPartitioner.cpp``) [S]::

        cycles = 30 + h W + rows (x W + 17 + blocks_per_row (16 + B² bytes / 8 + y(n_w) W))

    ``W = 6`` workers, ``rows`` the distinct block rows on the tile, ``blocks_per_row = ceil(blocks / rows)``,
    ``n_w = ceil(n_j / W)`` dense columns per worker, ``B² bytes / 8`` the 64-bit weight loads; ``h``, ``x``
    and ``y(n)`` per block size and type (the table in :meth:`cycles`). Zeroing of FP32 partials
    (PopSparse's ``zeroingCycles``, skipped for block 4): ``W (12 + ceil(bytes · 8 / 64 / W))`` [S].
    For FP16 block 16 the inner loop is ``4 n_w`` worker cycles per block: 64 MAC/cycle/tile, the AMP rate.
    """

    fixed_cycles: int = 30
    row_cycles: int = 17
    block_cycles: int = 16
    weight_load_bytes_per_cycle: int = 8
    data_path_bits: int = 64
    zeroing_worker_cycles: int = 12

    def y_cycles(self, block: int, element_bytes: int, n_w):
        n_w = _ints(n_w)
        half = element_bytes == 2
        if block == 4:
            return _where(n_w <= 2, 7 + n_w, 13 + n_w) if half else 12 + 4 * (n_w - 1)
        if block == 8:
            return 14 + 2 * (n_w - 1) if half else 19 + 8 * (n_w - 1)
        return 19 + 4 * (n_w - 1) if half else _where(n_w == 1, 58, 2 * (37 + 8 * (n_w - 1)))

    def header_cycles(self, block: int, element_bytes: int) -> tuple:
        """``(h, x)`` of the table (block 4: 17/13, 1; block 8: 13, 1/4; block 16: 13/16, 1/4; FP16/FP32)."""
        half = element_bytes == 2
        if block == 4:
            return (17 if half else 13), 1
        if block == 8:
            return 13, (1 if half else 4)
        return (13 if half else 16), (1 if half else 4)

    def elementwise_cycles(self, rows, nonzeros, n_j, element_bytes: int, workers: int):
        """Cycles of PopSparse's element-wise (block 1) static vertex, its planner's estimate [S]: the
        tile's ``rows`` are split over the workers (``m_w = ceil(rows / W)``), each row holds
        ``k_w = ceil(nonzeros / rows)`` non-zeros and every worker runs all ``n`` dense columns::

            fp16: W (33 + m_w (11 + (n div 8)(14 + 3(k_w - 1)) + [n mod 8 > 0](9 + 2(k_w - 1))))
            fp32: W (31 + m_w (12 + (n div 4)(10 + 3(k_w - 1)) + [n mod 4 > 0](10 + 2(k_w - 1))))

        with fp16 n = 4 (``31 + m_w (7 + 2(k_w - 1))``) and n = 8 (``31 + m_w (8 + 3(k_w - 1))``) and fp32
        n = 2 (``29 + m_w (5 + 2(k_w - 1))``) and n = 4 (``30 + m_w (6 + 3(k_w - 1))``) specialised. No
        partials zeroing (the planner charges none for block 1)."""
        rows = _maximum(_ints(rows), 1)
        n = _ints(n_j)
        m_w = -(-rows // workers)
        k1 = -(-_ints(nonzeros) // rows) - 1
        if element_bytes == 2:
            general = 33 + m_w * (11 + (n // 8) * (14 + 3 * k1) + (n % 8 > 0) * (9 + 2 * k1))
            per = _where(n == 4, 31 + m_w * (7 + 2 * k1), _where(n == 8, 31 + m_w * (8 + 3 * k1), general))
        else:
            general = 31 + m_w * (12 + (n // 4) * (10 + 3 * k1) + (n % 4 > 0) * (10 + 2 * k1))
            per = _where(n == 2, 29 + m_w * (5 + 2 * k1), _where(n == 4, 30 + m_w * (6 + 3 * k1), general))
        return workers * per

    def cycles(self, rows, blocks, n_j, block: int, element_bytes: int, workers: int, partials_bytes: int):
        """Per-tile vertex cycles (0 where a tile has no block); block 1 is :meth:`elementwise_cycles`. Python
        integers in, a Python integer out (the planner's search costs one tile at a time)."""
        rows, blocks, n_j = _ints(rows), _ints(blocks), _ints(n_j)
        if block == 1:
            cyc = self.elementwise_cycles(rows, blocks, n_j, element_bytes, workers)
            return _where(blocks > 0, cyc, 0)
        h, x = self.header_cycles(block, element_bytes)
        per_row = -(-blocks // _maximum(rows, 1))
        n_w = _maximum(-(-n_j // workers), 1)
        load = block * block * element_bytes // self.weight_load_bytes_per_cycle
        cyc = (
            self.fixed_cycles
            + h * workers
            + rows
            * (
                x * workers
                + self.row_cycles
                + per_row * (self.block_cycles + load + self.y_cycles(block, element_bytes, n_w) * workers)
            )
        )
        if partials_bytes == 4 and block != 4:
            zero_bytes = rows * block * n_j * partials_bytes
            cyc = cyc + workers * (self.zeroing_worker_cycles + -(-(zero_bytes * 8 // self.data_path_bits) // workers))
        return _where(blocks > 0, cyc, 0)


@dataclass(frozen=True)
class BlockSparsePlan(TilePlan):
    """A partition of a static block-sparse x dense matmul (module docstring) and its per-tile costs.

    Scalars: ``m, k, n``, ``block``, ``nnz_blocks``, ``bands`` (``S_k``), ``n_split`` (``S_n``),
    ``tiles_per_group`` (``T_g``), ``predicted_cycles``, ``memory_proportion``, ``within_proportion``.
    Per-tile int64 arrays: ``blocks`` (non-zero blocks), ``rows``/``cols`` (distinct block rows/columns
    they touch), ``part_cols`` (``n_j``, dense columns of the tile's part), ``macs``; memory
    ``weight_bytes``, ``home_bytes``
    (``X`` home chunk), ``output_bytes`` (owned output rows), ``operand_bytes`` (received rows and values),
    ``partial_bytes`` (partials + reduction buffer), ``data_bytes`` (sum), ``temp_bytes`` (operand +
    partial). ``estimate_temp_bytes``: PopSparse's planner estimate of the temporary bytes, what the memory
    proportion bounds (the built plan's ``temp_bytes`` can exceed it).
    """

    BYTE_FIELDS = ("weight_bytes", "home_bytes", "output_bytes", "operand_bytes", "partial_bytes")

    m: int
    k: int
    n: int
    tiles: int
    block: int
    precision: str
    partials_precision: str
    nnz_blocks: int
    bands: int
    n_split: int
    tiles_per_group: int
    blocks: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    part_cols: np.ndarray
    macs: np.ndarray
    weight_bytes: np.ndarray
    home_bytes: np.ndarray
    output_bytes: np.ndarray
    operand_bytes: np.ndarray
    partial_bytes: np.ndarray
    phases: tuple
    predicted_cycles: int
    memory_proportion: float = DEFAULT_MEMORY_PROPORTION
    within_proportion: bool = True
    estimate_temp_bytes: int = 0
    data_bytes: np.ndarray = field(init=False)
    temp_bytes: np.ndarray = field(init=False)

    def __post_init__(self):
        self._tile_arrays()
        require(
            int(self.macs.sum()) == self.nnz_blocks * self.block**2 * self.n,
            "plan MACs",
            int(self.macs.sum()),
            f"must equal nnz_blocks B² n = {self.nnz_blocks * self.block**2 * self.n}",
            "",
        )
        data = self.weight_bytes + self.home_bytes + self.output_bytes + self.operand_bytes + self.partial_bytes
        object.__setattr__(self, "data_bytes", as_tile_array("data_bytes", data, self.tiles))
        object.__setattr__(
            self, "temp_bytes", as_tile_array("temp_bytes", self.operand_bytes + self.partial_bytes, self.tiles)
        )

    @property
    def title(self) -> str:
        return (
            f"static block-sparse matmul (m, k, n) = ({self.m}, {self.k}, {self.n}), block {self.block}, "
            f"{self.nnz_blocks} non-zero blocks (density {self.density:.4g}), {self.precision}, "
            f"partials {self.partials_precision}"
        )

    @property
    def density(self) -> float:
        return self.nnz_blocks * self.block**2 / (self.m * self.k)

    @property
    def tiles_used(self) -> int:
        return self.bands * self.n_split * self.tiles_per_group

    def partition_text(self) -> str:
        return (
            f"partition: {self.bands} column bands (S_k) x {self.n_split} dense-column parts (S_n) x "
            f"{self.tiles_per_group} tiles each = {self.tiles_used} of {self.tiles} tiles; at most "
            f"{int(self.blocks.max())} non-zero blocks per tile"
        )


def _chunk_stats(ordered: BandOrder, group: np.ndarray, sizes: np.ndarray, groups: int):
    """Per group: blocks, distinct rows and distinct columns. Rows never decrease inside a group (a
    chunk of a band's row-major blocks), so a group's distinct rows start where the row changes or a
    group starts; columns are counted on a ``[groups, width]`` incidence of the columns inside each band."""
    new = ordered.row_change.copy()
    starts = np.cumsum(sizes)[:-1]
    new[starts[starts < new.size]] = True
    seen = np.zeros(groups * ordered.width, dtype=bool)
    seen[group * ordered.width + ordered.local_cols] = True
    return (
        np.bincount(group, minlength=groups),
        np.bincount(group[new], minlength=groups),
        np.count_nonzero(seen.reshape(groups, ordered.width), axis=1),
    )


@dataclass(frozen=True)
class BandOrder:
    """The non-zero blocks ordered by column band, row-major inside a band: their rows, columns,
    band, column inside the band, where the row changes, and the widest band."""

    rows: np.ndarray
    cols: np.ndarray
    band: np.ndarray
    local_cols: np.ndarray
    row_change: np.ndarray
    width: int


_LAST_NONZERO: list = [None, None]
"""The last read-only layout :func:`_nonzero` saw and its non-zero blocks (a layout is planned for many
batches and band counts; ``np.flatnonzero`` of a 4096-wide element-wise mask takes ~0.05 s)."""

_BAND_ORDERS: list = []
"""The last few ``(layout, boundaries, BandOrder)`` of read-only layouts :func:`_band_order` gave (the batches
of one layout often get the same bands)."""


def _nonzero(layout: np.ndarray) -> tuple:
    """The row-major indices of ``layout``'s non-zeros (``np.flatnonzero``) and their columns, kept for the last
    read-only layout (one that cannot change under the cache)."""
    if _LAST_NONZERO[0] is layout:
        return _LAST_NONZERO[1]
    flat = np.flatnonzero(layout)
    found = (flat, flat % layout.shape[1])
    if not layout.flags.writeable:
        for a in found:
            a.setflags(write=False)
        _LAST_NONZERO[:] = [layout, found]
    return found


def _band_order(layout: np.ndarray, boundaries: tuple) -> BandOrder:
    """Every non-zero block ordered by column band (``boundaries``: the bands' first block columns and
    the end), then row-major inside the band. A row's blocks in band ``b`` are one run of the row-major
    non-zeros ``flat``, from ``searchsorted(flat, r C + s_b)`` to ``searchsorted(flat, r C + s_(b+1))`` (``C``
    block columns): the order is the runs taken band by band, then row by row (no sort), and the row changes at
    the first block of every run. Kept for the last few read-only layouts (read-only arrays)."""
    for lay, bounds, found in _BAND_ORDERS:
        if lay is layout and bounds == boundaries:
            return found
    flat, cols0 = _nonzero(layout)
    nrows, ncols = layout.shape
    edges = np.asarray(boundaries, dtype=np.int64)
    start, widths = edges[:-1], edges[1:] - edges[:-1]
    at = np.searchsorted(flat, (np.arange(nrows, dtype=np.int64) * ncols)[:, None] + edges[None, :])
    length = np.diff(at, axis=1).T.ravel()  # the runs (band, row), band-major
    first = np.cumsum(length) - length  # where each run goes
    rows = np.repeat(np.tile(np.arange(nrows, dtype=np.int64), start.size), length)
    source = np.repeat(at[:, :-1].T.ravel() - first, length)
    source += np.arange(source.size)
    cols = cols0[source]
    ends = np.cumsum(length.reshape(start.size, nrows).sum(axis=1)).tolist()
    band, local = np.empty_like(rows), np.empty_like(cols)
    for b, (lo, hi) in enumerate(zip([0, *ends[:-1]], ends)):
        band[lo:hi] = b
        np.subtract(cols[lo:hi], start[b], out=local[lo:hi])
    change = np.zeros(rows.size, dtype=bool)
    change[first[length > 0]] = True
    found = BandOrder(rows, cols, band, local, change, int(widths.max()))
    if not layout.flags.writeable:
        for a in (rows, cols, band, local, change):
            a.setflags(write=False)
        _BAND_ORDERS[:] = [(layout, boundaries, found)] + _BAND_ORDERS[:1]
    return found


def _group_blocks(ordered: BandOrder, bands: int, tg: int) -> tuple:
    """The group ``band · tg + chunk`` of every block of ``ordered`` (chunk ``c`` of a band is a
    near-equal contiguous split of the band's blocks into ``tg`` chunks) and the groups' sizes."""
    count = np.bincount(ordered.band, minlength=bands)
    base, rem = count // tg, count % tg  # the first ``rem`` chunks of a band hold one block more
    sizes = (base[:, None] + (np.arange(tg)[None, :] < rem[:, None])).ravel()
    return np.repeat(np.arange(bands * tg), sizes), sizes


def _sparse_mm_phase(macs, compute, bytes_in, bytes_out, blocks_t, rows_t, cols_t, recv_vals, unit) -> Phase:
    """``sparse-mm``: one vertex per tile with blocks (3 + 2 edges per block row), on the AMP (blocks of 4,
    8, 16) or the workers' vector path (element-wise, ``unit`` "vector"); exchange instructions: a receive
    per column block and per weight copy, plus the sends spread over the tiles."""
    one = (blocks_t > 0).astype(np.int64)
    recv = cols_t + (recv_vals > 0)
    return Phase(
        "sparse-mm",
        unit,
        macs,
        compute,
        bytes_in,
        bytes_out,
        one,
        (3 + 2 * rows_t) * one,
        recv + split_sizes(int(recv.sum()), blocks_t.size),
    )


def _reduce_phase(
    recv_el: np.ndarray, send_el: np.ndarray, pb: int, costs: SuperstepCosts, compute: np.ndarray | None = None
) -> Phase:
    """``sparse-reduce``: every tile sends its ``send_el`` partial elements to the tiles of the output
    (PopSparse's ``reduceMany`` into a linearly mapped result), each of which receives ``recv_el`` partials
    of its slice and adds them, in the partials type (``pb`` bytes): ``compute`` cycles per tile (popops'
    reduce vertices, :func:`scatter_add`), or the vector unit's rate if None."""
    red_in, red_out = recv_el * pb, send_el * pb
    has = (recv_el > 0).astype(np.int64)
    return Phase(
        "sparse-reduce",
        "vector",
        recv_el,
        costs.vector_cycles(recv_el, pb) if compute is None else compute,
        red_in,
        red_out,
        has,
        3 * has,
        2 * (red_in > 0) + 2 * (red_out > 0),
    )


def _copy_phase(recv_el: np.ndarray, send_el: np.ndarray, eb: int, name: str) -> tuple:
    """An exchange with no compute (``name``), none if no tile sends: ``sparse-reduce-copy``, the rows whose
    partials sit on one tile copied to the output (``reduceMany`` runs the merged reduction of ``in.dim(0) = 1`` as
    ``reduceWithMap``, a ``Copy`` program, before the others' compute set: they are sorted by ``in.dim(0)``) [S],
    or ``sparse-reduce-write``, the results of reductions spread away from their output written back after the
    compute set (:func:`reduce_at_destination`)."""
    if not send_el.any():
        return ()
    zero = np.zeros_like(recv_el)
    b_in, b_out = recv_el * eb, send_el * eb
    return (Phase(name, "vector", zero, zero, b_in, b_out, zero, zero, 2 * (b_in > 0) + 2 * (b_out > 0)),)


REDUCE_VERTICES = ("popops", "vector")
"""How the scatter-add is costed: ``"popops"`` (the default: as popops' ``reduceMany`` builds it,
:func:`scatter_add`) or ``"vector"`` (before issue 40: every partial to a result spread evenly over the tiles, added
at the vector unit's rate in one superstep)."""


@dataclass(frozen=True)
class ScatterAdd:
    """PopSparse's "scatter-add" of the partials (``reduceMany`` in ``constructGraph``,
    ``lib/popsparse/StaticMatMul.cpp``), per tile: ``out_el`` output elements owned, ``copy_in_el`` elements
    received by the ``Copy`` of single-source rows, ``reduce_in_el`` partial elements received by the reduction,
    ``compute`` its compute-set cycles, and ``write_in_el`` / ``write_out_el`` the results of reductions done
    away from their output, received / sent after the compute set (:func:`scatter_add`)."""

    out_el: np.ndarray
    copy_in_el: np.ndarray
    reduce_in_el: np.ndarray
    compute: np.ndarray
    write_in_el: np.ndarray
    write_out_el: np.ndarray


def row_sources(ordered: BandOrder, group: np.ndarray, sizes: np.ndarray, block_rows: int) -> tuple:
    """Per block row, the tiles of one dense-column part holding its partials (distinct (row, chunk) pairs:
    rows never decrease inside a chunk), and for each chunk how many of its rows have that one source."""
    new = ordered.row_change.copy()
    starts = np.cumsum(sizes)[:-1]
    new[starts[starts < new.size]] = True
    sources = np.bincount(ordered.rows[new], minlength=block_rows)
    single = new & (sources[ordered.rows] == 1)
    return sources, np.bincount(group[single], minlength=sizes.size)


def _reduce_workers(seg_d: np.ndarray, workers: int) -> np.ndarray:
    """Workers each merged reduction may use on a tile, by source count ``d`` (index): ``reduceMany`` merges the
    reductions of equal ``in.dim(0)`` (= ``d``), and ``ReduceManyInfo::assignWorkers`` gives each 2 workers when
    more than ``W`` merged reductions remain, else ``ceil(W · merged_d / all)`` (``popops/reduction``) [S]."""
    count = np.bincount(seg_d[seg_d > 0])
    merged = int((count > 0).sum())
    if merged > workers:
        return np.full(count.size, 2, dtype=np.int64)
    return -(-workers * count // max(int(count.sum()), 1))


def _output_pieces(sources: np.ndarray, n: int, n_split: int, block: int, eb: int, tiles: int) -> tuple:
    """The output ``out[m/B][n][B]`` cut where a tile's slice or a (block row, part) reduction ends: per piece its
    tile, width and the reduction's source count ``d``. ``constructGraph`` maps ``out`` linearly with grain
    ``nGrain · mGrain`` (``getVectorWidth``: 4 FP16 / 2 FP32 elements, squared for ``B > 1``) [S]; also every
    reduction's ``d``."""
    vw = 8 // eb
    grain = vw * (vw if block > 1 else 1)
    total = sources.size * n * block
    per = ceil_div(ceil_div(total, grain), tiles) * grain
    offsets = np.concatenate([[0], np.cumsum(split_sizes(n, n_split))[:-1]]) * block
    seg_start = (np.arange(sources.size)[:, None] * n * block + offsets[None, :]).ravel()
    seg_d = np.repeat(sources, n_split)
    cuts = np.unique(np.concatenate([seg_start, np.arange(0, total, per), [total]]))
    d = seg_d[np.searchsorted(seg_start, cuts[:-1], side="right") - 1]
    return cuts[:-1] // per, np.diff(cuts), d, seg_d


def reduce_at_destination(at_tile: np.ndarray, d: int, pb: int, tiles: int, sync: int, bytes_per_cycle: float) -> bool:
    """popops' ``shouldReduceAtDestination`` (``lib/popops/reduction/ReductionPlan.cpp``) for a merged reduction of
    ``d`` partials whose outputs sit ``at_tile`` elements per tile, partials of ``pb`` bytes [S]: at the destination
    costs ``E pb / x + d ceil(E / v) + sync`` (``E`` its most elements on a tile, ``v`` = 8 / ``pb``); spread over
    every tile ``E_b = 8 ceil(ceil(O / 8) / tiles)`` (``O`` its outputs) costs ``E_b d pb / x + d ceil(E_b / v) +
    E pb / x + 2 sync``: the results are written back in ``reducedType``, the final stage's ``inVertexType``, which
    is the partials' own type here (``reduceFirstDim2D`` passes ``in.elementType()`` when the partials go straight to
    their final stage, and ``intermediateToOutput`` casts them to FP32 only for a one-element output or partial,
    which PopSparse's grains rule out). ``sync``: ``getMaxIPUSyncDelay``, taken as the model's sync [D]."""
    most, total, vw = int(at_tile.max()), int(at_tile.sum()), 8 // pb
    dest = math.ceil(most * pb / bytes_per_cycle) + d * ceil_div(most, vw) + sync
    spread = 8 * ceil_div(ceil_div(total, 8), tiles)
    balanced = math.ceil(spread * d * pb / bytes_per_cycle) + d * ceil_div(spread, vw)
    return dest < balanced + math.ceil(most * pb / bytes_per_cycle) + 2 * sync


def final_stage_grains(pb: int) -> tuple:
    """``(vertex grain, spread grain, spread minimum)`` in elements of popops' final reduction stage
    (``intermediateToOutput``, ``lib/popops/reduction/ReductionStages.cpp``) for partials of ``pb`` bytes, its
    ``inVertexType`` [S]: ``findGrainSizeForOp`` (ADD: twice the vector width) splits a tile's outputs between
    workers; a spread reduction's temporary output is mapped by ``calcLinearTileMapping`` with the vector width as
    grain and ``4 ·`` the vector width a tile at least (FP16: 8, 4, 16; FP32: 4, 2, 8)."""
    vw = 8 // pb
    return 2 * vw, vw, 4 * vw


def _tile_reduce_cycles(t_k, d_k, elems, split, eb: int, tiles: int, workers: int) -> np.ndarray:
    """A tile's reduce compute set: ``split`` vertices of whole grains (:func:`final_stage_grains`,
    ``splitOutputRegionsForWorkers``) per (tile ``t_k``, merged reduction ``d_k``) of ``elems`` outputs, each a
    ``STRIDED_REDUCE`` vertex; the workers take the vertices as they free up, the busiest taken as
    ``max(longest vertex, all vertices / W)`` [D]."""
    grain = final_stage_grains(eb)[0]
    grains = ceil_div(elems, grain)
    split = np.minimum(split, grains)
    cyc = popops_strided_reduce_cycles(np.minimum(elems, ceil_div(grains, split) * grain), d_k, eb == 4)
    cyc = cyc.astype(np.int64)
    longest = np.zeros(tiles, dtype=np.int64)
    np.maximum.at(longest, t_k, cyc)
    shared = ceil_div(np.bincount(t_k, weights=split * cyc, minlength=tiles).astype(np.int64), workers)
    return workers * np.maximum(longest, shared)


def scatter_add(sources: np.ndarray, n: int, n_split: int, block: int, eb: int, tiles: int, workers: int, costs):
    """Per tile, the :class:`ScatterAdd` (``reduceMany``, ``lib/popops/reduction/Reduction.cpp``) of the output
    pieces (:func:`_output_pieces`): one reduction per (block row, part) of ``d`` sources (``sources``); ``d = 0``
    rows are left alone (their zeroing ``Copy`` is never added to the program), ``d = 1`` is a ``Copy``
    (``reduceWithMap``: one type), ``d >= 2`` reductions are merged by ``d`` and each goes straight to its final
    stage (``calculateNextStep``: the partials cover most tiles with a low fan-in), one compute set in all,
    reduced at its output or spread over every tile and written back (:func:`reduce_at_destination`; spread:
    ``calcLinearTileMapping`` with the grains of :func:`final_stage_grains`, each merged reduction starting where
    the last ended [D] — popops starts it at a hashed tile), on :func:`_reduce_workers` vertices a tile
    (:func:`_tile_reduce_cycles`) [S]. popops' two-stage split of a tile's partials (``connectReductions``,
    ``splitTwoStageReductionsBetweenWorkers``) is not ported: it is tried only on a tile left with fewer output
    regions than workers, and its 30-cycle second-stage overhead declines it unless a region's adds exceed ~60
    cycles (not at n = 4)."""
    tile, width, d, seg_d = _output_pieces(sources, n, n_split, block, eb, tiles)
    out_el = np.bincount(tile, weights=width, minlength=tiles).astype(np.int64)
    copy_in = np.bincount(tile, weights=width * (d == 1), minlength=tiles).astype(np.int64)
    zero = np.zeros(tiles, dtype=np.int64)
    red_in, write_in, write_out, compute = zero.copy(), zero.copy(), zero.copy(), zero
    ent_t, ent_d, ent_e, start = [], [], [], 0
    _, vw, least = final_stage_grains(eb)
    for dv in np.unique(d[d > 1]).tolist():
        sel = d == dv
        at = np.bincount(tile[sel], weights=width[sel], minlength=tiles).astype(np.int64)
        if reduce_at_destination(at, dv, eb, tiles, int(costs.sync_cycles), costs.exchange_bytes_per_cycle):
            spread = at
        else:
            total = int(at.sum())
            chunk = max(vw * ceil_div(ceil_div(total, vw), tiles), least)
            idx = (start + np.arange(ceil_div(total, chunk))) % tiles
            start += idx.size
            spread = np.bincount(idx, weights=split_sizes(total, idx.size), minlength=tiles).astype(np.int64)
            write_in += at
            write_out += spread
        held = np.flatnonzero(spread)
        ent_t.append(held), ent_d.append(np.full(held.size, dv)), ent_e.append(spread[held])
        red_in += spread * dv
    if ent_t:
        t_k, d_k, e_k = np.concatenate(ent_t), np.concatenate(ent_d), np.concatenate(ent_e)
        compute = _tile_reduce_cycles(t_k, d_k, e_k, _reduce_workers(seg_d, workers)[d_k], eb, tiles, workers)
    return ScatterAdd(out_el, copy_in, red_in, compute, write_in, write_out)


def _build(layout, n, boundaries, n_split, tiles, block, eb, workers, costs, vertex, memory_proportion, reduce_vertex):
    nbr, nbc = layout.shape
    m, k = nbr * block, nbc * block
    bands = len(boundaries) - 1
    tg = tiles // (bands * n_split)
    ordered = _band_order(layout, boundaries)
    group, sizes = _group_blocks(ordered, bands, tg)
    groups = bands * tg
    nblk, nrows, ncols = _chunk_stats(ordered, group, sizes, groups)

    used = groups * n_split
    t = np.arange(tiles)
    active = t < used
    g = np.where(active, t % groups, 0)
    j = np.where(active, t // groups, 0)
    n_j = np.where(active, split_sizes(n, n_split)[j], 0)
    blocks_t = np.where(active, nblk[g], 0)
    rows_t = np.where(active, nrows[g], 0)
    cols_t = np.where(active, ncols[g], 0)
    macs = blocks_t * block * block * n_j
    compute = vertex.cycles(rows_t, blocks_t, n_j, block, eb, workers, eb)
    home = split_sizes(n * k, tiles)
    weight_bytes = np.where(j == 0, blocks_t, 0) * block * block * eb
    recv_vals = (
        np.where((j > 0) & active, blocks_t, 0) * block * block * eb if n_split > 1 else np.zeros(tiles, np.int64)
    )
    send_vals = weight_bytes if n_split > 1 else np.zeros(tiles, np.int64)
    rows_in = cols_t * block * n_j * eb
    bytes_in = rows_in + recv_vals
    bytes_out = home * eb + send_vals
    mm = _sparse_mm_phase(
        macs, compute, bytes_in, bytes_out, blocks_t, rows_t, cols_t, recv_vals, "vector" if block == 1 else "amp"
    )
    # every partial row goes to the linearly mapped result (PopSparse's reduceMany "scatter-add" [S])
    send_el = rows_t * block * n_j
    if reduce_vertex == "popops":
        sources, single = row_sources(ordered, group, sizes, nbr)
        sa = scatter_add(sources, n, n_split, block, eb, tiles, workers, costs)
        single_el = np.where(active, single[g], 0) * block * n_j
        out_el, recv_el = sa.out_el, sa.reduce_in_el + sa.copy_in_el
        phases = (
            mm,
            *_copy_phase(sa.copy_in_el, single_el, eb, "sparse-reduce-copy"),
            _reduce_phase(sa.reduce_in_el, send_el - single_el, eb, costs, sa.compute),
            *_copy_phase(sa.write_in_el, sa.write_out_el, eb, "sparse-reduce-write"),
        )
    else:
        recv_el = split_sizes(int(send_el.sum()), tiles)
        out_el = split_sizes(m * n, tiles)
        phases = (mm, _reduce_phase(recv_el, send_el, eb, costs))
    return BlockSparsePlan(
        m,
        k,
        n,
        tiles,
        block,
        {2: "fp16", 4: "fp32"}[eb],
        {2: "fp16", 4: "fp32"}[eb],
        int(layout.sum()),
        bands,
        n_split,
        tg,
        blocks_t,
        rows_t,
        cols_t,
        n_j,
        macs,
        weight_bytes,
        home * eb,
        out_el * eb,
        bytes_in,
        (send_el + recv_el) * eb,
        phases,
        phases_cycles(phases, costs),
        float(memory_proportion),
    )


def plan_block_sparse(
    layout,
    n: int,
    target: PlanTarget,
    *,
    block: int,
    workers: int,
    tile_grain: int = 2,
    vertex: StaticBlockCosts = StaticBlockCosts(),
    reduce_vertex: str = "popops",
) -> BlockSparsePlan:
    """The partition PopSparse's static planner picks for ``W (layout, block) · X^T (k x n)``
    (:func:`~tilesim.models.linear.popsparse_plan.choose_static_partition`: its own estimate over every
    ``(S_n, S_k)``, temporary bytes bounded by ``memory_proportion · sram_bytes``), built and costed tile
    by tile; :class:`~tilesim.errors.SramOverflowError` if that plan does not fit ``sram_bytes``.
    ``layout``: bool block mask ``(m / block, k / block)``; ``workers``: the chip's worker contexts per
    tile; ``tile_grain``: tiles that share an exchange bus (PopSparse gives bands whole pairs). Partials
    are in the input type, as ``sparseDenseMatMul`` sets them [S]. ``reduce_vertex``: how the partials'
    reduction is costed (:data:`REDUCE_VERTICES`)."""
    tiles, sram_bytes, precision, costs = target.tiles, target.sram_bytes, target.precision, target.costs
    overheads, memory_proportion = target.overheads, target.memory_proportion
    layout = np.asarray(layout, dtype=bool)
    require(
        layout.ndim == 2 and layout.any(),
        "layout",
        layout.shape,
        "must be a 2-D block mask with a block",
        "use tilesim.models.linear.layers.random_block_layout",
    )
    require(
        block in SUPPORTED_BLOCKS,
        "block",
        block,
        f"must be one of {SUPPORTED_BLOCKS}",
        "PopSparse's static codelets exist for element-wise (1) and 4x4, 8x8 and 16x16 blocks",
    )
    for name, v in (("n", n), ("tiles", tiles), ("sram_bytes", sram_bytes), ("workers", workers)):
        require_int(name, v)
    require_int("tile_grain", tile_grain)
    _check_proportion(memory_proportion)
    require(
        reduce_vertex in REDUCE_VERTICES,
        "reduce_vertex",
        reduce_vertex,
        f"must be one of {REDUCE_VERTICES}",
        "popops: PopSparse's reduce vertices; vector: adds at the vector rate",
    )
    eb = require_precision("precision", precision)
    choice = choose_static_partition(
        layout,
        n,
        block=block,
        element_bytes=eb,
        tiles=tiles,
        workers=workers,
        exchange_bytes_per_cycle=costs.exchange_bytes_per_cycle,
        tile_grain=tile_grain,
        sram_bytes=sram_bytes,
        memory_proportion=memory_proportion,
        vertex=vertex,
    )
    plan = _build(
        layout, n, choice.boundaries, choice.n_split, tiles, block, eb, workers, costs, vertex, memory_proportion,
        reduce_vertex,
    )  # fmt: skip
    plan = replace(plan, estimate_temp_bytes=int(choice.estimate_bytes))
    used = plan.memory_bytes(overheads)
    if int(used.max()) > sram_bytes:
        raise SramOverflowError(
            f"block-sparse matmul (m, k, n) = ({plan.m}, {plan.k}, {n}), block {block}, {plan.nnz_blocks} blocks, "
            f"{precision} on {tiles} tiles: PopSparse's partition ({plan.bands} bands x {plan.n_split} parts) needs "
            f"{int(used.max())} B on its fullest tile > sram_bytes = {sram_bytes} B; use more tiles, "
            f"fp16, a lower density or a smaller batch",
            tiles=[int(np.argmax(used))],
        )
    return plan


def weight_grad_phases(
    fwd: BlockSparsePlan, eb: int, pb: int, workers: int, costs: SuperstepCosts, vertex: StaticBlockCosts
):
    """Weight gradient ``grad_blocks = g^T x`` on the forward partition: a tile computes its blocks over its
    part's ``n_j`` columns (receiving the ``g`` rows and ``x`` rows its blocks touch; the same codelet
    loop structure and estimate as the forward, an assumption [D]: PopSparse's static API has no
    weight-gradient codelet), then the ``S_n`` partial gradients of each block are reduced, every tile
    adding one ``1/S_n`` slice."""
    bsq = fwd.block * fwd.block
    b_in = (fwd.rows + fwd.cols) * fwd.block * fwd.part_cols * eb
    home = split_sizes(fwd.n * (fwd.m + fwd.k), fwd.tiles) * eb
    one = (fwd.blocks > 0).astype(np.int64)
    cyc = vertex.cycles(fwd.rows, fwd.blocks, fwd.part_cols, fwd.block, eb, workers, pb)
    phases = [
        Phase(
            "sparse-wgrad",
            "amp",
            fwd.macs,
            cyc,
            b_in,
            home,
            one,
            (3 + 2 * fwd.cols) * one,
            (fwd.rows + fwd.cols) * one + split_sizes(int(((fwd.rows + fwd.cols) * one).sum()), fwd.tiles),
        )
    ]
    data = b_in + fwd.blocks * bsq * pb + home
    if fwd.n_split > 1:
        # the S_n tiles holding the same blocks each own 1/S_n of their gradient elements and add the
        # other S_n - 1 copies of that slice (as the P_k reduction of a dense matmul)
        elems = fwd.blocks * bsq
        active = np.arange(fwd.tiles) < fwd.tiles_used
        own = np.where(active, -(-elems // fwd.n_split), 0)
        recv = (fwd.n_split - 1) * own * pb
        send = np.maximum(elems - own, 0) * pb
        adds = (fwd.n_split - 1) * own
        has = (adds > 0).astype(np.int64)
        phases.append(
            Phase(
                "sparse-wgrad-reduce",
                "vector",
                adds,
                costs.vector_cycles(adds, pb),
                recv,
                send,
                has,
                (fwd.n_split + 1) * has,
                2 * (fwd.n_split - 1) * has,
            )
        )
        data = data + recv
    return tuple(phases), data
