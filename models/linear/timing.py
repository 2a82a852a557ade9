"""Time layer schedules on a machine with the engine and account their SRAM like the vendor profiler.

A step is a list of ``(part, LayerSchedule)``; every phase becomes one superstep labelled
``"<part>/<phase>"`` (per-tile compute cycles, on-chip exchange bytes, sync within the chip) built
with :class:`~tilesim.program.ProgramBuilder` and timed by :func:`~tilesim.engine.events.simulate`. The
schedules are placed on chip 0 (the paper uses a single GC200).

Memory (:class:`~tilesim.machine.memory.MemoryLedger`, per tile):

* ``variables:activations`` — working data: the per-tile maximum over the step's schedules of their
  ``data_bytes`` (operand blocks, home chunks, outputs, partials, saved activations). Buffers of one
  layer pass are not live during another (Poplar's not-always-live variables), so the peak is a max,
  not a sum;
* ``variables:weights`` / ``variables:gradients`` / ``variables:optimizer`` — parameters, their
  gradients and the SGD momentum, each ``params`` words spread evenly over the tiles (training only; the
  weights are then counted twice, here and as the schedules' operand home chunks — an upper bound kept
  so that earlier training figures do not move);
* ``vertex_state``, ``exchange_code``, ``control_code``, ``vertex_code`` —
  :func:`~tilesim.models.linear.planner.overhead_breakdown` summed over **every** phase of the step: these
  are always-live, so they grow with the number of compute sets, vertices and exchange programs
  (paper Observation 3; constants in ``ipu-hardware.md`` §3.3 and :class:`OverheadConstants`).

``fits`` = no tile above ``sram_bytes`` (``ledger.check(mode="report")``).

The superstep constants come from the machine (sync, exchange fixed cycles and bytes per cycle,
supervisor overhead per vertex) so that the planner's objective and the engine agree: on ``gc200``
the simulated cycles equal :func:`~tilesim.models.linear.planner.phases_cycles` of the same phases.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.machine.description import Machine, load_machine
from tilesim.models.linear.benchpattern import bench_block_count, benchmark_layout
from tilesim.models.linear.blocksparse import SUPPORTED_BLOCKS
from tilesim.models.linear.layers import block_count, is_power_of_two, pixelfly_layout, random_block_layout
from tilesim.models.linear.lowering import (
    LOWERINGS,
    POPTORCH_KINDS,
    PoplibsSliceCosts,
    PoplibsVertexCosts,
    poplibs_costs,
    poptorch_common_parts,
    poptorch_layer,
)
from tilesim.models.linear.names import BLOCK_PATTERNS, LAYER_KINDS, SHL_DENSE_ALIASES, SPARSE_KINDS
from tilesim.models.linear.phases import PRECISION_BYTES, OverheadConstants, SuperstepCosts, require_precision
from tilesim.models.linear.planner import (
    DEFAULT_MEMORY_PROPORTION,
    PlanTarget,
    _check_proportion,
    explain_plan,
)
from tilesim.models.linear.schedules import (
    block_sparse_schedules,
    butterfly_schedule,
    dense_schedule,
    dynamic_sparse_schedules,
    lowrank_schedule,
    pixelfly_schedule,
)
from tilesim.models.linear.shl import PIXELFLY_SHL, SHL_METHODS, shl_model
from tilesim.models.linear.steps import (
    butterfly_backward_schedule,
    circulant_schedules,
    dense_backward_schedule,
    elementwise_schedule,
    fastfood_schedules,
    lowrank_backward_schedule,
    pixelfly_backward_schedule,
    sgd_update_schedule,
)
from tilesim.models.linear.workload import LinearStep, build_ledger, build_program
from tilesim.workload import time_workload

__all__ = [
    "LAYER_KINDS",
    "MatmulOptions",
    "matmul_target",
    "BlockSparseConfig",
    "BLOCK_PATTERNS",
    "StepTiming",
    "LOWERINGS",
    "machine_costs",
    "step_costs",
    "build_program",
    "build_ledger",
    "time_parts",
    "layer_parts",
    "layer_params",
    "time_layer",
    "time_shl",
    "explain_step",
]


@dataclass(frozen=True)
class MatmulOptions:
    """Options of the planned dense matmuls, PopLibs' names in brackets: ``memory_proportion``
    (availableMemoryProportion, default 0.6, bounds temporary bytes per tile) and ``partials_precision``
    (partialsType, default fp32); ``operands_in_place``: how the caller made the operands — True: both created
    in the plan's layout (``createMatMulInputLHS``/``RHS``), as a benchmark of the matmul alone makes them;
    False (default): the input comes from the previous op of a network, in flat chunks. What the library and
    the chip decide is not an option (:func:`matmul_target`).
    See :func:`~tilesim.models.linear.planner.plan_matmul`."""

    memory_proportion: float = DEFAULT_MEMORY_PROPORTION
    partials_precision: str = "fp32"
    operands_in_place: bool = False

    def __post_init__(self):
        _check_proportion(self.memory_proportion)
        require_precision("partials_precision", self.partials_precision)


@dataclass(frozen=True)
class BlockSparseConfig:
    """A static block-sparse ``n x n`` layer: ``density`` of non-zero ``block x block`` blocks at random
    positions. ``pattern`` (:data:`BLOCK_PATTERNS`): ``"random"`` draws them from ``seed``
    (:func:`~tilesim.models.linear.layers.random_block_layout`); ``"matmul_bench"`` is the very pattern the
    PopSparse paper's benchmark measured (:func:`~tilesim.models.linear.benchpattern.benchmark_layout`:
    ``createProblem``'s seed 123, ``seed`` unused). The dynamic layer is planned from the density alone."""

    density: float = 1.0 / 16
    block: int = 16
    seed: int = 0
    pattern: str = "random"

    def __post_init__(self):
        require(
            self.block in SUPPORTED_BLOCKS,
            "block",
            self.block,
            f"must be one of {SUPPORTED_BLOCKS}",
            "PopSparse's codelets (static and dynamic) exist for element-wise (1) and 4x4, 8x8 and 16x16 blocks",
        )
        require(
            isinstance(self.density, (int, float)) and 0.0 < self.density <= 1.0,
            "density",
            self.density,
            "must be in (0, 1]",
            "density 1/16 keeps one block in sixteen",
        )
        require(
            self.pattern in BLOCK_PATTERNS,
            "pattern",
            self.pattern,
            f"must be one of {', '.join(BLOCK_PATTERNS)}",
            "matmul_bench is the PopSparse benchmark's own pattern",
        )

    def layout(self, n: int) -> np.ndarray:
        """The ``n x n`` layer's block mask (read-only; the last few are kept: a sweep over batches plans the
        same layout many times, and drawing a 4096-wide element-wise one takes ~25 ms)."""
        return _layout(n, self.block, self.density, self.seed, self.pattern)

    def nonzero_blocks(self, n: int) -> int:
        """The non-zero blocks of :meth:`layout` (``max(1, round(density · blocks))`` for ``"random"``, the
        benchmark's float32 ``ceil(density · blocks)`` for ``"matmul_bench"``), without drawing it."""
        blocks = (n // self.block) ** 2
        return (
            bench_block_count(blocks, self.density)
            if self.pattern == "matmul_bench"
            else block_count(blocks, self.density)
        )


@lru_cache(maxsize=4)
def _layout(n: int, block: int, density: float, seed: int, pattern: str = "random") -> np.ndarray:
    if pattern == "matmul_bench":
        mask = benchmark_layout(n, n, block, density)
    else:
        mask = random_block_layout(n, n, block, density, seed)
    mask.setflags(write=False)
    return mask


def machine_costs(machine: Machine) -> SuperstepCosts:
    """The superstep constants of ``machine`` (vector path: 64-bit SIMD, ``SuperstepCosts`` default)."""
    c = machine.chip
    return SuperstepCosts(
        exchange_bytes_per_cycle=float(c.exchange_bytes_per_cycle),
        exchange_fixed_cycles=float(c.exchange_fixed_cycles),
        sync_cycles=float(c.sync_cycles),
        vector_fixed_cycles=float(c.supervisor_overhead_cycles),
    )


def _flops(machine: Machine, precision: str) -> float:
    return float(machine.chip.fp16_flops_per_cycle if precision == "fp16" else machine.chip.fp32_flops_per_cycle)


def matmul_target(
    machine: Machine,
    precision: str,
    costs: SuperstepCosts,
    overheads: OverheadConstants = OverheadConstants(),
    matmul: MatmulOptions = MatmulOptions(),
) -> PlanTarget:
    """The one :class:`~tilesim.models.linear.planner.PlanTarget` of a planned dense matmul on one chip of
    ``machine`` (every layer, lowering and workload of :mod:`tilesim.models.linear` plans with it): the chip's
    tiles, SRAM, AMP rate at ``precision`` and workers per tile (PopLibs' AMP, reduce and cast vertex
    estimates), its ``tiles_per_supertile`` as the tiles sharing an exchange bus (a broadcast input is received
    by both tiles of a supertile when ``P_n`` fills them, as PopLibs lays out its output-channel splits), the
    superstep ``costs``, memory ``overheads`` and the caller's ``matmul`` options."""
    return PlanTarget(
        tiles=machine.tiles_per_chip,
        sram_bytes=machine.chip.sram_bytes,
        flops_per_cycle=_flops(machine, precision),
        precision=precision,
        partials_precision=matmul.partials_precision,
        costs=costs,
        overheads=overheads,
        memory_proportion=matmul.memory_proportion,
        workers=machine.chip.workers_per_tile,
        operands_in_place=matmul.operands_in_place,
        exchange_bus_tiles=machine.chip.tiles_per_supertile,
    )


@dataclass(frozen=True)
class StepTiming:
    """Simulated time and memory of a step. ``part_s``: seconds per part (forward, backward, ...);
    ``schedules``: the ``(part, LayerSchedule)`` pairs that were timed (their ``parts`` hold the plans)."""

    name: str
    machine: str
    step_s: float
    host_s: float
    part_s: dict
    compute_sets: int
    params: int
    max_tile_bytes: int
    fits: bool
    overflow_tiles: int
    memory_by_category: dict
    breakdown_s: dict
    result: object
    ledger: object
    schedules: tuple = ()

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "machine": self.machine,
            "params": self.params,
            "step_s": self.step_s,
            "host_input_s": self.host_s,
            "part_s": self.part_s,
            "compute_sets": self.compute_sets,
            "max_tile_bytes": self.max_tile_bytes,
            "fits": self.fits,
            "overflow_tiles": self.overflow_tiles,
            "memory_by_category_bytes": self.memory_by_category,
            "breakdown_s": self.breakdown_s,
        }


