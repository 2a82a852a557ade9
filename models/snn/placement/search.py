"""Find a faster placement of an SNN by re-timing one recorded step.

One functional training step records the activity (or, with ``--activity fixed``, the
fixed-activity lists are built without training); every candidate mapping is then timed by
:func:`tilesim.models.snn.step.retime.retime` — counters recounted from the activity, no float math — and
checked against the SRAM ledger. The search itself is :func:`tilesim.mapping.search.anneal`, seeded
with the paper's ``contiguous`` placement, the other strategies and a ``--mapping FILE`` if given.
The command line (``tilesim map-search``) is in :mod:`tilesim.models.snn.commands.cli`.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

from tilesim.errors import MappingError, require
from tilesim.machine.description import load_machine
from tilesim.machine.fabric import grid_shape
from tilesim.machine.memory import MemoryTotals
from tilesim.mapping import STRATEGIES, Mapping
from tilesim.mapping.grid import order_of
from tilesim.mapping.search import anneal, layout_of
from tilesim.models.snn.commands.options import RunOptions
from tilesim.models.snn.commands.run import load_cost_model, load_model, network_config, record_activity
from tilesim.models.snn.placement.fit import (
    AUTO,
    chip_grid_cols,
    neuron_cut,
    place_network,
    strategy_mapping,
    strategy_or_auto,
    to_placement,
)
from tilesim.models.snn.stacks import stack_for
from tilesim.models.snn.step.counters import count_work
from tilesim.models.snn.step.timing import STEPS_PER_EXECUTION
from tilesim.models.snn.step.workload import SnnStep
from tilesim.workload import step_seconds, time_workload

__all__ = ["baseline_mapping", "make_objective", "search_mapping", "split_gain", "gain_reasons"]


def make_objective(
    config, machine, activity, costs=None, steps_per_execution: int = STEPS_PER_EXECUTION, stack: str = "auto"
):
    """``objective(mapping) -> predicted step seconds`` (``inf`` if a tile overflows SRAM), the step built
    and its SRAM kept as execution stack ``stack`` does (:func:`tilesim.models.snn.stacks.stack_for`)."""

    cache: dict = {}
    kept = stack_for(machine, stack)

    def step(m: Mapping) -> SnnStep:
        placement = to_placement(m, machine)
        counters = count_work(activity, placement, per_step=True, cache=cache)
        return SnnStep(config, placement, counters, costs, steps_per_execution, cache=cache, form="peaks", stack=kept)

    def objective(m: Mapping) -> float:
        led = kept.memory(config, to_placement(m, machine), machine, MemoryTotals(machine), cache)
        if led.overflow_tiles().size:
            return math.inf
        return step_seconds(step(m), machine)

    def breakdown_s(m: Mapping) -> dict:
        """The phase split of the very timing ``objective`` gives (booked as a run books it)."""
        return time_workload(step(m), machine, keep_timeline=False).result.breakdown_s()

    objective.cache = cache  # what it keeps between candidates (byte-bounded LRUs inside)
    objective.breakdown_s = breakdown_s
    return objective


def baseline_mapping(options: RunOptions) -> str:
    """The strategy map-search starts from and measures its gain against: the placement ``tilesim run``
    would use with ``options`` (its ``--mapping`` if that names a strategy, else ``auto``)."""
    return strategy_or_auto(options.mapping)


def search_mapping(
    options: RunOptions,
    budget_s: float,
    seed: int = 0,
    max_evals: int | None = None,
    progress=None,
    out: str | None = None,
    fixed_tiles: bool = False,
) -> tuple:
    """Search placements of the network of ``options`` for ``budget_s`` seconds (or ``max_evals``
    mappings), annealing from the placement ``tilesim run`` would use with these options (the baseline:
    ``--mapping`` if it names a strategy, else ``auto``), the other strategies and ``options.mapping`` if it
    is a file. Returns ``(summary dict, best Mapping)``; with ``out`` the
    best mapping is saved there as JSON. ``fixed_tiles``: every layer keeps the baseline placement's
    tiles (its neurons per tile): the search moves only where they sit. On a mesh or torus (of tiles or
    of chips) the summary's ``gain_split`` and ``why`` say how much of the gain is the mesh's (tile order,
    layer placement) and how much the neurons per tile's (:func:`split_gain`)."""
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
    base = place_network(config, machine, options.neurons_per_tile, baseline_mapping(options), "raise", options.stack)
    activity = record_activity(config, base.placement, options.dataset, options.data, model, options.data_root)
    costs = load_cost_model(options)
    objective = make_objective(config, machine, activity, costs, options.steps_per_execution, options.stack)
    extra = []
    if options.mapping not in (*STRATEGIES, AUTO):  # --mapping FILE: start from it too
        extra.append(
            place_network(config, machine, options.neurons_per_tile, options.mapping, "raise", options.stack).mapping
        )
    for name in STRATEGIES[1:] if not fixed_tiles else ():  # they change the tiles per layer
        try:
            extra.append(strategy_mapping(name, config, machine, base.neurons_per_tile))
        except MappingError:
            pass
    cut = None if fixed_tiles else neuron_cut(config, machine, base.neurons_per_tile, options.stack)
    if cut is not None:  # layers across chips (dataflow stacks): every chip, at the price of link hops
        extra.append(cut)
    grid = grid_shape(machine)
    cols = chip_grid_cols(machine)
    res = anneal(
        base.mapping,
        objective,
        budget_s,
        max_evals,
        seed,
        extra_starts=extra,
        progress=progress,
        grid=grid,
        chip_cols=cols,
        fixed_tiles=fixed_tiles,
    )
    mesh = grid is not None or cols is not None
    split = split_gain(base.mapping, res.best, objective, grid) if mesh else None
    baseline = _describe(base.mapping, res.baseline_value, config, machine, objective, grid, options.stack)
    best = _describe(res.best, res.best_value, config, machine, objective, grid, options.stack)
    summary = {
        "baseline": baseline,
        "best": best,
        "speedup": res.baseline_value / res.best_value,
        "why": gain_reasons(baseline, best, grid is not None, split),
        "gain_split": split,
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


def _describe(m: Mapping, step_s: float, config, machine, objective, grid: tuple | None, stack: str = "auto") -> dict:
    """What the summary says of one mapping: its time and the phase split of that time (and its
    tile order on a ``grid``)."""
    led = stack_for(machine, stack).memory(config, to_placement(m, machine), machine)
    return {
        "predicted_step_s": step_s,
        "samples_per_s": config.batch / step_s,
        "breakdown_s": objective.breakdown_s(m),
        "strategy": m.strategy,
        "neurons_per_tile": m.neurons_per_tile(),
        "tiles_used": m.tiles_used(),
        "chips_of_layer": m.summary()["chips_of_layer"],
        "tile_order": order_of(m, *grid)[0] if grid else None,
        "max_tile_bytes": int(led.per_tile().max()),
        "mapping_file": None,
    }


def split_gain(baseline: Mapping, best: Mapping, objective, grid: tuple | None = None) -> dict | None:
    """The gain of ``best`` over ``baseline`` in two factors whose product is the whole: the
    neurons-per-tile share (``baseline`` -> ``mid``: ``best``'s tiles per layer laid out as
    ``baseline`` lays its layers out: its chips, packed in layer order, its tile order and dealing)
    and the mesh share (``mid`` -> ``best``: where the same tiles sit and how the neurons are dealt
    onto them: tile order, layer placement, dealing). None when ``mid`` does not pack on
    ``baseline``'s chips, or either layout is not one the search moves (layers on runs of
    consecutive tiles)."""
    try:
        a, b = layout_of(baseline, grid=grid), layout_of(best, grid=grid)
        mid = replace(a, n_tiles=b.n_tiles).mapping("search")
    except MappingError:
        return None
    t0, t_mid, t1 = float(objective(baseline)), float(objective(mid)), float(objective(best))
    if not all(map(math.isfinite, (t0, t_mid, t1))):
        return None
    out = {"neurons_per_tile": t0 / t_mid, "mesh": t_mid / t1, "mid_step_s": t_mid}
    breakdown = getattr(objective, "breakdown_s", None)
    if breakdown is not None:  # what each share moved, phase by phase (gain_reasons names it)
        b0, bm, b1 = breakdown(baseline), breakdown(mid), breakdown(best)
        out["moved_s"] = {
            "neurons_per_tile": {k: bm[k] - b0[k] for k in b0},
            "mesh": {k: b1[k] - bm[k] for k in bm},
        }
    return out


def _phases_moved(moved: dict | None) -> str:
    """``"compute -12.3 us, exchange +0.4 us"``: the phases a share moved, largest first ("" if none did)."""
    if not moved:
        return ""
    d = sorted(((v, k) for k, v in moved.items() if abs(v) > 1e-12), key=lambda kv: -abs(kv[0]))
    return ", ".join(f"{k} {v * 1e6:+.1f} us" for v, k in d) or "no phase moved"


def _in_phases(moved: dict | None) -> str:
    """`` (compute -12.3 us, ...)``: what a share moved, or "" where the split did not time its phases. A share
    whose time moved in compute is not traffic: a dealing that re-balances the spike work is named so."""
    text = _phases_moved(moved)
    if not text:
        return ""
    top = max(moved, key=lambda k: abs(moved[k])) if moved else None
    if top == "compute" and abs(moved[top]) > 1e-12:
        text += ": the work per tile moved, not the traffic (a re-balanced share of the spikes)"
    return f" ({text})"


def gain_reasons(baseline: dict, best: dict, grid: bool, split: dict | None = None) -> list[str]:
    """Why the best mapping is faster, in lines: each phase that changed (largest gain first),
    the gain's two shares where ``split`` (:func:`split_gain`) gives them (the mesh's: tile order
    and layer placement at fixed neurons per tile; the neurons per tile's) and what of the
    placement changed (tiles per layer, tile order on a mesh or torus, chips)."""
    a, b = baseline["breakdown_s"], best["breakdown_s"]
    moved = sorted(((b[k] - a[k], k) for k in a if abs(b[k] - a[k]) > 1e-12), key=lambda d: d[0])
    lines = [f"{k} {d * 1e6:+.1f} us ({d / a[k] * 100:+.1f} %)" if a[k] else f"{k} {d * 1e6:+.1f} us" for d, k in moved]
    if split is not None:
        mesh, npt = split["mesh"], split["neurons_per_tile"]
        moved_s = split.get("moved_s", {})
        lines.append(
            f"gain {mesh * npt:.3f}x = the placement's share (tile order, layer placement, how the neurons are "
            f"dealt onto the tiles; neurons per tile fixed) {mesh:.3f}x"
            + _in_phases(moved_s.get("mesh"))
            + f" x the neurons-per-tile share {npt:.3f}x"
            + _in_phases(moved_s.get("neurons_per_tile"))
        )
    if baseline["neurons_per_tile"] != best["neurons_per_tile"]:
        lines.append(
            f"neurons per tile {baseline['neurons_per_tile']} -> {best['neurons_per_tile']} (tiles used "
            f"{baseline['tiles_used']} -> {best['tiles_used']}): the slowest tile's work per superstep changes"
        )
    if grid and baseline["tile_order"] != best["tile_order"]:
        lines.append(
            f"tile order {baseline['tile_order']} -> {best['tile_order']}: the layers' tiles sit elsewhere on the "
            "chip's grid, so their traffic crosses other links (the busiest link and the longest route of each "
            "exchange change; mapping/grid.py says what each order is)"
        )
    if baseline["chips_of_layer"] != best["chips_of_layer"]:
        lines.append(f"layers on chips {baseline['chips_of_layer']} -> {best['chips_of_layer']}")
    return lines
