"""PopLibs' cycle estimates of the vertices of a planned dense matmul: its AMP convolution vertex
(``ConvPartial1x1Out``), the reduction of the partials and the cast to the output type, ported from
``graphcore/poplibs`` ``lib/poplin/PerformanceEstimation.hpp``
(``getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat``,
``getConvPartial1x1SupervisorOuterLoopCycleEstimateHalfFloat``,
``getConvPartialAmpSupervisorWeightLoadCycleEstimate``) and ``lib/poplin/ConvModel.cpp``
(``addPartialCalcCycleEstimate``: how the planner feeds them a tile's partition).

PopLibs runs ``(m x k) · (k x n)`` as a 1x1 convolution (``lib/poplin/MatMul.cpp``, ``getConvParams``); for a
tile holding ``f`` rows of the field (the batch), ``k_t`` input and ``n_t`` output channels:

* the AMP takes ``W`` input channels (``weightsPerConvUnit``) into each of ``U`` conv units (one output channel
  each): ``G_in = ceil(k_t / W)`` input-channel groups, ``G_out = ceil(n_t / U)`` output-channel groups — a
  group is padded to ``U`` channels, so ``n_t = 4`` costs as much as ``n_t = U``;
* for every ``(G_in, G_out)`` pair the supervisor loads ``L = U W b / c`` cycles of coefficients (``b`` bytes
  per element, ``c`` coefficient bytes loaded per cycle) and the six workers stream their share of the
  field: worker cycles for ``e`` field elements (``e >= 3``, FP16 input, FP32 partials)::

      cyc(e) = 37|38 + 4 (e - 3) - 7          (37 with output zeroing, the first input group; 7: retention)

  (FP32 input: ``46 + (2 + 4 e)·z + 8 (e - 3)``; ``e = 1, 2`` have their own constants), and the inner
  loop costs ``max(6 · max_w cyc(e_w), 6 · min_w cyc(e_w) + 14)`` (an idle worker counts 0);
* the supervisor's outer loop (``c_h = 1`` on the half-with-16-units / float-partials path)::

      50 + 6 (r1 + r2 (G_in - 1)) + 12 + c_h + (G_in - 1)(15 - c_h + 1 + G_out (19 + 6 + L + inner_nz))
         + 10 + 1 + G_out (19 - c_h + 7 + L + inner_z)

The partials of a ``k`` split (``P_k`` tiles per output) are reduced by PopLibs' reduce vertex
(``getReduceCycleEstimate``, the general multi-input vertex; ``estimateConvReduceCycles``: the last stage writes
the output type): ``W (32 + (3 d + c) ceil(loops / W))`` for ``d`` partials of ``o`` outputs, ``loops = o / v``
(``v`` = 4 FP32 / 8 FP16 partials per loop, plus one per odd low bit of ``o``), ``c`` 6-9 by types; an
unsplit ``k`` with FP32 partials and FP16 output is a cast, ``W (26 + ceil(ceil(o / W) / 2))``
(``estimateCastCycles``). The per-vertex ``32 W`` / ``26 W`` are what small matmuls pay.

So a tile's AMP time is ``~ f k_t n_t / (U W / core)`` streaming plus ``G_in G_out (26 + L + worker
overheads)``: at a small batch the coefficient loads and the per-worker overheads dominate (FP32 ``f = 4``:
~371 cycles per 16 x 8 weights, 2.9 cycles per weight element). For ``[N, 16] @ [16, 16]`` FP16 it gives
``321-329 + 4 N`` for ``N`` from 60 to 2048 (``359 + 4 N`` at ``N`` = 16), against the ``331 + 4 N`` fitted on
tessellate-ipu's Bow measurements (the fit the planner used before; ``tests/test_linear_planner.py`` holds the
estimate to those measurements).

Target constants of the IPU2 (GC200/Bow) tile: ``U`` = 16 conv units for FP16 input with FP32 partials and 8
for FP32 (``getFp16InFp32OutConvUnitsPerTile`` / ``getFp32InFp32OutConvUnitsPerTile``); ``W`` follows from
the chip's AMP rate (``U W`` MACs per field element in the core loop's 4 (FP16) or 8 (FP32) cycles: 16 for
both at 64 and 16 MAC/cycle); coefficients are loaded 64 bits a cycle (``convUnitCoeffLoadBytesPerCycle``
16, halved because ``use128BitConvUnitLoad`` defaults to false, ``lib/poplin/ConvOptions.hpp``), so
``L = 64`` for both types.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "AmpTarget",
    "amp_target",
    "conv1x1_worker_cycles",
    "conv1x1_cycles",
    "reduce_cycles",
    "cast_cycles",
    "popops_reduce_vertex_cycles",
    "popops_reduce_tile_cycles",
    "popops_strided_reduce_cycles",
]

CORE_CYCLES = {"fp16": 4, "fp32": 8}
"""Cycles per field element of the AMP's core loop (``coreCycles``: 4 for half, 8 for float) [S]."""

