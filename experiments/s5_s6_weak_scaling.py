"""S5/S6 — multi-IPU weak scaling 1 → 16 chips, and what makes it scale.

Claims (Finkbeiner et al., arXiv 2311.04386; seed-claims.md S5, S6):
S5 weak scaling on SHD (natural activity, 5 % max activity) up to ~190k neurons / ~180M
parameters; in the authors' code 16 IPUs × 8 neurons/tile = 193 layers, 188,282 neurons and
184.8M weights on N-MNIST (188,284 / 184.35M on SHD; snn-on-ipu.md §4.4).
S6 moving from communication-bound to compute-bound by raising the batch (24 → 384) or the
network per IPU (2 → 8 neurons per tile) improves scaling: efficiency at 16 chips rises with batch
and with neurons per tile, and the link/sync share of the step falls.

Reproduction: the §4.4 ``multi_neuron`` networks (per chip 1471·npt neurons in 3·npt/2 layers,
layers never straddle a chip, T = 10, SGD, theta2 0.9) on 1, 2, 4, 8, 16 ``bow`` chips, SHD with
npt 2/4/8 × batch 24…384, N-MNIST (24×24×2 input) npt 2/4/8 at B = 24, and npt 16 at B = 24 to
answer "does 16 per tile fit?" from the SRAM ledger. Every point is timed at **fixed activity**
(all lists at their 5 % caps: the lower bound of throughput); natural activity, as the poster ran
it, is ``experiments/s5_s6_natural.py`` (1–16 chips, npt 2/4/8, B 24/384, beside fixed), and every
combination of the structural unknowns with the coefficients' band is ``experiments/s6_combinations.py``.

Throughput = samples/s × neurons (the network grows with the chips); weak-scaling efficiency
E(C) = throughput(C) / (C · throughput(1)) for the same dataset, npt and batch. Communication
share = (sync + exchange + links) / step. If ``tilesim.models.snn.calibration.calibrate.prediction_band`` exists the
step times and efficiencies carry its leave-one-out band (``*_lo``/``*_hi`` columns).

Structure (issues 17, 25): every point is timed under the §4.4 runs' structure
(:data:`tilesim.models.snn.commands.scaling.PAPER_STRUCTURE`: sync scope "chip", copies "separate", host per epoch,
round trip at the fitted rate, each chip its own, two executions of 500 steps per epoch) and again
with each assumption switched the other way: ``step_ms_if_<name>`` and
``efficiency_if_<name>`` (the structural band; ``tilesim scaling`` draws the same for one recipe).
"""

from __future__ import annotations

import sys

from experiments.s_common import (
    BREAKDOWN_KEYS,
    WEAK_SCALING_TABLE,
    n_weights,
    pyplot,
    standard_main,
    time_fixed,
    weak_config,
)
from tilesim.models.snn.commands.scaling import ASSUMPTIONS, PAPER_STEPS_PER_EXECUTION, PAPER_STRUCTURE
from tilesim.models.snn.step.structure import flipped
from tilesim.outputs.plots import PHASE_COLOURS

MAX_ACTIVITY = 0.05
CHIPS = (1, 2, 4, 8, 16)
GRID = (
    [("shd", npt, b) for npt in (2, 4, 8) for b in (24, 48, 96, 192, 384)]
    + [("nmnist", npt, 24) for npt in (2, 4, 8)]
    + [("shd", 16, 24)]
)
QUICK_CHIPS = (1, 4)
QUICK_GRID = [("shd", 2, 24), ("shd", 2, 96), ("shd", 8, 24), ("shd", 8, 96)]
QUICK_EXTRA = [("nmnist", 8, 24, (1, 16))]  # the headline network, counted and timed
HEADLINE = {"nmnist": (188_282, 184.8e6), "shd": (188_284, 184.35e6)}  # §4.4, 16 chips × 8/tile


def _row(dataset, npt, batch, chips):
    cfg = weak_config(dataset, npt, chips, batch=batch, max_activity=MAX_ACTIVITY)
    row = {
        "dataset": dataset,
        "neurons_per_tile": npt,
        "batch": batch,
        "chips": chips,
        "layers": cfg.n_layers,
        "neurons": sum(cfg.layers[1:]),
        "weights": n_weights(cfg.layers),
        "caps_hidden": cfg.n_max[0],
    }
    doc = WEAK_SCALING_TABLE.get((npt, chips))
    row["neurons_doc"] = (doc[1] if dataset == "nmnist" else doc[2]) if doc else ""
    row["weights_doc_M"] = (doc[3] if dataset == "nmnist" else doc[4]) if doc else ""
    spe = PAPER_STEPS_PER_EXECUTION
    row.update(time_fixed(cfg, chips, npt, band=True, steps_per_execution=spe, structure=PAPER_STRUCTURE))
    row["structure"] = PAPER_STRUCTURE.describe()
    for name in ASSUMPTIONS:  # the structural band: each assumption switched the other way
        other = flipped(PAPER_STRUCTURE, name)
        t = time_fixed(cfg, chips, npt, steps_per_execution=PAPER_STEPS_PER_EXECUTION, structure=other)
        row[f"step_ms_if_{name}"] = t["step_ms"]
    comm = row["sync_ms"] + row["exchange_ms"] + row["links_ms"]
    row["comm_share"] = comm / row["step_ms"]
    row["links_sync_share"] = (row["sync_ms"] + row["links_ms"]) / row["step_ms"]
    row["neuron_samples_per_s"] = row["samples_per_s"] * row["neurons"]
    return row


