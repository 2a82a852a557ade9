"""The chip timeline in closed form: every part of the engine's time model that needs no events.

:mod:`tilesim.engine.events` states the time model. This module computes what follows from it without a
simulation clock:

* the per-(superstep, chip) costs: sync cycles of each chip's sync group (:func:`sync_cycles`),
  and the *tail* of a superstep, from the release to its end (:func:`tails`): the later of the
  on-chip exchange and the chip's cross-chip flows, then host transfers;
* cross-chip flows of a superstep that syncs all chips: they start together and share the link
  groups only with each other, so their completion is one fluid batch (:func:`fluid_batch`):
  every active flow gets ``min over its route of bandwidth / flows sharing`` (Poplar's
  global-exchange constraint, ipu-hardware.md §3.2), recomputed whenever a flow finishes, plus
  the link latency per hop;
* runs of supersteps with one sync scope (:func:`runs`): once every member of a sync group has
  entered the run, the group's timeline is a cumulative sum
  (``release[s] = release[s-1] + max_c(tail[s-1, c] + compute[s, c]) + sync[s]``),
  computed for all runs at once (:func:`run_offsets`) and laid out per chip by
  :func:`fill_runs` once the engine knows when each run starts;
* a program in which every superstep syncs all chips has no events at all
  (:func:`global_makespan_cycles`).

What needs events (partial sync groups running apart, their flows overlapping in time on the
links, and the entry of each run) stays in :mod:`tilesim.engine.events`, the one module that imports simpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple

import numpy as np

from tilesim.machine.description import Machine
from tilesim.machine.fabric import ChipLinks, chip_links
from tilesim.machine.fluid import DRAINED_BYTES, drain_times, fair_rates
from tilesim.outputs.records import ChipTimeline
from tilesim.program import SYNC_ALL, SYNC_CHIP

__all__ = [
    "Flow",
    "Tails",
    "Run",
    "RunOffsets",
    "RunStarts",
    "DRAINED_BYTES",
    "fair_rates",
    "fluid_batch",
    "flows_by_step",
    "sync_groups",
    "sync_cycles",
    "tails",
    "global_makespan_cycles",
    "runs",
    "run_offsets",
    "fill_runs",
    "links_of",
]


class Flow(NamedTuple):
    """Bytes sent from one chip to another over the links in one superstep. A named tuple: made,
    hashed and compared in C, so that supersteps with equal flows share one solution cheaply (a
    mapping search times thousands of programs); read it by name."""

    src_chip: int
    dst_chip: int
    nbytes: float


def flows_by_step(step, src, dst, nbytes) -> dict[int, tuple[Flow, ...]]:
    """The flows of :class:`~tilesim.program.Program` (its ``flow_*`` columns: superstep, source
    chip, destination chip, bytes) grouped by superstep: supersteps in order of first
    appearance, each superstep's flows in program order."""
    every = zip(np.asarray(src).tolist(), np.asarray(dst).tolist(), np.asarray(nbytes, np.float64).tolist())
    flows = list(map(tuple.__new__, repeat(Flow), every))  # Flow(a, b, n) without a Python call each
    out: dict[int, list[Flow]] = {}
    for s, f in zip(np.asarray(step).tolist(), flows):
        out.setdefault(s, []).append(f)
    return {s: tuple(fl) for s, fl in out.items()}


def fluid_batch(flows: tuple[Flow, ...], links: ChipLinks) -> tuple[np.ndarray, dict]:
    """Flows that all start together and share the link groups only with each other.

    Returns each flow's completion in cycles after the start (the fluid rule of
    :mod:`tilesim.machine.fluid`, plus ``links.latency_cycles`` per hop) and the bytes per link group."""
    routes = [links.route(f.src_chip, f.dst_chip) for f in flows]
    group_bytes: dict[tuple, float] = {}
    for f, route in zip(flows, routes):
        for g in route:
            group_bytes[g] = group_bytes.get(g, 0.0) + f.nbytes
    done = drain_times(routes, [f.nbytes for f in flows], links.bw)
    done += links.latency_cycles * np.array([len(r) for r in routes], np.float64)
    return done, group_bytes


@lru_cache(maxsize=16)
def links_of(machine: Machine) -> ChipLinks:
    """The machine's link groups and routes (built once per machine; :func:`tilesim.machine.fabric.chip_links`)."""
    return chip_links(machine)


@lru_cache(maxsize=4096)
def _batch(machine: Machine, flows: tuple[Flow, ...]) -> tuple[np.ndarray, dict]:
    """:func:`fluid_batch` on the machine's links, remembered (a step repeats its flows)."""
    return fluid_batch(flows, links_of(machine))


