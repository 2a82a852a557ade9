"""M4 — one network, every machine: the §4.4 16-chip SHD network on 16 Bow IPUs, a 32-chip
Wormhole Galaxy, eight Blackhole p150 cards and one Cerebras WSE-2, side by side.

Claim (issue 38, part 4, our own): the paper's largest weak-scaling network (SHD, 8 neurons per
tile on 16 IPUs: 188,284 neurons, 184.35 M weights; B = 24, T = 10, SGD, 5 % caps; fixed activity:
every list at its cap, the lower bound of throughput) is run as each machine's own software would
run it (the execution stack of its vendor: ``poplar``, ``tt-metal``, ``csl``) and placed by each
machine's default placement (``--mapping auto``: contiguous under Poplar, the whole machine by
``spread`` under the dataflow stacks), and the runs are
compared with ``tilesim compare`` — ranked by samples/s (one workload), with the step by phase, the
fullest tile's SRAM headroom, what limits each machine and each stack's named assumptions. The
same view from the command line: ``tilesim compare RUN --machines bow:16,wormhole-galaxy,
blackhole-p150x8,wse2 --out DIR``.

Writes ``m4_machines.csv`` / ``.png``, ``m4_machines.md`` (the comparison's table, ``compare.md``)
and the run folders with ``compare.json`` / ``.png`` / ``.html`` under ``OUT/m4_machines/``. The
IPU run uses the §4.4 runs' 500 steps per device execution. ``--quick``: the §4.4 one-chip network
(2 neurons per tile, 2,942 neurons) on one Bow IPU, a Wormhole n150 and one Blackhole p150.
Run time (wall seconds per machine) is in the CSV's ``wall_s`` column. A machine whose run the
host-memory estimate puts above 8 GiB (:data:`HOST_MEMORY_CAP`) is noted in the table, not run (none
today: the WSE-2 run, one neuron per PE on 22 % of the wafer, peaks near 2 GiB).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from experiments.b_common import parse_args, pyplot, write_csv
from experiments.s_common import weak_options
from tilesim.errors import TileSimError
from tilesim.models.snn.commands.budget import run_memory_bytes
from tilesim.models.snn.commands.cli import write_run_outputs
from tilesim.models.snn.commands.machines_cli import options_on_machine, train_placed
from tilesim.models.snn.commands.options import RunOptions
from tilesim.models.snn.commands.scaling import PAPER_STEPS_PER_EXECUTION
from tilesim.outputs.compare import compare_runs, format_comparison, machine_spec, write_comparison
from tilesim.outputs.plots import PHASE_COLOURS, SERIES_COLOURS
from tilesim.outputs.records import PHASES

NAME = "m4_machines"
MACHINES = ("bow:16", "wormhole-galaxy", "blackhole-p150x8", "wse2")
QUICK_MACHINES = ("bow:1", "wormhole-n150", "blackhole-p150")
HOST_MEMORY_CAP = 8 << 30
"""A machine whose run the host-memory estimate puts above 8 GiB (issue 38's target for the wafer) is
noted, not run: the machine is shared, and the project's own guard admits what is free at the time."""
LIMIT_PHASES = ("compute", "sync", "exchange", "links", "host")


def network(quick: bool = False) -> RunOptions:
    """The §4.4 network (``experiments/s_common.weak_options``: T 10, SGD 3e-5, ϑ2 0.9 constant,
    weight_mul 2) at 16 chips x 8 neurons per tile (``quick``: 1 chip x 2), fixed activity, one step."""
    npt, chips = (2, 1) if quick else (8, 16)
    return weak_options("shd", npt, chips, activity="fixed", steps_per_execution=PAPER_STEPS_PER_EXECUTION)


def _value(c, section: str, item: str, i: int):
    row = c.row(section, item)
    return None if row is None else row.values[i]


def run(quick: bool = False, out=None) -> list[dict]:
    """Run the network on every machine (run folders under ``out``), compare them, and return one
    row per machine read off the comparison (the figures ``compare.md`` prints, at full precision).
    A machine the network cannot run on here (the host's memory, or no placement at all) gets a row
    saying why, and stays out of the comparison."""
    root = Path(out or f"out/experiments/{NAME}") / NAME
    base = network(quick)
    folders, walls, skipped = [], [], []
    for text in QUICK_MACHINES if quick else MACHINES:
        name, chips, label = machine_spec(text)
        t0 = time.perf_counter()
        options = options_on_machine(base, name, chips, root / label)
        need = run_memory_bytes(options)
        if need > HOST_MEMORY_CAP:  # the wafer-wide program today: see the module docstring
            why = f"not run: host-memory estimate {need / 2**30:.1f} GiB, above the {HOST_MEMORY_CAP >> 30} GiB cap"
            skipped.append({"machine": label, "limited_by": why, "wall_s": 0.0})
            print(f"{label}: {why}", file=sys.stderr)
            continue
        try:
            write_run_outputs(root / label, train_placed(options))
        except TileSimError as exc:  # e.g. the host-memory refusal of a wafer-wide program
            skipped.append({"machine": label, "limited_by": f"not run: {exc}", "wall_s": time.perf_counter() - t0})
            print(f"{label}: not run: {exc}", file=sys.stderr)
            continue
        walls.append(time.perf_counter() - t0)
        print(f"{label}: {walls[-1]:.0f} s", file=sys.stderr)
        folders.append(root / label)
    c = compare_runs(*folders)
    write_comparison(c, root, force=True)
    rows = [_machine_row(c, i, wall) for i, wall in enumerate(walls)]
    text = format_comparison(c) + "".join(f"\n- `{r['machine']}`: {r['limited_by']}" for r in skipped)
    (root.parent / f"{NAME}.md").write_text(text + "\n")
    return rows + [{**r, "wall_s": round(r["wall_s"], 1)} for r in skipped]


def _machine_row(c, i: int, wall: float) -> dict:
    """Run ``i`` of comparison ``c`` as a CSV row."""
    rec = c.runs[i][0]
    stack = rec.section("Execution stack")
    net = rec.section("Network")
    mapping = net.as_dict().get("mapping") if net else None
    npt = sorted(set(mapping["neurons_per_tile"])) if isinstance(mapping, dict) else []
    return {
        "machine": c.names[i],
        "chips": rec.chips,
        "tiles": rec.chips * rec.tiles_per_chip,
        "stack": stack.as_dict()["stack"] if stack else "",
        "tiles_used": mapping["tiles_used"] if isinstance(mapping, dict) else "",
        "neurons_per_tile": " ".join(map(str, npt)),
        "samples_per_s": _value(c, "rank", "throughput", i),
        "step_s": _value(c, "rank", "time per step", i),
        **{f"{p}_s": _value(c, "phase", p, i) or 0.0 for p in PHASES},
        "limited_by": _value(c, "limits", "limited by", i),
        "sram_headroom_bytes": _value(c, "limits", "SRAM headroom (fullest tile)", i),
        "fullest_tile_pct": _value(c, "limits", "fullest tile, % of SRAM", i),
        "tiles_over_budget": _value(c, "memory", "tiles over budget", i),
        "rank": c.ranking.index(i) + 1,
        "wall_s": round(wall, 1),
    }


def summary(rows) -> str:
    ran = [r for r in rows if "rank" in r]
    best = min(ran, key=lambda r: r["rank"])
    parts = "; ".join(
        f"{r['machine']} {r['samples_per_s']:,.0f} samples/s ({r['step_s'] * 1e3:.3f} ms/step, {r['limited_by']}, "
        f"{r['wall_s']:.0f} s wall)"
        for r in sorted(ran, key=lambda r: r["rank"])
    )
    rest = "".join(f"; {r['machine']} {r['limited_by']}" for r in rows if "rank" not in r)
    return f"M4: best {best['machine']}: {parts}{rest}"


def plot(rows, path):
    """Samples/s per machine (what limits it written on the bar), and its step by phase."""
    plt = pyplot()
    rows = sorted((r for r in rows if "rank" in r), key=lambda r: r["rank"])
    names = [r["machine"] for r in rows]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 0.9 * len(rows) + 2.2))
    ax.barh(names, [r["samples_per_s"] for r in rows], color=SERIES_COLOURS[0])
    for k, r in enumerate(rows):
        note = f"  {r['limited_by']}; {r['tiles_used']:,} tiles; SRAM {r['fullest_tile_pct']:.0f} % of a tile"
        ax.text(r["samples_per_s"], k, note, va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("thousand samples/s (higher is better)")
    ax.xaxis.set_major_formatter(lambda v, _: f"{v / 1e3:g}")
    ax.set_xlim(0, max(r["samples_per_s"] for r in rows) * 2.8)
    left = [0.0] * len(rows)
    for p in PHASES:  # every phase of the step, the residual (the fitted host excess) too: bars sum to the step
        ms = [r[f"{p}_s"] * 1e3 for r in rows]
        bx.barh(names, ms, left=left, color=PHASE_COLOURS[p], label=p)
        left = [a + b for a, b in zip(left, ms)]
    bx.invert_yaxis()
    bx.set_xlabel("predicted ms per step, by phase")
    bx.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("one network, every machine: the §4.4 SHD network, B 24, T 10, fixed activity", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    args = parse_args(argv, __doc__, f"out/experiments/{NAME}")
    rows = run(quick=args.quick, out=args.out)
    out = Path(args.out)
    csv_path = write_csv(out / f"{NAME}.csv", rows)
    plot(rows, out / f"{NAME}.png")
    print(summary(rows))
    print(f"wrote {csv_path}, {out / (NAME + '.png')}, {out / (NAME + '.md')} and the runs in {out / NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
