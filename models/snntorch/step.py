"""One snnTorch training call on an IPU, timed op by op with the project's PopTorch lowering.

Every op of :func:`tilesim.models.snntorch.ops.snntorch_ops` goes through
:class:`tilesim.models.linear.lowering.OpBuilder` (matmuls planned by
:func:`tilesim.models.linear.planner.plan_matmul`, element-wise ops and reductions at PopLibs' vertex
costs) and becomes the supersteps of :func:`tilesim.models.linear.workload.build_program`, labelled
``<part>/<op>``. The ops inside the unrolled time loop are the same program ``T`` times: PopART outlines
identical subgraphs into one called subgraph (the custom spike ops declare ``getHighSubgraphValue`` for
it), so each runs as a superstep repeated ``T`` times with its code, vertices and exchange programs
once in memory (:class:`tilesim.models.linear.phases.Phase` ``repeat``). The timeline therefore shows an
op's ``T`` runs side by side rather than interleaved with the other ops of their step; every superstep syncs
the chip, so the call's total is the same.

The call's host side (booked as **host**):

* ``host-input``: the input batch, the labels and the returned ``spk_rec`` and loss over the machine's
  host link (PopTorch's default training output mode returns every output each call at one device
  iteration; ``int64`` labels are converted to ``int32`` on the host, ``PoplarExecutable::run`` of
  PopTorch 2.5.1, so 4 bytes each);
* ``host/poptorch call overhead``: what one ``poptorch_model(data, labels)`` call costs the host besides
  the copies. From PopTorch 2.5.1's source (``PoplarExecutor.__call__``, ``poptorch_core.execute``,
  ``PoplarExecutable::run``, ``Compiler::run``) and PopART's (``Session::run``, ``Devicex::run``): the
  argument parsing, the optimizer-state check, one ``at::empty`` per output, the step-IO set-up, the
  stream reconnection and the Poplar engine run with its host syncs; none of these has a published
  duration. **No public source gives a figure** (searched: PopTorch's and PopART's source and user guides,
  GitHub issues, Graphcore's docs and examples; ``gc-hostsynclatencytest``'s example output gives 0.36 µs
  per sync, not a call): :data:`POPTORCH_CALL_S` is a named assumption, 0.3 ms, with the band
  :data:`POPTORCH_CALL_BAND_S` (0.1–1 ms), chosen without fitting it to the held-out logs; the record's
  "named assumptions" carry it (:meth:`tilesim.models.snntorch.call.SnnTorchCall.assumptions`).

The call is a :class:`tilesim.models.snntorch.call.SnnTorchCall` (the network, the input as the host sends
it, the named assumptions); :func:`tilesim.models.snntorch.call.snntorch_step` builds this step from it for
``tilesim run`` and ``tilesim validate`` alike. The device-side mechanisms around the op list (PopART's
copies around outlined subgraph calls, ``MergeDuplicateOps``, inplacing) are
:mod:`tilesim.models.snntorch.mechanisms`.

Memory (:class:`tilesim.machine.memory.MemoryLedger`, chip 0): the working data of the ops (the peak
over ops, :func:`tilesim.models.linear.workload.build_ledger`; the ``T`` weight-gradient partials of
each layer are live together until their ``Sum``), the per-compute-set overheads, the parameters,
their gradients and Adam's two moments spread evenly over the tiles, and the tensors kept for the
backward pass (every layer's input and membrane at every step, and the stacked output records).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from tilesim.machine.description import Machine
from tilesim.machine.memory import MemoryLedger
from tilesim.models.linear.lowering import OpBuilder, PoplibsSliceCosts, PoplibsVertexCosts
from tilesim.models.linear.phases import PRECISION_BYTES, Phase, phases_cycles, split_sizes
from tilesim.models.linear.schedules import LayerSchedule
from tilesim.models.linear.timing import matmul_target, step_costs
from tilesim.models.linear.workload import build_ledger, build_program
from tilesim.models.snntorch.call import POPTORCH_CALL_BAND_S, POPTORCH_CALL_S, SnnTorchCall
from tilesim.models.snntorch.mechanisms import mechanism_parts
from tilesim.models.snntorch.ops import Op, op_counts, parameter_tensors, snntorch_ops
from tilesim.outputs.records import SimResult
from tilesim.program import Program
from tilesim.workload import Section

__all__ = [
    "POPTORCH_CALL_S",
    "POPTORCH_CALL_BAND_S",
    "CALL_LABEL",
    "SnnTorchStep",
    "lower_ops",
    "host_bytes",
    "snntorch_step",
]

CALL_LABEL = "host/poptorch call overhead"
PRECISION = "fp32"  # HalfUpcastToFloat: the model runs in float


def _target(machine: Machine) -> dict:
    """The :class:`OpBuilder` keywords of ``machine`` (PopLibs vertex costs, the planner's target)."""
    return dict(
        target=matmul_target(machine, PRECISION, step_costs(machine, "poptorch")),
        vertex=PoplibsVertexCosts.for_machine(machine),
        slice_costs=PoplibsSliceCosts.for_machine(machine),
    )


def _build(op: Op, b: OpBuilder) -> None:
    """Lower one op into the builder ``b``."""
    if op.kind == "matmul":
        b.matmul(*op.args)
    elif op.kind == "map":
        elements, inputs, bcast = op.args
        b.elementwise(op.name, elements, inputs=inputs, broadcast=bcast)
    elif op.kind == "reduce":
        b.reduce(op.name, *op.args)
    else:
        b.sum_inputs(op.name, *op.args)


def lower_ops(ops, timesteps: int, machine: Machine) -> list[tuple[str, LayerSchedule]]:
    """``(part, schedule)`` of every op: its phases named after the op, a ``per_step`` op's phases
    repeated ``timesteps`` times (module docstring)."""
    kw = _target(machine)
    costs = kw["target"].costs
    out = []
    for op in ops:
        b = OpBuilder(**kw)
        _build(op, b)
        sched = b.schedule(op.name)
        times = timesteps if op.per_step else 1
        phases = tuple(
            replace(
                p,
                name=p.name if p.name.startswith(op.name) else f"{op.name}: {p.name}",
                repeat=p.repeat * times,
            )
            for p in sched.phases
        )
        out.append((op.part, replace(sched, phases=phases, predicted_cycles=phases_cycles(phases, costs))))
    return out


def host_bytes(layers, batch: int, timesteps: int, input_bytes: int) -> int:
    """Bytes one call moves over the host link: the input (``input_bytes``), the labels (int32) and
    the returned ``spk_rec`` ``[T, B, C]`` and loss (float32)."""
    return int(input_bytes) + 4 * batch + 4 * (timesteps * batch * int(layers[-1]) + 1)


def _call_schedule(machine: Machine, call_s: float) -> LayerSchedule:
    """The per-call host overhead as one superstep of ``call_s`` on every tile of chip 0 (booked as host)."""
    t = machine.tiles_per_chip
    z = np.zeros(t, np.int64)
    cycles = np.full(t, int(round(call_s * machine.clock_hz)), np.int64)
    phase = Phase("poptorch call overhead", "vector", z, cycles, z, z, z, z, z)
    return LayerSchedule("poptorch call overhead", t, PRECISION, (phase,), z, int(cycles.max()))


@dataclass(frozen=True, eq=False)
class SnnTorchStep:
    """One snnTorch training call (``call``) on ``machine`` as a :class:`tilesim.workload.Workload` (``name``
    ``snn``: the same job as the sparse run, so the two compare). Build it with
    :func:`tilesim.models.snntorch.call.snntorch_step`."""

    call: SnnTorchCall
    machine: Machine
    name: str = "snn"

    @property
    def layers(self) -> tuple[int, ...]:
        return self.call.layers

    @property
    def batch(self) -> int:
        return self.call.batch

    @property
    def timesteps(self) -> int:
        return self.call.timesteps

    @property
    def call_s(self) -> float:
        return self.call.call_s

    @property
    def input_bytes(self) -> int:
        """The input's bytes as the host sends them (:attr:`SnnTorchCall.input_bytes`)."""
        return self.call.input_bytes

    @property
    def ops(self) -> tuple[Op, ...]:
        """The op list (:func:`tilesim.models.snntorch.ops.snntorch_ops`) as it runs: without the ops PopART
        makes views when it inplaces them (:attr:`Mechanisms.inplace`)."""
        c = self.call
        ops = snntorch_ops(
            c.layers,
            c.batch,
            c.timesteps,
            input_cast=c.input_cast,
            merged_first_fc=c.mechanisms.merges_first_fc(c),
            merged_reset=c.mechanisms.merges_reset,
        )
        return tuple(o for o in ops if not (o.view and c.mechanisms.inplace))

    @cached_property
    def parts(self) -> list[tuple[str, LayerSchedule]]:
        """Every op lowered (:func:`lower_ops`), after the per-call overhead, then the mechanisms' supersteps."""
        lowered = lower_ops(self.ops, self.timesteps, self.machine)
        extra = mechanism_parts(self.call, self.machine, _target(self.machine)["target"].costs)
        return [("host", _call_schedule(self.machine, self.call_s)), *lowered, *extra]

    def program(self, machine: Machine) -> Program:
        """The call as supersteps: host copies, the call overhead, then one per op phase."""
        hb = host_bytes(self.layers, self.batch, self.timesteps, self.input_bytes)
        return build_program(self.parts, machine, "snntorch training call", host_bytes=float(hb))

    def memory(self, machine: Machine) -> MemoryLedger:
        """The call's SRAM (module docstring)."""
        ledger = build_ledger(self.parts, machine, 0, PRECISION)
        tiles = np.arange(machine.tiles_per_chip)
        eb = PRECISION_BYTES[PRECISION]
        params = sum(r * c for _, r, c in parameter_tensors(self.layers))
        words = split_sizes(params, machine.tiles_per_chip) * eb
        ledger.add("variables:weights", words, tiles, label="parameters")
        ledger.add("variables:gradients", words, tiles, label="parameter gradients")
        ledger.add("variables:optimizer", words, tiles, label="Adam first moment")
        ledger.add("variables:optimizer", words, tiles, label="Adam second moment")
        T, B, sizes = self.timesteps, self.batch, self.layers
        kept = sum(T * B * (a + b) for a, b in zip(sizes, sizes[1:])) + 2 * T * B * sizes[-1]
        ledger.add(
            "variables:activations",
            split_sizes(kept, machine.tiles_per_chip) * eb,
            tiles,
            label="kept for backward (inputs and membranes of every step)",
        )
        return ledger

    def book(self, result: SimResult) -> SimResult:
        """The per-call overhead booked as host (the copies are host transfers already)."""
        return result.book_as_host([CALL_LABEL])

    def section(self, result: SimResult) -> Section:
        """The implementation, its op counts and the per-call overhead assumption."""
        counts = op_counts(self.ops, self.timesteps)
        layers = "-".join(map(str, self.layers))
        return Section(
            title="snnTorch on PopTorch",
            lines=(
                f"dense network {layers}: batch {self.batch}, {self.timesteps} time steps unrolled; "
                f"{counts['total']:,} ops per call ({counts['matmul']:,} matmuls, {counts['map']:,} element-wise, "
                f"{counts['reduce']:,} reductions, {counts['sum']:,} gradient sums), each its own PopLibs program",
                f"input sent as {self.call.input_dtype} {self.call.input_shape}: {self.input_bytes:,} B per call",
                "Named assumptions: " + "; ".join(self.call.assumptions()),
            ),
            data=(
                ("layers", layers),
                ("batch", self.batch),
                ("timesteps", self.timesteps),
                ("ops_per_call", counts),
                ("call_overhead_s", self.call_s),
                ("call_overhead_band_s", list(POPTORCH_CALL_BAND_S)),
                ("input_dtype", self.call.input_dtype),
                ("input_shape", self.call.input_shape),
                ("input_bytes", self.input_bytes),
                ("mechanisms", self.call.mechanisms.to_dict()),
                ("step_s", result.total_s),
                ("assumptions", list(self.call.assumptions())),
            ),
        )


def snntorch_step(call: SnnTorchCall, machine):
    """The timed step of ``call`` on ``machine`` (:class:`tilesim.models.snntorch.step.SnnTorchStep`): what
    ``tilesim run --implementation snntorch`` and ``tilesim validate`` both time."""
    return SnnTorchStep(call, machine)
