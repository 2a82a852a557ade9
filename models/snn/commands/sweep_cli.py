"""``tilesim sweep`` (many ``tilesim run`` points on dask, stored in SQLite) and ``tilesim results``.

The generic machinery is :mod:`tilesim.running.sweep` and :mod:`tilesim.running.store`; this module supplies
the SNN side: the option names and defaults (:class:`tilesim.models.snn.commands.options.RunOptions`), the check of
every point before anything runs (:func:`check_points`), the runner :func:`run_point` and the
export columns :func:`row_fields`.

Exit status of ``sweep``: 0 when every point is ``ok``, 1 when some point failed (it is stored
with its message; rerun the same command to retry the failed points), 2 for bad input.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from tilesim.errors import ConfigError, config_message, require
from tilesim.io import check_output_path, dumps_json
from tilesim.models.snn.commands.options import check_sweep_paths, option_names, options_dict, options_from_mapping
from tilesim.running.limits import MAX_SWEEP_POINTS
from tilesim.running.store import ResultStore, export_table, format_table, write_csv, write_parquet

RUNNER = "tilesim.models.snn.commands.sweep_cli:run_point"
TEXT_COLUMNS = ("id", "status", "predicted_step_s", "samples_per_s", "max_tile_bytes", "loss_last", "error")
FORBIDDEN = {
    "out": "points write no output files; export the results with `tilesim results DB --csv F`",
    "json": "use `tilesim sweep --json` or `tilesim results DB --json`",
    "implementation": "a sweep runs the sparse implementation; run `tilesim run --implementation snntorch` per point",
}


def compact(summary: dict) -> dict:
    """``run_training``'s summary without per-tile lists and with phase times only."""
    out = dict(summary)
    mem = dict(summary["memory"])
    tiles = mem.pop("overflow_tiles")
    mem["overflow_tile_count"] = len(tiles)
    mem["overflow_tiles_first"] = tiles[:8]
    out["memory"] = mem
    out["by_phase"] = {
        k: {"time_s": v["time_s"], "critical_tile": v["critical_tile"]} for k, v in summary["by_phase"].items()
    }
    return out


def run_point(config: dict) -> dict:
    """One sweep point: ``run_training`` of the options ``config`` (a dict of option values; out
    and json are ignored) without outputs; returns the compact summary."""
    from tilesim.models.snn.commands.run import run_training  # loaded only when a point runs (start-up time)

    options = options_from_mapping({**config, "out": None, "json": False}, "sweep point")
    return compact(run_training(options).to_dict())


def check_points(points, spec, where: str) -> None:
    """Validate every point's options before any work; the first bad one raises ConfigError naming
    the table and key it came from (``[grid] batch = 0: must be >= 1; ...``)."""
    tables = {
        **{k: "base" for k in spec.base},
        **{k: "grid" for k, _ in spec.grid},
        **{k: "random" for k, _ in spec.random},
    }
    labels = {k: f"{where}: [{t}] {k}" for k, t in tables.items()}
    from tilesim.models.snn.commands.budget import check_run_memory  # loaded only when the command runs (start-up time)

    for p in points:
        check_run_memory(options_from_mapping(p.config, labels=labels), f"{where}: point {p.swept}")


def _first(iterable, n: int) -> list:
    import itertools  # loaded only when the command runs (start-up time)

    return list(itertools.islice(iterable, n))


def _part(summary: dict, key: str, kind: type) -> dict | list:
    """``summary[key]`` when it is a ``kind`` (dict or list), empty when missing; a ConfigError naming the
    key when it is something else (a row edited by hand)."""
    v = summary.get(key)
    if v is None:
        return kind()
    if not isinstance(v, kind):
        raise ConfigError(
            config_message(
                f"summary {key}",
                str(v)[:40],
                f"must be {'an object' if kind is dict else 'a list'}",
                "delete the row (the next sweep runs the point again)",
            )
        )
    return v


def _cell_value(v, key: str):
    """An export cell: a finite number, text, true/false or empty; a ConfigError naming ``key`` else."""
    if v is None or isinstance(v, (str, bool)) or (isinstance(v, (int, float)) and math.isfinite(v)):
        return v
    raise ConfigError(
        config_message(
            f"summary {key}", str(v)[:40], "must be a finite number", "delete the row (the next sweep runs it again)"
        )
    )


def row_fields(summary: dict) -> dict:
    """The export columns of one point's summary (:class:`ConfigError` naming the field for a value that
    is no finite number, text or empty, or a part of the wrong kind)."""
    bd, mem, net = (_part(summary, k, dict) for k in ("breakdown_s", "memory", "network"))
    loss, acc = _part(summary, "loss", list) or [None], _part(summary, "accuracy", list) or [None]
    row = {
        "predicted_step_s": summary.get("predicted_step_s"),
        "samples_per_s": summary.get("samples_per_s"),
        **{f"{k}_s": v for k, v in bd.items()},
        "max_tile_bytes": mem.get("max_tile_bytes"),
        "max_tile": mem.get("max_tile"),
        "sram_budget_bytes": mem.get("budget_bytes"),
        "overflow_tiles": mem.get("overflow_tile_count"),
        "neurons": net.get("neurons"),
        "weights": net.get("weights"),
        "neurons_per_tile": net.get("neurons_per_tile"),
        "loss_first": loss[0],
        "loss_last": loss[-1],
        "accuracy_last": acc[-1],
        "host_s_per_step": summary.get("wall_s_per_step"),
    }
    return {k: _cell_value(v, k) for k, v in row.items()}


