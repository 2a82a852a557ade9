"""B2 — Observation 2: IPU matmul throughput is stable over skewed shapes until memory runs out.

Claim (paper §3.2, Fig. 4): for ``A (m x k) · B (k x n)`` with aspect ratio ``s = m / n``, the IPU's
GFLOP/s stay nearly flat over a wide range of ``s`` (the GPU's fall off at both ends); the IPU
stops when the operands no longer fit its on-chip SRAM. Sweep: ``m n = 2^22`` output elements,
``k = 256``, ``s = 2^-j … 2^j``, FP32, ``gc200``; each shape planned by
:func:`tilesim.models.linear.planner.plan_matmul` (best partition that fits 638,976 B per tile) and timed by
the engine. Shapes where no partition fits are marked ``fits = False`` (the memory limit).
"""

from __future__ import annotations

import sys

from experiments.b_common import pyplot, standard_main
from tilesim.errors import SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.models.linear.layers import skewed_shape
from tilesim.models.linear.planner import plan_matmul
from tilesim.models.linear.timing import machine_costs, matmul_target, time_parts

MN_ELEMENTS = 2**22  # output elements m·n
K_DEPTH = 256  # inner dimension
LOG2_RATIOS = list(range(-20, 21, 2))
QUICK_LOG2_RATIOS = [-20, -10, -4, 0, 4, 10, 20]


def run(quick: bool = False) -> list[dict]:
    m_ = load_machine("gc200")
    costs = machine_costs(m_)
    peak = m_.derived()["peak_fp32_flops"]
    rows = []
    for lr in QUICK_LOG2_RATIOS if quick else LOG2_RATIOS:
        m, k, n = skewed_shape(MN_ELEMENTS, K_DEPTH, 2.0**lr)
        row = {
            "log2_aspect": lr,
            "aspect_ratio": m / n,
            "m": m,
            "k": k,
            "n": n,
            "operand_bytes": 4 * (m * k + k * n + m * n),
        }
        try:
            plan = plan_matmul(
                m,
                k,
                n,
                matmul_target(m_, "fp32", costs),
            )
        except SramOverflowError:
            rows.append({**row, "fits": False, "time_s": "", "gflops": "", "peak_fraction": "", "split": ""})
            continue
        t = time_parts([("matmul", plan)], m_, f"mm {m}x{k}x{n}")
        fl = 2.0 * m * k * n
        rows.append(
            {
                **row,
                "fits": t.fits,
                "time_s": t.step_s,
                "gflops": fl / t.step_s / 1e9,
                "peak_fraction": fl / t.step_s / peak,
                "split": "x".join(map(str, plan.split)),
            }
        )
    return rows


def summary(rows) -> str:
    ok = [r for r in rows if r["fits"]]
    g = [float(r["gflops"]) for r in ok]
    lim = [r["log2_aspect"] for r in rows if not r["fits"]]
    return (
        f"B2: {len(ok)} shapes fit, GFLOP/s {min(g):.0f}..{max(g):.0f} (max/min {max(g) / min(g):.2f}); "
        f"memory limit at log2(m/n) in {lim}"
    )


def plot(rows, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ok = [r for r in rows if r["fits"]]
    ax.semilogx(
        [r["aspect_ratio"] for r in ok],
        [float(r["gflops"]) for r in ok],
        "o-",
        base=2,
        label=f"gc200 FP32, m n = 2^22, k = {K_DEPTH}",
    )
    for r in rows:
        if not r["fits"]:
            ax.axvline(r["aspect_ratio"], color="r", ls=":", lw=1)
    ax.plot([], [], "r:", label="does not fit 624 KiB/tile")
    ax.set_xlabel("aspect ratio m / n")
    ax.set_ylabel("GFLOP/s (simulated)")
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.set_title("B2: skewed matmul on the simulated GC200")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b2_skewed_matmul")


if __name__ == "__main__":
    sys.exit(main())
