"""The 3×3 Gaussian-blur stencil as a BSP program: per-tile work, halo traffic, memory, timing.

One iteration is two compute sets (``inToOut``, ``outToIn``), each preceded by a halo exchange
(Louw & McIntosh-Smith's ``LowLevelStencil.cpp``). Per compute set the program has:

* ``exchange``: tile work since the last exchange (the previous set's ``post`` copies and stencil
  compute, then this set's ``pre`` copies), a sync of each IPU, the on-chip halo exchange;
* ``globExchange`` (more than one IPU): a sync of all IPUs and the halo rows/columns that cross
  IPU-Links (one flow per IPU pair, routed over the machine's ladder of C2 cards);

and a final ``tail`` superstep holds the last set's ``post`` copies and compute. Assumption
(named): the internal and the global exchange are separate phases each behind its own sync, as the
profile lists them (``exchange``, ``globExchange``); the engine overlaps neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import Machine
from tilesim.machine.memory import MemoryLedger
from tilesim.models.stencil.costs import COPY, Codelet, CopyCosts, codelet
from tilesim.models.stencil.geometry import HaloCounts, halo_counts
from tilesim.models.stencil.partition import Blocks, partition_image
from tilesim.outputs.records import SimResult
from tilesim.program import Program, ProgramBuilder
from tilesim.running.limits import check_memory
from tilesim.workload import Section, time_workload

__all__ = [
    "StencilConfig",
    "StencilPlan",
    "StencilRun",
    "plan_stencil",
    "build_program",
    "stencil_ledger",
    "run_stencil",
    "StencilStep",
    "blur_image",
    "parse_pair",
    "PHASE_NAMES",
]

PHASE_NAMES = ("sync", "exchange", "globExchange", "pre", "post", "compute")
VERTEX_STATE_BYTES = 48  # 10 field pointers (4 B) + width + height (4 B each), per vertex


@dataclass(frozen=True)
class StencilConfig:
    """One run: image size, data type, IPUs, the minimum partition per tile and iterations."""

    height: int
    width: int
    dtype: str = "float"
    ipus: int = 1
    min_rows: int = 6
    min_cols: int = 6
    iterations: int = 100

    def __post_init__(self):
        codelet(self.dtype)
        for name, v, lim in (
            ("image height", self.height, 3),
            ("image width", self.width, 3),
            ("--ipus", self.ipus, 1),
            ("min rows per tile", self.min_rows, 1),
            ("min cols per tile", self.min_cols, 1),
            ("--iterations", self.iterations, 1),
        ):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lim:
                raise ConfigError(config_message(name, v, f"must be an integer >= {lim}", f"e.g. {name} {max(lim, 1)}"))
        if self.iterations > 100000:
            raise ConfigError(
                config_message(
                    "--iterations",
                    self.iterations,
                    "must be <= 100000",
                    "time per iteration does not depend on the count",
                )
            )


@dataclass(frozen=True, eq=False)
class StencilPlan:
    """Per-tile cycles and bytes of one compute set, for ``config`` on ``machine``."""

    config: StencilConfig
    machine_name: str
    codelet: Codelet
    blocks: Blocks
    counts: HaloCounts
    compute_cycles: np.ndarray  # [N] 6 x slowest worker
    pre_cycles: np.ndarray  # [N]
    post_cycles: np.ndarray  # [N]
    exchange_in_bytes: np.ndarray  # [N] on-chip halo bytes received
    exchange_out_bytes: np.ndarray  # [N]
    flows: tuple  # ((src_ipu, dst_ipu, bytes), ...)
    copy: CopyCosts = field(default=COPY)

    @property
    def used(self) -> np.ndarray:
        return self.counts.tile_pixels > 0

    def tile_mean(self, arr) -> float:
        return float(np.asarray(arr)[self.used].mean())


def parse_pair(text: str, field: str, sep: str = "x") -> tuple[int, int]:
    """``"2200x1122"`` → (2200, 1122); :class:`ConfigError` naming ``field`` otherwise."""
    parts = str(text).lower().split(sep)
    try:
        a, b = (int(p) for p in parts)
    except ValueError:
        raise ConfigError(
            config_message(field, text, "must be two integers", f"write it as WIDTH{sep}HEIGHT, e.g. {field} 6{sep}6")
        ) from None
    if a < 1 or b < 1:
        raise ConfigError(config_message(field, text, "both numbers must be >= 1", f"e.g. {field} 6{sep}6"))
    return a, b


def plan_stencil(config: StencilConfig, machine: Machine, copy: CopyCosts = COPY) -> StencilPlan:
    """Partition the image as the authors do and count every tile's work for one compute set.

    Raises
    ------
    ConfigError
        ``config.ipus`` differs from the machine's chip count, or the image does not split.
    """
    if config.ipus != machine.chips:
        raise ConfigError(
            config_message(
                "--ipus",
                config.ipus,
                f"machine {machine.name} has {machine.chips} chips",
                "pass the machine with --chips matching --ipus",
            )
        )
    cod = codelet(config.dtype)
    T = machine.tiles_per_chip
    blocks = partition_image(
        config.height, config.width, config.ipus, T, config.min_rows, config.min_cols, machine.chip.workers_per_tile
    )
    c = halo_counts(blocks, T)
    B = cod.bytes_per_pixel
    workers = machine.chip.workers_per_tile
    used = c.tile_pixels > 0
    compute = workers * cod.worker_cycles(c.max_worker_pixels)
    pre = used * (
        copy.pre_fixed_cycles
        + copy.pre_per_region_cycles * (c.tile_rows + c.local_halo_runs)
        + (c.tile_pixels + c.local_halo_px) * B / copy.bytes_per_cycle
    )
    post = used * (
        copy.post_fixed_cycles + copy.post_per_row_cycles * c.tile_rows + c.tile_pixels * B / copy.bytes_per_cycle
    )
    msg = machine.system.link_message_bytes
    flows = tuple((a, b, float(px * B + msg * c.flows_runs[(a, b)])) for (a, b), px in sorted(c.flows_px.items()))
    return StencilPlan(
        config=config,
        machine_name=machine.name,
        codelet=cod,
        blocks=blocks,
        counts=c,
        compute_cycles=compute,
        pre_cycles=pre,
        post_cycles=post,
        exchange_in_bytes=c.onchip_in_px * B,
        exchange_out_bytes=c.onchip_out_px * B,
        flows=flows,
        copy=copy,
    )


def build_program(plan: StencilPlan, machine: Machine) -> Program:
    """The BSP program of ``plan.config.iterations`` iterations (module docstring)."""

    cfg = plan.config
    sets = 2 * cfg.iterations
    per_tile_row = 4 * machine.total_tiles  # one float32 row of the program
    # compute rows (1 or 2 per set) and exchange rows (in + out), x3 for the engine's working copies
    check_memory(
        "--iterations",
        3.0 * sets * per_tile_row * (1 + (machine.chips > 1) + 2),
        "simulate fewer iterations: the time per iteration does not depend on the count",
    )
    b = ProgramBuilder.for_machine(machine, name=f"stencil {cfg.width}x{cfg.height} {cfg.dtype}")
    first = plan.pre_cycles
    steady = plan.post_cycles + plan.compute_cycles + plan.pre_cycles
    onchip = bool(plan.exchange_in_bytes.any() or plan.exchange_out_bytes.any())
    ex = dict(bytes_in=plan.exchange_in_bytes, bytes_out=plan.exchange_out_bytes) if onchip else {}
    for k in range(sets):
        b.superstep("exchange", first if k == 0 else steady, sync="chip", **ex)
        if machine.chips > 1:
            b.superstep("globExchange", 0.0, sync="all", flows=plan.flows)
    b.superstep("tail", plan.post_cycles + plan.compute_cycles, sync="chip")
    return b.build()


def stencil_ledger(plan: StencilPlan, machine: Machine) -> MemoryLedger:
    """SRAM per tile: both image buffers, received halos, vertex copies, vertex state, zeros."""
    c, B = plan.counts, plan.codelet.bytes_per_pixel
    led = MemoryLedger(machine, remedy="use more IPUs, a smaller minimum partition, or half4")
    tiles = np.flatnonzero(plan.used)
    px = c.tile_pixels[tiles]
    led.add("variables:state", px * B, tiles, "img (this tile's block)")
    led.add("variables:state", px * B, tiles, "tmpImg (this tile's block)")
    halo = (c.onchip_in_px + c.link_in_px)[tiles] * B
    led.add("exchange_buffers", halo, tiles, "received halos")
    led.add("variables:other", (px + c.local_halo_px[tiles]) * B, tiles, "contiguous vertex copies (pre/post)")
    nvert = np.bincount(plan.blocks.ipu * machine.tiles_per_chip + plan.blocks.tile, minlength=machine.total_tiles)[
        tiles
    ]
    led.add("vertex_state", 2 * nvert * VERTEX_STATE_BYTES, tiles, "2 compute sets x worker vertices")
    return led


@dataclass(frozen=True, eq=False)
class StencilStep:
    """The stencil's iterations under ``plan`` as a :class:`tilesim.workload.Workload`."""

    plan: StencilPlan
    name: str = "stencil"

    def program(self, machine: Machine) -> Program:
        """The iterations' BSP program (:func:`build_program`)."""
        return build_program(self.plan, machine)

    def memory(self, machine: Machine) -> MemoryLedger:
        """Per-tile SRAM (:func:`stencil_ledger`)."""
        return stencil_ledger(self.plan, machine)

    def book(self, result: SimResult) -> SimResult:
        """Nothing to book: every phase is a mechanism."""
        return result

    def section(self, result: SimResult) -> Section:
        """The image, its partition over tiles and the time per iteration."""
        cfg = self.plan.config
        us = result.total_s / cfg.iterations * 1e6
        return Section(
            title="3x3 stencil",
            lines=(
                f"image {cfg.width}x{cfg.height} {cfg.dtype} on {cfg.ipus} IPU(s), "
                f"{int(self.plan.used.sum())} tiles used: {us:.1f} us per iteration",
            ),
            data=(
                ("image", f"{cfg.width}x{cfg.height}"),
                ("tiles_used", int(self.plan.used.sum())),
                ("us_per_iteration", us),
                ("phase_cycles_per_superstep", profile_phases(self.plan, result)),
            ),
        )