def sync_groups(chips: int, partitions: tuple) -> dict[int, np.ndarray]:
    """Group id of every chip for every sync scope code of a program (``SYNC_CHIP``, ``SYNC_ALL``
    and ``k`` = ``partitions[k - 1]``, see :mod:`tilesim.program`)."""
    group_of: dict[int, np.ndarray] = {SYNC_CHIP: np.arange(chips), SYNC_ALL: np.zeros(chips, np.int64)}
    for k, part in enumerate(partitions, start=1):
        group_of[k] = np.asarray(part).astype(np.int64)
    return group_of


def sync_cycles(machine: Machine, scope: np.ndarray, group_of: dict, sync_extra) -> np.ndarray:
    """``[S, C]`` cycles of every superstep's sync on every chip: the sync of the chip's group
    (:meth:`Machine.group_sync_cycles` of its size) plus the superstep's ``sync_extra``."""
    C = machine.chips
    S = scope.shape[0]
    cost = {}
    for code, g in group_of.items():
        sizes = np.bincount(g)[g]
        cost[code] = np.array([machine.group_sync_cycles(int(n)) for n in sizes], np.float64)
    sync = np.empty((S, C))
    for code in np.unique(scope):
        sync[scope == code] = cost[int(code)][None, :]
    sync += np.asarray(sync_extra, np.float64)[:, None]
    return sync


@dataclass(frozen=True, eq=False, slots=True)
class Tails:
    """What follows the release of every superstep on every chip (``[S, C]`` cycles)."""

    exchange: np.ndarray  # on-chip exchange, including the program's exchange extra
    links_end: np.ndarray  # release -> exchange and the chip's batch-solved flows done
    host: np.ndarray  # host transfers after that
    flows: dict  # superstep -> tuple[Flow, ...]
    events: np.ndarray  # bool [S]: flows under a partial sync, left to the event model
    link_group_bytes: dict  # bytes per link group of the batch-solved flows

    @property
    def after_release(self) -> np.ndarray:
        """Release -> end of the superstep, for supersteps without event-model flows."""
        return self.links_end + self.host


def tails(
    ex: np.ndarray,
    machine: Machine,
    scope_all: np.ndarray,
    exchange_extra,
    flows: dict[int, tuple[Flow, ...]],
    host_tx: tuple,
) -> Tails:
    """The :class:`Tails` of a program reduced to chips: ``ex`` [S, C] on-chip exchange cycles,
    ``scope_all`` [S] which supersteps sync all chips (their flows are solved as batches),
    ``exchange_extra`` [S] cycles, ``flows`` by superstep (:func:`flows_by_step`) and ``host_tx``
    = (superstep, chip, bytes) arrays of host transfers (bandwidth and latency of ``machine.system``)."""
    S, C = ex.shape
    clock = machine.clock_hz
    host_step, host_chip, host_bytes = host_tx
    ex = ex + np.asarray(exchange_extra, np.float64)[:, None]
    host = np.zeros((S, C))
    if host_step.size:
        sysm = machine.system
        np.add.at(host, (host_step, host_chip), host_bytes / sysm.host_bytes_per_s * clock)
        host[host > 0] += sysm.host_latency_s * clock
    flow_done = np.zeros((S, C))
    group_bytes: dict[tuple, float] = {}
    events = np.zeros(S, bool)
    same: dict[tuple, list] = {}  # a step's flows -> the steps that have them (time steps repeat)
    for s, fl in flows.items():
        if scope_all[s]:
            same.setdefault(fl, []).append(s)
        else:
            events[s] = True
    for fl, steps in same.items():
        done, gb = _batch(machine, fl)
        ss = np.array(steps)
        for f, d in zip(fl, done):
            for c in (f.src_chip, f.dst_chip):
                flow_done[ss, c] = np.maximum(flow_done[ss, c], d)
        for g, v in gb.items():
            group_bytes[g] = group_bytes.get(g, 0.0) + v * len(steps)
    return Tails(ex, np.maximum(ex, flow_done), host, flows, events, group_bytes)


def global_makespan_cycles(comp: np.ndarray, sync: np.ndarray, tl: Tails) -> float:
    """Cycles of a program in which every superstep syncs all chips (or there is one chip):
    ``sum_s (max_c(tail[s-1, c] + comp[s, c]) + sync[s]) + max_c tail[S-1, c]``; ``sync`` [S]."""
    tail = tl.after_release
    X = comp.copy()
    X[1:] += tail[:-1]
    return float((X.max(axis=1) + sync).sum() + tail[-1].max())


@dataclass(frozen=True, slots=True)
class Run:
    """Supersteps ``first .. stop-1`` with one sync scope; ``events``: one superstep whose flows
    run under a partial sync, simulated event by event."""

    first: int
    stop: int
    scope: int
    events: bool


