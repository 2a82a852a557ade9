"""Engine speed: a 20,000-superstep program on 16 chips x 1472 tiles.

Prints the ratio  engine wall time / bare numpy reduction over the same per-tile arrays
(max over tiles of compute cycles, bytes in and bytes out, per superstep and chip), both run
in this process. Target (issue 2): ratio <= 3 - the engine adds little over touching the data once.

    python benchmarks/bench_engine.py [--supersteps 20000] [--chips 16] [--repeats 3] [--quick]

``--quick`` (``make bench-quick``): 2,000 supersteps, one repeat. Exits 1 when the target fails.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from targets import Targets  # run as a script: benchmarks/ is on the path

from tilesim.engine.events import simulate
from tilesim.machine.description import load_machine
from tilesim.program import SYNC_ALL, SYNC_CHIP, Program


def make_program(machine, S: int, seed: int = 0) -> Program:
    rng = np.random.default_rng(seed)
    C, T = machine.chips, machine.tiles_per_chip
    N = C * T
    compute = rng.random((S, N), dtype=np.float32)
    compute *= 2000
    bytes_in = rng.random((S, N), dtype=np.float32)
    bytes_in *= 512
    bytes_out = rng.random((S, N), dtype=np.float32)
    bytes_out *= 512
    scope = np.full(S, SYNC_ALL, np.int32)
    scope[(np.arange(S) // 10) % 4 == 3] = SYNC_CHIP  # runs of chip-local supersteps
    flow_steps = np.flatnonzero((np.arange(S) % 50 == 0) & (scope == SYNC_ALL))
    fs = np.repeat(flow_steps, C)
    src = np.tile(np.arange(C), flow_steps.size)
    dst = (src + 1) % C
    fb = np.full(fs.size, 64 * 1024.0)
    return Program.from_arrays(
        chips=C,
        tiles_per_chip=T,
        compute_cycles=compute,
        sync_scope=scope,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        flows=(fs, src, dst, fb),
        name="bench",
    )


def baseline(p: Program) -> float:
    S, C, T = p.supersteps, p.chips, p.tiles_per_chip
    t0 = time.perf_counter()
    p.compute_cycles.reshape(S, C, T).max(axis=2)
    p.bytes_in.reshape(S, C, T).max(axis=2)
    p.bytes_out.reshape(S, C, T).max(axis=2)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--supersteps", type=int, default=20000)
    ap.add_argument("--chips", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2,000 supersteps, one repeat")
    a = ap.parse_args(argv)
    if a.quick:
        a.supersteps, a.repeats = 2000, 1
    targets = Targets()
    m = load_machine("pod16", chips=a.chips)
    t0 = time.perf_counter()
    p = make_program(m, a.supersteps)
    print(
        f"program: {p.supersteps} supersteps x {m.chips} chips x {m.tiles_per_chip} tiles, "
        f"{p.flow_step.size} flows, {p.nbytes() / 2**30:.2f} GiB, built in {time.perf_counter() - t0:.1f} s"
    )
    ratios = []
    for _ in range(a.repeats):
        tb = baseline(p)
        t0 = time.perf_counter()
        r = simulate(p, m)
        te = time.perf_counter() - t0
        ratios.append(te / tb)
        print(
            f"  engine {te:.3f} s   numpy reduction {tb:.3f} s   ratio {te / tb:.2f}   "
            f"(simulated {r.total_s * 1e3:.2f} ms)"
        )
    best = min(ratios)
    print(
        f"bench_engine: ratio engine/numpy = {best:.2f} (median {np.median(ratios):.2f}); target <= 3: "
        f"{targets.check(best <= 3, 'engine/numpy <= 3')}"
    )
    return targets.status("bench_engine")


if __name__ == "__main__":
    raise SystemExit(main())