@dataclass(frozen=True, eq=False)
class StencilRun:
    """A timed stencil run: seconds per iteration, the phase split per superstep (cycles)."""

    plan: StencilPlan
    program: Program
    result: object
    ledger: MemoryLedger
    us_per_iteration: float
    phases: dict  # {phase: cycles per superstep (half an iteration)}, profile-style

    def to_dict(self) -> dict:
        cfg = self.plan.config
        per_tile = self.ledger.per_tile()
        return {
            "workload": "stencil",
            "image": f"{cfg.width}x{cfg.height}",
            "dtype": cfg.dtype,
            "ipus": cfg.ipus,
            "min_partition": f"{cfg.min_rows}x{cfg.min_cols}",
            "iterations": cfg.iterations,
            "machine": self.plan.machine_name,
            "us_per_iteration": self.us_per_iteration,
            "phase_cycles_per_superstep": self.phases,
            "tiles_used": int(self.plan.used.sum()),
            "max_tile_bytes": int(per_tile.max()),
            "sram_bytes": self.ledger.budget,
            "fits": bool(per_tile.max() <= self.ledger.budget),
        }


def run_stencil(
    config: StencilConfig, machine: Machine, *, memory_check: str = "report", keep_timeline: bool = True
) -> StencilRun:
    """Plan, build and simulate; the phase split is per superstep like the profile's.

    ``sync``/``exchange``/``globExchange`` come from the simulated timeline (per label);
    ``pre``/``post``/``compute`` are tile averages of the plan (the profile's are tile averages).
    """
    plan = plan_stencil(config, machine)
    step = StencilStep(plan)
    ledger = step.memory(machine)
    ledger.check(memory_check)
    timed = time_workload(step, machine, keep_timeline=keep_timeline)
    program, result = timed.program, timed.result
    return StencilRun(
        plan=plan,
        program=program,
        result=result,
        ledger=ledger,
        us_per_iteration=result.total_s / config.iterations * 1e6,
        phases=profile_phases(plan, result),
    )


