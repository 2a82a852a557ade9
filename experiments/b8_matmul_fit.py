"""B8 — does a 4096-wide layer fit a Bow IPU, at which batch, and how fast (issue 21)?

Claim: PopLibs runs ``(2048, 4096, 4096)`` FP16 and ``(1024, 4096, 4096)`` FP32 matmuls on one Bow IPU (a
published benchmark configuration), so with PopLibs' planner choices — serial splits of ``k`` and ``n``
and ``availableMemoryProportion`` bounding the temporary bytes per tile
(:func:`tilesim.models.linear.planner.plan_matmul`) — a square 4096 dense layer (forward) must fit at batch 2048
in FP16 and at 1024 in FP32; its predicted throughput at FP16 batch 1024–2048 is 150–260 TFLOP/s of the
349 TFLOP/s peak (counted work through the cost model; no per-case factor); and a static block-sparse
layer (PopSparse-style, block 16, :mod:`tilesim.models.linear.blocksparse`) at batch 2048 gets faster as density
falls.

Three panels, one figure: the largest batch that fits per precision and memory proportion (searched by
doubling, then bisection to a multiple of 64; quick: doubling only), TFLOP/s against batch (dense), and
time and useful TFLOP/s against density (block-sparse, FP16, batch 2048). "Fits" is ``tilesim layer``'s
answer (plan found and the SRAM ledger within 624 KiB per tile); ``within_proportion`` says whether the
plan met the proportion or was poplin's least-temporary fallback.
"""

from __future__ import annotations

import sys

from experiments.b_common import pyplot, standard_main
from tilesim.errors import SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.models.linear.timing import BlockSparseConfig, MatmulOptions, time_layer

MACHINE = "bow"
N = 4096
PROPORTIONS = (0.3, 0.6, 1.0)
QUICK_PROPORTIONS = (0.3, 0.6)
BATCHES = (128, 256, 512, 1024, 2048, 4096, 8192)
QUICK_BATCHES = (256, 1024, 2048)
DENSITIES = (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4)
QUICK_DENSITIES = (1 / 64, 1 / 16, 1 / 4)
SPARSE_BATCH = 2048
BLOCK = 16


def _dense(batch: int, precision: str, proportion: float):
    """``(fits, within_proportion, step_s, plan)`` of the forward dense layer; not fitting is ``(False, ...)``."""
    try:
        t = time_layer(
            "dense",
            N,
            batch,
            MACHINE,
            precision=precision,
            backward=False,
            matmul=MatmulOptions(memory_proportion=proportion),
        )
    except SramOverflowError:
        return False, False, None, None
    plan = t.schedules[0][1].parts[0]
    return bool(t.fits), bool(plan.within_proportion), t.step_s, plan


def largest_batch(precision: str, proportion: float, quick: bool) -> tuple:
    """Largest batch (multiple of 64; quick: power of two) that fits, and the largest whose plan also meets
    ``proportion`` (0 if none)."""
    lo, lo_within, b = 0, 0, 256
    while True:
        fits, within, _, _ = _dense(b, precision, proportion)
        if not fits:
            hi = b
            break
        lo = b
        lo_within = b if within else lo_within
        b *= 2
    if not quick:
        while hi - lo > 64:
            mid = (lo + hi) // 2 // 64 * 64
            fits, within, _, _ = _dense(mid, precision, proportion)
            if fits:
                lo, lo_within = mid, (mid if within else lo_within)
            else:
                hi = mid
    return lo, lo_within