def _check_counts(row):
    """The §4.4 headline counts must come out exactly (neurons) / to the stated rounding (weights)."""
    if (row["neurons_per_tile"], row["chips"]) == (8, 16) and row["dataset"] in HEADLINE:
        neurons, weights = HEADLINE[row["dataset"]]
        if row["neurons"] != neurons or abs(row["weights"] - weights) > 0.005e6:
            raise AssertionError(
                f"{row['dataset']} 16 chips x 8/tile: {row['neurons']:,} neurons, "
                f"{row['weights']:,} weights; §4.4 gives {neurons:,} and {weights / 1e6}M"
            )


def _efficiency(rows):
    base = {(r["dataset"], r["neurons_per_tile"], r["batch"]): r for r in rows if r["chips"] == 1}
    for r in rows:
        b = base.get((r["dataset"], r["neurons_per_tile"], r["batch"]))
        r["efficiency"] = r["neuron_samples_per_s"] / (r["chips"] * b["neuron_samples_per_s"]) if b else ""
        r["efficiency_lo"] = r["efficiency_hi"] = ""
        if b and r["step_lo_ms"] != "" and b["step_lo_ms"] != "":
            size = r["neurons"] / (r["chips"] * b["neurons"])
            effs = [size * b[k] / r[k] for k in ("step_lo_ms", "step_hi_ms")]
            r["efficiency_lo"], r["efficiency_hi"] = min(effs), max(effs)
        for name in ASSUMPTIONS:
            k = f"step_ms_if_{name}"
            size = r["neurons"] / (r["chips"] * b["neurons"]) if b else 0.0
            r[f"efficiency_if_{name}"] = size * b[k] / r[k] if b else ""
    return rows


def run(quick: bool = False) -> list[dict]:
    rows = []
    jobs = (
        [(d, n, b, QUICK_CHIPS) for d, n, b in QUICK_GRID] + QUICK_EXTRA
        if quick
        else [(d, n, b, CHIPS) for d, n, b in GRID]
    )
    for dataset, npt, batch, chips_list in jobs:
        for chips in chips_list:
            row = _row(dataset, npt, batch, chips)
            _check_counts(row)
            rows.append(row)
    return _efficiency(rows)


def _at(rows, dataset, npt, batch, chips):
    return next(
        (
            r
            for r in rows
            if (r["dataset"], r["neurons_per_tile"], r["batch"], r["chips"]) == (dataset, npt, batch, chips)
        ),
        None,
    )


def summary(rows) -> str:
    lines = []
    for ds in ("nmnist", "shd"):
        h = _at(rows, ds, 8, 24, 16)
        if h:
            lines.append(
                f"S5: {ds} 16 chips x 8/tile: {h['layers']} layers, {h['neurons']:,} neurons, "
                f"{h['weights'] / 1e6:.2f}M weights (doc {h['neurons_doc']:,} / {h['weights_doc_M']}M)"
            )
    for ds in sorted({r["dataset"] for r in rows}):
        for npt in sorted({r["neurons_per_tile"] for r in rows if r["dataset"] == ds}):
            for b in sorted({r["batch"] for r in rows if r["dataset"] == ds and r["neurons_per_tile"] == npt}):
                cmax = max(
                    r["chips"] for r in rows if (r["dataset"], r["neurons_per_tile"], r["batch"]) == (ds, npt, b)
                )
                r = _at(rows, ds, npt, b, cmax)
                if r is None or r["efficiency"] == "":
                    continue
                band = f" [{r['efficiency_lo']:.2f}, {r['efficiency_hi']:.2f}]" if r["efficiency_lo"] != "" else ""
                flips = ", ".join(f"{n} {r[f'efficiency_if_{n}']:.3f}" for n in ASSUMPTIONS if n != "host_transfer")
                lines.append(
                    f"S6: {ds} npt {npt:2d} B {b:3d} at {cmax} chips: efficiency {r['efficiency']:.3f}{band} "
                    f"(flipped: {flips}), "
                    f"{r['samples_per_s']:,.0f} samples/s, comm {r['comm_share']:.1%} "
                    f"(links {r['links_ms'] / r['step_ms']:.1%}, sync {r['sync_ms'] / r['step_ms']:.1%}), "
                    f"fits {r['fits']} ({r['mem_max_tile_bytes'] / 1024:.0f} KiB)"
                )
    return "\n".join(lines)


