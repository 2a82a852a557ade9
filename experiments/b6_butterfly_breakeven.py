"""B6 — butterfly and pixelfly vs a dense linear layer on the IPU: time vs N and the break-even.

Claim (paper §4.1, Fig. 6 right): on the GC200 butterfly beats ``torch.nn.Linear`` from
``N = 2^10``; worst slowdown 1.4x (butterfly) and 1.03x (pixelfly); best speedup 1.6x / 1.3x.

Simulated: the forward pass of one ``N x N`` layer (the paper times the layer call), batch 50
(paper Table 3; Fig. 6's batch is not stated), FP32, ``gc200``, ``N = 2^6 … 2^13``. Dense = planned
AMP matmul; butterfly = ``log2 N`` vector phases with partner exchanges; pixelfly = block 16,
butterfly size 16, rank 32 (the Table 4 configuration). Break-even = the smallest ``N`` of the sweep
from which butterfly is faster than dense at every larger ``N``. Pixelfly points that do not fit
624 KiB per tile are marked.
"""
from __future__ import annotations

import sys

from experiments.b_common import pyplot, standard_main
from models.linear.timing import time_layer
from tilesim.errors import SramOverflowError

BATCH = 50
PAPER_BREAK_EVEN_N = 2 ** 10
KINDS = ("dense", "butterfly", "pixelfly")
LOG2_N = list(range(6, 14))
QUICK_LOG2_N = [8, 9, 10, 11, 12]


def run(quick: bool = False) -> list[dict]:
    rows = []
    for ln in QUICK_LOG2_N if quick else LOG2_N:
        n = 2 ** ln
        row = {"n": n}
        for kind in KINDS:
            try:
                t = time_layer(kind, n, BATCH, backward=False)
                row[f"{kind}_s"], row[f"{kind}_fits"] = t.step_s, t.fits
            except SramOverflowError:
                row[f"{kind}_s"], row[f"{kind}_fits"] = "", False
        for kind in ("butterfly", "pixelfly"):
            row[f"{kind}_speedup"] = row["dense_s"] / row[f"{kind}_s"] if row[f"{kind}_s"] != "" else ""
        rows.append(row)
    return rows


def break_even(rows, kind="butterfly"):
    """Smallest N from which ``kind`` is faster than dense at every larger N of the sweep (None if never)."""
    be = None
    for r in sorted(rows, key=lambda r: int(r["n"]), reverse=True):
        s = r[f"{kind}_speedup"]
        if s == "" or float(s) < 1.0:
            break
        be = int(r["n"])
    return be


def summary(rows) -> str:
    out = []
    for kind in ("butterfly", "pixelfly"):
        sp = [float(r[f"{kind}_speedup"]) for r in rows if r[f"{kind}_speedup"] != ""]
        out.append(f"{kind}: break-even N = {break_even(rows, kind)}, worst slowdown {1 / min(sp):.2f}x, "
                   f"best speedup {max(sp):.2f}x")
    return f"B6 (paper: butterfly break-even {PAPER_BREAK_EVEN_N}): " + "; ".join(out)


def plot(rows, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for kind, mk in zip(KINDS, "osd"):
        sel = [r for r in rows if r[f"{kind}_s"] != ""]
        ax.loglog([int(r["n"]) for r in sel], [float(r[f"{kind}_s"]) * 1e6 for r in sel], mk + "-", base=2,
                  label=kind if kind != "dense" else "dense (torch.nn.Linear)")
    be = break_even(rows)
    if be:
        ax.axvline(be, color="g", ls=":", label=f"simulated break-even N = {be}")
    ax.axvline(PAPER_BREAK_EVEN_N, color="k", ls="--", lw=0.8, label="paper break-even 2^10")
    ax.set_xlabel("N (layer is N x N)")
    ax.set_ylabel(f"forward time, batch {BATCH} [us]")
    ax.legend(fontsize=8)
    ax.set_title("B6: linear vs butterfly vs pixelfly on the simulated GC200")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b6_butterfly_breakeven")


if __name__ == "__main__":
    sys.exit(main())
