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

from dataclasses import replace
from pathlib import Path

from tilesim.models.cases import Case, CaseFit, fit_cases, number, predict, read_rows, validate_rows
from tilesim.models.tensix.matmul import MatmulCosts, MatmulSpec, load_matmul_costs, time_matmul

__all__ = ["COLUMNS", "read_matmul_cases", "predict_ns", "validate_matmul", "fit_matmul", "shipped_matmul_cases"]

COLUMNS = (
    "workload", "case", "machine", "m", "k", "n", "dtype", "math_fidelity", "grid_x", "grid_y",
    "in0_storage", "in1_storage", "out_storage", "use_trace", "measured_ns", "source",
)  # fmt: skip
TEXT = ("dtype", "math_fidelity", "in0_storage", "in1_storage", "out_storage")


def shipped_matmul_cases() -> list[Path]:
    """The shipped measured-matmul files (``models/tensix/cases/*.csv``)."""
    return sorted((Path(__file__).parent / "cases").glob("*.csv"))


def _spec(r: dict, case: str) -> MatmulSpec:
    dims = {c: int(number(r, c, case, integer=True)) for c in ("m", "k", "n", "grid_x", "grid_y")}
    return MatmulSpec(**dims, **{c: (r.get(c) or "").strip() for c in TEXT})


def read_matmul_cases(path) -> list[Case]:
    """Every row of a matmul cases CSV (a missing column raises :class:`ConfigError`)."""
    return read_rows(path, COLUMNS, "measured_ns", _spec)


def predict_ns(cases, costs: MatmulCosts) -> list:
    """Predicted device nanoseconds of each case, or why it cannot be predicted."""
    return predict(cases, lambda spec, m: time_matmul(spec, m, costs)[0] * 1e9)


def validate_matmul(path, costs: MatmulCosts | None = None) -> list[dict]:
    """``tilesim validate`` rows of a matmul cases CSV (predicted and measured in ns)."""
    cases = read_matmul_cases(path)
    return validate_rows("matmul", "ns_per_call", cases, predict_ns(cases, costs or load_matmul_costs()))


def fit_matmul(paths) -> CaseFit:
    """Least-squares fit of ``unpack_bytes_per_cycle`` and ``launch_cycles`` to the rows marked
    ``use = calibrate`` (relative errors). Table: the keys of ``models/tensix/costs.toml``."""
    base = load_matmul_costs()

    def predict_with(x, fitted):
        return predict_ns(fitted, replace(base, unpack_bytes_per_cycle=float(x[0]), launch_cycles=float(x[1]) * 1e3))

    def tables(x):
        return {
            "matmul": {"unpack_bytes_per_cycle": round(float(x[0]), 1), "launch_cycles": round(float(x[1]) * 1e3, 1)}
        }

    cases = [c for p in paths for c in read_matmul_cases(p)]
    x0 = [base.unpack_bytes_per_cycle, base.launch_cycles * 1e-3]
    return fit_cases(cases, predict_with, x0, ([1.0, 0.0], [1e4, 1e3]), tables)
