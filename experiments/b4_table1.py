"""B4 — Table 1: the GC200's headline figures.

Claim (paper Table 1): GC200 = 1472 cores, 900 MB on-chip memory, 47.5 TB/s on-chip memory
bandwidth, 320 GB/s inter-chip bandwidth, 62.5 TFLOPS FP32, 1.33 GHz. The ``gc200`` preset's
derived figures (``Machine.derived()``) must reproduce them. Units: bytes, B/s, FLOP/s, Hz.
Not checkable from the preset: off-chip memory (64 GB streaming memory, 20 GB/s) and power (150 W)
— the simulator models neither streaming memory capacity nor power.
"""

from __future__ import annotations

import sys

from experiments.b_common import pyplot, standard_main
from tilesim.machine.description import load_machine

PAPER_TABLE1 = [  # (quantity, paper value, unit, derived key)
    ("cores", 1472, "tiles", "tiles"),
    ("on-chip memory", 900 * 2**20, "B", "total_sram_bytes"),  # vendor "900 MB" = 897 MiB: MiB
    ("on-chip memory bandwidth", 47.5e12, "B/s", "memory_bytes_per_s"),
    ("inter-chip bandwidth", 320e9, "B/s", "link_bytes_per_s"),
    ("FP32 peak", 62.5e12, "FLOP/s", "peak_fp32_flops"),
    ("clock", 1.33e9, "Hz", "clock_hz"),
]


def run(quick: bool = False) -> list[dict]:
    d = load_machine("gc200").derived()
    return [
        {"quantity": q, "unit": u, "paper": p, "simulator": float(d[k]), "ratio": float(d[k]) / p}
        for q, p, u, k in PAPER_TABLE1
    ]


def summary(rows) -> str:
    worst = max(rows, key=lambda r: abs(r["ratio"] - 1))
    return f"B4: all {len(rows)} Table 1 figures within {100 * abs(worst['ratio'] - 1):.1f} % ({worst['quantity']})"


def plot(rows, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh([r["quantity"] for r in rows], [100 * (r["ratio"] - 1) for r in rows])
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("simulator vs paper Table 1 [%]")
    ax.set_title("B4: gc200 preset vs Table 1")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b4_table1")


if __name__ == "__main__":
    sys.exit(main())
