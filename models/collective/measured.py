"""Measured collectives: read a cases CSV, predict every row, fit the link constants.

Columns (one row per measured call; users can bring their own)::

    workload=collective, case, machine, op (all_reduce|all_gather|reduce_scatter|all_to_all),
    chips, topology (line|ring), storage (L1|DRAM), dtype, size_bytes, measured_us, source

and optionally ``use`` (``calibrate``: a row ``tilesim calibrate`` fits; anything else: checked
only). ``size_bytes`` counts as the CCL benchmark does (all_gather: output per chip; the others:
input per chip). A row that cannot be predicted says why in its own result and does not stop the
others.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from models.cases import number, read_table, result_row
from models.collective.costs import CollectiveCosts, load_costs
from models.collective.workload import CollectiveSpec, time_collective
from tilesim.errors import ConfigError, TileSimError, config_message
from tilesim.machine import Machine, load_machine

__all__ = [
    "COLUMNS",
    "CollectiveCase",
    "read_cases",
    "validate_collective",
    "fit_collective",
    "shipped_collective_cases",
]

COLUMNS = (
    "workload", "case", "machine", "op", "chips", "topology", "storage", "dtype", "size_bytes", "measured_us", "source",
)  # fmt: skip
STORAGE = ("L1", "DRAM")


@dataclass(frozen=True)
class CollectiveCase:
    """One measured row: the spec, where it ran, its time, and whether calibration may fit it;
    ``problem`` says why the row cannot be predicted (None: it can)."""

    case: str
    machine: str
    spec: CollectiveSpec | None
    measured_us: float
    calibrate: bool
    source: str
    problem: str | None = None


def shipped_collective_cases() -> list[Path]:
    """The shipped measured-collective files (``models/collective/cases/*.csv``)."""
    return sorted((Path(__file__).parent / "cases").glob("*.csv"))


def _row(r: dict, line: int) -> CollectiveCase:
    case = (r.get("case") or f"row {line}").strip()
    try:
        chips, size = number(r, "chips", case, integer=True), number(r, "size_bytes", case, integer=True)
        measured = number(r, "measured_us", case)
        storage = (r.get("storage") or "DRAM").strip()
        if storage not in STORAGE:
            raise ConfigError(
                config_message(f"{case}: storage", storage, f"must be one of {', '.join(STORAGE)}", "L1 or DRAM")
            )
        if not measured > 0:
            raise ConfigError(config_message(f"{case}: measured_us", measured, "must be > 0", "fix the row"))
        spec = CollectiveSpec(r["op"].strip(), chips, r["topology"].strip(), size)
        return CollectiveCase(
            case, r["machine"].strip(), spec, measured, (r.get("use") or "") == "calibrate", r.get("source", "")
        )
    except TileSimError as e:
        return CollectiveCase(
            case, (r.get("machine") or "").strip(), None, float("nan"), False, r.get("source", ""), str(e)
        )


def read_cases(path) -> list[CollectiveCase]:
    """Every row of a collective cases CSV; raises :class:`ConfigError` for a missing column."""
    return [_row(r, i) for i, r in enumerate(read_table(path, COLUMNS), start=2)]


def _machine(name: str, cache: dict, over: dict | None) -> Machine:
    if name not in cache:
        m = load_machine(name)
        cache[name] = replace(m, system=replace(m.system, **over)) if over else m
    return cache[name]


def predict_us(cases, costs: CollectiveCosts, over: dict | None = None) -> list[float | str]:
    """Predicted microseconds of each case, or the reason it cannot be predicted. ``over``
    replaces ``[system]`` fields of every machine (the fit's trial values)."""
    cache: dict = {}
    out: list[float | str] = []
    for c in cases:
        if c.problem:
            out.append(c.problem)
            continue
        try:
            out.append(time_collective(c.spec, _machine(c.machine, cache, over), costs).total_s * 1e6)
        except TileSimError as e:
            out.append(str(e))
    return out


def validate_collective(path, costs: CollectiveCosts | None = None) -> list[dict]:
    """``tilesim validate`` rows of a collective cases CSV (predicted and measured in us)."""
    cases = read_cases(path)
    return [
        result_row(
            "collective",
            c.case,
            c.machine,
            "us_per_call",
            "calibrate" if c.calibrate else "check",
            p if isinstance(p, float) else None,
            None if c.problem else c.measured_us,
            p,
        )  # fmt: skip
        for c, p in zip(cases, predict_us(cases, costs or load_costs()))
    ]


@dataclass(frozen=True)
class CollectiveFit:
    """Fitted link constants and launch time, the error before and after, and the rows fitted."""

    system: dict
    costs: dict
    mean_abs_error_pct_start: float
    mean_abs_error_pct: float
    rows: int


def fit_collective(paths_) -> CollectiveFit:
    """Least-squares fit of ``system.link_efficiency``, ``system.link_latency_s`` and the CCL's
    ``launch_cycles`` to the rows marked ``use = calibrate`` (relative errors; the rows' machines
    share the values)."""
    from scipy.optimize import least_squares  # scipy is needed only for a fit

    cases = [c for p in paths_ for c in read_cases(p) if c.calibrate and not c.problem]
    if not cases:
        raise ConfigError(
            config_message("cases", ", ".join(map(str, paths_)), "no row with use = calibrate", "mark rows to fit")
        )
    base = load_costs()
    meas = np.array([c.measured_us for c in cases])

    def residual(x):
        eff, lat_us, launch_kcycles = x
        trial = replace(base, launch_cycles=launch_kcycles * 1e3)
        pred = predict_us(cases, trial, {"link_efficiency": eff, "link_latency_s": lat_us * 1e-6})
        return (np.array(pred, np.float64) - meas) / meas

    m0 = load_machine(cases[0].machine).system
    x0 = np.array([m0.link_efficiency, m0.link_latency_s * 1e6, base.launch_cycles * 1e-3])
    r0 = residual(x0)
    sol = least_squares(residual, x0, bounds=([0.05, 0.0, 0.0], [1.0, 50.0, 100.0]), diff_step=1e-3)
    eff, lat_us, launch_kcycles = (float(v) for v in sol.x)
    return CollectiveFit(
        {"link_efficiency": round(eff, 4), "link_latency_s": round(lat_us * 1e-6, 10)},
        {"launch_cycles": round(launch_kcycles * 1e3, 1)},
        float(np.mean(np.abs(r0)) * 100),
        float(np.mean(np.abs(sol.fun)) * 100),
        len(cases),
    )
