"""The discrete-event engine: chips as simpy processes, syncs as barriers, links as shared pipes.

Time model of superstep ``s`` on chip ``c`` (all in cycles of the chip clock)::

    start  = end of superstep s-1 on chip c
    arrive = start + compute[s, c]            compute[s, c] = max over the chip's tiles
    release = max(arrive of the sync group) + sync cost   (chip sync, or the global hops rule)
    exch_end = release + exchange[s, c]        on-chip fabric (all-to-all or mesh)
    links_end = max(exch_end, completion of the chip's cross-chip flows)
    end = links_end + host[s, c]

A flow starts at its sender's release. On a ``dataflow`` machine (``chip.execution``: Tensix
cores, wafer-scale PEs) no chip waits for another at a sync: every chip is its own sync group, its
outgoing flows start at its own release, and its superstep ends once the flows it sends and
receives have arrived — the data, not a barrier, holds it back.

Cross-chip flows go through a fluid model of the link groups: every active flow gets ``min over
its route of bandwidth / flows sharing`` (Poplar's global-exchange constraint, ipu-hardware.md
§3.2), recomputed whenever a flow starts or finishes, plus the link latency per hop.

Per-tile work is reduced to chips once, by the machine's fabric
(:meth:`tilesim.machine.fabric.OnChipFabric.reduce`, the one place that does it). Everything that
follows without a simulation clock is in :mod:`tilesim.engine.timeline`: sync costs, the tails of the
supersteps, flows of supersteps that sync all chips (one fluid batch each), and runs of
supersteps with one sync scope (a cumulative sum once the run has started). This module keeps
only what needs events: when each chip enters each run, the syncs of groups that run apart,
and flows under partial syncs, which may overlap in time on the links (:class:`_FluidLinks`).
:func:`makespan_s` runs the same timeline for the total alone.
"""

from __future__ import annotations

import numpy as np
import simpy

from tilesim.engine import timeline as closed
from tilesim.engine.timeline import Flow
from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import Machine
from tilesim.machine.fabric import ChipLinks, make_fabric
from tilesim.outputs.records import ChipTimeline, SimResult
from tilesim.program import SYNC_ALL, SYNC_CHIP, CompactProgram, Program

# Two entry points: ``simulate`` (a program, reduced by the machine's fabric, to a full SimResult with
# its critical-path attribution) and ``makespan_s`` (chip work already reduced, to the total alone: the
# mapping search's objective, thousands of calls). Both run the same ``_chip_timeline``.
__all__ = ["simulate", "makespan_s"]


class _ActiveFlow:
    """A flow on the links: bytes left, its route, the event its completion triggers, its rate."""

    __slots__ = ("remaining", "route", "done", "rate")

    def __init__(self, remaining: float, route: tuple, done: simpy.Event):
        self.remaining, self.route, self.done, self.rate = remaining, route, done, 0.0


