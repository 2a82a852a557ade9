"""Sweep throughput: points per minute of small SNN configurations with 1 and 2 dask workers.

Each run starts a local cluster the way ``tilesim sweep`` does (one task thread per worker), but
with one numba thread per worker in both runs, so that the ratio measures the sweep's parallel
scaling and not numba's (``--numba-threads 0``: cores // workers, as ``tilesim sweep`` does).
It warms every worker up (imports and JIT cache, one point each), then times, best of ``--repeats``,
``run_sweep`` over the same points into a fresh results database (driver, dask
scheduling and one SQLite transaction per point included). Prints the ratio
2-worker / 1-worker points per minute. Target (issue 7): ratio >= 1.6 on a machine with >= 2 free cores.

    python benchmarks/bench_sweep.py [--points 24] [--layers 128-64-10] [--steps 3] [--repeats 2] [--numba-threads 1]
                                     [--quick]

``--quick`` (``make bench-quick``): 8 points, one repeat. Exits 1 when the target fails.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from distributed import Client
from targets import Targets  # run as a script: benchmarks/ is on the path

from tilesim.models.snn.commands.sweep_cli import run_point
from tilesim.running.sweep import expand, run_sweep, start_local_cluster, sweep_from_dict

RUNNER = "tilesim.models.snn.commands.sweep_cli:run_point"


def _warm(config):

    run_point(config)
    return True


def points_per_minute(points, workers: int, tmp: Path, numba_threads: int | None, repeats: int) -> tuple:
    """(best points per minute over ``repeats`` warm sweeps, cluster start + warm-up seconds)."""
    t0 = time.perf_counter()
    best = 0.0
    with start_local_cluster(workers, numba_threads=numba_threads) as cluster, Client(cluster) as client:
        client.run(_warm, points[0].config)
        t_start = time.perf_counter() - t0
        for r in range(repeats):
            t1 = time.perf_counter()
            rep = run_sweep(
                points, tmp / f"w{workers}-{r}.db", RUNNER, scheduler=cluster.scheduler_address, progress=False
            )
            assert rep.ok == len(points), rep.failures[:1]
            best = max(best, len(points) / (time.perf_counter() - t1) * 60.0)
    return best, t_start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=24)
    ap.add_argument("--layers", default="128-64-10")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--timesteps", type=int, default=100)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2, help="warm sweeps per worker count (best is kept)")
    ap.add_argument("--numba-threads", type=int, default=1, help="per worker; 0 = cores // workers")
    ap.add_argument("--quick", action="store_true", help="8 points, one repeat")
    a = ap.parse_args(argv)
    if a.quick:
        a.points, a.repeats = 8, 1
    targets = Targets()
    spec = sweep_from_dict(
        {
            "base": {
                "layers": a.layers,
                "batch": a.batch,
                "timesteps": a.timesteps,
                "steps": a.steps,
                "max_activity": 0.1,
                "input_cap": 16,
            },
            "grid": {"seed": list(range(a.points))},
        }
    )
    points = expand(spec, fixed={"out": None, "json": False})
    print(f"sweep: {len(points)} points of {a.layers}, batch {a.batch}, T {a.timesteps}, {a.steps} steps each")
    rates = {}
    with tempfile.TemporaryDirectory() as d:
        for w in (1, 2):
            rates[w], t_start = points_per_minute(points, w, Path(d), a.numba_threads or None, a.repeats)
            print(f"  {w} worker(s): {rates[w]:7.1f} points/min   (cluster start + warm-up {t_start:.1f} s)")
    ratio = rates[2] / rates[1]
    verdict = targets.check(ratio >= 1.6, "2/1 workers >= 1.6")
    print(f"bench_sweep: ratio 2 workers / 1 worker = {ratio:.2f}; target >= 1.6: {verdict}")
    return targets.status("bench_sweep")


if __name__ == "__main__":
    raise SystemExit(main())
