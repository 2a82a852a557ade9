"""Host cost of one SNN training step as the machine grows: 1, 4, 16, 64 bow chips (issue 15).

The §4.4 weak-scaling networks (``experiments.s_common.weak_options``: per chip 1471·8 neurons in
12 layers, 8 neurons per tile, SHD input, 20 outputs), T = 10, B = 24, 5 % caps, SGD 3e-5, ϑ2 0.9
constant, weight_mul 2, ``--steps-per-execution 1000``. Per chip count, each case in its own process (so ``ru_maxrss``
is that case's peak):

* ``natural``: ``tilesim run``'s library call (:func:`tilesim.models.snn.commands.run.run_training`, one step:
  placement, weights, the functional step, the compact program, the engine, the summary);
* ``fixed``: the same step re-timed at fixed activity without float math
  (:func:`tilesim.models.snn.step.retime.retime` with ``activity=None``, placement included).

Printed: wall seconds (whole call, and the step alone for ``natural``), CPU seconds of the call
(user + system: on a shared machine the wall time also counts waiting for a core), peak RSS, and the
growth factor of each per 4× chips (ideal weak scaling of the host cost: 4.0, the work grows
with the neurons). Targets (issue 15): 64 chips natural <= 60 s and <= 8 GiB, fixed <= 10 s.

    python benchmarks/bench_scale.py [--chips 1 4 16 64] [--kinds natural fixed] [--quick]

``--quick`` (``make bench-quick``): 1 and 4 chips (the targets are at 64 chips: none is checked). Exits 1 when a
target fails or a case does not run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from targets import Targets, child_env  # run as a script: benchmarks/ is on the path (and the checkout: experiments)

from experiments.s_common import weak_config, weak_options
from tilesim.models.snn.commands.hostmem import peak_rss_bytes


def _child(kind: str, chips: int) -> dict:
    """One case, in this process; returns its measurements."""
    import resource  # POSIX-only module

    t0 = time.perf_counter()

    cfg = weak_config("shd", 8, chips, batch=24, max_activity=0.05)
    imports = time.perf_counter() - t0
    t0 = time.perf_counter()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = ru.ru_utime + ru.ru_stime
    if kind == "natural":
        from tilesim.models.snn.commands.run import run_training  # imported in the measured child process

        opts = weak_options("shd", 8, chips, machine="bow", chips=chips, neurons_per_tile=8, steps_per_execution=1000)
        s = run_training(opts)
        out = {
            "step_s": s.wall_s_per_step,
            "predicted_ms": s.predicted_step_s * 1e3,
            "neurons": s.network.neurons,
            "weights": s.network.weights,
            "overflow_tiles": len(s.memory.overflow_tiles),
            "estimate_bytes": s.host_memory.estimate_bytes if s.host_memory else 0,
        }
    else:
        from experiments.s_common import machine, place  # imported in the measured child process
        from tilesim.models.snn.step.retime import retime  # imported in the measured child process

        mach = machine(chips)
        placement, _ = place(cfg, mach, 8)
        p = retime(None, cfg, placement, mach, steps_per_execution=1000)
        out = {"predicted_ms": p.step_s * 1e3}
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out.update(
        kind=kind,
        chips=chips,
        wall_s=time.perf_counter() - t0,
        imports_s=imports,
        cpu_s=ru.ru_utime + ru.ru_stime - cpu0,
        peak_rss_bytes=peak_rss_bytes(),
        maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    )
    return out


def _run_case(kind: str, chips: int) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, str(chips)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    if p.returncode != 0:
        return {"kind": kind, "chips": chips, "error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"
    except OSError:
        return "load average unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chips", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--kinds", nargs="+", choices=("natural", "fixed"), default=["natural", "fixed"])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="1 and 4 chips")
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(_child(a.child[0], int(a.child[1]))))
        return 0
    if a.quick:
        a.chips = [1, 4]
    targets = Targets()
    print(f"bench_scale: {_load()} at start")
    rows = {}
    for chips in a.chips:
        for kind in a.kinds:
            rows[kind, chips] = r = _run_case(kind, chips)
            if "error" in r:
                print(f"{kind:8s} {chips:3d} chips: FAILED: {r['error']}")
                targets.check(False, f"{kind} {chips} chips runs")
    print(
        f"{'case':8s} {'chips':>5s} {'neurons':>9s} {'wall s':>8s} {'cpu s':>7s} {'step s':>8s} {'x/4x':>6s} "
        f"{'peak GiB':>9s} {'x/4x':>6s} {'est GiB':>8s} {'pred ms':>9s}"
    )
    for kind in a.kinds:
        prev = None
        for chips in a.chips:
            r = rows[kind, chips]
            if "error" in r:
                continue
            g_wall = g_rss = ""
            if prev is not None and chips == 4 * prev["chips"]:
                g_wall = f"{r['wall_s'] / prev['wall_s']:.2f}"
                g_rss = f"{r['peak_rss_bytes'] / prev['peak_rss_bytes']:.2f}"
            step = f"{r['step_s']:.2f}" if "step_s" in r else ""
            est = f"{r['estimate_bytes'] / 2**30:.2f}" if "estimate_bytes" in r else ""
            print(
                f"{kind:8s} {chips:5d} {r.get('neurons', ''):>9} {r['wall_s']:8.2f} {r['cpu_s']:7.2f} "
                f"{step:>8s} {g_wall:>6s} "
                f"{r['peak_rss_bytes'] / 2**30:9.2f} {g_rss:>6s} {est:>8s} {r['predicted_ms']:9.3f}"
            )
            prev = r
    big = rows.get(("natural", 64))
    if big and "error" not in big:
        ok = big["wall_s"] <= 60 and big["peak_rss_bytes"] <= 8 * 2**30 and big["overflow_tiles"] == 0
        print(
            f"64 chips natural: {big['neurons']:,} neurons, {big['weights']:,} weights, "
            f"{big['overflow_tiles']} overflow tiles: {targets.check(ok, '64 chips natural')} (<= 60 s, <= 8 GiB)"
        )
    fx = rows.get(("fixed", 64))
    if fx and "error" not in fx:
        verdict = targets.check(fx["wall_s"] <= 10, "64 chips fixed")
        print(f"64 chips fixed re-timing {fx['wall_s']:.2f} s: {verdict} (<= 10 s)")
    print(f"bench_scale: {_load()} at end")
    return targets.status("bench_scale")


if __name__ == "__main__":
    raise SystemExit(main())