def _efficiency_line(ax, sel, style: str, label: str) -> None:
    """One efficiency-vs-chips line with its leave-one-out band (when every row has one)."""
    x = [r["chips"] for r in sel]
    (line,) = ax.plot(x, [r["efficiency"] for r in sel], style, label=label)
    if all(r["efficiency_lo"] != "" for r in sel):
        lo, hi = [r["efficiency_lo"] for r in sel], [r["efficiency_hi"] for r in sel]
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)


def _by_chips(rows, dataset: str, npt: int, batch: int) -> list:
    key = (dataset, npt, batch)
    return sorted(
        (r for r in rows if (r["dataset"], r["neurons_per_tile"], r["batch"]) == key), key=lambda r: r["chips"]
    )


def _panel_npt(ax, rows) -> None:
    """Efficiency vs chips per dataset and neurons per tile at the smallest batch (x = SRAM overflow)."""
    base_b = min(r["batch"] for r in rows)
    for ds, ls in (("shd", "-"), ("nmnist", ":")):
        for npt in sorted({r["neurons_per_tile"] for r in rows if r["dataset"] == ds}):
            sel = _by_chips(rows, ds, npt, base_b)
            if not sel:
                continue
            _efficiency_line(ax, sel, "o" + ls, f"{ds} npt {npt}")
            for r in sel:
                if not r["fits"]:
                    ax.plot(r["chips"], r["efficiency"], "rx", ms=10)
    ax.set_title(f"efficiency vs chips, B = {base_b} (x = SRAM overflow)")


def _panel_batch(ax, rows) -> None:
    """Efficiency vs chips per batch, SHD at the fewest neurons per tile."""
    npt_b = min(r["neurons_per_tile"] for r in rows)
    for b in sorted({r["batch"] for r in rows if r["dataset"] == "shd" and r["neurons_per_tile"] == npt_b}):
        _efficiency_line(ax, _by_chips(rows, "shd", npt_b, b), "o-", f"B {b}")
    ax.set_title(f"efficiency vs chips, SHD, npt {npt_b}")


def _panel_split(ax, rows) -> None:
    """The step split at the most chips the SHD rows reach (a --quick run stops SHD before 16 chips)."""
    split_ds = "shd" if any(r["dataset"] == "shd" for r in rows) else rows[0]["dataset"]
    cmax = max(r["chips"] for r in rows if r["dataset"] == split_ds)
    sel = sorted(
        (r for r in rows if r["dataset"] == split_ds and r["chips"] == cmax),
        key=lambda r: (r["neurons_per_tile"], r["batch"]),
    )
    bottom = [0.0] * len(sel)
    for key in BREAKDOWN_KEYS:
        vals = [r[f"{key}_ms"] / r["step_ms"] for r in sel]
        ax.bar(range(len(sel)), vals, bottom=bottom, label=key, color=PHASE_COLOURS[key])
        bottom = [a + v for a, v in zip(bottom, vals)]
    for i, r in enumerate(sel):
        ax.annotate(
            f"{r['step_ms']:.2f} ms", (i, 1.0), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7
        )
    ax.set_ylim(0, 1.12)
    ax.set_xticks(range(len(sel)))
    ax.set_xticklabels([f"npt {r['neurons_per_tile']}\nB {r['batch']}" for r in sel], fontsize=7)
    ax.set_ylabel("share of the step")
    ax.set_title(f"{split_ds.upper()} step split at {cmax} chips (labels: step time)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _panel_throughput(ax, rows) -> None:
    """SHD samples/s vs chips per neurons per tile and batch (ideal weak scaling: flat)."""
    for npt in sorted({r["neurons_per_tile"] for r in rows if r["dataset"] == "shd"}):
        for b in sorted({r["batch"] for r in rows if r["dataset"] == "shd" and r["neurons_per_tile"] == npt}):
            s = _by_chips(rows, "shd", npt, b)
            ax.plot([r["chips"] for r in s], [r["samples_per_s"] for r in s], "o-", label=f"npt {npt} B {b}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("chips")
    ax.set_ylabel("samples/s (fixed activity)")
    ax.set_title("SHD throughput (ideal weak scaling: flat)")
    ax.legend(fontsize=6, ncol=2)


def plot(rows, path):
    """The four S5/S6 panels: efficiency by neurons per tile and by batch, the step split, throughput."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    _panel_npt(axes[0][0], rows)
    _panel_batch(axes[0][1], rows)
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("chips")
        ax.set_ylabel("weak-scaling efficiency")
        ax.legend(fontsize=8)
    _panel_split(axes[1][0], rows)
    _panel_throughput(axes[1][1], rows)
    fig.suptitle("S5/S6: weak scaling on bow chips, T = 10, 5 % caps, fixed activity")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "s5_s6_weak_scaling")


if __name__ == "__main__":
    sys.exit(main())
