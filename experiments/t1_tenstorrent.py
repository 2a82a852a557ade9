"""T1 — Tenstorrent machines against Tenstorrent's own measurements: collectives over Ethernet
and dense matmuls on Tensix cores, fitted on Wormhole only, Blackhole predicted without refitting.

Claim (issue 26): held out, Blackhole matmuls and the collectives the project did not calibrate on
are within 25 % mean; the Wormhole calibration's own error is reported.

Model: ``tilesim.models.collective`` (paths over a line or ring of Ethernet links, fluid link sharing, a
latency per hop, a launch per pass) on ``wormhole-t3000`` / ``blackhole-p150x8``, and
``tilesim.models.tensix.matmul`` (matrix engine cycles by fidelity, unpacker bytes by data format, DRAM
stream) on ``wormhole-n150`` / ``blackhole-p150``. Measured rows: tt-metal ``tech_reports/``
(``CCLs/results/SUMMARY_*``, ``GEMM_FLOPS/GEMM_FLOPS.md``), shipped in ``models/collective/cases``
and ``models/tensix/cases``. ``--quick`` changes nothing (every row takes milliseconds).
"""

from __future__ import annotations

import sys

import numpy as np

from experiments.b_common import SEED, pyplot, standard_main  # noqa: F401  (SEED: deterministic)
from tilesim.models.collective.measured import shipped_collective_cases, validate_collective
from tilesim.models.tensix.measured import shipped_matmul_cases, validate_matmul


def run(quick: bool = False) -> list[dict]:
    rows = [dict(r, kind="collective") for p in shipped_collective_cases() for r in validate_collective(p)]
    rows += [dict(r, kind="matmul") for p in shipped_matmul_cases() for r in validate_matmul(p)]
    return [{k: r[k] for k in ("kind", "case", "machine", "use", "predicted", "measured", "error_pct")} for r in rows]


def groups(rows) -> list[tuple[str, str, float, float, int]]:
    """(workload, fitted or held out, mean |error| %, max |error| %, rows) per group."""
    out = []
    for kind in ("collective", "matmul"):
        for use, name in (("calibrate", "fitted (Wormhole)"), ("check", "held out")):
            e = [abs(float(r["error_pct"])) for r in rows if r["kind"] == kind and r["use"] == use]
            out.append((kind, name, float(np.mean(e)), float(np.max(e)), len(e)))
        bh = [abs(float(r["error_pct"])) for r in rows if r["kind"] == kind and r["machine"].startswith("blackhole")]
        out.append((kind, "Blackhole (held out)", float(np.mean(bh)), float(np.max(bh)), len(bh)))
    return out


def summary(rows) -> str:
    return "\n".join(
        f"{kind:<10} {name:<22} mean |error| {mean:5.1f} %, max {mx:5.1f} % over {n} rows"
        for kind, name, mean, mx, n in groups(rows)
    )


def plot(rows, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    for ax, kind, unit in zip(axes, ("collective", "matmul"), ("µs per call", "ns per call (device)")):
        for machine, colour in (("wormhole", "tab:blue"), ("blackhole", "tab:red")):
            for use, marker in (("calibrate", "o"), ("check", "^")):
                rs = [r for r in rows if r["kind"] == kind and r["machine"].startswith(machine) and r["use"] == use]
                if rs:
                    what = "fitted" if use == "calibrate" else "held out"
                    x, y = [float(r["measured"]) for r in rs], [float(r["predicted"]) for r in rs]
                    ax.plot(x, y, marker, color=colour, mfc="none" if use == "check" else colour, ms=4,
                            label=f"{machine} {what} ({len(rs)})")  # fmt: skip
        lo = min(float(r["measured"]) for r in rows if r["kind"] == kind)
        hi = max(float(r["measured"]) for r in rows if r["kind"] == kind)
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.fill_between([lo, hi], [0.75 * lo, 0.75 * hi], [1.25 * lo, 1.25 * hi], color="0.9", label="±25 %")
        ax.set(xscale="log", yscale="log", xlabel=f"measured {unit}", ylabel=f"predicted {unit}", title=kind)
        ax.legend(fontsize=7)
    fig.suptitle("Tenstorrent: predicted vs measured (tt-metal tech reports)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "t1_tenstorrent")


if __name__ == "__main__":
    raise SystemExit(main())
