"""Record once, re-time many: the predicted time of a recorded training step under any
placement, machine or cost model — counters are recounted from the activity (no float math).

>>> res = train_step(state, spikes, labels)                    # one functional run
>>> p = retime(res.activity, config, other_placement, machine)  # milliseconds, not seconds
>>> p.step_s, p.result.breakdown_s()

With ``activity=None`` the step is timed on :func:`tilesim.models.snn.training.activity.fixed_activity`, the
lower bound of throughput, without training at all. The activity of one functional step of a
run's data is :func:`tilesim.models.snn.commands.run.record_activity`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesim.errors import require
from tilesim.machine.costs import CostModel
from tilesim.mapping.core import Mapping
from tilesim.models.snn.step.counters import Activity, WorkCounters, count_work
from tilesim.models.snn.step.structure import DEFAULT_STRUCTURE
from tilesim.models.snn.step.timing import STEPS_PER_EXECUTION
from tilesim.models.snn.step.workload import SnnStep
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.outputs.records import SimResult
from tilesim.program import CompactProgram, Program
from tilesim.workload import time_workload

__all__ = ["Prediction", "retime"]


@dataclass(frozen=True)
class Prediction:
    """One re-timed step: ``result`` (the engine's record), its ``program`` and ``counters``."""

    result: SimResult
    program: Program | CompactProgram
    counters: WorkCounters

    @property
    def step_s(self) -> float:
        """The predicted seconds of the step."""
        return self.result.total_s


def retime(
    activity: Activity | None,
    config: NetworkConfig,
    placement: Mapping,
    machine,
    costs: CostModel | None = None,
    cache: dict | None = None,
    steps_per_execution: int = STEPS_PER_EXECUTION,
    structure=None,
) -> Prediction:
    """Time the step that recorded ``activity`` (or a fixed-activity step) under ``placement`` on
    ``machine``; equal to the timing of a functional run with that placement. ``cache`` (a dict
    the caller keeps across calls) reuses the counters of layers whose placement is unchanged.
    ``structure``: a :class:`tilesim.models.snn.step.structure.StepStructure` (default: its defaults)."""
    if activity is None:
        activity = fixed_activity(config)
    require(
        tuple(activity.layer_sizes) == tuple(config.layers),
        "activity layer sizes",
        activity.layer_sizes,
        f"must equal the network's {tuple(config.layers)}",
        "re-time activity recorded on the same network",
    )
    require(
        activity.inputs.timesteps == config.timesteps and activity.inputs.batch == config.batch,
        "activity (T, B)",
        (activity.inputs.timesteps, activity.inputs.batch),
        f"must equal the config's ({config.timesteps}, {config.batch})",
        "re-time activity recorded with the same timesteps and batch",
    )
    counters = count_work(activity, placement, per_step=True, cache=cache)
    step = SnnStep(
        config,
        placement,
        counters,
        costs,
        steps_per_execution,
        DEFAULT_STRUCTURE if structure is None else structure,
        cache,
        form="compact",  # chip by chip (issue 15)
    )
    timed = time_workload(step, machine)
    return Prediction(timed.result, timed.program, counters)
