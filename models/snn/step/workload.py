"""The SNN training step as a :class:`tilesim.workload.Workload`: what the core times.

>>> step = SnnStep(config, placement, counters)      # counters of one step (per-step arrays)
>>> timed = time_workload(step, machine)             # tile rows -> fabric -> engine -> booked
>>> timed.step_s, timed.result.breakdown_s()

Every caller that times an SNN step (a functional run, a re-timing, the calibration) goes
through this class and :func:`tilesim.workload.time_workload`; the mapping search's fast path
(:func:`tilesim.workload.step_seconds` of ``SnnStep(..., form="peaks")``) gives the same number from
the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesim.machine.costs import CostModel
from tilesim.machine.description import Machine
from tilesim.machine.memory import MemoryLedger
from tilesim.mapping.core import Mapping
from tilesim.models.snn.stacks import Stack, describe_stack, stack_class, stack_for
from tilesim.models.snn.step.counters import WorkCounters
from tilesim.models.snn.step.structure import DEFAULT_STRUCTURE, StepStructure
from tilesim.models.snn.step.timing import STEPS_PER_EXECUTION
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.outputs.records import SimResult
from tilesim.program import CompactProgram, Program
from tilesim.workload import Section

__all__ = ["SnnStep"]


@dataclass(frozen=True, eq=False)
class SnnStep:
    """One training step of ``config`` under ``placement`` with the work in ``counters``.

    ``costs``: the cost model (default: the shipped calibration); ``steps_per_execution``: steps
    per device execution (host copies amortise over them); ``structure``: the structural
    assumptions (:class:`tilesim.models.snn.step.structure.StepStructure`); ``cache``: a dict the caller
    keeps across re-timings (layer terms reused); ``form``: ``"compact"`` (chip by chip, the form a
    run uses), ``"dense"`` (``[supersteps, tiles]`` arrays: what the calibration's decomposition
    needs) or ``"peaks"`` (each chip's peaks alone: the mapping search's objective)
    (:func:`tilesim.models.snn.step.timing.build_step_program`); ``stack``: the execution stack,
    a :class:`tilesim.models.snn.stacks.Stack` or a name: ``"auto"`` (the machine vendor's) or one of
    :data:`tilesim.models.snn.stacks.STACKS`."""

    config: NetworkConfig
    placement: Mapping
    counters: WorkCounters
    costs: CostModel | None = None
    steps_per_execution: int = STEPS_PER_EXECUTION
    structure: StepStructure = DEFAULT_STRUCTURE
    cache: dict | None = None
    form: str = "compact"
    name: str = "snn"
    stack: str | Stack = "auto"
    # per machine name: the stack the program was built with (book() reads it)
    _stacks: dict = field(default_factory=dict, init=False, repr=False)

    def stack_on(self, machine: Machine) -> Stack:
        """The execution stack this step runs with on ``machine`` (:func:`tilesim.models.snn.stacks.stack_for`)."""
        st = stack_for(machine, self.stack)
        self._stacks[machine.name] = st
        return st

    def program(self, machine: Machine) -> Program | CompactProgram:
        """The step's program on ``machine``, as its stack builds it (:meth:`.Stack.program`)."""
        return self.stack_on(machine).program(self, machine)

    def memory(self, machine: Machine) -> MemoryLedger:
        """Per-tile SRAM of the step, as its stack keeps it (:meth:`tilesim.models.snn.stacks.Stack.memory`)."""
        return self.stack_on(machine).memory(self.config, self.placement, machine)

    def book(self, result: SimResult) -> SimResult:
        """The stack's host rows booked as host time (:meth:`.Stack.host`; totals unchanged)."""
        st = self._stacks.get(result.machine_name)
        return result if st is None else st.host(self, result)

    def stack_lines(self, result: SimResult) -> tuple:
        """What the stack says it chose on the result's machine (a stack with a ``section_lines`` method)."""
        st = self._stacks.get(result.machine_name)
        lines = getattr(st, "section_lines", None)
        return tuple(lines(result.machine_name)) if lines is not None else ()

    def section(self, result: SimResult) -> Section:
        """The network, its spike caps, the execution stack (as given: a run passes the one ``auto``
        resolved to) and the structural assumptions the step was timed under."""
        cfg, st = self.config, self.structure
        layers = "-".join(str(n) for n in cfg.layers)
        caps = list(cfg.n_max)
        assumed = f"{st.describe()}, {self.steps_per_execution} steps per execution"
        given = self.stack
        if isinstance(given, str):
            stack = describe_stack(given)
            host_structure = given == "auto" or stack_class(given).host_structure
        else:
            stack, host_structure = given.describe(), given.host_structure
        if not host_structure:  # the rest of the structure shapes only the Poplar stack's host traffic
            assumed = f"sync {st.sync_scope}"
        return Section(
            title="SNN training step",
            lines=(
                f"network {layers}: batch {cfg.batch}, {cfg.timesteps} time steps, spike caps {caps}",
                f"assumed structure: {assumed}",
                f"execution stack {stack}",
                *self.stack_lines(result),
            ),
            data=(
                ("layers", layers),
                ("batch", cfg.batch),
                ("timesteps", cfg.timesteps),
                ("caps", caps),
                ("structure", assumed),
                ("stack", stack),
                ("step_s", result.total_s),
            ),
        )
