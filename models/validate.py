"""``tilesim validate`` and ``tilesim calibrate`` for every workload's measured cases.

A cases CSV carries a ``workload`` column (``snn``, ``stencil``, ... ``noc``); a file without one is an SNN
file (the column was added later). ``validate`` with no file checks every shipped case file of
every workload. ``calibrate`` dispatches on the same column: SNN cases fit the SNN cost model
(:func:`tilesim.models.snn.calibration.calibrate.cmd_calibrate`); stencil cases fit the multi-chip machine constants
(:func:`tilesim.models.stencil.calibrate.fit_stencil`) and write them as a ``[system]`` TOML fragment; NoC cases
fit the Tensix NoC message constants (:func:`tilesim.models.noc.measured.fit_noc`) and print what the rows identify.
Registered through the ``tilesim.commands`` entry point.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.io import atomic_write_bytes, check_output_path, dumps_json, read_text

__all__ = ["register", "cmd_validate", "cmd_calibrate", "workload_of", "WORKLOADS"]

WORKLOADS = ("snn", "stencil", "collective", "matmul", "sparse-matmul", "snntorch", "noc")


def workload_of(path) -> str:
    """The workload named by a cases CSV's ``workload`` column (``snn`` if it has none)."""
    p = Path(path)
    reader = csv.DictReader(io.StringIO(read_text(p, "cases file", "give a cases CSV"), newline=""))
    names = (
        {(r.get("workload") or "snn").strip() for r in reader} if "workload" in (reader.fieldnames or []) else {"snn"}
    )
    bad = names - set(WORKLOADS)
    if bad or len(names) != 1:
        raise ConfigError(
            config_message(
                f"{p} column workload",
                ",".join(sorted(names)),
                f"must be one of {', '.join(WORKLOADS)}, the same on every row",
                "split the file by workload",
            )
        )
    return names.pop()


def _snn_rows(path, costs) -> list[dict]:
    from tilesim.models.snn.calibration.calibrate import (  # when it runs (start-up time)
        _load_costs_arg,
        predict_cases,
        read_cases,
    )

    cases = read_cases(path)
    preds = predict_cases(cases, _load_costs_arg(costs))
    # the *_ms keys are the SNN validate's JSON fields before this module (kept for scripts)
    return [
        {
            "workload": "snn",
            "case": c.case,
            "quantity": "ms_per_step",
            "predicted": mid * 1e3,
            "measured": c.measured_ms,
            "error_pct": round(100.0 * (round(mid * 1e3, 4) - c.measured_ms) / c.measured_ms, 2),
            "predicted_ms": round(mid * 1e3, 4),
            "measured_ms": c.measured_ms,
            "band_lo_ms": round(lo * 1e3, 4),
            "band_hi_ms": round(hi * 1e3, 4),
            "use": c.use,
        }
        for c, (mid, lo, hi) in zip(cases, preds)
    ]


def _files(args) -> list[Path]:
    if args.cases:
        return [Path(c) for c in args.cases]
    from tilesim.models.collective.measured import shipped_collective_cases  # loaded only when the command runs
    from tilesim.models.linear.measured import shipped_sparse_cases
    from tilesim.models.noc.measured import shipped_noc_cases
    from tilesim.models.snn.calibration.calibrate import (  # loaded only when the command runs (start-up time)
        shipped_cases_path,
        shipped_held_out_path,
    )
    from tilesim.models.snntorch.measured import shipped_snntorch_cases
    from tilesim.models.stencil.measured import shipped_stencil_cases
    from tilesim.models.tensix.measured import shipped_matmul_cases  # loaded only when the command runs

    return [
        shipped_cases_path(),
        shipped_held_out_path(),
        *shipped_stencil_cases(),
        *shipped_collective_cases(),
        *shipped_matmul_cases(),
        *shipped_sparse_cases(),
        *shipped_snntorch_cases(),
        *shipped_noc_cases(),
    ]