class _FluidLinks:
    """Flows sharing directed link groups over simulated time; bandwidth split evenly among the
    flows on a group (:func:`tilesim.machine.fluid.fair_rates`), rates recomputed at every start and finish."""

    def __init__(self, env: simpy.Environment, links: ChipLinks):
        self.env, self.links = env, links
        self.active: dict[int, _ActiveFlow] = {}
        self.next_id = 0
        self.last = 0.0
        self.wake = env.event()
        self.group_bytes: dict[tuple, float] = {}
        env.process(self._run())

    def start_later(self, delay: float, flows: tuple[Flow, ...]) -> list[simpy.Event]:
        """Start ``flows`` ``delay`` cycles from now; one event per flow, triggered when it has
        arrived (drained plus the link latency per hop)."""
        events = [self.env.event() for _ in flows]
        self.env.process(self._starter(delay, flows, events))
        return events

    def _starter(self, delay, flows, events):
        if delay > 0:
            yield self.env.timeout(delay)
        self._advance()
        for f, ev in zip(flows, events):
            route = self.links.route(f.src_chip, f.dst_chip)
            for g in route:
                self.group_bytes[g] = self.group_bytes.get(g, 0.0) + f.nbytes
            self.active[self.next_id] = _ActiveFlow(float(f.nbytes), route, ev)
            self.next_id += 1
        if not self.wake.triggered:
            self.wake.succeed()

    def _advance(self):
        dt = self.env.now - self.last
        if dt > 0:
            for f in self.active.values():
                f.remaining -= f.rate * dt
        self.last = self.env.now

    def _finish(self, f: _ActiveFlow):
        delay = self.links.latency_cycles * len(f.route)
        if delay > 0:

            def arrived(_e: simpy.Event) -> None:  # the last byte reaches the far end of the route
                f.done.succeed()

            self.env.timeout(delay).callbacks.append(arrived)
        else:
            f.done.succeed()

    def _run(self):
        """Rates and completions: after every start or finish, each active flow gets its fair rate
        and a timeout is set for the flows due first. When it fires, exactly those flows finish,
        whatever the float round-off left in ``remaining`` (a test on the bytes left alone never
        ends on a 3e10 B flow, whose round-off exceeds any absolute threshold, or once the clock
        is too large to move by the time left). Every timeout finishes at least one flow, so the
        loop ends after at most one pass per start and per finish."""
        while True:
            if not self.active:
                yield self.wake
                self.wake = self.env.event()
                continue
            self._advance()
            for fid in [k for k, f in self.active.items() if f.remaining <= closed.DRAINED_BYTES]:
                self._finish(self.active.pop(fid))
            if not self.active:
                continue
            flows = list(self.active.values())
            for f, rate in zip(flows, closed.fair_rates([f.route for f in flows], self.links.bw)):
                f.rate = rate
            left = {k: f.remaining / f.rate for k, f in self.active.items()}
            t_next = min(left.values())
            due = [k for k, t in left.items() if t <= t_next * (1.0 + 1e-12)]
            timeout = self.env.timeout(t_next)
            res = yield self.env.any_of([self.wake, timeout])
            if self.wake in res:
                self.wake = self.env.event()
            if timeout in res:  # the flows due now have drained
                self._advance()
                for fid in due:
                    self._finish(self.active.pop(fid))


def _trigger(event: simpy.Event):
    """A simpy callback that succeeds ``event`` (a flow's arrival, when the links deliver it)."""

    def fire(_e: simpy.Event) -> None:
        event.succeed()

    return fire


class _Barrier:
    """One sync of one group: who has arrived (chip -> time) and the release event."""

    __slots__ = ("n", "arrived", "event")

    def __init__(self, env: simpy.Environment, n: int):
        self.n, self.event = n, env.event()
        self.arrived: dict[int, float] = {}

    def arrive(self, chip: int, t: float) -> bool:
        """Record ``chip`` arriving at ``t``; True for the last member to arrive."""
        self.arrived[chip] = t
        return len(self.arrived) == self.n


