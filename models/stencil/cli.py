"""``tilesim stencil``: time (and optionally run) the 3×3 Gaussian blur on 1-16 GC2 IPUs.

Registered through the ``tilesim.commands`` entry point. Bad input raises
:class:`~tilesim.errors.ConfigError`; the core CLI prints it on one line and exits 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.io import dumps_json

__all__ = ["register"]


def _cmd_stencil(args) -> int:
    from tilesim.io import check_run_folder  # loaded only when the command runs (start-up time)
    from tilesim.machine.description import load_machine  # loaded only when the command runs (start-up time)
    from tilesim.models.stencil.workload import (  # loaded only when the command runs (start-up time)
        StencilConfig,
        blur_image,
        parse_pair,
        run_stencil,
    )

    if args.out:
        check_run_folder(args.out, "--out", args.force)

    if args.image_size is None and args.image is None:
        raise ConfigError(config_message("--image-size", None, "missing", "give --image-size WxH or --image PNG"))
    img = None
    if args.image is not None:
        from tilesim.models.stencil.plots import read_png  # loaded only when the command runs (start-up time)

        img = read_png(args.image)
        size = (img.shape[1], img.shape[0])
        if args.image_size is not None and parse_pair(args.image_size, "--image-size") != size:
            raise ConfigError(
                config_message(
                    "--image-size",
                    args.image_size,
                    f"differs from the PNG ({size[0]}x{size[1]})",
                    "drop --image-size or give the PNG's size",
                )
            )
    else:
        size = parse_pair(args.image_size, "--image-size")
    rows, cols = parse_pair(args.min_partition, "--min-partition")
    if not 1 <= args.ipus <= 16:
        raise ConfigError(config_message("--ipus", args.ipus, "must be in 1..16", "the GC2 system had 16 IPUs"))
    cfg = StencilConfig(
        height=size[1],
        width=size[0],
        dtype=args.dtype,
        ipus=args.ipus,
        min_rows=rows,
        min_cols=cols,
        iterations=args.iterations,
    )
    machine = load_machine(args.machine, args.ipus)
    run = run_stencil(cfg, machine)
    summary = run.to_dict()
    if args.out:
        from tilesim.cli import write_outputs  # loaded only when the command runs (start-up time)

        out = Path(args.out)
        write_outputs(out, stencil_record(run, args), run.result, run.program, run.ledger)
        if img is not None:
            from tilesim.models.stencil.plots import write_png  # loaded only when the command runs (start-up time)

            blurred = blur_image(img, cfg, machine.tiles_per_chip, machine.chip.workers_per_tile)
            write_png(out / "blurred.png", blurred)
            summary["blurred_png"] = str(out / "blurred.png")
    elif img is not None:
        raise ConfigError(config_message("--image", args.image, "needs --out", "give --out DIR for blurred.png"))
    if args.json:
        print(dumps_json(summary, indent=2))
        return 0
    print(
        f"stencil {summary['image']} {cfg.dtype} on {args.ipus} chip(s) of {machine.name}, min partition "
        f"{summary['min_partition']}, {cfg.iterations} iterations: {run.us_per_iteration:.2f} us per iteration"
    )
    print("  per superstep (cycles): " + ", ".join(f"{k} {v:,.0f}" for k, v in run.phases.items()))
    print(
        f"  SRAM: fullest tile {summary['max_tile_bytes']:,} B of {summary['sram_bytes']:,} B; "
        f"fits = {summary['fits']}; tiles used {summary['tiles_used']:,} of {machine.total_tiles:,}"
    )
    if args.out:
        print(
            f"  wrote {args.out}/report.html (open it in a browser), summary.json, summary.md, trace.json (Perfetto), "
            "pictures" + (", blurred.png" if img is not None else "")
        )
    return 0


def stencil_record(run, args):
    """The run record of a stencil run: the workload's own section, iterations per second, the
    command's settings and where the costs came from."""
    from tilesim.models.stencil.workload import StencilStep  # loaded only when the command runs (start-up time)
    from tilesim.outputs.runrecord import Provenance, Throughput, tilesim_version
    from tilesim.workload import TimedStep, record_run

    cfg = run.plan.config
    return record_run(
        StencilStep(run.plan),
        TimedStep(run.program, run.result),
        ledger=run.ledger,
        throughput=Throughput.per_step(run.result.total_s, cfg.iterations, "iterations/s"),
        settings={
            "image": f"{cfg.width}x{cfg.height}",
            "image_file": args.image,
            "dtype": cfg.dtype,
            "ipus": cfg.ipus,
            "machine": args.machine,
            "min_partition": f"{cfg.min_rows}x{cfg.min_cols}",
            "iterations": cfg.iterations,
        },
        provenance=Provenance(
            tilesim_version(),
            "models/stencil/costs.py (codelet cycles from the authors' code) and the machine file",
            f"the PNG {args.image}" if args.image else "no image: the plan's sizes only (no pixels)",
        ),
    )


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def register(subparsers) -> None:
    """Add ``stencil`` to the ``tilesim`` command line."""
    s = subparsers.add_parser("stencil", help="3x3 Gaussian blur (Louw & McIntosh-Smith) on 1-16 GC2 IPUs")
    s.add_argument("--image-size", help="WIDTHxHEIGHT in pixels, e.g. 2200x1122")
    s.add_argument("--image", help="a PNG to blur for real (needs --out)")
    s.add_argument("--dtype", default="float", help="float, float2 or half4 (default float)")
    s.add_argument("--ipus", type=_int, default=1, help="1..16 (default 1)")
    s.add_argument("--min-partition", default="6x6", help="minimum ROWSxCOLS per tile (default 6x6)")
    s.add_argument("--iterations", type=_int, default=100, help="blur iterations (supersteps of the program)")
    s.add_argument("--machine", default="gc2x16", help="preset or TOML, resized to --ipus (default gc2x16)")
    s.add_argument("--out", help="directory for summary, trace, pictures and blurred.png")
    s.add_argument(
        "--force",
        action="store_true",
        help="write --out into a folder that is not a tilesim run (its other files are kept)",
    )
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=_cmd_stencil)
