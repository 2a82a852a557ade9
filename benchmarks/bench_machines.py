"""Host cost of an SNN step on the non-IPU presets, against the IPU case in the same run (issue 26).

Each case runs ``tilesim run`` in its own process (so its peak RSS is its own) and is printed with
its wall time, peak memory and the ratio to the IPU baseline of the same kind:

* ``fixed``: a fixed-activity step (every list at its cap, no training) of a small network
  (100-200-20, B 1, T 10, SGD) on one Bow IPU (1472 tiles, the baseline) and on a WSE-2-sized
  wafer (850,000 PEs). Target: the wafer's step timed in <= 60 s and <= 8 GiB on a 2-core machine,
  with ``--out`` (its pictures, trace and page; every per-tile array is 850,000 long).
* ``natural``: a natural-activity training step of the default SHD network (SGD, B 16) on 16 Bow
  IPUs (the baseline) and on a 32-chip Wormhole Galaxy. Target: <= 30 s.

    python benchmarks/bench_machines.py [--kinds fixed natural] [--quick]

``--quick`` (``make bench-quick``): the ``fixed`` kind only. Exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

from targets import Targets  # run as a script: benchmarks/ is on the path

CASES = {
    "fixed": (
        ["--layers", "100-200-20", "--batch", "1", "--timesteps", "10", "--optimizer", "sgd", "--activity", "fixed"],
        [("bow", []), ("wse2", [])],
        (60.0, 8 << 30),
    ),
    "natural": (
        ["--optimizer", "sgd", "--batch", "16", "--steps", "1"],
        [("bow", ["--chips", "16"]), ("wormhole-galaxy", [])],
        (30.0, 8 << 30),
    ),
}


def _run(machine: str, args: list[str], out: str) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one ``tilesim run`` in a child process."""
    cmd = [sys.executable, "-m", "tilesim", "run", "--machine", machine, *args, "--out", out, "--force", "--quiet"]
    probe = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024); sys.exit(r.returncode)"
    )
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{machine}: tilesim run failed:\n{p.stderr[-2000:]}")
    return wall, int(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", choices=sorted(CASES), default=sorted(CASES))
    ap.add_argument("--quick", action="store_true", help="the fixed kind only")
    args = ap.parse_args(argv)
    if args.quick:
        args.kinds = ["fixed"]
    targets = Targets()
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds:
            common, machines, (limit_s, limit_b) = CASES[kind]
            base = None
            for i, (machine, extra) in enumerate(machines):
                wall, rss = _run(machine, common + extra, f"{tmp}/{kind}{i}")
                base = base or (wall, rss)
                within = wall <= limit_s and rss <= limit_b
                limits = f"<= {limit_s:.0f} s, <= {limit_b / 2**30:.0f} GiB"
                ok = "" if i == 0 else f"  {limits}: {targets.check(within, kind + ' ' + machine)}"
                print(
                    f"{kind:<8} {machine + ' ' + ' '.join(extra):<22} wall {wall:7.2f} s ({wall / base[0]:5.2f}x)  "
                    f"peak {rss / 2**30:5.2f} GiB ({rss / base[1]:5.2f}x){ok}"
                )
    return targets.status("bench_machines")


if __name__ == "__main__":
    raise SystemExit(main())
