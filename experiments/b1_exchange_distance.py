"""B1 — Observation 1: tile-to-tile latency and bandwidth depend on message size, not on distance.

Claim (Shekofteh, Alles & Fröning, §3.1, Fig. 3): on a GC200 the pair of neighbouring tiles (0, 1)
and the distant pair (0, 644) see the same latency and bandwidth for every message size. The
simulator must show this on the IPU's all-to-all fabric (``gc200``) and show the contrary on a
2-D mesh machine (``mesh-demo``: 16 x 16 tiles, XY routing, 3 cycles per hop), where the far
pair is the opposite corner (0, 255).

Model: ``tilesim.machine.fabric.make_fabric(machine).point_to_point_cycles(src, dst, bytes)`` — on the IPU
``100 cycles + ceil(bytes / 4 B per cycle)`` [S]; on the mesh ``20 + ceil(bytes / 8) + 3 · hops``.
"""

from __future__ import annotations

import sys

from experiments.b_common import SEED, pyplot, standard_main  # noqa: F401  (SEED: deterministic)
from tilesim.models.linear.cli import exchange_bench

PAIRS = {"gc200": (0, [1, 644]), "mesh-demo": (0, [1, 255])}  # (src, [near dst, far dst])
SIZES_BYTES = [4 * 4**i for i in range(10)]  # 4 B … 1 MiB
QUICK_SIZES_BYTES = [4, 256, 16384, 1048576]


def run(quick: bool = False) -> list[dict]:
    rows = []
    for machine, (src, dsts) in PAIRS.items():
        for r in exchange_bench(machine, src, dsts, QUICK_SIZES_BYTES if quick else SIZES_BYTES):
            r["pair"] = "near" if r["dst"] == dsts[0] else "far"
            rows.append(r)
    return rows


def far_over_near(rows, machine) -> list[float]:
    near = {r["bytes"]: float(r["cycles"]) for r in rows if r["machine"] == machine and r["pair"] == "near"}
    return [float(r["cycles"]) / near[r["bytes"]] for r in rows if r["machine"] == machine and r["pair"] == "far"]


def summary(rows) -> str:
    g, m = far_over_near(rows, "gc200"), far_over_near(rows, "mesh-demo")
    return (
        f"B1: far/near latency ratio gc200 {min(g):.3f}..{max(g):.3f} (distance-independent); "
        f"mesh-demo {min(m):.3f}..{max(m):.3f}"
    )


def plot(rows, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, machine in zip(axes, PAIRS):
        for pair, style in (("near", "o-"), ("far", "x--")):
            sel = [r for r in rows if r["machine"] == machine and r["pair"] == pair]
            ax.loglog(
                [r["bytes"] for r in sel],
                [r["seconds"] * 1e6 for r in sel],
                style,
                label=f"{pair}: tiles {sel[0]['src']}->{sel[0]['dst']} ({sel[0]['hops']} hops)",
            )
        ax.set_title(f"{machine}")
        ax.set_xlabel("message size [B]")
        ax.set_ylabel("transfer time [us]")
        ax.legend()
    fig.suptitle("B1: point-to-point exchange time vs size, near vs far tiles")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b1_exchange_distance")


if __name__ == "__main__":
    sys.exit(main())
