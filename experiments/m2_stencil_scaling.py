"""M2 — the multi-chip machine against measured multi-IPU runs: a 3×3 stencil on 1–16 GC2 IPUs.

Claim (issue 16): with the gc2x16 preset (C2 cards on a ladder without wrap-around, IPUModel's
sync hops rule plus a measured fixed part) and the stencil workload built as the authors' Poplar
program, tilesim predicts the strong scaling of Louw & McIntosh-Smith's Gaussian blur
(3 images × 3 types × 1/2/4/8/16 IPUs, µs per iteration) and the per-phase split at 1 and 16
IPUs (sync, on-chip exchange, IPU-Link exchange, pre/post copies, compute). Targets: strong
scaling within 10 % mean and 25 % max; 1 → 16 speed-up of each image within 15 %; at 16 IPUs
sync, exchange and globExchange each within 25 %.

Model: ``tilesim.models.stencil.workload.run_stencil`` on ``gc2x16`` resized to the IPU count; measured
rows from ``models/stencil/cases`` (copies of calibration/multi-ipu). ``--quick`` simulates 2
iterations per row instead of 10 (the time per iteration barely depends on the count).
"""

from __future__ import annotations

import sys

import numpy as np

from experiments.b_common import SEED, pyplot, standard_main  # noqa: F401  (SEED: deterministic)
from tilesim.models.stencil.measured import shipped_stencil_cases, validate_stencil


def run(quick: bool = False) -> list[dict]:
    rows = []
    for path in shipped_stencil_cases():
        for r in validate_stencil(path, iterations=2 if quick else 10):
            case = r["case"].split()
            rows.append(
                {
                    "kind": "scaling" if r["quantity"] == "us_per_iteration" else "phase",
                    "image": case[0],
                    "dtype": case[1],
                    "ipus": int(case[2]),
                    "phase": case[4] if len(case) > 4 else "total",
                    "quantity": r["quantity"],
                    "predicted": round(r["predicted"], 3),
                    "measured": r["measured"],
                    "error_pct": None if r["error_pct"] is None else round(r["error_pct"], 2),
                }
            )
    return rows


def speedups(rows) -> list[tuple]:
    """(image, dtype, predicted 1→16 speed-up, measured, error %)."""
    sc = {(r["image"], r["dtype"], int(r["ipus"])): r for r in rows if r["kind"] == "scaling"}
    out = []
    for (img, dt, n), r in sorted(sc.items()):
        if n == 1 and (img, dt, 16) in sc:
            r16 = sc[(img, dt, 16)]
            p = float(r["predicted"]) / float(r16["predicted"])
            m = float(r["measured"]) / float(r16["measured"])
            out.append((img, dt, p, m, 100 * (p - m) / m))
    return out


def summary(rows) -> str:
    sc = [abs(float(r["error_pct"])) for r in rows if r["kind"] == "scaling"]
    ph16 = [
        r
        for r in rows
        if r["kind"] == "phase" and int(r["ipus"]) == 16 and r["phase"] in ("sync", "exchange", "globExchange")
    ]
    lines = [f"strong scaling: mean |error| {np.mean(sc):.1f} %, max {np.max(sc):.1f} % over {len(sc)} rows"]
    lines += [
        f"  speed-up 1->16 {img} {dt}: predicted {p:.2f}x measured {m:.2f}x ({e:+.1f} %)"
        for img, dt, p, m, e in speedups(rows)
    ]
    lines += [
        f"  16 IPUs {r['dtype']} {r['phase']}: predicted {float(r['predicted']):.0f} measured "
        f"{float(r['measured']):.0f} ({float(r['error_pct']):+.1f} %)"
        for r in ph16
    ]
    return "\n".join(lines)


def plot(rows, path):
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    colours = {"bricks": "tab:blue", "leaf": "tab:green", "cheese": "tab:red"}
    marks = {"half4": "o", "float2": "s", "float": "^"}
    for img in colours:
        for dt in marks:
            rs = sorted(
                (r for r in rows if r["kind"] == "scaling" and r["image"] == img and r["dtype"] == dt),
                key=lambda r: int(r["ipus"]),
            )
            if not rs:
                continue
            x = [int(r["ipus"]) for r in rs]
            a.plot(x, [float(r["measured"]) for r in rs], marks[dt], color=colours[img], mfc="none")
            a.plot(
                x, [float(r["predicted"]) for r in rs], "-" + marks[dt], color=colours[img], ms=3, label=f"{img} {dt}"
            )
    a.set(
        xscale="log",
        yscale="log",
        xlabel="IPUs (GC2)",
        ylabel="µs per iteration",
        title="strong scaling: predicted (lines) vs measured (open)",
    )
    a.set_xticks([1, 2, 4, 8, 16], ["1", "2", "4", "8", "16"])
    a.legend(fontsize=6, ncol=3)
    ph = [r for r in rows if r["kind"] == "phase"]
    names = ["sync", "exchange", "globExchange", "pre", "post", "compute"]
    groups = [(n, dt) for n in (1, 16) for dt in marks]
    xs = np.arange(len(groups))
    for j, which in enumerate(("measured", "predicted")):
        bottom = np.zeros(len(groups))
        for k, name in enumerate(names):
            v = np.array(
                [
                    sum(float(r[which]) for r in ph if int(r["ipus"]) == n and r["dtype"] == dt and r["phase"] == name)
                    for n, dt in groups
                ]
            )
            b.bar(
                xs + (j - 0.5) * 0.4,
                v,
                0.38,
                bottom=bottom,
                color=f"C{k}",
                label=name if j == 0 else None,
                hatch="//" if which == "predicted" else None,
            )
            bottom += v
    b.set(yscale="log", ylabel="cycles per superstep", title="phase split, cheese: measured | predicted (hatched)")
    b.set_xticks(xs, [f"{n} IPU\n{dt}" for n, dt in groups], fontsize=7)
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "m2_stencil_scaling")


if __name__ == "__main__":
    sys.exit(main())