def _rows(path: Path, wl: str, args) -> list[dict]:
    """The validate rows of one cases file of workload ``wl``."""
    if wl == "snn":
        return _snn_rows(path, args.costs)
    if wl == "collective":
        from tilesim.models.collective.measured import validate_collective  # loaded only when the command runs

        return validate_collective(path)
    if wl == "matmul":
        from tilesim.models.tensix.measured import validate_matmul  # loaded only when the command runs

        return validate_matmul(path)
    if wl == "snntorch":
        from tilesim.models.snntorch.measured import validate_snntorch  # loaded only when the command runs

        return validate_snntorch(path)
    if wl == "noc":
        from tilesim.models.noc.measured import validate_noc  # loaded only when the command runs

        return validate_noc(path)
    if wl == "sparse-matmul":
        from tilesim.models.linear.measured import validate_sparse  # loaded only when the command runs

        return validate_sparse(path)
    from tilesim.models.stencil.measured import validate_stencil  # loaded only when the command runs (start-up time)

    return validate_stencil(path, machine=args.machine)


def _print_file(f: Path, wl: str, rows: list[dict]) -> None:
    from tilesim.models.cases import group_errors  # loaded only when the command runs (start-up time)

    print(f"{wl}: {f.name}")
    w = max(len(r["case"]) for r in rows)
    print(f"  {'case':<{w}}  {'quantity':<20}  {'predicted':>11}  {'measured':>11}  {'error %':>8}")
    for r in rows:
        err = "n/a" if r["error_pct"] is None else f"{r['error_pct']:+.1f}"
        pred = "-" if r["predicted"] is None else f"{r['predicted']:>11.3f}"
        meas = "-" if r["measured"] is None else f"{r['measured']:>11.3f}"
        why = f"  not predicted: {r['problem']}" if r.get("problem") else ""
        print(f"  {r['case']:<{w}}  {r['quantity']:<20}  {pred:>11}  {meas:>11}  {err:>8}{why}")
    groups = sorted({r.get("use", "") for r in rows})
    for g in groups:
        errs = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None and r.get("use", "") == g]
        if errs:
            what = {"calibrate": " (fitted rows)", "check": " (held out)"}.get(g, "")
            print(f"  mean |error| {sum(errs) / len(errs):.1f} %, max {max(errs):.1f} % over {len(errs)} rows{what}")
    groups_err = group_errors(rows)
    if groups_err:
        print("  by group (error in the file's quantity; + = the model's value is higher):")
        for ge in groups_err:
            print("    " + ge.line())
    bad = sum(1 for r in rows if r["error_pct"] is None and r.get("problem"))
    if bad:
        print(f"  {bad} rows not predicted (reason on each row)")


def cmd_validate(args) -> int:
    """Validate every file; print a table per file (or one JSON list) and the mean |error|."""
    report = []
    for f in _files(args):
        wl = workload_of(f)
        report.append((f, wl, _rows(f, wl, args)))
    if args.json:
        print(dumps_json([dict(r, file=f.name) for f, _, rows in report for r in rows], indent=2))
        return 0
    for f, wl, rows in report:
        _print_file(f, wl, rows)
        if wl == "collective":
            _print_choices(f)
    return 0


def _print_choices(f: Path) -> None:
    """The ``[H]`` lines of a collective file: constants chosen with its rows in view, and the rows'
    error under the alternative (:func:`tilesim.models.collective.measured.check_choices`)."""
    import textwrap

    from tilesim.models.collective.measured import check_choices  # loaded only when the command runs

    for check in check_choices(f):
        print(textwrap.fill(check.line(), 118, initial_indent="  ", subsequent_indent="      "))


