"""Dynamic sparse x dense matmul on tiles, modelled on PopSparse's ``popsparse::dynamic`` matmul.

The pattern is known only at run time, so the plan is made from the **density** alone
(``lib/popsparse/FullyConnectedPlan.cpp``; the design note "PopSparse Matrix Multiplication (Dynamic
Pattern) on the IPU") [S]: the output rows (``X = m``), input features (``Y = k``) and batch (``Z = n``)
are cut into ``P_x x P_y x P_z`` partitions, one per tile. The non-zero blocks of partition ``(x, y)``
live in a **bucket** on one tile, sized for the expected count with ``metaInfoBucketOversizeProportion``
headroom (0.3; blocks beyond it spill to other buckets and are reached by the propagation phase, which a
uniformly random pattern does not need: PopSparse's planner charges it memory only, as here), and
broadcast to the ``P_z`` tiles of that ``(x, y)``. Supersteps (phases):

* ``dyn-distribute``: every tile receives its whole dense input slice ``Y_p x Z_p`` — not only the
  columns its blocks touch, which a pattern-agnostic plan cannot know — and, if ``P_z > 1``, its bucket
  (values and meta-info);
* ``dyn-mm``: PopSparse's estimate of its dynamic codelet (:class:`DynamicCosts`: meta-info walked by
  the supervisor, ``X`` rows and ``Y`` blocks from the uniform-pattern expectation
  ``getNumGroupsGivenUniformSparsityPattern``) plus zeroing the partials; partials are FP32 by default
  (``partialsType``, as PopSparse's dynamic options);
* ``dyn-reduce`` (``P_y > 1``): the ``P_y`` partials of each output are exchanged all-to-all within the
  ``(x, z)`` group and reduced (``getReduceCycleEstimate``), cast to the output type.

The search is over powers of two ``P_x, P_y``, and ``P_z`` a power of two or the split that fills the
chip, with ``P_x P_y P_z <= tiles`` (PopSparse's popsolver searches every grain-aligned split), picking
the fewest cycles whose temporary bytes meet ``availableMemoryProportion``. Meta-info per bucket is
counted as 16-bit words: one per non-zero block, two per non-zero row, and a header per worker [D].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from models.linear.phases import (
    OverheadConstants,
    Phase,
    SuperstepCosts,
    TilePlan,
    as_tile_array,
    ceil_div,
    phases_cycles,
    require_int,
    require_precision,
)
from models.linear.planner import DEFAULT_MEMORY_PROPORTION, _check_proportion
from tilesim.errors import SramOverflowError, require

__all__ = ["DynamicCosts", "DynamicSparsePlan", "plan_dynamic_sparse", "DYNAMIC_BLOCKS", "BUCKET_OVERSIZE"]

DYNAMIC_BLOCKS = (1, 4, 8, 16)
"""Block sizes of PopSparse's dynamic codelets (element-wise and ``SparseDenseMatMulBlock`` 4, 8, 16)."""

BUCKET_OVERSIZE = 0.3
"""``metaInfoBucketOversizeProportion``, PopSparse's default headroom of a bucket [S]."""


