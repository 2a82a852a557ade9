"""Measured collectives: read a cases CSV, predict every row, fit the link constants.

Columns (one row per measured call; users can bring their own)::

    workload=collective, case, machine, op (all_reduce|all_gather|reduce_scatter|all_to_all),
    chips, topology (line|ring), storage (L1|DRAM), dtype, size_bytes, measured_us, source

and optionally ``use`` (``calibrate``: a row ``tilesim calibrate`` fits; anything else: checked
only). ``size_bytes`` counts as the CCL benchmark does (all_gather: output per chip; the others:
input per chip). A row that cannot be predicted says why in its own result and does not stop the
others (:mod:`tilesim.models.cases`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import load_machine
from tilesim.models.cases import Case, CaseFit, fit_cases, number, predict, read_rows, validate_rows
from tilesim.models.collective.costs import CollectiveCosts, load_costs
from tilesim.models.collective.workload import CollectiveSpec, time_collective

__all__ = [
    "COLUMNS",
    "read_cases",
    "predict_us",
    "validate_collective",
    "fit_collective",
    "shipped_collective_cases",
    "HeldOutChoice",
    "HELD_OUT_CHOICES",
    "ChoiceCheck",
    "check_choices",
]

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


@dataclass(frozen=True)
class HeldOutChoice:
    """A machine constant chosen with the held-out data in view (evidence tag ``[H]``,
    tilesim/presets/EVIDENCE.md): the ``[system]`` ``fields`` of preset ``machine`` were read from the
    very file its rows are checked on (or chosen after seeing it). ``alternative``: what the constant
    would be without that file (``source`` says where each comes from); :func:`check_choices` prints
    the rows' error under both, so the held-out error is read knowing the choice."""

    machine: str
    fields: tuple[str, ...]
    source: str
    alternative: tuple[float, ...]
    alternative_source: str


# Blackhole p150x8: Wormhole's fitted per-hop latency is 2376 cycles at 1 GHz; the preset keeps the cycles at
# Blackhole's 1.35 GHz (1.760 us); in seconds it would stay 2.376 us.
HELD_OUT_CHOICES = (
    HeldOutChoice(
        "blackhole-p150x8",
        ("links_per_neighbour", "link_bytes_per_s"),
        "2 links of 25 GB/s per neighbour, read from the CCL benchmark's own records (linkbw = busbw / 2, its line "
        "rate) in the file these rows come from",
        (1.0, 100.0e9),
        "the vendor's cabling alone: one QSFP-DD 800G cable per neighbour in the 2 x 4 mesh (10 cables), 100 GB/s "
        "per direction",
    ),
    HeldOutChoice(
        "blackhole-p150x8",
        ("links_per_neighbour",),
        "2 links per neighbour, read from the CCL benchmark's linkbw = busbw / 2",
        (1.0,),
        "one link per neighbour at the recorded 25 GB/s, as the Wormhole rows discover",
    ),
    HeldOutChoice(
        "blackhole-p150x8",
        ("link_latency_s",),
        "Wormhole's fitted per-hop latency kept in cycles (2376) at Blackhole's clock: 1.760 us, chosen after the "
        "Blackhole rows were seen",
        (2.376e-6,),
        "Wormhole's fitted per-hop latency kept in seconds (the same firmware at the same wall-clock speed)",
    ),
)
"""The ``[H]`` choices of the shipped presets (EVIDENCE.md §4.3, §4.4)."""


@dataclass(frozen=True)
class ChoiceCheck:
    """The mean |error| of a file's rows on ``choice.machine`` with the shipped values and with the
    alternative (``rows``: how many were predicted)."""

    choice: HeldOutChoice
    shipped_pct: float
    alternative_pct: float
    rows: int

    def line(self) -> str:
        """One line for ``tilesim validate``."""
        c = self.choice
        fields = ", ".join(c.fields)
        alt = ", ".join(f"{f} = {v:g}" for f, v in zip(c.fields, c.alternative))
        return (
            f"[H] {c.machine} {fields}: {c.source}; mean |error| {self.shipped_pct:.1f} % over {self.rows} rows. "
            f"With {alt} ({c.alternative_source}): {self.alternative_pct:.1f} %"
        )


def _mean_abs_error(cases, predicted) -> tuple[float, int]:
    """Mean |error| % and rows predicted, as ``tilesim validate`` prints them (its rows' ``error_pct``)."""
    rows = validate_rows("collective", "us_per_call", cases, predicted)
    errs = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]
    return (float(np.mean(errs)) if errs else float("nan")), len(errs)


def check_choices(path, costs: CollectiveCosts | None = None, choices=HELD_OUT_CHOICES) -> list[ChoiceCheck]:
    """For every ``[H]`` choice whose machine has rows in the collective cases file ``path``: those
    rows' mean |error| with the shipped values and with the choice's alternative."""
    costs = costs or load_costs()
    out = []
    for choice in choices:
        cases = [c for c in read_cases(path) if c.machine == choice.machine and not c.problem]
        if not cases:
            continue
        shipped, n = _mean_abs_error(cases, predict_us(cases, costs))
        over = dict(zip(choice.fields, choice.alternative))
        if "links_per_neighbour" in over:
            over["links_per_neighbour"] = int(over["links_per_neighbour"])
        alternative, _ = _mean_abs_error(cases, predict_us(cases, costs, over))
        out.append(ChoiceCheck(choice, shipped, alternative, n))
    return out
