"""Measured collectives: read a cases CSV, predict every row, fit the link constants.

Columns (one row per measured call; users can bring their own)::

    workload=collective, case, machine, op (all_reduce|all_gather|reduce_scatter|all_to_all),
    chips, topology (line|ring), storage (L1|DRAM), dtype, size_bytes, measured_us, source

and optionally ``use`` (``calibrate``: a row ``tilesim calibrate`` fits; anything else: checked
only). ``size_bytes`` counts as the CCL benchmark does (all_gather: output per chip; the others:
input per chip). A row that cannot be predicted says why in its own result and does not stop the
others (:mod:`models.cases`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from models.cases import Case, CaseFit, fit_cases, number, predict, read_rows, validate_rows
from models.collective.costs import CollectiveCosts, load_costs
from models.collective.workload import CollectiveSpec, time_collective
from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import load_machine

__all__ = ["COLUMNS", "read_cases", "predict_us", "validate_collective", "fit_collective", "shipped_collective_cases"]

COLUMNS = (
    "workload", "case", "machine", "op", "chips", "topology", "storage", "dtype", "size_bytes", "measured_us", "source",
)  # fmt: skip
STORAGE = ("L1", "DRAM")


def shipped_collective_cases() -> list[Path]:
    """The shipped measured-collective files (``models/collective/cases/*.csv``)."""
    return sorted((Path(__file__).parent / "cases").glob("*.csv"))


def _spec(r: dict, case: str) -> CollectiveSpec:
    storage = (r.get("storage") or "DRAM").strip()
    if storage not in STORAGE:
        raise ConfigError(
            config_message(f"{case}: storage", storage, f"must be one of {', '.join(STORAGE)}", "L1 or DRAM")
        )
    chips, size = number(r, "chips", case, integer=True), number(r, "size_bytes", case, integer=True)
    return CollectiveSpec(r["op"].strip(), int(chips), r["topology"].strip(), int(size))


def read_cases(path) -> list[Case]:
    """Every row of a collective cases CSV (a missing column raises :class:`ConfigError`)."""
    return read_rows(path, COLUMNS, "measured_us", _spec)


def predict_us(cases, costs: CollectiveCosts, over: dict | None = None) -> list:
    """Predicted microseconds of each case, or the reason it cannot be predicted. ``over``
    replaces ``[system]`` fields of every machine (the fit's trial values)."""

    def machine_of(name: str):
        m = load_machine(name)
        return replace(m, system=replace(m.system, **over)) if over else m

    return predict(cases, lambda spec, m: time_collective(spec, m, costs).total_s * 1e6, machine_of)


def validate_collective(path, costs: CollectiveCosts | None = None) -> list[dict]:
    """``tilesim validate`` rows of a collective cases CSV (predicted and measured in us)."""
    cases = read_cases(path)
    return validate_rows("collective", "us_per_call", cases, predict_us(cases, costs or load_costs()))


def fit_collective(paths) -> CaseFit:
    """Least-squares fit of ``system.link_efficiency``, ``system.link_latency_s`` and the CCL's
    ``launch_cycles`` to the rows marked ``use = calibrate`` (relative errors; the rows' machines
    share the values). Tables: ``[system]`` for the machine file, ``[collective]`` for costs.toml."""
    cases = [c for p in paths for c in read_cases(p)]
    base = load_costs()
    first = next((c for c in cases if c.calibrate and not c.problem), None)
    m0 = load_machine(first.machine).system if first else load_machine("wormhole-t3000").system

    def predict_with(x, fitted):
        trial = replace(base, launch_cycles=x[2] * 1e3)
        return predict_us(fitted, trial, {"link_efficiency": x[0], "link_latency_s": x[1] * 1e-6})

    def tables(x):
        return {
            "system": {"link_efficiency": round(float(x[0]), 4), "link_latency_s": round(float(x[1]) * 1e-6, 10)},
            "collective": {"launch_cycles": round(float(x[2]) * 1e3, 1)},
        }

    x0 = [m0.link_efficiency, m0.link_latency_s * 1e6, base.launch_cycles * 1e-3]
    return fit_cases(cases, predict_with, x0, ([0.05, 0.0, 0.0], [1.0, 50.0, 100.0]), tables)