def time_parts(
    parts,
    machine: Machine,
    name: str = "step",
    params: int = 0,
    precision: str = "fp32",
    host_bytes: float = 0.0,
    overheads: OverheadConstants = OverheadConstants(),
    training: bool = True,
) -> StepTiming:
    """Simulate ``parts`` (list of ``(part, LayerSchedule)``) and account their memory
    (``training=False``: no parameter gradients or momentum in the ledger)."""
    require(len(parts) >= 1, "parts", len(parts), "must hold at least one schedule", "")
    step = LinearStep(tuple(parts), name, params, precision, host_bytes, overheads, training)
    res = time_workload(step, machine).result
    ledger = step.memory(machine)
    over = ledger.check(mode="report")
    by = res.by_label()
    host_s = by.get("host-input", {"time_s": 0.0})["time_s"]
    part_s = {}
    for lab, d in by.items():
        if lab != "host-input":
            key = lab.split("/")[0]
            part_s[key] = part_s.get(key, 0.0) + d["time_s"]
    used = ledger.per_tile()
    mt = int(used.argmax())
    device = np.asarray([res.labels[i] != "host-input" for i in res.label_id], bool)
    bd = {k: v for k, v in res.breakdown_s(device).items() if v}  # the device step: adds up to step_s
    return StepTiming(
        name,
        machine.name,
        res.total_s - host_s,
        host_s,
        part_s,
        sum(len(s.phases) for _, s in parts),
        int(params),
        int(used[mt]),
        not over.size,
        int(over.size),
        ledger.by_category(mt),
        bd,
        res,
        ledger,
        tuple(parts),
    )


