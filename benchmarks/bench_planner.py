"""The dense matmul planner on a whole Cerebras WSE-2 wafer, this tree against an older revision (issue 41).

``tilesim layer --kind dense --n N --machine wse2`` plans ``(batch, N) x (N, N)`` matmuls over 850,000 tiles
(48 KB each); before issue 41 the planner scored every ``(P_m, P_k, P_n)`` partition of every serial split
(~4e7 per split at N = 65536) and built up to 128 plans of 850,000-long arrays. Cases (fp32, batch 50):

* ``n64``: the forward and both backward matmuls of ``--n 64`` (plans found);
* ``n4096``: ``(50, 4096, 4096)`` (refused by both trees after their searches);
* ``n65536``: ``(50, 65536, 65536)`` (refused; the old tree takes about two minutes);
* ``nofit``: ``(50, 65536, 65536)`` with 32 KB tiles (no partition fits: refused up front now).

Each case runs in a fresh process on each tree (``git archive`` of ``--base``), alternating ``--rounds`` times;
printed: each tree's median seconds, the ratio this / base (< 1: faster now) and whether the outcomes (plan or
error text) are identical — they must be: the speed-up changes no plan.

    python benchmarks/bench_planner.py [--base REV] [--rounds 1] [--cases n64 n4096 n65536 nofit] [--quick]

``--base`` defaults to the parent of the commit that added this file's planner shortcuts (issue 41).
``--quick`` (``make bench-quick``): the case ``n64``. Exits 1 when an outcome differs from an explicit ``--base``'s
(e.g. a speed-up against its parent); against the default base the outcomes are printed only: the planner's model
changed after issue 41 (poplin's bounds and serial splits, the wafer's clock), so today's plans are not that base's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path

# run as a script: benchmarks/ on the path
from bench_against_revision import alternate, exported, resolve_base, revision_before, run_in_tree

ROOT = Path(__file__).resolve().parents[1]
CASE = """
import time
from tilesim.errors import SramOverflowError
from tilesim.models.linear.planner import PlanTarget, plan_matmul
target = PlanTarget(tiles=850_000, sram_bytes=SRAM, flops_per_cycle=32.0)
out = []
t0 = time.perf_counter()
for m, k, n in PROBLEMS:
    try:
        p = plan_matmul(m, k, n, target)
        out.append(repr((p.split, p.serial, p.predicted_cycles, p.within_proportion)))
    except SramOverflowError as exc:
        out.append("refused: " + str(exc))
RESULT = [time.perf_counter() - t0, out]
"""
CASES = {
    "n64": ([(50, 64, 64), (50, 64, 64), (64, 50, 64)], 49152),
    "n4096": ([(50, 4096, 4096)], 49152),
    "n65536": ([(50, 65536, 65536)], 49152),
    "nofit": ([(50, 65536, 65536)], 32768),
}
PLANNER_COMMIT = "planner: refuse a matmul no partition can fit"


def _default_base() -> str:
    return revision_before(f"--grep={PLANNER_COMMIT}", "--", "models/linear/planner.py")


def _run(tree: Path, case: str) -> list:
    """``[seconds, outcomes]`` of one case in a fresh process on ``tree``."""
    problems, sram = CASES[case]
    return run_in_tree(tree, CASE.replace("SRAM", str(sram)).replace("PROBLEMS", repr(problems)), f"case {case}")


def main(argv=None) -> int:
    """Print each case's medians, the ratio and whether the outcomes agree; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=None, help="git revision to compare with (default: before issue 41's shortcuts)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--quick", action="store_true", help="the case n64")
    a = ap.parse_args(argv)
    if a.quick:
        a.cases = ["n64"]  # nofit and n65536 take about two minutes each on the old tree
    base = resolve_base(a.base, _default_base)
    if base is None:
        return 0
    print(f"plan_matmul on 850,000 tiles (wse2): this tree vs {base}, {a.rounds} alternating round(s)")
    same_all = True
    with exported(base) as old:
        for case in a.cases:
            runs = alternate(a.rounds, lambda tree, case=case: _run(tree, case), old)
            med = {key: statistics.median(r[0] for r in v) for key, v in runs.items()}
            digests = {hashlib.md5(json.dumps(r[1]).encode()).hexdigest() for v in runs.values() for r in v}
            same_all &= len(digests) == 1
            print(
                f"  {case:<7} this {med['this']:7.2f} s   base {med['base']:7.2f} s   "
                f"ratio {med['this'] / med['base']:.3f}   same outcome: {'yes' if len(digests) == 1 else 'NO'}"
            )
    if same_all or a.base:
        return 0 if same_all else 1
    print("  (outcomes differ from the default base: the planner's model changed since; --base REV checks identity)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
