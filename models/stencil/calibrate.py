"""Fit the multi-chip machine constants of a ``gc2x16``-like system to measured stencil runs.

Only physical machine constants are fitted, never a factor per case:

* ``system.global_sync_fixed_cycles`` — the part of a cross-chip sync that does not grow with the
  hop count (the hop term stays IPUModel's 15 ns per hop [S]);
* ``system.link_latency_s`` — per IPU-Link hop;
* ``system.link_message_bytes`` — link time of one message beyond its payload.

Link bandwidth (32 GB/s per direction × 0.85) and the on-chip exchange (4 B/cycle, 100 cycles)
stay documented constants. The residuals are the relative errors of every multi-IPU strong-scaling
row (µs per iteration) and of the 16-IPU ``sync`` and ``globExchange`` phase rows; 1-IPU rows do
not depend on these constants. Plans (partition and halo counts) are computed once per case; each
evaluation only rebuilds the flows and re-simulates.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import Machine, load_machine
from tilesim.models.stencil.measured import PHASE_IMAGE
from tilesim.models.stencil.workload import StencilConfig, StencilStep, parse_pair, plan_stencil
from tilesim.workload import time_workload

__all__ = ["FIT_NAMES", "StencilFit", "fit_stencil"]

FIT_NAMES = ("global_sync_fixed_cycles", "link_latency_s", "link_message_bytes")
_SCALE = np.array([100.0, 1e-6, 32.0])  # parameter units for the optimiser
_BOUNDS = (np.array([0.0, 0.0, 0.0]), np.array([2000.0, 5e-6, 1024.0]))


@dataclass(frozen=True)
class StencilFit:
    """Fitted constants, the residual table and the mean |error| before and after."""

    values: dict
    start: dict
    rows: tuple  # (case, measured, predicted at start, predicted fitted)
    mean_abs_error_pct_start: float
    mean_abs_error_pct: float


def _targets(paths) -> list[tuple]:
    """(label, config, measured, quantity) for every multi-IPU row of the given stencil files."""
    out = []
    for p in paths:
        with open(p, newline="") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            for i, r in enumerate(reader, start=2):
                if r.get("workload", "stencil") != "stencil":
                    continue
                n = int(r["num_ipus"])
                if n < 2:
                    continue
                if "derived_us_per_iteration" in header:
                    mr, mc = parse_pair(r["min_rows_x_cols_per_tile"], f"{p} row {i} min_rows_x_cols_per_tile")
                    cfg = StencilConfig(int(r["height_px"]), int(r["width_px"]), r["datatype"], n, mr, mc, 1)
                    out.append(
                        (
                            f"{r.get('image', '')} {r['datatype']} {n} IPU",
                            cfg,
                            float(r["derived_us_per_iteration"]),
                            "us",
                        )
                    )
                elif "name" in header and r["name"] in ("sync", "globExchange"):
                    cfg = StencilConfig(*PHASE_IMAGE, r["datatype"], n, 1, 1, 1)
                    out.append((f"cheese {r['datatype']} {n} IPU {r['name']}", cfg, float(r["cycles"]), r["name"]))
    if not out:
        raise ConfigError(
            config_message(
                "cases", ", ".join(map(str, paths)), "have no multi-IPU stencil rows", "give models/stencil/cases/*.csv"
            )
        )
    return out


def _machine(base: Machine, x: np.ndarray, chips: int) -> Machine:
    sync, lat, msg = (float(v) for v in x * _SCALE)
    return replace(
        base, system=replace(base.system, global_sync_fixed_cycles=sync, link_latency_s=lat, link_message_bytes=msg)
    ).with_chips(chips)


def _predict(targets, plans, base, x) -> np.ndarray:
    out = []
    for (_label, cfg, _meas, q), plan in zip(targets, plans):
        m = _machine(base, x, cfg.ipus)
        c, B = plan.counts, plan.codelet.bytes_per_pixel
        flows = tuple(
            (a, b, float(px * B + m.system.link_message_bytes * c.flows_runs[(a, b)]))
            for (a, b), px in sorted(c.flows_px.items())
        )
        res = time_workload(StencilStep(replace(plan, flows=flows)), m, keep_timeline=False).result
        if q == "us":
            out.append(res.total_s / cfg.iterations * 1e6)
        else:
            lab = res.by_label()
            sets = 2 * cfg.iterations
            if q == "sync":
                out.append(
                    (lab["exchange"]["breakdown_s"]["sync"] + lab["globExchange"]["breakdown_s"]["sync"])
                    * m.clock_hz
                    / sets
                )
            else:
                b = lab["globExchange"]["breakdown_s"]
                out.append((b["links"] + b["exchange"]) * m.clock_hz / sets)
    return np.array(out)


def fit_stencil(paths, machine: str = "gc2x16") -> StencilFit:
    """Least-squares fit of :data:`FIT_NAMES` to the multi-IPU rows of ``paths``."""
    from scipy.optimize import least_squares  # scipy loads only where used (start-up time)

    base = load_machine(machine)
    targets = _targets(paths)
    plans = [plan_stencil(cfg, base.with_chips(cfg.ipus)) for _, cfg, _, _ in targets]
    meas = np.array([t[2] for t in targets])
    s = base.system
    x0 = np.array([s.global_sync_fixed_cycles, s.link_latency_s, s.link_message_bytes]) / _SCALE
    res = least_squares(
        lambda x: (_predict(targets, plans, base, x) - meas) / meas,
        x0,
        bounds=(_BOUNDS[0] / _SCALE, _BOUNDS[1] / _SCALE),
        diff_step=0.05,
        max_nfev=60,
    )
    p0, p1 = _predict(targets, plans, base, x0), _predict(targets, plans, base, res.x)
    vals = dict(zip(FIT_NAMES, (res.x * _SCALE).tolist()))
    vals["global_sync_fixed_cycles"] = int(round(vals["global_sync_fixed_cycles"]))
    return StencilFit(
        values=vals,
        start=dict(zip(FIT_NAMES, (x0 * _SCALE).tolist())),
        rows=tuple((t[0], t[2], float(a), float(b)) for t, a, b in zip(targets, p0, p1)),
        mean_abs_error_pct_start=float(np.mean(np.abs(p0 - meas) / meas) * 100),
        mean_abs_error_pct=float(np.mean(np.abs(p1 - meas) / meas) * 100),
    )
