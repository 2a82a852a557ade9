"""Dense matmul on a grid of Tensix cores as TT-Metal's 2-D multicast matmul runs it.

``C[M, N] = A[M, K] · B[K, N]`` in 32x32 tiles (``Mt, Kt, Nt`` tiles) on ``grid_x`` x ``grid_y``
cores: core ``(x, y)`` owns a block of ``pM = ceil(Mt / grid_y)`` by ``pN = ceil(Nt / grid_x)``
output tiles; ``A``'s row blocks are multicast along the grid's rows and ``B``'s column blocks
along its columns. Per core, with an output sub-block of ``h x w`` tiles (the largest with
``h·w <= 8`` dividing the block, as the library picks it) and ``b`` bytes per tile of the data
format (BFLOAT16 2048, BFLOAT8_B 1088, BFLOAT4_B 576)::

    math    = pM · pN · Kt · matrix_tile_cycles · phases      (LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4)
    unpack  = pM · pN · Kt · (1/h + 1/w) · b / unpack_bytes_per_cycle
    dram    = (bytes of the operands and result kept in DRAM) / dram_bytes_per_s · f
    noc     = max(in0 multicasts, in1 multicasts)               (the fabric's event model, below)
    T       = launch_cycles + max(math + unpack, dram, noc)     (cycles of the chip clock f)

The math and unpack are one core's thread pipeline (serial); the DRAM stream and the NoC
multicasts overlap them (double-buffered circular buffers), so the slowest bounds the core.

**The multicasts.** As TT-Metal's 2-D multicast program factory
(``ttnn/cpp/ttnn/operations/matmul/device/matmul_op_multi_core_reuse_mcast_2d_program_factory.cpp``,
tenstorrent/tt-metal@012a167) builds it: the in0 sender of each grid row multicasts its row block,
``pM x in0_block_w`` tiles per K block, to the ``grid_x − 1`` other cores of the row
(``in0_mcast_num_dests = num_blocks_x − 1``), and the in1 sender of each grid column its
``in0_block_w x pN`` block to the ``grid_y − 1`` other cores of the column; in0 goes on one NoC
(``GetPreferredNOCForDRAMWrite``), in1 on the other (``GetPreferredNOCForDRAMRead``). Over the op
a row's tree carries ``pM·Kt·b`` bytes and a column's ``Kt·pN·b``. tilesim times each operand's
multicasts as one exchange of the fabric (:meth:`tilesim.machine.fabric.MeshFabric.transfer_cycles`:
one multicast tree per sender, links and ports shared by the fluid rule, the NoC's set-up and hops),
the two on their own NoC, so they share nothing. Named assumptions: the sender is the grid's first
column (in0) and first row (in1) — for a block-sharded in0 the sender rotates along the row with the
K block, which moves the trees but not a receiver's bytes; the whole op's bytes as one flow per
tree (the per-block semaphore handshakes are pipelined behind the blocks in flight; the first
block's arrival is in ``launch_cycles``).

``unpack_bytes_per_cycle`` and ``launch_cycles`` are fitted on Wormhole
(:mod:`tilesim.models.tensix.measured`); the rest is the machine's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.io import loads_toml, read_toml
from tilesim.machine.description import Machine
from tilesim.machine.memory import MemoryLedger
from tilesim.outputs.records import SimResult
from tilesim.program import Program, ProgramBuilder
from tilesim.workload import Section, time_workload

__all__ = [
    "DTYPES", "FIDELITIES", "STORAGE", "MatmulSpec", "MatmulCosts", "MatmulPlan", "load_matmul_costs",
    "plan_matmul", "TensixMatmul", "time_matmul",
]  # fmt: skip

TILE = 32
DTYPES = {"BFLOAT16": 2048, "BFLOAT8_B": 1088, "BFLOAT4_B": 576}  # bytes per 32x32 tile (block-float: + exponents)
FIDELITIES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}  # matrix-engine passes per tile product
STORAGE = ("L1", "DRAM")
MAX_SUBBLOCK_TILES = 8  # destination register tiles for BFLOAT16 results
K_BLOCK = 2  # tiles of K per block of A and B in flight (the library's usual in0_block_w)


@dataclass(frozen=True)
class MatmulSpec:
    """One matmul call: shapes, data format, fidelity, the core grid and where each operand lives."""

    m: int
    k: int
    n: int
    dtype: str = "BFLOAT16"
    math_fidelity: str = "HiFi2"
    grid_x: int = 8
    grid_y: int = 8
    in0_storage: str = "DRAM"
    in1_storage: str = "DRAM"
    out_storage: str = "DRAM"

    def __post_init__(self):
        for name in ("m", "k", "n", "grid_x", "grid_y"):
            v = getattr(self, name)
            require(
                not isinstance(v, bool) and isinstance(v, int) and 1 <= v <= 1 << 20,
                name, v, "must be an integer in 1..1048576", f"e.g. {name} = 1024",
            )  # fmt: skip
        require(self.dtype in DTYPES, "dtype", self.dtype, f"must be one of {', '.join(DTYPES)}", "e.g. BFLOAT16")
        require(
            self.math_fidelity in FIDELITIES,
            "math_fidelity", self.math_fidelity, f"must be one of {', '.join(FIDELITIES)}", "e.g. HiFi2",
        )  # fmt: skip
        for name in ("in0_storage", "in1_storage", "out_storage"):
            v = getattr(self, name)
            require(v in STORAGE, name, v, "must be L1 or DRAM", "where the tensor lives")


@dataclass(frozen=True)
class MatmulCosts:
    """The fitted constants (``models/tensix/costs.toml``)."""

    unpack_bytes_per_cycle: float
    launch_cycles: float

    def __post_init__(self):
        require(
            self.unpack_bytes_per_cycle > 0,
            "unpack_bytes_per_cycle",
            self.unpack_bytes_per_cycle,
            "must be > 0",
            "see costs.toml",
        )
        require(self.launch_cycles >= 0, "launch_cycles", self.launch_cycles, "must be >= 0", "see costs.toml")


def load_matmul_costs(path: str | Path | None = None) -> MatmulCosts:
    """The shipped constants or a user's TOML of the same keys (unknown or missing keys refused)."""
    data = (
        loads_toml((resources.files("tilesim.models.tensix") / "costs.toml").read_text())
        if path is None
        else read_toml(Path(path), "matmul costs")
    )
    known = [f.name for f in fields(MatmulCosts)]
    bad = [k for k in data if k not in known] + [k for k in known if k not in data]
    if bad:
        raise ConfigError(config_message("matmul costs", bad[0], "unknown or missing key", f"give {', '.join(known)}"))
    return MatmulCosts(**{k: float(data[k]) for k in known})