class _ChipEvents:
    """The event-driven part of a timeline: chips as simpy processes that enter each run of
    supersteps, meet at the syncs of its first superstep, and go through supersteps whose
    flows run under partial syncs event by event. Writes ``starts`` and the event supersteps
    of ``tl`` in place."""

    def __init__(self, machine, comp, sync, tails, group_of, rs, off, starts: closed.RunStarts, tl: ChipTimeline):
        self.comp, self.sync, self.tails, self.rs, self.off = comp, sync, tails, rs, off
        self.starts, self.tl = starts, tl
        self.env = simpy.Environment()
        self.links = _FluidLinks(self.env, closed.links_of(machine)) if tails.events.any() else None
        self.barriers: dict[tuple, _Barrier] = {}
        self.flow_done: dict[int, list[tuple[Flow, simpy.Event]]] = {}
        C = machine.chips
        self.members_of = {code: [np.flatnonzero(g == g[c]) for c in range(C)] for code, g in group_of.items()}

    def run(self) -> None:
        """Simulate every chip to the end of the program."""
        for c in range(self.comp.shape[1]):
            self.env.process(self._chip(c))
        self.env.run()

    def _barrier(self, s: int, members: np.ndarray) -> _Barrier:
        key = (s, int(members[0]))
        b = self.barriers.get(key)
        if b is None:
            b = self.barriers[key] = _Barrier(self.env, members.size)
        return b

    def _flows(self, s: int) -> list[tuple[Flow, simpy.Event]]:
        """Superstep ``s``'s flows, each with the event of its arrival (made on first use, by the
        sender's group or by a receiver that looks first)."""
        if s not in self.flow_done:
            self.flow_done[s] = [(f, self.env.event()) for f in self.tails.flows.get(s, ())]
        return self.flow_done[s]

    def _event_step(self, s: int, c: int, members: np.ndarray):
        """Chip ``c`` through superstep ``s`` (sync group ``members``), every phase an event; the
        last member to arrive starts the group's outgoing flows on the shared links at the release;
        each chip's superstep ends when its exchange and every flow it sends or receives are done.
        Under BSP a flow's two chips are in one group; under dataflow every chip is its own group,
        so a chip sends when it is ready and waits only for its own data."""
        env, tl = self.env, self.tl
        tl.start[s, c] = env.now
        yield env.timeout(self.comp[s, c])
        tl.arrive[s, c] = env.now
        b = self._barrier(s, members)
        if b.arrive(c, env.now):
            arr = np.array([b.arrived[m] for m in members.tolist()])
            tl.arriver[s, members] = members[int(np.argmax(arr))]
            mset = set(members.tolist())
            sending = [(f, ev) for f, ev in self._flows(s) if f.src_chip in mset]
            if sending:
                assert self.links is not None  # made whenever the program has event supersteps with flows
                started = self.links.start_later(self.sync[s, c], tuple(f for f, _ in sending))
                for (_, done), ev in zip(sending, started):
                    ev.callbacks.append(_trigger(done))
            b.event.succeed()
        yield b.event
        yield env.timeout(self.sync[s, c])
        tl.release[s, c] = env.now
        waits: list[simpy.Event] = [env.timeout(self.tails.exchange[s, c])]
        waits += [ev for f, ev in self._flows(s) if c in (f.src_chip, f.dst_chip)]
        yield env.all_of(waits)
        tl.links_end[s, c] = env.now
        if self.tails.host[s, c] > 0:
            yield env.timeout(self.tails.host[s, c])
        tl.end[s, c] = env.now

    def _chip(self, c: int):
        """Chip ``c`` through every run: wait at the run's first sync (if its group has other
        members), then jump to the run's end by its closed-form offset."""
        env, st = self.env, self.starts
        t = 0.0  # this chip's clock; simpy time catches up before any barrier
        for i, r in enumerate(self.rs):
            members = self.members_of[r.scope][c]
            if (members.size > 1 or r.events) and t > env.now:
                yield env.timeout(t - env.now)
            if r.events:
                yield from self._event_step(r.first, c, members)
                t = env.now
                continue
            st.entry[i, c] = t
            if members.size == 1:
                st.release[i, c] = t + self.comp[r.first, c] + self.sync[r.first, c]
                st.arriver[i, c] = c
            else:
                b = self._barrier(r.first, members)
                if b.arrive(c, t):
                    arr = st.entry[i, members] + self.comp[r.first, members]
                    k = int(arr.argmax())
                    st.release[i, members] = arr[k] + self.sync[r.first, c]
                    st.arriver[i, members] = members[k]
                    b.event.succeed()
                yield b.event
            t = st.release[i, c] + self.off.end[i, c]
        if t > env.now:
            yield env.timeout(t - env.now)


def simulate(program: Program | CompactProgram, machine: Machine, *, keep_timeline: bool = True) -> SimResult:
    """Time ``program`` on ``machine``: the :class:`SimResult` (per-superstep times and their
    critical-path attribution; with ``keep_timeline`` also the per-chip timeline arrays).

    Raises
    ------
    ConfigError
        The program was built for another number of chips or tiles per chip.
    """
    C, T = machine.chips, machine.tiles_per_chip
    if (program.chips, program.tiles_per_chip) != (C, T):
        raise ConfigError(
            config_message(
                "program shape",
                f"{program.chips} chips x {program.tiles_per_chip} tiles",
                f"machine {machine.name} has {C} chips x {T} tiles",
                "build the program for this machine (or pass --chips to match)",
            )
        )
    work = program.reduce_on(make_fabric(machine))  # the fabric: the one place tiles become chips
    tl = _chip_timeline(
        work.compute,
        work.exchange,
        machine,
        program.sync_scope,
        program.partitions,
        program.sync_extra_cycles,
        program.exchange_extra_cycles,
        closed.flows_by_step(program.flow_step, program.flow_src, program.flow_dst, program.flow_bytes),
        (program.host_step, program.host_chip, program.host_bytes),
    )
    return SimResult.from_timeline(
        program=program, machine=machine, work=work, timeline=tl, keep_timeline=keep_timeline
    )