def layer_params(
    kind: str, n: int, rank: int = 1, pixelfly: dict | None = None, block_sparse: BlockSparseConfig | None = None
) -> int:
    """Parameter count of one ``n x n`` layer with bias (the :mod:`tilesim.models.linear.layers` arrays)."""
    require(kind in LAYER_KINDS, "kind", kind, f"must be one of {', '.join(LAYER_KINDS)}", "")
    if kind in SPARSE_KINDS:  # a dynamic layer holds as many blocks as a static one of its density
        cfg = block_sparse or BlockSparseConfig()
        require(
            n % cfg.block == 0,
            "n",
            n,
            f"must be a multiple of block = {cfg.block}",
            "pick a block that divides the width",
        )
        return cfg.nonzero_blocks(n) * cfg.block**2 + n
    if kind == "dense":
        return n * n + n
    if kind == "low-rank":
        return 2 * n * rank + n
    if kind == "butterfly":
        return 4 * (n - 1) + n
    if kind == "fastfood":
        return 4 * n
    if kind == "circulant":
        return 2 * n

    cfg = dict(PIXELFLY_SHL if pixelfly is None else pixelfly)
    bs = cfg["block_size"]
    return int(pixelfly_layout(n, n, bs, cfg["butterfly_size"]).sum()) * bs * bs + 2 * n * cfg["lowrank_size"] + n


