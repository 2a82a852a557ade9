"""B6 — butterfly and pixelfly vs a dense linear layer on the IPU: time vs N and the break-even.

Claim (paper §4.1, Fig. 6 right): on the GC200 butterfly beats ``torch.nn.Linear`` from
``N = 2^10``; worst slowdown 1.4x (butterfly) and 1.03x (pixelfly); best speedup 1.6x / 1.3x.

Simulated: the forward pass of one ``N x N`` layer (the paper times the layer call), batch 50
(paper Table 3; Fig. 6's batch is not stated), FP32, ``gc200``, ``N = 2^6 … 2^13``, in two lowerings
(:mod:`tilesim.models.linear.lowering`):

* ``fused`` (columns ``<kind>_s``): one compute set per butterfly factor — a hand-written Poplar
  program; dense = planned AMP matmul; pixelfly = block 16, butterfly size 16, rank 32 (Table 4's);
* ``poptorch`` (columns ``<kind>_pt_s``): what the paper ran — every PyTorch op of the reference
  code its own PopLibs program with PopLibs vertex costs (pixelfly: justheuristic's
  ``butterfly_matmul``, whose ``embedding_bag`` PopTorch lowers to one gather + one reduce per bag,
  ``N / block`` bags); ``<kind>_pt_host_s`` adds the host transfer of the input and output batch,
  which every PopTorch call includes (§4.1: "the time for data movement cannot be directly measured
  in PopTorch").

Break-even = the smallest ``N`` of the sweep from which butterfly is faster than dense at every
larger ``N``. Pixelfly points that do not fit 624 KiB per tile are marked.
"""

from __future__ import annotations

import sys

from experiments.b_common import pyplot, standard_main
from tilesim.errors import SramOverflowError
from tilesim.models.linear.timing import time_layer

BATCH = 50
PAPER_BREAK_EVEN_N = 2**10
KINDS = ("dense", "butterfly", "pixelfly")
LOG2_N = list(range(6, 14))
QUICK_LOG2_N = [8, 9, 10, 11, 12]


VARIANTS = ("", "_pt", "_pt_host")  # fused, poptorch, poptorch + host I/O


def run(quick: bool = False) -> list[dict]:
    rows = []
    for ln in QUICK_LOG2_N if quick else LOG2_N:
        n = 2**ln
        row = {"n": n}
        for kind in KINDS:
            for lowering, suffix in (("fused", ""), ("poptorch", "_pt")):
                try:
                    t = time_layer(kind, n, BATCH, backward=False, lowering=lowering, host_io=lowering == "poptorch")
                    row[f"{kind}{suffix}_s"], row[f"{kind}{suffix}_fits"] = t.step_s, t.fits
                    if suffix:
                        row[f"{kind}_pt_host_s"] = t.step_s + t.host_s
                except SramOverflowError:
                    row[f"{kind}{suffix}_s"], row[f"{kind}{suffix}_fits"] = "", False
                    if suffix:
                        row[f"{kind}_pt_host_s"] = ""
        for kind in ("butterfly", "pixelfly"):
            for v in VARIANTS:
                d, k = row[f"dense{v}_s"], row[f"{kind}{v}_s"]
                row[f"{kind}{v}_speedup"] = d / k if k != "" and d != "" else ""
        rows.append(row)
    return rows


def break_even(rows, kind="butterfly", variant=""):
    """Smallest N from which ``kind`` is faster than dense at every larger N of the sweep (None if
    never); ``variant`` "" (fused), "_pt" (poptorch) or "_pt_host" (poptorch + host I/O)."""
    be = None
    for r in sorted(rows, key=lambda r: int(r["n"]), reverse=True):
        s = r[f"{kind}{variant}_speedup"]
        if s == "" or float(s) < 1.0:
            break
        be = int(r["n"])
    return be


def summary(rows) -> str:
    out = []
    for v, label in (("", "fused"), ("_pt", "poptorch"), ("_pt_host", "poptorch + host I/O")):
        for kind in ("butterfly", "pixelfly"):
            sp = [float(r[f"{kind}{v}_speedup"]) for r in rows if r[f"{kind}{v}_speedup"] != ""]
            out.append(
                f"{label} {kind}: break-even N = {break_even(rows, kind, v)}, worst slowdown "
                f"{1 / min(sp):.2f}x, best speedup {max(sp):.2f}x"
            )
    return f"B6 (paper: butterfly break-even {PAPER_BREAK_EVEN_N}, 1.4x / 1.6x): " + "; ".join(out)


def plot(rows, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, v, title in (
        (axes[0], "", "fused (hand-written Poplar)"),
        (axes[1], "_pt_host", "PopTorch op by op + host I/O (as measured)"),
    ):
        for kind, mk in zip(KINDS, "osd"):
            sel = [r for r in rows if r[f"{kind}{v}_s"] != ""]
            ax.loglog(
                [int(r["n"]) for r in sel],
                [float(r[f"{kind}{v}_s"]) * 1e6 for r in sel],
                mk + "-",
                base=2,
                label=kind if kind != "dense" else "dense (torch.nn.Linear)",
            )
        be = break_even(rows, "butterfly", v)
        if be:
            ax.axvline(be, color="g", ls=":", label=f"simulated break-even N = {be}")
        ax.axvline(PAPER_BREAK_EVEN_N, color="k", ls="--", lw=0.8, label="paper break-even 2^10")
        ax.set_xlabel("N (layer is N x N)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    axes[0].set_ylabel(f"forward time, batch {BATCH} [us]")
    fig.suptitle("B6: linear vs butterfly vs pixelfly on the simulated GC200")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b6_butterfly_breakeven")


if __name__ == "__main__":
    sys.exit(main())
