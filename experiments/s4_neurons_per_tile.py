"""S4 — single-IPU scaling with neurons per tile 2 → 32: throughput, and where SRAM runs out.

Claim (Finkbeiner et al., arXiv 2311.04386; seed-claims.md S4): larger networks (more neurons per
tile, more layers) show increasingly higher acceleration. On one IPU the authors grew the
network as in the weak-scaling runs: 1471 tiles × npt neurons in 3·npt/2 hidden layers of ≈ 980
neurons (snn-on-ipu.md §4.4; npt 16 and 32 "tried on one IPU", 16 left out of the multi-IPU runs).

Reproduction (``bow``, SHD, 5 % caps, theta2 0.9): two series.
* ``weak``: the authors' multi_neuron set-up (T = 10, B = 24, SGD) — fixed and natural activity.
* ``single``: the single-IPU benchmark set-up (T = 100, B = 48, Adam) — fixed activity only.
Per point: step time, samples/s, the dense-equivalent synaptic rate (samples/s × weights × T —
what a dense GPU implementation must match, so the IPU's "acceleration" grows with it), the
fullest tile's bytes per ledger category, and whether every tile fits its 624 KiB. The summary
names the first npt that overflows and the category that causes it. No GPU side (S8).
"""

from __future__ import annotations

import sys
from dataclasses import replace

from experiments.s_common import dataset_for, n_weights, pyplot, standard_main, time_fixed, time_natural, weak_config

DATASET = "shd"
MAX_ACTIVITY = 0.05
NPTS = (2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32)  # neurons per tile
SERIES = {
    "weak": dict(timesteps=10, batch=24, optimizer="sgd"),
    "single": dict(timesteps=100, batch=48, optimizer="adam"),
}
NATURAL_STEPS = 2
NATURAL_MAX_NPT = 16  # natural runs beyond this cost minutes
QUICK_NPTS = (2, 8, 16, 24)
QUICK_NATURAL_NPTS = (2,)


def _config(npt, series):

    s = SERIES[series]
    cfg = weak_config(DATASET, npt, 1, batch=s["batch"], max_activity=MAX_ACTIVITY, timesteps=s["timesteps"])
    return replace(cfg, optimizer=s["optimizer"], lr=1e-3 if s["optimizer"] == "adam" else cfg.lr)


def run(quick: bool = False) -> list[dict]:
    rows = []
    npts = QUICK_NPTS if quick else NPTS
    data = None
    for series in SERIES:
        for npt in npts:
            modes = ["fixed"]
            if series == "weak" and (npt in QUICK_NATURAL_NPTS if quick else npt <= NATURAL_MAX_NPT):
                modes.append("natural")
            for activity in modes:
                cfg = _config(npt, series)
                row = {
                    "series": series,
                    "neurons_per_tile": npt,
                    "activity": activity,
                    "hidden_layers": cfg.n_layers - 1,
                    "neurons": sum(cfg.layers[1:]),
                    "weights": n_weights(cfg.layers),
                    "timesteps": cfg.timesteps,
                    "batch": cfg.batch,
                    "optimizer": cfg.optimizer,
                }
                if activity == "fixed":
                    row.update(time_fixed(cfg, 1, npt))
                else:
                    if data is None:
                        data = dataset_for(DATASET, cfg.batch * (1 if quick else NATURAL_STEPS), cfg.layers[0])
                    row.update(time_natural(cfg, 1, npt, data, 1 if quick else NATURAL_STEPS))
                row["dense_equiv_gsyn_per_s"] = row["samples_per_s"] * row["weights"] * cfg.timesteps / 1e9
                rows.append(row)
    return rows


