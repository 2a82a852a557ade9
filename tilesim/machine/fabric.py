"""Exchange fabrics behind one small interface, and the chip-to-chip link topology.

**The seam.** A fabric is the one place that turns the per-tile work and traffic of supersteps
(:class:`TileRows`) into time per chip (:class:`tilesim.outputs.records.ChipWork`): :meth:`reduce`. A
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

  Without explicit transfers (only per-tile totals) the links carry proportional traffic (every
  receiver draws from the senders in proportion to what they send: :mod:`tilesim.machine.gridload`), so
  where the tiles sit still matters; with only chip peaks, the grid's mean distance stands in.
  A row the workload marks a *broadcast* (every receiver takes the same data) goes, on a fabric
  that multicasts (``[fabric] multicast = true``), as one multicast tree per sender: each sender's
  bytes cross each link of its dimension-ordered tree once (the tree loads of
  :mod:`tilesim.machine.gridload`). Elsewhere a broadcast row goes as unicast copies: proportional
  traffic on the links, and each sender's port injects a copy per receiver, ``out·Σin/Σout``
  (:meth:`MeshFabric.injected_bytes`), the bytes its flows carry.

  **The closed form against the events.** The per-tile totals of a row stand for explicit
  transfers (:meth:`MeshFabric.row_flows`: proportional unicasts, or the multicast trees), which
  the event model times with the fluid rule (:meth:`MeshFabric.row_event_cycles`). For traffic
  whose totals are consistent (unicasts: Σ in = Σ out; trees: the largest receiver takes all,
  max in = Σ out; a broadcast row sent as unicast copies: the largest receiver takes all, its
  senders' ports charged the copies) those flows load every link and port ``g`` (bandwidth ``bw_g``) with exactly the
  closed form's ``L_g`` bytes, by ``N_g`` flows of at most ``ŝ_g`` bytes each. Let
  ``D = max_g L_g / bw_g`` (the closed form's drain) and ``H`` its longest route. No link moves
  more than ``bw_g`` per cycle, and a flow's rate never falls below ``min_g bw_g / N_g`` over its
  route (its shares only grow as others finish), so every flow drains by ``max_g N_g·ŝ_g / bw_g``:

      D ≤ max_i drain_i ≤ B·D,   B = max_g N_g·ŝ_g / L_g ≤ largest flow / smallest flow

  and with ``events = fixed + max_i(⌈drain_i⌉ + hops_i·hop)``, ``closed = fixed + ⌈D⌉ + H·hop``:

      fixed + max(D, h·hop) ≤ events ≤ fixed + B·D + H·hop

  (``h`` the events' longest route: ``H`` on a mesh, at most ``H`` on a torus, where ``H`` is an upper
  bound). So on a mesh ``(closed − fixed) / 2 ≤ events − fixed ≤ B·(closed − fixed)``, and where the
  flows have one size (``B = 1``: equal senders and receivers, e.g. one list broadcast from the tiles
  of a chip to its owner tiles) ``events ≤ closed``: the closed form only adds the busiest link's
  drain and the longest route's latency as if one flow had both. ``tests/test_multicast.py`` checks
  the bound on random traffic, unicast and multicast. The closed form is the fast path on every
  row timed from per-tile totals (it scales to a wafer; the flows of a row are senders × receivers).

:class:`LadderLinks` routes cross-chip flows over Poplar's ladder model of IPU-Links (§1.2):
directed link groups with a bandwidth each; flows that share a group share its bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import FABRIC_KINDS, Machine
from tilesim.machine.fluid import drain_times
from tilesim.machine.gridload import GridLinks, grid_link_peaks, grid_link_totals, link_slot, proportional_flows
from tilesim.outputs.records import ChipWork
from tilesim.program.rows import ChipPeaks, TileRows
from tilesim.program.validation import sorted_unique

__all__ = [
    "AllToAllFabric",
    "MeshFabric",
    "OnChipFabric",
    "FABRICS",
    "register_fabric",
    "TorusFabric",
    "LadderLinks",
    "EthernetLinks",
    "ChipLinks",
    "CHIP_LINKS",
    "chip_links",
    "LinkGroup",
    "make_fabric",
    "grid_shape",
    "rectangle_tiles",
]

_ROUND_OFF = 1e-9  # relative float round-off of a fluid drain time, dropped before it is rounded up to cycles

# A directed group of IPU-Links (:class:`LadderLinks`): ``("pair", rung, from_side)``,
# ``("rail", side, rung_from, rung_to)`` or ``("gw", machine, rack_from, rack_to)``.
LinkGroup = tuple[str, int, int] | tuple[str, int, int, int]


def _walk(a: int, b: int, n: int, wrap: bool) -> tuple[int, int]:
    """(direction, hops) from position ``a`` to ``b`` along one dimension of ``n`` positions: the
    direct way, or with wrap-around the shorter way round (ties: the positive direction)."""
    if not wrap or n <= 2:
        return (1 if b >= a else -1), abs(b - a)
    up, down = (b - a) % n, (a - b) % n
    return (1, up) if up <= down else (-1, down)


def _grid_steps(src: int, dst: int, cols: int, rows: int, wrap: bool) -> list[tuple[int, int, int, int]]:
    """The hops ``(x, y, next x, next y)`` of the dimension-ordered route (X, then Y) from cell
    ``src`` to cell ``dst`` of a ``cols`` x ``rows`` grid (cell ``i`` at ``i % cols``, ``i // cols``)."""
    x, y = src % cols, src // cols
    tx, ty = dst % cols, dst // cols
    steps = []
    step, n = _walk(x, tx, cols, wrap)
    for _ in range(n):
        nx = (x + step) % cols
        steps.append((x, y, nx, y))
        x = nx
    step, n = _walk(y, ty, rows, wrap)
    for _ in range(n):
        ny = (y + step) % rows
        steps.append((x, y, x, ny))
        y = ny
    return steps


class _GridBandwidth(dict):
    """Bytes per cycle of a grid's links by name: a tile's port (``("inject", t)``, ``("eject", t)``)
    or a hop between cells; looked up, not stored (a wafer-wide multicast names 1.7 million)."""

    def __init__(self, port_bpc: float, link_bpc: float):
        super().__init__()
        self.port_bpc, self.link_bpc = port_bpc, link_bpc

    def __missing__(self, g: tuple) -> float:
        return self.port_bpc if isinstance(g[0], str) else self.link_bpc


def _hops(a: int, b: np.ndarray, n: int, wrap: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_walk` from ``a`` to every position of ``b``: (directions, hops) arrays."""
    if not wrap or n <= 2:
        return np.where(b >= a, 1, -1), np.abs(b - a)
    up, down = (b - a) % n, (a - b) % n
    return np.where(up <= down, 1, -1), np.minimum(up, down)


def _tree_steps(src: int, dsts: np.ndarray, cols: int, rows: int, wrap: bool) -> tuple[list[tuple], int]:
    """The hops of the dimension-ordered multicast tree from cell ``src`` to cells ``dsts`` (the
    union of their :func:`_grid_steps` routes, each hop once) and its longest route's hop count.

    Built without walking every route: the X parts all run along the source's row, and those in one
    direction are prefixes of the longest; in each destination column, the Y parts in one direction
    are prefixes of the longest there. So the work is the tree's size (one hop per covered tile at
    most), not destinations x route length (a wafer-wide multicast: 850,000 x ~900)."""
    x, y = src % cols, src // cols
    dsts = sorted_unique(np.asarray(dsts, np.int64))
    tx, ty = dsts % cols, dsts // cols
    xdir, hx = _hops(x, tx, cols, wrap)
    ydir, hy = _hops(y, ty, rows, wrap)
    steps: list[tuple] = []
    for d in (1, -1):
        cx = x
        for _ in range(int(hx[xdir == d].max(initial=0))):
            nx = (cx + d) % cols
            steps.append((cx, y, nx, y))
            cx = nx
    for d in (1, -1):
        far = np.zeros(cols, np.int64)
        sel = ydir == d
        np.maximum.at(far, tx[sel], hy[sel])
        for c in np.flatnonzero(far).tolist():
            cy = y
            for _ in range(int(far[c])):
                ny = (cy + d) % rows
                steps.append((c, cy, c, ny))
                cy = ny
    return steps, int((hx + hy).max(initial=0))


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

    def exchange_cycles(self, bytes_in: np.ndarray, bytes_out: np.ndarray, rows_transfers=None, links=None):
        """Cycles and bounding tile per (row, chip) of ``[E, chips, tiles]`` per-tile bytes
        (``links``: :meth:`chip_link_peaks` of the per-tile totals when ``bytes_*`` are peaks)."""
        raise NotImplementedError

    def point_to_point_cycles(self, src: int, dst: int, nbytes: float) -> float:
        """Cycles to move ``nbytes`` from tile ``src`` to tile ``dst`` of one chip, alone."""
        raise NotImplementedError

    def link_peaks(self, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast=None) -> tuple[np.ndarray, np.ndarray]:
        """``(busiest link's bytes [E], longest route's hops [E])`` of one chip's ``[E, tiles]``
        per-tile totals, for a fabric whose exchange time depends on where the tiles are (``grid``
        not None): what :class:`ChipPeaks` keeps of the per-tile detail. ``broadcast``: bool [E],
        the rows whose receivers all take the same data (None: none)."""
        raise NotImplementedError

    def chip_link_peaks(self, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast=None) -> tuple | None:
        """:meth:`link_peaks` of every chip of ``[E, chips, tiles]`` arrays, as ``[E, chips]`` pairs."""
        if self.grid is None:
            return None
        per = [self.link_peaks(bytes_in[:, c], bytes_out[:, c], broadcast) for c in range(bytes_in.shape[1])]
        return np.stack([p[0] for p in per], axis=1), np.stack([p[1] for p in per], axis=1)

    def injected_bytes(self, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast=None) -> np.ndarray:
        """The bytes each tile's port injects in each exchange row (``[E, ..., tiles]`` per-tile
        totals; ``broadcast``: bool [E] or None): what the port term of the exchange reads. Here the
        totals themselves; a fabric that copies a broadcast row's data once per receiver says more
        (:meth:`MeshFabric.injected_bytes`)."""
        return bytes_out

    def reduce(self, rows: TileRows) -> ChipWork:
        """``rows`` reduced to chips (the contract is in the module docstring)."""
        sent = self.injected_bytes(rows.bytes_in, rows.bytes_out, rows.broadcast)
        peaks = rows.peaks()
        if sent is not rows.bytes_out:  # the ports inject copies; the bytes sent stay the totals
            copies = replace(rows, bytes_out=sent).peaks()
            peaks = replace(peaks, bytes_out=copies.bytes_out, out_tile=copies.out_tile)
        links = self.chip_link_peaks(rows.bytes_in, rows.bytes_out, rows.broadcast)
        if links is not None:
            peaks = replace(peaks, link_bytes=links[0], hops=links[1])
        return self.reduce_peaks(peaks, rows.transfers)

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
                routed = {r: (t.chip, t.src, t.dst, t.nbytes, t.group) for r, t in transfers.items()}
            args: tuple = (peaks.bytes_in[..., None], peaks.bytes_out[..., None], routed)
            if peaks.link_bytes is not None:  # a fabric without distance never gets them
                args += ((peaks.link_bytes, peaks.hops),)
            cyc, _ = self.exchange_cycles(*args)
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

    def exchange_cycles(self, bytes_in: np.ndarray, bytes_out: np.ndarray, rows_transfers=None, links=None):
        """Cycles and critical tile per (row, chip) for arrays shaped ``[E, chips, tiles]``."""
        peak, crit = _port_peak(bytes_in, bytes_out)
        return np.where(peak > 0, self.fixed + np.ceil(peak / self.bpc), 0.0), crit

    def point_to_point_cycles(self, src: int, dst: int, nbytes: float) -> float:
        return self.fixed + math.ceil(nbytes / self.bpc)


class MeshFabric(OnChipFabric):
    """2-D mesh with dimension-ordered (XY) routing; cost grows with hop distance and contention."""

    needs_transfers = True  # explicit tile-to-tile transfers are routed (link loads, hops)
    wraps = False  # a torus adds the wrap-around links

    def __init__(self, machine: Machine):
        f = machine.fabric
        self.cols, self.rows = f.cols, f.rows
        self.grid = (self.rows, self.cols)  # tile t sits at row t // cols, column t % cols
        self.hop = float(f.hop_cycles)
        self.link_bpc = float(f.link_bytes_per_cycle)
        self.fixed = float(machine.chip.exchange_fixed_cycles)
        self.port_bpc = float(machine.chip.exchange_bytes_per_cycle)
        self.tiles = machine.tiles_per_chip
        self.mean_hops = self._mean_hops(self.cols) + self._mean_hops(self.rows)
        self.multicast = bool(f.multicast)  # a broadcast row goes as one tree per sender

    def _mean_hops(self, n: int) -> float:
        """Mean hops along one dimension of ``n`` between two uniformly chosen positions:
        (n^2 - 1) / (3n) on a line."""
        return (n * n - 1) / (3 * n)

    def hops(self, src: int, dst: int) -> int:
        wrap = self.wraps
        return (
            _walk(src % self.cols, dst % self.cols, self.cols, wrap)[1]
            + _walk(src // self.cols, dst // self.cols, self.rows, wrap)[1]
        )

    def route(self, src: int, dst: int) -> tuple:
        """Directed links from tile ``src`` to tile ``dst`` (dimension order: X, then Y), with the
        source's injection port and the destination's ejection port at the ends."""
        return (("inject", src), *_grid_steps(src, dst, self.cols, self.rows, self.wraps), ("eject", dst))

    def transfer_cycles(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, group=None) -> float:
        """Cycles of one exchange phase of explicit transfers on one chip, starting together:
        ``fixed + max_i(drain_i + hops_i · hop_cycles)`` with the drain times of the fluid rule
        (:func:`tilesim.machine.fluid.drain_times`) over the mesh links and the tiles' ports, so flows
        that share a link or a port share its bandwidth. Transfers of one ``group`` (>= 0) are
        one multicast: one flow over the union of their routes (its tree: each link once, an
        ejection port per destination), as far as its farthest destination."""
        group = np.full(src.shape, -1) if group is None else np.asarray(group)
        routes: list[tuple] = []
        hops: list[int] = []
        sizes: list[float] = []
        for i in np.flatnonzero(group < 0).tolist():
            routes.append(self.route(int(src[i]), int(dst[i])))
            hops.append(len(routes[-1]) - 2)  # the links between the two ports
            sizes.append(float(nbytes[i]))
        for g in np.unique(group[group >= 0]).tolist():
            members = np.flatnonzero(group == g)
            s = int(src[members[0]])  # one multicast, one source (tilesim.program.dense checks it)
            dsts = sorted_unique(dst[members])
            tree, far = _tree_steps(s, dsts, self.cols, self.rows, self.wraps)
            ejects = (("eject", d) for d in dsts.tolist())
            routes.append((("inject", s), *tree, *ejects))  # the tree: each link once
            hops.append(far)
            sizes.append(float(nbytes[members[0]]))
        done = drain_times(routes, sizes, _GridBandwidth(self.port_bpc, self.link_bpc))
        done = done * (1.0 - _ROUND_OFF)  # a drain at 246 + 3e-14 is 246 cycles, not 247
        return self.fixed + float(np.max(np.ceil(done) + np.asarray(hops, np.float64) * self.hop, initial=0.0))

    def injected_bytes(self, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast=None) -> np.ndarray:
        """A broadcast row timed as unicasts (a fabric without multicast) sends every receiver its
        own copy: sender ``s`` injects ``out_s · Σ in / Σ out`` (over the chip's tiles) — the copies
        its :meth:`row_flows` carry, ``R·out_s`` when all ``R`` receivers take everything — not the
        ``out_s`` its totals say. Every other row (and every row on a fabric that multicasts: one
        tree per sender) injects its totals. ``[E, ..., tiles]`` arrays; ``broadcast``: bool [E]."""
        if self.multicast or broadcast is None or not np.any(broadcast):
            return bytes_out
        rows = np.flatnonzero(np.asarray(broadcast, bool))
        out = np.array(bytes_out, dtype=np.float64)
        sent = out[rows].sum(axis=-1, keepdims=True)
        got = np.asarray(bytes_in, np.float64)[rows].sum(axis=-1, keepdims=True)
        out[rows] *= np.divide(got, sent, out=np.ones_like(sent), where=sent > 0)
        return out

    def trees(self, broadcast) -> np.ndarray | None:
        """The rows whose traffic goes as multicast trees: the ``broadcast`` rows (bool [E]) on a
        fabric that multicasts; None: every row as unicasts."""
        if not self.multicast or broadcast is None:
            return None
        return np.asarray(broadcast, bool)

    def row_flows(self, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast: bool = False) -> tuple:
        """The transfers ``(src, dst, bytes, group)`` one exchange row of one chip's per-tile totals
        (``[tiles]`` each) stands for: proportional unicasts, or for a ``broadcast`` row on a fabric
        that multicasts the senders' multicast trees (:func:`tilesim.machine.gridload.proportional_flows`)."""
        return proportional_flows(bytes_in, bytes_out, self.multicast and bool(broadcast))

    def row_event_cycles(self, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast: bool = False) -> float:
        """Cycles of one exchange row of one chip's per-tile totals through the event model: its
        :meth:`row_flows` drained together by the fluid rule (:meth:`transfer_cycles`); 0 when nothing
        moves. The reference the closed form of :meth:`exchange_cycles` is bounded against (module
        docstring)."""
        src, dst, nbytes, group = self.row_flows(bytes_in, bytes_out, broadcast)
        return self.transfer_cycles(src, dst, nbytes, group) if src.size else 0.0

    def link_peaks(self, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast=None) -> tuple[np.ndarray, np.ndarray]:
        """The busiest link and the longest route of each row's per-tile totals under proportional
        traffic, a ``broadcast`` row as multicast trees where the fabric multicasts
        (:func:`tilesim.machine.gridload.grid_link_peaks`)."""
        return grid_link_peaks(bytes_in, bytes_out, self.rows, self.cols, self.wraps, self.trees(broadcast))

    def link_totals(self, bytes_in: np.ndarray, bytes_out: np.ndarray, transfers=(), broadcast=None) -> GridLinks:
        """Bytes per directed link of one chip over a program: the rows ``[E, tiles]`` timed from
        per-tile totals (proportional traffic; ``broadcast`` rows as trees where the fabric
        multicasts) plus explicit ``transfers`` ``(src, dst, bytes, group)`` along their routes, a
        multicast group's tree once (the tiles' injection and ejection ports are not links of the grid)."""
        links = grid_link_totals(bytes_in, bytes_out, self.rows, self.cols, self.wraps, self.trees(broadcast))
        trees: dict = {}
        for k, (src, dst, nbytes, group) in enumerate(transfers):
            trees.setdefault(("multicast", group) if group >= 0 else ("unicast", k), (int(src), nbytes, []))[2].append(
                dst
            )
        for src, nbytes, dsts in trees.values():
            for step in _tree_steps(src, np.asarray(dsts, np.int64), self.cols, self.rows, self.wraps)[0]:
                name, y, x = link_slot(step, self.rows, self.cols)
                getattr(links, name)[y, x] += nbytes
        return links

    def exchange_cycles(self, bytes_in: np.ndarray, bytes_out: np.ndarray, rows_transfers=None, links=None):
        """Cycles and bounding tile per (row, chip) of ``[E, chips, tiles]`` bytes. ``rows_transfers``:
        optional {row: (chip, src_local, dst_local, bytes[, group])} explicit transfers (group:
        multicast ids, -1 point to point), routed one by one. Other rows are timed from the per-tile
        totals: the busier of the busiest port and the busiest link (proportional traffic,
        :mod:`tilesim.machine.gridload`; ``links`` when ``bytes_*`` are already chip peaks) plus the longest
        route's hops; with neither per-tile totals nor ``links``, the grid's mean distance."""
        peak, crit = _port_peak(bytes_in, bytes_out)
        if links is None and bytes_in.shape[2] == self.tiles:
            links = self.chip_link_peaks(bytes_in, bytes_out)
        if links is None:
            drain, hops = np.ceil(peak / self.port_bpc), np.full(peak.shape, self.mean_hops)
        else:
            drain = np.ceil(np.maximum(peak / self.port_bpc, links[0] / self.link_bpc))
            hops = np.where(links[1] >= 0, links[1], self.mean_hops)
        cycles = np.where(peak > 0, self.fixed + drain + hops * self.hop, 0.0)
        for row, t in (rows_transfers or {}).items():
            chip, src, dst, nb = t[:4]
            group = t[4] if len(t) > 4 and t[4] is not None else np.full(chip.shape, -1)
            for c in np.unique(chip):
                m = chip == c
                cycles[row, c] = self.transfer_cycles(src[m], dst[m], nb[m], group[m])
        return cycles, crit

    def point_to_point_cycles(self, src: int, dst: int, nbytes: float) -> float:
        bpc = min(self.port_bpc, self.link_bpc) if src != dst else self.port_bpc
        return self.fixed + math.ceil(nbytes / bpc) + self.hops(src, dst) * self.hop


class TorusFabric(MeshFabric):
    """2-D torus: the mesh with wrap-around links in both dimensions; a route goes the shorter
    way round in each dimension (ties: the positive direction), X first.

    Tenstorrent's two NoCs are unidirectional tori in opposite directions; a kernel that picks the
    NoC with the shorter route sees this torus (the assumption is named in EVIDENCE.md)."""

    wraps = True

    def _mean_hops(self, n: int) -> float:
        """Mean shorter-way-round distance on a ring of ``n``: ``floor(n^2 / 4) / n``."""
        return (n * n // 4) / n


FABRICS: dict[str, type[OnChipFabric]] = {"all-to-all": AllToAllFabric, "mesh": MeshFabric, "torus": TorusFabric}
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


def rectangle_tiles(cols: int, x0: int, y0: int, x1: int, y1: int, chip: int = 0, tiles_per_chip: int = 0) -> list[int]:
    """Global ids of the tiles in columns ``x0..x1`` and rows ``y0..y1`` (inclusive) of a chip's
    ``cols``-wide grid (tile ``t`` at row ``t // cols``, column ``t % cols``): the destinations of a
    rectangular multicast (:meth:`tilesim.program.ProgramBuilder.superstep`)."""
    base = chip * tiles_per_chip
    return [
        base + y * cols + x for y in range(min(y0, y1), max(y0, y1) + 1) for x in range(min(x0, x1), max(x0, x1) + 1)
    ]


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


class ChipLinks(Protocol):
    """What the engine needs of a system's chip-to-chip links: directed link groups with their
    bandwidth in bytes per cycle (``bw``), the route between two chips as a tuple of groups, and
    the latency of one hop in cycles."""

    bw: dict
    latency_cycles: float

    def route(self, src: int, dst: int) -> tuple:
        """The link groups a flow from chip ``src`` to chip ``dst`` crosses, in order."""
        ...


class EthernetLinks:
    """Chips on a line, a ring, a 2-D mesh or a 2-D torus of point-to-point links (Tenstorrent's
    Ethernet; any machine whose chips talk only to their neighbours).

    Chip ``i`` sits at column ``i % cols``, row ``i // cols`` (``cols`` = ``system.grid_cols`` on a
    mesh or torus, every chip on a line or ring). Neighbours are joined in each direction by
    ``system.links_per_neighbour`` links of ``link_bytes_per_s · link_efficiency``; a ring or torus
    adds the wrap-around of each dimension with more than two chips. Routes are dimension-ordered
    (X, then Y), the shorter way round where a dimension wraps (ties: the positive direction);
    groups are ``("eth", from_chip, to_chip)``. Each hop adds ``link_latency_s``. A flow that
    crosses several chips is forwarded chip by chip (store-and-forward of packets: the drain is set
    by the busiest link, the latency by the hops), which is also how a multicast along a line runs:
    one flow to its farthest chip carries the bytes over every link once.
    """

    def __init__(self, machine: Machine):
        s = machine.system
        self.chips = machine.chips
        grid = s.topology in ("mesh", "torus")
        self.cols = s.grid_cols if grid else self.chips
        self.rows = -(-self.chips // self.cols)
        self.wrap = s.topology in ("ring", "torus")
        per_group = s.links_per_neighbour * s.link_bytes_per_s * s.link_efficiency / machine.clock_hz
        self.latency_cycles = s.link_latency_s * machine.clock_hz
        self.bw: dict[tuple, float] = {}
        for c in range(self.chips):
            x, y = c % self.cols, c // self.cols
            for nx, ny, n, d in ((x + 1, y, self.cols, x + 1), (x, y + 1, self.rows, y + 1)):
                if d >= n:  # past the edge: the wrap-around where the dimension has more than two
                    if not (self.wrap and n > 2):
                        continue
                    nx, ny = nx % self.cols, ny % self.rows
                other = ny * self.cols + nx
                if other < self.chips and other != c:
                    self.bw[("eth", c, other)] = self.bw[("eth", other, c)] = per_group
        self._routes: dict[tuple[int, int], tuple] = {}

    def route(self, src: int, dst: int) -> tuple:
        key = (src, dst)
        if key not in self._routes:
            c = self.cols
            steps = _grid_steps(src, dst, c, self.rows, self.wrap)
            self._routes[key] = tuple(("eth", y * c + x, ny * c + nx) for x, y, nx, ny in steps)
        return self._routes[key]

    def hops(self, src: int, dst: int) -> int:
        """Links a flow from ``src`` to ``dst`` crosses."""
        return len(self.route(src, dst))


CHIP_LINKS: dict[str, Callable[[Machine], ChipLinks]] = {
    "ladder": LadderLinks,
    "line": EthernetLinks,
    "ring": EthernetLinks,
    "mesh": EthernetLinks,
    "torus": EthernetLinks,
}
"""Chip-to-chip link models by ``[system] topology`` of a machine file."""


def chip_links(machine: Machine) -> ChipLinks:
    """The chip-to-chip links of ``machine`` (:data:`CHIP_LINKS` by ``system.topology``)."""
    return CHIP_LINKS[machine.system.topology](machine)
