"""Tile planner for ``(m, k) x (k, n)`` matmuls and the BSP phase records the timing layer consumes.

Pure functions over numpy; outputs are frozen dataclasses of per-tile arrays (length ``tiles``).

Cost model (the planner's objective; ``ipu-hardware.md`` §2, §3.2, §6):

* **AMP compute** of a tile doing ``MACs`` multiply-accumulates::

      amp_cycles = fixed_cycles + ceil(MACs / macs_per_cycle),  macs_per_cycle = flops_per_cycle / 2

  For FP16 on GC200/Bow (128 flop/cycle → 64 MAC/cycle) a ``[N,16] @ [16,16]`` block is
  ``256 N`` MACs → ``331 + 4 N`` cycles, the measured Bow fit (tessellate-ipu notebook, [M]).
  ``flops_per_cycle`` is the chip's AMP rate *for the chosen precision* (GC200: 128 fp16, 32 fp32),
  ``fixed_cycles`` the per-vertex overhead (331 [M], recalibrate per vertex type).
* **Vector compute** (reductions, butterfly 2x2 stages, element-wise): ``vector_fixed_cycles +
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

The search enumerates all ``(P_m, P_n, P_k)`` and returns the one with the fewest predicted cycles
(ties: fewer tiles, then smaller ``P_m``, ``P_n``) whose peak tile memory (data + overhead, see
:func:`overhead_bytes_per_tile`) fits ``sram_bytes``; otherwise :class:`SramOverflowError`.
Because a partition that fits on ``T`` tiles is also a candidate on ``T' > T`` tiles and costs no
more there (home chunks only shrink), more tiles never predict more cycles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from tilesim.errors import SramOverflowError, require

__all__ = [
    "PRECISION_BYTES",
    "SuperstepCosts",
    "OverheadConstants",
    "Phase",
    "MatmulPlan",
    "plan_matmul",
    "build_matmul_plan",
    "phases_cycles",
    "overhead_breakdown",
    "overhead_bytes_per_tile",
    "compute_sets_per_tile",
    "vertices_per_tile",
    "exchange_programs_per_tile",
    "split_sizes",
    "block_pieces",
]

PRECISION_BYTES = {"fp16": 2, "fp32": 4}


def _require_precision(name: str, value: str) -> int:
    require(value in PRECISION_BYTES, name, value, f"must be one of {sorted(PRECISION_BYTES)}",
            "use 'fp32' (default) or 'fp16'")
    return PRECISION_BYTES[value]


def _require_int(name: str, value, low: int = 1) -> None:
    require(isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= low,
            name, value, f"must be an integer >= {low}", "")


@dataclass(frozen=True)
class SuperstepCosts:
    """Constants of the superstep cost model (``ipu-hardware.md`` §3.2 and §6 recommended defaults)."""

    exchange_bytes_per_cycle: float = 4.0   # [S] exchangeBytesPerCycle, per tile port
    exchange_fixed_cycles: float = 100.0    # [S] popnn/CTCLossPlan.cpp fixed exchange overhead
    sync_cycles: float = 90.0               # [S] on-chip sync (measured 30-150)
    vector_bytes_per_cycle: float = 8.0     # [D] 64-bit SIMD, one instruction/cycle/tile
    vector_fixed_cycles: float = 11.0       # [S] basicOpSupervisorOverhead
    vector_stream_bytes_per_cycle: float = 0.0  # 0 = issue-bound only; see vector_cycles

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            require(v >= 0, f.name, v, "must be >= 0", "costs are cycles or bytes per cycle")
        require(self.exchange_bytes_per_cycle > 0, "exchange_bytes_per_cycle", self.exchange_bytes_per_cycle,
                "must be > 0", "the IPU moves 4 B/cycle per tile")
        require(self.vector_bytes_per_cycle > 0, "vector_bytes_per_cycle", self.vector_bytes_per_cycle,
                "must be > 0", "the IPU vector path is 8 B (64 bit) wide")

    def vector_cycles(self, ops, element_bytes: int):
        """Cycles of ``ops`` element operations (0 where there is no work)."""
        ops = np.asarray(ops, dtype=np.int64)
        per_cycle = self.vector_bytes_per_cycle / element_bytes
        work = ops / per_cycle
        if self.vector_stream_bytes_per_cycle > 0:
            work = np.maximum(work, ops * 3 * element_bytes / self.vector_stream_bytes_per_cycle)
        cyc = self.vector_fixed_cycles + np.ceil(work)
        return np.where(ops > 0, cyc, 0).astype(np.int64)


@dataclass(frozen=True)
class OverheadConstants:
    """Per-tile memory charged for vertices, exchanges and compute sets (``ipu-hardware.md`` §3.3).

    * ``vertex_state_base_bytes = 20`` and ``vertex_edge_bytes = 8``: the PopLibs reduction planner's
      vertex-state cost, 20 B base + 8 B per region, a region being a ``SPAN`` edge (32-bit pointer +
      32-bit count) (``popops/reduction/ReductionConnection.cpp``; Poplar "Vertex vector types") [S].
    * ``exchange_instruction_bytes = 4``: the DynamicSlice planner's 4 B per exchange instruction
      per tile (``popops/DynamicSlice.cpp``) [S].
    * ``control_code_bytes_per_compute_set`` and ``control_code_bytes_per_exchange``: no public constant
      exists (§3.3 "No public per-compute-set byte constant was found"); 32 B (≈ 8 32-bit instructions:
      call, sync, branch bookkeeping) is an **uncalibrated placeholder** [U] — calibrate with libpva
      (``IPUModel.compileIPUCode``). It is charged on every tile that takes part in a compute set or an
      exchange program, which is the mechanism of the paper's Observation 3 (memory grows with compute
      sets); the paper gives no byte values (Fig. 5/7 are not in its text) to check the magnitude.
    * ``vertex_code_bytes``: code of each distinct codelet present on a tile, once per tile;
      AMP 1024 B, vector 256 B are **uncalibrated placeholders** [U] (§3.3 lists ``vertexCode`` as a
      category but gives no size; PopLiner's vertex-code estimate is within 0.8 % of libpva, §5, but
      its per-codelet sizes are not in the reference).

    Cross-check with §3.3's observed 2-IPU profile: it reports totals only (e.g. 55,640 B of
    ``vertexInstanceState`` over all tiles) without vertex or compute-set counts, so it cannot
    calibrate a per-vertex or per-compute-set constant.
    """

    vertex_state_base_bytes: int = 20
    vertex_edge_bytes: int = 8
    exchange_instruction_bytes: int = 4
    control_code_bytes_per_compute_set: int = 32
    control_code_bytes_per_exchange: int = 32
    vertex_code_bytes_amp: int = 1024
    vertex_code_bytes_vector: int = 256

    def __post_init__(self):
        for f in fields(self):
            _require_int(f.name, getattr(self, f.name), 0)


def _as_tile_array(name: str, value, tiles: int) -> np.ndarray:
    a = np.array(value, dtype=np.int64)
    require(a.shape == (tiles,), name + " shape", a.shape, f"must be ({tiles},)", "one entry per tile")
    require(bool((a >= 0).all()), name, int(a.min()), "must be >= 0 on every tile", "counts cannot be negative")
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Phase:
    """One BSP superstep of a layer: sync, then exchange (``bytes_in``/``bytes_out`` per tile), then one
    compute set (``compute_cycles`` per tile, ``unit`` "amp" or "vector").

    Per-tile arrays (int64, length ``tiles``): ``macs`` (AMP MACs or vector element operations),
    ``compute_cycles``, ``bytes_in``, ``bytes_out``, ``vertices``, ``vertex_edges`` (edge pointers of
    those vertices) and ``exchange_instructions`` (estimated send + receive instructions).
    """

    name: str
    unit: str
    macs: np.ndarray
    compute_cycles: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    vertices: np.ndarray
    vertex_edges: np.ndarray
    exchange_instructions: np.ndarray

    def __post_init__(self):
        require(self.unit in ("amp", "vector"), "phase unit", self.unit, "must be 'amp' or 'vector'", "")
        tiles = np.asarray(self.macs).shape[0] if np.ndim(self.macs) == 1 else -1
        require(tiles >= 1, "phase macs", np.shape(self.macs), "must be a 1-D per-tile array", "")
        for name in ("macs", "compute_cycles", "bytes_in", "bytes_out", "vertices", "vertex_edges",
                     "exchange_instructions"):
            object.__setattr__(self, name, _as_tile_array(f"phase {self.name}.{name}", getattr(self, name), tiles))

    @property
    def tiles(self) -> int:
        return int(self.macs.shape[0])

    @property
    def has_exchange(self) -> bool:
        return bool(self.bytes_in.any() or self.bytes_out.any())

    def exchange_cycles(self, costs: SuperstepCosts) -> int:
        if not self.has_exchange:
            return 0
        peak = int(np.maximum(self.bytes_in, self.bytes_out).max())
        return int(costs.exchange_fixed_cycles + math.ceil(peak / costs.exchange_bytes_per_cycle))

    def cycles(self, costs: SuperstepCosts) -> int:
        """``sync + exchange + max compute`` of this superstep (the planner's estimate)."""
        return int(costs.sync_cycles) + self.exchange_cycles(costs) + int(self.compute_cycles.max())


def phases_cycles(phases, costs: SuperstepCosts) -> int:
    """Predicted cycles of a sequence of phases (sum of :meth:`Phase.cycles`)."""
    return int(sum(p.cycles(costs) for p in phases))


def compute_sets_per_tile(phases) -> np.ndarray:
    """Number of compute sets each tile takes part in (phases where it has a vertex)."""
    return sum((p.vertices > 0).astype(np.int64) for p in phases)


def vertices_per_tile(phases) -> np.ndarray:
    return sum(p.vertices for p in phases)


def exchange_programs_per_tile(phases) -> np.ndarray:
    """Number of exchange programs each tile sends or receives in."""
    return sum(((p.bytes_in > 0) | (p.bytes_out > 0)).astype(np.int64) for p in phases)


def overhead_breakdown(plan, constants: OverheadConstants = OverheadConstants()) -> dict:
    """Per-tile overhead bytes by profiler category for anything with ``.phases``.

    ``vertexInstanceState = Σ (base · vertices + edge_bytes · edges)``,
    ``internalExchangeCode = 4 B · exchange instructions``,
    ``controlCode = 32 B · (compute sets + exchange programs)`` [U],
    ``vertexCode`` = code of each distinct unit ("amp", "vector") present on the tile [U].
    """
    phases = plan.phases
    c = constants
    state = sum(c.vertex_state_base_bytes * p.vertices + c.vertex_edge_bytes * p.vertex_edges for p in phases)
    exch = sum(c.exchange_instruction_bytes * p.exchange_instructions for p in phases)
    control = (c.control_code_bytes_per_compute_set * compute_sets_per_tile(phases)
               + c.control_code_bytes_per_exchange * exchange_programs_per_tile(phases))
    code = 0
    for unit, size in (("amp", c.vertex_code_bytes_amp), ("vector", c.vertex_code_bytes_vector)):
        present = np.zeros(phases[0].tiles, dtype=bool)
        for p in phases:
            if p.unit == unit:
                present |= p.vertices > 0
        code = code + size * present.astype(np.int64)
    return {"vertexInstanceState": np.asarray(state, dtype=np.int64),
            "internalExchangeCode": np.asarray(exch, dtype=np.int64),
            "controlCode": np.asarray(control, dtype=np.int64),
            "vertexCode": np.asarray(code, dtype=np.int64)}


def overhead_bytes_per_tile(plan, constants: OverheadConstants = OverheadConstants()) -> np.ndarray:
    """Total per-tile bytes of vertex state, exchange code, control code and vertex code (see
    :func:`overhead_breakdown`); the memory that grows with compute sets (paper Observation 3)."""
    return sum(overhead_breakdown(plan, constants).values())


def split_sizes(total: int, parts: int) -> np.ndarray:
    """Near-equal split: ``total // parts + (i < total % parts)`` for ``i < parts``."""
    base, rem = divmod(int(total), int(parts))
    return base + (np.arange(parts) < rem).astype(np.int64)


def block_pieces(rows, cols, row_len: int, chunk: int, max_pieces: int) -> np.ndarray:
    """Estimated contiguous pieces of a ``rows x cols`` block of a row-major matrix with rows of
    ``row_len`` elements whose flat storage is cut into chunks of ``chunk`` elements.

    ``runs = 1`` if the block spans whole rows else ``rows``; each chunk boundary inside the block's
    flat extent ``(rows - 1) row_len + cols`` splits at most one run, so
    ``pieces = runs + min(extent // chunk, max_pieces - 1)`` (upper estimate; 0 for empty blocks).
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    runs = np.where(cols == row_len, 1, rows)
    extent = np.maximum(rows - 1, 0) * row_len + cols
    pieces = runs + np.minimum(extent // max(chunk, 1), max_pieces - 1)
    return np.where(rows * cols > 0, pieces, 0)


@dataclass(frozen=True)
class MatmulPlan:
    """A partition of ``C (m x n) = A (m x k) · B (k x n)`` over ``tiles`` tiles and its per-tile costs.

    Scalars: the problem, ``split_m/k/n`` (``P_m, P_k, P_n``), ``predicted_cycles``.
    Per-tile int64 arrays (length ``tiles``; idle tiles hold zeros except their home chunks):
    ``rows, depth, cols`` (``m_t, k_t, n_t``), ``macs``, ``amp_cycles``, ``bytes_in``/``bytes_out``
    (operand exchange), ``reduce_bytes_in``/``reduce_bytes_out``, ``reduce_adds``, ``reduce_cycles``,
    memory ``operand_bytes`` (received A and B blocks), ``home_bytes`` (home chunks of A and B),
    ``output_bytes`` (final C elements), ``partial_bytes`` (partials + reduction receive buffer),
    ``data_bytes`` (their sum: peak, all counted live at once), and the counts ``compute_sets``,
    ``vertices``, ``exchange_programs``. ``phases`` are the supersteps for the timing layer.
    """

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
    compute_sets: np.ndarray = field(init=False)
    vertices: np.ndarray = field(init=False)
    exchange_programs: np.ndarray = field(init=False)

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name, None)
            if f.init and isinstance(v, np.ndarray):
                object.__setattr__(self, f.name, _as_tile_array(f.name, v, self.tiles))
        require(self.split_m * self.split_k * self.split_n <= self.tiles, "split", (self.split_m, self.split_k, self.split_n),
                f"product must be <= tiles = {self.tiles}", "")
        total = int(self.macs.sum())
        require(total == self.m * self.k * self.n, "plan MACs", total, f"must equal m k n = {self.m * self.k * self.n}", "")
        object.__setattr__(self, "compute_sets", _as_tile_array("compute_sets", compute_sets_per_tile(self.phases), self.tiles))
        object.__setattr__(self, "vertices", _as_tile_array("vertices", vertices_per_tile(self.phases), self.tiles))
        object.__setattr__(self, "exchange_programs",
                           _as_tile_array("exchange_programs", exchange_programs_per_tile(self.phases), self.tiles))

    @property
    def split(self) -> tuple:
        return (self.split_m, self.split_k, self.split_n)

    @property
    def tiles_used(self) -> int:
        return self.split_m * self.split_k * self.split_n

    def memory_bytes(self, constants: OverheadConstants = OverheadConstants()) -> np.ndarray:
        """Per-tile ``data_bytes + overhead_bytes_per_tile``."""
        return self.data_bytes + overhead_bytes_per_tile(self, constants)


def _check_problem(m, k, n, tiles, sram_bytes, flops_per_cycle, fixed_cycles):
    for name, v in (("m", m), ("k", k), ("n", n), ("tiles", tiles), ("sram_bytes", sram_bytes)):
        _require_int(name, v)
    require(flops_per_cycle > 0, "flops_per_cycle", flops_per_cycle, "must be > 0",
            "GC200 AMP: 128 (fp16) or 32 (fp32) flop/cycle per tile")
    require(fixed_cycles >= 0, "fixed_cycles", fixed_cycles, "must be >= 0", "the Bow fit gives 331")


def build_matmul_plan(m: int, k: int, n: int, split: tuple, *, tiles: int, flops_per_cycle: float,
                      fixed_cycles: float = 331.0, precision: str = "fp32", partials_precision: str = "fp32",
                      costs: SuperstepCosts = SuperstepCosts()) -> MatmulPlan:
    """Per-tile plan of one given partition ``split = (P_m, P_k, P_n)`` (no memory check)."""
    _check_problem(m, k, n, tiles, 1, flops_per_cycle, fixed_cycles)
    eb = _require_precision("precision", precision)
    pb = _require_precision("partials_precision", partials_precision)
    pm, pk, pn = (int(s) for s in split)
    for name, s, lim in (("split_m", pm, m), ("split_k", pk, k), ("split_n", pn, n)):
        require(1 <= s <= lim, name, s, f"must be in [1, {lim}]", "a dimension cannot be cut finer than 1")
    used = pm * pk * pn
    require(used <= tiles, "split", (pm, pk, pn), f"uses {used} tiles > tiles = {tiles}", "split less")
    macs_per_cycle = flops_per_cycle / 2.0

    t = np.arange(tiles)
    active = t < used
    tu = np.where(active, t, 0)
    ik, rest = tu % pk, tu // pk
    inn, im = rest % pn, rest // pn
    zero = np.zeros(tiles, dtype=np.int64)
    rows = np.where(active, split_sizes(m, pm)[im], 0)
    depth = np.where(active, split_sizes(k, pk)[ik], 0)
    cols = np.where(active, split_sizes(n, pn)[inn], 0)

    macs = rows * depth * cols
    amp = np.where(macs > 0, fixed_cycles + np.ceil(macs / macs_per_cycle), 0).astype(np.int64)

    home_a, home_b = split_sizes(m * k, tiles), split_sizes(k * n, tiles)
    chunk_a, chunk_b = int(home_a.max()), int(home_b.max())
    bytes_in = (rows * depth + depth * cols) * eb
    bytes_out = (home_a + home_b) * eb
    pieces_a = block_pieces(rows, depth, k, chunk_a, tiles)
    pieces_b = block_pieces(depth, cols, n, chunk_b, tiles)
    # distinct blocks are sent once: A blocks by (i_m, i_k) (tiles with i_n = 0), B by (i_k, i_n) (i_m = 0)
    sent = int(pieces_a[active & (inn == 0)].sum() + pieces_b[active & (im == 0)].sum())
    send_instr = split_sizes(sent, tiles)
    operand_instr = pieces_a + pieces_b + send_instr

    out_block = rows * cols
    phases = []
    if pk > 1:
        slice_sizes = out_block // pk + (ik < out_block % pk).astype(np.int64)
        red_in = (pk - 1) * slice_sizes * pb
        red_out = (out_block - slice_sizes) * pb
        red_adds = (pk - 1) * slice_sizes
        red_cycles = costs.vector_cycles(red_adds, pb)
        output_bytes = slice_sizes * eb
        partial_bytes = out_block * pb + red_in
        red_instr = np.where(active, 2 * (pk - 1), 0)
    else:
        red_in = red_out = red_adds = red_cycles = red_instr = zero
        output_bytes = out_block * eb
        partial_bytes = zero
    phases.append(Phase("matmul", "amp", macs, amp, bytes_in, bytes_out, (macs > 0).astype(np.int64),
                        3 * (macs > 0), operand_instr))
    if pk > 1:
        has = red_adds > 0
        phases.append(Phase("reduce", "vector", red_adds, red_cycles, red_in, red_out, has.astype(np.int64),
                            (pk + 1) * has, red_instr))
    operand_bytes = bytes_in
    home_bytes = bytes_out
    data = operand_bytes + home_bytes + output_bytes + partial_bytes
    phases = tuple(phases)
    return MatmulPlan(m, k, n, tiles, precision, partials_precision, pm, pk, pn, rows, depth, cols, macs, amp,
                      bytes_in, bytes_out, red_in, red_out, red_adds, red_cycles, operand_bytes, home_bytes,
                      output_bytes, partial_bytes, data, phases, phases_cycles(phases, costs))


def _candidates(m, k, n, tiles):
    pms, pns, pks = [], [], []
    for pm in range(1, min(m, tiles) + 1):
        for pn in range(1, min(n, tiles // pm) + 1):
            top = min(k, tiles // (pm * pn))
            pks.append(np.arange(1, top + 1))
            pms.append(np.full(top, pm))
            pns.append(np.full(top, pn))
    return np.concatenate(pms), np.concatenate(pks), np.concatenate(pns)


def _cdiv(a, b):
    return -(-a // b)


def plan_matmul(m: int, k: int, n: int, *, tiles: int, sram_bytes: int, flops_per_cycle: float,
                fixed_cycles: float = 331.0, precision: str = "fp32", partials_precision: str = "fp32",
                costs: SuperstepCosts = SuperstepCosts(),
                overheads: OverheadConstants = OverheadConstants()) -> MatmulPlan:
    """Cheapest partition of ``(m, k) x (k, n)`` over ``tiles`` tiles that fits ``sram_bytes`` per tile.

    See the module docstring for the cost model. Raises :class:`~tilesim.errors.ConfigError` for bad
    arguments and :class:`~tilesim.errors.SramOverflowError` if no partition fits.
    """
    _check_problem(m, k, n, tiles, sram_bytes, flops_per_cycle, fixed_cycles)
    eb = _require_precision("precision", precision)
    pb = _require_precision("partials_precision", partials_precision)
    pm, pk, pn = _candidates(m, k, n, tiles)
    # Tile 0 holds the largest block, home chunk and reduction slice of every balanced split, so
    # these closed forms are the per-tile maxima the phases reduce over.
    cm, ck, cn = _cdiv(m, pm), _cdiv(k, pk), _cdiv(n, pn)
    macs0 = cm * ck * cn
    amp0 = fixed_cycles + np.ceil(macs0 / (flops_per_cycle / 2.0))
    in0 = (cm * ck + ck * cn) * eb
    home0 = (_cdiv(m * k, tiles) + _cdiv(k * n, tiles)) * eb
    base = costs.sync_cycles + costs.exchange_fixed_cycles
    ph1 = base + np.ceil(np.maximum(in0, home0) / costs.exchange_bytes_per_cycle) + amp0
    blk = cm * cn
    sl = _cdiv(blk, pk)
    red_in = (pk - 1) * sl * pb
    red_out = (blk - blk // pk) * pb
    red_cyc = costs.vector_fixed_cycles + np.ceil((pk - 1) * sl / (costs.vector_bytes_per_cycle / pb))
    ph2 = np.where(pk > 1, base + np.ceil(np.maximum(red_in, red_out) / costs.exchange_bytes_per_cycle) + red_cyc, 0)
    total = ph1 + ph2
    data0 = in0 + home0 + np.where(pk > 1, sl * eb + blk * pb + red_in, blk * eb)
    order = np.lexsort((pn, pm, pm * pk * pn, total))
    fits = data0[order] <= sram_bytes
    tried = 0
    for idx in order[fits]:
        plan = build_matmul_plan(m, k, n, (int(pm[idx]), int(pk[idx]), int(pn[idx])), tiles=tiles,
                                 flops_per_cycle=flops_per_cycle, fixed_cycles=fixed_cycles, precision=precision,
                                 partials_precision=partials_precision, costs=costs)
        if int(plan.memory_bytes(overheads).max()) <= sram_bytes:
            return plan
        tried += 1
        if tried >= 64:
            break
    best = int(np.argmin(data0))
    raise SramOverflowError(
        f"matmul (m, k, n) = ({m}, {k}, {n}) {precision} on {tiles} tiles: no partition fits; the smallest, "
        f"(P_m, P_k, P_n) = ({int(pm[best])}, {int(pk[best])}, {int(pn[best])}), needs {int(data0[best])} B "
        f"of data on tile 0 > sram_bytes = {sram_bytes} B; use more tiles, fp16, or split the problem",
        tiles=[0])