def memory_limit(rows, series):
    """(last npt that fits, first that overflows, its fullest tile's largest category, the category that
    grew most from the last fitting npt) for one series of fixed rows; None entries if never reached."""
    sel = sorted(
        (r for r in rows if r["series"] == series and r["activity"] == "fixed"), key=lambda r: r["neurons_per_tile"]
    )
    fit = [r for r in sel if r["fits"]]
    over = [r for r in sel if not r["fits"]]
    if not over:
        return (fit[-1]["neurons_per_tile"] if fit else None), None, None, None
    first = over[0]
    last = fit[-1] if fit else None
    keys = [
        k
        for k in first
        if k.startswith("mem_") and k not in ("mem_max_tile_bytes", "mem_budget_bytes", "mem_top_category")
    ]
    grew = max(keys, key=lambda k: first[k] - (last[k] if last else 0))
    return (last["neurons_per_tile"] if last else None), first["neurons_per_tile"], first["mem_top_category"], grew


def summary(rows) -> str:
    lines = []
    for series, s in SERIES.items():
        sel = sorted(
            (r for r in rows if r["series"] == series and r["activity"] == "fixed"), key=lambda r: r["neurons_per_tile"]
        )
        last, first, top, grew = memory_limit(rows, series)
        lim = (
            (
                f"fits up to npt {last}; npt {first} overflows (fullest tile's largest category {top}, "
                f"fastest-growing {grew})"
            )
            if first
            else f"fits up to npt {last} (no overflow in the sweep)"
        )
        lines.append(f"S4 {series} (T={s['timesteps']}, B={s['batch']}, {s['optimizer']}): " + lim)
        lines.append(
            "  fixed: "
            + ", ".join(
                f"npt {r['neurons_per_tile']}: {r['samples_per_s']:,.0f}/s, {r['dense_equiv_gsyn_per_s']:.0f} Gsyn/s, "
                f"{r['mem_max_tile_bytes'] / 1024:.0f} KiB"
                for r in sel
            )
        )
    return "\n".join(lines)


def plot(rows, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
    for series, style in (("weak", "o-"), ("single", "s-")):
        for act, ls in (("fixed", style), ("natural", "x--")):
            sel = sorted(
                (r for r in rows if r["series"] == series and r["activity"] == act), key=lambda r: r["neurons_per_tile"]
            )
            if not sel:
                continue
            x = [r["neurons_per_tile"] for r in sel]
            lab = f"{series} ({act}, T={sel[0]['timesteps']}, B={sel[0]['batch']})"
            axes[0].plot(x, [r["samples_per_s"] for r in sel], ls, label=lab)
            axes[1].plot(x, [r["dense_equiv_gsyn_per_s"] for r in sel], ls, label=lab)
            if act == "fixed":
                axes[2].plot(x, [r["mem_max_tile_bytes"] / 1024 for r in sel], ls, label=f"{series} total")
                for r in sel:
                    if not r["fits"]:
                        axes[2].plot(r["neurons_per_tile"], r["mem_max_tile_bytes"] / 1024, "rx", ms=10)
    weak = sorted(
        (r for r in rows if r["series"] == "weak" and r["activity"] == "fixed"), key=lambda r: r["neurons_per_tile"]
    )
    x = [r["neurons_per_tile"] for r in weak]
    for key in ("mem_gradients", "mem_weights", "mem_state", "mem_exchange_buffers"):
        axes[2].plot(x, [r[key] / 1024 for r in weak], ":", label=f"weak: {key[4:]}")
    budget = rows[0]["mem_budget_bytes"] / 1024
    axes[2].axhline(budget, color="k", ls="--", label="624 KiB tile SRAM")
    axes[0].set_ylabel("samples/s (predicted)")
    axes[1].set_ylabel("dense-equivalent synapse updates [G/s]")
    axes[2].set_ylabel("fullest tile [KiB] (x = overflow)")
    axes[0].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("neurons per tile (3·npt/2 hidden layers)")
        ax.legend(fontsize=7)
    fig.suptitle("S4: one bow IPU, SHD, 5 % caps — network grown with neurons per tile")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "s4_neurons_per_tile")


if __name__ == "__main__":
    sys.exit(main())
