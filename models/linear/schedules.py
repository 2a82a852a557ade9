"""Layers as sequences of BSP phases (one :class:`~models.linear.planner.Phase` = one superstep).

Forward pass of a layer on ``batch`` samples, per-tile work and exchange bytes, for the timing layer:

* dense ``n_in -> n_out``: one :func:`~models.linear.planner.plan_matmul` of ``(batch, n_in) x (n_in, n_out)``
  (phases ``matmul`` [+ ``reduce``]);
* low rank ``r``: two matmuls, ``(batch, n_in) x (n_in, r)`` then ``(batch, r) x (r, n_out)``;
* butterfly ``n`` (Dao et al. 2019): ``log2 n`` phases ``butterfly-k``, one per factor. Features
  are split into ``P_f`` (power of two) contiguous groups of ``f = n / P_f`` and the batch into
  ``P_b`` groups, tile ``t = i_b P_f + i_f``. Factor ``k`` (stride ``2^k``) pairs feature ``i`` with
  ``i XOR 2^k``: when ``2^k >= f`` the partner lives on tile ``t XOR (2^k / f)`` and the phase
  exchanges the whole ``rows x f`` block both ways (the permutation exchange between factors);
  otherwise it is tile-local. Compute: 2 MACs per output element on the vector unit (2x2 blocks
  are too small for the AMP). Phase 0 also receives the input block from its home layout.
* pixelfly (Chen, Dao et al. 2022): phase ``pixelfly-blocks`` (block-sparse product on the AMP,
  block rows split into ``P_r`` groups, batch into ``P_b``; a tile receives the input blocks of
  every column its rows touch), the two low-rank matmuls, and ``pixelfly-sum`` (the low-rank output
  is exchanged to the block-output layout and added on the vector unit).

Each schedule chooses its own partition by minimising predicted cycles subject to the per-tile
``sram_bytes`` budget (data + :func:`~models.linear.planner.overhead_bytes_per_tile`), like
:func:`~models.linear.planner.plan_matmul`. ``data_bytes`` of a multi-part schedule is the sum of
the parts' peaks (every buffer counted live at once: an upper bound).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from models.linear.layers import is_power_of_two, pixelfly_layout
from models.linear.planner import (
    DEFAULT_MEMORY_PROPORTION,
    OverheadConstants,
    Phase,
    SuperstepCosts,
    _require_precision,
    block_pieces,
    overhead_bytes_per_tile,
    phases_cycles,
    plan_matmul,
    split_sizes,
)
from tilesim.errors import SramOverflowError, require

__all__ = ["LayerSchedule", "dense_schedule", "lowrank_schedule", "butterfly_schedule", "pixelfly_schedule"]


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
    return _require_precision("precision", precision)


def _from_plans(name, plans, tiles, precision, costs):
    phases = tuple(p for plan in plans for p in plan.phases)
    data = sum(plan.data_bytes for plan in plans)
    return LayerSchedule(name, tiles, precision, phases, data, phases_cycles(phases, costs), tuple(plans))


def dense_schedule(n_in: int, n_out: int, batch: int, *, tiles: int, sram_bytes: int, flops_per_cycle: float,
                   fixed_cycles: float = 331.0, precision: str = "fp32", costs: SuperstepCosts = SuperstepCosts(),
                   overheads: OverheadConstants = OverheadConstants(), partials_precision: str = "fp32",
                   memory_proportion: float = DEFAULT_MEMORY_PROPORTION) -> LayerSchedule:
    """Dense layer forward: ``(batch, n_in) x (n_in, n_out)`` planned by :func:`plan_matmul` (serial
    splits, ``memory_proportion`` = PopLibs' availableMemoryProportion, partials type)."""
    _common(batch, tiles, sram_bytes, precision)
    plan = plan_matmul(batch, n_in, n_out, tiles=tiles, sram_bytes=sram_bytes, flops_per_cycle=flops_per_cycle,
                       fixed_cycles=fixed_cycles, precision=precision, costs=costs, overheads=overheads,
                       partials_precision=partials_precision, memory_proportion=memory_proportion)
    return _from_plans("dense", [plan], tiles, precision, costs)


def lowrank_schedule(n_in: int, n_out: int, rank: int, batch: int, *, tiles: int, sram_bytes: int,
                     flops_per_cycle: float, fixed_cycles: float = 331.0, precision: str = "fp32",
                     costs: SuperstepCosts = SuperstepCosts(),
                     overheads: OverheadConstants = OverheadConstants()) -> LayerSchedule:
    """Low-rank forward ``(x V) U^T``: two planned matmuls."""
    _common(batch, tiles, sram_bytes, precision)
    kw = dict(tiles=tiles, sram_bytes=sram_bytes, flops_per_cycle=flops_per_cycle, fixed_cycles=fixed_cycles,
              precision=precision, costs=costs, overheads=overheads)
    plans = [plan_matmul(batch, n_in, rank, **kw), plan_matmul(batch, rank, n_out, **kw)]
    return _from_plans("low-rank", plans, tiles, precision, costs)


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


def butterfly_schedule(n: int, batch: int, *, tiles: int, sram_bytes: int, precision: str = "fp32",
                       costs: SuperstepCosts = SuperstepCosts(),
                       overheads: OverheadConstants = OverheadConstants()) -> LayerSchedule:
    """Butterfly forward as ``log2 n`` phases (see module docstring), best ``(P_f, P_b)`` that fits.

    Per-tile data: ``log2 n + 1`` activation blocks (kept for the backward pass) + a partner receive
    buffer, twiddles (2 coefficients per owned output per factor) and bias, and the input home chunk.
    """
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
                max(cb * f * eb * (2 if f == 1 else 1), home + (cb * f * eb if f == 1 else 0)) / costs.exchange_bytes_per_cycle)
            xk = costs.exchange_fixed_cycles + math.ceil(cb * f * eb / costs.exchange_bytes_per_cycle)
            total = levels * (costs.sync_cycles + vec) + x0 + (cross - (1 if f == 1 else 0)) * xk
            data0 = (levels + 2) * cb * f * eb + (2 * f * levels + f) * eb + home
            key = (total, pf * pb, pf)
            if data0 <= sram_bytes and (best is None or key < best[0]):
                best = (key, pf, pb)
        pf *= 2
    if best is not None:
        phases, data = _butterfly_build(n, batch, best[1], best[2], tiles, eb, costs)
        sched = LayerSchedule("butterfly", tiles, precision, phases, data, phases_cycles(phases, costs),
                              partition={"features": best[1], "batch": best[2]})
        if int(sched.memory_bytes(overheads).max()) <= sram_bytes:
            return sched
    raise SramOverflowError(
        f"butterfly n = {n}, batch = {batch}, {precision} on {tiles} tiles: no (features, batch) split fits "
        f"sram_bytes = {sram_bytes} B; use more tiles, fp16 or a smaller batch", tiles=[0])


