"""Layers as sequences of BSP phases (one :class:`~tilesim.models.linear.planner.Phase` = one superstep).

Forward pass of a layer on ``batch`` samples, per-tile work and exchange bytes, for the timing layer:

* dense ``n_in -> n_out``: one :func:`~tilesim.models.linear.planner.plan_matmul` of ``(batch, n_in) x (n_in, n_out)``
  (phases ``matmul`` [+ ``reduce``]);
* low rank ``r``: two matmuls, ``(batch, n_in) x (n_in, r)`` then ``(batch, r) x (r, n_out)``;
* butterfly ``n`` (Dao et al. 2019): ``log2 n`` phases ``butterfly-k``, one per factor. Features
  are split into ``P_f`` (power of two) contiguous groups of ``f = n / P_f`` and the batch into
  ``P_b`` groups, tile ``t = i_b P_f + i_f``. Factor ``k`` (stride ``2^k``) pairs feature ``i`` with
  ``i XOR 2^k``: when ``2^k >= f`` the partner lives on tile ``t XOR (2^k / f)`` and the phase
  exchanges the whole ``rows x f`` block both ways (the permutation exchange between factors);
  otherwise it is tile-local. Compute: 2 MACs per output element on the vector unit (2x2 blocks
  are too small for the AMP). Phase 0 also receives the input block from its home layout.
* static block-sparse (:func:`block_sparse_schedules`): PopSparse's static sparse matmul,
  :func:`~tilesim.models.linear.blocksparse.plan_block_sparse` (partitioned by non-zero blocks);
* pixelfly (Chen, Dao et al. 2022): its flat block butterfly as that static block-sparse matmul
  (phases ``sparse-mm`` [+ ``sparse-reduce``]; blocks above 16 as 16 x 16 sub-blocks), the two low-rank
  matmuls, and ``pixelfly-sum`` (the low-rank output is exchanged to the block-output layout and added
  on the vector unit).

Each schedule chooses its own partition by minimising predicted cycles subject to the per-tile
``sram_bytes`` budget (data + :func:`~tilesim.models.linear.planner.overhead_bytes_per_tile`), like
:func:`~tilesim.models.linear.planner.plan_matmul`. ``data_bytes`` of a multi-part schedule is the sum of
the parts' peaks (every buffer counted live at once: an upper bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from tilesim.errors import SramOverflowError, require
from tilesim.models.linear.blocksparse import SUPPORTED_BLOCKS, StaticBlockCosts, plan_block_sparse, weight_grad_phases
from tilesim.models.linear.dynamicsparse import plan_dynamic_sparse
from tilesim.models.linear.layers import is_power_of_two, pixelfly_layout
from tilesim.models.linear.phases import (
    OverheadConstants,
    Phase,
    SuperstepCosts,
    block_pieces,
    overhead_bytes_per_tile,
    phases_cycles,
    require_precision,
    split_sizes,
)
from tilesim.models.linear.planner import PlanTarget, plan_matmul

__all__ = [
    "LayerSchedule",
    "dense_schedule",
    "lowrank_schedule",
    "butterfly_schedule",
    "pixelfly_schedule",
    "popsparse_layout",
    "block_sparse_schedules",
    "dynamic_sparse_schedules",
]


@dataclass(frozen=True)
class LayerSchedule:
    """A layer's forward pass as phases; ``data_bytes`` per tile; ``parts`` holds sub-plans (matmuls)."""

    name: str
    tiles: int
    precision: str
    phases: tuple
    data_bytes: np.ndarray
    predicted_cycles: int
    parts: tuple = ()
    partition: dict = field(default_factory=dict)

    def __post_init__(self):
        require(len(self.phases) >= 1, "schedule phases", len(self.phases), "must be >= 1", "")
        for p in self.phases:
            require(p.tiles == self.tiles, f"phase {p.name} tiles", p.tiles, f"must equal {self.tiles}", "")
        d = np.array(self.data_bytes, dtype=np.int64)
        require(d.shape == (self.tiles,), "data_bytes shape", d.shape, f"must be ({self.tiles},)", "")
        d.setflags(write=False)
        object.__setattr__(self, "data_bytes", d)

    @property
    def ops(self) -> int:
        """Total work over all phases (times their ``repeat``): AMP MACs plus vector operations."""
        return int(sum(int(p.macs.sum()) * p.repeat for p in self.phases))

    @property
    def compute_sets(self) -> int:
        return len(self.phases)

    def memory_bytes(self, constants: OverheadConstants = OverheadConstants()) -> np.ndarray:
        return self.data_bytes + overhead_bytes_per_tile(self, constants)


