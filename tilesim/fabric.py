"""Exchange fabrics behind one small interface, and the chip-to-chip link topology.

**The seam.** A fabric is the one place that turns the per-tile work and traffic of supersteps
(:class:`TileRows`) into time per chip (:class:`tilesim.records.ChipWork`): :meth:`reduce`. A
workload never reduces tiles to chips itself, and the engine only ever sees chips. The contract
of ``reduce(rows) -> ChipWork``:

* ``compute[s, c]`` is the slowest tile's compute of chip ``c`` in superstep ``s`` (BSP: a chip
  syncs when its last tile is done), ``critical_tile[s, c]`` that tile (index on the chip);
* ``exchange[s, c]`` the on-chip exchange cycles of the superstep's traffic (0: no exchange
  phase), ``exchange_tile[s, c]`` the tile whose port (or route) bounds it;
* ``bytes_onchip[s]`` the bytes sent over the on-chip fabric in superstep ``s``.

A fabric whose exchange time depends on who talks to whom (:attr:`needs_transfers`: a mesh or
torus with routes and link contention) reads ``rows.transfers`` as well; a fabric without a
distance term needs only the per-tile byte totals, so a workload may hand it rows already
reduced to one "tile" per chip (each chip's busiest port and slowest tile:
:meth:`TileRows.chip_peaks`), which gives the same times. To add a fabric: a class with
``needs_transfers``, ``grid``, ``exchange_cycles`` and ``point_to_point_cycles`` (the
:class:`OnChipFabric` base derives :meth:`reduce` from them), registered in :data:`FABRICS`.

On-chip fabrics turn per-tile exchange bytes into the cycles of one exchange phase:

* :class:`AllToAllFabric` (IPU): exchange is compiled and time-deterministic; a tile's port moves
  ``exchange_bytes_per_cycle`` bytes per cycle and there is no distance term
  (ipu-hardware.md §3.1–3.2)::

      cycles = exchange_fixed_cycles + ceil(max_tile max(bytes_in, bytes_out) / exchange_bytes_per_cycle)

* :class:`MeshFabric`: tiles on a grid with XY routing. Explicit transfers are routed and every
  directed link's load counts; each hop adds ``hop_cycles``::

      cycles = fixed + max(max_port_load / port_bpc, max_link_load / link_bpc) + max_hops · hop_cycles

  Without explicit transfers (only per-tile totals) the mean XY distance of the grid stands in
  for the hop count.

:class:`LadderLinks` routes cross-chip flows over Poplar's ladder model of IPU-Links (§1.2):
directed link groups with a bandwidth each; flows that share a group share its bandwidth.
"""

from __future__ import annotations

import math

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.machine import FABRIC_KINDS, Machine
from tilesim.records import ChipWork
from tilesim.rows import ChipPeaks, TileRows

__all__ = [
    "AllToAllFabric",
    "MeshFabric",
    "OnChipFabric",
    "FABRICS",
    "register_fabric",
    "LadderLinks",
    "LinkGroup",
    "make_fabric",
    "grid_shape",
]

# A directed group of IPU-Links (:class:`LadderLinks`): ``("pair", rung, from_side)``,
# ``("rail", side, rung_from, rung_to)`` or ``("gw", machine, rack_from, rack_to)``.
LinkGroup = tuple[str, int, int] | tuple[str, int, int, int]


def _port_peak(bytes_in: np.ndarray, bytes_out: np.ndarray):
    """Per (row, chip): the busiest tile port's max(bytes in, bytes out), and that tile."""
    tin = bytes_in.argmax(axis=2)
    tout = bytes_out.argmax(axis=2)
    peak_in = np.take_along_axis(bytes_in, tin[..., None], 2)[..., 0]
    peak_out = np.take_along_axis(bytes_out, tout[..., None], 2)[..., 0]
    return np.maximum(peak_in, peak_out).astype(np.float64), np.where(peak_in >= peak_out, tin, tout)


