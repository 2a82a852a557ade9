"""``tilesim validate`` of the PopSparse paper's cases, this tree against an older revision (issue 40).

Target on a 2-core machine: the 333 rows of ``models/linear/cases/popsparse_bow.csv`` in <= 20 s. Each
tree runs the validate in a fresh process (its ``models/linear``, the same shipped file), the two
alternating ``--rounds`` times (the machines are noisy and shared: the CPU seconds are steadier than the
wall time, both are printed); printed: each tree's median, the ratio this / base (< 1: faster now) and
whether the predictions are the same (they must be: a speed-up changes no prediction).

    python benchmarks/bench_validate_sparse.py [--base REV] [--rounds 1] [--quick]

``--base`` defaults to the parent of the commit that added this file (the code before the speed-up).
``--quick`` (``make bench-quick``): one round (the default). Exits 1 when the target fails, or when the predictions
differ from an explicit ``--base``'s (a speed-up against its parent); against the default base they are printed
only: the sparse and dense models changed after issue 40 (PopLibs' vertex estimates, poplin's bounds), so today's
rows are not that base's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

# run as a script: benchmarks/ on the path
from bench_against_revision import alternate, exported, resolve_base, revision_before, run_in_tree
from targets import Targets

ROOT = Path(__file__).resolve().parents[1]
CASE = """
import hashlib, json, time
from tilesim.models.linear.measured import validate_sparse
wall, cpu = time.perf_counter(), time.process_time()
rows = validate_sparse(CASES)
preds = [(r["case"], r["predicted"], r["problem"]) for r in rows]
digest = hashlib.md5(json.dumps(preds).encode()).hexdigest()
RESULT = [time.process_time() - cpu, time.perf_counter() - wall, digest, preds]
"""
TARGET_S = 20.0


def _default_base() -> str:
    return revision_before("--diff-filter=A", "--", "benchmarks/bench_validate_sparse.py")


def _run(tree: Path, cases: Path) -> list:
    """``[cpu s, wall s, md5 of the predictions, the predictions]`` of one validate in a fresh process on
    ``tree``."""
    return run_in_tree(tree, f"CASES = {str(cases)!r}\n" + CASE, "validate")


def main(argv=None) -> int:
    """Print both trees' medians, the ratio and whether the rows agree; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=None, help="git revision to compare with (default: before the speed-up)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="one round")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds = 1
    targets = Targets()
    cases = ROOT / "models" / "linear" / "cases" / "popsparse_bow.csv"
    base = resolve_base(a.base, _default_base)
    if base is None:
        return 0
    with exported(base) as old:
        runs = alternate(a.rounds, lambda tree: _run(tree, cases), old)
    print(f"tilesim validate {cases.name}: this tree vs {base}, {a.rounds} alternating round(s)")
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in runs.items()}
    for k in ("this", "base"):
        print(f"  {k:<5} cpu {med[k][0]:7.1f} s   wall {med[k][1]:7.1f} s")
    print(f"  ratio this / base: cpu {med['this'][0] / med['base'][0]:.2f}, wall {med['this'][1] / med['base'][1]:.2f}")
    same = {r[2] for v in runs.values() for r in v}
    if a.base:
        print(f"  predictions identical: {targets.check(len(same) == 1, 'same predictions')}")
    else:
        print(f"  predictions identical: {'yes' if len(same) == 1 else 'no (the default base: not checked)'}")
    moved = [(a[0], a[1], b[1]) for a, b in zip(runs["base"][0][3], runs["this"][0][3]) if a != b]
    for case, was, now in moved[:5]:  # a base with other changes (e.g. main after a merge) moves rows too
        print(f"    {case}: base {was}, this {now}")
    if len(moved) > 5:
        print(f"    ... {len(moved) - 5} more rows moved")
    print(f"  target <= {TARGET_S:g} s wall: {targets.check(med['this'][1] <= TARGET_S, 'wall time')}")
    return targets.status("bench_validate_sparse")


if __name__ == "__main__":
    sys.exit(main())
