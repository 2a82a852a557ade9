"""Wall time of the sparse ``tilesim layer`` commands against the dense one, in one process (issue 27).

Target on a 2-core machine: every command answers in under 2 s (fresh interpreter, imports included).
Each command runs ``--rounds`` times interleaved with the baseline (``tilesim layer --kind dense`` of the
same shape; the machines are noisy); the median of each is printed with its ratio to the baseline's.

    python benchmarks/bench_sparse.py [--rounds 3] [--quick]

``--quick`` (``make bench-quick``): one round. Exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import sys

from bench_startup import interleaved_medians  # run as a script: benchmarks/ is on the path
from targets import Targets

SHAPE = ["--n", "4096", "--batch", "2048", "--precision", "fp16", "--machine", "bow"]
LAYER = [sys.executable, "-m", "tilesim", "layer"]
COMMANDS = {
    "dense (baseline)": [*LAYER, "--kind", "dense", *SHAPE],
    "static block 16, 1/16": [*LAYER, "--kind", "block-sparse", "--block", "16", "--density", "1/16", *SHAPE],
    "static block 1, 1/16": [*LAYER, "--kind", "block-sparse", "--block", "1", "--density", "1/16", *SHAPE],
    "static block 1 --explain": [
        *LAYER,
        "--kind",
        "block-sparse",
        "--block",
        "1",
        "--density",
        "1/16",
        "--explain",
        *SHAPE,
    ],  # fmt: skip
    "dynamic block 16, 1/16": [*LAYER, "--kind", "dynamic-sparse", "--block", "16", "--density", "1/16", *SHAPE],
    "dynamic block 1, 1/16 (batch 256)": [
        *LAYER,
        "--kind",
        "dynamic-sparse",
        "--block",
        "1",
        "--density",
        "1/16",
        *SHAPE[:2],
        "--batch",
        "256",
        *SHAPE[4:],
    ],  # fmt: skip
}
TARGET_S = 2.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one round")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds = 1
    targets = Targets()
    medians = interleaved_medians(COMMANDS, args.rounds)
    base = medians["dense (baseline)"]
    print(f"{'command':<36} {'median s':>9} {'x dense':>8}  target")
    for name, med in medians.items():
        print(f"{name:<36} {med:9.2f} {med / base:8.2f}  < {TARGET_S} s: {targets.check(med < TARGET_S, name)}")
    return targets.status("bench_sparse")


if __name__ == "__main__":
    raise SystemExit(main())