def _require_lowering(lowering: str) -> None:
    require(
        lowering in LOWERINGS,
        "lowering",
        lowering,
        f"must be one of {', '.join(LOWERINGS)}",
        "'fused': one compute set per factor/stage (hand-written Poplar); 'poptorch': one program per "
        "PyTorch op, as the paper ran it (tilesim.models.linear.lowering)",
    )


def step_costs(machine: Machine, lowering: str = "fused") -> SuperstepCosts:
    """Superstep constants of ``machine`` for ``lowering`` (``"poptorch"``: PopLibs vector vertices,
    :func:`~tilesim.models.linear.lowering.poplibs_costs`)."""
    _require_lowering(lowering)
    c = machine_costs(machine)
    return poplibs_costs(c, PoplibsVertexCosts.for_machine(machine)) if lowering == "poptorch" else c


def _poplibs_vertices(machine: Machine) -> dict:
    """The PopLibs vertex-cost records of ``machine`` (supervisor overhead and workers from its chip)."""
    return dict(vertex=PoplibsVertexCosts.for_machine(machine), slice_costs=PoplibsSliceCosts.for_machine(machine))


def layer_parts(
    kind: str,
    n: int,
    batch: int,
    machine: Machine,
    *,
    precision: str = "fp32",
    rank: int = 1,
    pixelfly: dict | None = None,
    n_out: int | None = None,
    backward: bool = True,
    overheads: OverheadConstants = OverheadConstants(),
    lowering: str = "fused",
    input_grad: bool = True,
    matmul: MatmulOptions = MatmulOptions(),
    block_sparse: BlockSparseConfig | None = None,
) -> tuple:
    """``(forward, backward)`` schedules of one layer of ``kind`` (``n_out`` only for dense/low-rank);
    ``backward=False`` gives ``(forward, None)``. ``lowering="poptorch"`` lowers dense, low-rank,
    butterfly, fastfood and pixelfly op by op (:mod:`tilesim.models.linear.lowering`); circulant keeps its
    fused schedule with PopLibs vector costs. ``input_grad=False`` (op-by-op kinds only) drops
    the input-gradient ops, as autograd does for a first layer. ``matmul``: planner options of the
    dense matmuls (fused lowering); ``block_sparse``: density, block and seed of ``"block-sparse"``
    (:mod:`tilesim.models.linear.blocksparse`) and density and block of ``"dynamic-sparse"``
    (:mod:`tilesim.models.linear.dynamicsparse`), fused lowering only."""
    _check_layer(kind, n, batch)
    n_out = n if n_out is None else n_out
    check_layer_size(kind, max(n, n_out), batch, machine, precision, pixelfly, block_sparse)
    costs = step_costs(machine, lowering)
    tiles, sram = machine.tiles_per_chip, machine.chip.sram_bytes
    if lowering == "poptorch" and kind in POPTORCH_KINDS:
        return _poptorch_parts(
            kind, n, batch, machine, precision, costs, overheads, n_out, rank, backward, input_grad, pixelfly
        )
    base = PlanTarget(tiles=tiles, sram_bytes=sram, precision=precision, costs=costs, overheads=overheads)
    amp = matmul_target(machine, precision, costs, overheads)
    if kind == "dense":
        mm = matmul_target(machine, precision, costs, overheads, matmul)
        return (
            dense_schedule(n, n_out, batch, mm),
            dense_backward_schedule(n, n_out, batch, mm) if backward else None,
        )
    if kind in SPARSE_KINDS:
        return _block_sparse_parts(
            kind, n, batch, machine, precision, costs, overheads, lowering, matmul, block_sparse, backward
        )
    if kind == "low-rank":
        return (
            lowrank_schedule(n, n_out, rank, batch, amp),
            lowrank_backward_schedule(n, n_out, rank, batch, amp) if backward else None,
        )
    if kind == "butterfly":
        fwd = butterfly_schedule(n, batch, base)
        return fwd, butterfly_backward_schedule(fwd, n, batch, costs=costs) if backward else None
    if kind == "fastfood":
        pair = fastfood_schedules(n, batch, base)
        return pair if backward else (pair[0], None)
    if kind == "circulant":
        pair = circulant_schedules(n, batch, base)
        return pair if backward else (pair[0], None)
    return _pixelfly_parts(n, batch, machine, pixelfly, amp, backward)