def profile_phases(plan: StencilPlan, result: SimResult) -> dict[str, float]:
    """Cycles per superstep (half an iteration) by the profile's phases: ``sync``/``exchange``/
    ``globExchange`` from the simulated timeline (per label); ``pre``/``post``/``compute`` tile
    averages of the plan (the profile's are tile averages)."""
    sets = 2 * plan.config.iterations
    lab = result.by_label()
    clock = result.clock_hz
    ex = lab["exchange"]["breakdown_s"]
    glob = lab.get("globExchange", {"breakdown_s": {"sync": 0.0, "links": 0.0, "exchange": 0.0}})["breakdown_s"]
    return {
        "sync": (ex["sync"] + glob["sync"]) * clock / sets,
        "exchange": ex["exchange"] * clock / sets,
        "globExchange": (glob["links"] + glob["exchange"]) * clock / sets,
        "pre": plan.tile_mean(plan.pre_cycles),
        "post": plan.tile_mean(plan.post_cycles),
        "compute": plan.tile_mean(plan.compute_cycles),
    }


def blur_image(image: np.ndarray, config: StencilConfig, tiles_per_ipu: int, workers: int = 6) -> np.ndarray:
    """Run the real blur: ``config.iterations`` iterations of the two compute sets, slice by slice
    as the authors' vertices do (``half4`` rounds to fp16 after every compute set)."""
    from tilesim.models.stencil.kernels import blur_slices  # Numba kernels load only when they run (start-up time)

    img = np.asarray(image, np.float32)
    if img.ndim != 3 or img.shape[2] != 4 or img.shape[:2] != (config.height, config.width):
        raise ConfigError(
            config_message(
                "image shape", img.shape, f"must be ({config.height}, {config.width}, 4)", "give an RGBA image"
            )
        )
    b = partition_image(
        config.height, config.width, config.ipus, tiles_per_ipu, config.min_rows, config.min_cols, workers
    )
    a = np.ascontiguousarray(img)
    t = np.empty_like(a)
    half = config.dtype == "half4"
    if half:
        a = a.astype(np.float16).astype(np.float32)
    for _ in range(config.iterations):
        for src, dst in ((a, t), (t, a)):
            blur_slices(src, dst, b.r0, b.r1, b.c0, b.c1)
            if half:
                dst[...] = dst.astype(np.float16)
    return a