CONV_UNITS = {"fp16": 16, "fp32": 8}
"""IPU2 conv units per tile: FP16 input with FP32 partials, FP32 input [S]."""

COEFF_LOAD_BYTES_PER_CYCLE = 8
"""``convUnitCoeffLoadBytesPerCycle`` (16 on IPU2) halved: ``use128BitConvUnitLoad`` is false by default [S]."""


@dataclass(frozen=True)
class AmpTarget:
    """The AMP of one tile as PopLibs' estimate sees it: ``float_input``, ``conv_units`` (``U``, output
    channels per group), ``weights_per_unit`` (``W``, input channels per group), ``load_cycles``
    (``L``: coefficient loads per group pair) and ``workers`` (worker contexts)."""

    float_input: bool
    conv_units: int
    weights_per_unit: int
    load_cycles: int
    workers: int


def amp_target(precision: str, flops_per_cycle: float, workers: int = 6) -> AmpTarget:
    """The :class:`AmpTarget` of a tile whose AMP runs ``flops_per_cycle`` at ``precision`` (FP32 partials):
    ``W = (flops_per_cycle / 2) · coreCycles / U``; ``L = U W bytes / 8``."""
    units = CONV_UNITS[precision]
    weights = int(round(flops_per_cycle / 2 * CORE_CYCLES[precision] / units))
    nbytes = 2 if precision == "fp16" else 4
    loads = units * weights * nbytes // COEFF_LOAD_BYTES_PER_CYCLE
    return AmpTarget(precision == "fp32", units, weights, loads, workers)


def conv1x1_worker_cycles(e, amp: AmpTarget, zeroing: bool):
    """Cycles of one worker doing ``e`` field elements (array or int; 0 = no work item: 0 cycles), FP32
    partials: ``getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat``'s per-worker term, minus the
    retention saving (7 for FP16 input, 0 for FP32)."""
    e = np.asarray(e, dtype=np.int64)
    z = 1 if zeroing else 0
    if amp.float_input:
        zero_per = 8 if amp.conv_units == 16 else 4
        one, two = 47 + (2 + zero_per) * z, 46 + (2 + 2 * zero_per) * z
        many = 46 + (2 + zero_per * e) * z + (e - 3) * CORE_CYCLES["fp32"]
        saving = 0
    else:  # the common half / float-partials path
        tail = 1 if zeroing else 2
        one, two = 31 + tail, 40 + tail
        many = (37 if zeroing else 38) + (e - 3) * CORE_CYCLES["fp16"]
        saving = 7
    cyc = np.where(e >= 3, many, np.where(e == 2, two, one)) - saving
    return np.where(e > 0, cyc, 0)


def _inner(field, amp: AmpTarget, zeroing: bool):
    """The supervisor's inner loop: ``field`` elements split over the workers as
    ``partitionConvPartialByWorker`` cuts them (``floor``/``ceil(field / workers)`` each)."""
    w = amp.workers
    lo, hi = field // w, -(-field // w)
    busiest = w * conv1x1_worker_cycles(hi, amp, zeroing)
    idlest = w * conv1x1_worker_cycles(lo, amp, zeroing)
    return np.maximum(busiest, idlest + 14)


TABLE_FIELDS = 1 << 16
"""Field sizes below which :func:`_group_costs` reads a table (two int64 tables, 1 MB at most, per AMP)."""

_TABLES: dict = {}
"""``AmpTarget -> (Z, N)`` of every field size below the tables' length (a power of two), for the last few AMPs."""


def _group_cost_table(amp: AmpTarget, top: int) -> tuple:
    """:func:`_group_costs` of every field size ``0..2^j - 1`` (read-only arrays) with ``2^j > top``, kept per AMP
    (and widened when a larger field comes)."""
    got = _TABLES.get(amp)
    if got is None or got[0].size <= top:
        sizes = np.arange(1 << max(top.bit_length(), 10), dtype=np.int64)
        got = (
            (19 - 1 + 7 + amp.load_cycles) + _inner(sizes, amp, True),
            (19 + 6 + amp.load_cycles) + _inner(sizes, amp, False),
        )
        for t in got:
            t.setflags(write=False)
        if amp not in _TABLES and len(_TABLES) >= 8:
            del _TABLES[next(iter(_TABLES))]
        _TABLES[amp] = got
    return got


