"""The one seam between workloads and machines.

A workload (each package under ``models/``, or one of yours) turns its
description and placement into **tile rows** on a machine — per-tile compute cycles, exchange
bytes, link flows, host transfers and syncs (:mod:`tilesim.program`) — and reports its SRAM.
Everything after that is the core's, the same for every workload::

    workload.program(machine) ──► fabric.reduce(rows) ──► engine ──► SimResult ──► workload.book(...)
        (tile rows)               (tilesim.machine.fabric: per-chip work)      (tilesim.engine.events)

:func:`time_workload` is that pipeline, the one function that times a workload on a machine.
The core never names a workload concept: what a workload wants said about its run (its
network, its image, its matrices) it says in its own :class:`Section`.

A new workload is a class with these four members (CONTRIBUTING.md walks through one that
``tests/test_workload_seam.py`` runs); nothing in ``tilesim/`` changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tilesim.engine.events import makespan_s, simulate
from tilesim.machine.description import Machine
from tilesim.machine.memory import MemoryLedger
from tilesim.outputs.records import SimResult
from tilesim.outputs.runrecord import RunRecord, Section
from tilesim.program import CompactProgram, Program

__all__ = [
    "Workload",
    "Section",
    "TimedStep",
    "time_workload",
    "step_seconds",
    "record_run",
]


@runtime_checkable
class Workload(Protocol):
    """What the core needs of a workload. ``name`` says which (its package name)."""

    name: str

    def program(self, machine: Machine) -> Program | CompactProgram:
        """The step as tile rows for this workload's placement on ``machine``.

        Raises :class:`tilesim.errors.ConfigError` / :class:`tilesim.errors.MappingError` when the
        placement does not belong to ``machine``."""
        ...

    def memory(self, machine: Machine) -> MemoryLedger:
        """The per-tile SRAM ledger of the step on ``machine`` (checked by the caller)."""
        ...

    def book(self, result: SimResult) -> SimResult:
        """``result`` with the workload's own booking (e.g. host or fitted rows as host/residual
        time); return it unchanged when there is none. Times and totals never change."""
        ...

    def section(self, result: SimResult) -> Section:
        """The workload's part of the report of ``result``."""
        ...


@dataclass(frozen=True, eq=False)
class TimedStep:
    """A timed workload step: the program it ran and the engine's booked record."""

    program: Program | CompactProgram
    result: SimResult

    @property
    def step_s(self) -> float:
        """Predicted seconds of the step."""
        return self.result.total_s


def time_workload(workload: Workload, machine: Machine, *, keep_timeline: bool = True) -> TimedStep:
    """Time one step of ``workload`` on ``machine``: its tile rows, reduced to chips by the
    machine's fabric and run by the engine (:func:`tilesim.engine.events.simulate`), then booked by
    the workload. ``keep_timeline=False`` drops the per-chip timeline arrays (a calibration or
    search that needs only totals)."""
    program = workload.program(machine)
    return TimedStep(program, workload.book(simulate(program, machine, keep_timeline=keep_timeline)))


def step_seconds(workload: Workload, machine: Machine) -> float:
    """Seconds of one step of ``workload`` on ``machine`` — the total of :func:`time_workload`
    without its record (:func:`tilesim.engine.events.makespan_s`): a search's objective."""
    return makespan_s(workload.program(machine), machine)


def record_run(workload: Workload, step: TimedStep, *, ledger: MemoryLedger | None = None, **parts) -> RunRecord:
    """The :class:`tilesim.outputs.runrecord.RunRecord` of a timed ``step`` of ``workload``: the engine's
    totals, the SRAM ``ledger`` (optional), the workload's :meth:`Workload.section` and the other
    record fields by name (``settings``, ``provenance``, ``throughput``, more ``sections``...).
    The one way a workload's own words reach ``summary.json``, ``summary.md`` and ``report.html``."""
    own = workload.section(step.result)
    sections = (own, *parts.pop("sections", ()))
    return RunRecord.of(step.result, workload=workload.name, ledger=ledger, sections=sections, **parts)
