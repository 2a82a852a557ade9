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
from tilesim.models.snn.step.counters import WorkCounters
from tilesim.models.snn.step.memory import snn_memory
from tilesim.models.snn.step.stacks import describe_stack, stack_for
from tilesim.models.snn.step.structure import DEFAULT_STRUCTURE, StepStructure
from tilesim.models.snn.step.table import HOST_EXCESS_LABEL, HOST_SYNC_LABEL, book_step
from tilesim.models.snn.step.timing import STEPS_PER_EXECUTION, build_step_program, default_costs, host_excess_share
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
    (:func:`tilesim.models.snn.step.timing.build_step_program`); ``stack``: the execution stack, ``"auto"`` (the
    machine vendor's) or one of :data:`tilesim.models.snn.step.stacks.STACKS`."""

    config: NetworkConfig
    placement: Mapping
    counters: WorkCounters
    costs: CostModel | None = None
    steps_per_execution: int = STEPS_PER_EXECUTION
    structure: StepStructure = DEFAULT_STRUCTURE
    cache: dict | None = None
    form: str = "compact"
    name: str = "snn"
    stack: str = "auto"
    # per machine name: the host copy's share beyond the documented rate (program() notes it, book() reads it)
    _excess: dict = field(default_factory=dict, init=False, repr=False)

    def program(self, machine: Machine) -> Program | CompactProgram:
        """The step's BSP program on ``machine`` (:func:`tilesim.models.snn.step.timing.build_step_program`)."""
        stack = stack_for(machine, self.stack)
        if stack.name == "poplar":
            self._excess[machine.name] = host_excess_share(machine, self.structure, self.costs or default_costs())
        return build_step_program(
            self.config,
            self.placement,
            self.counters,
            machine,
            self.costs,
            steps_per_execution=self.steps_per_execution,
            cache=self.cache,
            form=self.form,
            structure=self.structure,
            stack=stack_for(machine, self.stack),
        )

    def memory(self, machine: Machine) -> MemoryLedger:
        """Per-tile SRAM of the step (:func:`tilesim.models.snn.step.memory.snn_memory`)."""
        return snn_memory(self.config, self.placement, machine, stack=stack_for(machine, self.stack))

    def book(self, result: SimResult) -> SimResult:
        """Host-copy rows as host time (:func:`book_step`), the copy's time beyond the documented rate
        first split off as its own residual row (:data:`HOST_EXCESS_LABEL`, share
        :func:`tilesim.models.snn.step.timing.host_excess_share`; same superstep, totals unchanged)."""
        share = self._excess.get(result.machine_name, 0.0)
        return book_step(result.book_part(HOST_SYNC_LABEL, HOST_EXCESS_LABEL, share, "residual"))

    def section(self, result: SimResult) -> Section:
        """The network, its spike caps, the execution stack (as given: a run passes the one ``auto``
        resolved to) and the structural assumptions the step was timed under."""
        cfg, st = self.config, self.structure
        layers = "-".join(str(n) for n in cfg.layers)
        caps = list(cfg.n_max)
        assumed = f"{st.describe()}, {self.steps_per_execution} steps per execution"
        if self.stack not in ("auto", "poplar"):  # the rest of the structure is the Poplar stack's
            assumed = f"sync {st.sync_scope}"
        stack = describe_stack(self.stack)
        return Section(
            title="SNN training step",
            lines=(
                f"network {layers}: batch {cfg.batch}, {cfg.timesteps} time steps, spike caps {caps}",
                f"assumed structure: {assumed}",
                f"execution stack {stack}",
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
