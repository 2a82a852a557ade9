"""Start-up time of the command line against ``python -c pass``, in one process (issue 29).

Targets on a 2-core machine: ``tilesim --help`` <= 0.3 s and ``tilesim run --help`` <= 0.6 s. Each
command runs ``--rounds`` times in a fresh interpreter, interleaved with the baseline (the machines are
noisy); the median of each is printed with its ratio to the baseline's median.

    python benchmarks/bench_startup.py [--rounds 7] [--quick]

``--quick`` (``make bench-quick``): 3 rounds. Exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from targets import Targets  # run as a script: benchmarks/ is on the path

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "tilesim --help": [sys.executable, "-m", "tilesim", "--help"],
    "tilesim run --help": [sys.executable, "-m", "tilesim", "run", "--help"],
    "tilesim layer --help": [sys.executable, "-m", "tilesim", "layer", "--help"],
    "tilesim sweep --help": [sys.executable, "-m", "tilesim", "sweep", "--help"],
}
TARGETS_S = {"tilesim --help": 0.3, "tilesim run --help": 0.6}


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def interleaved_medians(commands: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """Median wall time of each command over ``rounds`` interleaved rounds (after one warm-up each)."""
    for cmd in commands.values():  # warm the file cache and the bytecode
        _wall(cmd)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, cmd in commands.items():
            times[name].append(_wall(cmd))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds = 3
    targets = Targets()
    medians = interleaved_medians(COMMANDS, args.rounds)
    base = medians["python -c pass"]
    print(f"{'command':<24} {'median s':>9} {'x python':>9}  target")
    for name, med in medians.items():
        target = TARGETS_S.get(name)
        verdict = "" if target is None else f"<= {target} s: {targets.check(med <= target, name)}"
        print(f"{name:<24} {med:9.3f} {med / base:9.1f}  {verdict}")
    return targets.status("bench_startup")


if __name__ == "__main__":
    raise SystemExit(main())