def cmd_calibrate(args) -> int:
    """Fit the SNN cost model (one SNN file) or the multi-chip constants (stencil files)."""

    check_output_path(args.out, "--out", "file")  # before the fit, not after it
    kinds = {workload_of(f) for f in args.cases}
    if len(kinds) != 1:
        raise ConfigError(
            config_message("cases", ", ".join(args.cases), "mix workloads", "calibrate one workload at a time")
        )
    if kinds == {"snn"}:
        if len(args.cases) != 1:
            raise ConfigError(config_message("cases", ", ".join(args.cases), "SNN calibration takes one file"))
        from tilesim.models.snn.calibration.calibrate import (
            cmd_calibrate as snn_calibrate,  # loaded only when the command runs (start-up time)
        )

        return snn_calibrate(argparse.Namespace(**{**vars(args), "cases": args.cases[0]}))
    if kinds == {"collective"}:
        return _calibrate_collective(args)
    if kinds == {"matmul"}:
        return _calibrate_matmul(args)
    if kinds == {"noc"}:
        return _calibrate_noc(args)
    if kinds != {"stencil"}:
        (kind,) = kinds
        raise ConfigError(
            config_message(
                "cases",
                ", ".join(args.cases),
                f"are {kind} cases, which tilesim calibrate does not fit (nothing of that model is fitted per case)",
                "calibrate snn, stencil, collective, matmul or noc cases; `tilesim validate` checks these",
            )
        )
    import tomli_w  # tomli_w is needed only when writing TOML

    from tilesim.models.stencil.calibrate import fit_stencil  # loaded only when the command runs (start-up time)

    res = fit_stencil(args.cases, machine=args.machine)
    header = (
        "# Multi-chip constants fitted by `tilesim calibrate` (models/stencil/calibrate.py) on\n"
        f"# {', '.join(Path(c).name for c in args.cases)}; paste into a machine TOML's [system].\n"
        f"# mean |error| {res.mean_abs_error_pct_start:.1f} % -> {res.mean_abs_error_pct:.1f} % over "
        f"{len(res.rows)} multi-IPU rows.\n"
    )
    atomic_write_bytes(args.out, (header + tomli_w.dumps({"system": res.values})).encode())
    if args.json:
        print(
            dumps_json(
                {
                    "out": str(args.out),
                    "fit": res.values,
                    "start": res.start,
                    "mean_abs_error_pct": res.mean_abs_error_pct,
                    "rows": [dict(zip(("case", "measured", "start", "fitted"), r)) for r in res.rows],
                },
                indent=2,
            )
        )
        return 0
    print(f"fitted {len(res.rows)} multi-IPU stencil rows -> {args.out}")
    for k, v in res.values.items():
        print(f"  {k:<26} {v:.6g}   (was {res.start[k]:.6g})")
    print(f"mean |error| {res.mean_abs_error_pct_start:.1f} % -> {res.mean_abs_error_pct:.1f} %")
    return 0


def _write_fit(args, res, what: str, where: str) -> int:
    """Write a :class:`tilesim.models.cases.CaseFit` as TOML (its tables, with a header saying where they
    go) and print it."""
    import tomli_w  # tomli_w is needed only when writing TOML

    header = (
        f"# {what} fitted by `tilesim calibrate` on the use = calibrate rows of "
        f"{', '.join(Path(c).name for c in args.cases)};\n# {where}.\n"
        f"# mean |error| {res.mean_abs_error_pct_start:.1f} % -> {res.mean_abs_error_pct:.1f} % over {res.rows} rows.\n"
    )
    atomic_write_bytes(args.out, (header + tomli_w.dumps(res.tables)).encode())
    if args.json:
        print(
            dumps_json(
                {"out": str(args.out), "fit": res.tables, "mean_abs_error_pct": res.mean_abs_error_pct}, indent=2
            )
        )
        return 0
    print(f"fitted {res.rows} rows -> {args.out}")
    for table, values in res.tables.items():
        for k, v in values.items():
            print(f"  [{table}] {k:<24} {v:.6g}")
    print(f"mean |error| {res.mean_abs_error_pct_start:.1f} % -> {res.mean_abs_error_pct:.1f} %")
    return 0


