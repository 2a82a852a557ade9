"""B7 — Table 4 IPU training times of the single-hidden-layer CIFAR-10 model.

Claim (paper Table 4, IPU column): baseline 24.69 s, butterfly 37.73 s, fastfood 60.70 s,
circulant 21.82 s, low-rank 21.75 s, pixelfly 71.62 s (whole training runs; epochs not stated).
We predict the time of one SGD step (forward + backward + momentum update, batch 50, FP32,
``gc200``) with :func:`models.linear.timing.time_shl` and compare **ratios to the baseline** and the
order; absolute seconds are not comparable (unknown epochs, PopTorch/host overheads). The host
transfer of the input batch (``host_input_s``) is reported separately and also added in
``with_host_ratio`` (a constant per step for every method).
"""
from __future__ import annotations

import sys

from experiments.b_common import pyplot, standard_main
from models.linear.shl import SHL_METHODS
from models.linear.timing import time_shl

BATCH = 50
PAPER_IPU_S = {"baseline": 24.69, "butterfly": 37.73, "fastfood": 60.70, "circulant": 21.82,
               "low-rank": 21.75, "pixelfly": 71.62}


def run(quick: bool = False) -> list[dict]:
    ts = {m: time_shl(m, BATCH) for m in SHL_METHODS}
    base, base_h = ts["baseline"].step_s, ts["baseline"].step_s + ts["baseline"].host_s
    rows = []
    for m in SHL_METHODS:
        t = ts[m]
        rows.append({"method": m, "params": t.params, "step_s": t.step_s, "host_input_s": t.host_s,
                     "compute_sets": t.compute_sets, "max_tile_bytes": t.max_tile_bytes, "fits": t.fits,
                     "ratio": t.step_s / base, "with_host_ratio": (t.step_s + t.host_s) / base_h,
                     "paper_ipu_s": PAPER_IPU_S[m], "paper_ratio": PAPER_IPU_S[m] / PAPER_IPU_S["baseline"]})
    return rows


def order(rows, key):
    return [r["method"] for r in sorted(rows, key=lambda r: float(r[key]))]


def summary(rows) -> str:
    return ("B7: predicted order " + " < ".join(order(rows, "ratio")) + "; paper order "
            + " < ".join(order(rows, "paper_ratio")) + "; ratios to baseline "
            + ", ".join(f"{r['method']} {float(r['ratio']):.2f} (paper {float(r['paper_ratio']):.2f})" for r in rows))


def plot(rows, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    x = range(len(rows))
    ax.bar([i - 0.27 for i in x], [float(r["paper_ratio"]) for r in rows], 0.27, label="paper Table 4 (IPU)")
    ax.bar([i for i in x], [float(r["ratio"]) for r in rows], 0.27, label="simulated step (device)")
    ax.bar([i + 0.27 for i in x], [float(r["with_host_ratio"]) for r in rows], 0.27,
           label="simulated step + host input")
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xticks(list(x), [r["method"] for r in rows])
    ax.set_ylabel("time / baseline")
    ax.legend()
    ax.set_title("B7: SHL training time relative to the dense baseline (gc200, batch 50)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b7_table4_times")


if __name__ == "__main__":
    sys.exit(main())