@dataclass(frozen=True)
class MatmulPlan:
    """Per core: the output block (tiles), the sub-block, and the cycles of each bound."""

    mt: int
    kt: int
    nt: int
    block_m: int
    block_n: int
    subblock: tuple[int, int]
    math_cycles: float
    unpack_cycles: float
    dram_cycles: float
    dram_bytes: float
    l1_bytes: int
    noc_cycles: float = 0.0
    noc_bytes: float = 0.0

    @property
    def core_cycles(self) -> float:
        """A core's cycles: the slowest of its math + unpack, the DRAM stream and the NoC multicasts."""
        return max(self.math_cycles + self.unpack_cycles, self.dram_cycles, self.noc_cycles)

    @property
    def bound(self) -> str:
        """What bounds a core: ``compute (math + unpack)``, ``DRAM`` or ``NoC multicast``."""
        compute = self.math_cycles + self.unpack_cycles
        if self.noc_cycles > max(compute, self.dram_cycles):
            return "NoC multicast"
        return "DRAM" if self.dram_cycles > compute else "compute (math + unpack)"


def _subblock(pm: int, pn: int) -> tuple[int, int]:
    """The largest ``h x w`` output sub-block (``h·w <= 8``) dividing the core's block, wider first."""
    best = (1, 1)
    for h in range(1, MAX_SUBBLOCK_TILES + 1):
        for w in range(1, MAX_SUBBLOCK_TILES // h + 1):
            if pm % h == 0 and pn % w == 0 and (h * w, w) > (best[0] * best[1], best[1]):
                best = (h, w)
    return best


def plan_matmul(spec: MatmulSpec, machine: Machine, costs: MatmulCosts) -> MatmulPlan:
    """The per-core plan of ``spec`` on ``machine`` (the module docstring's equations).

    Raises :class:`ConfigError` when the machine has no matrix engine or the grid does not fit it."""
    c = machine.chip
    if c.matrix_tile_cycles <= 0:
        raise ConfigError(
            config_message(
                "machine",
                machine.name,
                "has no matrix engine (chip.matrix_tile_cycles = 0)",
                "use a Tenstorrent preset, e.g. --machine wormhole-n150",
            )  # fmt: skip
        )
    cols, rows = machine.fabric.cols or c.tiles, machine.fabric.rows or 1
    require(
        spec.grid_x <= cols and spec.grid_y <= rows,
        "grid", f"{spec.grid_x}x{spec.grid_y}",
        f"must fit the {cols}x{rows} cores of {machine.name}", "a smaller --grid",
    )  # fmt: skip
    mt, kt, nt = (math.ceil(v / TILE) for v in (spec.m, spec.k, spec.n))
    pm, pn = math.ceil(mt / spec.grid_y), math.ceil(nt / spec.grid_x)
    h, w = _subblock(pm, pn)
    b = DTYPES[spec.dtype]
    products = pm * pn * kt
    math_c = products * c.matrix_tile_cycles * FIDELITIES[spec.math_fidelity]
    unpack = products * (1 / h + 1 / w) * b / costs.unpack_bytes_per_cycle
    elems = {"in0": spec.m * spec.k, "in1": spec.k * spec.n, "out": spec.m * spec.n}
    where = {"in0": spec.in0_storage, "in1": spec.in1_storage, "out": spec.out_storage}
    dram_bytes = sum(e * b / (TILE * TILE) for t, e in elems.items() if where[t] == "DRAM")
    dram = dram_bytes / c.dram_bytes_per_s * c.clock_hz if c.dram_bytes_per_s > 0 else (math.inf if dram_bytes else 0.0)
    # L1 per core: double-buffered blocks of A and B (K_BLOCK tiles of K each), the operands kept
    # in L1 block-sharded over the grid, and the result: its shard, or one row of sub-blocks on
    # its way to DRAM (the library's circular buffers as modelled, not read off a compiled program)
    l1 = 2 * K_BLOCK * (pm + pn) * b
    l1 += pm * math.ceil(kt / spec.grid_x) * b if spec.in0_storage == "L1" else 0
    l1 += math.ceil(kt / spec.grid_y) * pn * b if spec.in1_storage == "L1" else 0
    l1 += pm * pn * b if spec.out_storage == "L1" else h * pn * b
    noc, noc_bytes = _multicast_cycles(spec, machine, pm * kt * b, kt * pn * b)
    return MatmulPlan(
        mt, kt, nt, pm, pn, (h, w), float(math_c), float(unpack), float(dram), float(dram_bytes), int(l1),
        noc, noc_bytes,
    )  # fmt: skip


def _multicast_cycles(spec: MatmulSpec, machine: Machine, row_bytes: float, col_bytes: float) -> tuple[float, float]:
    """``(cycles, bytes sent)`` of the op's in0 and in1 multicasts on the chip's NoC (module
    docstring): each grid row's first core sends ``row_bytes`` to the rest of its row, each grid
    column's first core ``col_bytes`` down the rest of its column, each operand on its own NoC (its
    own exchange of the fabric, :meth:`tilesim.machine.fabric.MeshFabric.transfer_cycles`); the
    slower of the two. A grid of one column (row) multicasts no in0 (in1)."""
    from tilesim.machine.fabric import make_fabric  # the fabric model loads only when a plan needs it

    fabric = make_fabric(machine)
    if not hasattr(fabric, "transfer_cycles"):
        return 0.0, 0.0  # a fabric without routes (all-to-all): no NoC to time
    cols = machine.fabric.cols or machine.tiles_per_chip
    gx, gy = spec.grid_x, spec.grid_y
    trees = (
        [(y * cols, [y * cols + x for x in range(1, gx)], row_bytes) for y in range(gy)],  # in0 along rows
        [(x, [y * cols + x for y in range(1, gy)], col_bytes) for x in range(gx)],  # in1 down columns
    )
    cycles, sent = 0.0, 0.0
    for operand in trees:
        src, dst, nb, grp = [], [], [], []
        for g, (s, dsts, nbytes) in enumerate(t for t in operand if t[1]):
            src += [s] * len(dsts)
            dst += dsts
            nb += [nbytes] * len(dsts)
            grp += [g] * len(dsts)
            sent += nbytes
        if src:
            c = fabric.transfer_cycles(np.array(src), np.array(dst), np.array(nb, np.float64), np.array(grp))
            cycles = max(cycles, float(c))
    return cycles, sent


@dataclass(frozen=True, eq=False)
class TensixMatmul:
    """:class:`MatmulSpec` as a workload: one superstep whose compute on each core of the grid is
    the core's bound (:attr:`MatmulPlan.core_cycles`), launched in ``launch_cycles`` (booked as sync)."""

    spec: MatmulSpec
    costs: MatmulCosts = field(default_factory=load_matmul_costs)
    name: str = "matmul"

    def _cores(self, machine: Machine) -> np.ndarray:
        cols = machine.fabric.cols or machine.tiles_per_chip
        return np.array([y * cols + x for y in range(self.spec.grid_y) for x in range(self.spec.grid_x)])

    def program(self, machine: Machine) -> Program:
        plan = plan_matmul(self.spec, machine, self.costs)
        compute = np.zeros(machine.total_tiles)
        compute[self._cores(machine)] = plan.core_cycles
        b = ProgramBuilder.for_machine(machine, name=f"matmul {self.spec.m}x{self.spec.k}x{self.spec.n}")
        b.superstep("matmul", compute)
        return replace(b.build(), sync_extra_cycles=np.array([self.costs.launch_cycles]))

    def memory(self, machine: Machine) -> MemoryLedger:
        plan = plan_matmul(self.spec, machine, self.costs)
        ledger = MemoryLedger(machine, remedy="use a larger grid, keep an operand in DRAM, or a smaller data format")
        ledger.add("exchange_buffers", plan.l1_bytes, self._cores(machine), label="matmul blocks (L1)")
        return ledger

    def book(self, result: SimResult) -> SimResult:
        return result

    def section(self, result: SimResult) -> Section:
        s = self.spec
        flops = 2.0 * s.m * s.k * s.n
        return Section(
            "matmul",
            (f"{s.m}x{s.k}x{s.n} {s.dtype} {s.math_fidelity} on {s.grid_x}x{s.grid_y} cores: "
             f"{result.total_s * 1e6:.2f} us, {flops / result.total_s / 1e12:.1f} TFLOPS",),
            (("m", s.m), ("k", s.k), ("n", s.n), ("tflops", flops / result.total_s / 1e12)),
        )  # fmt: skip


def time_matmul(spec: MatmulSpec, machine: Machine, costs: MatmulCosts | None = None):
    """(seconds, plan, result) of ``spec`` on ``machine``; refuses a plan that overflows L1."""
    w = TensixMatmul(spec, costs or load_matmul_costs())
    w.memory(machine).check()
    step = time_workload(w, machine)
    return step.result.total_s, plan_matmul(spec, machine, w.costs), step.result