def run(quick: bool = False) -> list[dict]:
    m = load_machine(MACHINE)
    peak = {
        "fp16": m.tiles_per_chip * m.chip.fp16_flops_per_cycle * m.clock_hz,
        "fp32": m.tiles_per_chip * m.chip.fp32_flops_per_cycle * m.clock_hz,
    }
    rows = []
    for precision in ("fp16", "fp32"):
        for p in QUICK_PROPORTIONS if quick else PROPORTIONS:
            fits, within = largest_batch(precision, p, quick)
            rows.append(
                {
                    "panel": "max_batch",
                    "kind": "dense",
                    "precision": precision,
                    "memory_proportion": p,
                    "max_batch": fits,
                    "max_batch_within_proportion": within,
                }
            )
    for precision in ("fp16", "fp32"):
        for b in QUICK_BATCHES if quick else BATCHES:
            fits, within, step_s, plan = _dense(b, precision, 0.6)
            row = {
                "panel": "batch",
                "kind": "dense",
                "precision": precision,
                "memory_proportion": 0.6,
                "batch": b,
                "fits": fits,
            }
            if fits:
                fl = 2.0 * b * N * N
                row.update(
                    within_proportion=within,
                    time_s=step_s,
                    tflops=fl / step_s / 1e12,
                    peak_fraction=fl / step_s / peak[precision],
                    split="x".join(map(str, plan.split)),
                    serial="x".join(map(str, plan.serial)),
                )
            rows.append(row)
    for d in QUICK_DENSITIES if quick else DENSITIES:
        cfg = BlockSparseConfig(density=d, block=BLOCK)
        t = time_layer("block-sparse", N, SPARSE_BATCH, MACHINE, precision="fp16", backward=False, block_sparse=cfg)
        plan = t.schedules[0][1].parts[0]
        fl = 2.0 * plan.nnz_blocks * BLOCK * BLOCK * SPARSE_BATCH
        rows.append(
            {
                "panel": "density",
                "kind": "block-sparse",
                "precision": "fp16",
                "memory_proportion": 0.6,
                "batch": SPARSE_BATCH,
                "density": d,
                "block": BLOCK,
                "fits": t.fits,
                "within_proportion": plan.within_proportion,
                "time_s": t.step_s,
                "tflops": fl / t.step_s / 1e12,
                "dense_equivalent_tflops": 2.0 * SPARSE_BATCH * N * N / t.step_s / 1e12,
                "split": f"{plan.bands}x{plan.n_split}x{plan.tiles_per_group}",
            }
        )
    return rows


def summary(rows) -> str:
    mb = {
        (r["precision"], float(r["memory_proportion"])): int(r["max_batch"]) for r in rows if r["panel"] == "max_batch"
    }
    tf = {
        int(r["batch"]): float(r["tflops"])
        for r in rows
        if r["panel"] == "batch" and r["precision"] == "fp16" and str(r["fits"]) == "True"
    }
    sp = [(float(r["density"]), float(r["time_s"]) * 1e6) for r in rows if r["panel"] == "density"]
    return (
        f"B8: largest batch that fits {mb}; dense fp16 TFLOP/s by batch "
        f"{ {b: round(v) for b, v in tf.items()} }; block-sparse fp16 batch {SPARSE_BATCH} us by density "
        f"{ {round(d, 4): round(us, 1) for d, us in sp} }"
    )


def plot(rows, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    mb = [r for r in rows if r["panel"] == "max_batch"]
    props = sorted({float(r["memory_proportion"]) for r in mb})
    width = 0.8 / max(len(props), 1)
    for i, p in enumerate(props):
        sel = [r for r in mb if float(r["memory_proportion"]) == p]
        xs = [j + i * width for j in range(len(sel))]
        ax.bar(xs, [int(r["max_batch_within_proportion"]) for r in sel], width, label=f"proportion {p:g} (met)")
        ax.plot(xs, [int(r["max_batch"]) for r in sel], "k_", ms=14)
    ax.set_xticks([j + width * (len(props) - 1) / 2 for j in range(2)], ["fp16", "fp32"])
    ax.plot([], [], "k_", ms=14, label="fits at all (any plan)")
    ax.set_ylabel("largest batch")
    ax.set_title(f"{N} x {N} dense forward on {MACHINE}")
    ax.legend(fontsize=8)
    ax = axes[1]
    for precision in ("fp16", "fp32"):
        sel = [r for r in rows if r["panel"] == "batch" and r["precision"] == precision and str(r["fits"]) == "True"]
        ax.semilogx([int(r["batch"]) for r in sel], [float(r["tflops"]) for r in sel], "o-", base=2, label=precision)
    ax.axhspan(150, 260, color="0.9", label="150-260 TFLOP/s")
    ax.set_xlabel("batch")
    ax.set_ylabel("TFLOP/s (simulated)")
    ax.set_ylim(bottom=0)
    ax.set_title("dense: throughput vs batch (proportion 0.6)")
    ax.legend(fontsize=8)
    ax = axes[2]
    sel = [r for r in rows if r["panel"] == "density"]
    d = [float(r["density"]) for r in sel]
    ax.loglog(d, [float(r["time_s"]) * 1e6 for r in sel], "o-", base=2, label="time (us)")
    ax.loglog(d, [float(r["tflops"]) for r in sel], "s--", base=2, label="useful TFLOP/s")
    ax.set_xlabel("density of non-zero 16 x 16 blocks")
    ax.set_title(f"block-sparse fp16, batch {SPARSE_BATCH}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b8_matmul_fit")


if __name__ == "__main__":
    raise SystemExit(main())
