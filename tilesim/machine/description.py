"""Machine descriptions: a chip of tiles, its exchange fabric, and a system of chips.

A machine is read from TOML (a preset shipped in ``tilesim/presets`` or a user's file) into
frozen dataclasses that validate on construction. Every field carries its unit in its name.

Derived figures (``Machine.derived()``) reproduce the vendor's headline numbers, e.g. for
``gc200``: 1472 tiles, 940,572,672 B of SRAM (≈ 900 MB), 62.6 TFLOPS FP32, 320 GB/s of
IPU-Link bandwidth (claim B4 of ``seed-claims.md``).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, fields, replace
from importlib import resources
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.io import loads_toml, read_toml, regular_file

__all__ = ["Chip", "Fabric", "System", "Machine", "load_machine", "preset_names", "preset_text"]

FABRIC_KINDS = ["all-to-all", "mesh", "torus"]  # kinds with a model (tilesim.machine.fabric.register_fabric adds to it)
TOPOLOGIES = ("ladder", "line", "ring", "mesh", "torus")  # tilesim.machine.fabric.CHIP_LINKS
EXECUTIONS = ("bsp", "dataflow")  # tilesim.engine.events: syncs that wait for every member, or for the data only
VENDORS = ("", "graphcore", "tenstorrent", "cerebras")  # who makes the machine ("": not said); a workload may pick
# the software its programs are built with from it (its vendor's own stack)


def _example(field: str) -> str:
    """The fix for a bad machine field: the value a shipped preset uses (gc200; mesh-demo for mesh
    fields), and how to print a whole valid file."""
    section, _, name = field.partition(".")
    for preset in ("gc200", "mesh-demo"):
        value = loads_toml(preset_text(preset)).get(section, {}).get(name)
        if value is not None:
            return (
                f"e.g. {name} = {value!r} as in the {preset} preset "
                f"(tilesim machines {preset} --toml prints a valid file)"
            )
    return "see tilesim machines gc200 --toml for a valid file"


def _check_fields(cls, section: str, data: dict) -> dict:
    """Reject unknown and missing keys, and values of the wrong type, naming the field."""
    if not isinstance(data, dict):
        raise ConfigError(config_message(section, data, "must be a table", f"write it as a [{section}] table"))
    known = {f.name: f for f in fields(cls)}
    for key in data:
        if key not in known:
            raise ConfigError(
                config_message(
                    f"{section}.{key}", data[key], "unknown key", f"allowed keys: {', '.join(sorted(known))}"
                )
            )
    out = {}
    for name, f in known.items():
        if name not in data:
            if f.default is not MISSING:
                continue
            raise ConfigError(
                config_message(f"{section}.{name}", None, "missing", f"add '{name} = ...' to [{section}]")
            )
        value = data[name]
        kind = f.type
        if kind in ("int", int):
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    raise ConfigError(
                        config_message(f"{section}.{name}", value, "must be an integer", _example(f"{section}.{name}"))
                    )
        elif kind in ("float", float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(
                    config_message(f"{section}.{name}", value, "must be a number", _example(f"{section}.{name}"))
                )
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(
                    config_message(f"{section}.{name}", value, "must be finite", _example(f"{section}.{name}"))
                )
        elif kind in ("str", str):
            if not isinstance(value, str):
                raise ConfigError(
                    config_message(f"{section}.{name}", value, "must be a string", _example(f"{section}.{name}"))
                )
        out[name] = value
    return out


# Physically sensible ranges of a machine's numbers: (least nonzero value, most), in the field's unit.
# Beyond them a timing is not a prediction of any machine, and its arithmetic leaves the float range
# (a link of 1e-300 B/s makes every transfer infinite and the times NaN; a clock of 1e308 Hz makes
# every peak infinite); a value of 0 where allowed is checked by _positive, not here.
_RANGES: dict[str, tuple[float, float]] = {
    "chip.sram_bytes": (1, 1 << 40),
    "chip.clock_hz": (1e3, 1e12),
    "chip.workers_per_tile": (1, 1024),
    "chip.supervisor_overhead_cycles": (1, 1e9),
    "chip.fp32_flops_per_cycle": (1e-3, 1e6),
    "chip.fp16_flops_per_cycle": (1e-3, 1e6),
    "chip.local_bytes_per_cycle": (1e-3, 1e6),
    "chip.exchange_bytes_per_cycle": (1e-3, 1e6),
    "chip.exchange_fixed_cycles": (1, 1e9),
    "chip.sync_cycles": (1, 1e9),
    "chip.tiles_per_supertile": (1, 1 << 20),
    "chip.matrix_tile_cycles": (1e-3, 1e9),
    "chip.dram_bytes_per_s": (1.0, 1e16),
    "fabric.cols": (1, 1 << 20),
    "fabric.rows": (1, 1 << 20),
    "fabric.hop_cycles": (1e-3, 1e6),
    "fabric.link_bytes_per_cycle": (1e-3, 1e6),
    "system.link_bytes_per_s": (1.0, 1e16),
    "system.link_latency_s": (1e-15, 1.0),
    "system.global_sync_ns_per_hop": (1e-6, 1e9),
    "system.host_bytes_per_s": (1.0, 1e16),
    "system.host_latency_s": (1e-15, 1.0),
    "system.pair_links": (1, 1024),
    "system.vertical_links": (1, 1024),
    "system.wrap_links": (1, 1024),
    "system.links_per_chip": (1, 1024),
    "system.global_sync_fixed_cycles": (1, 1e12),
    "system.link_message_bytes": (1e-3, 1e9),
    "system.gw_link_bytes_per_s": (1.0, 1e16),
    "system.links_per_neighbour": (1, 1024),
}


def _positive(section: str, obj, names, allow_zero=()):
    """Refuse a negative number (or 0 unless allowed) of ``obj``, and one outside its :data:`_RANGES`
    entry, naming the field."""
    for n in names:
        v = getattr(obj, n)
        key = f"{section}.{n}"
        if n in allow_zero:
            if v < 0:
                raise ConfigError(config_message(key, v, "must be >= 0", _example(key)))
        elif v <= 0:
            raise ConfigError(config_message(key, v, "must be > 0", _example(key)))
        lo, hi = _RANGES.get(key, (0, math.inf))
        if v != 0 and not lo <= v <= hi:
            zero = "0 or " if n in allow_zero else ""
            raise ConfigError(
                config_message(
                    key,
                    v,
                    f"must be {zero}in [{lo:g}, {hi:g}] (outside it no machine is described and times leave "
                    "the float range)",
                    _example(key),
                )
            )


@dataclass(frozen=True)
class Chip:
    """One chip: identical tiles with private SRAM, barrel-threaded workers, an exchange port.

    ``execution``: ``"bsp"`` (the IPU) — a superstep's chips meet at its sync before data crosses
    between them; ``"dataflow"`` (Tensix cores, wafer-scale PEs) — there is no barrier between
    chips: a chip sends as soon as it is ready and goes on when the data it sends and receives has
    arrived (:mod:`tilesim.engine.events`)."""

    tiles: int
    sram_bytes: int
    clock_hz: float
    workers_per_tile: int
    supervisor_overhead_cycles: int
    fp32_flops_per_cycle: float
    fp16_flops_per_cycle: float
    local_bytes_per_cycle: float
    exchange_bytes_per_cycle: float
    exchange_fixed_cycles: int
    sync_cycles: int
    tiles_per_supertile: int = 1
    matrix_tile_cycles: float = 0.0  # a 32x32x32 matrix-engine tile product at its lowest fidelity; 0: none
    dram_bytes_per_s: float = 0.0  # device DRAM beside the tiles' SRAM (Tenstorrent GDDR6); 0: none
    execution: str = "bsp"  # "bsp": chips meet at the syncs; "dataflow": a chip goes on when its data arrives

    def __post_init__(self):
        if self.execution not in EXECUTIONS:
            raise ConfigError(
                config_message(
                    "chip.execution",
                    self.execution,
                    f"must be one of {', '.join(EXECUTIONS)}",
                    'e.g. execution = "bsp" (the IPU) or "dataflow" (Tensix, wafer-scale PEs)',
                )  # fmt: skip
            )
        _positive(
            "chip",
            self,
            [
                "tiles",
                "sram_bytes",
                "clock_hz",
                "workers_per_tile",
                "fp32_flops_per_cycle",
                "fp16_flops_per_cycle",
                "local_bytes_per_cycle",
                "exchange_bytes_per_cycle",
                "tiles_per_supertile",
                "supervisor_overhead_cycles",
                "exchange_fixed_cycles",
                "sync_cycles",
                "matrix_tile_cycles",
                "dram_bytes_per_s",
            ],
            allow_zero=(
                "supervisor_overhead_cycles",
                "exchange_fixed_cycles",
                "sync_cycles",
                "matrix_tile_cycles",
                "dram_bytes_per_s",
            ),
        )
        if self.tiles > 1 << 20:
            raise ConfigError(config_message("chip.tiles", self.tiles, "must be <= 1048576", _example("chip.tiles")))


@dataclass(frozen=True)
class Fabric:
    """The on-chip exchange network.

    ``all-to-all`` (IPU): compiled, time-deterministic exchange; a tile's exchange time depends on
    the bytes it sends/receives, never on distance. ``mesh``: tiles on a ``cols`` × ``rows`` grid with
    XY routing; each hop adds ``hop_cycles`` and directed links carry ``link_bytes_per_cycle``,
    shared by the flows on them. ``torus``: the mesh with wrap-around links (Tenstorrent's NoCs).
    ``multicast``: the routers copy one message onto several links (a mesh or torus), so a row the
    workload marks a broadcast goes as one multicast tree per sender (:mod:`tilesim.machine.fabric`).
    """

    kind: str
    cols: int = 0
    rows: int = 0
    hop_cycles: float = 0.0
    link_bytes_per_cycle: float = 0.0
    multicast: bool = False

    def __post_init__(self):
        if self.kind not in FABRIC_KINDS:
            raise ConfigError(
                config_message(
                    "fabric.kind",
                    self.kind,
                    f"must be one of {', '.join(FABRIC_KINDS)}",
                    'e.g. kind = "all-to-all" (the IPU)',
                )
            )
        if self.kind in ("mesh", "torus"):
            _positive(
                "fabric", self, ["cols", "rows", "link_bytes_per_cycle", "hop_cycles"], allow_zero=("hop_cycles",)
            )
        if not isinstance(self.multicast, bool):
            raise ConfigError(
                config_message("fabric.multicast", self.multicast, "must be true or false", "e.g. multicast = true")
            )


@dataclass(frozen=True)
class System:
    """Chips joined by links (IPU-Links on Poplar's ladder model), a global sync and a host link.

    Ladder: chip ``i`` sits on rung ``i // 2``, side ``i % 2``. Rung partners share ``pair_links``
    links per direction; neighbours on a side share ``vertical_links``; ``wrap_links`` join the
    last rung to the first (the ring wrap-around) when there are more than two rungs.
    Global sync cycles = global_sync_fixed_cycles + ceil(global_sync_ns_per_hop · f · hops · 2) with
    hops = 1 + ⌊⌊N/2⌋/2⌋. ``global_sync_fixed_cycles`` is the part of a cross-chip sync that does not
    grow with the hop count (sync-link handshake and the chips' external-sync entry and exit); 0 unless a
    preset gives measured evidence (gc2x16: measured multi-IPU runs, ``calibration/multi-ipu/``).
    ``link_message_bytes``: link time one message (a contiguous region sent to one tile of another
    chip) occupies beyond its payload, in bytes at the link rate; workloads that count messages add
    it to their flows' bytes. 0 unless a preset gives measured evidence.
    ``chips_per_rack`` / ``gw_link_bytes_per_s``: beyond ``chips_per_rack`` chips the ladders of
    the racks are joined by GW-Links (a ring of racks, one link per IPU-Machine and direction;
    :class:`tilesim.machine.fabric.LadderLinks`); 0: one ladder over every chip.
    """

    chips: int
    topology: str
    link_bytes_per_s: float
    link_efficiency: float
    link_latency_s: float
    global_sync_ns_per_hop: float
    host_bytes_per_s: float
    host_latency_s: float
    pair_links: int = 0  # ladder only
    vertical_links: int = 0  # ladder only
    wrap_links: int = 0  # ladder only
    links_per_chip: int = 0
    global_sync_fixed_cycles: int = 0
    link_message_bytes: float = 0.0
    chips_per_rack: int = 0  # chips joined by IPU-Links in one rack; 0: every chip (tilesim.machine.fabric.LadderLinks)
    gw_link_bytes_per_s: float = 0.0  # one GW-Link between racks, per direction
    grid_cols: int = 0  # chips per row of a mesh or torus of chips (tilesim.machine.fabric.EthernetLinks)
    links_per_neighbour: int = 1  # parallel links between neighbours of a line, ring, mesh or torus

    def __post_init__(self):
        if self.topology not in TOPOLOGIES:
            raise ConfigError(
                config_message(
                    "system.topology",
                    self.topology,
                    f"must be one of {', '.join(TOPOLOGIES)}",
                    'e.g. topology = "ladder" (IPU-Links) or "ring" (Ethernet)',
                )
            )
        self._check_topology()
        _positive(
            "system",
            self,
            [
                "chips",
                "link_bytes_per_s",
                "link_efficiency",
                "host_bytes_per_s",
                "link_latency_s",
                "host_latency_s",
                "pair_links",
                "vertical_links",
                "wrap_links",
                "links_per_chip",
                "global_sync_ns_per_hop",
                "global_sync_fixed_cycles",
                "link_message_bytes",
                "chips_per_rack",
                "gw_link_bytes_per_s",
                "grid_cols",
                "links_per_neighbour",
            ],
            allow_zero=(
                "link_latency_s",
                "host_latency_s",
                "pair_links",
                "vertical_links",
                "grid_cols",
                "wrap_links",
                "global_sync_ns_per_hop",
                "links_per_chip",
                "global_sync_fixed_cycles",
                "link_message_bytes",
                "chips_per_rack",
                "gw_link_bytes_per_s",
            ),
        )
        if 0 < self.chips_per_rack < self.chips and (self.chips_per_rack % 4 or self.gw_link_bytes_per_s <= 0):
            raise ConfigError(
                config_message(
                    "system.chips_per_rack",
                    self.chips_per_rack,
                    "must be a multiple of 4 (whole IPU-Machines) with gw_link_bytes_per_s > 0 "
                    f"when the system's {self.chips} chips span racks",
                    "set system.gw_link_bytes_per_s (e.g. 12.5e9: one 100 Gbps GW-Link)",
                )
            )
        if self.link_efficiency > 1:
            raise ConfigError(
                config_message(
                    "system.link_efficiency",
                    self.link_efficiency,
                    "must be in (0, 1]",
                    _example("system.link_efficiency"),
                )
            )
        if self.chips > 4096:
            raise ConfigError(
                config_message("system.chips", self.chips, "must be <= 4096", "e.g. chips = 64 (an IPU-POD64)")
            )

    def _check_topology(self) -> None:
        """The fields the chosen topology needs: ladder links, whole rows of a mesh or torus."""
        if self.topology == "ladder" and (self.pair_links < 1 or self.vertical_links < 1):
            bad = "pair_links" if self.pair_links < 1 else "vertical_links"
            raise ConfigError(
                config_message(
                    f"system.{bad}", getattr(self, bad), "must be >= 1 on a ladder", _example(f"system.{bad}")
                )
            )
        if self.topology in ("mesh", "torus") and (self.grid_cols < 1 or self.chips % self.grid_cols):
            raise ConfigError(
                config_message(
                    "system.grid_cols",
                    self.grid_cols,
                    f"must be >= 1 and divide system.chips = {self.chips} on a {self.topology}",
                    "e.g. grid_cols = 4 for a 2 x 4 mesh of 8 chips",
                )
            )


@dataclass(frozen=True)
class Machine:
    """A complete machine: ``system.chips`` identical chips. ``vendor`` (one of :data:`VENDORS`):
    who makes it, so that a workload can build its programs as that vendor's software would; ``""``
    (a user's file that does not say) leaves the choice to the workload. ``architecture``: the chip's
    generation as its vendor's software names it (``wormhole_b0``, ``blackhole``, ``wse2``, ...), where a
    stack's firmware figures differ by it; ``""``: not said (a stack then assumes its first generation and
    says so)."""

    name: str
    description: str
    chip: Chip
    fabric: Fabric
    system: System
    vendor: str = ""
    architecture: str = ""

    def __post_init__(self):
        if self.vendor not in VENDORS:
            raise ConfigError(
                config_message(
                    "vendor",
                    self.vendor,
                    f"must be one of {', '.join(repr(v) for v in VENDORS)}",
                    'e.g. vendor = "graphcore" (or leave it out)',
                )
            )
        if self.fabric.kind in ("mesh", "torus") and self.fabric.cols * self.fabric.rows != self.chip.tiles:
            raise ConfigError(
                config_message(
                    "fabric.cols*rows",
                    self.fabric.cols * self.fabric.rows,
                    f"must equal chip.tiles = {self.chip.tiles}",
                    "make the grid cover every tile",
                )
            )

    # convenient read-only views ------------------------------------------------------------
    @property
    def chips(self) -> int:
        return self.system.chips

    @property
    def tiles_per_chip(self) -> int:
        return self.chip.tiles

    @property
    def total_tiles(self) -> int:
        return self.chip.tiles * self.system.chips

    @property
    def clock_hz(self) -> float:
        return self.chip.clock_hz

    def with_chips(self, chips: int) -> Machine:
        """The same machine with ``chips`` chips (a longer or shorter ladder)."""
        if isinstance(chips, bool) or not isinstance(chips, int) or chips < 1 or chips > 4096:
            raise ConfigError(config_message("chips", chips, "must be an integer in 1..4096", "e.g. --chips 16"))
        if chips == self.chips:
            return self
        cols = self.system.grid_cols
        if self.system.topology in ("mesh", "torus") and chips < cols:
            cols = chips  # fewer chips than a row: one row of them
        system = replace(self.system, chips=chips, grid_cols=cols)
        return replace(self, name=f"{self.name}[{chips} chips]", system=system)

    def with_topology(self, topology: str, chips: int) -> Machine:
        """``chips`` of this machine's chips joined as a ``line`` or ``ring`` (or any topology of
        :data:`TOPOLOGIES`) with its links: the logical topology a collective library resolves on
        a larger mesh (its neighbours are physical neighbours, so the links are the same)."""
        if topology == self.system.topology:
            return self.with_chips(chips)
        line = replace(self, system=replace(self.system, topology="line", grid_cols=0))
        base = line.with_chips(chips)
        system = replace(base.system, topology=topology)
        return replace(base, name=f"{self.name}[{chips}-chip {topology}]", system=system)

    def global_sync_cycles(self, chips: int | None = None) -> int:
        """Cycles of a sync across ``chips`` chips: the preset's fixed part plus Poplar's IPUModel
        hops rule (§1.3). This is the one function the engine's sync costs come from (through
        :meth:`group_sync_cycles`)."""
        n = self.chips if chips is None else chips
        if n <= 1:
            return self.chip.sync_cycles
        hops = self.sync_hops(n)
        return self.system.global_sync_fixed_cycles + math.ceil(
            self.system.global_sync_ns_per_hop * 1e-9 * self.clock_hz * hops * 2 - 1e-9
        )

    def sync_hops(self, chips: int) -> int:
        """Hops of a sync across ``chips`` chips: Poplar's IPUModel rule ``1 + floor(floor(N/2)/2)``
        on a ladder (§1.3); the diameter of the chips' line, ring, mesh or torus otherwise (a
        software barrier over neighbour links: there is no sync network)."""
        s = self.system
        if s.topology == "ladder":
            return 1 + (chips // 2) // 2
        cols = min(s.grid_cols, chips) if s.topology in ("mesh", "torus") else chips
        rows = -(-chips // cols)
        if s.topology in ("ring", "torus"):
            return cols // 2 + rows // 2
        return (cols - 1) + (rows - 1)

    def group_sync_cycles(self, chips: int) -> int:
        """A sync across ``chips`` chips: each chip's internal sync plus the Sync-Link round trip.

        Poplar's IPUModel lists ``globalSyncCycles`` separately from the on-chip sync; a global
        sync cannot be cheaper than the on-chip one it contains, so the two add.
        """
        if chips <= 1:
            return self.chip.sync_cycles
        return self.chip.sync_cycles + self.global_sync_cycles(chips)

    def derived(self) -> dict:
        """Headline figures with stable keys (documented in the README)."""
        c, s = self.chip, self.system
        return {
            "name": self.name,
            "chips": self.chips,
            "tiles": c.tiles,
            "total_tiles": self.total_tiles,
            "sram_bytes": c.sram_bytes,
            "total_sram_bytes": c.sram_bytes * c.tiles,
            "system_sram_bytes": c.sram_bytes * self.total_tiles,
            "clock_hz": c.clock_hz,
            "workers_per_tile": c.workers_per_tile,
            "hardware_threads": c.workers_per_tile * c.tiles,
            "peak_fp32_flops": c.fp32_flops_per_cycle * c.tiles * c.clock_hz,
            "peak_fp16_flops": c.fp16_flops_per_cycle * c.tiles * c.clock_hz,
            "memory_bytes_per_s": c.local_bytes_per_cycle * c.tiles * c.clock_hz,
            "exchange_bytes_per_s": c.exchange_bytes_per_cycle * c.tiles * c.clock_hz,
            "link_bytes_per_s": s.links_per_chip * s.link_bytes_per_s * 2,  # both directions
            "global_sync_cycles": self.global_sync_cycles(),
            "fabric": self.fabric.kind,
            "topology": s.topology,
        }

    def to_dict(self) -> dict:
        """The TOML/JSON form (``vendor`` and ``architecture`` only when the machine says them)."""
        return {
            "name": self.name,
            "description": self.description,
            **({"vendor": self.vendor} if self.vendor else {}),
            **({"architecture": self.architecture} if self.architecture else {}),
            "chip": asdict(self.chip),
            "fabric": {k: v for k, v in asdict(self.fabric).items() if self.fabric.kind != "all-to-all" or k == "kind"},
            "system": asdict(self.system),
        }

    def to_toml(self) -> str:
        import tomli_w  # tomli_w is needed only when writing TOML

        return tomli_w.dumps(self.to_dict())


def preset_names() -> list[str]:
    """Names of the shipped machine presets (the ``tilesim/presets/*.toml`` stems), sorted."""
    root = resources.files("tilesim") / "presets"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def preset_text(name: str) -> str:
    """The preset's TOML source, comments and evidence tags included."""
    if name not in preset_names():
        raise ConfigError(config_message("machine", name, "is not a preset", f"presets: {', '.join(preset_names())}"))
    return (resources.files("tilesim") / "presets" / f"{name}.toml").read_text()


def machine_from_dict(data: dict, source: str = "machine") -> Machine:
    """Build a :class:`Machine` from a parsed TOML table; raises :class:`ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError(
            config_message(source, data, "must be a table", "tilesim machines gc200 --toml prints a valid file")
        )
    allowed = {"name", "description", "vendor", "architecture", "chip", "fabric", "system"}
    for key in data:
        if key not in allowed:
            raise ConfigError(
                config_message(
                    f"{source}: {key}",
                    data[key],
                    "unknown key",
                    f"allowed top-level keys: {', '.join(sorted(allowed))}",
                )
            )
    for key in ("chip", "fabric", "system"):
        if key not in data:
            raise ConfigError(
                config_message(
                    f"{source}: [{key}]",
                    None,
                    "missing table",
                    "print a preset with 'tilesim machines gc200 --toml' and edit it",
                )
            )
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name:
        raise ConfigError(config_message("name", name, "must be a non-empty string", 'e.g. name = "mychip"'))
    chip = Chip(**_check_fields(Chip, "chip", data["chip"]))
    fabric = Fabric(**_check_fields(Fabric, "fabric", data["fabric"]))
    system = System(**_check_fields(System, "system", data["system"]))
    vendor = data.get("vendor", "")
    if not isinstance(vendor, str):
        raise ConfigError(config_message("vendor", vendor, "must be a string", 'e.g. vendor = "graphcore"'))
    arch = data.get("architecture", "")
    if not isinstance(arch, str):
        raise ConfigError(
            config_message(
                "architecture", arch, "must be a string", 'e.g. architecture = "wormhole_b0" (or leave it out)'
            )
        )
    return Machine(
        name=name,
        description=str(data.get("description", "")),
        chip=chip,
        fabric=fabric,
        system=system,
        vendor=vendor,
        architecture=arch,
    )


def load_machine(name_or_path: str | Path | Machine, chips: int | None = None) -> Machine:
    """A preset by name (``gc200``, ``m2000`` …) or a path to a TOML file; optionally resized.

    Raises
    ------
    ConfigError
        Unknown preset, unreadable or broken TOML, unknown/missing key, or a value out of range.
    """
    if isinstance(name_or_path, Machine):
        machine = name_or_path
    else:
        text_name = str(name_or_path)
        path = Path(text_name)
        if text_name in preset_names():
            data = loads_toml(preset_text(text_name))
            machine = machine_from_dict(data, text_name)
        elif path.suffix == ".toml" or path.exists():
            regular_file(path, "machine", f"give a preset ({', '.join(preset_names())}) or a TOML path")
            data = read_toml(path, "machine file")
            machine = machine_from_dict(data, text_name)
        else:
            raise ConfigError(
                config_message(
                    "machine", text_name, "is neither a preset nor a file", f"presets: {', '.join(preset_names())}"
                )
            )
    if chips is not None:
        machine = machine.with_chips(chips)
    return machine
