"""Tile planner for ``(m, k) x (k, n)`` matmuls and the BSP phase records the timing layer consumes.

Pure functions over numpy; outputs are frozen dataclasses of per-tile arrays (length ``tiles``).

Cost model (the planner's objective; ``ipu-hardware.md`` §2, §3.2, §6):

* **AMP compute** of a tile computing an ``m_t x k_t x n_t`` block: PopLibs' own estimate of its AMP
  convolution vertex (:func:`~tilesim.models.linear.ampestimate.conv1x1_cycles`, ``lib/poplin/
  PerformanceEstimation.hpp`` [S]): the block's rows are the field, input and output channels are padded to
  the conv units' groups, and every channel-group pair pays its coefficient loads and worker overheads.
  ``flops_per_cycle`` is the chip's AMP rate *for the chosen precision* (GC200: 128 fp16, 32 fp32); for a
  ``[N,16] @ [16,16]`` FP16 block it gives ``321-329 + 4 N`` cycles for N from 60 to 2048. The partials'
  reduction and the cast to the output type are PopLibs' reduce and cast vertex estimates
  (``getReduceCycleEstimate``, ``estimateCastCycles``).
* **Vector compute** (serial slices, accumulation, butterfly 2x2 stages, element-wise): ``vector_fixed_cycles +
  ceil(ops / (vector_bytes_per_cycle / element_bytes))`` — 64-bit SIMD (2 fp32 or 4 fp16 per
  instruction), one instruction per cycle per tile across the six barrel workers [D];
  ``vector_fixed_cycles = 11`` is PopLibs' ``basicOpSupervisorOverhead`` [S].
* **A phase** (= one BSP superstep: sync, exchange, compute)::

      cycles = sync_cycles + [exchange_fixed_cycles + ceil(max_t max(in_t, out_t) / 4)] + max_t compute_t

  with 90 sync cycles [S], 100 fixed cycles per exchange program [S], 4 B/cycle per tile [S]; the
  bracket only if the phase exchanges anything.

Matmul partition: ``m`` into ``P_m``, ``n`` into ``P_n`` and ``k`` into ``P_k`` near-equal parts
(sizes differ by at most one), ``P_m P_n P_k <= tiles``; tile ``t = (i_m P_n + i_n) P_k + i_k``.
Operands start in a *home* layout: ``A`` (row-major, flat) and ``B`` split into ``tiles``
contiguous near-equal chunks. Phase ``matmul``: every working tile receives its ``A`` block
``(m_t x k_t)`` and ``B`` block ``(k_t x n_t)``; a home tile sends each of its bytes once
(the exchange multicasts to all tiles that need them). If ``P_k > 1``, phase ``reduce``: the
``m_t x n_t`` partial block of each group of ``P_k`` tiles is cut into ``P_k`` flat slices, tile
``i_k`` owns slice ``i_k``, receives the other ``P_k - 1`` partial copies of it and adds them
(``(P_k - 1) |slice|`` adds) — the "partial-sum reduction when k is split". Partials are kept in
``partials_precision`` (fp32 by default, as PopLibs does even for fp16 inputs).

**Serial splits** (poplin's ``inChanSplit.serial`` / ``outChanSplit.serial``): the problem may run as
``S_k S_n`` passes of ``(m, k/S_k, n/S_n)`` (``S_k | k``, ``S_n | n``; one kind at a time, ``min(S_k, S_n) = 1``,
as poplin allows: ``ConvModel.cpp``, "Only support one kind of serial split at a time") in a Poplar ``Repeat``
loop, each pass partitioned as above; per pass a ``serial-slice`` phase (PopLibs' dynamic slice: each tile copies
the pass's slice of the ``B`` share it holds, and of its ``A`` share for ``S_k > 1``, :func:`_slice_copy`), the
``matmul`` and ``reduce`` phases, for ``S_k > 1`` an in-place add into an accumulator in the partials type
(``accumulate``, or folded into ``reduce``) and, once per ``n`` slice, a ``cast`` to the output type (PopLibs'
``addInPlace`` and ``outputCast`` estimates in ``lib/poplin/ConvModel.cpp``). With ``S_n > 1`` (``S_k = 1``) the
``A`` blocks, the same in every pass, are exchanged once before the loop (``input-broadcast``, poplin's
``broadcastInputBeforeLoop``, :func:`_broadcast_before_loop`) and each pass exchanges only its ``B`` blocks.
Serial passes trade cycles for temporary memory.

**Memory proportion** (poplin ``availableMemoryProportion``, default 0.6, ``ConvOptions.hpp``): poplin's own
estimate of a tile's *temporary* bytes (:func:`_temp_estimate`: the tile's ``A`` and ``B`` blocks, its partials
block and the ``S_k`` accumulator; :attr:`MatmulPlan.estimate_temp_bytes`) must not exceed ``memory_proportion ·
sram_bytes`` (``ConvModel.cpp``: ``totalTempBytes <= availableMemoryProportion x bytesPerTile``); the operands'
and result's home storage is not temporary. What the built plan holds live (:attr:`MatmulPlan.temp_bytes`:
received blocks, slice copies, partials, reduction buffer, accumulator) is what must fit the tile.
The search (:func:`plan_matmul`) returns the fastest plan meeting that bound whose total memory (data +
:func:`overhead_bytes_per_tile`) fits ``sram_bytes`` (ties: fewer passes, fewer tiles, smaller ``P_m``,
``P_n``); if none meets it, the plan with least temporary memory that fits (poplin replans minimising
temporary memory); otherwise :class:`SramOverflowError` naming the smallest plan's bytes. Because a
partition that fits on ``T`` tiles is also a candidate on ``T' > T`` tiles and costs no more there
(home chunks only shrink), more tiles never predict more cycles.

**Where the constants come from** (nothing here is fitted to a matmul benchmark time; the measured
PopLibs/PopSparse times are not used): sync 90, exchange 100 + bytes / 4, vector supervisor 11 and
``availableMemoryProportion`` 0.6 are PopLibs constants [S]; the AMP rate (``flops_per_cycle / 2`` MAC/cycle,
64 for FP16 on GC200/Bow) is the chip's [V][S]; the AMP, reduce and cast vertex cycles are PopLibs'
estimates [S]; the 64-bit vector path (slice copies, accumulation) is derived [D]. The AMP rate is the
same for FP16 and FP32 partials (the preset has one FP16 rate); partials type changes partial memory,
reduction exchange and vector work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilesim.errors import SramOverflowError, require
from tilesim.models.linear.ampestimate import AmpTarget, amp_target, cast_cycles, conv1x1_cycles, reduce_cycles
from tilesim.models.linear.phases import (
    OverheadConstants,
    Phase,
    SuperstepCosts,
    TilePlan,
    as_tile_array,
    block_pieces,
    ceil_div,
    compute_sets_per_tile,
    exchange_programs_per_tile,
    phases_cycles,
    require_int,
    require_precision,
    split_sizes,
    vertices_per_tile,
)

__all__ = [
    "MatmulPlan",
    "PlanTarget",
    "plan_matmul",
    "build_matmul_plan",
    "explain_plan",
    "DEFAULT_MEMORY_PROPORTION",
    "MAX_SERIAL_SPLIT",
]

DEFAULT_MEMORY_PROPORTION = 0.6
"""poplin ``ConvOptions::availableMemoryProportion`` default (``lib/poplin/ConvOptions.hpp``) [S]."""

MAX_SERIAL_SPLIT = 64
"""Search bound on ``serial_k · serial_n`` (a planner limit, not a hardware one)."""


@dataclass(frozen=True)
class PlanTarget:
    """What a plan of :mod:`tilesim.models.linear` is made for, the keywords every planner and schedule took:
    ``tiles`` and their ``sram_bytes``; the AMP's ``flops_per_cycle`` (0 flops: no matmul in the plan; a
    matmul refuses it); operand and matmul-partials ``precision``; the superstep ``costs`` and memory
    ``overheads``; PopLibs' ``memory_proportion``; the tile's ``workers`` (PopLibs' vertex estimates,
    :mod:`~tilesim.models.linear.ampestimate`); ``operands_in_place``: the operands are created in the
    plan's layout (PopLibs' ``createMatMulInputLHS``/``RHS``, as the PopSparse paper's benchmark makes them: each
    operand block lies on the tiles that use it, so only its replicas move) instead of flat home chunks;
    ``exchange_bus_tiles``: tiles sharing an exchange bus, which receive a broadcast ``A`` element together when
    ``P_n`` is a multiple (:func:`_bus_share`; 1 = no sharing). Defaults
    are the ones each of those keywords had. A planner reads the fields it uses and ignores the others."""

    tiles: int
    sram_bytes: int
    flops_per_cycle: float = 0.0
    precision: str = "fp32"
    partials_precision: str = "fp32"
    costs: SuperstepCosts = SuperstepCosts()
    overheads: OverheadConstants = OverheadConstants()
    memory_proportion: float = DEFAULT_MEMORY_PROPORTION
    workers: int = 6
    operands_in_place: bool = False
    exchange_bus_tiles: int = 1


@dataclass(frozen=True)
class MatmulPlan(TilePlan):
    """A partition of ``C (m x n) = A (m x k) · B (k x n)`` over ``tiles`` tiles and its per-tile costs.

    Scalars: the problem, ``split_m/k/n`` (``P_m, P_k, P_n``), the serial splits ``serial_k``,
    ``serial_n`` (``S_k, S_n``: the problem runs as ``S_k S_n`` passes of ``(m, k/S_k, n/S_n)``),
    ``predicted_cycles``, ``memory_proportion``, ``within_proportion`` (``estimate_temp_bytes`` meets
    ``memory_proportion · sram_bytes``; False when the planner fell back to the least-temporary plan) and
    ``estimate_temp_bytes`` (poplin's estimate of the temporary bytes of the fullest tile, :func:`_temp_estimate`:
    what ``availableMemoryProportion`` bounds).
    Per-tile int64 arrays (length ``tiles``; idle tiles hold zeros except their home chunks):
    ``rows, depth, cols`` (``m_t, k_t, n_t`` of one pass); work summed over the passes: ``macs``,
    ``amp_cycles``, ``bytes_in``/``bytes_out`` (operand exchange; the ``A`` blocks once when they are broadcast
    before the loop), ``reduce_bytes_in``/``reduce_bytes_out``,
    ``reduce_adds``, ``reduce_cycles``; memory (peak): ``operand_bytes`` (received A and B blocks of one
    pass), ``home_bytes`` (home chunks of A and B), ``output_bytes`` (final C elements), ``partial_bytes``
    (partials + reduction receive buffer of one pass), ``slice_bytes`` (on-tile copy of a pass's slice of
    the home chunks, serial plans only), ``accumulator_bytes`` (running sum over ``S_k`` passes, in the
    partials type), ``data_bytes`` (their sum: all counted live at once); derived ``temp_bytes`` (everything
    but the home chunks and the result, live), and the counts
    ``compute_sets``, ``vertices``, ``exchange_programs``. ``phases`` are the supersteps for the timing layer.
    """

    BYTE_FIELDS = ("home_bytes", "output_bytes", "operand_bytes", "slice_bytes", "partial_bytes", "accumulator_bytes")

    m: int
    k: int
    n: int
    tiles: int
    precision: str
    partials_precision: str
    split_m: int
    split_k: int
    split_n: int
    rows: np.ndarray
    depth: np.ndarray
    cols: np.ndarray
    macs: np.ndarray
    amp_cycles: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    reduce_bytes_in: np.ndarray
    reduce_bytes_out: np.ndarray
    reduce_adds: np.ndarray
    reduce_cycles: np.ndarray
    operand_bytes: np.ndarray
    home_bytes: np.ndarray
    output_bytes: np.ndarray
    partial_bytes: np.ndarray
    data_bytes: np.ndarray
    phases: tuple
    predicted_cycles: int
    serial_k: int = 1
    serial_n: int = 1
    slice_bytes: np.ndarray = None
    accumulator_bytes: np.ndarray = None
    memory_proportion: float = DEFAULT_MEMORY_PROPORTION
    within_proportion: bool = True
    estimate_temp_bytes: int = 0
    compute_sets: np.ndarray = field(init=False)
    vertices: np.ndarray = field(init=False)
    exchange_programs: np.ndarray = field(init=False)
    temp_bytes: np.ndarray = field(init=False)

    def __post_init__(self):
        for name in ("slice_bytes", "accumulator_bytes"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(self.tiles, dtype=np.int64))
        self._tile_arrays()
        require(
            self.split_m * self.split_k * self.split_n <= self.tiles,
            "split",
            (self.split_m, self.split_k, self.split_n),
            f"product must be <= tiles = {self.tiles}",
            "",
        )
        total = int(self.macs.sum())
        require(
            total == self.m * self.k * self.n, "plan MACs", total, f"must equal m k n = {self.m * self.k * self.n}", ""
        )
        object.__setattr__(
            self, "compute_sets", as_tile_array("compute_sets", compute_sets_per_tile(self.phases), self.tiles)
        )
        object.__setattr__(self, "vertices", as_tile_array("vertices", vertices_per_tile(self.phases), self.tiles))
        object.__setattr__(
            self,
            "exchange_programs",
            as_tile_array("exchange_programs", exchange_programs_per_tile(self.phases), self.tiles),
        )
        temp = self.operand_bytes + self.partial_bytes + self.slice_bytes + self.accumulator_bytes
        object.__setattr__(self, "temp_bytes", as_tile_array("temp_bytes", temp, self.tiles))

    @property
    def split(self) -> tuple:
        return (self.split_m, self.split_k, self.split_n)

    @property
    def serial(self) -> tuple:
        """``(S_k, S_n)``: serial passes over slices of ``k`` and of ``n``."""
        return (self.serial_k, self.serial_n)

    @property
    def tiles_used(self) -> int:
        return self.split_m * self.split_k * self.split_n


def explain_plan(
    plan,
    costs: SuperstepCosts = SuperstepCosts(),
    sram_bytes: int | None = None,
    constants: OverheadConstants = OverheadConstants(),
) -> str:
    """Human-readable plan of a :class:`MatmulPlan` (or anything with ``phases``, ``memory_by_category``):
    partition, serial splits, per-tile bytes by category on the fullest tile, cycles by phase."""
    mem = plan.memory_bytes(constants)
    t = int(mem.argmax())
    lines = [
        getattr(plan, "title", None)
        or f"matmul (m, k, n) = ({plan.m}, {plan.k}, {plan.n}) {plan.precision}, partials {plan.partials_precision}"
    ]
    lines.append(
        "  " + plan.partition_text()
        if hasattr(plan, "partition_text")
        else f"  partition (P_m, P_k, P_n) = {plan.split} on {plan.tiles_used} of {plan.tiles} tiles; "
        f"serial splits (S_k, S_n) = {plan.serial} ({plan.serial_k * plan.serial_n} passes)"
    )
    bound = (
        f"{plan.memory_proportion:g} x sram"
        if sram_bytes is None
        else f"{plan.memory_proportion:g} x {sram_bytes} = {int(plan.memory_proportion * sram_bytes)} B"
    )
    verdict = "met" if plan.within_proportion else "NOT met (least-temporary plan taken)"
    estimate = int(getattr(plan, "estimate_temp_bytes", 0))
    built = int(plan.temp_bytes[t])
    if estimate and estimate != built:  # PopLibs bounds its own estimate, not what the built plan holds
        lines.append(
            f"  temporary bytes: {'poplin' if isinstance(plan, MatmulPlan) else 'PopSparse'}'s planner estimate "
            f"{estimate:,} vs availableMemoryProportion bound "
            f"{bound}: {verdict}; the plan as built holds {built:,} on its fullest tile"
        )
    else:
        lines.append(
            f"  temporary bytes (fullest tile) {built:,} vs availableMemoryProportion bound {bound}: {verdict}"
        )
    cats = plan.memory_by_category(t, constants)
    lines.append(
        f"  tile {t} bytes: total {int(mem[t]):,}"
        + (f" of {sram_bytes:,}" if sram_bytes else "")
        + "; "
        + ", ".join(f"{k} {v:,}" for k, v in cats.items() if v)
    )
    total = 0
    for p in plan.phases:
        c = p.cycles(costs)
        total += c
        lines.append(
            f"  phase {p.name:<14} x{p.repeat:<3} {c:>10,} cycles (sync {int(costs.sync_cycles)}, exchange "
            f"{p.exchange_cycles(costs):,}, compute {int(p.compute_cycles.max()):,} per pass)"
        )
    lines.append(f"  predicted {total:,} cycles")
    return "\n".join(lines)


def _check_problem(m, k, n, tiles, sram_bytes, flops_per_cycle, precision: str) -> None:
    for name, v in (("m", m), ("k", k), ("n", n), ("tiles", tiles), ("sram_bytes", sram_bytes)):
        require_int(name, v)
    require(
        flops_per_cycle > 0,
        "flops_per_cycle",
        flops_per_cycle,
        "must be > 0",
        "GC200 AMP: 128 (fp16) or 32 (fp32) flop/cycle per tile",
    )
    require_precision("precision", precision)
    require(
        amp_target(precision, flops_per_cycle).weights_per_unit >= 1,
        "flops_per_cycle",
        flops_per_cycle,
        f"is below one {precision} input channel per conv unit of PopLibs' AMP estimate",
        "at least 8 flop/cycle (fp16) or 2 (fp32); GC200 AMP: 128 (fp16) or 32 (fp32)",
    )


def _check_proportion(p) -> None:
    require(
        isinstance(p, (int, float)) and not isinstance(p, bool) and 0.0 <= p <= 1.0,
        "memory_proportion",
        p,
        "must be in [0, 1]",
        "PopLibs' availableMemoryProportion: 0.6 by default; 0 = least temporary memory",
    )


@dataclass(frozen=True)
class _Blocks:
    """Which block of one pass each tile computes: tile ``t < P_m P_k P_n`` holds block ``(i_m, i_k, i_n)``
    (``i_k`` fastest); per-tile int arrays, sizes 0 on idle tiles."""

    active: np.ndarray
    im: np.ndarray
    ik: np.ndarray
    inn: np.ndarray
    rows: np.ndarray
    depth: np.ndarray
    cols: np.ndarray


@dataclass(frozen=True)
class _Reduction:
    """The ``P_k`` reduction of the output blocks (zeros when ``P_k = 1``): per tile the output elements it
    owns, the partials it receives and sends (bytes), its adds and their cycles, the bytes of partials it
    holds, and its exchange instructions."""

    owned: np.ndarray
    red_in: np.ndarray
    red_out: np.ndarray
    red_adds: np.ndarray
    red_cycles: np.ndarray
    partial_bytes: np.ndarray
    red_instr: np.ndarray


def _check_split(m: int, k: int, n: int, split: tuple, serial: tuple, tiles: int) -> tuple:
    """``(P_m, P_k, P_n, S_k, S_n)`` as ints; raises :class:`ConfigError` unless the serial passes divide
    ``k`` and ``n``, every parallel cut is in ``[1, its dimension in one pass]`` and the cuts fit ``tiles``."""
    sk, sn = (int(s) for s in serial)
    for name, s, dim in (("serial_k", sk, k), ("serial_n", sn, n)):
        require(
            s >= 1 and dim % s == 0,
            name,
            s,
            f"must be >= 1 and divide {dim}",
            "serial passes are equal slices; pick a divisor",
        )
    ks, ns = k // sk, n // sn
    pm, pk, pn = (int(s) for s in split)
    for name, s, lim in (("split_m", pm, m), ("split_k", pk, ks), ("split_n", pn, ns)):
        require(1 <= s <= lim, name, s, f"must be in [1, {lim}]", "a dimension cannot be cut finer than 1")
    used = pm * pk * pn
    require(used <= tiles, "split", (pm, pk, pn), f"uses {used} tiles > tiles = {tiles}", "split less")
    return pm, pk, pn, sk, sn


def _blocks(m: int, ks: int, ns: int, pm: int, pk: int, pn: int, tiles: int) -> _Blocks:
    """The block of one ``(m, ks, ns)`` pass that each of ``tiles`` tiles computes."""
    t = np.arange(tiles)
    active = t < pm * pk * pn
    tu = np.where(active, t, 0)
    ik, rest = tu % pk, tu // pk
    inn, im = rest % pn, rest // pn
    rows = np.where(active, split_sizes(m, pm)[im], 0)
    depth = np.where(active, split_sizes(ks, pk)[ik], 0)
    cols = np.where(active, split_sizes(ns, pn)[inn], 0)
    return _Blocks(active, im, ik, inn, rows, depth, cols)


def _operand_exchange(b: _Blocks, m: int, k: int, n: int, sk: int, passes: int, tiles: int) -> tuple:
    """Per tile, in elements: the home chunks of A and B it holds, what it sends of each in one pass (its slice
    of every home chunk: A's k-slice, B's (k, n) block) and its exchange instructions for each, as pairs."""
    home_a, home_b = split_sizes(m * k, tiles), split_sizes(k * n, tiles)
    chunk_a, chunk_b = int(home_a.max()), int(home_b.max())
    pieces_a = block_pieces(b.rows, b.depth, k, chunk_a, tiles)
    pieces_b = block_pieces(b.depth, b.cols, n, chunk_b, tiles)
    # distinct blocks are sent once: A blocks by (i_m, i_k) (tiles with i_n = 0), B by (i_k, i_n) (i_m = 0)
    sent_a, sent_b = int(pieces_a[b.active & (b.inn == 0)].sum()), int(pieces_b[b.active & (b.im == 0)].sum())
    send = (ceil_div(home_a, sk), ceil_div(home_b, passes))
    return home_a + home_b, send, (pieces_a + split_sizes(sent_a, tiles), pieces_b + split_sizes(sent_b, tiles))


def _operands_in_place(b: _Blocks, pm: int, pn: int, sk: int, passes: int) -> tuple:
    """Per tile, in elements, when the operands are created in the plan's layout (``createMatMulInputLHS`` /
    ``RHS``): an ``A`` block ``(i_m, i_k)`` is used by the ``P_n`` tiles of its row and spread over them, a ``B``
    block ``(i_k, i_n)`` over the ``P_m`` tiles that use it. A tile holds its share of both (over the passes),
    sends a share once per pass (multicast) if other tiles use it and receives the rest of its two blocks; its
    exchange instructions: its sends and one receive per other holder. Sent, instructions and received: pairs
    ``(A, B)``; the shares it holds of one pass are :func:`_slice_copy`'s."""
    a_block, b_block = b.rows * b.depth, b.depth * b.cols
    share_a = a_block // pn + (b.inn < a_block % pn)
    share_b = b_block // pm + (b.im < b_block % pm)
    send = (share_a * (pn > 1), share_b * (pm > 1))
    instr = tuple(np.where(b.active, (p > 1) + (p - 1), 0).astype(np.int64) for p in (pn, pm))
    return share_a * sk + share_b * passes, send, instr, (a_block - share_a, b_block - share_b), (share_a, share_b)