def _calibrate_collective(args) -> int:
    from tilesim.models.collective.measured import fit_collective  # loaded only when the command runs

    return _write_fit(
        args,
        fit_collective([Path(c) for c in args.cases]),
        "Chip-link constants and the collective library's launch cycles",
        "[system] goes into the machine TOML, [collective] into models/collective/costs.toml",
    )


def _calibrate_matmul(args) -> int:
    from tilesim.models.tensix.measured import fit_matmul  # loaded only when the command runs

    return _write_fit(
        args,
        fit_matmul([Path(c) for c in args.cases]),
        "Tensix matmul constants",
        "[matmul] holds the keys of models/tensix/costs.toml",
    )


def _calibrate_noc(args) -> int:
    """Fit the NoC constants, write them (a complete costs file: ``[noc]``) and print the fit's
    identifiability report (leave-one-case-out and leave-one-group-out ranges, correlations)."""
    from tilesim.models.noc.measured import fit_noc, format_identifiability  # loaded only when the command runs

    res = fit_noc([Path(c) for c in args.cases], loo=not args.no_loo)
    what = "Tensix NoC message constants"
    where = "[noc] holds every key of models/noc/costs.toml (load it with tilesim.models.noc.costs.load_costs(path))"
    if args.json:
        with contextlib.redirect_stdout(io.StringIO()):  # the file only: the JSON below carries the fit
            _write_fit(argparse.Namespace(**{**vars(args), "json": False}), res.fit, what, where)
        out = {
            "out": str(args.out),
            "fit": res.fit.tables,
            "mean_abs_error_pct_start": res.fit.mean_abs_error_pct_start,
            "mean_abs_error_pct": res.fit.mean_abs_error_pct,
            "rows": res.fit.rows,
            "identifiability": [p.to_dict() for p in res.identity],
        }
        print(dumps_json(out, indent=2))
        return 0
    status = _write_fit(args, res.fit, what, where)
    print(format_identifiability(res.identity))
    return status


def register(sub) -> None:
    """Add ``validate`` and ``calibrate`` to the ``tilesim`` command line."""
    v = sub.add_parser(
        "validate",
        help="predicted vs measured for every workload (default: all shipped cases)",
        description="Time every row of measured-cases CSVs (column workload = snn, stencil, collective, matmul, "
        "sparse-matmul, snntorch or noc).",
    )
    v.add_argument(
        "cases",
        nargs="*",
        help="cases CSVs (default: every shipped SNN, stencil, collective, matmul, sparse-matmul, snntorch, noc case)",
    )
    v.add_argument("--costs", help="SNN cost-model TOML (default: tilesim/presets/costs/snn.toml)")
    v.add_argument("--machine", default="gc2x16", help="machine for stencil cases (default gc2x16)")
    v.add_argument("--json", action="store_true", help="print one JSON list of rows")
    v.add_argument("--quiet", action="store_true", help="no progress bar")
    v.set_defaults(func=cmd_validate)
    c = sub.add_parser(
        "calibrate",
        help="fit a workload's physical constants to measured cases",
        description="SNN cases: least-squares fit of the SNN cost model (writes a versioned TOML). "
        "Stencil cases: fit the multi-chip sync, link latency and per-message constants. "
        "Collective cases: fit link efficiency, link latency and launch cycles; matmul cases: the Tensix "
        "unpack rate and launch cycles; NoC cases: the Tensix NoC message constants, with an identifiability "
        "report (all on the rows marked use = calibrate).",
    )
    c.add_argument("cases", nargs="+", help="cases CSV(s): one SNN file, or stencil, collective, matmul or noc files")
    c.add_argument("--out", required=True, help="TOML to write")
    c.add_argument("--machine", default="gc2x16", help="machine whose constants are fitted (stencil; default gc2x16)")
    c.add_argument("--json", action="store_true", help="print the fit as JSON")
    c.add_argument("--no-loo", action="store_true", help="skip the leave-one-out refits (SNN, noc)")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=cmd_calibrate)
