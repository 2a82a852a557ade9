"""Find a faster placement of an SNN by re-timing one recorded step.

One functional training step records the activity (or, with ``--activity fixed``, the
fixed-activity lists are built without training); every candidate mapping is then timed by
:func:`models.snn.retime.retime` — counters recounted from the activity, no float math — and
checked against the SRAM ledger. The search itself is :func:`mapping.search.anneal`, seeded
with the paper's ``contiguous`` placement, the other strategies and a ``--mapping FILE`` if given.
The command line (``tilesim map-search``) is in :mod:`models.snn.cli`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from mapping import STRATEGIES, Mapping
from mapping.search import anneal
from models.snn.counters import count_work
from models.snn.options import RunOptions
from models.snn.placing import place_network, strategy_mapping, to_placement
from models.snn.run import load_cost_model, load_model, network_config, record_activity
from models.snn.step_memory import snn_memory
from models.snn.timing import STEPS_PER_EXECUTION
from models.snn.workload import SnnStep
from tilesim.errors import MappingError, require
from tilesim.machine import load_machine
from tilesim.memory import MemoryTotals
from tilesim.workload import step_seconds

__all__ = ["make_objective", "search_mapping"]


def make_objective(config, machine, activity, costs=None, steps_per_execution: int = STEPS_PER_EXECUTION):
    """``objective(mapping) -> predicted step seconds`` (``inf`` if a tile overflows SRAM)."""

    cache: dict = {}

    def objective(m: Mapping) -> float:
        placement = to_placement(m, machine)
        if snn_memory(config, placement, machine, MemoryTotals(machine), cache).overflow_tiles().size:
            return math.inf
        counters = count_work(activity, placement, per_step=True, cache=cache)
        step = SnnStep(config, placement, counters, costs, steps_per_execution, cache=cache, form="peaks")
        return step_seconds(step, machine)

    objective.cache = cache  # what it keeps between candidates (byte-bounded LRUs inside)
    return objective


def search_mapping(
    options: RunOptions,
    budget_s: float,
    seed: int = 0,
    max_evals: int | None = None,
    progress=None,
    out: str | None = None,
) -> tuple:
    """Search placements of the network of ``options`` for ``budget_s`` seconds (or ``max_evals``
    mappings), annealing from the contiguous placement, the other strategies and
    ``options.mapping`` if it is a file. Returns ``(summary dict, best Mapping)``; with ``out`` the
    best mapping is saved there as JSON."""
    require(
        isinstance(options, RunOptions),
        "options",
        type(options).__name__,
        "must be a RunOptions",
        "build one with RunOptions(...)",
    )
    t0 = time.perf_counter()
    model = load_model(options)
    config = network_config(options, model)
    machine = load_machine(options.machine, options.chips)
    base = place_network(config, machine, options.neurons_per_tile, "contiguous", "raise")
    activity = record_activity(config, base.placement, options.dataset, options.data, model, options.data_root)
    objective = make_objective(config, machine, activity, load_cost_model(options), options.steps_per_execution)
    extra = []
    if options.mapping not in STRATEGIES:  # --mapping FILE: start from it too
        extra.append(place_network(config, machine, options.neurons_per_tile, options.mapping, "raise").mapping)
    for name in STRATEGIES[1:]:
        try:
            extra.append(strategy_mapping(name, config, machine, base.neurons_per_tile))
        except MappingError:
            pass
    res = anneal(base.mapping, objective, budget_s, max_evals, seed, extra_starts=extra, progress=progress)
    summary = {
        "baseline": _describe(base.mapping, res.baseline_value, config, machine),
        "best": _describe(res.best, res.best_value, config, machine),
        "speedup": res.baseline_value / res.best_value,
        "evaluated": res.evaluated,
        "accepted": res.accepted,
        "mappings_per_s": res.evaluated / res.wall_s,
        "history": [{"evaluated": e, "predicted_step_s": v} for e, v in res.history],
        "wall_s": time.perf_counter() - t0,
    }
    if out:
        path = Path(out)
        res.best.save(path)
        summary["best"]["mapping_file"] = str(path)
    return summary, res.best


def _describe(m: Mapping, step_s: float, config, machine) -> dict:
    led = snn_memory(config, to_placement(m, machine), machine)
    return {
        "predicted_step_s": step_s,
        "samples_per_s": config.batch / step_s,
        "strategy": m.strategy,
        "neurons_per_tile": m.neurons_per_tile(),
        "tiles_used": m.tiles_used(),
        "chip_of_layer": m.summary()["chip_of_layer"],
        "max_tile_bytes": int(led.per_tile().max()),
        "mapping_file": None,
    }