def register(sub) -> None:
    """Add ``sweep`` and ``results`` to the ``tilesim`` sub-command parsers ``sub``."""
    """Add ``sweep`` and ``results`` to the ``tilesim`` sub-command parsers ``sub``."""
    s = sub.add_parser(
        "sweep",
        help="run many `tilesim run` points in parallel (dask) into a results database",
        description="Run the Cartesian grid (and random draws) of a sweep file on a dask cluster; "
        "every finished point is stored at once in an SQLite file. Rerun to resume.",
    )
    s.add_argument("sweep", help="sweep TOML: [base] options, [grid] lists, optional [random] ranges")
    s.add_argument("--db", required=True, help="SQLite results file (created if missing; finished points are skipped)")
    s.add_argument("--workers", type=int, help="local worker processes (default: number of cores)")
    s.add_argument("--scheduler", help="address of a running dask scheduler, tcp://HOST:PORT (no local cluster)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true", help="print the sweep's report as JSON (stdout only)")
    s.add_argument(
        "--force",
        action="store_true",
        help=f"run a sweep of more than {MAX_SWEEP_POINTS:,} points (only the first ones are checked up front)",
    )
    s.set_defaults(func=cmd_sweep)

    r = sub.add_parser("results", help="export a sweep's results database (one row per point)")
    r.add_argument("db", help="SQLite results file written by `tilesim sweep`")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--csv", help="write the table to this CSV file")
    g.add_argument("--parquet", help="write the table to this Parquet file (needs pyarrow)")
    r.add_argument("--json", action="store_true", help="print the rows as JSON")
    r.set_defaults(func=cmd_results)


def cmd_sweep(args) -> int:
    """``tilesim sweep``: validate the file and every point, then run the points on dask."""
    from tilesim.running.sweep import check_workers, iter_expand, load_sweep, run_sweep  # numpy, dask: when it runs

    check_output_path(args.db, "--db", "file")
    if Path(args.db).is_file():  # another program's database is refused untouched
        ResultStore.check_file(args.db)
    if args.scheduler and args.workers is not None:
        print(
            f"tilesim: --workers {args.workers} ignored: with --scheduler the cluster's own workers run the points",
            file=sys.stderr,
        )
    workers = None if args.workers is None or args.scheduler else check_workers(args.workers)
    spec = load_sweep(args.sweep, allowed=option_names(), forbidden=FORBIDDEN)
    check_sweep_paths(spec, args.sweep)
    n = spec.count()
    require(
        n <= MAX_SWEEP_POINTS or args.force,
        f"sweep {args.sweep}",
        f"{n:,} points",
        f"exceeds the limit of {MAX_SWEEP_POINTS:,}",
        "split the grid into several sweeps, or pass --force",
    )
    defaults = {k: v for k, v in options_dict().items() if k not in FORBIDDEN}  # point ids as before `implementation`
    points = lambda: iter_expand(spec, defaults=defaults, fixed={"out": None, "json": False})  # noqa: E731
    check_points(_first(points(), MAX_SWEEP_POINTS), spec, str(args.sweep))
    report = run_sweep(
        points(),
        args.db,
        RUNNER,
        workers=workers,
        scheduler=args.scheduler,
        progress=not (args.quiet or args.json),
        total=n,
    )
    if args.json:
        print(dumps_json(report.to_dict(), indent=2))
    else:
        busy = f", {report.busy} done or running in another sweep on this database" if report.busy else ""
        print(
            f"sweep {args.sweep}: {report.points} points, {report.skipped} already done{busy}, ran {report.ran} "
            f"({report.ok} ok, {report.failed} failed) in {report.wall_s:.1f} s; results in {args.db}"
        )
        for pid, swept, err in report.failures[:5]:
            print(f"  failed {pid[:12]} {swept}: {err}", file=sys.stderr)
    return 1 if report.failed else 0


def cmd_results(args) -> int:
    """``tilesim results``: export a sweep's database as CSV, Parquet, JSON or a table."""
    for flag, path in (("--csv", args.csv), ("--parquet", args.parquet)):
        if path:
            check_output_path(path, flag, "file")
    with ResultStore(args.db, create=False) as store:
        rows = store.rows()
    for r in rows:  # a row edited by hand: one line naming the database, the point and the field
        try:
            row_fields(r["summary"] or {})
        except ConfigError as exc:
            raise ConfigError(f"results database {args.db}: point {str(r['id'])[:12]} {exc}") from None
    columns, records = export_table(rows, flatten=row_fields)
    swept = {k for r in rows for k in r["swept"]}
    if args.csv:
        write_csv(args.csv, columns, records)
    if args.parquet:
        write_parquet(args.parquet, columns, records)
    if args.json:
        print(dumps_json(records, indent=2))
    elif args.csv or args.parquet:
        print(f"wrote {len(records)} rows x {len(columns)} columns to {args.csv or args.parquet}")
    else:  # a readable subset; --csv/--json have every column
        keep = [c for c in columns if c in swept or c in TEXT_COLUMNS]
        for rec in records:
            rec["id"] = rec["id"][:12]
        print(format_table(keep, records))
    return 0
