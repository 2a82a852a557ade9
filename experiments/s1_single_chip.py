"""S1 — the 12 single-IPU configurations run, fit in SRAM, and report time, breakdown and memory.

Claim (Finkbeiner et al., arXiv 2311.04386; seed-claims.md S1): a constant network of 2944
neurons (code: 1471 tiles × 2 = 2942) split over 2–5 hidden layers, batch 48, T = 100, is trained
on one IPU for SHD, N-MNIST and DVSGesture (T = 50), and its throughput is measured.

Reproduction: the 12 networks of snn-on-ipu.md §4.2 (exact layer sizes and 5 % caps) on one
``bow`` IPU at 2 neurons per tile, each timed twice: fixed activity (every list at its cap; the
lower bound of throughput) and natural activity (a few Adam steps on dataset-shaped synthetic
data, the median step re-timed). For N-MNIST with 2 and 5 hidden layers the measured step times
of the authors' Sept-2022 log (calibration CSV) are given for comparison.
"""

from __future__ import annotations

import sys

from experiments.s_common import SINGLE_CHIP_WEIGHTS_M, n_weights, pyplot, standard_main, time_both_activities

MAX_ACTIVITY = 0.05  # the paper's main cap (N_max = 2·⌊0.05·N/2⌋)
BATCH = 48  # samples per step
NEURONS_PER_TILE = 2
NATURAL_STEPS = 3  # training steps per natural-activity config (median re-timed)
HIDDEN = (2, 3, 4, 5)
CONFIGS = [(d, h) for d in ("shd", "nmnist", "dvsgesture") for h in HIDDEN]
QUICK_CONFIGS = [("shd", 2), ("nmnist", 5)]
QUICK_NATURAL_STEPS = 1


def run(quick: bool = False) -> list[dict]:
    rows = []
    steps = QUICK_NATURAL_STEPS if quick else NATURAL_STEPS
    data = {}
    for dataset, hidden in QUICK_CONFIGS if quick else CONFIGS:
        runs = time_both_activities(dataset, hidden, MAX_ACTIVITY, BATCH, NEURONS_PER_TILE, steps, data)
        for activity, (cfg, timing) in runs.items():
            rows.append(
                {
                    "dataset": dataset,
                    "hidden_layers": hidden,
                    "activity": activity,
                    "layers": "-".join(map(str, cfg.layers)),
                    "neurons": sum(cfg.layers[1:]),
                    "weights": n_weights(cfg.layers),
                    "weights_doc_M": SINGLE_CHIP_WEIGHTS_M[(dataset, hidden)],
                    "caps": "-".join(map(str, cfg.n_max)),
                    "timesteps": cfg.timesteps,
                    "batch": BATCH,
                    **timing,
                }
            )
    return rows


def summary(rows) -> str:
    fixed = [r for r in rows if r["activity"] == "fixed"]
    nat = [r for r in rows if r["activity"] == "natural"]
    fit = sum(bool(r["fits"]) for r in rows)
    lines = [
        f"S1: {len(fixed)} configurations, {fit}/{len(rows)} runs fit in SRAM (max tile "
        f"{max(r['mem_max_tile_bytes'] for r in rows):,} of {rows[0]['mem_budget_bytes']:,} B)"
    ]
    for f, n in zip(fixed, nat):
        m = f"  measured {f['measured_ms']:.0f} ms" if f["measured_ms"] != "" else ""
        lines.append(
            f"  {f['dataset']:10s} L{f['hidden_layers']}: fixed {f['step_ms']:.2f} ms "
            f"({f['samples_per_s']:,.0f}/s, compute {f['compute_ms'] / f['step_ms']:.0%}), "
            f"natural {n['step_ms']:.2f} ms ({n['samples_per_s']:,.0f}/s){m}"
        )
    return "\n".join(lines)


def plot(rows, path):
    plt = pyplot()
    fixed = [r for r in rows if r["activity"] == "fixed"]
    nat = {(r["dataset"], r["hidden_layers"]): r for r in rows if r["activity"] == "natural"}
    names = [f"{r['dataset']}\nL{r['hidden_layers']}" for r in fixed]
    x = range(len(fixed))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    bottom = [0.0] * len(fixed)
    from tilesim.outputs.plots import PHASE_COLOURS  # matplotlib is imported only when drawing (start-up time)

    for key, colour in PHASE_COLOURS.items():  # the one palette; host = the variable copy
        vals = [r[f"{key}_ms"] for r in fixed]
        ax.bar(x, vals, bottom=bottom, color=colour, label=f"{key} (fixed)")
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.plot(
        x, [nat[(r["dataset"], r["hidden_layers"])]["step_ms"] for r in fixed], "kD", label="natural activity (total)"
    )
    meas = [(i, r["measured_ms"]) for i, r in zip(x, fixed) if r["measured_ms"] != ""]
    if meas:
        ax.errorbar(
            [i for i, _ in meas], [m for _, m in meas], yerr=0.5, fmt="r*", ms=10, label="measured (Sept-2022 log)"
        )
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("predicted time per training step [ms]")
    ax.set_title("step time at 5 % caps, B = 48 (bars: fixed activity)")
    ax.legend(fontsize=8)
    ax2.bar(x, [r["mem_max_tile_bytes"] / 1024 for r in fixed], color="tab:purple")
    ax2.axhline(fixed[0]["mem_budget_bytes"] / 1024, color="k", ls="--", label="tile SRAM (624 KiB)")
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(names, fontsize=8)
    ax2.set_ylabel("fullest tile [KiB]")
    ax2.set_title("max memory per tile")
    ax2.legend(fontsize=8)
    fig.suptitle("S1: the 12 single-IPU configurations (2942 neurons, 2 per tile, bow)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "s1_single_chip")


if __name__ == "__main__":
    sys.exit(main())