class OnChipFabric:
    """What every on-chip fabric shares: the reduction of :class:`TileRows` to chips, from the
    fabric's own :meth:`exchange_cycles` (the one rule that differs between fabrics)."""

    needs_transfers = False
    grid: tuple[int, int] | None = None

    def __init__(self, machine: Machine):
        """A fabric reads its constants from ``machine`` (its chip and ``[fabric]`` table)."""

    def exchange_cycles(self, bytes_in: np.ndarray, bytes_out: np.ndarray, rows_transfers=None):
        """Cycles and bounding tile per (row, chip) of ``[E, chips, tiles]`` per-tile bytes."""
        raise NotImplementedError

    def point_to_point_cycles(self, src: int, dst: int, nbytes: float) -> float:
        """Cycles to move ``nbytes`` from tile ``src`` to tile ``dst`` of one chip, alone."""
        raise NotImplementedError

    def reduce(self, rows: TileRows) -> ChipWork:
        """``rows`` reduced to chips (the contract is in the module docstring)."""
        return self.reduce_peaks(rows.peaks(), rows.transfers)

    def reduce_peaks(self, peaks: ChipPeaks, transfers: dict | None = None) -> ChipWork:
        """Chip work from each chip's slowest tile and busiest ports (:class:`ChipPeaks`) and, for
        a fabric that routes (:attr:`needs_transfers`), the explicit transfers by exchange row.
        The exchange is bounded by the busier direction's port (receive on ties)."""
        S, C = peaks.compute.shape
        ex = np.zeros((S, C))
        ex_tile = np.zeros((S, C), np.int64)
        bytes_onchip = np.zeros(S)
        has_ex = peaks.exchange_row >= 0
        if has_ex.any():
            routed = None
            if transfers and self.needs_transfers:
                routed = {r: (t.chip, t.src, t.dst, t.nbytes) for r, t in transfers.items()}
            cyc, _ = self.exchange_cycles(peaks.bytes_in[..., None], peaks.bytes_out[..., None], routed)
            tile = np.where(peaks.bytes_in >= peaks.bytes_out, peaks.in_tile, peaks.out_tile)
            idx = peaks.exchange_row[has_ex]
            ex[has_ex] = cyc[idx]
            ex_tile[has_ex] = tile[idx]
            bytes_onchip[has_ex] = peaks.row_bytes[idx]
        return ChipWork(peaks.compute, peaks.compute_tile, ex, ex_tile, bytes_onchip)


class AllToAllFabric(OnChipFabric):
    """Distance-independent exchange (Graphcore IPU)."""

    needs_transfers = False  # per-tile byte totals fix the exchange time; who talks to whom does not
    grid = None  # no physical tile grid: exchange cost has no distance

    def __init__(self, machine: Machine):
        self.fixed = float(machine.chip.exchange_fixed_cycles)
        self.bpc = float(machine.chip.exchange_bytes_per_cycle)

    def exchange_cycles(self, bytes_in: np.ndarray, bytes_out: np.ndarray, rows_transfers=None):
        """Cycles and critical tile per (row, chip) for arrays shaped ``[E, chips, tiles]``."""
        peak, crit = _port_peak(bytes_in, bytes_out)
        return np.where(peak > 0, self.fixed + np.ceil(peak / self.bpc), 0.0), crit

    def point_to_point_cycles(self, src: int, dst: int, nbytes: float) -> float:
        return self.fixed + math.ceil(nbytes / self.bpc)