def pixelfly_schedule(n: int, batch: int, block_size: int, butterfly_size: int, lowrank_size: int, *, tiles: int,
                      sram_bytes: int, flops_per_cycle: float, fixed_cycles: float = 331.0, precision: str = "fp32",
                      costs: SuperstepCosts = SuperstepCosts(),
                      overheads: OverheadConstants = OverheadConstants()) -> LayerSchedule:
    """Pixelfly forward: block-sparse AMP phase, low-rank matmuls, sum phase (see module docstring).

    One AMP vertex per tile covers all its blocks: ``fixed_cycles + ceil(MACs / macs_per_cycle)``.
    """
    eb = _common(batch, tiles, sram_bytes, precision)
    layout = pixelfly_layout(n, n, block_size, butterfly_size)
    nbr = layout.shape[0]
    bs = block_size
    mpc = flops_per_cycle / 2.0
    home = split_sizes(batch * n, tiles)
    home_max = int(home.max()) * eb
    lay = layout.astype(np.int64)
    best = None
    for pr in range(1, min(nbr, tiles) + 1):
        sizes = split_sizes(nbr, pr)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        grp = np.add.reduceat(lay, starts, axis=0)
        nblk = grp.sum(axis=1)
        dcols = (grp > 0).sum(axis=1)
        for pb in range(1, min(batch, tiles // pr) + 1):
            cb = -(-batch // pb)
            amp = fixed_cycles + np.ceil(cb * nblk * bs * bs / mpc)
            b_in = cb * dcols * bs * eb
            ph1 = costs.sync_cycles + costs.exchange_fixed_cycles + math.ceil(
                max(int(b_in.max()), home_max) / costs.exchange_bytes_per_cycle) + amp.max()
            out_el = cb * sizes * bs
            ph2 = costs.sync_cycles + costs.exchange_fixed_cycles + math.ceil(
                int(out_el.max()) * eb / costs.exchange_bytes_per_cycle) + int(costs.vector_cycles(int(out_el.max()), eb))
            data0 = int((nblk * bs * bs * eb + b_in + 2 * out_el * eb).max()) + home_max
            key = (ph1 + ph2, pr * pb, pr)
            if data0 <= sram_bytes and (best is None or key < best[0]):
                best = (key, pr, pb)
    if best is None:
        raise SramOverflowError(
            f"pixelfly n = {n}, batch = {batch}, block {bs}, {precision} on {tiles} tiles: no block-row split fits "
            f"sram_bytes = {sram_bytes} B; use more tiles, fp16 or a smaller batch", tiles=[0])
    _, pr, pb = best
    t = np.arange(tiles)
    active = t < pr * pb
    ir, ib = np.where(active, t % pr, 0), np.where(active, t // pr, 0)
    sizes = split_sizes(nbr, pr)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    grp = np.add.reduceat(lay, starts, axis=0)
    rows = np.where(active, split_sizes(batch, pb)[ib], 0)
    nblk = np.where(active, grp.sum(axis=1)[ir], 0)
    dcols = np.where(active, (grp > 0).sum(axis=1)[ir], 0)
    feat = np.where(active, sizes[ir] * bs, 0)
    macs = rows * nblk * bs * bs
    amp = np.where(macs > 0, fixed_cycles + np.ceil(macs / mpc), 0).astype(np.int64)
    one = (macs > 0).astype(np.int64)
    b_in = rows * dcols * bs * eb
    in_pieces = rows * dcols * (dcols < n // bs) + (dcols == n // bs) * (rows > 0)
    send = split_sizes(int(in_pieces.sum()), tiles)
    blocks = Phase("pixelfly-blocks", "amp", macs, amp, b_in, home * eb, one, (1 + 2 * nblk) * one, in_pieces + send)
    out_el = rows * feat
    plans = []
    if lowrank_size:
        kw = dict(tiles=tiles, sram_bytes=sram_bytes, flops_per_cycle=flops_per_cycle, fixed_cycles=fixed_cycles,
                  precision=precision, costs=costs, overheads=overheads)
        plans = [plan_matmul(batch, n, lowrank_size, **kw), plan_matmul(batch, lowrank_size, n, **kw)]
        lr_out = plans[1].output_bytes
        sum_phase = Phase("pixelfly-sum", "vector", out_el, costs.vector_cycles(out_el, eb), out_el * eb, lr_out,
                          one, 3 * one, 2 * one)
        phases = (blocks,) + plans[0].phases + plans[1].phases + (sum_phase,)
    else:
        phases = (blocks,)
    data = nblk * bs * bs * eb + b_in + 2 * out_el * eb + home * eb + sum(p.data_bytes for p in plans)
    sched = LayerSchedule("pixelfly", tiles, precision, phases, data, phases_cycles(phases, costs), tuple(plans),
                          {"block_rows": pr, "batch": pb})
    if int(sched.memory_bytes(overheads).max()) > sram_bytes:
        raise SramOverflowError(
            f"pixelfly n = {n}, batch = {batch}, {precision} on {tiles} tiles: peak tile memory "
            f"{int(sched.memory_bytes(overheads).max())} B > sram_bytes = {sram_bytes} B; use more tiles or fp16",
            tiles=[int(np.argmax(sched.memory_bytes(overheads)))])
    return sched