def _check_layer(kind: str, n: int, batch: int) -> None:
    """Raise :class:`ConfigError` unless ``kind`` is a layer kind and ``n``, ``batch`` are positive integers."""
    require(
        kind in LAYER_KINDS,
        "kind",
        kind,
        f"must be one of {', '.join(LAYER_KINDS)}",
        "dense is the baseline; the others are Table 4's structured layers",
    )
    for fname, v in (("n", n), ("batch", batch)):
        require(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1,
            fname,
            v,
            "must be a positive integer",
            "",
        )


def _min_params(kind: str, n: int, pixelfly: dict | None, block_sparse: BlockSparseConfig | None) -> float:
    """Parameters of an ``n x n`` layer of ``kind``, at least, without building its layout (sizes only):
    ``n^2`` dense, ``density n^2`` sparse, the flat butterfly's ``(1 + log2 s) / s`` share of ``n^2``
    pixelfly (:func:`~tilesim.models.linear.layers.pixelfly_layout`), the bias for the others."""
    if kind == "dense":
        return float(n) * n
    if kind in SPARSE_KINDS:
        return (block_sparse or BlockSparseConfig()).density * float(n) * n
    if kind == "pixelfly":
        s = max(2, int(dict(PIXELFLY_SHL if pixelfly is None else pixelfly)["butterfly_size"]))
        return s.bit_length() / s * float(n) * n  # 1 + log2 s ones per row of the s x s flat butterfly
    return float(n)


def check_layer_size(
    kind: str,
    n: int,
    batch: int,
    machine: Machine,
    precision: str = "fp32",
    pixelfly: dict | None = None,
    block_sparse: BlockSparseConfig | None = None,
) -> None:
    """Refuse, before anything is planned, a layer whose weights and in/out activations (at least
    :func:`_min_params` + ``2 batch n`` values) exceed the SRAM of all the chip's tiles (no plan can fit
    it), or whose block mask (sparse kinds, pixelfly: ``(n / block)^2``) exceeds this host's memory
    limit (:func:`tilesim.running.limits.check_memory`)."""
    from tilesim.running.limits import check_memory  # loaded only when a layer is timed (start-up time)

    eb = PRECISION_BYTES.get(precision, 4)
    need = (_min_params(kind, n, pixelfly, block_sparse) + 2.0 * batch * n) * eb
    have = float(machine.tiles_per_chip) * machine.chip.sram_bytes
    if need > have:
        raise ConfigError(
            config_message(
                "n",
                n,
                f"a {kind} layer of batch {batch} holds at least {need:,.0f} B of {precision} weights and activations, "
                f"more than the {have:,.0f} B of SRAM on {machine.name}'s {machine.tiles_per_chip:,} tiles",
                "give a smaller n (or batch), fp16, or a machine with more SRAM per chip",
            )
        )
    if kind in SPARSE_KINDS or kind == "pixelfly":
        cfg = dict(PIXELFLY_SHL if pixelfly is None else pixelfly)
        block = (block_sparse or BlockSparseConfig()).block if kind in SPARSE_KINDS else int(cfg["block_size"])
        mask = f"n = {n} ({kind} block mask of ({n} / {block})^2 blocks)"
        check_memory(mask, 8.0 * (n / block) ** 2, "give a smaller n")


