"""The discrete-event engine: chips as simpy processes, syncs as barriers, links as shared pipes.

Time model of superstep ``s`` on chip ``c`` (all in cycles of the chip clock)::

    start  = end of superstep s-1 on chip c
    arrive = start + compute[s, c]            compute[s, c] = max over the chip's tiles
    release = max(arrive of the sync group) + sync cost   (chip sync, or the global hops rule)
    exch_end = release + exchange[s, c]        on-chip fabric (all-to-all or mesh)
    links_end = max(exch_end, completion of the chip's cross-chip flows)
    end = links_end + host[s, c]

Per-tile work is reduced once, vectorised (one pass per per-tile array). The event-driven part
runs over chips. A run of supersteps with one sync scope needs no events inside it: once every
member of a sync group has entered the run, the group's timeline is a cumulative sum, computed
in closed form (``release[s] = release[s-1] + max_c(tail[s-1,c] + compute[s,c]) + sync[s]``,
``tail`` = the later of exchange and link flows, plus host transfers). Cross-chip flows go
through a fluid model of the link groups: every active flow gets ``min over its route of
bandwidth / flows sharing`` (Poplar's global-exchange constraint, ipu-hardware.md §3.2),
recomputed whenever a flow starts or finishes, plus the link latency per hop. Under a sync of
all chips a superstep's flows share the links only with each other, so their completion is
solved once per distinct set of flows (:func:`_fluid_batch`); under partial syncs, groups run
apart and their flows may overlap in time, so those supersteps go event by event (simpy).
:func:`makespan_s` runs the same timeline on a program already reduced to chips.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import simpy

from tilesim.errors import ConfigError, config_message
from tilesim.fabric import LadderLinks, make_fabric
from tilesim.machine import Machine
from tilesim.program import SYNC_ALL, SYNC_CHIP, Program
from tilesim.records import SimResult

__all__ = ["simulate", "makespan_s"]


_DRAINED_BYTES = 1e-6            # a flow with this little left has finished (float round-off)


def _fair_rates(paths: list, bw: dict) -> list:
    """Bytes per cycle of each flow (given by its route of link groups): every group's bandwidth
    split evenly among the flows on it, a flow limited by its busiest group."""
    share: dict[tuple, int] = {}
    for path in paths:
        for g in path:
            share[g] = share.get(g, 0) + 1
    return [min(bw[g] / share[g] for g in path) for path in paths]


class _FluidLinks:
    """Flows sharing directed link groups; bandwidth split evenly among the flows on a group."""

    def __init__(self, env: simpy.Environment, ladder: LadderLinks):
        self.env, self.ladder = env, ladder
        self.active: dict[int, list] = {}
        self.next_id = 0
        self.last = 0.0
        self.wake = env.event()
        self.group_bytes: dict[tuple, float] = {}
        env.process(self._run())

    def start_later(self, delay: float, flows: list[tuple]) -> list:
        events = [self.env.event() for _ in flows]
        self.env.process(self._starter(delay, flows, events))
        return events

    def _starter(self, delay, flows, events):
        if delay > 0:
            yield self.env.timeout(delay)
        self._advance()
        for (src, dst, nbytes), ev in zip(flows, events):
            path = self.ladder.route(src, dst)
            for g in path:
                self.group_bytes[g] = self.group_bytes.get(g, 0.0) + nbytes
            self.active[self.next_id] = [float(nbytes), path, ev, 0.0]
            self.next_id += 1
        if not self.wake.triggered:
            self.wake.succeed()

    def _advance(self):
        dt = self.env.now - self.last
        if dt > 0:
            for f in self.active.values():
                f[0] -= f[3] * dt
        self.last = self.env.now

    def _finish(self, ev, hops):
        delay = self.ladder.latency_cycles * hops
        if delay > 0:
            self.env.timeout(delay).callbacks.append(lambda _e, ev=ev: ev.succeed())
        else:
            ev.succeed()

    def _run(self):
        while True:
            if not self.active:
                yield self.wake
                self.wake = self.env.event()
                continue
            self._advance()
            for fid in [k for k, f in self.active.items() if f[0] <= _DRAINED_BYTES]:
                f = self.active.pop(fid)
                self._finish(f[2], len(f[1]))
            if not self.active:
                continue
            flows = list(self.active.values())
            for f, rate in zip(flows, _fair_rates([f[1] for f in flows], self.ladder.bw)):
                f[3] = rate
            t_next = min(f[0] / f[3] for f in flows)
            res = yield self.env.any_of([self.wake, self.env.timeout(t_next)])
            if self.wake in res:
                self.wake = self.env.event()


class _Segment:
    __slots__ = ("s0", "s1", "scope", "special")

    def __init__(self, s0, s1, scope, special):
        self.s0, self.s1, self.scope, self.special = s0, s1, scope, special


def _segments(scope: np.ndarray, special: np.ndarray) -> list[_Segment]:
    S = scope.shape[0]
    if S == 0:
        return []
    cut = np.flatnonzero((scope[1:] != scope[:-1]) | special[1:] | special[:-1]) + 1
    bounds = np.concatenate([[0], cut, [S]])
    return [_Segment(int(a), int(b), int(scope[a]), bool(special[a])) for a, b in zip(bounds[:-1], bounds[1:])]


def _fluid_batch(flows: list[tuple], ladder: LadderLinks) -> tuple[np.ndarray, dict]:
    """Flows that all start together and share the link groups only with each other (a
    superstep under a sync of all chips): each flow's completion (cycles after the start,
    including the link latency per hop) by the same fluid rule as :class:`_FluidLinks`, and
    the bytes per link group."""
    remaining = np.array([f[2] for f in flows], np.float64)
    paths = [ladder.route(f[0], f[1]) for f in flows]
    group_bytes: dict[tuple, float] = {}
    for f, path in zip(flows, paths):
        for g in path:
            group_bytes[g] = group_bytes.get(g, 0.0) + f[2]
    done = np.zeros(len(flows))
    now = 0.0
    active = [i for i in range(len(flows)) if remaining[i] > _DRAINED_BYTES]
    while active:
        rates = _fair_rates([paths[i] for i in active], ladder.bw)
        dt = min(remaining[i] / r for i, r in zip(active, rates))
        now += dt
        for i, r in zip(active, rates):
            remaining[i] -= r * dt
        done[[i for i in active if remaining[i] <= _DRAINED_BYTES]] = now
        active = [i for i in active if remaining[i] > _DRAINED_BYTES]
    done += ladder.latency_cycles * np.array([len(p) for p in paths], np.float64)
    return done, group_bytes


@lru_cache(maxsize=16)
def _ladder(machine: Machine) -> LadderLinks:
    return LadderLinks(machine)


@lru_cache(maxsize=4096)
def _batch(machine: Machine, flows: tuple) -> tuple:
    """:func:`_fluid_batch` on the machine's links, remembered (a step repeats its flows)."""
    return _fluid_batch(list(flows), _ladder(machine))