def _common(batch, tiles, sram_bytes, precision):
    for name, v in (("batch", batch), ("tiles", tiles), ("sram_bytes", sram_bytes)):
        require(isinstance(v, (int, np.integer)) and v >= 1, name, v, "must be a positive integer", "")
    return require_precision("precision", precision)


def _from_plans(name, plans, tiles, precision, costs):
    phases = tuple(p for plan in plans for p in plan.phases)
    data = sum(plan.data_bytes for plan in plans)
    return LayerSchedule(name, tiles, precision, phases, data, phases_cycles(phases, costs), tuple(plans))


def dense_schedule(n_in: int, n_out: int, batch: int, target: PlanTarget) -> LayerSchedule:
    """Dense layer forward: ``(batch, n_in) x (n_in, n_out)`` planned by :func:`plan_matmul` (serial
    splits, ``memory_proportion`` = PopLibs' availableMemoryProportion, partials type)."""
    _common(batch, target.tiles, target.sram_bytes, target.precision)
    plan = plan_matmul(batch, n_in, n_out, target)
    return _from_plans("dense", [plan], target.tiles, target.precision, target.costs)


def lowrank_schedule(n_in: int, n_out: int, rank: int, batch: int, target: PlanTarget) -> LayerSchedule:
    """Low-rank forward ``(x V) U^T``: two planned matmuls."""
    _common(batch, target.tiles, target.sram_bytes, target.precision)
    plans = [plan_matmul(batch, n_in, rank, target), plan_matmul(batch, rank, n_out, target)]
    return _from_plans("low-rank", plans, target.tiles, target.precision, target.costs)


