"""S2/S3 — throughput vs maximum activity, fixed vs natural activity.

Claims (Finkbeiner et al., arXiv 2311.04386; seed-claims.md S2, S3):
S2 "fixed activity" (every neuron forced to spike, each list at its cap N_max) gives the lower
bound of throughput and "natural activity" an upper bound, so natural ≥ fixed on every
configuration. S3 throughput rises as activation sparsity rises (max activity 0.5 % … 50 %).

Reproduction: the 12 single-IPU networks of snn-on-ipu.md §4.2 (``bow``, 2 neurons/tile, B = 48,
T = 100, DVSGesture T = 50) at the caps N_max = 2·⌊a·N/2⌋ for the nine max activities a the
authors swept (§2). Fixed: the saturated activity re-timed without float math. Natural: a few Adam
steps on dataset-shaped synthetic data, the median recorded step re-timed. Rows where natural <
fixed are counted in the summary (``natural_ge_fixed`` column), not hidden.
"""

from __future__ import annotations

import sys

from experiments.s_common import DATASETS, pyplot, standard_main, time_both_activities

MAX_ACTIVITIES = (0.005, 0.01, 0.02, 0.025, 0.05, 0.1, 0.2, 0.25, 0.5)  # fraction of N per step
BATCH = 48
NEURONS_PER_TILE = 2
NATURAL_STEPS = 2
CONFIGS = [(d, h) for d in ("shd", "nmnist", "dvsgesture") for h in (2, 3, 4, 5)]
QUICK_CONFIGS = [("shd", 2), ("nmnist", 5)]
QUICK_MAX_ACTIVITIES = (0.01, 0.05, 0.5)
QUICK_NATURAL_STEPS = 1


def run(quick: bool = False) -> list[dict]:
    rows = []
    steps = QUICK_NATURAL_STEPS if quick else NATURAL_STEPS
    data = {}
    for dataset, hidden in QUICK_CONFIGS if quick else CONFIGS:
        for a in QUICK_MAX_ACTIVITIES if quick else MAX_ACTIVITIES:
            pair = {
                activity: {
                    "dataset": dataset,
                    "hidden_layers": hidden,
                    "max_activity": a,
                    "activity": activity,
                    "caps": "-".join(map(str, cfg.n_max)),
                    "timesteps": cfg.timesteps,
                    "batch": BATCH,
                    **timing,
                }
                for activity, (cfg, timing) in time_both_activities(
                    dataset, hidden, a, BATCH, NEURONS_PER_TILE, steps, data
                ).items()
            }
            ratio = pair["natural"]["samples_per_s"] / pair["fixed"]["samples_per_s"]
            for r in pair.values():
                r["natural_over_fixed"] = ratio
                r["natural_ge_fixed"] = ratio >= 1.0
                rows.append(r)
    return rows


def violations(rows) -> list[dict]:
    """Natural rows whose throughput is below the fixed-activity one of the same configuration."""
    return [r for r in rows if r["activity"] == "natural" and not r["natural_ge_fixed"]]


def summary(rows) -> str:
    nat = [r for r in rows if r["activity"] == "natural"]
    bad = violations(rows)
    ratios = [r["natural_over_fixed"] for r in nat]
    lines = [
        f"S2: natural >= fixed in {len(nat) - len(bad)}/{len(nat)} configurations "
        f"(natural/fixed throughput {min(ratios):.2f}..{max(ratios):.2f})"
    ]
    for r in bad:
        lines.append(
            f"  natural < fixed: {r['dataset']} L{r['hidden_layers']} a={r['max_activity']}: "
            f"{r['natural_over_fixed']:.3f}"
        )
    groups = sorted({(r["dataset"], r["hidden_layers"]) for r in rows})
    for d, h in groups:
        fx = sorted(
            (r for r in rows if r["activity"] == "fixed" and (r["dataset"], r["hidden_layers"]) == (d, h)),
            key=lambda r: r["max_activity"],
        )
        lines.append(
            f"S3: {d:10s} L{h} fixed samples/s {fx[0]['samples_per_s']:,.0f} at "
            f"{fx[0]['max_activity']:.1%} -> {fx[-1]['samples_per_s']:,.0f} at {fx[-1]['max_activity']:.0%} "
            f"({fx[0]['samples_per_s'] / fx[-1]['samples_per_s']:.1f}x)"
        )
    return "\n".join(lines)


def plot(rows, path):
    plt = pyplot()
    datasets = [d for d in DATASETS if any(r["dataset"] == d for r in rows)]
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4.3), squeeze=False)
    colours = {2: "tab:blue", 3: "tab:orange", 4: "tab:green", 5: "tab:red"}
    for ax, d in zip(axes[0], datasets):
        for h in sorted({r["hidden_layers"] for r in rows if r["dataset"] == d}):
            for act, style in (("fixed", "o-"), ("natural", "x--")):
                sel = sorted(
                    (r for r in rows if r["dataset"] == d and r["hidden_layers"] == h and r["activity"] == act),
                    key=lambda r: r["max_activity"],
                )
                ax.plot(
                    [100 * r["max_activity"] for r in sel],
                    [r["samples_per_s"] for r in sel],
                    style,
                    color=colours.get(h),
                    label=f"L{h} {act}",
                )
            meas = sorted(
                (r for r in rows if r["dataset"] == d and r["hidden_layers"] == h and r["measured_ms"] != ""),
                key=lambda r: r["max_activity"],
            )
            if meas:
                ax.plot(
                    [100 * r["max_activity"] for r in meas],
                    [r["batch"] / (r["measured_ms"] * 1e-3) for r in meas],
                    "*",
                    ms=11,
                    color=colours.get(h),
                    markeredgecolor="k",
                    label=f"L{h} measured",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("max activity [% of neurons per step]")
        ax.set_ylabel("samples/s (predicted)")
        ax.set_title(f"{d} (T = {[r for r in rows if r['dataset'] == d][0]['timesteps']}, B = {BATCH})")
        ax.legend(fontsize=7, ncol=2)
    fig.suptitle("S2/S3: throughput vs max activity; fixed (lower bound) vs natural activity, 1 bow IPU")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "s2_s3_activity")


if __name__ == "__main__":
    sys.exit(main())