def _poptorch_parts(kind, n, batch, machine, precision, costs, overheads, n_out, rank, backward, input_grad, pixelfly):
    """:func:`layer_parts` of the op-by-op (``lowering="poptorch"``) kinds; butterfly, fastfood and pixelfly
    need a power-of-two ``n >= 2`` (else :class:`ConfigError`)."""
    if kind in ("butterfly", "fastfood", "pixelfly"):
        require(
            is_power_of_two(n) and n >= 2,
            "n",
            n,
            "must be a power of two >= 2",
            f"{kind} needs n = 2^L; pad the layer width",
        )
    kw = dict(target=matmul_target(machine, precision, costs, overheads), **_poplibs_vertices(machine))
    return poptorch_layer(
        kind, n, batch, kw, n_out=n_out, rank=rank, backward=backward, input_grad=input_grad, pixelfly=pixelfly
    )


def _block_sparse_parts(
    kind, n, batch, machine, precision, costs, overheads, lowering, matmul, block_sparse, backward
):  # fmt: skip
    """:func:`layer_parts` of a ``"block-sparse"`` (static) or ``"dynamic-sparse"`` layer (fused lowering
    only, else :class:`ConfigError`)."""
    require(
        lowering == "fused",
        "lowering",
        lowering,
        f"{kind} has the fused (PopSparse) lowering only",
        "use lowering='fused'",
    )
    cfg = block_sparse or BlockSparseConfig()
    target = PlanTarget(
        tiles=machine.tiles_per_chip,
        sram_bytes=machine.chip.sram_bytes,
        precision=precision,
        partials_precision=matmul.partials_precision,
        costs=costs,
        overheads=overheads,
        memory_proportion=matmul.memory_proportion,
    )
    common = dict(block=cfg.block, workers=machine.chip.workers_per_tile, backward=backward)
    if kind == "dynamic-sparse":
        return dynamic_sparse_schedules(n, batch, target, density=cfg.density, **common)
    return block_sparse_schedules(cfg.layout(n), batch, target, tile_grain=machine.chip.tiles_per_supertile, **common)


def _pixelfly_parts(n, batch, machine, pixelfly, amp: PlanTarget, backward):
    """:func:`layer_parts` of a fused pixelfly layer (``pixelfly`` None: the SHL configuration)."""
    cfg = dict(PIXELFLY_SHL if pixelfly is None else pixelfly)
    sizes = (cfg["block_size"], cfg["butterfly_size"], cfg["lowrank_size"])
    workers = machine.chip.workers_per_tile
    fwd = pixelfly_schedule(n, batch, *sizes, amp, workers=workers)
    if not backward:
        return fwd, None
    return fwd, pixelfly_backward_schedule(fwd, n, batch, *sizes, amp, workers=workers)


def explain_step(t: StepTiming, machine, lowering: str = "fused") -> str:
    """:func:`~tilesim.models.linear.planner.explain_plan` of every planned matmul of a timed step, by part."""
    m = _machine(machine)
    costs = step_costs(m, lowering)
    out = []
    for part, sched in t.schedules:
        for plan in sched.parts:
            if hasattr(plan, "temp_bytes"):
                out.append(f"[{part}] " + explain_plan(plan, costs, m.chip.sram_bytes))
    return "\n".join(out) if out else "(no planned matmul in this step)"


