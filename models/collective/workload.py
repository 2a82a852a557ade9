"""A collective as a workload: its paths as link flows, one superstep per pass, timed by the core.

:class:`CollectiveWorkload` implements :class:`tilesim.workload.Workload`: ``program`` turns the
paths of each pass (:mod:`tilesim.models.collective.algorithms`) into flows of ``size_bytes / chips``
bytes over the machine's chip links (each path one flow to its farthest chip: the links it crosses
carry its chunk once), ``launch_cycles`` as the pass's sync (booked as sync: the programs starting and
the data movers' handshake) and the reducing hops' extra latency as compute (the worker cores'
reductions). The engine's fluid links then give the drain and the per-hop latency
(:mod:`tilesim.models.collective.costs` has the equation).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tilesim.errors import require
from tilesim.machine.description import Machine
from tilesim.machine.fabric import chip_links
from tilesim.machine.memory import MemoryLedger
from tilesim.models.collective.algorithms import OPS, TOPOLOGIES, paths, phases
from tilesim.models.collective.costs import CollectiveCosts, load_costs
from tilesim.outputs.records import SimResult
from tilesim.program import Program, ProgramBuilder
from tilesim.workload import Section, time_workload

__all__ = ["CollectiveSpec", "CollectiveWorkload", "CollectiveTiming", "time_collective", "BUS_FACTOR"]


MAX_SIZE_BYTES = 1 << 60
"""Largest collective timed: 1 EiB per chip (far beyond any memory; the times stay exact floats)."""

MAX_CHIPS = {"line": 256, "ring": 1024, "all_to_all": 256}
"""Most chips a collective is timed on (the fluid model's work grows with the square of the chips on
a line and for all_to_all; these limits keep a call within a few seconds)."""


def BUS_FACTOR(op: str, n: int) -> float:  # noqa: N802 (nccl-tests' name for the correction)
    """nccl-tests' bus-bandwidth correction: ``2(n-1)/n`` for all_reduce, ``(n-1)/n`` otherwise."""
    return (2.0 if op == "all_reduce" else 1.0) * (n - 1) / n


@dataclass(frozen=True)
class CollectiveSpec:
    """One collective call: ``op`` on ``chips`` chips joined as a ``line`` or ``ring``, with
    ``size_bytes`` per chip as the CCL benchmark counts it (all_gather: its output; the others:
    their input). Every path carries ``size_bytes / chips``."""

    op: str
    chips: int
    topology: str
    size_bytes: int

    def __post_init__(self):
        require(self.op in OPS, "op", self.op, f"must be one of {', '.join(OPS)}", "e.g. --op all_reduce")
        require(
            self.topology in TOPOLOGIES,
            "topology",
            self.topology,
            f"must be one of {', '.join(TOPOLOGIES)}",
            "a line, or a ring where the chips close one",
        )
        limit = MAX_CHIPS["all_to_all" if self.op == "all_to_all" else self.topology]
        require(
            not isinstance(self.chips, bool) and isinstance(self.chips, int) and 2 <= self.chips <= limit,
            "chips",
            self.chips,
            f"must be an integer in 2..{limit} for {self.op} on a {self.topology}",
            "a collective needs at least two chips; beyond the limit the timing takes minutes (its flows "
            "grow with the square of the chips)",
        )
        require(
            not isinstance(self.size_bytes, bool)
            and isinstance(self.size_bytes, int)
            and self.chips <= self.size_bytes <= MAX_SIZE_BYTES,
            "size_bytes",
            self.size_bytes,
            f"must be an integer in chips ({self.chips}) .. 2**60 (1 EiB): every chip holds a part",
            "e.g. --size-bytes 1048576",
        )

    @property
    def chunk_bytes(self) -> float:
        return self.size_bytes / self.chips


@dataclass(frozen=True, eq=False)
class CollectiveWorkload:
    """:class:`CollectiveSpec` on a machine's links, with the library's :class:`CollectiveCosts`."""

    spec: CollectiveSpec
    costs: CollectiveCosts = field(default_factory=load_costs)
    name: str = "collective"

    def machine_for(self, machine: Machine) -> Machine:
        """``machine``'s chips as the spec's line or ring (its link constants kept)."""
        return machine.with_topology(self.spec.topology, self.spec.chips)

    def program(self, machine: Machine) -> Program:
        s = self.spec
        require(
            machine.chips == s.chips and machine.system.topology == s.topology,
            "machine",
            machine.name,
            f"must be {s.chips} chips as a {s.topology}",
            "time it on CollectiveWorkload.machine_for(machine)",
        )
        links = chip_links(machine)
        b = ProgramBuilder.for_machine(machine, name=f"{s.op} {s.chips}-chip {s.topology}")
        launch = []
        for p in phases(s.op):
            ps = paths(p, s.chips, s.topology)
            hops = max(len(links.route(q.src, q.dst)) for q in ps)
            reduce_latency = (
                hops * self.costs.reduce_latency_hops * links.latency_cycles if p == "reduce_scatter" else 0.0
            )
            b.superstep(p, reduce_latency, flows=[(q.src, q.dst, s.chunk_bytes) for q in ps], sync="all")
            launch.append(self.costs.launch_cycles)
        return replace(b.build(), sync_extra_cycles=np.asarray(launch, np.float64))

    def memory(self, machine: Machine) -> MemoryLedger:
        """Nothing of the collective's lives in the tiles' SRAM: its data stays in DRAM and moves
        through the data movers' packet buffers (on the Ethernet cores, not modelled)."""
        return MemoryLedger(machine)

    def book(self, result: SimResult) -> SimResult:
        return result

    def section(self, result: SimResult) -> Section:
        s = self.spec
        t = result.total_s
        alg = s.size_bytes / t / 1e9
        bus = alg * BUS_FACTOR(s.op, s.chips)
        return Section(
            "collective",
            (
                f"{s.op} of {s.size_bytes:,} B per chip on a {s.chips}-chip {s.topology}: {t * 1e6:.2f} us",
                f"algbw {alg:.2f} GB/s, busbw {bus:.2f} GB/s (nccl-tests' definitions)",
            ),
            (("op", s.op), ("chips", s.chips), ("topology", s.topology), ("size_bytes", s.size_bytes),
             ("algbw_gb_s", alg), ("busbw_gb_s", bus)),
        )  # fmt: skip


@dataclass(frozen=True)
class CollectiveTiming:
    """A timed collective: seconds, the busiest link's bytes and the result record."""

    spec: CollectiveSpec
    machine: Machine
    total_s: float
    busiest_link: tuple
    busiest_link_bytes: float
    result: SimResult


def time_collective(spec: CollectiveSpec, machine: Machine, costs: CollectiveCosts | None = None) -> CollectiveTiming:
    """Time ``spec`` on ``machine``'s links (resized to the spec's line or ring)."""
    w = CollectiveWorkload(spec, costs or load_costs())
    m = w.machine_for(machine)
    step = time_workload(w, m)
    groups = step.result.link_group_bytes
    link, nbytes = max(groups.items(), key=lambda kv: kv[1], default=((), 0.0))
    return CollectiveTiming(spec, m, step.result.total_s, link, nbytes, step.result)
