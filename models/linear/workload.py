"""Matrix layers (dense, structured, block-sparse) as a :class:`tilesim.workload.Workload`: one
superstep per PopLibs phase of each part's schedule on chip 0, an optional host-input
superstep first, and the ledger of the step's tensors and per-compute-set overheads."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from tilesim.machine.description import Machine
from tilesim.machine.memory import MemoryLedger
from tilesim.models.linear.phases import PRECISION_BYTES, OverheadConstants, overhead_breakdown, split_sizes
from tilesim.outputs.records import SimResult
from tilesim.program import Program, ProgramBuilder
from tilesim.workload import Section

__all__ = ["LinearStep", "build_program", "build_ledger"]

_OVERHEAD_CATEGORY = {
    "vertexInstanceState": "vertex_state",
    "internalExchangeCode": "exchange_code",
    "controlCode": "control_code",
    "vertexCode": "vertex_code",
}


def _pad(a, total):
    out = np.zeros(total)
    out[: a.shape[0]] = a
    return out


def build_program(parts, machine: Machine, name: str = "layer", host_bytes: float = 0.0):
    """One superstep per phase (``"<part>/<phase>"``), chip 0; optional ``host-input`` superstep first."""
    b = ProgramBuilder.for_machine(machine, name)
    total = machine.total_tiles
    if host_bytes:
        hb = np.zeros(machine.chips)
        hb[0] = host_bytes
        b.superstep("host-input", 0.0, host_bytes=hb, sync="chip")
    for part, sched in parts:
        for p in sched.phases:
            kw = {}
            if p.has_exchange:
                kw = dict(bytes_in=_pad(p.bytes_in, total), bytes_out=_pad(p.bytes_out, total))
            b.superstep(f"{part}/{p.name}", _pad(p.compute_cycles, total), sync="chip", repeat=p.repeat, **kw)
    return b.build()


def build_ledger(
    parts,
    machine: Machine,
    params: int = 0,
    precision: str = "fp32",
    overheads: OverheadConstants = OverheadConstants(),
    training: bool = True,
) -> MemoryLedger:
    """Ledger of a step (module docstring); ``params > 0`` with ``training`` adds weights, gradients and
    momentum. A forward-only step (``training=False``) adds none: its parameters are the schedules' operand
    home chunks, already in ``variables:activations``, and it has no gradients or momentum."""
    ledger = MemoryLedger(
        machine,
        remedy="use fp16, a smaller batch, a structured layer with fewer "
        "parameters, or a machine with more SRAM per tile",
    )
    tiles = np.arange(machine.tiles_per_chip)
    data = np.max([s.data_bytes for _, s in parts], axis=0)
    ledger.add("variables:activations", data, tiles, label="working data (peak over layer passes)")
    if params and training:
        words = split_sizes(params, machine.tiles_per_chip) * PRECISION_BYTES[precision]
        ledger.add("variables:weights", words, tiles, label="parameters")
        ledger.add("variables:gradients", words, tiles, label="parameter gradients")
        ledger.add("variables:optimizer", words, tiles, label="SGD momentum")
    every = SimpleNamespace(phases=tuple(p for _, s in parts for p in s.phases))
    for key, arr in overhead_breakdown(every, overheads).items():
        ledger.add(
            _OVERHEAD_CATEGORY[key], arr, tiles, label=f"{_OVERHEAD_CATEGORY[key]} ({len(every.phases)} compute sets)"
        )
    return ledger


@dataclass(frozen=True, eq=False)
class LinearStep:
    """A step of matrix layers: ``parts`` ((part, LayerSchedule) pairs), ``params`` trainable
    weights in ``precision``, ``host_bytes`` of input from the host first; ``training=False`` is
    a forward-only step (no gradients or momentum in the ledger)."""

    parts: tuple
    step_name: str = "layer"
    params: int = 0
    precision: str = "fp32"
    host_bytes: float = 0.0
    overheads: OverheadConstants = OverheadConstants()
    training: bool = True
    name: str = "linear"

    def program(self, machine: Machine) -> Program:
        """One superstep per phase (:func:`build_program`)."""
        return build_program(self.parts, machine, self.step_name, self.host_bytes)

    def memory(self, machine: Machine) -> MemoryLedger:
        """The step's ledger (:func:`build_ledger`)."""
        return build_ledger(self.parts, machine, self.params, self.precision, self.overheads, self.training)

    def book(self, result: SimResult) -> SimResult:
        """The host input is booked by the engine already (a host transfer): nothing to add."""
        return result

    def section(self, result: SimResult) -> Section:
        """The step's parts and compute sets."""
        sets = sum(len(s.phases) for _, s in self.parts)
        parts = [p for p, _ in self.parts]
        return Section(
            title="matrix layers",
            lines=(f"{self.step_name}: parts {parts}, {sets} compute sets, {self.params:,} parameters",),
            data=(("parts", parts), ("compute_sets", sets), ("params", int(self.params))),
        )