def _slice_copy(held: tuple, sk: int):
    """Elements a tile's dynamic slice copies in each pass of a serial split, from ``held = (A, B)``, its share of
    one pass of each operand (in place: the shares it holds; flat home chunks: the slices it sends): poplin slices
    the weights (``B``) every pass and the input (``A``) only for an input-channel split (``Convolution.cpp``:
    ``dynamicSliceWithOutput`` of ``weightsSlice`` for any serial split, of ``inSlice`` when ``inChanSplit.serial >
    1``; ``ConvModel.cpp``'s ``addDynamicSliceEstimate`` of ``weightsPerTile`` over all serial splits and of
    ``inputsPerTile`` over the input-channel ones) — all of the slice, exchanged afterwards or not."""
    return held[1] + held[0] if sk > 1 else held[1]


def _operands(b: _Blocks, shape: tuple, cuts: tuple, tiles: int, in_place: bool) -> tuple:
    """Per tile, in elements: home, and as ``(A, B)`` pairs sent per pass, exchange instructions and received per
    pass, for operands in flat home chunks (:func:`_operand_exchange`) or created in place
    (:func:`_operands_in_place`)."""
    pm, pn, sk, passes = cuts
    if in_place:
        return _operands_in_place(b, pm, pn, sk, passes)
    home, send, instr = _operand_exchange(b, *shape, sk, passes, tiles)
    return home, send, instr, (b.rows * b.depth, b.depth * b.cols), send


