"""``tilesim map-search``: find a faster placement of an SNN by re-timing one recorded step.

One functional training step records the activity (or, with ``--activity fixed``, the
fixed-activity lists are built without training); every candidate mapping is then timed by
:func:`models.snn.retime.retime` — counters recounted from the activity, no float math — and
checked against the SRAM ledger. The search itself is :func:`mapping.search.anneal`, seeded
with the paper's ``contiguous`` placement, the other strategies and a ``--mapping FILE`` if given.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

from mapping import STRATEGIES, Mapping
from mapping.search import anneal
from tilesim.errors import MappingError, require
from tilesim.memory import MemoryTotals

__all__ = ["make_objective", "search_mapping", "register_map_search"]


def make_objective(config, machine, activity, costs=None, steps_per_execution: int = 52):
    """``objective(mapping) -> predicted step seconds`` (``inf`` if a tile overflows SRAM)."""
    from models.snn.counters import count_work
    from models.snn.placing import to_placement
    from models.snn.timing import predict_step_s, snn_memory

    cache: dict = {}

    def objective(m: Mapping) -> float:
        placement = to_placement(m, machine)
        if snn_memory(config, placement, machine, MemoryTotals(machine), cache).overflow_tiles().size:
            return math.inf
        counters = count_work(activity, placement, per_step=True, cache=cache)
        return predict_step_s(config, placement, counters, machine, costs, steps_per_execution, cache)

    objective.cache = cache          # what it keeps between candidates (byte-bounded LRUs inside)
    return objective


def search_mapping(opts: dict, budget_s: float, seed: int = 0, max_evals: int | None = None, progress=None) -> dict:
    """Run the search for the ``tilesim run`` options ``opts``; returns the JSON summary."""
    from models.snn.cli import _config, _costs, _nir
    from models.snn.placing import place_network, strategy_mapping
    from models.snn.retime import record_activity
    from tilesim.machine import load_machine

    t0 = time.perf_counter()
    model = _nir(opts)
    config = _config(opts, model)
    machine = load_machine(opts["machine"], opts["chips"])
    base = place_network(config, machine, opts["neurons_per_tile"], "contiguous", "raise")
    activity = record_activity(config, base.placement, opts, model)
    objective = make_objective(config, machine, activity, _costs(opts), opts["steps_per_execution"])
    extra = []
    if opts.get("mapping") not in (None, *STRATEGIES):       # --mapping FILE: start from it too
        extra.append(place_network(config, machine, opts["neurons_per_tile"], opts["mapping"], "raise").mapping)
    for name in STRATEGIES[1:]:
        try:
            extra.append(strategy_mapping(name, config, machine, base.neurons_per_tile))
        except MappingError:
            pass
    res = anneal(base.mapping, objective, budget_s, max_evals, seed, extra_starts=extra, progress=progress)
    out = {
        "baseline": _describe(base.mapping, res.baseline_value, config, machine),
        "best": _describe(res.best, res.best_value, config, machine),
        "speedup": res.baseline_value / res.best_value,
        "evaluated": res.evaluated, "accepted": res.accepted,
        "mappings_per_s": res.evaluated / res.wall_s,
        "history": [{"evaluated": e, "predicted_step_s": v} for e, v in res.history],
        "wall_s": time.perf_counter() - t0,
    }
    if opts.get("out"):
        path = Path(opts["out"])
        res.best.save(path)
        out["best"]["mapping_file"] = str(path)
    return out, res.best


def _describe(m: Mapping, step_s: float, config, machine) -> dict:
    from models.snn.placing import to_placement
    from models.snn.timing import snn_memory
    led = snn_memory(config, to_placement(m, machine), machine)
    return {"predicted_step_s": step_s, "samples_per_s": config.batch / step_s, "strategy": m.strategy,
            "neurons_per_tile": m.neurons_per_tile(), "tiles_used": m.tiles_used(),
            "chip_of_layer": m.summary()["chip_of_layer"], "max_tile_bytes": int(led.per_tile().max()),
            "mapping_file": None}


def cmd_map_search(args) -> int:
    from models.snn.cli import _merge
    require(args.budget_s > 0, "--budget-s", args.budget_s, "must be > 0")
    opts = _merge(args)
    opts["out"] = args.out
    bar = None
    if not args.json and not args.quiet:
        from tqdm import tqdm
        bar = tqdm(total=None, unit=" mappings", desc="map-search", leave=False)

        def progress(n, best):
            bar.update(n - bar.n)
            bar.set_postfix_str(f"best {best * 1e3:.3f} ms", refresh=False)
    else:
        progress = None
    try:
        out, _ = search_mapping(opts, args.budget_s, args.seed or 0, args.max_evals, progress)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        b, o = out["baseline"], out["best"]
        print(f"contiguous (paper): {b['predicted_step_s'] * 1e3:.3f} ms/step, neurons/tile {b['neurons_per_tile']}")
        print(f"best found:         {o['predicted_step_s'] * 1e3:.3f} ms/step ({out['speedup']:.3f}x), "
              f"neurons/tile {o['neurons_per_tile']}, chips {o['chip_of_layer']}")
        print(f"{out['evaluated']} mappings evaluated in {out['wall_s']:.1f} s "
              f"({out['mappings_per_s']:.1f}/s)" + (f"; wrote {args.out}" if args.out else ""))
    return 0


def register_map_search(sub, add_run_flags) -> None:
    p = sub.add_parser("map-search", help="search neuron-to-tile placements for the fastest predicted step",
                       description="Record one training step, then re-time it under many placements "
                                   "(annealing from the paper's contiguous mapping, the other strategies and a --mapping FILE "
                                   "if given); never returns a mapping that overflows SRAM.")
    add_run_flags(p)
    p.add_argument("--budget-s", type=float, default=10.0, help="wall-clock budget of the search (default 10)")
    p.add_argument("--max-evals", type=int, help="stop after this many mappings")
    p.add_argument("--out", help="write the best mapping here (JSON; use it with --mapping FILE)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (keys baseline, best, evaluated, wall_s, ...)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_map_search)