def _group_costs(field, amp: AmpTarget) -> tuple:
    """``(Z, N)``: the supervisor's cycles per output-channel group of the last input group (the inner loop with
    output zeroing, ``Z = 19 - c_h + 7 + L + inner_z``) and of the others (``N = 19 + 6 + L + inner_nz``) for
    ``field`` elements (``c_h = 1``, the common code path). An array of sizes below :data:`TABLE_FIELDS` is looked
    up in a table of every size up to the next power of two (a planner scores many tile blocks of few distinct
    sizes), anything else worked out element by element: the same integers."""
    top = int(field.max()) if field.size else 0
    if field.ndim and field.size and int(field.min()) >= 0 and top < TABLE_FIELDS:
        z, n = _group_cost_table(amp, top)
        return z[field], n[field]
    return (19 - 1 + 7 + amp.load_cycles) + _inner(field, amp, True), (19 + 6 + amp.load_cycles) + _inner(
        field, amp, False
    )


def conv1x1_cycles(field, in_chans, out_chans, amp: AmpTarget):
    """Cycles of the AMP vertex on one tile (``getConvPartial1x1SupervisorCycleEstimate``, one conv group):
    ``field`` rows of the batch, ``in_chans`` and ``out_chans`` the tile's slice of ``k`` and ``n`` (arrays
    broadcast; 0 where any is 0). The outer loop of the module docstring (``c_h = 1``), its constants gathered::

        57 + 2 c_h + W (r1 - r2) + (W r2 + 16 - c_h) G_in + G_out (Z + (G_in - 1) N)

    with ``Z``, ``N`` the per-output-group cycles of :func:`_group_costs` (``G_in = ceil(k_t / W)``,
    ``G_out = ceil(n_t / U)``; ``W`` workers here, ``r1, r2 = 7, 3`` for FP16 input, 0 for FP32)."""
    field, in_chans, out_chans = (np.asarray(a, dtype=np.int64) for a in (field, in_chans, out_chans))
    g_in = (in_chans + (amp.weights_per_unit - 1)) // amp.weights_per_unit
    g_out = (out_chans + (amp.conv_units - 1)) // amp.conv_units
    common = 1  # FP16 with 16 conv units, or FP32 partials: PopLibs' common code path
    r1, r2 = (0, 0) if amp.float_input else (7, 3)
    z, n = _group_costs(field, amp)
    per_in = amp.workers * r2 + 16 - common
    cycles = g_out * (z + (g_in - 1) * n) + (per_in * g_in + (57 + 2 * common + amp.workers * (r1 - r2)))
    return np.where((field > 0) & (in_chans > 0) & (out_chans > 0), cycles, 0)


def reduce_cycles(outputs, partials, float_output: bool, float_partials: bool, workers: int = 6):
    """Cycles of PopLibs' reduce vertex adding ``partials`` inputs into each of ``outputs`` elements on a tile
    (arrays broadcast; 0 where there is nothing to reduce): ``getReduceCycleEstimate`` of
    ``lib/poplin/PerformanceEstimation.hpp``, the multi-input vertex (64-bit data path)."""
    o, d = np.asarray(outputs, dtype=np.int64), np.asarray(partials, dtype=np.int64)
    acc = 4 if float_partials else 8  # accVectorWidth
    per_path = 2 if float_partials else 4  # partials in the 64-bit data path
    per_loop = acc // min(acc, per_path) + 1
    loops = o // acc + sum((o >> i) & 1 for i in range(acc.bit_length() - 1))
    per_worker = loops // workers
    ragged = loops % workers > 0
    odd = (o & (acc - 1)) > 0
    extra = np.where(ragged & odd, 2 * d + (13 if float_partials else 11), 0)
    per_worker = per_worker + (ragged & ~odd)
    tail = (7 if float_partials else 9) if float_output else (6 if float_partials else 8)
    cycles = (32 + extra + (per_loop * d + tail) * per_worker) * workers
    return np.where((o > 0) & (d > 0), cycles, 0)