@dataclass(frozen=True)
class DynamicCosts:
    """PopSparse's cycle estimates of its dynamic codelets (``lib/popsparse/PerformanceEstimation.hpp``)
    [S]. Block (AMP) codelet, one bucket, ``x`` non-zero block rows each with ``y`` blocks, ``z`` batch
    columns per worker::

        supervisor = 40 + 102 + x (y (B²·s + 3 + 12 L) + 1) + 2
        worker     = o + x y L (i + 4 z)                     (the X rows retained: i - 3)

    (``s`` = 1/4 cycle per FP16 and 1/2 per FP32 weight loaded 64 bits at a time, ``L`` weight loads
    per block, ``o``, ``i`` per block size and type); total ``W · worker + supervisor``. Element-wise
    codelet: ``30 + 93`` supervisor, ``W (o + x (h + y c))`` with ``c`` the cycles per non-zero
    for the worker's ``z`` columns (:meth:`elementwise`)."""

    def block(self, x: int, y: int, z: int, block: int, float_input: bool, workers: int) -> int:
        """FP32 partials (the dynamic matmul's default); 8 conv units take a 16x16 block in two loads [S]."""
        load = block * block // (2 if float_input else 4)
        loads = 1
        if block == 4:
            per_z, over = (4 if float_input else 2), 26
            inner = 14 if float_input else {1: 17, 2: 18}.get(z, 19)
        elif block == 8:
            per_z, over = (8 if float_input else 4), 23
            inner = 22 if z == 1 or (z == 2 and float_input) else 23
        else:
            per_z, over, inner, loads = 4, 23, (25 if z == 2 else 24), 2
        supervisor = 40 + 46 + 56 + x * (y * (load + 3 + 12 * loads) + 1) + 2
        worker = over + x * y * loads * (inner + z * per_z - 3)  # X retained: 3 cycles fewer [S]
        return int(worker * workers + supervisor)

    def elementwise(self, x: int, y: int, z: int, float_input: bool, workers: int) -> int:
        if float_input:
            over, x_over = {4: (25, 13), 2: (27, 11)}.get(z, (30, 13))
            if z == 4:
                inner = 3 * y
            elif z == 2:
                inner = 2 * y
            else:
                inner = (12 + z // 4 * 3 * y if z // 4 else 0) + (8 + z // 2 * 2 * y if z & 2 else 0)
                inner += (8 + 2 * y if z & 1 else 0) + (3 if z & 3 else 1)
        else:
            over, x_over = {8: (28, 15), 4: (30, 11)}.get(z, (33, 12))
            if z == 8:
                inner = 3 * y
            elif z == 4:
                inner = 2 * y
            else:
                inner = (16 + z // 8 * 3 * y if z // 8 else 0) + (13 + 2 * y if z & 4 else 0)
                inner += 11 + 2 * y * (z & 3) if z & 3 else 0
        supervisor = 30 + 47 + 46
        return int((over + (x_over + inner) * x) * workers + supervisor)


def _nonzero_groups(density: float, x_groups: int, y_groups: int) -> tuple:
    """``getNumGroupsGivenUniformSparsityPattern``: block rows with a non-zero and blocks per such row [S]."""
    p_row = 1.0 - (1.0 - density) ** y_groups
    total = math.ceil(x_groups * y_groups * density)
    x_nz = max(math.ceil(x_groups * p_row), 1)
    return x_nz, ceil_div(total, x_nz)


def _reduce_cycles(outputs: int, depth: int, float_out: bool, float_partials: bool, workers: int) -> int:
    """``getReduceCycleEstimate``: ``depth`` partials per output, 4 (FP32 partials) or 8 (FP16) outputs a
    loop, the remainder loops of 1, 2 (and 4) outputs [S]."""
    width = 4 if float_partials else 8
    loops = outputs // width + sum(1 for bit in (1, 2, 4) if bit < width and outputs & bit)
    per_worker = loops // workers
    cycles = 32
    if loops % workers:
        if outputs % width:
            cycles += 2 * depth + (13 if float_partials else 11)
        else:
            per_worker += 1
    cycles += (3 * depth + (7 if float_out else 6) + (0 if float_partials else 2)) * per_worker
    return cycles * workers


@dataclass(frozen=True)
class _Split:
    px: int
    py: int
    pz: int
    xg: int  # block rows per partition
    yg: int  # block columns per partition
    z: int  # batch columns per partition
    bucket_blocks: int
    bucket_bytes: int  # values and 16-bit meta-info of one bucket
    slice_bytes: int  # the dense input slice a tile receives
    partials: int  # partial elements per tile
    x_nz: int
    y_nz: int

    @property
    def tiles_used(self) -> int:
        return self.px * self.py * self.pz


def _split(px, py, pz, mb, kb, n, density, block, eb, workers) -> _Split:
    xg, yg, z = ceil_div(mb, px), ceil_div(kb, py), ceil_div(n, pz)
    bucket = max(math.ceil(density * xg * yg * (1 + BUCKET_OVERSIZE)), 1)
    x_nz, y_nz = _nonzero_groups(density, xg, yg)
    meta_words = bucket + 2 * x_nz + 4 * workers + 6
    bucket_bytes = bucket * block * block * eb + 2 * meta_words
    return _Split(px, py, pz, xg, yg, z, bucket, bucket_bytes, yg * block * z * eb, xg * block * z, x_nz, y_nz)


def _mm_cycles(s: _Split, block: int, float_input: bool, workers: int, costs: DynamicCosts) -> int:
    if block == 1:
        x_w = ceil_div(s.x_nz, workers) if s.x_nz >= workers else s.x_nz
        z_w = s.z if s.x_nz >= workers else ceil_div(s.z, ceil_div(workers, s.x_nz))
        return costs.elementwise(x_w, s.y_nz, z_w, float_input, workers)
    return costs.block(s.x_nz, s.y_nz, ceil_div(s.z, workers), block, float_input, workers)


@dataclass(frozen=True)
class DynamicSparsePlan(TilePlan):
    """A dynamic sparse x dense matmul's partition (``P_x, P_y, P_z``), its phases and per-tile bytes
    (``weight_bytes``: the bucket's values and meta-info; ``input_bytes``: the dense slice received;
    ``partial_bytes``: partials and the reduction's buffer; ``output_bytes``: the result)."""

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
    data_bytes: np.ndarray = field(init=False)
    temp_bytes: np.ndarray = field(init=False)

    def __post_init__(self):
        self._tile_arrays()
        data = self.weight_bytes + self.input_bytes + self.partial_bytes + self.output_bytes
        object.__setattr__(self, "data_bytes", as_tile_array("data_bytes", data, self.tiles))
        object.__setattr__(self, "temp_bytes", as_tile_array("temp", self.input_bytes + self.partial_bytes, self.tiles))

    @property
    def title(self) -> str:
        return (
            f"dynamic sparse matmul (m, k, n) = ({self.m}, {self.k}, {self.n}), block {self.block}, density "
            f"{self.density:.4g} (pattern known at run time), {self.precision}, partials {self.partials_precision}"
        )

    @property
    def tiles_used(self) -> int:
        return int(np.prod(self.split))

    def partition_text(self) -> str:
        px, py, pz = self.split
        return (
            f"partition (P_x, P_y, P_z) = ({px}, {py}, {pz}) over (m, k, n) on {self.tiles_used} of {self.tiles} "
            f"tiles; bucket of {self.bucket_blocks} blocks per tile (expected x {1 + BUCKET_OVERSIZE:g})"
        )


def _phases(s: _Split, on: np.ndarray, block, eb, pb, workers, vertex: DynamicCosts) -> tuple:
    """The supersteps of split ``s`` on the tiles where ``on`` is 1 (module docstring)."""
    r_in = s.bucket_bytes if s.pz > 1 else 0
    # each tile receives its slice and bucket; the slices' homes are spread over the tiles and multicast
    dist = Phase("dyn-distribute", "vector", 0 * on, 0 * on, on * (s.slice_bytes + r_in), on * s.slice_bytes, 0 * on,
                 0 * on, on * 4)  # fmt: skip
    zero = workers * (3 + 10 + ceil_div(ceil_div(s.partials, workers), 2 if pb == 4 else 4))
    mm_cycles = _mm_cycles(s, block, eb == 4, workers, vertex) + zero
    macs = s.x_nz * s.y_nz * block * block * s.z
    mm = Phase("dyn-mm", "vector" if block == 1 else "amp", on * macs, on * mm_cycles, 0 * on, 0 * on, on,
               on * (3 + 2 * s.x_nz), 0 * on)  # fmt: skip
    if s.py == 1:
        return dist, mm
    share = ceil_div(s.partials, s.py)
    red_bytes = (s.py - 1) * share * pb
    cyc = _reduce_cycles(share, s.py, eb == 4, pb == 4, workers)  # the output is in the input type [S]
    reduce = Phase("dyn-reduce", "vector", on * share * s.py, on * cyc, on * red_bytes, on * red_bytes, on,
                   on * (s.py + 1), on * 2 * (s.py - 1))  # fmt: skip
    return dist, mm, reduce


def plan_dynamic_sparse(
    m: int,
    k: int,
    n: int,
    *,
    density: float,
    block: int,
    tiles: int,
    sram_bytes: int,
    workers: int,
    precision: str = "fp32",
    partials_precision: str = "fp32",
    costs: SuperstepCosts = SuperstepCosts(),
    vertex: DynamicCosts = DynamicCosts(),
    overheads: OverheadConstants = OverheadConstants(),
    memory_proportion: float = DEFAULT_MEMORY_PROPORTION,
) -> DynamicSparsePlan:
    """The fastest partition (module docstring) of a dynamic sparse ``(m x k, density) · (k x n)`` whose
    temporary bytes meet ``memory_proportion · sram_bytes`` and whose memory fits the tile; else
    :class:`~tilesim.errors.SramOverflowError` naming the smallest."""
    require(block in DYNAMIC_BLOCKS, "block", block, f"must be one of {DYNAMIC_BLOCKS}", "PopSparse's dynamic codelets")
    require(0.0 < density <= 1.0, "density", density, "must be in (0, 1]", "density 1/16 keeps one block in sixteen")
    for name, v in (("m", m), ("k", k), ("n", n), ("tiles", tiles), ("sram_bytes", sram_bytes), ("workers", workers)):
        require_int(name, v)
    require(m % block == 0 and k % block == 0, "m, k", (m, k), f"must be multiples of block = {block}", "")
    _check_proportion(memory_proportion)
    eb = require_precision("precision", precision)
    pb = require_precision("partials_precision", partials_precision)
    mb, kb = m // block, k // block
    powers = [1 << i for i in range(int(math.log2(tiles)) + 1)]
    found = []
    for px in (p for p in powers if p <= mb):
        for py in (p for p in powers if p <= kb and px * p <= tiles):
            fill = tiles // (px * py)  # the batch split that uses every tile
            for pz in sorted({p for p in powers if p <= n and px * py * p <= tiles} | ({fill} if fill <= n else set())):
                s = _split(px, py, pz, mb, kb, n, density, block, eb, workers)
                plan = _plan(m, k, n, tiles, block, precision, partials_precision, density, s, eb, pb, workers,
                             costs, vertex, memory_proportion)  # fmt: skip
                mem = int(plan.memory_bytes(overheads).max())
                found.append((plan.predicted_cycles, int(plan.temp_bytes.max()), mem, plan))
    bound = memory_proportion * sram_bytes
    ok = [f for f in found if f[2] <= sram_bytes and f[1] <= bound]
    if ok:
        return min(ok, key=lambda f: (f[0], f[3].tiles_used))[3]
    small = min(found, key=lambda f: f[2])
    raise SramOverflowError(
        f"dynamic sparse matmul (m, k, n) = ({m}, {k}, {n}), block {block}, density {density:.4g}, {precision} on "
        f"{tiles} tiles: no partition fits; the smallest {small[3].split} needs {small[2]} B on a tile "
        f"(temporary {small[1]} B, bound {int(bound)} B = memory_proportion {memory_proportion} x {sram_bytes}); "
        f"{'raise the memory proportion, ' if small[2] <= sram_bytes else ''}use more tiles, fp16, a lower density "
        f"or a smaller batch",
        tiles=[0],
    )


def _plan(m, k, n, tiles, block, precision, partials_precision, density, s: _Split, eb, pb, workers, costs, vertex, mp):
    on = (np.arange(tiles) < s.tiles_used).astype(np.int64)
    phases = _phases(s, on, block, eb, pb, workers, vertex)
    weights = on * s.bucket_bytes * (2 if s.pz > 1 else 1)  # its own bucket, and the one broadcast to it
    part = on * s.partials * pb * (2 if s.py > 1 else 1)
    out = on * ceil_div(s.xg * block * s.z, s.py) * eb
    return DynamicSparsePlan(
        m, k, n, tiles, block, precision, density, (s.px, s.py, s.pz), s.bucket_blocks, weights,
        on * s.slice_bytes, part, out, phases, phases_cycles(phases, costs), float(mp), True, partials_precision,
    )  # fmt: skip