def _butterfly_build(n, batch, pf, pb, tiles, eb, costs):
    levels = int(math.log2(n))
    f = n // pf
    t = np.arange(tiles)
    active = t < pf * pb
    ib = np.where(active, t // pf, 0)
    rows = np.where(active, split_sizes(batch, pb)[ib], 0)
    elems = rows * f
    home = split_sizes(batch * n, tiles)
    chunk = int(home.max())
    in_pieces = block_pieces(rows, np.where(active, f, 0), n, chunk, tiles)
    send_pieces = split_sizes(int(in_pieces.sum()), tiles)
    ops = 2 * elems
    cycles = costs.vector_cycles(ops, eb)
    one = active.astype(np.int64)
    phases = []
    for k in range(levels):
        crossing = (1 << k) >= f
        b_in = elems * eb if crossing else np.zeros(tiles, dtype=np.int64)
        b_out = b_in.copy()
        instr = 2 * one if crossing else np.zeros(tiles, dtype=np.int64)
        if k == 0:
            b_in = b_in + elems * eb
            b_out = b_out + home * eb
            instr = instr + in_pieces + send_pieces
        phases.append(Phase(f"butterfly-{k}", "vector", ops, cycles, b_in, b_out, one, 4 * one, instr))
    data = (levels + 2) * elems * eb + one * (2 * f * levels + f) * eb + home * eb
    return tuple(phases), data


def butterfly_schedule(n: int, batch: int, target: PlanTarget) -> LayerSchedule:
    """Butterfly forward as ``log2 n`` phases (see module docstring), best ``(P_f, P_b)`` that fits.

    Per-tile data: ``log2 n + 1`` activation blocks (kept for the backward pass) + a partner receive
    buffer, twiddles (2 coefficients per owned output per factor) and bias, and the input home chunk.
    """
    tiles, sram_bytes, precision, costs = target.tiles, target.sram_bytes, target.precision, target.costs
    overheads = target.overheads
    eb = _common(batch, tiles, sram_bytes, precision)
    require(is_power_of_two(n) and n >= 2, "n", n, "must be a power of two >= 2", "pad the layer width to 2^L")
    levels = int(math.log2(n))
    best = None
    pf = 1
    while pf <= min(n, tiles):
        f = n // pf
        cross = sum(1 for k in range(levels) if (1 << k) >= f)
        for pb in range(1, min(batch, tiles // pf) + 1):
            cb = -(-batch // pb)
            vec = int(costs.vector_cycles(2 * cb * f, eb))
            home = -(-batch * n // tiles) * eb
            x0 = costs.exchange_fixed_cycles + math.ceil(
                max(cb * f * eb * (2 if f == 1 else 1), home + (cb * f * eb if f == 1 else 0))
                / costs.exchange_bytes_per_cycle
            )
            xk = costs.exchange_fixed_cycles + math.ceil(cb * f * eb / costs.exchange_bytes_per_cycle)
            total = levels * (costs.sync_cycles + vec) + x0 + (cross - (1 if f == 1 else 0)) * xk
            data0 = (levels + 2) * cb * f * eb + (2 * f * levels + f) * eb + home
            key = (total, pf * pb, pf)
            if data0 <= sram_bytes and (best is None or key < best[0]):
                best = (key, pf, pb)
        pf *= 2
    if best is not None:
        phases, data = _butterfly_build(n, batch, best[1], best[2], tiles, eb, costs)
        sched = LayerSchedule(
            "butterfly",
            tiles,
            precision,
            phases,
            data,
            phases_cycles(phases, costs),
            partition={"features": best[1], "batch": best[2]},
        )
        if int(sched.memory_bytes(overheads).max()) <= sram_bytes:
            return sched
    raise SramOverflowError(
        f"butterfly n = {n}, batch = {batch}, {precision} on {tiles} tiles: no (features, batch) split fits "
        f"sram_bytes = {sram_bytes} B; use more tiles, fp16 or a smaller batch",
        tiles=[0],
    )


def popsparse_layout(layout: np.ndarray, block_size: int) -> tuple:
    """``(block, layout)`` as PopSparse's static codelets take it: blocks of 4, 8 or 16 as they are; a larger
    power-of-two block as ``(block_size / 16)²`` blocks of 16 (a user's only way to run it)."""
    if block_size in SUPPORTED_BLOCKS:
        return block_size, layout
    require(
        block_size > 16 and block_size % 16 == 0,
        "block_size",
        block_size,
        f"must be one of {SUPPORTED_BLOCKS} or a multiple of 16 for PopSparse's static block codelets",
        "use a block size of 1, 4, 8, 16 or a multiple of 16",
    )
    r = block_size // 16
    return 16, np.kron(layout, np.ones((r, r), dtype=bool)).astype(bool)


def _pixelfly_sum_phase(out_el: np.ndarray, lowrank_out, eb: int, costs: SuperstepCosts) -> Phase:
    """``pixelfly-sum``: each tile receives the low-rank output (plan ``lowrank_out``) in the block-sparse
    output layout (``out_el`` elements per tile) and adds it on the vector unit."""
    one = (out_el > 0).astype(np.int64)
    return Phase(
        "pixelfly-sum",
        "vector",
        out_el,
        costs.vector_cycles(out_el, eb),
        out_el * eb,
        lowrank_out.output_bytes,
        one,
        3 * one,
        2 * one,
    )


def pixelfly_schedule(
    n: int, batch: int, block_size: int, butterfly_size: int, lowrank_size: int, target: PlanTarget, *, workers: int
) -> LayerSchedule:
    """Pixelfly forward: the flat block butterfly as a static block-sparse matmul
    (:func:`~tilesim.models.linear.blocksparse.plan_block_sparse`, PopSparse's partition and codelet costs;
    :func:`popsparse_layout` for blocks above 16), the two low-rank matmuls, and ``pixelfly-sum`` (the
    low-rank output is exchanged to the block-sparse output layout and added on the vector unit).
    ``parts[0]`` is the block-sparse plan, the backward pass reuses its partition.
    """
    tiles, sram_bytes, precision, costs = target.tiles, target.sram_bytes, target.precision, target.costs
    overheads = target.overheads
    eb = _common(batch, tiles, sram_bytes, precision)
    sub, layout = popsparse_layout(pixelfly_layout(n, n, block_size, butterfly_size), block_size)
    blocks = plan_block_sparse(layout, batch, target, block=sub, workers=workers)
    out_el = blocks.output_bytes // eb
    plans = []
    phases = blocks.phases
    if lowrank_size:
        plans = [plan_matmul(batch, n, lowrank_size, target), plan_matmul(batch, lowrank_size, n, target)]
        phases = phases + plans[0].phases + plans[1].phases + (_pixelfly_sum_phase(out_el, plans[1], eb, costs),)
    data = blocks.data_bytes + out_el * eb * (lowrank_size > 0) + sum(p.data_bytes for p in plans)
    sched = LayerSchedule(
        "pixelfly",
        tiles,
        precision,
        phases,
        data,
        phases_cycles(phases, costs),
        (blocks,) + tuple(plans),
        {"bands": blocks.bands, "parts": blocks.n_split, "tiles_per_group": blocks.tiles_per_group},
    )
    if int(sched.memory_bytes(overheads).max()) > sram_bytes:
        raise SramOverflowError(
            f"pixelfly n = {n}, batch = {batch}, {precision} on {tiles} tiles: peak tile memory "
            f"{int(sched.memory_bytes(overheads).max())} B > sram_bytes = {sram_bytes} B; use more tiles or fp16",
            tiles=[int(np.argmax(sched.memory_bytes(overheads)))],
        )
    return sched


def block_sparse_schedules(
    layout,
    batch: int,
    target: PlanTarget,
    *,
    block: int,
    workers: int,
    tile_grain: int = 2,
    vertex=None,
    backward: bool = True,
):
    """``(forward, backward)`` :class:`~tilesim.models.linear.schedules.LayerSchedule` of a static block-sparse layer
    ``y = x W^T`` (``layout``: ``(n_out / block, n_in / block)``). Forward: :func:`plan_block_sparse` of
    ``W · x^T``; backward: ``grad_x^T = W^T g^T`` (planned on the transposed layout) and the weight
    gradient on the forward partition (:func:`~tilesim.models.linear.blocksparse.weight_grad_phases`).
    ``backward=False``: ``(forward, None)``. ``partials_precision`` is the weight gradient's (the sparse
    matmuls accumulate in the input type, as PopSparse does); ``tile_grain``: tiles per exchange bus.
    The backward's data peak is the larger of its two parts (their buffers are not live together)."""
    tiles, sram_bytes, precision, costs = target.tiles, target.sram_bytes, target.precision, target.costs
    overheads = target.overheads
    layout = np.asarray(layout, dtype=bool)
    vertex = StaticBlockCosts() if vertex is None else vertex
    kw = dict(block=block, workers=workers, tile_grain=tile_grain, vertex=vertex)
    fwd = plan_block_sparse(layout, batch, target, **kw)
    fs = LayerSchedule(
        "block-sparse",
        tiles,
        precision,
        fwd.phases,
        fwd.data_bytes,
        fwd.predicted_cycles,
        (fwd,),
        {"bands": fwd.bands, "parts": fwd.n_split, "tiles_per_group": fwd.tiles_per_group},
    )
    if not backward:
        return fs, None
    gx = plan_block_sparse(layout.T, batch, target, **kw)
    eb = require_precision("precision", precision)
    pb = require_precision("partials_precision", target.partials_precision)
    wg_phases, wg_data = weight_grad_phases(fwd, eb, pb, workers, costs, vertex)
    phases = gx.phases + wg_phases
    data = np.maximum(gx.data_bytes, wg_data)
    bs = LayerSchedule("block-sparse-backward", tiles, precision, phases, data, phases_cycles(phases, costs), (gx,))
    peak = int(bs.memory_bytes(overheads).max())
    if peak > sram_bytes:
        raise SramOverflowError(
            f"block-sparse backward, batch = {batch}, {precision} on {tiles} tiles: peak tile memory {peak} B > "
            f"sram_bytes = {sram_bytes} B; use a lower density, a smaller batch"
            f"{'' if precision == 'fp16' else ' or fp16'}",
            tiles=[int(np.argmax(bs.memory_bytes(overheads)))],
        )
    return fs, bs


def dynamic_sparse_schedules(
    n: int, batch: int, target: PlanTarget, *, density: float, block: int, workers: int, backward: bool = True
):
    """``(forward, backward)`` of an ``n x n`` dynamic sparse layer (:func:`plan_dynamic_sparse`; the plan
    depends on the density, not the pattern). Backward: ``grad_x`` is PopSparse's GradA pass on the forward's
    partition with X and Y swapped (the plan was chosen for both passes, :attr:`DynamicSparsePlan.grad_a`)
    and the weight gradient costed as the forward on the same partition (PopSparse's GradW pass samples
    ``g^T x`` at the bucket's non-zeros; same loop structure assumed [D]). ``backward=False``:
    ``(forward, None)``."""
    tiles, precision, costs = target.tiles, target.precision, target.costs
    fwd = plan_dynamic_sparse(n, n, batch, target, density=density, block=block, workers=workers)
    px, py, pz = fwd.split
    fs = LayerSchedule(
        "dynamic-sparse", tiles, precision, fwd.phases, fwd.data_bytes, fwd.predicted_cycles, (fwd,),
        {"P_x": px, "P_y": py, "P_z": pz},
    )  # fmt: skip
    if not backward:
        return fs, None
    gx = fwd.grad_a
    assert gx is not None  # every plan carries its GradA pass
    phases = tuple(replace(p, name=f"{p.name}-grada") for p in gx.phases)
    phases += tuple(replace(p, name=f"{p.name}-gradw") for p in fwd.phases)
    data = np.maximum(gx.data_bytes, fwd.data_bytes)
    bs = LayerSchedule("dynamic-sparse-backward", tiles, precision, phases, data, phases_cycles(phases, costs), (gx,))
    return fs, bs
