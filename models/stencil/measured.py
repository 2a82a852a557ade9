"""Measured multi-IPU stencil cases (``cases/``) and the model's predictions for them.

Two kinds of rows, told apart by their columns: strong-scaling rows (µs per iteration of an
image, data type and IPU count) and phase rows (cycles per superstep of one phase at 1 or 16
IPUs; the image is cheese 2200×1122, see ``cases/README.md``). Every row has ``workload = stencil``.
"""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import load_machine
from tilesim.models.cases import check_measured
from tilesim.models.stencil.workload import StencilConfig, parse_pair, run_stencil

__all__ = ["shipped_stencil_cases", "validate_stencil", "PHASE_IMAGE"]

PHASE_IMAGE = (1122, 2200)  # rows, cols of the profiled image (cheese)
_SCALING = (
    "width_px",
    "height_px",
    "datatype",
    "num_ipus",
    "iterations",
    "min_rows_x_cols_per_tile",
    "derived_us_per_iteration",
)
_PHASE = ("num_ipus", "datatype", "name", "cycles")


def shipped_stencil_cases() -> list[Path]:
    """Paths of the measured stencil case CSVs shipped in ``models/stencil/cases`` (sorted)."""
    root = resources.files("tilesim.models.stencil") / "cases"
    return sorted(
        Path(str(root / n)) for n in ("louw_gc2_gaussian_blur_strong_scaling.csv", "louw_gc2_stencil_phase_cycles.csv")
    )


def _num(path, i, col, text, kind=int):
    try:
        return kind(text)
    except (TypeError, ValueError):
        raise ConfigError(
            config_message(
                f"{path} row {i} column {col}",
                text,
                f"is not a valid {kind.__name__}",
                "fix that cell (the shipped cases show the format)",
            )
        ) from None


def validate_stencil(path, machine: str = "gc2x16", iterations: int = 10) -> list[dict]:
    """Predicted vs measured for every row of a stencil cases CSV.

    ``iterations``: simulated iterations per row (the time per iteration does not depend on it
    beyond the first exchange and the tail; the measured runs used 100).
    """

    p = Path(path)
    with open(p, newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        rows = list(reader)
    kind = "scaling" if all(c in header for c in _SCALING) else "phase" if all(c in header for c in _PHASE) else None
    if kind is None:
        raise ConfigError(
            config_message(
                f"{p} header",
                ",".join(header),
                "is neither a stencil scaling nor a phase file",
                f"scaling needs {', '.join(_SCALING)}; phases need {', '.join(_PHASE)}",
            )
        )
    runs: dict = {}

    def run(h, w, dtype, ipus, mr, mc):
        key = (h, w, dtype, ipus, mr, mc)
        if key not in runs:
            cfg = StencilConfig(h, w, dtype, ipus, mr, mc, iterations)
            runs[key] = run_stencil(cfg, load_machine(machine, ipus), keep_timeline=False)
        return runs[key]

    out = []
    for i, r in enumerate(rows, start=2):
        if r.get("workload", "stencil") != "stencil":
            continue
        ipus = _num(p, i, "num_ipus", r["num_ipus"])
        if kind == "scaling":
            h, w = _num(p, i, "height_px", r["height_px"]), _num(p, i, "width_px", r["width_px"])
            mr, mc = parse_pair(r["min_rows_x_cols_per_tile"], f"{p} row {i} min_rows_x_cols_per_tile")
            pred = run(h, w, r["datatype"], ipus, mr, mc).us_per_iteration
            meas = check_measured(
                f"{p} row {i} column derived_us_per_iteration",
                _num(p, i, "derived_us_per_iteration", r["derived_us_per_iteration"], float),
            )
            out.append(
                {
                    "workload": "stencil",
                    "case": f"{r.get('image', f'{w}x{h}')} {r['datatype']} {ipus} IPU",
                    "quantity": "us_per_iteration",
                    "predicted": pred,
                    "measured": meas,
                    "error_pct": 100.0 * (pred - meas) / meas,
                }
            )
        else:
            pred = run(*PHASE_IMAGE, r["datatype"], ipus, 1, 1).phases[r["name"]]
            meas = check_measured(
                f"{p} row {i} column cycles", _num(p, i, "cycles", r["cycles"], float), allow_zero=True
            )
            out.append(
                {
                    "workload": "stencil",
                    "case": f"cheese {r['datatype']} {ipus} IPU {r['name']}",
                    "quantity": "cycles_per_superstep",
                    "predicted": pred,
                    "measured": meas,
                    "error_pct": 100.0 * (pred - meas) / meas if meas else None,
                }
            )
    return out
