"""Every number a user sees, this tree against an older revision (a refactoring changes none).

Runs in both trees (``--base`` exported with ``git archive``, as :mod:`bench_against_revision`):
``tilesim validate --json``, the demo's ``summary.md`` (``make demo``'s command) and every
experiment's ``--quick`` CSV; prints ``identical`` or ``DIFFERS`` per file (with the first differing
line). Known to move with the wall clock: ``m1_mapping.csv``'s evaluated count (a time budget).

    python benchmarks/same_numbers.py [--base REV] [--experiments s1_single_chip m2_stencil_scaling]
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_against_revision import ROOT, TREE_PACKAGES, _default_base, _export  # noqa: E402  (a sibling script)

DEMO = (
    "run --layers 700-1462-1460-20 --dataset shd --input-cap 48 --batch 48 --timesteps 100 "
    "--max-activity 0.05 --machine gc200 --steps 4 --quiet --out"
).split()


def _run(tree: Path, args: list) -> str:
    """``python args...`` in ``tree``; its standard output (a failure is printed, not raised)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if args[0] == "-m":  # the module run as `python -m` after the tree's packages are in place
        args = ["-c", TREE_PACKAGES + "import runpy; runpy.run_module(sys.argv.pop(1), run_name='__main__')", *args[1:]]
    res = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True)
    if res.returncode:
        print(f"  {' '.join(args[:4])} failed in {tree}: {res.stderr.strip().splitlines()[-1:]}")
    return res.stdout


def _outputs(tree: Path, into: Path, experiments: list) -> None:
    into.mkdir(parents=True)
    (into / "validate.json").write_text(_run(tree, ["-m", "tilesim", "validate", "--json"]))
    _run(tree, ["-m", "tilesim", *DEMO, str(into / "demo")])
    for e in experiments:
        _run(tree, ["-m", f"experiments.{e}", "--quick", "--out", str(into / e)])


def _compare(old: Path, new: Path) -> int:
    """Print identical/DIFFERS for every output file under ``new``; returns how many differ."""
    differs = 0
    files = sorted(p.relative_to(new) for p in new.rglob("*") if p.suffix in (".csv", ".json", ".md"))
    for rel in files:
        if rel.name in ("summary.json", "manifest.json", "trace.json", "mapping.json"):
            continue  # wall-clock fields and content hashes
        a, b = (old / rel), (new / rel)
        if a.exists() and a.read_bytes() == b.read_bytes():
            print(f"identical  {rel}")
            continue
        differs += 1
        first = next(
            (
                ln
                for ln in difflib.unified_diff(
                    a.read_text().splitlines() if a.exists() else [], b.read_text().splitlines(), lineterm="", n=0
                )
                if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
            ),
            "(missing in base)",
        )
        print(f"DIFFERS    {rel}: {first[:150]}")
    return differs


def main(argv=None) -> int:
    """Print identical/DIFFERS per output file; returns 0 (a report, not a gate)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=None, help="git revision to compare with (default: before the seam)")
    names = sorted(p.stem for p in (ROOT / "experiments").glob("[a-z][0-9]_*.py"))
    ap.add_argument("--experiments", nargs="*", default=names, choices=names)
    a = ap.parse_args(argv)
    base = a.base or _default_base()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        old_tree = _export(base, t)
        print(f"this tree vs {base}")
        _outputs(old_tree, t / "old", a.experiments)
        _outputs(ROOT, t / "new", a.experiments)
        n = _compare(t / "old", t / "new")
        print(f"{n} file(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
