"""Dynamic sparse x dense matmul on tiles, modelled on PopSparse's ``popsparse::dynamic`` matmul.

The pattern is known only at run time, so PopSparse plans from the **density** alone
(``lib/popsparse/FullyConnectedPlan.cpp``; the design note "PopSparse Matrix Multiplication (Dynamic
Pattern) on the IPU") [S]. The output rows (``X = m``), input features (``Y = k``) and batch (``Z = n``,
grouped by the vector width for element-wise sparsity) are cut into ``P_x x P_y x P_z`` partitions, one per
tile: ``P_x, P_y`` any count that leaves no part empty, ``P_z`` a factor of the batch groups. Every tile
holds one **bucket** of non-zeros sized for the non-zeros spread over *every* tile used, with
``metaInfoBucketOversizeProportion`` headroom (0.3), and meta-info sized for its whole ``(x, y)`` partition
(``addMetaInfoElemsPerBucket``); the host cuts each ``(x, y)`` partition's non-zeros row-major into the
``P_z`` buckets of its tiles (``getTilePartition``). A uniformly random pattern fits its buckets, so the
propagation phase (buckets passed round when one overflows) is charged memory only, as PopSparse's
planner does. The partition is **PopSparse's choice** (:func:`_search`: the fewest cycles of its own
estimate, ``addEstimates``, among partitions whose temporary bytes meet ``availableMemoryProportion``),
then timed as it runs. The estimate is of **two passes**: ``popsparse::dynamic::sparseDenseMatMul`` plans its
fully connected op with ``doGradAPass = true`` (``MatMulUtils.cpp``, ``getFullyConnectedOptions``), so the
planner minimises the forward's cycles *plus* those of the GradA pass on the same partition with X and Y
swapped (``toGradA``; shared buckets, so the element-wise transpose codelet and, for blocks, buckets
transposed on tile) and bounds the larger of the two passes' temporary bytes (``createPlan``). The forward
alone is then timed on that partition, which is not always the forward's fastest. Supersteps (phases):

* ``dyn-distribute``: every tile receives its whole dense input slice ``Y_p x Z_p`` — not only the
  columns its blocks touch, which a pattern-agnostic plan cannot know — and the ``P_z`` buckets of its
  ``(x, y)`` partition (values and meta-info, whole bucket tensors);
* ``dyn-mm``: the codelet walks the ``P_z`` buckets one after another, a worker pass per bucket (the
  supervisor syncs between sub-groups), each costed by PopSparse's codelet estimate (:class:`DynamicCosts`,
  rows and non-zeros per row from the uniform-pattern expectation
  ``getNumGroupsGivenUniformSparsityPattern``), plus zeroing the partials (FP32 by default);
* ``dyn-reduce`` (``P_y > 1``): the ``P_y`` partials of each output are exchanged all-to-all within the
  ``(x, z)`` group and reduced into the output type (``getReduceCycleEstimate``); else ``dyn-cast`` of FP32
  partials to an FP16 result (``getCastCycleEstimate``).

The GradA pass (a layer's backward, :attr:`DynamicSparsePlan.grad_a_phases`) runs the same supersteps on the same
tiles with the roles swapped: the output gradient's slice in, buckets transposed on tile (blocks), the transpose
codelet, and the ``P_x`` partials of each input gradient reduced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from tilesim.errors import SramOverflowError, require
from tilesim.models.linear.phases import (
    Phase,
    TilePlan,
    as_tile_array,
    ceil_div,
    phases_cycles,
    require_int,
    require_precision,
)
from tilesim.models.linear.planner import DEFAULT_MEMORY_PROPORTION, PlanTarget, _check_proportion
from tilesim.models.linear.popsparse_plan import _powers

__all__ = ["DynamicCosts", "DynamicSparsePlan", "plan_dynamic_sparse", "DYNAMIC_BLOCKS", "BUCKET_OVERSIZE"]

DYNAMIC_BLOCKS = (1, 4, 8, 16)
"""Block sizes of PopSparse's dynamic codelets (element-wise and ``SparseDenseMatMulBlock`` 4, 8, 16)."""

BUCKET_OVERSIZE = 0.3
"""``metaInfoBucketOversizeProportion``, PopSparse's default headroom of a bucket [S]."""


def _choose(cond, a, b):
    """``a if cond else b``; ``np.where`` where ``cond`` is an array. The estimates below take numbers (the
    chosen split, as it runs) or arrays (:func:`_search` scores every split at once) through the same formulas."""
    return np.where(cond, a, b) if isinstance(cond, np.ndarray) else (a if cond else b)


def _least(a, b):
    """``min`` of numbers, ``np.minimum`` if either is an array."""
    return np.minimum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else min(a, b)


