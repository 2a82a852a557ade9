"""Re-timing rate of the mapping search vs a functional run of the same step, in one process.

Two networks (issue 4): the paper's N-MNIST 2-layer network 2312-1466-1466-10 (B = 48, T = 100,
5 % caps) on one GC200, and a 12-hidden-layer network of 976-neuron layers on 4 chips in the
paper's multi-IPU set-up (snn-on-ipu.md §4.4: 2 neurons per tile, B = 24, T = 10, SGD, 5 % caps). Natural activity: one
functional step records the activity. Baseline: a functional run of that step under a new
mapping (kernels with per-step counters + BSP program + simulation). Measured: the search's
objective — SRAM ledger check + re-timing from the recorded activity — over the mappings an
annealing run proposes. Targets: >= 20 mappings/s and >= 20x faster than the functional run.
The machines are noisy: rounds alternate one functional step and one search of ``--evals``
mappings (caches kept, as in a long search) and the median ratio is reported.

    python benchmarks/bench_mapping.py [--evals 60] [--rounds 5] [--quick]

``--quick`` (``make bench-quick``): 20 mappings, one round. Exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from targets import Targets  # run as a script: benchmarks/ is on the path

from tilesim.engine.events import simulate
from tilesim.machine.description import load_machine
from tilesim.mapping.search import anneal
from tilesim.models.snn.placement.fit import place_network, strategy_mapping, to_placement
from tilesim.models.snn.placement.search import make_objective
from tilesim.models.snn.step.timing import build_step_program
from tilesim.models.snn.training.network import NetworkConfig, init_network, train_step

CASES = {
    "nmnist-2layer-1chip": (
        NetworkConfig(
            layers="2312-1466-1466-10", batch=48, timesteps=100, max_activity=0.05, input_cap=32, weight_mul=4.0
        ),
        "gc200",
        None,
    ),
    "12x976-4chips": (
        NetworkConfig(
            layers="1152-" + "-".join(["976"] * 12) + "-10",
            batch=24,
            timesteps=10,
            max_activity=0.05,
            input_cap=32,
            optimizer="sgd",
            weight_mul=4.0,
        ),
        "gc200",
        4,
    ),
}


def functional_step(cfg, placement, machine, x, y):
    state = init_network(cfg, placement)
    r = train_step(state, x, y, per_step_counters=True)
    return simulate(build_step_program(cfg, placement, r.counters, machine), machine).total_s


def bench(name, cfg, machine_name, chips, evals, rounds, targets: Targets):
    m = load_machine(machine_name, chips)
    base = place_network(cfg, m, 2, "contiguous")
    rng = np.random.default_rng(0)
    x = (rng.random((cfg.timesteps, cfg.batch, cfg.layers[0])) < 0.03).astype(np.uint8)
    y = rng.integers(0, cfg.layers[-1], cfg.batch)
    functional_step(cfg, base.placement, m, x, y)  # JIT warm-up
    other = to_placement(strategy_mapping("round_robin", cfg, m, 2), m)
    activity = train_step(init_network(cfg, base.placement), x, y).activity
    objective = make_objective(cfg, m, activity)
    t_re_pred = objective(strategy_mapping("round_robin", cfg, m, 2))
    # a noisy machine: alternate the baseline and the search in rounds, report the median ratio
    ratios, rates = [], []
    for r in range(rounds):
        t0 = time.perf_counter()
        t_func_pred = functional_step(cfg, other, m, x, y)
        t_func = time.perf_counter() - t0
        res = anneal(base.mapping, objective, budget_s=600, max_evals=evals, seed=r)
        per = res.wall_s / res.evaluated
        ratios.append(t_func / per)
        print(
            f"  round {r}: functional step {t_func:.3f} s, {res.evaluated} mappings in {res.wall_s:.2f} s "
            f"= {t_func / per:.0f}x",
            flush=True,
        )
        rates.append(1.0 / per)
    rate, ratio = float(np.median(rates)), float(np.median(ratios))
    print(
        f"{name:<22} functional step {t_func:.3f} s   re-time {1e3 / rate:.1f} ms/mapping = {rate:.1f} mappings/s "
        f"(>= 20: {targets.check(rate >= 20, name + ' >= 20 mappings/s')})   speed-up {ratio:.0f}x, "
        f"rounds {min(ratios):.0f}-{max(ratios):.0f}x "
        f"(>= 20x: {targets.check(ratio >= 20, name + ' >= 20x')})   round_robin predicted: functional "
        f"{t_func_pred * 1e3:.3f} ms, re-timed {t_re_pred * 1e3:.3f} ms"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--evals", type=int, default=60, help="mappings per round")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of (functional step, search); median ratio")
    ap.add_argument("--quick", action="store_true", help="20 mappings, one round")
    a = ap.parse_args(argv)
    if a.quick:
        a.evals, a.rounds = 20, 1
    targets = Targets()
    for name, (cfg, machine, chips) in CASES.items():
        bench(name, cfg, machine, chips, a.evals, a.rounds, targets)
    return targets.status("bench_mapping")


if __name__ == "__main__":
    raise SystemExit(main())