def _machine(machine) -> Machine:
    return machine if isinstance(machine, Machine) else load_machine(machine)


def versus_dense(sparse: StepTiming, dense: StepTiming, density: float) -> list[str]:
    """Why a sparse layer is faster or slower than the dense layer of the same shape: the two step
    times, each phase side by side, the phase that carries most of the difference, the useful
    multiply-add rate of the sparse compute against the dense one (the dense compute scaled by
    ``density`` over the sparse compute: 1.0 means the sparse codelets are as efficient per useful
    multiply-add as the dense AMP path), and the fullest tile of each."""
    s, d = sparse.step_s, dense.step_s
    verdict = f"{d / s:.2f}x faster" if s <= d else f"{s / d:.2f}x slower"
    lines = [
        f"versus the dense layer of the same shape: sparse {s * 1e6:,.1f} us, dense {d * 1e6:,.1f} us: sparse {verdict}"
    ]
    delta = {}
    for phase in ("compute", "exchange", "sync"):
        a, b = sparse.breakdown_s.get(phase, 0.0), dense.breakdown_s.get(phase, 0.0)
        delta[phase] = a - b
        lines.append(f"  {phase:<9} sparse {a * 1e6:9,.1f} us   dense {b * 1e6:9,.1f} us")
    main = max(delta, key=lambda k: abs(delta[k]))
    lines.append(f"  the difference is mostly {main} ({delta[main] * 1e6:+,.1f} us of {(s - d) * 1e6:+,.1f} us)")
    sc, dc = sparse.breakdown_s.get("compute", 0.0), dense.breakdown_s.get("compute", 0.0)
    if sc > 0 and dc > 0:
        eff = density * dc / sc
        lines.append(
            f"  per useful multiply-add the sparse compute runs at {eff:.2f}x the dense rate; doing {density:.4g} "
            f"of the work it takes {sc / dc:.3g}x the dense compute time (it wins compute whenever that rate "
            "exceeds the density)"
        )
    lines.append(f"  fullest tile: sparse {sparse.max_tile_bytes:,} B, dense {dense.max_tile_bytes:,} B")
    return lines


def time_layer(
    kind: str,
    n: int,
    batch: int = 50,
    machine="gc200",
    *,
    precision: str = "fp32",
    backward: bool = True,
    lowering: str = "fused",
    host_io: bool = False,
    **kw,
) -> StepTiming:
    """Forward (and backward) of one ``n x n`` layer; ``part_s`` has ``forward`` and ``backward``.
    ``backward=False`` is inference: no gradients or momentum, and the weights are counted once, as the
    schedules' operand home chunks (:func:`build_ledger`).
    ``lowering``: ``"fused"`` (default) or ``"poptorch"`` (:func:`layer_parts`). ``host_io=True``
    also simulates the host transfer of the input and output batches (``2 · batch · n`` words, in
    ``host_s``, not in ``step_s``), which a PopTorch call includes."""
    m = _machine(machine)
    fwd, bwd = layer_parts(kind, n, batch, m, precision=precision, backward=backward, lowering=lowering, **kw)
    parts = [("forward", fwd)] + ([("backward", bwd)] if backward else [])
    host = float(2 * batch * n * PRECISION_BYTES.get(precision, 4)) if host_io else 0.0
    return time_parts(
        parts,
        m,
        f"{kind} n={n} batch={batch} ({lowering})",
        layer_params(kind, n, kw.get("rank", 1), kw.get("pixelfly"), kw.get("block_sparse")),
        precision,
        host_bytes=host,
        training=backward,
    )


_HIDDEN_KIND = {
    "baseline": "dense",
    "butterfly": "butterfly",
    "fastfood": "fastfood",
    "circulant": "circulant",
    "low-rank": "low-rank",
    "pixelfly": "pixelfly",
}


