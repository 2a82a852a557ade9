"""M1 — mappings: neurons per tile 2 → 16 on one chip, and the search on a 4-chip system.

Claim (issue 4, our own): (a) on one GC200, packing the N-MNIST 2-layer network
(2312-1466-1466-10, B = 48, T = 100, 5 % caps) at more neurons per tile uses fewer tiles, makes
each step slower (per-tile work grows with neurons per tile) and each tile fuller (the 6
per-worker dW copies grow with fan-in × neurons per tile); (b) on a 4-chip system, the search
(`tilesim map-search`) finds a placement at least as fast as the paper's `contiguous`, never one
that overflows. Both parts re-time ONE recorded natural-activity step (record once, re-time many:
the math never depends on the mapping). Units: seconds per step, bytes per tile. Seed 0.
"""

from __future__ import annotations

import sys

import numpy as np

from experiments.b_common import SEED, pyplot, standard_main
from tilesim.machine.description import load_machine
from tilesim.mapping.search import anneal
from tilesim.models.snn.placement.fit import place_network, strategy_mapping
from tilesim.models.snn.placement.search import make_objective
from tilesim.models.snn.step.retime import retime
from tilesim.models.snn.training.network import NetworkConfig, init_network, train_step
from tilesim.outputs.plots import SERIES_COLOURS, label_bars

ONE_CHIP = dict(
    layers="2312-1466-1466-10",
    batch=48,
    timesteps=100,
    max_activity=0.05,
    input_cap=32,
    weight_mul=4.0,
    seed=SEED,
    output_second_threshold=None,
    second_threshold_schedule=None,
)
FOUR_CHIP = dict(
    layers="1152-" + "-".join(["976"] * 12) + "-10",
    batch=48,
    timesteps=100,
    max_activity=0.05,
    input_cap=32,
    optimizer="sgd",
    weight_mul=4.0,
    seed=SEED,
    output_second_threshold=None,
    second_threshold_schedule=None,
)
NPT = (2, 4, 6, 8, 10, 12, 14, 16)
SEARCH_BUDGET_S = 120.0


def _record(cfg, placement):
    rng = np.random.default_rng(SEED)
    x = (rng.random((cfg.timesteps, cfg.batch, cfg.layers[0])) < 0.03).astype(np.uint8)
    y = rng.integers(0, cfg.layers[-1], cfg.batch)
    return train_step(init_network(cfg, placement), x, y).activity


def run(quick: bool = False) -> list[dict]:
    rows = []
    scale = dict(batch=8, timesteps=20) if quick else {}
    cfg = NetworkConfig(**{**ONE_CHIP, **scale})
    m = load_machine("gc200")
    activity = _record(cfg, place_network(cfg, m, 2).placement)
    for npt in NPT[:3] if quick else NPT:
        p = place_network(cfg, m, npt, "contiguous", "report")
        pred = retime(activity, cfg, p.placement, m)
        led = p.ledger.to_dict()
        rows.append(
            {
                "part": "npt",
                "system": "gc200 x1",
                "mapping": f"contiguous npt={npt}",
                "neurons_per_tile": npt,
                "tiles_used": p.mapping.tiles_used(),
                "predicted_step_s": pred.step_s,
                "max_tile_bytes": led["max_tile_bytes"],
                "budget_bytes": led["budget_bytes"],
                "fits": not led["overflow_tiles"],
                **{f"{k}_s": v for k, v in pred.result.breakdown_s().items()},
            }
        )
    cfg4 = NetworkConfig(
        **{
            **FOUR_CHIP,
            **(dict(layers="1152-" + "-".join(["976"] * 12) + "-10", batch=8, timesteps=10) if quick else {}),
        }
    )
    m4 = load_machine("gc200", 4)
    base = place_network(cfg4, m4, 2, "contiguous")
    objective = make_objective(cfg4, m4, _record(cfg4, base.placement))
    extra = [strategy_mapping(n, cfg4, m4, 2) for n in ("round_robin", "balanced", "graph")]
    for mp in [base.mapping] + extra:
        rows.append(
            {
                "part": "4-chip",
                "system": "gc200 x4",
                "mapping": mp.strategy,
                "neurons_per_tile": max(mp.neurons_per_tile()),
                "tiles_used": mp.tiles_used(),
                "predicted_step_s": objective(mp),
                "fits": True,
            }
        )
    res = anneal(base.mapping, objective, budget_s=6.0 if quick else SEARCH_BUDGET_S, seed=SEED, extra_starts=extra)
    rows.append(
        {
            "part": "4-chip",
            "system": "gc200 x4",
            "mapping": f"search ({res.evaluated} evaluated)",
            "neurons_per_tile": max(res.best.neurons_per_tile()),
            "tiles_used": res.best.tiles_used(),
            "predicted_step_s": res.best_value,
            "fits": True,
            "chips_of_layer": " ".join("+".join(map(str, on)) for on in res.best.summary()["chips_of_layer"]),
        }
    )
    return rows


def summary(rows) -> str:
    npt = [r for r in rows if r["part"] == "npt"]
    four = [r for r in rows if r["part"] == "4-chip"]
    base = four[0]["predicted_step_s"]
    best = four[-1]["predicted_step_s"]
    fit = [r["neurons_per_tile"] for r in npt if r["fits"]]
    return (
        f"M1: 1 chip, npt {npt[0]['neurons_per_tile']}->{npt[-1]['neurons_per_tile']}: step "
        f"{npt[0]['predicted_step_s'] * 1e3:.2f} -> {npt[-1]['predicted_step_s'] * 1e3:.2f} ms, fullest tile "
        f"{npt[0]['max_tile_bytes']:,} -> {npt[-1]['max_tile_bytes']:,} B (fits up to npt {max(fit)}); "
        f"4 chips: contiguous {base * 1e3:.3f} ms, search {best * 1e3:.3f} ms ({base / best:.3f}x)"
    )


def plot(rows, path):
    plt = pyplot()
    npt = [r for r in rows if r["part"] == "npt"]
    four = [r for r in rows if r["part"] == "4-chip"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    x = [r["neurons_per_tile"] for r in npt]
    axes[0].plot(x, [r["predicted_step_s"] * 1e3 for r in npt], "o-")
    axes[0].set_xlabel("neurons per tile")
    axes[0].set_ylabel("predicted ms per step")
    axes[0].set_title("one GC200: step time")
    axes[1].plot(x, [r["max_tile_bytes"] / 1024 for r in npt], "o-", color=SERIES_COLOURS[1])
    axes[1].axhline(npt[0]["budget_bytes"] / 1024, color="k", ls="--", lw=1, label="SRAM per tile")
    axes[1].set_xlabel("neurons per tile")
    axes[1].set_ylabel("fullest tile (KiB)")
    axes[1].set_title("one GC200: memory")
    axes[1].legend()
    bars = axes[2].barh(
        [r["mapping"] for r in four], [r["predicted_step_s"] * 1e3 for r in four], color=SERIES_COLOURS[0]
    )
    label_bars(axes[2], bars, "{:.3f} ms")
    axes[2].set_xlim(0, max(r["predicted_step_s"] for r in four) * 1e3 * 1.25)
    axes[2].invert_yaxis()
    axes[2].set_xlabel("predicted ms per step")
    axes[2].set_title("4 x GC200: strategies and search")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "m1_mapping")


if __name__ == "__main__":
    raise SystemExit(main())
