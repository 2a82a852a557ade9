"""M3 — placement on a network-on-chip with distance: where a layer's tiles sit matters on a mesh,
hardly on a torus, not at all on the IPU.

Claim (issue 26, our own): the SHD-shaped network 700-128-128-20 (B = 16, T = 50, 5 % caps, fixed
activity) placed contiguously at 2 neurons per tile, its tiles handed out in the four tile orders
of :mod:`tilesim.mapping.grid`, is timed on a 16 x 16 mesh (``mesh-demo``), on Wormhole n150's 8 x 9 torus
and on one GC200. Every exchange is known only as per-tile totals, so the NoC carries proportional
traffic (:mod:`tilesim.machine.gridload`). (a) On the mesh the order moves the exchange — the centre-out
``spiral`` is fastest, ``columns`` slowest (X-then-Y routes funnel a band of columns through few
links); (b) on the torus the wrap-around links even the loads out and the order changes the step by
well under 1 %; (c) the IPU's exchange has no distance, so there is no order to choose. Then
``map-search`` (tiles per layer, dealing, tile order) on the mesh beats the contiguous placement
and says why. Units: seconds per step. Seed 0.
"""

from __future__ import annotations

import sys

from experiments.b_common import SEED, pyplot, standard_main
from tilesim.machine.description import load_machine
from tilesim.machine.fabric import grid_shape
from tilesim.mapping.grid import TILE_ORDERS, order_of, reorder
from tilesim.mapping.search import anneal
from tilesim.models.snn.placement.fit import place_network, strategy_mapping
from tilesim.models.snn.placement.search import gain_reasons, make_objective
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.outputs.plots import SERIES_COLOURS

CASE = dict(layers="700-128-128-20", batch=16, timesteps=50, max_activity=0.05, activity="fixed", seed=SEED)
MACHINES = ("mesh-demo", "wormhole-n150", "gc200")
SEARCH_BUDGET_S = 30.0


def _row(machine_name, mapping_name, mp, objective, grid):
    bd = objective.breakdown_s(mp)
    return {
        "machine": machine_name,
        "mapping": mapping_name,
        "tile_order": order_of(mp, *grid)[0] if grid else "",
        "neurons_per_tile": " ".join(map(str, mp.neurons_per_tile())),
        "tiles_used": mp.tiles_used(),
        "predicted_step_s": objective(mp),
        **{f"{k}_s": v for k, v in bd.items()},
    }


def _described(row: dict) -> dict:
    """A result row as :func:`tilesim.models.snn.placement.search.gain_reasons` reads a mapping's description."""
    phases = {k[:-2]: v for k, v in row.items() if k.endswith("_s") and k != "predicted_step_s"}
    keep = ("neurons_per_tile", "tiles_used", "tile_order")
    return {"breakdown_s": phases, "chip_of_layer": [0], **{k: row[k] for k in keep}}


def run(quick: bool = False) -> list[dict]:
    cfg = NetworkConfig(**{**CASE, **(dict(batch=8, timesteps=20) if quick else {})})
    rows = []
    for name in MACHINES:
        m = load_machine(name)
        grid = grid_shape(m)
        placed = place_network(cfg, m, None, "contiguous", "raise")  # the fewest neurons per tile that fit
        base, npt = placed.mapping, placed.neurons_per_tile
        objective = make_objective(cfg, m, fixed_activity(cfg))
        for order in TILE_ORDERS if grid else ("rows",):
            mp = reorder(base, order, *grid) if grid else base
            rows.append(_row(name, f"contiguous, {order}" if grid else "contiguous", mp, objective, grid))
        if name == "mesh-demo":
            extra = [strategy_mapping(s, cfg, m, npt) for s in ("round_robin", "balanced")]
            res = anneal(base, objective, 4.0 if quick else SEARCH_BUDGET_S, seed=SEED, extra_starts=extra, grid=grid)
            row = _row(name, f"map-search ({res.evaluated} evaluated)", res.best, objective, grid)
            first = rows[-len(TILE_ORDERS)]  # contiguous, rows
            row["why"] = "; ".join(gain_reasons(_described(first), _described(row), True))
            rows.append(row)
    return rows


def summary(rows) -> str:
    out = []
    for name in MACHINES:
        mine = [r for r in rows if r["machine"] == name]
        base = mine[0]["predicted_step_s"]
        parts = ", ".join(f"{r['mapping']} {r['predicted_step_s'] / base:.3f}x" for r in mine[1:])
        out.append(f"{name}: contiguous rows {base * 1e3:.3f} ms" + (f"; {parts}" if parts else " (no grid)"))
    search = [r for r in rows if r["mapping"].startswith("map-search")]
    if search:
        out.append(f"why (mesh-demo search): {search[0]['why']}")
    return "M3: " + "\n    ".join(out)


def plot(rows, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(MACHINES), figsize=(15, 4))
    for ax, name in zip(axes, MACHINES):
        mine = [r for r in rows if r["machine"] == name]
        labels = [r["mapping"] for r in mine]
        ex = [r["exchange_s"] * 1e3 for r in mine]
        rest = [(r["predicted_step_s"] - r["exchange_s"]) * 1e3 for r in mine]
        ax.barh(labels, rest, color=SERIES_COLOURS[0], label="everything but exchange")
        ax.barh(labels, ex, left=rest, color=SERIES_COLOURS[1], label="exchange")
        ax.invert_yaxis()
        ax.set_xlabel("predicted ms per step")
        ax.set_title(name, fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle("the same network, its tiles handed out in other orders (and searched on the mesh)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "m3_mesh_placement")


if __name__ == "__main__":
    raise SystemExit(main())