def time_shl(
    method: str,
    batch: int = 50,
    machine="gc200",
    *,
    precision: str = "fp32",
    n: int = 1024,
    classes: int = 10,
    lowering: str = "fused",
) -> StepTiming:
    """One SGD training step of the paper's single-hidden-layer model (forward, backward, update).

    Parts: ``hidden-fwd``, ``act-fwd`` (bias + ReLU), ``classifier-fwd``, ``loss`` (softmax
    cross-entropy), ``classifier-bwd``, ``act-bwd`` (ReLU gradient), ``hidden-bwd``, ``update``;
    ``host_s`` is the separate host-link time of the input batch (``batch · n`` words + labels).
    ``lowering="poptorch"``: every part lowered op by op as PopTorch runs the paper's PyTorch code
    (:mod:`tilesim.models.linear.lowering`; same part names, SGD as two ops per parameter tensor).
    ``method="dense"`` is the dense hidden layer, the paper's ``"baseline"`` (both names are accepted;
    ``tilesim layer --kind dense`` uses the same word).
    """
    method = SHL_DENSE_ALIASES.get(method, method)
    require(
        method in SHL_METHODS, "method", method, f"must be one of {', '.join(SHL_METHODS)}", "pick a Table 4 method"
    )
    _require_lowering(lowering)
    m = _machine(machine)
    if lowering == "poptorch":
        return _time_shl_poptorch(method, batch, m, precision, n, classes)
    costs = machine_costs(m)
    tiles = m.tiles_per_chip
    eb = PRECISION_BYTES.get(precision, 4)
    hf, hb = layer_parts(_HIDDEN_KIND[method], n, batch, m, precision=precision)
    cf, cb = layer_parts("dense", n, batch, m, precision=precision, n_out=classes)
    ew = dict(tiles=tiles, precision=precision, costs=costs)
    act_ops = 3 if method == "butterfly" else 2  # (wrapper bias) + bias + ReLU
    parts = [
        ("hidden-fwd", hf),
        ("act-fwd", elementwise_schedule("bias-relu", batch * n, ops_per_element=act_ops, inputs=1, **ew)),
        ("classifier-fwd", cf),
        ("loss", elementwise_schedule("softmax-xent", batch * classes, ops_per_element=6, inputs=1, **ew)),
        ("classifier-bwd", cb),
        ("act-bwd", elementwise_schedule("relu-grad", batch * n, ops_per_element=1, inputs=2, **ew)),
        ("hidden-bwd", hb),
    ]
    params = (
        shl_model(method, n, classes).n_params
        if n * n <= 1 << 22
        else layer_params(_HIDDEN_KIND[method], n) + n * classes + classes + (n if method == "butterfly" else 0)
    )
    parts.append(("update", sgd_update_schedule(params, **ew)))
    return time_parts(
        parts, m, f"shl {method} batch={batch}", params, precision, host_bytes=float(batch * n * eb + batch * 4)
    )


def _shl_param_tensors(method: str, n: int, classes: int) -> tuple:
    if n * n <= 1 << 22:
        return tuple(int(p.size) for p in shl_model(method, n, classes).params)
    hidden = layer_params(_HIDDEN_KIND[method], n) + (n if method == "butterfly" else 0)
    return (hidden, n * classes, classes)


def _time_shl_poptorch(method, batch, m, precision, n, classes) -> StepTiming:
    kw = dict(target=matmul_target(m, precision, step_costs(m, "poptorch")), **_poplibs_vertices(m))
    hf, hb = layer_parts(_HIDDEN_KIND[method], n, batch, m, precision=precision, lowering="poptorch", input_grad=False)
    tensors = _shl_param_tensors(method, n, classes)
    common = poptorch_common_parts(n, batch, classes, tensors, kw)
    parts = [
        ("hidden-fwd", hf),
        ("act-fwd", common["act-fwd"]),
        ("classifier-fwd", common["classifier-fwd"]),
        ("loss", common["loss"]),
        ("classifier-bwd", common["classifier-bwd"]),
        ("act-bwd", common["act-bwd"]),
        ("hidden-bwd", hb),
        ("update", common["update"]),
    ]
    eb = PRECISION_BYTES.get(precision, 4)
    return time_parts(
        parts,
        m,
        f"shl {method} batch={batch} (poptorch)",
        int(sum(tensors)),
        precision,
        host_bytes=float(batch * n * eb + batch * 4),
    )
