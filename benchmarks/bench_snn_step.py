"""Host cost of a simulated SNN training step vs the bare sparse math, in one process.

N-MNIST 2-layer network 2312-1466-1466-10, B = 48, T = 100, 5 % caps, fixed activity, gc200.
Baseline: the same Numba kernels (forward, sparse BPTT, Adam) with no per-step counters, no BSP
program and no simulation. Measured: the full simulated step (kernels with per-step per-tile
counters, program construction, discrete-event timing). Targets (issue 3): ratio <= 1.6,
<= 0.4 s per step, peak memory <= 2 GiB.

    python benchmarks/bench_snn_step.py [--steps 5] [--quick]

``--quick`` (``make bench-quick``): 2 steps. Exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from targets import Targets  # run as a script: benchmarks/ is on the path

from tilesim.engine.events import simulate
from tilesim.machine.description import load_machine
from tilesim.models.snn.placement.contiguous import contiguous_placement
from tilesim.models.snn.placement.fit import to_placement
from tilesim.models.snn.step.timing import build_step_program
from tilesim.models.snn.training.network import NetworkConfig, init_network, train_step


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 steps")
    a = ap.parse_args(argv)
    if a.quick:
        a.steps = 2
    targets = Targets()
    cfg = NetworkConfig(
        layers="2312-1466-1466-10", batch=48, timesteps=100, max_activity=0.05, input_cap=32, activity="fixed"
    )
    m = load_machine("gc200")
    pl = contiguous_placement(cfg.layers[1:], 2, 1, tiles_per_chip=1472)
    pl = to_placement(pl, m)
    rng = np.random.default_rng(0)
    x = (rng.random((cfg.timesteps, cfg.batch, cfg.layers[0])) < 0.02).astype(np.uint8)
    y = rng.integers(0, 10, cfg.batch)
    bare, full = init_network(cfg, pl), init_network(cfg, pl)
    train_step(bare, x, y)  # JIT warm-up (cached after the first run)
    r = train_step(full, x, y, per_step_counters=True)
    simulate(build_step_program(cfg, pl, r.counters, m), m)
    tb, tf = [], []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        train_step(bare, x, y)
        tb.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        r = train_step(full, x, y, per_step_counters=True)
        sim = simulate(build_step_program(cfg, pl, r.counters, m), m)
        tf.append(time.perf_counter() - t0)
    b, f = float(np.median(tb)), float(np.median(tf))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    ratio_ok, step_ok = targets.check(f / b <= 1.6, "ratio <= 1.6"), targets.check(f <= 0.4, "<= 0.4 s/step")
    peak_ok = targets.check(peak <= 2, "<= 2 GiB")
    print(
        f"bare sparse math {b:.3f} s/step   simulated step {f:.3f} s/step   ratio {f / b:.2f} "
        f"(target <= 1.6: {ratio_ok}); <= 0.4 s: {step_ok}; "
        f"peak RSS {peak:.2f} GiB (<= 2: {peak_ok}); predicted {sim.total_s * 1e3:.2f} ms/step"
    )
    return targets.status("bench_snn_step")


if __name__ == "__main__":
    raise SystemExit(main())
