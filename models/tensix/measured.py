"""Measured matmuls on Tensix machines: read a cases CSV, predict every row, fit the constants.

Columns (users can bring their own)::

    workload=matmul, case, machine, m, k, n, dtype (BFLOAT16|BFLOAT8_B|BFLOAT4_B),
    math_fidelity (LoFi|HiFi2|HiFi3|HiFi4), grid_x, grid_y, in0_storage, in1_storage,
    out_storage (L1|DRAM), use_trace, measured_ns, source

and optionally ``use`` (``calibrate``: fitted by ``tilesim calibrate``; anything else: checked).
``measured_ns`` is the device time of the op (the shipped rows derive it from the tables'
device-based utilisation); ``use_trace`` is read and kept (it changes host time, not device time).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from models.cases import number, read_table, result_row
from models.tensix.matmul import MatmulCosts, MatmulSpec, load_matmul_costs, time_matmul
from tilesim.errors import ConfigError, TileSimError, config_message
from tilesim.machine import load_machine

__all__ = ["COLUMNS", "MatmulCase", "read_matmul_cases", "validate_matmul", "fit_matmul", "shipped_matmul_cases"]

COLUMNS = (
    "workload", "case", "machine", "m", "k", "n", "dtype", "math_fidelity", "grid_x", "grid_y",
    "in0_storage", "in1_storage", "out_storage", "use_trace", "measured_ns", "source",
)  # fmt: skip


@dataclass(frozen=True)
class MatmulCase:
    """One measured row (``problem``: why it cannot be predicted, None when it can)."""

    case: str
    machine: str
    spec: MatmulSpec | None
    measured_ns: float
    calibrate: bool
    problem: str | None = None


def shipped_matmul_cases() -> list[Path]:
    """The shipped measured-matmul files (``models/tensix/cases/*.csv``)."""
    return sorted((Path(__file__).parent / "cases").glob("*.csv"))


def _row(r: dict, line: int) -> MatmulCase:
    case = (r.get("case") or f"row {line}").strip()
    machine = (r.get("machine") or "").strip()
    try:
        dims = {c: number(r, c, case, integer=True) for c in ("m", "k", "n", "grid_x", "grid_y")}
        text = {
            c: (r.get(c) or "").strip() for c in ("dtype", "math_fidelity", "in0_storage", "in1_storage", "out_storage")
        }
        measured = number(r, "measured_ns", case)
        if not measured > 0:
            raise ConfigError(config_message(f"{case}: measured_ns", measured, "must be > 0", "fix the row"))
        return MatmulCase(case, machine, MatmulSpec(**dims, **text), measured, (r.get("use") or "") == "calibrate")
    except TileSimError as e:
        return MatmulCase(case, machine, None, float("nan"), False, str(e))


def read_matmul_cases(path) -> list[MatmulCase]:
    """Every row of a matmul cases CSV (a missing column raises :class:`ConfigError`)."""
    return [_row(r, i) for i, r in enumerate(read_table(path, COLUMNS), start=2)]


def predict_ns(cases, costs: MatmulCosts) -> list[float | str]:
    """Predicted device nanoseconds of each case, or why it cannot be predicted."""
    machines: dict = {}
    out: list[float | str] = []
    for c in cases:
        if c.problem:
            out.append(c.problem)
            continue
        try:
            if c.machine not in machines:
                machines[c.machine] = load_machine(c.machine)
            out.append(time_matmul(c.spec, machines[c.machine], costs)[0] * 1e9)
        except TileSimError as e:
            out.append(str(e))
    return out


def validate_matmul(path, costs: MatmulCosts | None = None) -> list[dict]:
    """``tilesim validate`` rows of a matmul cases CSV (predicted and measured in ns)."""
    cases = read_matmul_cases(path)
    return [
        result_row(
            "matmul",
            c.case,
            c.machine,
            "ns_per_call",
            "calibrate" if c.calibrate else "check",
            p if isinstance(p, float) else None,
            None if c.problem else c.measured_ns,
            p,
        )  # fmt: skip
        for c, p in zip(cases, predict_ns(cases, costs or load_matmul_costs()))
    ]


@dataclass(frozen=True)
class MatmulFit:
    """The fitted constants, the mean |error| before and after, and how many rows."""

    values: dict
    mean_abs_error_pct_start: float
    mean_abs_error_pct: float
    rows: int


def fit_matmul(paths) -> MatmulFit:
    """Least-squares fit of ``unpack_bytes_per_cycle`` and ``launch_cycles`` to the rows marked
    ``use = calibrate`` (relative errors)."""
    from scipy.optimize import least_squares  # scipy is needed only for a fit

    cases = [c for p in paths for c in read_matmul_cases(p) if c.calibrate and not c.problem]
    if not cases:
        raise ConfigError(
            config_message("cases", ", ".join(map(str, paths)), "no row with use = calibrate", "mark rows to fit")
        )
    base = load_matmul_costs()
    meas = np.array([c.measured_ns for c in cases])

    def residual(x):
        trial = replace(base, unpack_bytes_per_cycle=float(x[0]), launch_cycles=float(x[1]) * 1e3)
        return (np.array(predict_ns(cases, trial), np.float64) - meas) / meas

    x0 = np.array([base.unpack_bytes_per_cycle, base.launch_cycles * 1e-3])
    r0 = residual(x0)
    sol = least_squares(residual, x0, bounds=([1.0, 0.0], [1e4, 1e3]))
    return MatmulFit(
        {"unpack_bytes_per_cycle": round(float(sol.x[0]), 1), "launch_cycles": round(float(sol.x[1]) * 1e3, 1)},
        float(np.mean(np.abs(r0)) * 100),
        float(np.mean(np.abs(sol.fun)) * 100),
        len(cases),
    )