def runs(scope: np.ndarray, events: np.ndarray) -> list[Run]:
    """Split supersteps into :class:`Run` s: a new run where the scope changes, and every event
    superstep a run of its own."""
    S = scope.shape[0]
    if S == 0:
        return []
    cut = np.flatnonzero((scope[1:] != scope[:-1]) | events[1:] | events[:-1]) + 1
    bounds = np.concatenate([[0], cut, [S]])
    return [Run(int(a), int(b), int(scope[a]), bool(events[a])) for a, b in zip(bounds[:-1], bounds[1:])]


@dataclass(frozen=True, eq=False, slots=True)
class RunOffsets:
    """Every run's timeline relative to its first release (vectorised over supersteps)."""

    run_of: np.ndarray  # [S] index of the superstep's run
    is_first: np.ndarray  # bool [S]: first superstep of its run
    release: np.ndarray  # [S, C] release[s] - release[first superstep of the run]
    arriver: np.ndarray  # [S, C] chip that arrived last (inside a run)
    end: np.ndarray  # [nruns, C] end of the run's last superstep - its first release


def run_offsets(
    comp: np.ndarray, sync: np.ndarray, after_release: np.ndarray, scope: np.ndarray, group_of: dict, rs: list[Run]
) -> RunOffsets:
    """:class:`RunOffsets` of the runs ``rs``: ``comp``, ``sync``, ``after_release`` [S, C] cycles,
    ``scope`` [S] codes, ``group_of`` from :func:`sync_groups`."""
    S, C = comp.shape
    run_of = np.empty(S, np.int64)
    is_first = np.zeros(S, bool)
    for i, r in enumerate(rs):
        run_of[r.first : r.stop] = i
        is_first[r.first] = True
    X = comp.copy()  # from the previous release to this arrival
    X[1:] += after_release[:-1]
    Mx = np.empty((S, C))  # the group's latest arrival (relative)
    Ax = np.empty((S, C), np.int64)  # which chip arrived last
    for code in np.unique(scope):
        rows = np.flatnonzero(scope == code)
        g = group_of[int(code)]
        for gid in np.unique(g):
            members = np.flatnonzero(g == gid)
            if members.size == 1:
                Mx[rows, members[0]] = X[rows, members[0]]
                Ax[rows, members[0]] = members[0]
                continue
            sub = X[np.ix_(rows, members)]
            a = sub.argmax(axis=1)
            Mx[np.ix_(rows, members)] = sub[np.arange(rows.size), a][:, None]
            Ax[np.ix_(rows, members)] = members[a][:, None]
    inc = np.where(is_first[:, None], 0.0, Mx + sync)
    cs = np.cumsum(inc, axis=0)
    first = np.array([r.first for r in rs], np.int64)
    rel = cs - cs[first[run_of]]
    last = np.array([r.stop - 1 for r in rs], np.int64)
    return RunOffsets(run_of, is_first, rel, Ax, rel[last] + after_release[last])


@dataclass(frozen=True, eq=False, slots=True)
class RunStarts:
    """How each run begins on each chip (``[nruns, C]``), found by the engine's events."""

    entry: np.ndarray  # the chip enters the run (starts its first compute)
    release: np.ndarray  # the run's first sync releases the chip
    arriver: np.ndarray  # int: the chip that arrived last at that sync

    @classmethod
    def zeros(cls, nruns: int, chips: int) -> RunStarts:
        """Arrays to fill."""
        return cls(np.zeros((nruns, chips)), np.zeros((nruns, chips)), np.zeros((nruns, chips), np.int64))


def fill_runs(tl: ChipTimeline, comp: np.ndarray, tails_: Tails, off: RunOffsets, starts: RunStarts) -> None:
    """Write the timeline of every superstep outside the event model into ``tl`` (in place):
    the run's first release (``starts``) plus the offsets ``off``; ``comp`` [S, C] cycles."""
    normal = ~tails_.events
    if not normal.any():
        return
    rows = np.flatnonzero(normal)
    run = off.run_of[rows]
    tl.release[rows] = starts.release[run] + off.release[rows]
    tl.links_end[rows] = tl.release[rows] + tails_.links_end[rows]
    tl.end[rows] = tl.links_end[rows] + tails_.host[rows]
    first = rows[off.is_first[rows]]
    inner = rows[~off.is_first[rows]]
    tl.start[first] = starts.entry[off.run_of[first]]
    tl.start[inner] = tl.end[inner - 1]
    tl.arrive[rows] = tl.start[rows] + comp[rows]
    tl.arriver[inner] = off.arriver[inner]
    tl.arriver[first] = starts.arriver[off.run_of[first]]