def _bus_share(pn, bus_tiles: int):
    """How many tiles receive each ``A`` element in one cycle: ``bus_tiles`` when the ``P_n`` tiles sharing an
    ``A`` block fill whole exchange buses (PopLibs lays consecutive output-channel splits on the tiles of a
    supertile, ``linearizeConvIndices``, and its ``ExchangeEstimator`` doubles their input bandwidth), else 1."""
    return np.where(pn % bus_tiles == 0, bus_tiles, 1) if bus_tiles > 1 else 1


def _amp_cycles(rows, depth, cols, amp: AmpTarget):
    """AMP cycles of tiles computing ``rows x depth x cols`` blocks (arrays), 0 where there is no work:
    PopLibs' AMP vertex estimate (:func:`~tilesim.models.linear.ampestimate.conv1x1_cycles`, the batch as the
    field) on the tile ``amp``."""
    return conv1x1_cycles(rows, depth, cols, amp).astype(np.int64, copy=False)


def _reduce_cycles(owned, pk, sk: int, types: tuple, workers: int):
    """Cycles of adding the ``P_k`` partials (and the accumulator when ``S_k > 1``) of ``owned`` outputs per tile;
    ``types = (eb, pb)``: PopLibs' reduce vertex on ``workers`` workers
    (:func:`~tilesim.models.linear.ampestimate.reduce_cycles`; the output type when ``S_k = 1``, else the
    partials type)."""
    eb, pb = types
    return reduce_cycles(owned, pk + (sk > 1), (eb if sk == 1 else pb) == 4, pb == 4, workers)


