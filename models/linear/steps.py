"""Training-step schedules: backward passes, fastfood, circulant, element-wise phases and the SGD update.

Everything here returns :class:`~tilesim.models.linear.schedules.LayerSchedule` records (phases of per-tile
work and exchange bytes) for :mod:`tilesim.models.linear.timing`. The cost model is the planner's
(:mod:`tilesim.models.linear.planner` docstring): one phase = sync + exchange + one compute set.

Backward passes (``grad_y`` arrives in the layout the forward pass produced ``y`` in):

* dense ``y = x W^T + b``: ``grad_x = grad_y W`` (matmul ``(B, n_out) x (n_out, n_in)``), ``grad_W =
  grad_y^T x`` (matmul ``(n_out, B) x (B, n_in)``), ``grad_b`` = batch reduction (phase ``bias-grad``);
* low rank ``y = (x V) U^T``: four matmuls (``grad_U = g^T h``, ``grad_h = g U``, ``grad_V = x^T grad_h``,
  ``grad_x = grad_h V^T``) and ``bias-grad``;
* butterfly: the forward's ``log2 n`` factor phases in reverse order on the forward's partition,
  ``4`` vector MACs per element (2 for ``grad_x``, 2 for the twiddle gradient), the same partner
  exchanges; then ``twiddle-reduce``: the per-tile partial twiddle and bias gradients
  (``2 f log2 n + 2 f`` coefficients per feature group) are summed over the ``P_b`` batch groups
  (tile ``i`` of the group owns slice ``i``, receives the other ``P_b - 1`` copies of it);
* pixelfly: the block-sparse part as a static block-sparse layer
  (:func:`~tilesim.models.linear.schedules.block_sparse_schedules`: ``grad_x`` planned on the transposed
  layout, ``sparse-wgrad`` on the forward's partition and its reduction over the dense-column parts),
  the low-rank backward and ``bias-grad``.

Transforms on a radix-2 layout (features in ``P_f`` groups of ``f``, batch in ``P_b`` groups, as the
butterfly schedule; stage ``k`` pairs element ``i`` with ``i XOR 2^k`` and exchanges the block when
``2^k >= f``):

* fastfood ``y = S H G Π H B x + b`` (Le et al. 2013): ``H`` = fast Walsh–Hadamard, ``log2 n`` stages
  of 1 add/sub per element; ``B``/``G``/``S`` multiplies and the bias are fused into the first/last
  stage of a transform; ``Π`` is phase ``fastfood-perm`` (every element moves: ``f · rows`` elements
  in and out, one exchange piece per source group). Backward: the same in reverse (transposes),
  plus the diagonal gradients (1 MAC per element each) and ``diag-reduce`` over batch groups.
* circulant ``y = irfft(rfft(c) · rfft(x)) + b`` (the layer's algorithm): a real FFT of ``n`` points is
  a complex FFT of ``n / 2`` points (``log2(n/2)`` radix-2 stages, 5 flops per complex point per
  stage: a complex multiply and two complex adds per pair) with complex elements of 2 words; the
  spectrum product (6 flops per point) and the real-FFT pre/post twist (4 flops per point) are
  fused into the adjacent stages. Backward: ``grad_x`` = one FFT + one inverse FFT, ``grad_c`` =
  batch reduction of ``rfft(g) · conj(rfft(x))`` and one inverse FFT of a single row.
  Coarser than the butterfly (``rfft(c)`` of the 1-row kernel is not counted).

Element-wise phases (bias + ReLU, ReLU gradient, softmax cross-entropy, SGD update) spread their
elements over all tiles in near-equal contiguous chunks; each first receives its operands from the
layout that produced them (``bytes_in = bytes_out = elements · inputs · element bytes``). SGD with
momentum (PyTorch form ``v = μ v + g``, ``p -= lr v``) is 2 MACs per parameter.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tilesim.errors import SramOverflowError, require
from tilesim.models.linear.blocksparse import StaticBlockCosts, plan_block_sparse, weight_grad_phases
from tilesim.models.linear.layers import is_power_of_two, pixelfly_layout
from tilesim.models.linear.phases import (
    PRECISION_BYTES,
    Phase,
    SuperstepCosts,
    block_pieces,
    phases_cycles,
    require_precision,
    split_sizes,
)
from tilesim.models.linear.planner import PlanTarget, plan_matmul
from tilesim.models.linear.schedules import LayerSchedule, popsparse_layout

__all__ = [
    "elementwise_schedule",
    "group_reduce_phase",
    "dense_backward_schedule",
    "lowrank_backward_schedule",
    "butterfly_backward_schedule",
    "pixelfly_backward_schedule",
    "fastfood_schedules",
    "circulant_schedules",
    "sgd_update_schedule",
]


def _zeros(tiles):
    return np.zeros(tiles, dtype=np.int64)


def _schedule(name, phases, data, tiles, precision, costs, parts=(), partition=None):
    return LayerSchedule(
        name,
        tiles,
        precision,
        tuple(phases),
        np.asarray(data, dtype=np.int64),
        phases_cycles(phases, costs),
        tuple(parts),
        dict(partition or {}),
    )


def elementwise_schedule(
    name: str,
    elements: int,
    *,
    ops_per_element: float,
    inputs: int,
    tiles: int,
    precision: str = "fp32",
    costs: SuperstepCosts = SuperstepCosts(),
    exchange: bool = True,
) -> LayerSchedule:
    """One vector phase over ``elements`` spread on all tiles (see module docstring)."""
    eb = require_precision("precision", precision)
    require(isinstance(elements, (int, np.integer)) and elements >= 1, "elements", elements, "must be >= 1", "")
    el = split_sizes(elements, tiles)
    ops = np.ceil(el * ops_per_element).astype(np.int64)
    one = (el > 0).astype(np.int64)
    moved = el * inputs * eb if exchange else _zeros(tiles)
    ph = Phase(
        name,
        "vector",
        ops,
        costs.vector_cycles(ops, eb),
        moved,
        moved,
        one,
        (inputs + 1) * one,
        2 * one if exchange else _zeros(tiles),
    )
    return _schedule(name, [ph], el * (inputs + 1) * eb, tiles, precision, costs)


def group_reduce_phase(name: str, coeffs, groups: int, eb: int, costs: SuperstepCosts):
    """Sum per-tile partial vectors (``coeffs[t]`` words) over ``groups`` tiles holding copies of the
    same coefficients; ``None`` when ``groups == 1`` (nothing to reduce)."""
    if groups <= 1:
        return None
    coeffs = np.asarray(coeffs, dtype=np.int64)
    sl = -(-coeffs // groups)
    has = (coeffs > 0).astype(np.int64)
    adds = (groups - 1) * sl
    return Phase(
        name,
        "vector",
        adds,
        costs.vector_cycles(adds, eb),
        adds * eb,
        np.maximum(coeffs - sl, 0) * eb,
        has,
        (groups + 1) * has,
        2 * (groups - 1) * has,
    )


def _bias_grad(n_out, batch, tiles, precision, costs):
    return elementwise_schedule(
        "bias-grad", batch * n_out, ops_per_element=1, inputs=1, tiles=tiles, precision=precision, costs=costs
    )


def _combine(name, schedules, tiles, precision, costs, partition=None):
    phases = [p for s in schedules for p in s.phases]
    data = np.max([s.data_bytes for s in schedules], axis=0)
    parts = tuple(p for s in schedules for p in (s.parts or ()))
    return _schedule(name, phases, data, tiles, precision, costs, parts, partition)


def _mm(m, k, n, target):
    plan = plan_matmul(m, k, n, target)
    return LayerSchedule(
        "matmul", plan.tiles, plan.precision, plan.phases, plan.data_bytes, plan.predicted_cycles, (plan,)
    )


def dense_backward_schedule(n_in: int, n_out: int, batch: int, target: PlanTarget) -> LayerSchedule:
    """``grad_x``, ``grad_W`` (planned matmuls, :func:`~tilesim.models.linear.planner.plan_matmul` options) and
    ``bias-grad``."""
    tiles, precision, costs = target.tiles, target.precision, target.costs
    parts = [
        _mm(batch, n_out, n_in, target),
        _mm(n_out, batch, n_in, target),
        _bias_grad(n_out, batch, tiles, precision, costs),
    ]
    return _combine("dense-backward", parts, tiles, precision, costs)


def lowrank_backward_schedule(n_in: int, n_out: int, rank: int, batch: int, target: PlanTarget) -> LayerSchedule:
    """Four planned matmuls and ``bias-grad`` (module docstring)."""
    tiles, precision, costs = target.tiles, target.precision, target.costs
    parts = [
        _mm(n_out, batch, rank, target),
        _mm(batch, n_out, rank, target),
        _mm(n_in, batch, rank, target),
        _mm(batch, rank, n_in, target),
        _bias_grad(n_out, batch, tiles, precision, costs),
    ]
    return _combine("low-rank-backward", parts, tiles, precision, costs)


# --------------------------------------------------------------------------------------------
# radix-2 layouts (butterfly backward, fastfood, circulant)
# --------------------------------------------------------------------------------------------
def _radix2_layout(n, batch, pf, pb, tiles):
    t = np.arange(tiles)
    active = t < pf * pb
    ib = np.where(active, t // pf, 0)
    rows = np.where(active, split_sizes(batch, pb)[ib], 0)
    f = n // pf
    return active.astype(np.int64), rows, f, rows * f


def _radix2_phases(
    prefix,
    n,
    batch,
    pf,
    pb,
    tiles,
    elem_bytes,
    ops_per_elem,
    costs,
    *,
    levels=None,
    reverse=False,
    extra_first=0.0,
    extra_last=0.0,
    receive_home=0,
    unit_bytes=None,
):
    """Stages of a radix-2 transform on ``n`` points (module docstring); ``receive_home`` words per
    point arrive from the home layout in the first stage."""
    one, rows, f, elems = _radix2_layout(n, batch, pf, pb, tiles)
    unit_bytes = unit_bytes or elem_bytes
    levels = int(math.log2(n)) if levels is None else levels
    order = list(range(levels))[::-1] if reverse else list(range(levels))
    phases = []
    for i, k in enumerate(order):
        crossing = (1 << k) >= f
        b = elems * elem_bytes if crossing else _zeros(tiles)
        b_in, b_out = b.copy(), b.copy()
        instr = 2 * one if crossing else _zeros(tiles)
        per = ops_per_elem + (extra_first if i == 0 else 0.0) + (extra_last if i == len(order) - 1 else 0.0)
        ops = np.ceil(elems * per).astype(np.int64)
        if i == 0 and receive_home:
            home = split_sizes(batch * n * receive_home, tiles)
            pieces = block_pieces(
                rows, np.where(one > 0, f * receive_home, 0), n * receive_home, int(home.max()), tiles
            )
            b_in = b_in + elems * receive_home * unit_bytes
            b_out = b_out + home * unit_bytes
            instr = instr + pieces + split_sizes(int(pieces.sum()), tiles)
        phases.append(
            Phase(
                f"{prefix}-{k}", "vector", ops, costs.vector_cycles(ops, unit_bytes), b_in, b_out, one, 4 * one, instr
            )
        )
    return phases


def _best_radix2(n, batch, tiles, sram_bytes, elem_bytes, stages, words_per_elem, param_words, costs):
    """``(P_f, P_b)`` minimising the closed-form cycles of ``stages`` radix-2 stages on the fullest
    tile whose data (``words_per_elem`` words per element + ``param_words`` per feature) fits."""
    best = None
    levels = int(math.log2(n))
    pf = 1
    while pf <= min(n, tiles):
        f = n // pf
        cross = sum(1 for k in range(levels) if (1 << k) >= f) * stages / levels
        for pb in range(1, min(batch, tiles // pf) + 1):
            cb = -(-batch // pb)
            el = cb * f
            vec = costs.vector_fixed_cycles + math.ceil(el * 2 / (costs.vector_bytes_per_cycle / elem_bytes))
            xk = costs.exchange_fixed_cycles + math.ceil(el * elem_bytes / costs.exchange_bytes_per_cycle)
            reduce = (
                0
                if pb == 1
                else (
                    costs.sync_cycles
                    + costs.exchange_fixed_cycles
                    + math.ceil(param_words * f * elem_bytes / costs.exchange_bytes_per_cycle)
                )
            )
            total = stages * (costs.sync_cycles + vec) + cross * xk + reduce
            data = words_per_elem * el * elem_bytes + param_words * f * elem_bytes + -(-batch * n // tiles) * elem_bytes
            key = (total, pf * pb, pf)
            if data <= sram_bytes and (best is None or key < best[0]):
                best = (key, pf, pb)
        pf *= 2
    return best


def _overflow(what, n, batch, precision, tiles, sram_bytes):
    return SramOverflowError(
        f"{what} n = {n}, batch = {batch}, {precision} on {tiles} tiles: no (features, batch) split fits "
        f"sram_bytes = {sram_bytes} B; use more tiles, fp16 or a smaller batch",
        tiles=[0],
    )


def _check_fit(sched, overheads, sram_bytes, what):
    mem = sched.memory_bytes(overheads)
    if int(mem.max()) > sram_bytes:
        raise SramOverflowError(
            f"{what}: peak tile memory {int(mem.max())} B > sram_bytes = {sram_bytes} B; "
            f"use more tiles, fp16 or a smaller batch",
            tiles=[int(np.argmax(mem))],
        )
    return sched


def butterfly_backward_schedule(
    forward: LayerSchedule, n: int, batch: int, *, costs: SuperstepCosts = SuperstepCosts()
) -> LayerSchedule:
    """Backward of a :func:`butterfly_schedule` forward on its partition (module docstring)."""
    require(forward.name == "butterfly", "forward schedule", forward.name, "must be a butterfly schedule", "")
    eb = require_precision("precision", forward.precision)
    tiles = forward.tiles
    pf, pb = forward.partition["features"], forward.partition["batch"]
    levels = int(math.log2(n))
    phases = _radix2_phases("butterfly-grad", n, batch, pf, pb, tiles, eb, 4, costs, reverse=True)
    one, rows, f, elems = _radix2_layout(n, batch, pf, pb, tiles)
    coeffs = one * (2 * f * levels + 2 * f)
    red = group_reduce_phase("twiddle-reduce", coeffs, pb, eb, costs)
    if red is not None:
        phases.append(red)
    data = forward.data_bytes + 2 * elems * eb + coeffs * eb * 2
    return _schedule("butterfly-backward", phases, data, tiles, forward.precision, costs, (), forward.partition)


def pixelfly_backward_schedule(
    forward: LayerSchedule,
    n: int,
    batch: int,
    block_size: int,
    butterfly_size: int,
    lowrank_size: int,
    target: PlanTarget,
    *,
    workers: int,
) -> LayerSchedule:
    """Backward of a :func:`~tilesim.models.linear.schedules.pixelfly_schedule` forward: the block-sparse part as
    :func:`~tilesim.models.linear.schedules.block_sparse_schedules` does it (``grad_x`` planned on the transposed
    layout, the weight gradient on the forward's partition), then the low-rank backward. The tiles and
    the precision are the forward's (``target``'s are not read)."""
    require(forward.name == "pixelfly", "forward schedule", forward.name, "must be a pixelfly schedule", "")
    precision = forward.precision
    eb = require_precision("precision", precision)
    tiles = forward.tiles
    sram_bytes, costs, overheads = target.sram_bytes, target.costs, target.overheads
    target = replace(target, tiles=tiles, precision=precision)
    fwd = forward.parts[0]
    sub, layout = popsparse_layout(pixelfly_layout(n, n, block_size, butterfly_size), block_size)
    gx = plan_block_sparse(layout.T, batch, target, block=sub, workers=workers)
    wg_phases, wg_data = weight_grad_phases(
        fwd, eb, PRECISION_BYTES[fwd.partials_precision], workers, costs, StaticBlockCosts()
    )
    phases = gx.phases + wg_phases
    parts = [
        _schedule(
            "pixelfly-blocks-backward", list(phases), np.maximum(gx.data_bytes, wg_data), tiles, precision, costs, (gx,)
        )
    ]
    if lowrank_size:
        parts.append(lowrank_backward_schedule(n, n, lowrank_size, batch, target))
    else:
        parts.append(_bias_grad(n, batch, tiles, precision, costs))
    sched = _combine("pixelfly-backward", parts, tiles, precision, costs, forward.partition)
    return _check_fit(sched, overheads, sram_bytes, f"pixelfly backward n = {n}, batch = {batch}")


def fastfood_schedules(n: int, batch: int, target: PlanTarget) -> tuple:
    """``(forward, backward)`` of the fastfood layer on the best radix-2 partition (module docstring)."""
    tiles, sram_bytes, precision, costs = target.tiles, target.sram_bytes, target.precision, target.costs
    overheads = target.overheads
    eb = require_precision("precision", precision)
    require(
        is_power_of_two(n) and n >= 2,
        "n",
        n,
        "must be a power of two >= 2",
        "fastfood uses the Walsh–Hadamard transform; pad the layer width to 2^L",
    )
    levels = int(math.log2(n))
    best = _best_radix2(n, batch, tiles, sram_bytes, eb, 2 * levels, 6, 8, costs)
    if best is None:
        raise _overflow("fastfood", n, batch, precision, tiles, sram_bytes)
    _, pf, pb = best
    one, rows, f, elems = _radix2_layout(n, batch, pf, pb, tiles)
    perm_pieces = rows * min(f, pf) * one

    def perm(name):
        b = elems * eb
        return Phase(
            name,
            "vector",
            elems,
            costs.vector_cycles(elems, eb),
            b,
            b,
            one,
            2 * one,
            perm_pieces + split_sizes(int(perm_pieces.sum()), tiles),
        )

    fwd = (
        _radix2_phases("fastfood-h1", n, batch, pf, pb, tiles, eb, 1, costs, extra_first=1, receive_home=1)
        + [perm("fastfood-perm")]
        + _radix2_phases("fastfood-h2", n, batch, pf, pb, tiles, eb, 1, costs, extra_first=1, extra_last=2)
    )
    data_f = 6 * elems * eb + one * 8 * f * eb + split_sizes(batch * n, tiles) * eb
    forward = _schedule("fastfood", fwd, data_f, tiles, precision, costs, partition={"features": pf, "batch": pb})
    bwd = (
        _radix2_phases(
            "fastfood-grad-h2", n, batch, pf, pb, tiles, eb, 1, costs, reverse=True, extra_first=2, extra_last=2
        )
        + [perm("fastfood-grad-perm")]
        + _radix2_phases("fastfood-grad-h1", n, batch, pf, pb, tiles, eb, 1, costs, reverse=True, extra_last=2)
    )
    red = group_reduce_phase("diag-reduce", one * 4 * f, pb, eb, costs)
    if red is not None:
        bwd.append(red)
    backward = _schedule(
        "fastfood-backward",
        bwd,
        data_f + 2 * elems * eb,
        tiles,
        precision,
        costs,
        partition={"features": pf, "batch": pb},
    )
    for s in (forward, backward):
        _check_fit(s, overheads, sram_bytes, f"fastfood n = {n}, batch = {batch}")
    return forward, backward


def circulant_schedules(n: int, batch: int, target: PlanTarget) -> tuple:
    """``(forward, backward)`` of the FFT circulant layer (module docstring); ``n`` a power of two >= 4."""
    tiles, sram_bytes, precision, costs = target.tiles, target.sram_bytes, target.precision, target.costs
    overheads = target.overheads
    eb = require_precision("precision", precision)
    require(
        is_power_of_two(n) and n >= 4,
        "n",
        n,
        "must be a power of two >= 4",
        "the radix-2 FFT model needs n = 2^L; pad the layer width",
    )
    half = n // 2
    cb = 2 * eb  # one complex point = 2 words
    lv = int(math.log2(half))
    best = _best_radix2(half, batch, tiles, sram_bytes, cb, 2 * lv, 4, 3, costs)
    if best is None:
        raise _overflow("circulant", n, batch, precision, tiles, sram_bytes)
    _, pf, pb = best
    one, rows, f, elems = _radix2_layout(half, batch, pf, pb, tiles)
    kw = dict(levels=lv, unit_bytes=eb)

    def fft(prefix, **extra):
        return _radix2_phases(prefix, half, batch, pf, pb, tiles, cb, 5, costs, **kw, **extra)

    fwd = fft("circulant-fft", extra_first=2, extra_last=6, receive_home=2) + fft(
        "circulant-ifft", reverse=True, extra_last=3
    )
    data_f = 4 * elems * cb + one * 3 * f * cb + split_sizes(batch * n, tiles) * eb
    forward = _schedule("circulant", fwd, data_f, tiles, precision, costs, partition={"features": pf, "batch": pb})
    bwd = fft("circulant-grad-fft", extra_first=2, extra_last=12) + fft(
        "circulant-grad-ifft", reverse=True, extra_last=2
    )
    red = group_reduce_phase("spectrum-reduce", one * 2 * f * 2, pb, eb, costs)
    if red is not None:
        bwd.append(red)
    bwd += _radix2_phases("circulant-gradc-ifft", half, 1, pf, 1, tiles, cb, 5, costs, reverse=True, extra_last=2, **kw)
    backward = _schedule(
        "circulant-backward",
        bwd,
        data_f + 2 * elems * cb,
        tiles,
        precision,
        costs,
        partition={"features": pf, "batch": pb},
    )
    for s in (forward, backward):
        _check_fit(s, overheads, sram_bytes, f"circulant n = {n}, batch = {batch}")
    return forward, backward


def sgd_update_schedule(
    params: int, *, tiles: int, precision: str = "fp32", costs: SuperstepCosts = SuperstepCosts()
) -> LayerSchedule:
    """SGD with momentum over ``params`` parameters spread on all tiles: 2 MACs per parameter; the
    gradient moves from the layout it was produced in to the parameter's home tile."""
    return elementwise_schedule(
        "sgd-update", params, ops_per_element=2, inputs=1, tiles=tiles, precision=precision, costs=costs
    )