class MeshFabric(OnChipFabric):
    """2-D mesh with dimension-ordered (XY) routing; cost grows with hop distance."""

    needs_transfers = True  # explicit tile-to-tile transfers are routed (link loads, hops)

    def __init__(self, machine: Machine):
        f = machine.fabric
        self.cols, self.rows = f.cols, f.rows
        self.grid = (self.rows, self.cols)  # tile t sits at row t // cols, column t % cols
        self.hop = float(f.hop_cycles)
        self.link_bpc = float(f.link_bytes_per_cycle)
        self.fixed = float(machine.chip.exchange_fixed_cycles)
        self.port_bpc = float(machine.chip.exchange_bytes_per_cycle)
        self.tiles = machine.tiles_per_chip
        # mean |dx| + |dy| between two uniformly chosen tiles: (n^2 - 1) / (3n) per dimension
        self.mean_hops = (self.cols**2 - 1) / (3 * self.cols) + (self.rows**2 - 1) / (3 * self.rows)

    def hops(self, src: int, dst: int) -> int:
        sx, sy = src % self.cols, src // self.cols
        dx, dy = dst % self.cols, dst // self.cols
        return abs(sx - dx) + abs(sy - dy)

    def _link_load(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> float:
        """Largest byte load on any directed mesh link under XY routing."""
        load: dict[tuple, float] = {}
        for s, d, b in zip(src.tolist(), dst.tolist(), nbytes.tolist()):
            x, y = s % self.cols, s // self.cols
            tx, ty = d % self.cols, d // self.cols
            while x != tx:
                nx = x + (1 if tx > x else -1)
                key = (x, y, nx, y)
                load[key] = load.get(key, 0.0) + b
                x = nx
            while y != ty:
                ny = y + (1 if ty > y else -1)
                key = (x, y, x, ny)
                load[key] = load.get(key, 0.0) + b
                y = ny
        return max(load.values(), default=0.0)

    def exchange_cycles(self, bytes_in: np.ndarray, bytes_out: np.ndarray, rows_transfers=None):
        """``rows_transfers``: optional {row: (chip, src_local, dst_local, bytes)} explicit transfers."""
        peak, crit = _port_peak(bytes_in, bytes_out)
        cycles = np.where(peak > 0, self.fixed + np.ceil(peak / self.port_bpc) + self.mean_hops * self.hop, 0.0)
        for row, (chip, src, dst, nb) in (rows_transfers or {}).items():
            for c in np.unique(chip):
                m = chip == c
                hops = max((self.hops(a, b) for a, b in zip(src[m].tolist(), dst[m].tolist())), default=0)
                link = self._link_load(src[m], dst[m], nb[m])
                cycles[row, c] = (
                    self.fixed
                    + max(math.ceil(peak[row, c] / self.port_bpc), math.ceil(link / self.link_bpc))
                    + hops * self.hop
                )
        return cycles, crit

    def point_to_point_cycles(self, src: int, dst: int, nbytes: float) -> float:
        bpc = min(self.port_bpc, self.link_bpc) if src != dst else self.port_bpc
        return self.fixed + math.ceil(nbytes / bpc) + self.hops(src, dst) * self.hop


FABRICS: dict[str, type[OnChipFabric]] = {"all-to-all": AllToAllFabric, "mesh": MeshFabric}
"""On-chip fabric models by ``[fabric] kind`` of a machine file (:func:`register_fabric`)."""


def register_fabric(kind: str):
    """Class decorator: make an :class:`OnChipFabric` subclass the model of ``[fabric] kind =
    "<kind>"`` in machine files (``@register_fabric("ring")`` above the class is the one line a
    new fabric adds; CONTRIBUTING.md walks through it)."""

    def add(cls: type[OnChipFabric]) -> type[OnChipFabric]:
        FABRICS[kind] = cls
        if kind not in FABRIC_KINDS:
            FABRIC_KINDS.append(kind)
        return cls

    return add


def make_fabric(machine: Machine) -> OnChipFabric:
    """The on-chip fabric model named by ``machine.fabric.kind`` (:data:`FABRICS`): an
    :class:`OnChipFabric` whose :meth:`~OnChipFabric.reduce` turns tile rows into chip work.

    Raises
    ------
    ConfigError
        No fabric of that kind is registered.
    """
    kind = machine.fabric.kind
    if kind not in FABRICS:
        raise ConfigError(
            config_message("fabric.kind", kind, f"must be one of {sorted(FABRICS)}", "use a registered fabric kind")
        )
    return FABRICS[kind](machine)


def grid_shape(machine: Machine) -> tuple[int, int] | None:
    """(rows, cols) of the physical tile grid of ``machine``'s fabric (tile ``t`` at row
    ``t // cols``, column ``t % cols``), or None when the fabric has no distance (all-to-all)."""
    return make_fabric(machine).grid


class LadderLinks:
    """Directed IPU-Link groups of Poplar's ladder model and shortest routes over them; racks of
    ladders joined by GW-Links.

    Chip ``i``: rung ``i // 2``, side ``i % 2``. Groups (per direction):
    ``("pair", rung, from_side)`` with ``pair_links`` links; ``("rail", side, rung_from, rung_to)``
    between adjacent rungs with ``vertical_links`` links, including the wrap-around rung
    ``R-1 -> 0`` with ``wrap_links`` links when there are more than two rungs. A route climbs or
    descends the source's rail (the shorter way round when a wrap exists), then crosses its
    destination rung if the sides differ.

    Racks (``system.chips_per_rack`` > 0 and fewer than the chips): each rack of
    ``chips_per_rack`` chips is such a ladder, with its own wrap-around (rungs numbered globally);
    machine ``m`` of a rack (rungs ``2m, 2m+1`` of it: 4 chips, one IPU-Machine) has one GW-Link
    to machine ``m`` of the next and of the previous rack, a ring of racks (Graphcore's Bow Pod256
    cabling: east/west GW-Link ports; ipu-hardware.md §1.2): groups ``("gw", m, rack_from,
    rack_to)`` of ``gw_link_bytes_per_s``. A route between racks first crosses the racks at the
    source's machine (the shorter way round), landing on the chip at the source's place in the
    destination rack, then follows that rack's ladder.
    """

    def __init__(self, machine: Machine):
        s = machine.system
        self.chips = machine.chips
        per_rack = getattr(s, "chips_per_rack", 0) or 0
        self.rack_chips = per_rack if 0 < per_rack < self.chips else self.chips
        self.racks = -(-self.chips // self.rack_chips)
        self.rungs = (self.rack_chips + 1) // 2  # rungs per rack
        per_link = s.link_bytes_per_s * s.link_efficiency / machine.clock_hz  # bytes per cycle
        self.latency_cycles = s.link_latency_s * machine.clock_hz
        self.bw: dict[LinkGroup, float] = {}  # bytes per cycle of each link group
        for k in range(self.racks):
            first = k * self.rack_chips
            n = min(self.rack_chips, self.chips - first)  # chips in this rack
            g0 = k * self.rungs  # global number of its first rung
            rungs = (n + 1) // 2
            for r in range(rungs):
                if 2 * r + 1 < n:
                    self.bw[("pair", g0 + r, 0)] = self.bw[("pair", g0 + r, 1)] = s.pair_links * per_link
            for side in (0, 1):
                for r in range(rungs - 1):
                    if 2 * (r + 1) + side < n:
                        self.bw[("rail", side, g0 + r, g0 + r + 1)] = self.bw[("rail", side, g0 + r + 1, g0 + r)] = (
                            s.vertical_links * per_link
                        )
                if rungs > 2 and s.wrap_links > 0 and 2 * (rungs - 1) + side < n:
                    last = g0 + rungs - 1
                    self.bw[("rail", side, last, g0)] = self.bw[("rail", side, g0, last)] = s.wrap_links * per_link
        if self.racks > 1:
            gw = getattr(s, "gw_link_bytes_per_s", 0.0) * s.link_efficiency / machine.clock_hz
            for m in range(-(-self.rungs // 2)):
                for k in range(self.racks):
                    for nxt in ((k + 1) % self.racks, (k - 1) % self.racks):
                        if nxt != k:
                            self.bw[("gw", m, k, nxt)] = gw
        self._routes: dict[tuple[int, int], tuple[LinkGroup, ...]] = {}

    def route(self, src: int, dst: int) -> tuple[LinkGroup, ...]:
        key = (src, dst)
        if key in self._routes:
            return self._routes[key]
        ka, kb = src // self.rack_chips, dst // self.rack_chips
        path: list[LinkGroup] = []
        if ka != kb:  # GW-Links at the source's machine
            m = (src % self.rack_chips) // 4
            up, down = (kb - ka) % self.racks, (ka - kb) % self.racks
            step, n = (1, up) if up <= down else (-1, down)
            k = ka
            for _ in range(n):
                nk = (k + step) % self.racks
                path.append(("gw", m, k, nk))
                k = nk
            src = kb * self.rack_chips + src % self.rack_chips
            if src >= self.chips:  # a shorter last rack: its last chip
                src = self.chips - 1
        path += self._in_rack(src, dst)
        self._routes[key] = tuple(path)
        return self._routes[key]

    def _in_rack(self, src: int, dst: int) -> list[LinkGroup]:
        """The ladder route between two chips of one rack (global rung numbers)."""
        k = src // self.rack_chips
        base = k * self.rack_chips
        n = min(self.rack_chips, self.chips - base)
        rungs, g0 = (n + 1) // 2, k * self.rungs
        a, b = src - base, dst - base
        r0, side = divmod(a, 2)
        r1, side1 = divmod(b, 2)
        # a missing chip on side 1 of the last rung: travel on side 0
        if 2 * r1 + side >= n or 2 * r0 + side >= n:
            side = 0
        path: list[LinkGroup] = []
        if side != a % 2:
            path.append(("pair", g0 + r0, a % 2))
        up = (r1 - r0) % rungs
        down = (r0 - r1) % rungs
        wrap = ("rail", side, g0 + rungs - 1, g0) in self.bw
        if wrap:
            step = 1 if up <= down else -1
            steps = min(up, down)
        else:
            step = 1 if r1 >= r0 else -1
            steps = abs(r1 - r0)
        r = r0
        for _ in range(steps):
            nr = (r + step) % rungs
            path.append(("rail", side, g0 + r, g0 + nr))
            r = nr
        if side != side1:
            path.append(("pair", g0 + r1, side))
        return path
