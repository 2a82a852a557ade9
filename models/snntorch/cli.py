"""``tilesim run --implementation snntorch``: printing and writing only (the work is
:mod:`tilesim.models.snntorch.run`). Reached from ``tilesim run``'s own command line
(:mod:`tilesim.models.snn.commands.cli`), so the flags, the TOML file and ``--from`` are the sparse run's."""

from __future__ import annotations

from pathlib import Path

from tilesim.io import dumps_json
from tilesim.models.snn.commands.options import RUN_OPTIONS, RunOptions, options_toml

__all__ = ["run_snntorch_command", "write_snntorch_outputs", "format_snntorch"]


def write_snntorch_outputs(out, run, options: RunOptions) -> None:
    """The run folder of a snnTorch run: the record (``summary.json``), ``summary.md``, ``report.html``,
    the pictures, ``trace.json`` and ``options.toml`` (``tilesim run --from DIR`` re-runs it), through the
    same writer as every run (:func:`tilesim.cli.write_outputs`), so ``tilesim compare`` and ``tilesim report``
    read it like a sparse run's folder; the host's wall time in ``wall.json``."""
    from tilesim.cli import write_outputs  # loaded only when the command runs (start-up time)

    write_outputs(
        Path(out),
        run.record,
        run.timed.result,
        run.timed.program,
        run.ledger,
        files={RUN_OPTIONS: options_toml(options).encode()},
        unsealed={"wall.json": (dumps_json({"wall_s_total": run.wall_s}, indent=2) + "\n").encode()},
    )


def format_snntorch(run) -> str:
    """The run in a few lines (the terminal's summary)."""
    r = run.record
    total = r.step_s
    top = sorted(r.by_label, key=lambda x: -x.time_s)[:3]
    mem = r.memory
    lines = [
        *(line for s in r.sections for line in s.lines[:1]),
        f"predicted {total * 1e3:.3f} ms per training call = {r.rate.value:,.0f} samples/s  "
        + "  ".join(f"{k} {v / total * 100:.0f}%" for k, v in r.breakdown_s.items() if v > 0),
        "  slowest ops: " + "; ".join(f"{x.label} {x.time_s * 1e3:.2f} ms" for x in top),
    ]
    if mem is not None:
        lines.append(
            f"SRAM: fullest tile {mem.max_tile} uses {mem.max_tile_bytes:,} of {mem.budget_bytes:,} B "
            f"({100 * mem.max_tile_bytes / mem.budget_bytes:.0f} %), largest: "
            + ", ".join(f"{e.label} {e.bytes:,} B" for e in mem.max_tile_entries[:3])
        )
    lines.append(
        f"loss {run.loss[0]:.3f} -> {run.loss[-1]:.3f}, accuracy {run.accuracy[-1]:.2f}; "
        f"simulator wall time {run.wall_s:.2f} s"
    )
    lines += [f"  {n}" for n in r.notes]
    return "\n".join(lines)


def run_snntorch_command(options: RunOptions, args) -> int:
    """Check, train, time, print and write a ``--implementation snntorch`` run (``args``: --force)."""
    from tilesim.models.snntorch.run import (  # loaded only when the command runs (start-up time)
        check_snntorch_options,
        run_snntorch,
    )

    check_snntorch_options(options)  # refused before the output folder is looked at
    if options.out:
        from tilesim.io import check_run_folder  # loaded only when the command runs (start-up time)

        check_run_folder(options.out, "--out", args.force)
    run = run_snntorch(options)
    if options.out:
        write_snntorch_outputs(options.out, run, options)
    if options.json:
        print(dumps_json(run.to_dict(), indent=2))
    else:
        print(format_snntorch(run))
        if options.out:
            print(
                f"wrote {options.out}/: report.html (open it in a browser), summary.md, summary.json, trace.json, "
                "memory.png, work.png, timeline.png, breakdown.png, options.toml"
            )
    return 0