def _most(a, b):
    """``max`` of numbers, ``np.maximum`` if either is an array."""
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else max(a, b)


def _whole(x, rounding=math.ceil):
    """``rounding`` (``math.ceil`` or ``math.floor``) of a number, or of every element (int64) of an array."""
    if isinstance(x, np.ndarray):
        return (np.ceil(x) if rounding is math.ceil else np.floor(x)).astype(np.int64)
    return rounding(x)


def _int(x):
    """A number as a Python ``int``, an array as int64."""
    return x.astype(np.int64) if isinstance(x, np.ndarray) else int(x)


@dataclass(frozen=True)
class DynamicCosts:
    """PopSparse's cycle estimates of its dynamic codelets (``lib/popsparse/PerformanceEstimation.hpp``)
    [S]. Block (AMP) codelet, ``b`` buckets, ``x`` non-zero block rows each with ``y`` blocks, ``z`` batch
    columns per worker::

        supervisor = 40 + 102 b + x (y (B²·s + 3 + 12 L) + 1) + 2
        worker     = o + x y L (i + 4 z)                     (the X rows retained: i - 3)

    (``s`` = 1/4 cycle per FP16 and 1/2 per FP32 weight loaded 64 bits at a time, ``L`` weight loads
    per block, ``o``, ``i`` per block size and type); total ``W · worker + supervisor``. Element-wise
    codelet: ``30 + 93 b`` supervisor, ``W (o + x (h + y c))`` with ``c`` the cycles per non-zero
    for the worker's ``z`` columns (:meth:`elementwise`). 40 and 30 are paid once per vertex
    (:meth:`vertex_overhead`)."""

    @staticmethod
    def vertex_overhead(block: int) -> int:
        """The supervisor's fixed cycles per vertex, however many buckets it walks [S]."""
        return 40 if block > 1 else 30

    def block(
        self, x: int, y: int, z: int, block: int, float_input: bool, workers: int, buckets: int = 1, retain_x=True
    ) -> int:
        """FP32 partials (the dynamic matmul's default); 8 conv units take a 16x16 block in two loads;
        ``buckets`` each walked by the supervisor (46 + 56 cycles, one sub-group each); ``retain_x`` False for
        the GradA pass's transposed blocks (no 3-cycle saving, no supervisor cycle per row) [S]."""
        load = block * block // (2 if float_input else 4)
        loads = 1
        if block == 4:
            per_z, over = (4 if float_input else 2), 26
            inner = 14 if float_input else _choose(z == 1, 17, _choose(z == 2, 18, 19))
        elif block == 8:
            per_z, over = (8 if float_input else 4), 23
            inner = _choose((z == 1) | ((z == 2) & float_input), 22, 23)
        else:
            per_z, over, inner, loads = 4, 23, _choose(z == 2, 25, 24), 2
        keep = 1 if retain_x else 0
        supervisor = self.vertex_overhead(block) + (46 + 56) * buckets + x * (y * (load + 3 + 12 * loads) + keep) + 2
        worker = over + x * y * loads * (inner + z * per_z - 3 * keep)  # X retained: 3 cycles fewer [S]
        return _int(worker * workers + supervisor)

    def elementwise(self, x: int, y: int, z: int, float_input: bool, workers: int, buckets: int = 1) -> int:
        if float_input:
            over, x_over = _choose(z == 4, 25, _choose(z == 2, 27, 30)), _choose(z == 2, 11, 13)
            inner = _choose(z // 4 != 0, 12 + z // 4 * 3 * y, 0) + _choose(z & 2 != 0, 8 + z // 2 * 2 * y, 0)
            inner = inner + _choose(z & 1 != 0, 8 + 2 * y, 0) + _choose(z & 3 != 0, 3, 1)
            inner = _choose(z == 4, 3 * y, _choose(z == 2, 2 * y, inner))
        else:
            over, x_over = _choose(z == 8, 28, _choose(z == 4, 30, 33)), _choose(z == 8, 15, _choose(z == 4, 11, 12))
            inner = _choose(z // 8 != 0, 16 + z // 8 * 3 * y, 0) + _choose(z & 4 != 0, 13 + 2 * y, 0)
            inner = inner + _choose(z & 3 != 0, 11 + 2 * y * (z & 3), 0)
            inner = _choose(z == 8, 3 * y, _choose(z == 4, 2 * y, inner))
        supervisor = self.vertex_overhead(1) + (47 + 46) * buckets
        return _int((over + (x_over + inner) * x) * workers + supervisor)

    def transpose_elementwise(self, x: int, z: int, y: int, float_input: bool, workers: int, buckets: int = 1) -> int:
        """The GradA pass's element-wise codelet on the forward's buckets
        (``sparseDenseTransposeElementwiseMultiply``): ``30 + 112 b`` supervisor and
        ``W (o + x (h + c(ceil(y / W))))``, the worker's ``ceil(y / W)`` of ``y`` rows for each of ``x``, ``c``
        the cycles per row for ``z`` columns (FP16: 10 at z = 8, 7 at z = 4) [S]."""
        per = ceil_div(y, workers)
        if float_input:
            over, x_over = 23, 24
            inner = 8 + _choose(z // 2 != 0, (2 + z // 2 * 3) * per, 0) + _choose(z & 1 != 0, 4 * per, 0)
        else:
            over, x_over = _choose((z == 8) | (z == 4), 20, 26), _choose(z == 8, 18, _choose(z == 4, 21, 22))
            inner = (
                8 + _choose(z // 4 != 0, (2 + z // 4 * 5) * per, 0) + _choose(z & 3 != 0, (5 + 3 * (z & 3)) * per, 0)
            )
            inner = _choose(z == 8, 10 * per, _choose(z == 4, 7 * per, inner))
        return _int((over + (x_over + inner) * x) * workers + 30 + (44 + 68) * buckets)


def _nonzero_groups(density: float, x_groups, y_groups) -> tuple:
    """``getNumGroupsGivenUniformSparsityPattern``: block rows with a non-zero and blocks per such row [S]
    (numbers, or arrays of group counts)."""
    if isinstance(y_groups, np.ndarray):
        p_row = 1.0 - _powers(1.0 - density, int(y_groups.max()))[y_groups]
    else:
        p_row = 1.0 - (1.0 - density) ** y_groups
    total = _whole(x_groups * y_groups * density)
    x_nz = _most(_whole(x_groups * p_row), 1)
    return x_nz, ceil_div(total, x_nz)


def _reduce_cycles(outputs: int, depth: int, float_out: bool, float_partials: bool, workers: int) -> int:
    """``getReduceCycleEstimate``: ``depth`` partials per output, 4 (FP32 partials) or 8 (FP16) outputs a
    loop, the remainder loops of 1, 2 (and 4) outputs [S]."""
    width = 4 if float_partials else 8
    loops = outputs // width + sum(_choose(outputs & bit != 0, 1, 0) for bit in (1, 2, 4) if bit < width)
    spare, ragged = loops % workers != 0, outputs % width != 0
    cycles = 32 + _choose(spare & ragged, 2 * depth + (13 if float_partials else 11), 0)
    per_worker = loops // workers + _choose(spare & (outputs % width == 0), 1, 0)
    cycles = cycles + (3 * depth + (7 if float_out else 6) + (0 if float_partials else 2)) * per_worker
    return cycles * workers


def _cast_cycles(outputs: int, partials_width: int, out_width: int, workers: int) -> int:
    """``getCastCycleEstimate``: FP32 partials cast to an FP16 result [S]."""
    per = ceil_div(outputs, workers)
    return (_most(ceil_div(per, partials_width), ceil_div(per, out_width)) + 26) * workers


def _worker_split(rows: int, cols: int, workers: int) -> tuple:
    """``splitTileBetweenWorkers`` (no row weights): the largest worker's rows and columns [S]."""
    grains = ceil_div(rows * cols, workers)
    r = _least(ceil_div(grains, cols), rows)
    return r, _least(ceil_div(grains, r), cols)


@lru_cache(maxsize=256)
def _splits(groups: int) -> tuple:
    """The partition counts ``p`` whose ``ceil(groups / p)`` parts are all non-empty
    (``ceildivConstrainDivisor``) [S] (kept: every batch of a matrix asks for the same)."""
    return tuple(sorted({ceil_div(groups, ceil_div(groups, p)) for p in range(1, groups + 1)}))


@dataclass(frozen=True)
class _Problem:
    """One dynamic matmul as PopSparse's planner sees it: groups of ``gx x gy`` weights and ``gz`` batch
    columns (``getCandidateMethods``: element-wise ``1 x 1`` and the vector width; AMP blocks ``B x B``
    and 1), ``X, Y, Z`` groups, the non-zero groups, and the types' bytes."""

    block: int
    density: float
    gz: int
    X: int
    Y: int
    Z: int
    nnz: int
    eb: int
    pb: int
    workers: int
    tiles: int

    @property
    def group_elems(self) -> int:
        return self.block * self.block


@dataclass(frozen=True)
class _Split:
    px: int
    py: int
    pz: int
    xg: int  # weight row groups per tile
    yg: int  # weight column groups per tile
    zg: int  # batch groups per tile
    bucket_groups: int  # non-zero groups per bucket (one bucket per tile)
    bucket_bytes: int  # values and meta-info (sized for the whole (x, y) partition) of one bucket
    slice_bytes: int  # the dense input slice a tile receives
    partials: int  # partial elements per tile
    x_nz: int  # expected non-zero row groups of the (x, y) partition
    y_nz: int  # expected non-zero groups per such row
    estimate: int = 0  # PopSparse's planner estimate (forward + GradA), cycles
    temp: int = 0  # and its temporary bytes (the larger pass's)
    fwd_estimate: int = 0  # the forward's part of ``estimate``

    @property
    def tiles_used(self) -> int:
        return self.px * self.py * self.pz


def _split(q: _Problem, px: int, py: int, pz: int) -> _Split:
    """Sizes of partition ``(px, py, pz)``: buckets as ``addNumNonZeroGroupsPerBucket`` (the non-zeros spread
    over every tile, x (1 + 0.3), a whole exchange atom) and ``addMetaInfoElemsPerBucket`` [S]."""
    xg, yg, zg = ceil_div(q.X, px), ceil_div(q.Y, py), q.Z // pz
    bytes_group = q.group_elems * q.eb
    grain = math.lcm(bytes_group, 4) // bytes_group
    groups = _whole(ceil_div(q.nnz, px * py * pz) * (1 + BUCKET_OVERSIZE) + 0.5, math.floor)  # std::round
    groups = ceil_div(groups, grain) * grain
    x_nz, y_nz = _nonzero_groups(q.density, xg, yg)
    if q.block == 1:  # sub-group entry 9 and worker entries 5 words, two sub-groups; output entries 2 + y
        meta = (9 + q.workers * 5) * 2 + _whole(x_nz * (2 + y_nz) * (1 + BUCKET_OVERSIZE))
    else:  # block sub-group entry 7 words
        meta = 7 * 2 + _whole(x_nz * (2 + y_nz) * (1 + BUCKET_OVERSIZE))
    meta = ceil_div(meta, 2) * 2
    bucket_bytes = groups * bytes_group + 2 * meta
    slice_bytes = yg * q.block * zg * q.gz * q.eb
    return _Split(px, py, pz, xg, yg, zg, groups, bucket_bytes, slice_bytes, xg * q.block * zg * q.gz,
                  x_nz, y_nz)  # fmt: skip


@dataclass(frozen=True)
class _View:
    """One pass of a split as PopSparse's planner sees it: the forward, or GradA with X and Y swapped
    (``toGradA``). ``rows`` and ``cols``: the pass's output and input groups per tile (``x_nz`` rows with a
    non-zero, ``y_nz`` non-zeros per such row); ``depth``: the partitions whose partials are reduced (``P_y``
    forward, ``P_x`` GradA); ``cons``: consecutive tiles receiving the same dense input
    (``getArePartitionsOnConsecutivePNs``: tiles are numbered X fastest, then Z, then Y); ``home_bytes`` and
    ``slice_bytes``: a tile's share of the dense input before, and its slice after, the exchange."""

    grad_a: bool
    rows: int
    cols: int
    x_nz: int
    y_nz: int
    depth: int
    cons: int
    home_bytes: int
    slice_bytes: int
    partials: int


def _view(q: _Problem, s: _Split, grad_a: bool = False) -> _View:
    grain_bytes = q.block * q.gz * q.eb
    if not grad_a:
        home = ceil_div(q.Y * q.Z, s.tiles_used) * grain_bytes
        return _View(False, s.xg, s.yg, s.x_nz, s.y_nz, s.py, s.px, home, s.slice_bytes, s.partials)
    x_nz, y_nz = _nonzero_groups(q.density, s.yg, s.xg)
    home = ceil_div(q.X * q.Z, s.tiles_used) * grain_bytes
    cons = _choose(s.px * s.pz == 1, s.py, 1)
    slice_bytes = s.xg * s.zg * grain_bytes
    return _View(True, s.yg, s.xg, x_nz, y_nz, s.px, cons, home, slice_bytes, s.yg * q.block * s.zg * q.gz)


def _multiply(q: _Problem, v: _View, rows: int, per_row: int, buckets: int, vertex: DynamicCosts, zg: int) -> int:
    """The pass's codelet estimate for ``rows`` row groups of ``per_row`` non-zero groups over ``zg`` batch
    groups: forward element-wise or block (X retained); GradA the transpose codelet (``per_row`` rows of
    ``rows``, as ``addDistributionComputeCostSparseDense`` calls it) or the block codelet with the roles of
    rows and non-zeros per row swapped and X not retained [S]."""
    if q.block == 1:
        if v.grad_a:  # the transpose vertex splits its work itself
            return vertex.transpose_elementwise(per_row, zg * q.gz, rows, q.eb == 4, q.workers, buckets)
        rw, cw = _worker_split(rows, zg, q.workers)
        return vertex.elementwise(rw, per_row, cw * q.gz, q.eb == 4, q.workers, buckets)
    _, cw = _worker_split(1, zg, q.workers)
    if v.grad_a:
        return vertex.block(per_row, rows, cw, q.block, q.eb == 4, q.workers, buckets, retain_x=False)
    return vertex.block(rows, per_row, cw, q.block, q.eb == 4, q.workers, buckets)


def _transpose_cycles(count: int, rows: int, cols: int, float_input: bool, workers: int) -> int:
    """``getTransposeCycleEstimate``: ``count`` ``rows x cols`` blocks transposed by the supervisor's workers,
    grains of 4 halves or 2 floats [S]."""
    grain, per_grain = (2, 3) if float_input else (4, 4)
    rg, cg = rows // grain, cols // grain
    per = ceil_div(count, workers)
    if rg == 1 and cg == 1:
        worker = _choose(per == 1, 17 + 12, 17 + 20 + (per - 2) * per_grain)
    elif cg == 1:
        worker = 27 + per * (15 + 20 + per_grain * (rg - 2))
    else:
        worker = 29 + per * (18 + rg * (12 + per_grain * (cg - 2)))
    return 7 + workers * worker


def _bucket_transpose(q: _Problem, s: _Split, v: _View) -> tuple:
    """``(cycles, bytes)`` of transposing a tile's bucket of blocks for GradA (``addTransposeBucketsCost``;
    element-wise groups need none) [S]."""
    if not v.grad_a or q.block == 1:
        return 0, 0
    cycles = _transpose_cycles(s.bucket_groups, q.block, q.block, q.eb == 4, q.workers)
    return cycles, s.bucket_groups * q.group_elems * q.eb


def _pass_cost(q: _Problem, s: _Split, v: _View, vertex: DynamicCosts) -> tuple:
    """PopSparse's planner cost of one pass of split ``s`` (``addEstimates``): ``(cycles, temporary bytes)`` of
    the bucket transpose (GradA blocks), the distribution exchange at 4 B/cycle (twice that where consecutive
    tiles receive the same data: a shared exchange bus), zeroing the partials, the codelet with one bucket per
    ``P_z``, and the reduction's exchange and compute or the cast. Partials are temporary when cast or when
    ``P_z > 1`` (``needsCastOrReduction`` as written) [S]."""
    t = s.tiles_used
    s_bytes = _choose(v.slice_bytes > v.home_bytes, v.slice_bytes, 0)
    share_s = _choose((t == v.cons) | (v.cons % 2 == 0), 2, 1)
    r_bytes = _choose(s.pz > 1, s.pz * s.bucket_bytes, 0)
    share_r = _choose((s.px == 1) & ((t == s.pz) | (s.pz % 2 == 0)), 2, 1)  # Z partitions adjacent only if P_x = 1
    tr_cycles, tr_bytes = _bucket_transpose(q, s, v)
    cycles = tr_cycles + ceil_div(s_bytes, 4 * share_s) + ceil_div(r_bytes, 4 * share_r)
    cycles = cycles + ceil_div(v.partials, q.workers) * q.workers  # zeroPartialsCycles as written [S]
    rows = v.rows if v.grad_a and q.block == 1 else v.x_nz  # the transpose estimate takes every row group
    cycles = cycles + _multiply(q, v, rows, v.y_nz, s.pz, vertex, s.zg)
    q_bytes = v.partials * q.pb
    q_temp = _choose((s.pz > 1) | (q.pb != q.eb), q_bytes, 0)
    temp = s_bytes + r_bytes - _choose(r_bytes != 0, s.bucket_bytes, 0) + tr_bytes
    temp = _most(temp + q_temp, 2 * s.bucket_bytes + s_bytes + q_temp + tr_bytes)
    out = ceil_div(v.partials, v.depth)  # P_y (GradA: P_x) > 1: the partials reduced, else cast if FP32
    reduce = ceil_div(q_bytes, 4) + _reduce_cycles(out, v.depth, q.eb == 4, q.pb == 4, q.workers)
    cast = _cast_cycles(v.partials, 8 // q.pb, 8 // q.eb, q.workers) if q.pb != q.eb else 0
    cycles = cycles + _choose(v.depth > 1, reduce, cast)
    cast_temp = _most(temp, q_temp + v.partials * q.eb) if q.pb != q.eb else temp
    temp = _choose(v.depth > 1, _most(temp, q_temp + q_bytes + out * q.eb), cast_temp)
    return _int(cycles), _int(temp)


def _estimate(q: _Problem, s: _Split, vertex: DynamicCosts) -> tuple:
    """PopSparse's planner cost of split ``s`` (``createPlan``): ``(estimate, temp, fwd_estimate)``, the
    forward's cycles plus GradA's, the larger of their temporary bytes and the forward's cycles
    (:func:`_pass_cost`; the :class:`_Split` fields of those names)."""
    fwd_cycles, fwd_temp = _pass_cost(q, s, _view(q, s), vertex)
    grad_cycles, grad_temp = _pass_cost(q, s, _view(q, s, grad_a=True), vertex)
    return fwd_cycles + grad_cycles, _most(fwd_temp, grad_temp), fwd_cycles


def _mm_cycles(q: _Problem, s: _Split, vertex: DynamicCosts, v: _View | None = None) -> int:
    """The codelet as it runs (forward unless ``v`` says GradA): the ``(x, y)`` partition's non-zeros are cut
    row-major into ``P_z`` buckets (``getTilePartition``), and the supervisor runs the workers on one bucket
    after another (``sync`` between sub-groups in ``SparseDenseMatMul*.S``) [S]."""
    v = v or _view(q, s)
    if s.pz == 1:
        return _multiply(q, v, v.x_nz, v.y_nz, 1, vertex, s.zg)
    piece = max(ceil_div(v.x_nz * v.y_nz, s.pz), 1)
    rows = min(v.x_nz, ceil_div(piece, v.y_nz) + 1)
    once = vertex.vertex_overhead(q.block)
    return s.pz * (_multiply(q, v, rows, ceil_div(piece, rows), 1, vertex, s.zg) - once) + once


@dataclass(frozen=True)
class DynamicSparsePlan(TilePlan):
    """A dynamic sparse x dense matmul's partition (``P_x, P_y, P_z``), its phases and per-tile bytes
    (``weight_bytes``: the tile's bucket, the ``P_z`` buckets broadcast to it and the two propagation
    buffers; ``input_bytes``: the dense slice received; ``partial_bytes``: partials and the reduction's
    buffer; ``output_bytes``: the result). ``estimate_cycles`` and ``estimate_temp_bytes`` are PopSparse's own
    planner estimates of the chosen partition, forward + GradA (the latter is ``temp_bytes`` on every tile used,
    the bytes the memory proportion bounds), ``estimate_fwd_cycles`` the forward's part; ``predicted_cycles`` is
    the simulator's. ``grad_a``: the GradA pass (a layer's input gradient) on the same partition, as a plan of its
    own (``pass_name`` "GradA", with its own phases and bytes)."""

    BYTE_FIELDS = ("weight_bytes", "input_bytes", "partial_bytes", "output_bytes")

    m: int
    k: int
    n: int
    tiles: int
    block: int
    precision: str
    density: float
    split: tuple
    bucket_blocks: int
    weight_bytes: np.ndarray
    input_bytes: np.ndarray
    partial_bytes: np.ndarray
    output_bytes: np.ndarray
    phases: tuple
    predicted_cycles: int
    memory_proportion: float = DEFAULT_MEMORY_PROPORTION
    within_proportion: bool = True
    partials_precision: str = "fp32"
    estimate_cycles: int = 0
    estimate_temp_bytes: int = 0
    estimate_fwd_cycles: int = 0
    pass_name: str = "forward"
    grad_a: DynamicSparsePlan | None = None
    data_bytes: np.ndarray = field(init=False)
    temp_bytes: np.ndarray = field(init=False)

    def __post_init__(self):
        self._tile_arrays()
        data = self.weight_bytes + self.input_bytes + self.partial_bytes + self.output_bytes
        object.__setattr__(self, "data_bytes", as_tile_array("data_bytes", data, self.tiles))
        temp = np.where(self.input_bytes > 0, self.estimate_temp_bytes, 0)  # what the memory proportion bounds
        object.__setattr__(self, "temp_bytes", as_tile_array("temp", temp, self.tiles))

    @property
    def title(self) -> str:
        return (
            f"dynamic sparse matmul (m, k, n) = ({self.m}, {self.k}, {self.n}), block {self.block}, density "
            f"{self.density:.4g} (pattern known at run time), {self.precision}, partials {self.partials_precision}; "
            + ("the forward pass" if self.pass_name == "forward" else "the GradA pass (input gradient)")
        )

    @property
    def tiles_used(self) -> int:
        return int(np.prod(self.split))

    def partition_text(self) -> str:
        px, py, pz = self.split
        return (
            f"partition (P_x, P_y, P_z) = ({px}, {py}, {pz}) over (m, k, n) on {self.tiles_used} of {self.tiles} "
            f"tiles; a bucket of {self.bucket_blocks} non-zero {'elements' if self.block == 1 else 'blocks'} per "
            f"tile (the non-zeros spread over every tile, x {1 + BUCKET_OVERSIZE:g}), broadcast over P_z; "
            f"PopSparse's planner estimate {self.estimate_cycles:,} cycles: forward {self.estimate_fwd_cycles:,} + "
            f"GradA {self.estimate_cycles - self.estimate_fwd_cycles:,} (the matmul API plans both passes, "
            "doGradAPass)"
        )


def _phases(q: _Problem, s: _Split, on: np.ndarray, vertex: DynamicCosts, v: _View) -> tuple:
    """The supersteps of one pass of split ``s`` on the tiles where ``on`` is 1 (module docstring)."""
    phases = []
    tr_cycles, tr_bytes = _bucket_transpose(q, s, v)
    if tr_cycles:  # GradA's blocks transposed on their home tiles before the distribution (preDistribution)
        phases.append(Phase("dyn-transpose", "vector", on * tr_bytes // q.eb, on * tr_cycles, 0 * on, 0 * on, on,
                            on * 2, 0 * on))  # fmt: skip
    r_in, r_out = (s.pz * s.bucket_bytes, s.bucket_bytes) if s.pz > 1 else (0, 0)
    instructions = on * (4 + (4 * s.pz if s.pz > 1 else 0))
    phases.append(Phase("dyn-distribute", "vector", 0 * on, 0 * on, on * (v.slice_bytes + r_in),
                        on * (v.slice_bytes + r_out), 0 * on, 0 * on, instructions))  # fmt: skip
    zero = q.workers * (3 + 10 + ceil_div(ceil_div(v.partials, q.workers), 2 if q.pb == 4 else 4))
    macs = v.x_nz * v.y_nz * q.group_elems * s.zg * q.gz
    mm = on * (_mm_cycles(q, s, vertex, v) + zero)
    phases.append(Phase("dyn-mm", "vector" if q.block == 1 else "amp", on * macs, mm, 0 * on, 0 * on, on,
                        on * (3 + 2 * s.pz), 0 * on))  # fmt: skip
    if v.depth == 1:
        if q.pb != q.eb:
            cast = _cast_cycles(v.partials, 8 // q.pb, 8 // q.eb, q.workers)
            phases.append(Phase("dyn-cast", "vector", on * v.partials, on * cast, 0 * on, 0 * on, on, on * 2, 0 * on))
        return tuple(phases)
    share = ceil_div(v.partials, v.depth)
    red_bytes = (v.depth - 1) * share * q.pb
    cyc = _reduce_cycles(share, v.depth, q.eb == 4, q.pb == 4, q.workers)  # the output is in the input type [S]
    phases.append(Phase("dyn-reduce", "vector", on * share * v.depth, on * cyc, on * red_bytes, on * red_bytes, on,
                        on * (v.depth + 1), on * 2 * (v.depth - 1)))  # fmt: skip
    return tuple(phases)


def _candidates(q: _Problem) -> tuple:
    """``(P_x, P_y, P_z)`` arrays of every split PopSparse's planner tries, in its order: ``P_x, P_y`` any count
    that leaves no part empty, ``P_z`` a factor of the batch groups (``factorOf``), at most the tiles in all,
    element-wise meta-info offsets within 16 bits (``addMetaInfoRangeLimits``) [S]."""
    zs = [d for d in range(1, q.Z + 1) if q.Z % d == 0]
    px, py, pz = (a.ravel() for a in np.meshgrid(_splits(q.X), _splits(q.Y), zs, indexing="ij"))
    keep = (px * py <= q.tiles) & (px * py * pz <= q.tiles)
    if q.block == 1:  # the split's yg, zg and xg (:func:`_split`) must fit the meta-info
        y_scale = 4 if q.eb == 4 else 2
        offsets = np.maximum((ceil_div(q.Y, py) - 1) * (q.Z // pz) * q.gz * y_scale, ceil_div(q.X, px) - 1)
        keep &= offsets <= 0xFFFF
    return px[keep], py[keep], pz[keep]


def _search(q: _Problem, vertex: DynamicCosts, bound: float) -> tuple:
    """``(best, smallest)``: PopSparse's choice (fewest estimated cycles, then temporary bytes, among splits
    within ``bound``; None if none) and the split of fewest temporary bytes (the first of equals in the
    planner's order, :func:`_candidates`), every split's estimate (:func:`_estimate`) at once."""
    px, py, pz = _candidates(q)
    if not px.size:
        return None, None
    est, temp, fwd = (np.broadcast_to(a, px.shape) for a in _estimate(q, _split(q, px, py, pz), vertex))
    small = int(np.argmin(temp))
    within = np.flatnonzero(temp <= bound)
    best = int(within[np.lexsort((temp[within], est[within]))[0]]) if within.size else None  # stable: the first

    def chosen(i: int) -> _Split:
        split = _split(q, int(px[i]), int(py[i]), int(pz[i]))
        return replace(split, estimate=int(est[i]), temp=int(temp[i]), fwd_estimate=int(fwd[i]))

    return (None if best is None else chosen(best)), chosen(small)


def plan_dynamic_sparse(
    m: int,
    k: int,
    n: int,
    target: PlanTarget,
    *,
    density: float,
    block: int,
    workers: int,
    vertex: DynamicCosts = DynamicCosts(),
) -> DynamicSparsePlan:
    """PopSparse's partition (module docstring) of a dynamic sparse ``(m x k, density) · (k x n)``, timed as
    it runs; :class:`~tilesim.errors.SramOverflowError` if no partition's temporary bytes meet
    ``memory_proportion · sram_bytes`` or the chosen one does not fit the tile. As PopSparse's
    ``validateOptions`` (``MatMulUtils.cpp``), partials narrower than the input, or other than FP32 for
    element-wise sparsity, are taken as FP32 (PopSparse ignores the option with a warning; the plan says
    ``partials fp32``)."""
    tiles, sram_bytes, precision = target.tiles, target.sram_bytes, target.precision
    partials_precision, costs, overheads = target.partials_precision, target.costs, target.overheads
    memory_proportion = target.memory_proportion
    require(block in DYNAMIC_BLOCKS, "block", block, f"must be one of {DYNAMIC_BLOCKS}", "PopSparse's dynamic codelets")
    require(0.0 < density <= 1.0, "density", density, "must be in (0, 1]", "density 1/16 keeps one block in sixteen")
    for name, v in (("m", m), ("k", k), ("n", n), ("tiles", tiles), ("sram_bytes", sram_bytes), ("workers", workers)):
        require_int(name, v)
    require(m % block == 0 and k % block == 0, "m, k", (m, k), f"must be multiples of block = {block}", "")
    _check_proportion(memory_proportion)
    eb = require_precision("precision", precision)
    pb = require_precision("partials_precision", partials_precision)
    if pb < eb or block == 1:
        partials_precision, pb = "fp32", 4
    gz = (8 // eb) if block == 1 else 1  # the vector width of the input type [S]
    X, Y = m // block, k // block
    q = _Problem(block, density, gz, X, Y, ceil_div(n, gz), max(math.ceil(density * X * Y), 1), eb, pb, workers, tiles)
    bound = memory_proportion * sram_bytes
    best, small = _search(q, vertex, bound)
    require(
        small is not None,
        "n",
        n,
        f"has no partition PopSparse's dynamic planner accepts for a {m}x{k} element-wise matrix on {tiles} tiles "
        "(the input offsets overflow the 16-bit meta-info)",
        "use a smaller batch (split it into several matmuls)",
    )
    fp16 = "fp16, " if eb == 4 else ""
    head = f"dynamic sparse matmul (m, k, n) = ({m}, {k}, {n}), block {block}, density {density:.4g}, {precision} on "
    if best is None:
        raise SramOverflowError(
            f"{head}{tiles} tiles: no partition fits; the smallest {(small.px, small.py, small.pz)} needs "
            f"{small.temp} B of temporary memory on a tile (bound {int(bound)} B = memory_proportion "
            f"{memory_proportion} x {sram_bytes}); {'raise the memory proportion, ' * (small.temp <= sram_bytes)}"
            f"use {fp16}a lower density or a smaller batch",
            tiles=[0],
        )
    plan = _plan(q, best, m, k, n, precision, partials_precision, costs, vertex, memory_proportion)
    peak = plan.memory_bytes(overheads)
    if int(peak.max()) > sram_bytes:
        raise SramOverflowError(
            f"{head}{tiles} tiles: PopSparse's partition {best.px, best.py, best.pz} needs {int(peak.max())} B on "
            f"a tile > sram_bytes = {sram_bytes} B; use {fp16}a lower density or a smaller batch",
            tiles=[int(np.argmax(peak))],
        )
    return plan


def _plan(q: _Problem, s: _Split, m, k, n, precision, partials_precision, costs, vertex, mp) -> DynamicSparsePlan:
    on = (np.arange(q.tiles) < s.tiles_used).astype(np.int64)
    bucket = on * s.bucket_bytes * (1 + (s.pz if s.pz > 1 else 0) + 2)

    def plan(v: _View, grad_a=None) -> DynamicSparsePlan:
        phases = _phases(q, s, on, vertex, v)
        return DynamicSparsePlan(
            m, k, n, q.tiles, q.block, precision, q.density, (s.px, s.py, s.pz), s.bucket_groups,
            bucket + on * _bucket_transpose(q, s, v)[1], on * v.slice_bytes,
            on * v.partials * q.pb * (2 if v.depth > 1 else 1), on * ceil_div(v.partials, v.depth) * q.eb,
            phases, phases_cycles(phases, costs), float(mp), True, partials_precision, s.estimate, s.temp,
            s.fwd_estimate, "GradA" if v.grad_a else "forward", grad_a,
        )  # fmt: skip

    return plan(_view(q, s), plan(_view(q, s, grad_a=True)))
