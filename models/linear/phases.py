"""The pieces every PopLibs-style schedule is made of: a :class:`Phase` (one compute set with its
exchange, per tile), the per-superstep fixed costs (:class:`SuperstepCosts`, PopLibs constants
[S]) and the per-compute-set code and state bytes (:class:`OverheadConstants`, ipu-hardware.md
§3.3), with the sums over a plan's phases that the ledger and the timing use."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from tilesim.errors import require

__all__ = [
    "as_tile_array",
    "require_int",
    "require_precision",
    "PRECISION_BYTES",
    "SuperstepCosts",
    "OverheadConstants",
    "Phase",
    "phases_cycles",
    "overhead_breakdown",
    "overhead_bytes_per_tile",
    "compute_sets_per_tile",
    "vertices_per_tile",
    "exchange_programs_per_tile",
    "split_sizes",
    "ceil_div",
    "block_pieces",
    "TilePlan",
]

PRECISION_BYTES = {"fp16": 2, "fp32": 4}


def require_precision(name: str, value: str) -> int:
    """Bytes per element of precision ``value`` (fp16 | fp32); ConfigError naming ``name`` otherwise."""
    require(
        value in PRECISION_BYTES,
        name,
        value,
        f"must be one of {sorted(PRECISION_BYTES)}",
        "use 'fp32' (default) or 'fp16'",
    )
    return PRECISION_BYTES[value]


def require_int(name: str, value, low: int = 1) -> None:
    """Raise ConfigError naming ``name`` unless ``value`` is an integer >= ``low``."""
    require(
        isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= low,
        name,
        value,
        f"must be an integer >= {low}",
        "",
    )


@dataclass(frozen=True)
class SuperstepCosts:
    """Constants of the superstep cost model (``ipu-hardware.md`` §3.2 and §6 recommended defaults)."""

    exchange_bytes_per_cycle: float = 4.0  # [S] exchangeBytesPerCycle, per tile port
    exchange_fixed_cycles: float = 100.0  # [S] popnn/CTCLossPlan.cpp fixed exchange overhead
    sync_cycles: float = 90.0  # [S] on-chip sync (measured 30-150)
    vector_bytes_per_cycle: float = 8.0  # [D] 64-bit SIMD, one instruction/cycle/tile
    vector_fixed_cycles: float = 11.0  # [S] basicOpSupervisorOverhead
    vector_stream_bytes_per_cycle: float = 0.0  # 0 = issue-bound only; see vector_cycles

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            require(v >= 0, f.name, v, "must be >= 0", "costs are cycles or bytes per cycle")
        require(
            self.exchange_bytes_per_cycle > 0,
            "exchange_bytes_per_cycle",
            self.exchange_bytes_per_cycle,
            "must be > 0",
            "the IPU moves 4 B/cycle per tile",
        )
        require(
            self.vector_bytes_per_cycle > 0,
            "vector_bytes_per_cycle",
            self.vector_bytes_per_cycle,
            "must be > 0",
            "the IPU vector path is 8 B (64 bit) wide",
        )

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
            require_int(f.name, getattr(self, f.name), 0)


def as_tile_array(name: str, value, tiles: int) -> np.ndarray:
    """``value`` as a read-only int64 array of one non-negative count per tile; ConfigError otherwise."""
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
    those vertices) and ``exchange_instructions`` (estimated send + receive instructions), all for
    **one** execution. ``repeat`` > 1 is the body of a Poplar ``Repeat`` loop (a serially split
    matmul): the superstep runs ``repeat`` times, but its compute set, vertices and exchange code
    exist once in memory.
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
    repeat: int = 1

    def __post_init__(self):
        require(self.unit in ("amp", "vector"), "phase unit", self.unit, "must be 'amp' or 'vector'", "")
        require_int("phase repeat", self.repeat)
        tiles = np.asarray(self.macs).shape[0] if np.ndim(self.macs) == 1 else -1
        require(tiles >= 1, "phase macs", np.shape(self.macs), "must be a 1-D per-tile array", "")
        for name in (
            "macs",
            "compute_cycles",
            "bytes_in",
            "bytes_out",
            "vertices",
            "vertex_edges",
            "exchange_instructions",
        ):
            object.__setattr__(self, name, as_tile_array(f"phase {self.name}.{name}", getattr(self, name), tiles))

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
        """``repeat · (sync + exchange + max compute)`` of this superstep (the planner's estimate)."""
        once = int(costs.sync_cycles) + self.exchange_cycles(costs) + int(self.compute_cycles.max())
        return self.repeat * once


def phases_cycles(phases, costs: SuperstepCosts) -> int:
    """Predicted cycles of a sequence of phases (sum of :meth:`Phase.cycles`)."""
    return int(sum(p.cycles(costs) for p in phases))


def compute_sets_per_tile(phases) -> np.ndarray:
    """Number of compute sets each tile takes part in (phases where it has a vertex)."""
    return sum((p.vertices > 0).astype(np.int64) for p in phases)


def vertices_per_tile(phases) -> np.ndarray:
    """Total vertex count on each tile, summed over ``phases`` (each with a per-tile ``.vertices`` array)."""
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
    control = c.control_code_bytes_per_compute_set * compute_sets_per_tile(
        phases
    ) + c.control_code_bytes_per_exchange * exchange_programs_per_tile(phases)
    code = 0
    for unit, size in (("amp", c.vertex_code_bytes_amp), ("vector", c.vertex_code_bytes_vector)):
        present = np.zeros(phases[0].tiles, dtype=bool)
        for p in phases:
            if p.unit == unit:
                present |= p.vertices > 0
        code = code + size * present.astype(np.int64)
    return {
        "vertexInstanceState": np.asarray(state, dtype=np.int64),
        "internalExchangeCode": np.asarray(exch, dtype=np.int64),
        "controlCode": np.asarray(control, dtype=np.int64),
        "vertexCode": np.asarray(code, dtype=np.int64),
    }


def overhead_bytes_per_tile(plan, constants: OverheadConstants = OverheadConstants()) -> np.ndarray:
    """Total per-tile bytes of vertex state, exchange code, control code and vertex code (see
    :func:`overhead_breakdown`); the memory that grows with compute sets (paper Observation 3)."""
    return sum(overhead_breakdown(plan, constants).values())


def ceil_div(a, b):
    """Ceiling of ``a / b`` for non-negative integers or integer arrays (``-(-a // b)``, exact, no floats)."""
    return -(-a // b)


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


class TilePlan:
    """What every planned matmul (a frozen dataclass with ``tiles``, ``phases`` and ``data_bytes``)
    shares: its per-tile arrays checked and made read-only, memory = data + overheads, and the bytes
    of a tile by category (the data arrays named in ``BYTE_FIELDS``, then :func:`overhead_breakdown`)."""

    BYTE_FIELDS: ClassVar[tuple] = ()

    def _tile_arrays(self) -> None:
        """Every ndarray init field as a checked per-tile array (call from ``__post_init__``)."""
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name, None)
            if f.init and isinstance(v, np.ndarray):
                object.__setattr__(self, f.name, as_tile_array(f.name, v, self.tiles))  # type: ignore[attr-defined]

    def memory_bytes(self, constants: OverheadConstants = OverheadConstants()) -> np.ndarray:
        """Per-tile ``data_bytes + overhead_bytes_per_tile``."""
        return self.data_bytes + overhead_bytes_per_tile(self, constants)  # type: ignore[attr-defined]

    def memory_by_category(self, tile: int, constants: OverheadConstants = OverheadConstants()) -> dict:
        """Bytes on ``tile`` by category: the data arrays and :func:`overhead_breakdown`."""
        d = {name: int(getattr(self, name)[tile]) for name in self.BYTE_FIELDS}
        d.update({k: int(v[tile]) for k, v in overhead_breakdown(self, constants).items()})
        return d
