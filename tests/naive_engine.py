"""A naive reference for :func:`tilesim.engine.events.simulate`, for tests only: every superstep of every
chip and every sync are simpy events, link flows go through the fair-share fluid rule written out
simply. No closed form, no runs, no batches, no caches: slow, but each line says what the time
model (tilesim/engine/events.py docstring) says.

Shared with the engine only what is not the engine: the fabric models (on-chip exchange cycles
of one superstep, link routes and bandwidths) and the machine's sync costs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from tilesim.machine.fabric import ChipLinks, chip_links, make_fabric
from tilesim.program import SYNC_ALL, SYNC_CHIP

DRAINED = 1e-6  # bytes left that count as delivered (float round-off), as in the engine


@dataclass(frozen=True, eq=False)
class NaiveTimeline:
    """Per-chip event times, ``[S, C]`` cycles, and bytes per link group."""

    start: np.ndarray
    arrive: np.ndarray
    release: np.ndarray
    links_end: np.ndarray
    end: np.ndarray
    link_group_bytes: dict

    def step_cycles(self) -> np.ndarray:
        """How far each superstep moves the latest chip's end (what ``SimResult.time_s`` holds)."""
        frontier = self.end.max(axis=1)
        return np.diff(np.concatenate([[0.0], frontier]))


class NaiveLinks:
    """Flows on directed link groups. A group's bandwidth is split evenly among the flows on it;
    a flow moves at the rate of its most shared group. Rates depend only on which flows are on
    the links, so they are recomputed from scratch whenever that set changes."""

    def __init__(self, env: simpy.Environment, ladder: ChipLinks):
        self.env, self.ladder = env, ladder
        self.flows: list[list] = []  # [bytes left, route, delivered event]
        self.t = 0.0
        self.changed = env.event()
        self.group_bytes: dict = {}
        env.process(self._loop())

    def _rates(self) -> list[float]:
        count: dict = {}
        for _, route, _ in self.flows:
            for g in route:
                count[g] = count.get(g, 0) + 1
        return [min(self.ladder.bw[g] / count[g] for g in route) for _, route, _ in self.flows]

    def _drain(self) -> None:
        dt = self.env.now - self.t
        for f, rate in zip(self.flows, self._rates()):
            f[0] -= rate * dt
        self.t = self.env.now
        for f in [f for f in self.flows if f[0] <= DRAINED]:
            self.flows.remove(f)
            hops = len(f[1])
            self.env.process(self._deliver(f[2], self.ladder.latency_cycles * hops))

    def _deliver(self, event, latency):
        yield self.env.timeout(latency)
        event.succeed()

    def send(self, src: int, dst: int, nbytes: float, delivered: simpy.Event) -> None:
        """Put a flow on the links now; ``delivered`` succeeds when its last byte has arrived."""
        self._drain()
        route = self.ladder.route(src, dst)
        for g in route:
            self.group_bytes[g] = self.group_bytes.get(g, 0.0) + nbytes
        self.flows.append([float(nbytes), route, delivered])
        if not self.changed.triggered:
            self.changed.succeed()

    def _loop(self):
        while True:
            self._drain()
            if not self.flows:
                yield self.changed
                self.changed = self.env.event()
                continue
            rates = self._rates()
            soonest = min(f[0] / r for f, r in zip(self.flows, rates))
            got = yield self.changed | self.env.timeout(soonest)
            if self.changed in got:
                self.changed = self.env.event()


def _chip_costs(program, machine):
    """Per (superstep, chip): slowest tile's compute, on-chip exchange, host transfer cycles."""
    S, C, T = program.supersteps, machine.chips, machine.tiles_per_chip
    fabric = make_fabric(machine)
    comp = np.zeros((S, C))
    ex = np.zeros((S, C))
    host = np.zeros((S, C))
    clock = machine.clock_hz
    for s in range(S):
        for c in range(C):
            comp[s, c] = float(program.compute_cycles[s, c * T : (c + 1) * T].max())
        row = int(program.exchange_row[s])
        if row >= 0:
            mine = program.transfer_step == s
            transfers = None
            if fabric.needs_transfers and mine.any():
                src, dst = program.transfer_src[mine], program.transfer_dst[mine]
                transfers = {
                    0: (src // T, src % T, dst % T, program.transfer_bytes[mine], program.transfer_group[mine])
                }
            cyc, _ = fabric.exchange_cycles(
                program.bytes_in[row].reshape(1, C, T), program.bytes_out[row].reshape(1, C, T), transfers
            )
            ex[s] = cyc[0]
        if program.exchange_extra_cycles is not None:
            ex[s] += program.exchange_extra_cycles[s]
        for c in range(C):
            nbytes = float(program.host_bytes[(program.host_step == s) & (program.host_chip == c)].sum())
            if nbytes > 0:
                host[s, c] = nbytes / machine.system.host_bytes_per_s * clock + machine.system.host_latency_s * clock
    return comp, ex, host


def _group(program, machine, s: int, c: int) -> list[int]:
    """The chips chip ``c`` syncs with in superstep ``s``."""
    code = int(program.sync_scope[s])
    if machine.chips == 1 or code == SYNC_CHIP or machine.chip.execution == "dataflow":
        return [c]
    if code == SYNC_ALL:
        return list(range(machine.chips))
    part = program.partitions[code - 1]
    return [k for k in range(machine.chips) if part[k] == part[c]]


def naive_simulate(program, machine) -> NaiveTimeline:
    """Run ``program`` on ``machine`` with one simpy process per chip, all the way through."""
    S, C = program.supersteps, machine.chips
    comp, ex, host = _chip_costs(program, machine)
    extra = program.sync_extra_cycles
    env = simpy.Environment()
    links = NaiveLinks(env, chip_links(machine))
    times = {k: np.zeros((S, C)) for k in ("start", "arrive", "release", "links_end", "end")}
    barriers: dict = {}
    done_of: dict = {}  # superstep -> one arrival event per flow (a flow starts at its sender's release)
    flows = [
        [
            (int(a), int(b), float(n))
            for st, a, b, n in zip(program.flow_step, program.flow_src, program.flow_dst, program.flow_bytes)
            if st == s
        ]
        for s in range(S)
    ]

    def start_flows(delay, group_flows, events):
        yield env.timeout(delay)
        for (a, b, n), ev in zip(group_flows, events):
            links.send(a, b, n, ev)

    def chip(c):
        for s in range(S):
            times["start"][s, c] = env.now
            yield env.timeout(comp[s, c])
            times["arrive"][s, c] = env.now
            group = _group(program, machine, s, c)
            sync = machine.group_sync_cycles(len(group)) + (0.0 if extra is None else float(extra[s]))
            b = barriers.setdefault((s, group[0]), {"in": [], "go": env.event()})
            b["in"].append(c)
            arrived = done_of.setdefault(s, [env.event() for _ in flows[s]])
            if len(b["in"]) == len(group):
                sending = [i for i, f in enumerate(flows[s]) if f[0] in group]
                env.process(start_flows(sync, [flows[s][i] for i in sending], [arrived[i] for i in sending]))
                b["go"].succeed()
            yield b["go"]
            yield env.timeout(sync)
            times["release"][s, c] = env.now
            mine = [ev for f, ev in zip(flows[s], arrived) if c in (f[0], f[1])]
            yield env.all_of([env.timeout(ex[s, c])] + mine)
            times["links_end"][s, c] = env.now
            yield env.timeout(host[s, c])
            times["end"][s, c] = env.now

    for c in range(C):
        env.process(chip(c))
    env.run()
    return NaiveTimeline(link_group_bytes=links.group_bytes, **times)
