"""S5/S6 at natural activity, as the poster ran them, beside the fixed-activity rows.

Claims (seed-claims.md S5, S6): weak scaling on SHD at *natural* activity (5 % max activity) from 1 to
16 IPUs, and efficiency at 16 chips rising with batch (24 → 384) and with neurons per tile (2 → 8).
``s5_s6_weak_scaling.py`` times every point at fixed activity (every list at its 5 % cap: the lower
bound of throughput). Here each network trains one real SGD step on SHD-shaped input
(:mod:`tilesim.models.snn.training.data`, the generator of ``experiments/s_common.py``; initial weights, so
the activity is that of an untrained network) and that step's recorded activity is re-timed; the
fixed-activity step of the same network and placement is timed beside it. Both under the §4.4
structure (:data:`tilesim.models.snn.commands.scaling.PAPER_STRUCTURE`: two executions of 500 steps per
epoch). Weak-scaling efficiency per activity mode E(C) = throughput(C) / (C · throughput(1)),
throughput = samples/s × neurons.

Grid: SHD, 1/2/4/8/16 ``bow`` chips × npt 2/4/8 × B 24/384 (the ends of the poster's batch range;
the signs of S6 read only those). Run time on the shared 2-core machine: about 9 min under load (the
16-chip steps, 188k neurons and 184M weights at npt 8, take up to 30 s each, natural and fixed
together). ``--quick``: 1 and 2 chips, npt 2, B 24 (under a minute). Not in the test suite's quick
runs beyond ``--quick``."""

from __future__ import annotations

import sys
import time

import numpy as np

from experiments.s_common import (
    DATASETS,
    SEED,
    dataset_for,
    machine,
    memory_fields,
    place,
    pyplot,
    standard_main,
    timing_fields,
    weak_config,
)
from tilesim.models.snn.commands.scaling import PAPER_STEPS_PER_EXECUTION, PAPER_STRUCTURE
from tilesim.models.snn.step.retime import retime

MAX_ACTIVITY = 0.05
CHIPS = (1, 2, 4, 8, 16)
NPTS = (2, 4, 8)
BATCHES = (24, 384)
QUICK = ((1, 2), (2,), (24,))


def _point(npt: int, batch: int, chips: int, data: dict) -> list:
    """The natural and the fixed row of one network (one placement)."""
    from tilesim.models.snn.training.network import init_network, train_step  # Numba kernels load only when they run

    cfg = weak_config("shd", npt, chips, batch=batch, max_activity=MAX_ACTIVITY)
    mach = machine(chips)
    placement, ledger = place(cfg, mach, npt)
    if batch not in data:
        data[batch] = dataset_for("shd", batch, DATASETS["shd"].n_inputs)
    state = init_network(cfg, placement)
    spikes, labels = next(data[batch].batches(batch, cfg.timesteps, cfg.input_cap, np.random.default_rng(SEED + 1)))
    res = train_step(state, spikes, labels)
    out = []
    for mode, act in (("natural", res.activity), ("fixed", None)):
        pred = retime(act, cfg, placement, mach, None, None, PAPER_STEPS_PER_EXECUTION, PAPER_STRUCTURE)
        row = {"activity": mode, "neurons_per_tile": npt, "batch": batch, "chips": chips}
        row |= {"layers": cfg.n_layers, "neurons": sum(cfg.layers[1:]), **timing_fields(pred, batch)}
        fill = [float(lst.counts[..., 0].mean()) / max(n, 1) for lst, n in zip(res.activity.layers, cfg.n_max)]
        row["cap_fill"] = float(np.mean(fill[:-1])) if mode == "natural" else 1.0
        row |= memory_fields(ledger)
        out.append(row)
    return out


def _efficiency(rows) -> list:
    base = {(r["activity"], r["neurons_per_tile"], r["batch"]): r for r in rows if r["chips"] == 1}
    for r in rows:
        b = base.get((r["activity"], r["neurons_per_tile"], r["batch"]))
        r["efficiency"] = (
            (r["samples_per_s"] * r["neurons"]) / (r["chips"] * b["samples_per_s"] * b["neurons"]) if b else ""
        )
    return rows


def run(quick: bool = False) -> list[dict]:
    chips, npts, batches = QUICK if quick else (CHIPS, NPTS, BATCHES)
    rows: list = []
    data: dict = {}
    for b in batches:  # the small batch first: its rows come soonest
        for npt in npts:
            for c in chips:
                t0 = time.perf_counter()
                rows += _point(npt, b, c, data)
                nat, fix = rows[-2], rows[-1]
                print(
                    f"B {b} npt {npt} {c} chips: natural {nat['step_ms']:.3f} ms, fixed {fix['step_ms']:.3f} ms "
                    f"({time.perf_counter() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    return _efficiency(rows)


def _at(rows, mode, npt, b, c):
    return next(
        (r for r in rows if (r["activity"], r["neurons_per_tile"], r["batch"], r["chips"]) == (mode, npt, b, c)), None
    )


def summary(rows) -> str:
    cmax = max(r["chips"] for r in rows)
    npts = sorted({r["neurons_per_tile"] for r in rows})
    bs = sorted({r["batch"] for r in rows})
    lines = []
    for mode in ("natural", "fixed"):
        cells = []
        for npt in npts:
            for b in bs:
                r = _at(rows, mode, npt, b, cmax)
                if r and r["efficiency"] != "":
                    cells.append(f"npt {npt} B {b}: E {r['efficiency']:.3f} ({r['step_ms']:.2f} ms)")
        lines.append(f"S5/S6 {mode} activity at {cmax} chips: " + "; ".join(cells))

    def sign(mode, fixed_axis):
        out = []
        for k in bs if fixed_axis == "batch" else npts:
            a = _at(rows, mode, npts[0], k, cmax) if fixed_axis == "batch" else _at(rows, mode, k, bs[0], cmax)
            z = _at(rows, mode, npts[-1], k, cmax) if fixed_axis == "batch" else _at(rows, mode, k, bs[-1], cmax)
            if a and z and a is not z:
                out.append("+" if z["efficiency"] > a["efficiency"] else "−")
        return " ".join(out) or "n/a"

    for mode in ("natural", "fixed"):
        lines.append(
            f"S6 {mode}: sign of ΔE over npt (per batch) {sign(mode, 'batch')}; "
            f"over batch (per npt) {sign(mode, 'npt')}"
        )
    fills = [r["cap_fill"] for r in rows if r["activity"] == "natural"]
    lines.append(f"natural activity used {min(fills):.0%}–{max(fills):.0%} of the 5 % caps (hidden layers, mean)")
    return "\n".join(lines)


def plot(rows, path):
    """Efficiency against chips, natural (solid) and fixed (dashed), per npt and batch."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for npt in sorted({r["neurons_per_tile"] for r in rows}):
        for b in sorted({r["batch"] for r in rows}):
            for mode, ls in (("natural", "-"), ("fixed", "--")):
                sel = sorted(
                    (r for r in rows if (r["activity"], r["neurons_per_tile"], r["batch"]) == (mode, npt, b)),
                    key=lambda r: r["chips"],
                )
                if sel:
                    ax.plot(
                        [r["chips"] for r in sel],
                        [r["efficiency"] for r in sel],
                        "o" + ls,
                        ms=3,
                        label=f"{mode} npt {npt} B {b}",
                    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("chips")
    ax.set_ylabel("weak-scaling efficiency")
    ax.set_title("S5/S6 on SHD: natural (solid) vs fixed (dashed) activity, 5 % caps")
    ax.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "s5_s6_natural")


if __name__ == "__main__":
    sys.exit(main())
