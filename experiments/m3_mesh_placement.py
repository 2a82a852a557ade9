"""M3 — placement on a network-on-chip with distance: where a layer's tiles sit matters on a mesh,
hardly on a torus, not at all on the IPU.

Claim (issue 26, our own): the SHD-shaped network 700-128-128-20 (B = 16, T = 50, 5 % caps, fixed
activity) placed contiguously at 2 neurons per tile, its tiles handed out in the four tile orders
of :mod:`tilesim.mapping.grid`, is timed on a 16 x 16 mesh (``mesh-demo``, under the table program whose every
exchange is known only as per-tile totals, so the NoC carries proportional traffic: :mod:`tilesim.machine.gridload`;
:data:`STACKS`), on Wormhole n150's 8 x 9 torus (the tt-metal stack: a layer's cores that are no rectangle send
their lists as several multicasts) and on one GC200. (a) On the mesh the order moves the exchange — the centre-out
``spiral`` is fastest, ``columns`` slowest (X-then-Y routes funnel a band of columns through few
links); (b) on the torus the order matters through TT-Metal's multicast rectangle rule: a layer on whole
rows of cores is one rectangle (``rows``, ``snake``: fastest), a spiral's cores are several (slowest);
(c) the IPU's exchange has no distance, so there is no order to choose. Then
``map-search`` (tiles per layer, dealing, tile order) on the mesh beats the contiguous placement
and says why. (d) On a mesh of chips (the 32-chip Wormhole Galaxy, 4 x 8 Ethernet links) a deep network
(41 layers of 128, B = 16, T = 10, fixed activity) placed contiguously at 4 neurons per tile hands the
chips out row by row, so its chain of layers jumps 7 hops at the end of every row of chips: ``map-search
--fixed-neurons-per-tile`` walks the chips in snake order (one hop between consecutive layers) and says
how much of its gain is the mesh's (all of it: the neurons per tile are fixed). Units: seconds per step. Seed 0.
"""

from __future__ import annotations

import sys

from experiments.b_common import SEED, pyplot, standard_main
from tilesim.machine.description import load_machine
from tilesim.machine.fabric import grid_shape
from tilesim.mapping.grid import TILE_ORDERS, order_of, reorder
from tilesim.mapping.search import anneal
from tilesim.models.snn.placement.fit import chip_grid_cols, place_network, strategy_mapping
from tilesim.models.snn.placement.search import gain_reasons, make_objective, split_gain
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.outputs.plots import SERIES_COLOURS

CASE = dict(layers="700-128-128-20", batch=16, timesteps=50, max_activity=0.05, activity="fixed", seed=SEED)
MACHINES = ("mesh-demo", "wormhole-n150", "gc200", "wormhole-galaxy")
STACKS = {"mesh-demo": "poplar"}
"""The stack a machine is timed with where it is not its vendor's: ``mesh-demo`` (no vendor; ``auto`` is csl, whose
native program lays the layers out itself and ignores the tile order) runs the table program, the one stack that
knows each exchange only as per-tile totals, which is what (a) is about."""
CHIP_MESH_CASE = dict(layers="700-" + "-".join(["128"] * 40) + "-20", batch=16, timesteps=10, max_activity=0.05)
CHIP_MESH_NPT = 4
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
    return {"breakdown_s": phases, "chips_of_layer": [[0]], **{k: row[k] for k in keep}}


def _chip_mesh_rows(quick: bool) -> list[dict]:
    """(d): the deep network on the Galaxy's mesh of chips, contiguous vs map-search at fixed neurons per tile."""
    cfg = NetworkConfig(**CHIP_MESH_CASE, activity="fixed", seed=SEED)
    m = load_machine("wormhole-galaxy")
    base = place_network(cfg, m, CHIP_MESH_NPT, "contiguous", "raise").mapping
    objective = make_objective(cfg, m, fixed_activity(cfg))
    res = anneal(
        base, objective, 4.0 if quick else SEARCH_BUDGET_S, seed=SEED, chip_cols=chip_grid_cols(m), fixed_tiles=True
    )
    first = _row("wormhole-galaxy", "contiguous, chips in rows", base, objective, None)
    row = _row("wormhole-galaxy", f"map-search, fixed npt ({res.evaluated} evaluated)", res.best, objective, None)
    split = split_gain(base, res.best, objective)
    a, b = _described(first), _described(row)
    a["chips_of_layer"], b["chips_of_layer"] = base.summary()["chips_of_layer"], res.best.summary()["chips_of_layer"]
    row["why"] = "; ".join(gain_reasons(a, b, False, split))
    return [first, row]


def run(quick: bool = False) -> list[dict]:
    cfg = NetworkConfig(**{**CASE, **(dict(batch=8, timesteps=20) if quick else {})})
    rows = []
    for name in MACHINES[:-1]:
        m = load_machine(name)
        grid = grid_shape(m)
        stack = STACKS.get(name, "auto")
        placed = place_network(cfg, m, None, "contiguous", "raise", stack)  # the fewest neurons per tile that fit
        base, npt = placed.mapping, placed.neurons_per_tile
        objective = make_objective(cfg, m, fixed_activity(cfg), stack=stack)
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
    return rows + _chip_mesh_rows(quick)


def summary(rows) -> str:
    out = []
    for name in MACHINES:
        mine = [r for r in rows if r["machine"] == name]
        base = mine[0]["predicted_step_s"]
        parts = ", ".join(f"{r['mapping']} {r['predicted_step_s'] / base:.3f}x" for r in mine[1:])
        out.append(f"{name}: contiguous rows {base * 1e3:.3f} ms" + (f"; {parts}" if parts else " (no grid)"))
    for r in rows:
        if r["mapping"].startswith("map-search"):
            out.append(f"why ({r['machine']} search): {r['why']}")
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