def _reduce_cycles_max(dims: tuple, cuts: tuple, sk: int, types: tuple, workers: int):
    """The most cycles any tile's :func:`_reduce_cycles` takes for ``dims = (m, n_s)`` cut ``cuts = (P_m, P_k, P_n)``
    (arrays): PopLibs' reduce estimate is not monotone in the outputs (a remainder of the vector width costs extra),
    so every tile's output block (``floor`` or ``ceil`` of each cut) and owned slice (``floor`` or ``ceil`` of its
    ``P_k``-th) is tried, as :func:`build_matmul_plan` takes the maximum over the tiles."""
    (m, ns), (pm, pk, pn) = dims, cuts
    most = 0
    for rows in (ceil_div(m, pm), m // pm):
        for cols in (ceil_div(ns, pn), ns // pn):
            block = rows * cols
            for owned in (ceil_div(block, pk), block // pk):
                most = np.maximum(most, _reduce_cycles(owned, pk, sk, types, workers))
    return most


def _reduction(b: _Blocks, pk: int, sk: int, types: tuple, workers: int) -> _Reduction:
    """The ``P_k`` reduction: each of the ``P_k`` tiles of an output block owns a slice, receives the other
    tiles' partials of it and adds them (plus the accumulator when ``S_k > 1``); ``types = (eb, pb)``,
    ``workers`` as in :func:`_reduce_cycles`."""
    pb = types[1]
    out_block = b.rows * b.cols
    zero = np.zeros_like(out_block)
    if pk > 1:
        owned = out_block // pk + (b.ik < out_block % pk).astype(np.int64)
        red_in = (pk - 1) * owned * pb
        red_adds = (pk - 1 + (sk > 1)) * owned
        return _Reduction(
            owned,
            red_in,
            (out_block - owned) * pb,
            red_adds,
            np.where(red_adds > 0, _reduce_cycles(owned, pk, sk, types, workers), 0).astype(np.int64),
            out_block * pb + red_in,
            np.where(b.active, 2 * (pk - 1), 0),
        )
    partial_bytes = out_block * pb if sk > 1 else zero
    return _Reduction(out_block, zero, zero, zero, zero, partial_bytes, zero)


def _local_vector_phase(name: str, work: np.ndarray, cycles, zero: np.ndarray, repeat: int) -> Phase:
    """A vector compute set without exchange: one two-edge vertex on every tile with work."""
    return Phase(name, "vector", work, cycles, zero, zero, (work > 0).astype(np.int64), 2 * (work > 0), zero, repeat)


def _pass_phases(
    b: _Blocks,
    red: _Reduction,
    amp: np.ndarray,
    ops: tuple,
    shape: tuple,
    types: tuple,
    costs: SuperstepCosts,
    zero: np.ndarray,
    workers: int = 6,
) -> tuple:
    """The supersteps of a serial split ``shape = (P_k, S_k, S_n)``: the serial slice (several passes),
    the AMP matmul, the ``P_k`` reduction or (``S_k > 1``) the accumulation, then the final cast when
    the partials type differs from the output type (PopLibs' cast vertex on ``workers`` workers; an unsplit ``k``
    is cast too, as ``estimateConvReduceCycles`` charges it). ``ops``: the matmul's operand exchange per pass (bytes
    received as their receive time counts them, bytes sent, exchange instructions) and the elements the serial
    slice copies; ``types = (eb, pb)``."""
    pk, sk, sn = shape
    bytes_in, bytes_out, operand_instr, copy = ops
    eb, pb = types
    passes = sk * sn
    macs = b.rows * b.depth * b.cols
    out_block = b.rows * b.cols
    phases = []
    if passes > 1:
        # dynamic slice: each home tile copies this pass's slice of its chunks to a send buffer
        phases.append(_local_vector_phase("serial-slice", copy, costs.vector_cycles(copy, eb), zero, passes))
    phases.append(
        Phase(
            "matmul",
            "amp",
            macs,
            amp,
            bytes_in,
            bytes_out,
            (macs > 0).astype(np.int64),
            3 * (macs > 0),
            operand_instr,
            passes,
        )
    )
    if pk > 1:
        has = red.red_adds > 0
        phases.append(
            Phase(
                "reduce",
                "vector",
                red.red_adds,
                red.red_cycles,
                red.red_in,
                red.red_out,
                has.astype(np.int64),
                (pk + 1) * has,
                red.red_instr,
                passes,
            )
        )
    elif sk > 1:
        phases.append(_local_vector_phase("accumulate", out_block, costs.vector_cycles(out_block, pb), zero, passes))
    if pb != eb and (sk > 1 or pk == 1):
        phases.append(_local_vector_phase("cast", red.owned, cast_cycles(red.owned, workers), zero, sn))
    return tuple(phases)


def build_matmul_plan(
    m: int,
    k: int,
    n: int,
    split: tuple,
    *,
    tiles: int,
    flops_per_cycle: float,
    precision: str = "fp32",
    partials_precision: str = "fp32",
    costs: SuperstepCosts = SuperstepCosts(),
    serial: tuple = (1, 1),
    memory_proportion: float = DEFAULT_MEMORY_PROPORTION,
    within_proportion: bool = True,
    workers: int = 6,
    operands_in_place: bool = False,
    exchange_bus_tiles: int = 1,
) -> MatmulPlan:
    """Per-tile plan of one given partition ``split = (P_m, P_k, P_n)`` of each of the
    ``serial = (S_k, S_n)`` passes (no memory check; ``S_k`` must divide ``k``, ``S_n`` divide ``n``);
    ``workers``, ``operands_in_place`` and ``exchange_bus_tiles`` as in :class:`PlanTarget`."""
    _check_problem(m, k, n, tiles, 1, flops_per_cycle, precision)
    _check_proportion(memory_proportion)
    eb, pb = require_precision("precision", precision), require_precision("partials_precision", partials_precision)
    pm, pk, pn, sk, sn = _check_split(m, k, n, split, serial, tiles)
    ks, ns, passes = k // sk, n // sn, sk * sn
    zero = np.zeros(tiles, dtype=np.int64)
    b = _blocks(m, ks, ns, pm, pk, pn, tiles)
    rows, depth, cols = b.rows, b.depth, b.cols
    macs = rows * depth * cols
    amp = _amp_cycles(rows, depth, cols, amp_target(precision, flops_per_cycle, workers))
    home_bytes, send, instr, (recv_a, recv_b), held = _operands(
        b, (m, k, n), (pm, pn, sk, passes), tiles, operands_in_place
    )
    home_bytes, bytes_in = home_bytes * eb, (recv_a + recv_b) * eb
    copy = _slice_copy(held, sk)  # what the serial slice copies each pass
    exchanged_a = ceil_div(recv_a, _bus_share(pn, exchange_bus_tiles)) * eb  # the receive time's bytes
    before: tuple = ()
    if _broadcast_before_loop(sk, sn):  # A once before the loop (if any tile receives it), B in every pass
        bcast = Phase("input-broadcast", "vector", zero, zero, exchanged_a, send[0] * eb, zero, zero, instr[0])
        before = (bcast,) if bcast.has_exchange else ()
        per_pass_ops = (recv_b * eb, send[1] * eb, instr[1], copy)
        moved = ((recv_a + recv_b * passes) * eb, (send[0] + send[1] * passes) * eb)
    else:
        per_pass_ops = (exchanged_a + recv_b * eb, (send[0] + send[1]) * eb, instr[0] + instr[1], copy)
        moved = (bytes_in * passes, per_pass_ops[1] * passes)
    del send, instr, held, recv_a, recv_b, exchanged_a  # a wafer's per-tile arrays are large
    slice_bytes = copy * eb if passes > 1 else zero
    red = _reduction(b, pk, sk, (eb, pb), workers)
    output_bytes, accumulator_bytes = sn * red.owned * eb, (red.owned * pb if sk > 1 else zero)
    phases = before + _pass_phases(b, red, amp, per_pass_ops, (pk, sk, sn), (eb, pb), costs, zero, workers)
    del per_pass_ops
    data = bytes_in + home_bytes + output_bytes + red.partial_bytes + slice_bytes + accumulator_bytes
    head = (m, k, n, tiles, precision, partials_precision, pm, pk, pn, rows, depth, cols)
    per_pass = (macs, amp)
    reduced = (red.red_in, red.red_out, red.red_adds, red.red_cycles)
    tail = (bytes_in, home_bytes, output_bytes, red.partial_bytes, data, phases, phases_cycles(phases, costs))
    # tile 0 holds the largest block and owned slice (the estimate's maximum)
    estimate = int(_temp_estimate((int(rows[0]), int(depth[0]), int(cols[0])), int(red.owned[0]), sk, eb, pb))
    layout = (sk, sn, slice_bytes, accumulator_bytes, float(memory_proportion), bool(within_proportion), estimate)
    return MatmulPlan(*head, *(x * passes for x in per_pass), *moved, *(x * passes for x in reduced), *tail, *layout)


#: candidates scored at a time: the closed forms hold ~30 float64 columns of a chunk (~130 MB at
#: 2**19), so a planner over a whole wafer (850,000 tiles: ~8e7 partitions) stays within a few
#: hundred MB instead of materialising every partition at once (issue 41: 4.6 GB and 4 minutes)
CANDIDATE_CHUNK = 1 << 19
#: the most candidates :func:`plan_matmul` tries of each kind (the fastest, then the leanest)
TRY_LIMIT = 64


def _ranks(counts: np.ndarray) -> np.ndarray:
    """``1..c`` for every ``c`` of ``counts``, one after the other."""
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(starts.size) - starts + 1


def _spans(counts: np.ndarray, chunk: int) -> list:
    """``(start, stop)`` ranges of ``counts`` summing to about ``chunk`` (at most one item more)."""
    cum = np.cumsum(counts)
    cuts = np.searchsorted(cum, np.arange(chunk, int(cum[-1]), chunk), side="right")
    edges = np.unique(np.r_[0, cuts, counts.size])
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _groups(m, k, n, tiles, chunk: int | None = None):
    """The ``(P_m, P_n)`` groups with ``P_m <= m``, ``P_n <= n``, ``P_m P_n <= tiles``, ordered by ``P_m``,
    ``P_n``, as arrays ``(pm, pn, pkmax)`` in chunks of about ``chunk`` partitions (``pkmax``: the largest
    ``P_k <= k`` with ``P_m P_k P_n <= tiles``; every ``P_k`` from 1 to it is a partition)."""
    tiles, chunk = int(tiles), chunk or CANDIDATE_CHUNK
    pm = np.arange(1, min(int(m), tiles) + 1, dtype=np.int64)
    rows = np.minimum(int(n), tiles // pm)  # the P_n of each P_m
    for a, b in _spans(rows, chunk):
        pm2, pn2 = np.repeat(pm[a:b], rows[a:b]), _ranks(rows[a:b])
        cnt = np.minimum(int(k), tiles // (pm2 * pn2))  # the P_k of each (P_m, P_n)
        for c, d in _spans(cnt, chunk):
            yield pm2[c:d], pn2[c:d], cnt[c:d]


def _candidates(m, k, n, tiles, chunk: int | None = None):
    """Every ``(P_m, P_k, P_n)`` with ``P_m <= m``, ``P_k <= k``, ``P_n <= n`` and ``P_m P_k P_n <=
    tiles``, ordered by ``P_m``, ``P_n``, ``P_k``, in chunks of about ``chunk`` (generated directly:
    never the partitions of the whole machine that a small matmul cannot use)."""
    for pm, pn, cnt in _groups(m, k, n, tiles, chunk):
        yield np.repeat(pm, cnt), _ranks(cnt), np.repeat(pn, cnt)


def candidate_count(m, k, n, tiles) -> int:
    """How many partitions :func:`_candidates` yields (cheap: one row per ``(P_m, P_n)``)."""
    return sum(int(pkmax.sum()) for _, _, pkmax in _groups(m, k, n, tiles))


def _divisors(x: int, limit: int) -> list:
    return [d for d in range(1, min(x, limit) + 1) if x % d == 0]


def _serial_pairs(k: int, n: int, limit: int) -> list:
    """``(S_k, S_n)`` with ``S_k | k``, ``S_n | n``, ``S_k S_n <= limit``, fewest passes first."""
    pairs = [(a, b) for a in _divisors(k, limit) for b in _divisors(n, limit) if a * b <= limit and min(a, b) == 1]
    return sorted(pairs, key=lambda p: (p[0] * p[1], p[0]))


@dataclass(frozen=True)
class _Floor:
    """What bounds tile 0 of a plan from below (:func:`_tile0_floor`): the problem ``(m, k, n)``, ``tiles``, the
    element and partials bytes ``eb``, ``pb``, :attr:`PlanTarget.operands_in_place` and the overhead constants."""

    m: int
    k: int
    n: int
    tiles: int
    eb: int
    pb: int
    in_place: bool
    oc: OverheadConstants


def _tile0_floor(f: _Floor, serial: tuple, cuts: tuple, blocks: tuple, pk_range: tuple):
    """A lower bound of the bytes (data + overheads) of tile 0 of :func:`build_matmul_plan`'s plan of the ``serial``
    ``(S_k, S_n)`` passes, for every partition with ``P_m >= pm``, ``P_n >= pn`` (``cuts``), tile-0 blocks ``blocks =
    (cm, ck, cn)`` and ``P_k`` in ``pk_range = (lo, hi)`` (``lo = hi = 1``: ``k`` not split); arrays or ints.

    Tile 0 holds the largest blocks, home chunks and reduction slice; counted: the home chunks (at least the
    operands over ``tiles``) and received blocks, the output (at least ``m n / tiles``), the partials (``P_k > 1``:
    the block and at least ``(lo - 1) ceil(block / lo)`` received), accumulator and slice copies, the operand
    exchange instructions (:func:`~tilesim.models.linear.phases.block_pieces` or the in-place receives), the AMP
    and reduce vertices, their compute sets and code. Everything left out is >= 0, so a plan whose bound exceeds
    ``sram_bytes`` cannot fit."""
    m, k, n, tiles, eb, pb, oc = f.m, f.k, f.n, f.tiles, f.eb, f.pb, f.oc
    (sk, sn), (pm, pn), (cm, ck, cn), (lo, hi) = serial, cuts, blocks, pk_range
    passes, chunk_a, chunk_b = sk * sn, ceil_div(m * k, tiles), ceil_div(k * n, tiles)
    blk = cm * cn
    split = np.asarray(lo) > 1
    sl = np.where(split, ceil_div(blk, hi), blk)
    if f.in_place:
        home_in = np.maximum(cm * ck, chunk_a) + np.maximum(ck * cn, chunk_b)
        instr = (pn > 1) + (pm > 1) + (pn - 1) + (pm - 1)
        copy, exchanges = 0, 0
    else:
        home_in = chunk_a + chunk_b + cm * ck + ck * cn
        pieces_a = np.where(ck == k, 1, cm) + np.minimum(((cm - 1) * k + ck) // chunk_a, tiles - 1)
        pieces_b = np.where(cn == n, 1, ck) + np.minimum(((ck - 1) * n + cn) // chunk_b, tiles - 1)
        instr = pieces_a + pieces_b
        copy = _slice_copy((ceil_div(chunk_a, sk), ceil_div(chunk_b, passes)), sk) if passes > 1 else 0
        exchanges = 1
    red = np.where(split, (lo - 1) * ceil_div(blk, lo), 0)
    partial = np.where(split, blk + red, blk if sk > 1 else 0) + (sl if sk > 1 else 0)
    data = (home_in + np.maximum(ceil_div(m * n, tiles), sn * sl) + copy) * eb + partial * pb
    state = oc.vertex_state_base_bytes * (1 + split) + oc.vertex_edge_bytes * (3 + np.where(split, lo + 1, 0))
    control = oc.control_code_bytes_per_compute_set * (1 + split) + oc.control_code_bytes_per_exchange * (
        exchanges + split
    )
    vector = split | (sk > 1) | (not f.in_place and passes > 1)
    code = oc.vertex_code_bytes_amp + oc.vertex_code_bytes_vector * vector
    return data + oc.exchange_instruction_bytes * (instr + 2 * (lo - 1)) + state + control + code


def _classes(dim: int, tiles: int) -> tuple:
    """``(parts, block)``: the fewest parts of ``dim`` (at most ``tiles``) giving each distinct largest block."""
    parts = np.arange(1, min(int(dim), int(tiles)) + 1, dtype=np.int64)
    block, first = np.unique(ceil_div(int(dim), parts), return_index=True)
    return parts[first], block


def _memory_floor(f: _Floor, max_serial: int, enough: float = -np.inf) -> tuple:
    """``(bytes, serial, split)``: the least :func:`_tile0_floor` over every partition of every serial split
    :func:`plan_matmul` may use, and where it is. Partitions are grouped by their tile-0 blocks ``(cm, cn)``
    (``O(sqrt m sqrt n)`` groups, never the partitions themselves): the bound grows with ``ck``, ``P_m``, ``P_n``,
    so each group's fewest ``P_m``, ``P_n`` and largest ``P_k`` (unsplit ``k`` apart) bound all its members.
    Stops at the first floor ``<= enough`` (then one that may fit, not the least: all a refusal needs to know)."""
    best: tuple = (np.inf, (1, 1), (1, 1, 1))
    pm_all, cm_all = _classes(f.m, f.tiles)
    for sk, sn in _serial_pairs(f.k, f.n, max_serial):
        ks, ns = f.k // sk, f.n // sn
        pn_all, cn_all = _classes(ns, f.tiles)
        pm, pn = np.repeat(pm_all, pn_all.size), np.tile(pn_all, pm_all.size)
        cm, cn = np.repeat(cm_all, pn_all.size), np.tile(cn_all, pm_all.size)
        room = f.tiles // (pm * pn)  # the most P_k the group leaves
        for split in (False, True):
            ok = room >= (2 if split else 1)
            if split and ks < 2:
                continue
            pk = np.minimum(ks, np.maximum(room, 1)) if split else np.ones_like(room)
            ck = ceil_div(ks, pk)
            lo = np.where(split, 2, 1)
            b = np.where(ok, _tile0_floor(f, (sk, sn), (pm, pn), (cm, ck, cn), (lo, pk)), np.inf)
            i = int(np.argmin(b))
            if b[i] < best[0]:
                best = (float(b[i]), (sk, sn), (int(pm[i]), int(pk[i]), int(pn[i])))
            if best[0] <= enough:
                return best
    return best


def _group_floors(m, k, n, serial: tuple, group: tuple, tiles, types: tuple, amp_spec: AmpTarget, layout: tuple, costs):
    """Lower bounds ``(total, temp, data)`` of :func:`_closed_form` over every ``P_k`` in ``[1, pkmax]`` of each
    ``group = (pm, pn, pkmax)`` of the ``serial`` passes (arrays): the least of the unsplit ``P_k = 1`` and of
    ``P_k >= 2`` (:func:`_split_floors`)."""
    pm, pn, pkmax = group
    one = _split_floors(m, k, n, serial, (pm, pn, 1, 1), tiles, types, amp_spec, layout, costs)
    more = _split_floors(m, k, n, serial, (pm, pn, 2, np.maximum(pkmax, 2)), tiles, types, amp_spec, layout, costs)
    return tuple(np.minimum(a, np.where(pkmax >= 2, b, np.inf)) for a, b in zip(one, more))


def _broadcast_before_loop(sk: int, sn: int) -> bool:
    """Whether the ``A`` blocks (the convolution's input) are exchanged once before the serial loop instead of in
    every pass: poplin's ``broadcastInputBeforeLoop``, allowed when only the output channels are split serially
    (``ConvModel.cpp``, ``canBroadcastInputsBeforeLoop = inChanSplit.serial <= 1 && outChanSplit.serial > 1``) and
    then always cheaper (one input exchange instead of ``S_n``; ``Convolution.cpp`` copies the input to its
    tile-level layout before the ``Repeat``); its temporary bytes are those of the per-pass input block. ``A`` is
    the convolution's input as poplin plans a matmul first, with swapped operands (``ConvPlan.cpp``,
    ``getSwapOperandCandidates``: the orientation a ``NONE_MATMUL`` pass rearranges nothing in,
    ``addTransformCycleEstimate``), its field being ``m``."""
    return sk == 1 and sn > 1


def _temp_estimate(blocks: tuple, owned, sk: int, eb: int, pb: int):
    """poplin's estimate of a tile's temporary bytes, what ``availableMemoryProportion`` bounds (``ConvModel.cpp``,
    ``addEstimates``: ``totalTempBytes``), for a block ``blocks = (rows, depth, cols)`` owning ``owned`` outputs of
    the reduction: the tile-level input and weight blocks (``addConvTempMemoryEstimate``: all of
    ``inputsPerLevel.back()`` and ``weightsPerLevel.back()``, the tile's own share included; with
    ``broadcastInputBeforeLoop`` the input is added outside the maximum instead, the same sum) and the partials
    block in the partials type, then ``addInPlaceTempBytes`` (the accumulator of an input-channel serial split, its
    owned outputs in the partials type). The reduction's buffer (``reduceTempBytes``: the partials block of the first
    stage) is a term of the *maximum* with the convolution's bytes, never above them, so it adds nothing; the
    serial slice's output is the pass's operand block itself (``addDynamicSliceEstimate`` charges cycles only).
    Simplification: poplin splits channels in grains (``inChanGrainSize``, ``partialChansPerGroup``: 16 FP16) and
    counts padded blocks; the near-equal blocks here differ by under one grain per dimension. Arrays or ints."""
    rows, depth, cols = blocks
    return (rows * depth + depth * cols) * eb + rows * cols * pb + (owned * pb if sk > 1 else 0)


def _tile0_operands(blocks: tuple, cuts: tuple, mkn: tuple, serial: tuple, tiles, in_place: bool) -> tuple:
    """Tile 0's operand elements of one pass, ``blocks = (cm, ck, cn)``, ``cuts = (pm, pn)``: ``(recv, send,
    home, held)`` with ``recv``, ``send`` and ``held`` ``(A, B)`` pairs (what :func:`_operands` gives the largest
    tile; in place the largest share sent and an upper bound of the rest received); arrays or ints."""
    (cm, ck, cn), (pm, pn), (m, k, n), (sk, sn) = blocks, cuts, mkn, serial
    passes = sk * sn
    if in_place:
        share_a, share_b = ceil_div(cm * ck, pn), ceil_div(ck * cn, pm)
        recv = (cm * ck - (cm * ck) // pn, ck * cn - (ck * cn) // pm)
        send = (share_a * (pn > 1), share_b * (pm > 1))
        return recv, send, share_a * sk + share_b * passes, (share_a, share_b)
    chunk_a, chunk_b = ceil_div(m * k, tiles), ceil_div(k * n, tiles)
    send = (ceil_div(chunk_a, sk), ceil_div(chunk_b, passes))
    return (cm * ck, ck * cn), send, chunk_a + chunk_b, send


def _operand_cycles(ops: tuple, pn, serial: tuple, eb: int, bus: int, costs) -> tuple:
    """``(once, per_pass, copy)`` of tile 0's operands ``ops = (recv, send, held)`` (:func:`_tile0_operands`): the
    cycles of the input broadcast before the loop (:func:`_broadcast_before_loop`; 0 without it), the operand
    exchange cycles of each pass (its fixed cost included, 0 if nothing moves) and the elements its serial slice
    copies. Tile 0 holds the largest blocks: when it moves nothing, no tile does."""
    (recv, send, held), per = ops, costs.exchange_bytes_per_cycle
    ex_a, ex_b = ceil_div(recv[0], _bus_share(pn, bus)) * eb, recv[1] * eb

    def exchange(received, sent):
        peak = np.maximum(received, sent * eb)
        return np.where(peak > 0, costs.exchange_fixed_cycles + np.ceil(peak / per), 0)

    copy = _slice_copy(held, serial[0])
    if _broadcast_before_loop(*serial):
        once = exchange(ex_a, send[0])
        return np.where(once > 0, costs.sync_cycles + once, 0), exchange(ex_b, send[1]), copy
    return 0, exchange(ex_a + ex_b, send[0] + send[1]), copy


def _split_floors(m, k, n, serial: tuple, group: tuple, tiles, types: tuple, amp_spec: AmpTarget, layout: tuple, costs):
    """Lower bounds ``(total, temp, data)`` of :func:`_closed_form` over ``P_k`` in ``[lo, hi]`` (``lo`` 1 or 2;
    ``group = (pm, pn, lo, hi)``): every term grows with ``ck``, so it is taken at the least ``ck = ceil(k_s / hi)``;
    the reduction counts its fixed cycles, the block and ``(lo - 1) / lo`` of a block of partials (``(P_k - 1)
    ceil(b / P_k) >= (lo - 1) b / lo``), the casts nothing; arrays or ints."""
    (sk, sn), (pm, pn, lo, hi), (eb, pb) = serial, group, types
    ks, ns, passes = k // sk, n // sn, sk * sn
    cm, ck, cn = ceil_div(m, pm), ceil_div(ks, hi), ceil_div(ns, pn)
    in_place, bus = layout
    (recv_a, recv_b), send, home0, held = _tile0_operands((cm, ck, cn), (pm, pn), (m, k, n), serial, tiles, in_place)
    once, exchange, copy0 = _operand_cycles(((recv_a, recv_b), send, held), pn, serial, eb, bus, costs)
    base = costs.sync_cycles + costs.exchange_fixed_cycles
    split = np.asarray(lo) > 1
    step = costs.sync_cycles + base * split + _amp_cycles(cm, ck, cn, amp_spec) + exchange
    if passes > 1:
        step = step + costs.sync_cycles + costs.vector_cycles(copy0, eb)
    blk = cm * cn
    sl = ceil_div(blk, hi)
    partial = np.where(split, blk + ceil_div((lo - 1) * blk, lo), blk if sk > 1 else 0)
    live0 = (recv_a + recv_b) * eb + partial * pb
    live0 = live0 + (copy0 * eb if passes > 1 else 0) + (sl * pb if sk > 1 else 0)
    return once + passes * step, _temp_estimate((cm, ck, cn), sl, sk, eb, pb), live0 + home0 * eb + sn * sl * eb


def _live_candidates(m, k, n, serial: tuple, tiles, score: tuple, cuts: _Cuts, limits: tuple):
    """:func:`_candidates` of the ``serial`` passes less the ``(P_m, P_n)`` groups ``cuts`` finds useless
    (:meth:`_Cuts.useless` of their :func:`_group_floors`; ``score = (types, amp_spec, layout, costs)``,
    ``limits = (sram_bytes, bound)``), in the same order; ``cuts`` is read afresh for every chunk."""
    first = serial[0] * serial[1] == 1
    for group in _groups(m, k // serial[0], n // serial[1], tiles):
        live = ~cuts.useless(_group_floors(m, k, n, serial, group, tiles, *score), *limits, first)
        if live.any():
            yield from _live_ranges(m, k, n, serial, tuple(g[live] for g in group), tiles, score, cuts, limits)


def _live_ranges(m, k, n, serial: tuple, group: tuple, tiles, score: tuple, cuts: _Cuts, limits: tuple):
    """The partitions of the ``(P_m, P_n)`` groups ``group = (pm, pn, pkmax)`` (in order) less the ``P_k`` ranges
    ``[2^j, 2^(j+1))`` that ``cuts`` finds useless (:func:`_split_floors` of each range)."""
    pm, pn, cnt = group
    nr = np.floor(np.log2(cnt)).astype(np.int64) + 1
    nr += (np.left_shift(1, nr) <= cnt).astype(np.int64)  # float log2 of exact powers of two
    nr -= (np.left_shift(1, nr - 1) > cnt).astype(np.int64)
    pm, pn, cnt = np.repeat(pm, nr), np.repeat(pn, nr), np.repeat(cnt, nr)
    lo = np.left_shift(1, _ranks(nr) - 1)
    hi = np.minimum(2 * lo - 1, cnt)
    floors = _split_floors(m, k, n, serial, (pm, pn, lo, hi), tiles, *score)
    live = ~cuts.useless(floors, *limits, serial[0] * serial[1] == 1)
    if live.any():
        pm, pn, lo, hi = pm[live], pn[live], lo[live], hi[live]
        size = hi - lo + 1
        yield np.repeat(pm, size), np.repeat(lo - 1, size) + _ranks(size), np.repeat(pn, size)


@dataclass
class _Cuts:
    """What the partitions scored so far leave to beat (:func:`_candidate_table`): the :data:`TRY_LIMIT`-th least
    cycles within the proportion and temporary bytes that fit (``inf`` until there are that many), the least data
    bytes; a group of partitions whose floors (:func:`_group_floors`) beat none of them cannot enter the table's use.
    """

    totals: np.ndarray
    temps: np.ndarray
    data: float = np.inf

    def cut(self, values: np.ndarray) -> float:
        return float(np.partition(values, TRY_LIMIT - 1)[TRY_LIMIT - 1]) if values.size >= TRY_LIMIT else np.inf

    def add(self, total, temp0, data0, ok, fit) -> None:
        """Fold a scored chunk in (keeping only what can still be among the :data:`TRY_LIMIT` least)."""
        self.totals = np.concatenate([self.totals, total[ok]])
        self.temps = np.concatenate([self.temps, temp0[fit]])
        self.totals = self.totals[self.totals <= self.cut(self.totals)]
        self.temps = self.temps[self.temps <= self.cut(self.temps)]
        self.data = min(self.data, float(data0.min()))

    def useless(self, floors: tuple, sram_bytes, bound, first: bool) -> np.ndarray:
        """Groups with floors ``(total, temp, data)`` none of whose partitions can change the table's use: not
        the least data yet, and too big to fit or beaten on cycles (or over the proportion) and on temporary bytes;
        in the first serial split (``first``) only beaten on cycles, as its fastest fitting plan is compared."""
        total, temp0, data0 = floors
        slow = total > self.cut(self.totals)
        if not first:
            slow = slow | (temp0 > bound)
        return (data0 > self.data) & ((data0 > sram_bytes) | (slow & (temp0 > self.cut(self.temps))))


def _closed_form(m, k, n, sk, sn, tiles, eb, pb, amp_spec: AmpTarget, layout: tuple, costs, split=None):
    """Predicted cycles, temporary bytes and data bytes of every partition of the ``(S_k, S_n)`` passes
    (or of the partitions ``split`` = ``(pm, pk, pn)`` arrays, a chunk of :func:`_candidates`;
    ``amp_spec``: the tile's AMP, :func:`_amp_cycles`; ``layout``: :attr:`PlanTarget.operands_in_place` and
    :attr:`PlanTarget.exchange_bus_tiles`).

    Tile 0 holds the largest block, home chunk and reduction slice of every balanced split, so these
    closed forms are the per-tile maxima the phases of :func:`build_matmul_plan` reduce over (in place: the
    largest share sent and an upper bound of the rest received)."""
    ks, ns, passes = k // sk, n // sn, sk * sn
    if split is None:
        split = tuple(np.concatenate(c) for c in zip(*_candidates(m, ks, ns, tiles)))
    pm, pk, pn = split
    cm, ck, cn = ceil_div(m, pm), ceil_div(ks, pk), ceil_div(ns, pn)
    amp0 = _amp_cycles(cm, ck, cn, amp_spec)
    in_place, bus = layout
    (recv_a, recv_b), send, home0, held = _tile0_operands((cm, ck, cn), (pm, pn), (m, k, n), (sk, sn), tiles, in_place)
    in0, home0 = (recv_a + recv_b) * eb, home0 * eb
    once, exchange, send0 = _operand_cycles(((recv_a, recv_b), send, held), pn, (sk, sn), eb, bus, costs)
    base = costs.sync_cycles + costs.exchange_fixed_cycles
    step = costs.sync_cycles + exchange + amp0
    blk = cm * cn
    sl = np.where(pk > 1, ceil_div(blk, pk), blk)
    red_in = (pk - 1) * sl * pb
    red_out = (blk - blk // pk) * pb
    red_cyc = _reduce_cycles_max((m, ns), (pm, pk, pn), sk, (eb, pb), amp_spec.workers)
    step = step + np.where(
        pk > 1, base + np.ceil(np.maximum(red_in, red_out) / costs.exchange_bytes_per_cycle) + red_cyc, 0
    )
    if sk > 1:
        step = step + np.where(pk > 1, 0, costs.sync_cycles + costs.vector_cycles(blk, pb))
    if passes > 1:
        step = step + costs.sync_cycles + costs.vector_cycles(send0, eb)
    total = once + passes * step
    if sk > 1 and pb != eb:
        total = total + sn * (costs.sync_cycles + cast_cycles(sl, amp_spec.workers))
    elif pb != eb:
        total = total + np.where(pk == 1, sn * (costs.sync_cycles + cast_cycles(blk, amp_spec.workers)), 0)
    partial = np.where(pk > 1, blk * pb + red_in, blk * pb if sk > 1 else 0)
    live0 = in0 + partial + (send0 * eb if passes > 1 else 0) + (sl * pb if sk > 1 else 0)
    return pm, pk, pn, total, _temp_estimate((cm, ck, cn), sl, sk, eb, pb), live0 + home0 + sn * sl * eb


def _best(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which items of ``mask`` are among its :data:`TRY_LIMIT` smallest ``values`` (with ties): all
    that :func:`_try_order` could try of a chunk, since a chunk's cut is never below the whole table's."""
    if np.count_nonzero(mask) <= TRY_LIMIT:
        return mask
    return mask & (values <= np.partition(values[mask], TRY_LIMIT - 1)[TRY_LIMIT - 1])


def _candidate_table(m, k, n, tiles, sram_bytes, bound, eb, pb, amp_spec, layout, costs, max_serial):
    """Columns ``pm pk pn sk sn total temp data`` (closed-form cycles, temporary and data bytes) of the
    partitions of every serial split that :func:`plan_matmul` may use, fewest passes first: of each chunk
    of :func:`_candidates`, the fastest within the proportion, the leanest that fit and the first with
    the least data (:func:`_best`; the rest can never be tried). Stops after one pass when the
    proportion ``bound`` does not bind (one pass is never slower than several with the same partition)."""
    cols: dict = {key: [] for key in ("pm", "pk", "pn", "sk", "sn", "total", "temp", "data")}
    cuts = _Cuts(np.empty(0), np.empty(0))
    score = ((eb, pb), amp_spec, layout, costs)
    for sk, sn in _serial_pairs(k, n, max_serial):
        fastest_ok = fastest_fit = np.inf
        for split in _live_candidates(m, k, n, (sk, sn), tiles, score, cuts, (sram_bytes, bound)):
            pm, pk, pn, total, temp0, data0 = _closed_form(
                m, k, n, sk, sn, tiles, eb, pb, amp_spec, layout, costs, split
            )
            fit = data0 <= sram_bytes
            ok = fit & (temp0 <= bound)
            keep = _best(ok, total) | _best(fit, temp0)
            keep[int(np.argmin(data0))] = True
            full = (pm, pk, pn, np.full(pm.shape, sk), np.full(pm.shape, sn), total, temp0, data0)
            for key, v in zip(cols, full):
                cols[key].append(v[keep])
            fastest_ok = min(fastest_ok, total[ok].min()) if ok.any() else fastest_ok
            fastest_fit = min(fastest_fit, total[fit].min()) if fit.any() else fastest_fit
            cuts.add(total, temp0, data0, ok, fit)
        if sk * sn == 1 and np.isfinite(fastest_ok) and fastest_ok == fastest_fit:
            break
    return {key: np.concatenate(v) for key, v in cols.items()}


def _try_order(c: dict, mask: np.ndarray, primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """Indices of the candidates in ``mask`` in the order :func:`plan_matmul` tries them: by ``primary``,
    then ``secondary``, fewer passes, fewer tiles, smaller ``P_m``, ``P_n``; only the
    :data:`TRY_LIMIT` best primaries (and their ties) are kept, as no more can be tried."""
    passes = c["sk"] * c["sn"]
    used = c["pm"] * c["pk"] * c["pn"]
    idx_ok = np.flatnonzero(mask)
    if idx_ok.size > TRY_LIMIT:
        cut = np.partition(primary[idx_ok], TRY_LIMIT - 1)[TRY_LIMIT - 1]
        idx_ok = idx_ok[primary[idx_ok] <= cut]
    return idx_ok[
        np.lexsort((c["pn"][idx_ok], c["pm"][idx_ok], used[idx_ok], passes[idx_ok], secondary[idx_ok], primary[idx_ok]))
    ]


def plan_matmul(m: int, k: int, n: int, target: PlanTarget, *, max_serial: int = MAX_SERIAL_SPLIT) -> MatmulPlan:
    """Cheapest plan of ``(m, k) x (k, n)`` over ``tiles`` tiles, as PopLibs' convolution planner chooses it.

    Candidates: every parallel partition ``(P_m, P_k, P_n)`` of every serial split ``(S_k, S_n)``
    (``S_k | k``, ``S_n | n``, ``S_k S_n <= max_serial``, one of them 1; poplin's ``inChanSplit.serial`` and
    ``outChanSplit.serial``, ``lib/poplin/ConvPlan.hpp``). A serial plan runs ``S_k S_n`` passes of
    ``(m, k/S_k, n/S_n)`` in a ``Repeat`` loop: per pass a dynamic slice of the operand shares, the
    exchange of the operand blocks (of ``B`` only for ``S_n > 1``: ``A`` is broadcast once before the loop), the
    AMP, the ``P_k`` reduction, and for ``S_k > 1`` an in-place add
    into an accumulator in the partials type and a final cast (PopLibs' ``addInPlace`` and
    ``outputCast`` estimates, ``lib/poplin/ConvModel.cpp``). Cycles = passes x per-pass cycles (+ casts).

    Memory, as poplin bounds it (``ConvModel.cpp``: ``totalTempBytes <= availableMemoryProportion x
    bytesPerTile``): poplin's estimate of the *temporary* bytes (:attr:`MatmulPlan.estimate_temp_bytes`) must not
    exceed ``memory_proportion · sram_bytes``, and everything (data + overheads) must fit ``sram_bytes``. The
    fastest plan meeting both is returned (ties: fewer passes, fewer tiles, smaller ``P_m``, ``P_n``);
    if none meets the proportion, the plan with least temporary memory that fits (poplin replans
    "minimising temporary memory"; ``within_proportion = False``). ``memory_proportion = 0`` asks
    for that plan directly. Raises :class:`~tilesim.errors.ConfigError` for bad arguments and
    :class:`~tilesim.errors.SramOverflowError` (naming the smallest plan's bytes) if nothing fits.
    """
    tiles, sram_bytes, flops_per_cycle = target.tiles, target.sram_bytes, target.flops_per_cycle
    precision, partials_precision = target.precision, target.partials_precision
    costs, overheads, memory_proportion = target.costs, target.overheads, target.memory_proportion
    _check_problem(m, k, n, tiles, sram_bytes, flops_per_cycle, precision)
    _check_proportion(memory_proportion)
    require_int("max_serial", max_serial)
    eb = require_precision("precision", precision)
    pb = require_precision("partials_precision", partials_precision)
    bound = memory_proportion * sram_bytes
    amp_spec = amp_target(precision, flops_per_cycle, target.workers)
    layout = (target.operands_in_place, target.exchange_bus_tiles)
    floor = _Floor(m, k, n, tiles, eb, pb, bool(target.operands_in_place), overheads)
    least = _memory_floor(floor, max_serial, sram_bytes)
    if least[0] > sram_bytes:  # no partition can fit: refuse before scoring every one of them
        raise _cannot_fit(floor, least, sram_bytes, precision, max_serial)
    c = _candidate_table(m, k, n, tiles, sram_bytes, bound, eb, pb, amp_spec, layout, costs, max_serial)
    fit = c["data"] <= sram_bytes
    kw = dict(
        tiles=tiles,
        flops_per_cycle=flops_per_cycle,
        precision=precision,
        partials_precision=partials_precision,
        costs=costs,
        memory_proportion=memory_proportion,
        workers=target.workers,
        operands_in_place=target.operands_in_place,
        exchange_bus_tiles=target.exchange_bus_tiles,
    )
    within = fit & (c["temp"] <= bound)
    for mask, primary, ok in ((within, c["total"], True), (fit, c["temp"], False)):
        secondary = c["total"] if not ok else c["temp"]
        order = _try_order(c, mask, primary, secondary)
        tried = 0
        for idx in order:
            cut = (int(c["pm"][idx]), int(c["pk"][idx]), int(c["pn"][idx]))
            if _cannot_hold(floor, (int(c["sk"][idx]), int(c["sn"][idx])), cut, sram_bytes):
                tried += 1  # its plan would not fit: counted as tried, not built
                if tried >= TRY_LIMIT:
                    break
                continue
            plan = build_matmul_plan(
                m,
                k,
                n,
                (int(c["pm"][idx]), int(c["pk"][idx]), int(c["pn"][idx])),
                serial=(int(c["sk"][idx]), int(c["sn"][idx])),
                within_proportion=ok,
                **kw,
            )
            if int(plan.memory_bytes(overheads).max()) <= sram_bytes:
                return plan
            tried += 1
            if tried >= TRY_LIMIT:
                break
    raise _no_plan_fits(c, m, k, n, tiles, sram_bytes, precision, eb, max_serial)


def _cannot_hold(f: _Floor, serial: tuple, cut: tuple, sram_bytes: int) -> bool:
    """Whether the plan of partition ``cut`` of the ``serial`` passes surely overflows ``sram_bytes`` on tile 0
    (:func:`_tile0_floor` of its own blocks), so :func:`plan_matmul` need not build it to know."""
    (sk, sn), (pm, pk, pn) = serial, cut
    blocks = (ceil_div(f.m, pm), ceil_div(f.k // sk, pk), ceil_div(f.n // sn, pn))
    return int(_tile0_floor(f, serial, (pm, pn), blocks, (pk, pk))) > sram_bytes


def _cannot_fit(f: _Floor, least: tuple, sram_bytes: int, precision: str, max_serial: int) -> SramOverflowError:
    """The error for a matmul whose :func:`_memory_floor` ``least`` exceeds ``sram_bytes`` (no partition fits),
    worded as :func:`_no_plan_fits` words it."""
    need, (sk, sn), (pm, pk, pn) = least
    alone = int((ceil_div(f.m * f.k, f.tiles) + ceil_div(f.k * f.n, f.tiles) + ceil_div(f.m * f.n, f.tiles)) * f.eb)
    return SramOverflowError(
        f"matmul (m, k, n) = ({f.m}, {f.k}, {f.n}) {precision} on {f.tiles} tiles: no plan fits, even with serial "
        f"splits (S_k S_n <= {max_serial}); the smallest, near (P_m, P_k, P_n) = ({pm}, {pk}, {pn}) with (S_k, S_n) "
        f"= ({sk}, {sn}), with its exchange code and vertices at least, needs {int(need)} B of data on tile 0 > "
        f"sram_bytes = {sram_bytes} B; the operands and result alone are {alone} B per tile: use more "
        f"tiles (chips){'' if precision == 'fp16' else ', fp16'} or a smaller batch",
        tiles=[0],
    )


def _no_plan_fits(c: dict, m, k, n, tiles, sram_bytes, precision, eb, max_serial) -> SramOverflowError:
    """The error for a matmul no candidate of table ``c`` fits: names the smallest plan and its bytes."""
    best = int(np.argmin(c["data"]))
    alone = int((ceil_div(m * k, tiles) + ceil_div(k * n, tiles) + ceil_div(m * n, tiles)) * eb)
    return SramOverflowError(
        f"matmul (m, k, n) = ({m}, {k}, {n}) {precision} on {tiles} tiles: no plan fits, even with serial splits "
        f"(S_k S_n <= {max_serial}); the smallest, (P_m, P_k, P_n) = ({int(c['pm'][best])}, {int(c['pk'][best])}, "
        f"{int(c['pn'][best])}) with (S_k, S_n) = ({int(c['sk'][best])}, {int(c['sn'][best])}), needs "
        f"{int(c['data'][best])} B of data on tile 0 > sram_bytes = {sram_bytes} B; the operands and result alone "
        f"are {alone} B per tile: use more "
        f"tiles (chips){'' if precision == 'fp16' else ', fp16'} or a smaller batch",
        tiles=[0],
    )
