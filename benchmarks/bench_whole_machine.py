"""Host cost of the §4.4 16-chip SHD network on whole machines (issue 38 part 5): 16 Bow IPUs, a 32-chip
Wormhole Galaxy and one Cerebras WSE-2.

The network is the §4.4 weak-scaling case for 16 chips (``experiments.s_common.weak_options("shd", 8, 16)``:
188,284 neurons in 193 layers, 184.35 M weights), B = 24, T = 10, SGD 3e-5, 5 % caps, ϑ2 0.9 constant,
weight_mul 2, at fixed activity (every list at its cap), one step, ``--steps-per-execution 1000``. Each case
is ``tilesim run``'s library call (:func:`tilesim.models.snn.commands.run.run_training`: placement, SRAM
ledger, counters, the program, the engine, the summary) in its own child process, so ``ru_maxrss`` is that
case's peak:

* ``bow x16``: the paper's contiguous placement at 8 neurons per tile (the reference of the ratios);
* ``wormhole-galaxy``, ``wse2``: ``--mapping auto``, the machine's own placement (``spread``: every chip
  of the Galaxy, one neuron per PE of the wafer).

Printed per case: wall and CPU seconds of the call, peak RSS, each as a ratio to the 16-Bow case of the
same run, the predicted step, the chips and tiles the mapping uses. Targets (issue 38): the Galaxy on all
32 chips in <= 60 s; the WSE-2 on >= 10 % of its PEs in <= 60 s and <= 8 GiB (wall time on a shared
machine also counts waiting for a core: the CPU seconds are the load-free figure).

    python benchmarks/bench_whole_machine.py [--cases bow wormhole-galaxy wse2] [--quick]

``--quick`` (``make bench-quick``): the Galaxy case only. Exits 1 when a target fails or a case does not run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from targets import Targets, child_env  # run as a script: benchmarks/ is on the path

CASES = {"bow": ("bow", 16, 8), "wormhole-galaxy": ("wormhole-galaxy", None, None), "wse2": ("wse2", None, None)}
"""case -> (machine, chips (None: the preset's), neurons per tile (None: ``--mapping auto``))."""


def _child(case: str) -> dict:
    """One case, in this process; returns its measurements."""
    import resource  # POSIX-only module

    from experiments.s_common import weak_options  # imported in the measured child process
    from tilesim.models.snn.commands.hostmem import peak_rss_bytes  # imported in the measured child process
    from tilesim.models.snn.commands.run import run_training  # imported in the measured child process

    machine, chips, npt = CASES[case]
    kw: dict = dict(machine=machine, activity="fixed", steps_per_execution=1000)
    if chips:
        kw["chips"] = chips
    if npt:
        kw.update(neurons_per_tile=npt, mapping="contiguous")
    options = weak_options("shd", 8, 16, **kw)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, t0 = ru.ru_utime + ru.ru_stime, time.perf_counter()
    s = run_training(options)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    m = s.mapping
    return {
        "case": case,
        "machine": s.machine,
        "chips": s.chips,
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime - cpu0,
        "peak_rss_bytes": peak_rss_bytes(),
        "predicted_ms": s.predicted_step_s * 1e3,
        "neurons": s.network.neurons,
        "weights": s.network.weights,
        "strategy": m["strategy"],
        "chips_used": m["chips_used"],
        "tiles_used": m["tiles_used"],
        "tiles": m["chips"] * m["tiles_per_chip"],
        "neurons_per_tile_max": max(m["neurons_per_tile"]),
        "overflow_tiles": len(s.memory.overflow_tiles),
    }


def _run_case(case: str) -> dict:
    p = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True, env=child_env())
    if p.returncode != 0:
        return {"case": case, "error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _verdict(r: dict, targets: Targets) -> str:
    if r["case"] == "wormhole-galaxy":
        ok = r["chips_used"] == r["chips"] and r["wall_s"] <= 60
        return f"all {r['chips']} chips, <= 60 s: {targets.check(ok, r['case'])}"
    if r["case"] == "wse2":
        ok = r["tiles_used"] >= 0.1 * r["tiles"] and r["wall_s"] <= 60 and r["peak_rss_bytes"] <= 8 * 2**30
        return f">= 10 % of PEs, <= 60 s, <= 8 GiB: {targets.check(ok, r['case'])}"
    return "reference"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", choices=tuple(CASES), default=list(CASES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="the Galaxy case only")
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(_child(a.child)))
        return 0
    if a.quick:
        a.cases = ["wormhole-galaxy"]
    targets = Targets()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"bench_whole_machine: load average {load:.2f} on {os.cpu_count()} cores at start")
    rows = [_run_case(c) for c in a.cases]
    ref = next((r for r in rows if r["case"] == "bow" and "error" not in r), None)
    print(
        f"{'case':16s} {'wall s':>7s} {'x bow':>6s} {'cpu s':>6s} {'x bow':>6s} {'peak GiB':>8s} {'x bow':>6s} "
        f"{'pred ms':>8s} {'chips':>7s} {'tiles used':>18s} {'npt':>4s}  target"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['case']:16s} FAILED: {r['error']}")
            targets.check(False, f"{r['case']} runs")
            continue

        def x(k, r=r):
            return f"{r[k] / ref[k]:.2f}" if ref else ""

        share = f"{r['tiles_used']:,} ({100 * r['tiles_used'] / r['tiles']:.1f} %)"
        print(
            f"{r['case']:16s} {r['wall_s']:7.2f} {x('wall_s'):>6s} {r['cpu_s']:6.2f} {x('cpu_s'):>6s} "
            f"{r['peak_rss_bytes'] / 2**30:8.2f} {x('peak_rss_bytes'):>6s} {r['predicted_ms']:8.3f} "
            f"{r['chips_used']:>3d}/{r['chips']:<3d} {share:>18s} {r['neurons_per_tile_max']:4d}  "
            f"{_verdict(r, targets)}"
        )
    if rows and "error" not in rows[0]:
        print(f"network: {rows[0]['neurons']:,} neurons, {rows[0]['weights']:,} weights")
    return targets.status("bench_whole_machine")


if __name__ == "__main__":
    raise SystemExit(main())
