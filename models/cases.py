"""What every workload's measured-cases CSV shares: reading it with its required columns, one
:class:`Case` per row (or the reason the row cannot be used), predicting the rows and the rows
``tilesim validate`` prints (predicted and measured in the file's unit; a row that cannot be
predicted says why and stops nothing), and a relative least-squares fit of a few constants to the
rows marked ``use = calibrate``."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, TileSimError, config_message
from tilesim.io import read_text
from tilesim.machine.description import Machine, load_machine

__all__ = [
    "AT_BOUND_TOL",
    "at_bound",
    "correlations",
    "Case",
    "CaseFit",
    "MAX_MEASURED",
    "check_measured",
    "read_table",
    "number",
    "read_rows",
    "predict",
    "validate_rows",
    "GroupError",
    "group_errors",
    "fit_cases",
]

MAX_MEASURED = 1e15
"""Largest measured value a cases file may give, in its own unit (ms, us or cycles): 1e15 us is 31 years;
beyond it the error percentage leaves the float range."""


def check_measured(field: str, value: float, *, allow_zero: bool = False) -> float:
    """``value`` if it is a measured time in (0, :data:`MAX_MEASURED`] (``[0, …]`` with ``allow_zero``),
    else a :class:`ConfigError` naming ``field``."""
    if not (0 <= value if allow_zero else 0 < value) or not value <= MAX_MEASURED:  # NaN fails both
        bound = "[0" if allow_zero else "(0"
        raise ConfigError(
            config_message(
                field, value, f"must be a finite number in {bound}, {MAX_MEASURED:g}]", "fix the row (a measured time)"
            )
        )
    return value


@dataclass(frozen=True)
class Case:
    """One measured row: its name, machine, the workload's spec, the measured value (in the file's
    unit), whether calibration may fit it; ``problem`` says why it cannot be used (then ``spec`` is
    None)."""

    case: str
    machine: str
    spec: object
    measured: float
    calibrate: bool
    problem: str | None = None


@dataclass(frozen=True)
class CaseFit:
    """A fit: the TOML tables of fitted values, the mean |error| before and after, the rows fitted."""

    tables: dict
    mean_abs_error_pct_start: float
    mean_abs_error_pct: float
    rows: int


def read_table(path, columns: tuple[str, ...]) -> list[dict]:
    """The rows of a cases CSV; raises :class:`ConfigError` naming the missing columns."""
    reader = csv.DictReader(io.StringIO(read_text(path, "cases file", "give a cases CSV"), newline=""))
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        raise ConfigError(
            config_message(f"{Path(path).name}: columns", ",".join(missing), "missing", f"give {', '.join(columns)}")
        )
    return list(reader)


def number(row: dict, col: str, case: str, *, integer: bool = False) -> float:
    """``row[col]`` as a number (an integer where ``integer``), or a :class:`ConfigError` naming the row."""
    text = (row.get(col) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(config_message(f"{case}: {col}", text, "must be a number", "fix the row")) from None
    if not np.isfinite(value):
        raise ConfigError(config_message(f"{case}: {col}", text, "must be a finite number", "fix the row"))
    if integer:
        if not value.is_integer():
            raise ConfigError(config_message(f"{case}: {col}", text, "must be a whole number", "fix the row"))
        return int(value)
    return value


def read_rows(path, columns: tuple[str, ...], measured: str, spec_of: Callable[[dict, str], object]) -> list[Case]:
    """Every row of a cases CSV as a :class:`Case`: ``spec_of(row, case)`` makes the workload's spec
    (raising :class:`TileSimError` for a bad row), ``measured`` names the measured column (> 0)."""
    out = []
    for line, r in enumerate(read_table(path, columns), start=2):
        case = (r.get("case") or f"row {line}").strip()
        machine = (r.get("machine") or "").strip()
        try:
            value = check_measured(f"{case}: {measured}", number(r, measured, case))
            out.append(Case(case, machine, spec_of(r, case), value, (r.get("use") or "") == "calibrate"))
        except TileSimError as e:
            out.append(Case(case, machine, None, float("nan"), False, str(e)))
    return out


def predict(cases: Sequence[Case], time_one: Callable[[object, Machine], float], machine_of=load_machine) -> list:
    """``time_one(spec, machine)`` of every case (the machine loaded once per name by
    ``machine_of``), or the reason the case cannot be predicted."""
    machines: dict = {}
    out: list = []
    for c in cases:
        if c.problem:
            out.append(c.problem)
            continue
        try:
            if c.machine not in machines:
                machines[c.machine] = machine_of(c.machine)
            out.append(float(time_one(c.spec, machines[c.machine])))
        except TileSimError as e:
            out.append(str(e))
    return out


def validate_rows(workload: str, quantity: str, cases: Sequence[Case], predicted: list) -> list[dict]:
    """The ``tilesim validate`` rows of ``cases`` and their predictions (numbers or reasons)."""
    rows = []
    for c, p in zip(cases, predicted):
        ok = isinstance(p, float)
        rows.append(
            {
                "workload": workload,
                "case": c.case,
                "machine": c.machine,
                "quantity": quantity,
                "use": "calibrate" if c.calibrate else "check",
                "predicted": round(p, 3) if ok else None,
                "measured": None if c.problem else c.measured,
                "error_pct": round(100 * (p - c.measured) / c.measured, 2) if ok else None,
                "problem": None if ok else p,
            }
        )
    return rows


@dataclass(frozen=True)
class GroupError:
    """The error of a group of validate rows, in the rows' quantity: ``mean_abs_pct`` (mean |error|),
    ``bias_pct`` (mean signed error: + the model's value is higher), ``max_abs_pct`` over ``rows`` rows."""

    group: str
    rows: int
    mean_abs_pct: float
    bias_pct: float
    max_abs_pct: float

    def line(self) -> str:
        """The line ``tilesim validate`` prints for the group."""
        return (
            f"{self.group:<24} mean |error| {self.mean_abs_pct:5.1f} %, bias {self.bias_pct:+6.1f} %, "
            f"max {self.max_abs_pct:5.1f} % over {self.rows} rows"
        )


def group_errors(rows: Sequence[dict]) -> list[GroupError]:
    """:class:`GroupError` of every ``group`` the predicted rows name, in order of first appearance (the one
    definition of a group's error: ``tilesim validate`` prints it, the README quotes it)."""
    by: dict[str, list[float]] = {}
    for r in rows:
        if r.get("group") and r.get("error_pct") is not None:
            by.setdefault(r["group"], []).append(float(r["error_pct"]))
    return [
        GroupError(g, len(e), float(np.mean(np.abs(e))), float(np.mean(e)), float(np.max(np.abs(e))))
        for g, e in by.items()
    ]


def fit_cases(cases: Sequence[Case], predict_with: Callable[[np.ndarray], list], x0, bounds, tables_of) -> CaseFit:
    """Least squares on the relative errors of the cases marked ``use = calibrate``:
    ``predict_with(x, cases)`` predicts them for trial parameters ``x`` (starting at ``x0`` within
    ``bounds``), ``tables_of(x)`` turns the solution into TOML tables."""
    from scipy.optimize import least_squares  # scipy is needed only for a fit

    fitted = [c for c in cases if c.calibrate and not c.problem]
    if not fitted:
        raise ConfigError(config_message("cases", len(cases), "no row with use = calibrate", "mark the rows to fit"))
    meas = np.array([c.measured for c in fitted])

    def residual(x):
        return (np.array(predict_with(np.asarray(x), fitted), np.float64) - meas) / meas

    r0 = residual(np.asarray(x0, float))
    sol = least_squares(residual, np.asarray(x0, float), bounds=bounds, diff_step=1e-3)
    return CaseFit(
        tables_of(sol.x), float(np.mean(np.abs(r0)) * 100), float(np.mean(np.abs(sol.fun)) * 100), len(fitted)
    )


AT_BOUND_TOL = 1e-6
"""A fitted parameter within this fraction of its range from a bound sits at that bound."""


def at_bound(value: float, lo: float, hi: float) -> str:
    """``"lower"`` or ``"upper"`` where a fitted ``value`` sits at that bound of ``[lo, hi]`` (within
    :data:`AT_BOUND_TOL` of the range: the fit pushed it there, so the data do not estimate it), else ``""``."""
    tol = AT_BOUND_TOL * (hi - lo)
    return "lower" if value - lo <= tol else ("upper" if hi - value <= tol else "")


def correlations(J: np.ndarray) -> np.ndarray:
    """The correlation matrix of a least-squares estimate from its Jacobian ``J`` (residuals x parameters):
    pinv(JᵀJ) normalised (NaN where a parameter does not move the residuals at all)."""
    cov = np.linalg.pinv(J.T @ J)
    d = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / np.outer(d, d)