def _reduce_tiles(program: Program, machine: Machine):
    """Per (superstep, chip): the slowest tile's compute and the on-chip exchange cycles, with
    the tiles responsible, and the on-chip bytes per superstep."""
    C, T = machine.chips, machine.tiles_per_chip
    S = program.supersteps
    comp3 = program.compute_cycles.reshape(S, C, T)
    crit_tile = comp3.argmax(axis=2)
    comp = np.take_along_axis(comp3, crit_tile[..., None], 2)[..., 0].astype(np.float64)
    ex = np.zeros((S, C))
    ex_tile = np.zeros((S, C), np.int64)
    bytes_onchip = np.zeros(S)
    has_ex = program.exchange_row >= 0
    if has_ex.any():
        E = program.bytes_in.shape[0]
        rows_x = None
        if program.transfer_step.size and machine.fabric.kind == "mesh":
            rows_x = {}
            erow_of = program.exchange_row[program.transfer_step]
            for r in np.unique(erow_of):
                m = erow_of == r
                src, dst = program.transfer_src[m], program.transfer_dst[m]
                rows_x[int(r)] = (src // T, src % T, dst % T, program.transfer_bytes[m])
        cyc, tile = make_fabric(machine).exchange_cycles(program.bytes_in.reshape(E, C, T),
                                                         program.bytes_out.reshape(E, C, T), rows_x)
        rows = program.exchange_row[has_ex]
        ex[has_ex] = cyc[rows]
        ex_tile[has_ex] = tile[rows]
        row_bytes = program.bytes_out.sum(axis=1).astype(np.float64)
        bytes_onchip[has_ex] = row_bytes[rows]
    return comp, crit_tile, ex, ex_tile, bytes_onchip


def simulate(program: Program, machine: Machine, *, keep_timeline: bool = True) -> SimResult:
    """Time ``program`` on ``machine``.

    Raises
    ------
    ConfigError
        The program was built for another number of chips or tiles per chip.
    """
    C, T = machine.chips, machine.tiles_per_chip
    if (program.chips, program.tiles_per_chip) != (C, T):
        raise ConfigError(config_message(
            "program shape", f"{program.chips} chips x {program.tiles_per_chip} tiles",
            f"machine {machine.name} has {C} chips x {T} tiles",
            "build the program for this machine (or pass --chips to match)"))
    comp, crit_tile, ex, ex_tile, bytes_onchip = _reduce_tiles(program, machine)
    tl = _timeline(comp, ex, machine, program.sync_scope, program.partitions, program.sync_extra_cycles,
                   program.exchange_extra_cycles, (program.flow_step, program.flow_src, program.flow_dst,
                                                   program.flow_bytes),
                   (program.host_step, program.host_chip, program.host_bytes))
    return SimResult.from_timeline(
        program=program, machine=machine, comp=comp, ex=tl["ex"], crit_tile=crit_tile, ex_tile=ex_tile,
        t_start=tl["t_start"], t_arrive=tl["t_arrive"], t_release=tl["t_release"], t_links=tl["t_links"],
        t_end=tl["t_end"], arriver=tl["arriver"], bytes_onchip=bytes_onchip,
        link_group_bytes=tl["link_group_bytes"], keep_timeline=keep_timeline)


def makespan_s(comp: np.ndarray, ex: np.ndarray, machine: Machine, sync_scope: np.ndarray, *,
               partitions: tuple = (), sync_extra: np.ndarray | None = None,
               exchange_extra: np.ndarray | None = None, flows: tuple | None = None,
               host: tuple | None = None) -> float:
    """Seconds of a program already reduced to chips: ``comp`` / ``ex`` [S, C] are the slowest
    tile's compute and the on-chip exchange cycles (what :func:`simulate` derives from the tiles);
    ``flows`` = (step, src chip, dst chip, bytes) and ``host`` = (step, chip, bytes) arrays as in
    :class:`Program`. Same timeline as :func:`simulate`, for callers that evaluate many programs
    (a mapping search) and need only the total."""
    S = comp.shape[0]
    z = np.zeros(S)
    e = (np.zeros(0, np.int64),) * 3 + (np.zeros(0),)
    scope = np.asarray(sync_scope)
    if S and (machine.chips == 1 or (scope == SYNC_ALL).all()):
        # every superstep syncs the whole machine: no chip runs ahead, and the timeline is the
        # closed form of _timeline's runs: sum_s (max_c(tail[s-1, c] + comp[s, c]) + sync[s]) + max_c tail[S-1]
        return _global_makespan(np.asarray(comp, np.float64), np.asarray(ex, np.float64), machine,
                                z if sync_extra is None else sync_extra, z if exchange_extra is None else exchange_extra,
                                e if flows is None else flows, e[1:] if host is None else host)
    tl = _timeline(np.asarray(comp, np.float64), np.asarray(ex, np.float64), machine, np.asarray(sync_scope),
                   partitions, z if sync_extra is None else sync_extra, z if exchange_extra is None else exchange_extra,
                   e if flows is None else flows, e[1:] if host is None else host)
    return float(tl["t_end"].max()) / machine.clock_hz if S else 0.0


def _tails(ex, machine, scope_all: bool, exchange_extra, flows, host_tx):
    """Release-to-end cycles of every superstep and chip: the later of the on-chip exchange and
    the chip's cross-chip flows (those of supersteps under a sync of all chips, solved as a
    batch), then host transfers. Returns (ex + extra, links_end, host, flows by step, steps
    whose flows need the event model, link group bytes)."""
    S, C = ex.shape
    clock = machine.clock_hz
    flow_step, flow_src, flow_dst, flow_bytes = flows
    host_step, host_chip, host_bytes = host_tx
    ex = ex + np.asarray(exchange_extra, np.float64)[:, None]
    host = np.zeros((S, C))
    if host_step.size:
        sysm = machine.system
        np.add.at(host, (host_step, host_chip), host_bytes / sysm.host_bytes_per_s * clock)
        host[host > 0] += sysm.host_latency_s * clock
    flows_by_step: dict[int, list] = {}
    every = zip(np.asarray(flow_src).tolist(), np.asarray(flow_dst).tolist(), np.asarray(flow_bytes, np.float64).tolist())
    for s, f in zip(np.asarray(flow_step).tolist(), every):
        flows_by_step.setdefault(s, []).append(f)
    flow_done = np.zeros((S, C))
    group_bytes: dict[tuple, float] = {}
    special = np.zeros(S, bool)
    ladder = _ladder(machine) if flows_by_step else None
    same: dict[tuple, list] = {}            # a step's flows -> the steps that have them (time steps repeat)
    for s, fl in flows_by_step.items():
        if scope_all[s]:
            same.setdefault(tuple(fl), []).append(s)
        else:
            special[s] = True
    for fl, steps in same.items():
        done, gb = _batch(machine, fl)
        ss = np.array(steps)
        for (a, b, _), d in zip(fl, done):
            for c in (a, b):
                flow_done[ss, c] = np.maximum(flow_done[ss, c], d)
        for g, v in gb.items():
            group_bytes[g] = group_bytes.get(g, 0.0) + v * len(steps)
    return ex, np.maximum(ex, flow_done), host, flows_by_step, special, group_bytes, ladder


def _global_makespan(comp, ex, machine, sync_extra, exchange_extra, flows, host_tx) -> float:
    """Seconds of a program in which every superstep syncs all chips (or there is one chip)."""
    S, C = comp.shape
    _, links_end, host, _, _, _, _ = _tails(ex, machine, np.ones(S, bool), exchange_extra, flows, host_tx)
    tail = links_end + host
    X = comp.copy()
    X[1:] += tail[:-1]
    sync = machine.group_sync_cycles(C) + np.asarray(sync_extra, np.float64)
    return float((X.max(axis=1) + sync).sum() + tail[-1].max()) / machine.clock_hz


def _timeline(comp, ex, machine, scope, partitions, sync_extra, exchange_extra, flows, host_tx) -> dict:
    """The per-chip timeline ([S, C] cycle arrays) of a program reduced to chips."""
    C = machine.chips
    S = comp.shape[0]
    scope = np.array(scope, np.int64)
    if C == 1:
        scope[:] = SYNC_CHIP
    # group id of every chip for every scope code, and the sync cost of each group
    group_of = {SYNC_CHIP: np.arange(C), SYNC_ALL: np.zeros(C, np.int64)}
    for k, part in enumerate(partitions, start=1):
        group_of[k] = np.asarray(part).astype(np.int64)
    sync_cost = {}
    for code, g in group_of.items():
        sizes = np.bincount(g)[g]
        sync_cost[code] = np.array([machine.group_sync_cycles(int(n)) for n in sizes], np.float64)
    sync = np.empty((S, C))
    for code in np.unique(scope):
        m = scope == code
        sync[m] = sync_cost[int(code)][None, :]
    sync += np.asarray(sync_extra, np.float64)[:, None]
    # flows of a superstep that syncs all chips share the links only with each other: their
    # completion is a closed-form batch; flows under partial syncs go through the event model
    ex, links_end, host, flows_by_step, special, group_bytes, ladder = _tails(
        ex, machine, scope == SYNC_ALL, exchange_extra, flows, host_tx)
    tail_of = links_end + host                     # release -> end of the superstep
    if S == 0:
        z = np.zeros((0, C))
        return {"ex": z, "t_start": z, "t_arrive": z, "t_release": z, "t_links": z, "t_end": z,
                "arriver": z.astype(np.int64), "link_group_bytes": {}}

    # ---- vectorised over supersteps: each run's timeline relative to its first release -------
    segs = _segments(scope, special)
    nseg = len(segs)
    seg_of = np.empty(S, np.int64)
    is_start = np.zeros(S, bool)
    for i, sg in enumerate(segs):
        seg_of[sg.s0:sg.s1] = i
        is_start[sg.s0] = True
    X = comp.copy()                      # from the previous release to this arrival
    X[1:] += tail_of[:-1]
    Mx = np.empty((S, C))                # the group's latest arrival (relative)
    Ax = np.empty((S, C), np.int64)      # which chip arrived last
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
    inc = np.where(is_start[:, None], 0.0, Mx + sync)
    cs = np.cumsum(inc, axis=0)
    first = np.array([sg.s0 for sg in segs], np.int64)
    rel = cs - cs[first[seg_of]]                            # release[s] - release[s0]
    last = np.array([sg.s1 - 1 for sg in segs], np.int64)
    tail = rel[last] + tail_of[last]                        # [nseg, C]: end - release[s0]

    # ---- event-driven over chips -------------------------------------------------------------
    t_start = np.zeros((S, C))
    t_arrive = np.zeros((S, C))
    t_release = np.zeros((S, C))
    t_links = np.zeros((S, C))
    t_end = np.zeros((S, C))
    arriver = np.zeros((S, C), np.int64)
    entry = np.zeros((nseg, C))
    release0 = np.zeros((nseg, C))
    arriver0 = np.zeros((nseg, C), np.int64)

    env = simpy.Environment()
    links = _FluidLinks(env, LadderLinks(machine)) if special.any() else None
    barriers: dict[tuple, dict] = {}
    members_of = {code: [np.flatnonzero(g == g[c]) for c in range(C)] for code, g in group_of.items()}

    def barrier(key, n):
        b = barriers.get(key)
        if b is None:
            b = barriers[key] = {"n": n, "arrived": {}, "event": env.event(), "flow_events": {}}
        return b

    def run_special(s, c, members):
        t_start[s, c] = env.now
        yield env.timeout(comp[s, c])
        t_arrive[s, c] = env.now
        key = (s, int(members[0]))
        b = barrier(key, members.size)
        b["arrived"][c] = env.now
        if len(b["arrived"]) == b["n"]:
            arr = np.array([b["arrived"][m] for m in members.tolist()])
            arriver[s, members] = members[int(arr.argmax())]
            mset = set(members.tolist())
            group_flows = [f for f in flows_by_step.get(s, []) if f[0] in mset]
            events = links.start_later(sync[s, c], group_flows) if group_flows else []
            b["flow_events"] = {m: [ev for f, ev in zip(group_flows, events) if m in (f[0], f[1])]
                                for m in members.tolist()}
            b["event"].succeed()
        yield b["event"]
        yield env.timeout(sync[s, c])
        t_release[s, c] = env.now
        waits = [env.timeout(ex[s, c])] + b["flow_events"].get(c, [])
        yield env.all_of(waits)
        t_links[s, c] = env.now
        if host[s, c] > 0:
            yield env.timeout(host[s, c])
        t_end[s, c] = env.now

    def chip(c):
        t = 0.0                      # this chip's clock; simpy time catches up before any barrier
        for i, sg in enumerate(segs):
            members = members_of[sg.scope][c]
            if members.size > 1 or sg.special:
                if t > env.now:
                    yield env.timeout(t - env.now)
            if sg.special:
                yield from run_special(sg.s0, c, members)
                t = env.now
                continue
            entry[i, c] = t
            if members.size == 1:
                release0[i, c] = t + comp[sg.s0, c] + sync[sg.s0, c]
                arriver0[i, c] = c
            else:
                b = barrier((sg.s0, int(members[0])), members.size)
                b["arrived"][c] = t
                if len(b["arrived"]) == b["n"]:
                    arr = entry[i, members] + comp[sg.s0, members]
                    k = int(arr.argmax())
                    release0[i, members] = arr[k] + sync[sg.s0, c]
                    arriver0[i, members] = members[k]
                    b["event"].succeed()
                yield b["event"]
            t = release0[i, c] + tail[i, c]
        if t > env.now:
            yield env.timeout(t - env.now)

    if nseg > 1 or special.any() or C > 1:
        for c in range(C):
            env.process(chip(c))
        env.run()
    else:                            # one run on one chip: no events at all
        release0[0, 0] = comp[0, 0] + sync[0, 0]
        arriver0[0, 0] = 0

    # ---- materialise the runs' timelines, vectorised -------------------------------------------
    normal = ~special
    if normal.any():
        rows = np.flatnonzero(normal)
        sg = seg_of[rows]
        t_release[rows] = release0[sg] + rel[rows]
        t_links[rows] = t_release[rows] + links_end[rows]
        t_end[rows] = t_links[rows] + host[rows]
        starts = rows[is_start[rows]]
        inner = rows[~is_start[rows]]
        t_start[starts] = entry[seg_of[starts]]
        t_start[inner] = t_end[inner - 1]
        t_arrive[rows] = t_start[rows] + comp[rows]
        arriver[inner] = Ax[inner]
        arriver[starts] = arriver0[seg_of[starts]]
    if links is not None:
        for g, v in links.group_bytes.items():
            group_bytes[g] = group_bytes.get(g, 0.0) + v
    return {"ex": ex, "t_start": t_start, "t_arrive": t_arrive, "t_release": t_release, "t_links": t_links,
            "t_end": t_end, "arriver": arriver, "link_group_bytes": group_bytes}