def makespan_s(program: Program | CompactProgram, machine: Machine) -> float:
    """Seconds of ``program`` on ``machine``: the same timeline as :func:`simulate`, the total
    alone (no attribution, no result record) — for callers that time many programs (a mapping
    search). Inputs are trusted (no shape check)."""
    work = program.reduce_on(make_fabric(machine))
    S = work.compute.shape[0]
    fl = closed.flows_by_step(program.flow_step, program.flow_src, program.flow_dst, program.flow_bytes)
    host = (program.host_step, program.host_chip, program.host_bytes)
    scope = np.asarray(program.sync_scope)
    if S and (machine.chips == 1 or ((scope == SYNC_ALL).all() and machine.chip.execution == "bsp")):
        # every superstep syncs the whole machine: no chip runs ahead, no events
        tails = closed.tails(work.exchange, machine, np.ones(S, bool), program.exchange_extra_cycles, fl, host)
        sync = machine.group_sync_cycles(machine.chips) + np.asarray(program.sync_extra_cycles, np.float64)
        return closed.global_makespan_cycles(work.compute, sync, tails) / machine.clock_hz
    tl = _chip_timeline(
        work.compute,
        work.exchange,
        machine,
        scope,
        program.partitions,
        program.sync_extra_cycles,
        program.exchange_extra_cycles,
        fl,
        host,
    )
    return float(tl.end.max()) / machine.clock_hz if S else 0.0


def _chip_timeline(
    comp: np.ndarray,
    ex: np.ndarray,
    machine: Machine,
    scope: np.ndarray,
    partitions: tuple,
    sync_extra,
    exchange_extra,
    flows: dict[int, tuple[Flow, ...]],
    host_tx: tuple,
) -> ChipTimeline:
    """The per-chip :class:`ChipTimeline` of a program reduced to chips: ``comp`` / ``ex`` [S, C]
    cycles, ``scope`` [S] and ``partitions`` as in :class:`Program`, ``sync_extra`` /
    ``exchange_extra`` [S] cycles, ``flows`` by superstep (:func:`tilesim.engine.timeline.flows_by_step`),
    ``host_tx`` = (step, chip, bytes) arrays. Inputs are trusted (no validation)."""
    C = machine.chips
    S = comp.shape[0]
    scope = np.array(scope, np.int64)
    if C == 1 or machine.chip.execution == "dataflow":
        scope[:] = SYNC_CHIP  # no barrier between chips: each goes on when its own data has arrived
    group_of = closed.sync_groups(C, partitions)
    sync = closed.sync_cycles(machine, scope, group_of, sync_extra)
    tails = closed.tails(ex, machine, scope == SYNC_ALL, exchange_extra, flows, host_tx)
    if S == 0:
        return ChipTimeline.empty(C)
    rs = closed.runs(scope, tails.events)
    off = closed.run_offsets(comp, sync, tails.after_release, scope, group_of, rs)

    def z():
        return np.zeros((S, C))

    tl = ChipTimeline(tails.exchange, z(), z(), z(), z(), z(), np.zeros((S, C), np.int64), dict(tails.link_group_bytes))
    starts = closed.RunStarts.zeros(len(rs), C)
    events = None
    if len(rs) > 1 or tails.events.any() or C > 1:
        events = _ChipEvents(machine, comp, sync, tails, group_of, rs, off, starts, tl)
        events.run()
    else:  # one run on one chip: no events at all
        starts.release[0, 0] = comp[0, 0] + sync[0, 0]
    closed.fill_runs(tl, comp, tails, off, starts)
    if events is not None and events.links is not None:
        for g, v in events.links.group_bytes.items():
            tl.link_group_bytes[g] = tl.link_group_bytes.get(g, 0.0) + v
    return tl
