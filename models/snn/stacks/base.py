"""The seam between the SNN workload and a machine's software: the :class:`Stack` protocol.

The workload (:mod:`tilesim.models.snn.step.counters`, the functional run) is the algorithm: per-tile neuron
state and weights, the kernels' counted work per phase, the spike lists and gradients between layers. A
*stack* is what one machine's own programmers build from it, timed by that machine's own units: its
program (:meth:`Stack.program`), its SRAM (:meth:`Stack.memory`), its host traffic (:meth:`Stack.host`), the
placement it starts from, and the words that explain it. Neither side owns the seam: the workload never
names a stack, a stack never changes the math. Variation is by override (one class per stack, one file
each: :mod:`~tilesim.models.snn.stacks.poplar`, :mod:`~tilesim.models.snn.stacks.tt_metal`,
:mod:`~tilesim.models.snn.stacks.csl`), resolved once by :func:`tilesim.models.snn.stacks.stack_for` and passed
down as an object; nothing outside a stack's own file compares stack names.

To add a stack: a class with the members of :class:`Stack` and a ``from_machine`` classmethod in its own
file, listed in :data:`tilesim.models.snn.stacks.STACK_CLASSES`, and a vendor in :data:`VENDOR_STACKS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from tilesim.errors import ConfigError, config_message

if TYPE_CHECKING:
    from tilesim.machine.description import Machine
    from tilesim.machine.memory import MemoryLedger
    from tilesim.mapping.core import Mapping
    from tilesim.models.snn.training.network import NetworkConfig
    from tilesim.outputs.records import SimResult
    from tilesim.program import CompactProgram, Program

__all__ = ["Stack", "Described", "STACKS", "STACK_CHOICES", "VENDOR_STACKS", "check_choice", "vendor_stack_name"]

STACKS = ("poplar", "tt-metal", "csl")
STACK_CHOICES = ("auto", *STACKS)
VENDOR_STACKS = {"graphcore": "poplar", "tenstorrent": "tt-metal", "cerebras": "csl"}
"""The stack a machine's vendor (:attr:`tilesim.machine.description.Machine.vendor`) builds with."""


@runtime_checkable
class Stack(Protocol):
    """How one machine's software runs the SNN training step (the module docstring).

    ``name``: the stack's name (``--stack``); ``layers_span_chips``: one layer's neurons may sit on several
    chips; ``host_structure``: the step's :class:`tilesim.models.snn.step.structure.StepStructure` host and copy
    options shape this stack's program (Poplar's Keras/TensorFlow round trip), else only its sync scope is
    read."""

    name: str
    layers_span_chips: bool
    host_structure: bool

    def rows(self) -> tuple:
        """Every row kind the program uses, in program order (:class:`tilesim.models.snn.step.table.StepRow`:
        label, kind, loop, what its exchange carries)."""
        ...

    def program(self, step, machine: Machine) -> Program | CompactProgram:
        """The step's program on ``machine`` (``step``: a :class:`tilesim.models.snn.step.workload.SnnStep`;
        ``step.form``: ``compact``, ``dense`` or ``peaks``)."""
        ...

    def memory(
        self, config: NetworkConfig, placement: Mapping, machine: Machine, totals=None, cache: dict | None = None
    ) -> MemoryLedger:
        """Per-tile SRAM of the step (``totals``: a :class:`tilesim.machine.memory.MemoryTotals` for a search)."""
        ...

    def host(self, step, result: SimResult) -> SimResult:
        """``result`` with this stack's host rows booked as host time (totals unchanged)."""
        ...

    def default_placement(self, machine: Machine) -> str:
        """The placement strategy ``--mapping auto`` stands for on ``machine``."""
        ...

    def explain(self, label: str, uniform: bool) -> str | None:
        """Why row ``label`` costs what it does where no single tile's data explains it (``uniform``: every
        busy tile spends the same); None: the critical tile's data does."""
        ...

    def assumptions(self) -> tuple:
        """The named assumptions a summary prints, each with its band."""
        ...

    def describe(self) -> str:
        """One line: the stack and its named assumptions."""
        ...

    def check_placement(self, placement: Mapping) -> None:
        """Raise :class:`tilesim.errors.MappingError` naming the fix if the stack cannot run ``placement``."""
        ...

    def max_supersteps(self, T: int, L: int, chips: int) -> int:
        """An upper bound of the program's supersteps (the host-memory guard's estimate)."""
        ...


class Described:
    """What a stack class says of itself, from its ``name`` and ``ASSUMPTIONS`` (class methods: a stored record
    names its stack, and the record's words come from the class, with no machine)."""

    name: ClassVar[str] = ""
    ASSUMPTIONS: ClassVar[tuple] = ()

    @classmethod
    def assumptions(cls) -> tuple:
        """The named assumptions a summary prints, each with its band."""
        return cls.ASSUMPTIONS

    @classmethod
    def describe(cls) -> str:
        """One line: the stack and its named assumptions."""
        return f"{cls.name}: " + "; ".join(cls.ASSUMPTIONS)


def check_choice(choice: str) -> None:
    """ConfigError unless ``choice`` is one of :data:`STACK_CHOICES`."""
    if choice not in STACK_CHOICES:
        raise ConfigError(
            config_message(
                "stack", choice, f"must be one of {', '.join(STACK_CHOICES)}", "e.g. --stack auto (the vendor's)"
            )
        )


def vendor_stack_name(machine) -> str:
    """The stack ``auto`` means on ``machine``: its vendor's (:data:`VENDOR_STACKS`); a machine that names no
    vendor (a user's file) gets ``poplar`` on an all-to-all exchange, ``tt-metal`` with device DRAM beside the
    tiles, else ``csl`` (single-thread PEs on a mesh, as ``mesh-demo``)."""
    vendor = getattr(machine, "vendor", "")
    if vendor in VENDOR_STACKS:
        return VENDOR_STACKS[vendor]
    if machine.fabric.kind == "all-to-all":
        return "poplar"
    return "tt-metal" if machine.chip.dram_bytes_per_s > 0 else "csl"
