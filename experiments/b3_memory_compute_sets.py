"""B3 — Observation 3: IPU memory grows with the number of compute sets, beyond the data footprint.

Claim (paper §3.3, Figs. 5 and 7): memory use is not only the footprint of the data structures;
the number of compute sets (chosen by the compiler) adds memory. The simulator charges, per tile,
always-live control code per compute set and exchange program, vertex state per vertex, exchange
code per exchange instruction and vertex code per codelet (``ipu-hardware.md`` §3.3; constants in
:class:`tilesim.models.linear.planner.OverheadConstants`: 20 B + 8 B/edge vertex state [S], 4 B per
exchange instruction [S], 32 B control code per compute set and per exchange [U placeholder]).

Sweep: one training pass (forward + backward) of an ``N x N`` dense, butterfly and pixelfly layer,
batch 50, FP32, ``gc200``, ``N = 2^6 … 2^12``; record compute sets, vertices and the ledger's
totals over all tiles: data (``variables:*``) vs overhead (vertex state, vertex code, control
code, exchange code).
"""

from __future__ import annotations

import sys

from experiments.b_common import pyplot, standard_main
from tilesim.errors import SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.models.linear.timing import layer_parts, time_layer

BATCH = 50
KINDS = ("dense", "butterfly", "pixelfly")
LOG2_N = list(range(6, 13))
QUICK_LOG2_N = [6, 8, 10]
OVERHEAD = ("vertex_state", "vertex_code", "control_code", "exchange_code")


def run(quick: bool = False) -> list[dict]:
    rows = []
    for kind in KINDS:
        for ln in QUICK_LOG2_N if quick else LOG2_N:
            n = 2**ln
            try:
                t = time_layer(kind, n, BATCH)
            except SramOverflowError as exc:
                rows.append({"kind": kind, "n": n, "fits": False, "note": str(exc)[:80]})
                continue
            cat = t.ledger.by_category()
            over = sum(cat.get(c, 0) for c in OVERHEAD)
            data = sum(v for c, v in cat.items() if c.startswith("variables:"))
            vertices = sum(int(p.vertices.sum()) for p in _phases(kind, n))
            rows.append(
                {
                    "kind": kind,
                    "n": n,
                    "fits": t.fits,
                    "compute_sets": t.compute_sets,
                    "vertices": vertices,
                    "data_bytes": data,
                    "overhead_bytes": over,
                    "overhead_per_compute_set": over / t.compute_sets,
                    **{f"{c}_bytes": cat.get(c, 0) for c in OVERHEAD},
                    "max_tile_bytes": t.max_tile_bytes,
                    "note": "",
                }
            )
    return rows


def _phases(kind, n):

    f, b = layer_parts(kind, n, BATCH, load_machine("gc200"))
    return f.phases + b.phases


def summary(rows) -> str:
    ok = [r for r in rows if r["fits"] is True]
    parts = []
    for kind in KINDS:
        sel = [r for r in ok if r["kind"] == kind]
        if sel:
            parts.append(
                f"{kind}: compute sets {sel[0]['compute_sets']}->{sel[-1]['compute_sets']}, overhead "
                f"{sel[0]['overhead_bytes'] / 1e3:.0f}->{sel[-1]['overhead_bytes'] / 1e3:.0f} kB"
            )
    return "B3: " + "; ".join(parts)


def plot(rows, path):
    plt = pyplot()
    ok = [r for r in rows if r["fits"] is True]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for kind, mk in zip(KINDS, "osd"):
        sel = [r for r in ok if r["kind"] == kind]
        axes[0].plot([r["compute_sets"] for r in sel], [r["overhead_bytes"] / 1e6 for r in sel], mk + "-", label=kind)
        axes[1].loglog(
            [r["n"] for r in sel], [r["data_bytes"] / 1e6 for r in sel], mk + "-", base=2, label=f"{kind} data"
        )
        axes[1].loglog(
            [r["n"] for r in sel], [r["overhead_bytes"] / 1e6 for r in sel], mk + ":", base=2, label=f"{kind} overhead"
        )
    axes[0].set_xlabel("compute sets (forward + backward)")
    axes[0].set_ylabel("overhead memory, all tiles [MB]")
    axes[0].legend()
    axes[1].set_xlabel("N")
    axes[1].set_ylabel("memory, all tiles [MB]")
    axes[1].legend(fontsize=7)
    fig.suptitle("B3: memory beyond the data footprint grows with compute sets (gc200, batch 50)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b3_memory_compute_sets")


if __name__ == "__main__":
    sys.exit(main())