def cast_cycles(outputs, workers: int = 6):
    """Cycles of casting ``outputs`` FP32 partials to FP16 on a tile (``estimateCastCycles``: 2 partials and 4
    outputs per 64-bit vector), 0 where there is none."""
    o = np.asarray(outputs, dtype=np.int64)
    per_worker = -(-o // workers)
    cycles = (np.maximum(-(-per_worker // 2), -(-per_worker // 4)) + 26) * workers
    return np.where(o > 0, cycles, 0)


def popops_reduce_vertex_cycles(outputs, partials, regions, float_partials: bool):
    """Worker cycles of one popops ``Reduce`` vertex (ADD, no update, the general ``DEFAULT`` specialisation)
    reducing ``regions`` output regions of ``outputs`` elements each, every one from ``partials`` partials of its
    width: ``getCyclesEstimateForReduce`` of ``lib/popops/reduction/CycleEstimationFunctions.cpp`` [S]::

        7 + 26 + regions (30 + V (5 + S(a) + 1) + V d (7 + 3) + V d (l + 3)
                          + sum over set bits b of (o mod a): (4 + S(b) + 10 d + d (2 + 1 + 3)))

    ``a`` = 8 FP16 / 4 FP32 (``accVectorWidth``), ``V = o div a`` vector loops, ``d`` partials, ``S(w) = 2 min(w,
    v_out) + 1`` the store (``v_out`` = 4 FP16 / 2 FP32 per 64 bits), ``l = 2 + 2 + a / (64-bit loads)`` = 6 the
    per-partial vector load; the 30 per region is ``16 + 6 + 2 log2(a) + 2`` (setup, remainder checks, loop end).
    Arrays broadcast; 0 where there is nothing to reduce."""
    o, d, g = (np.asarray(a, dtype=np.int64) for a in (outputs, partials, regions))
    acc = 4 if float_partials else 8
    out_width = 2 if float_partials else 4  # output-type elements per 64 bits (partials and output one type)
    load = 2 + 2 + acc // out_width  # call/ret + alignment check + 64-bit loads per accumulator vector
    checks = acc.bit_length() - 1  # ceilLog2(accVectorWidth)
    vec = o // acc
    per_region = 16 + 6 + 2 * checks + 2 + vec * (5 + 2 * out_width + 1 + 1) + vec * d * (10 + load + 3)
    rem = o % acc
    for i in range(checks):
        bit = 1 << i
        has = (rem & bit) > 0
        per_region = per_region + np.where(has, 4 + 2 * min(bit, out_width) + 1 + 10 * d + d * (2 + 1 + 3), 0)
    cycles = 7 + 26 + g * per_region
    return np.where((o > 0) & (d > 0) & (g > 0), cycles, 0)


def popops_reduce_tile_cycles(outputs, partials, regions, float_partials: bool, workers: int = 6):
    """Tile cycles of popops' single-stage reduction of ``regions`` equal output regions (``outputs`` elements in
    all, ``partials`` partials each) on one tile: ``distributeReductionsBetweenWorkers``
    (``lib/popops/reduction/ReductionConnection.cpp``) gives consecutive regions of about equal cost to each worker
    (``ceil(regions / W)`` on the busiest), one vertex per worker, and a tile's time is ``W`` times its busiest
    worker's [S]. (popops splits a region's partials over idle workers into a second compute set only when that
    beats one vertex's ``30`` cycles of overhead — ``splitTwoStageReductionsBetweenWorkers`` — which it does not
    for the few partials of a sparse matmul's rows: not modelled.) Arrays broadcast; 0 where there is none."""
    o, d, g = (np.asarray(a, dtype=np.int64) for a in (outputs, partials, regions))
    g = np.maximum(g, 1)
    width = -(-o // g)
    busiest = -(-g // workers)
    return workers * popops_reduce_vertex_cycles(width, d, busiest, float_partials)


def popops_strided_reduce_cycles(outputs, partials, float_partials: bool):
    """Worker cycles of one popops ``Reduce`` vertex of the ``STRIDED_REDUCE`` specialisation (ADD, no update,
    partials and output one type) adding ``partials`` partials into ``outputs`` contiguous outputs:
    ``getCyclesEstimateForStridedReduce`` of ``lib/popops/reduction/CycleEstimationFunctions.cpp`` [S]::

        3 + 2 + 6 + 5 + ceil(o / e) (3 + post + 3 + (d - 1))

    ``e`` = 4 FP16 / 2 FP32 outputs per loop (``gcd(min(accVectorWidth, 64-bit data path), stride)``, the stride
    a whole number of 64-bit words), ``post`` = 1 + 7 FP16 / 3 + 2 FP32 (loop completion and store), one outer
    stride, one cycle per op. ``getReductionVertexSpecialisation`` picks it for one region, or adjacent regions
    whose partials are one regularly strided tensor, with whole-word outputs. Arrays broadcast; 0 where there is
    nothing to reduce."""
    o, d = np.asarray(outputs, dtype=np.int64), np.asarray(partials, dtype=np.int64)
    per_loop, post = (2, 5) if float_partials else (4, 8)
    cycles = 3 + 2 + 6 + 5 + -(-o // per_loop) * (3 + post + 3 + (d - 1))
    return np.where((o > 0) & (d > 0), cycles, 0)
