"""Calibrate the SNN cost model against measured step times: ``tilesim validate`` and ``tilesim calibrate``.

A *case* is one measured training step (a row of a CSV like
``models/snn/calibration/nmnist_ipu_step_times.csv``): network, batch, time steps, caps,
optimizer, machine, neurons per tile, activity mode and the measured milliseconds per step.
``activity = fixed`` rows are timed on :func:`tilesim.models.snn.training.activity.fixed_activity` (no float
math); ``natural`` rows run one functional training step on the dataset-shaped generator of
:mod:`tilesim.models.snn.training.data` and re-time the recorded activity.

The fit keeps the model physical and small. Starting from the first-principles coefficients
(``models/snn/costs.toml``, version 0) it fits four numbers θ, with bounds from
ipu-hardware.md; the machine's sync, exchange-fixed cycles and 4 B/cycle exchange stay the
preset's::

    work_scale                 × every per-entry coefficient (compiled-C++ cycles per estimated
                                 instruction; relative costs of the kernels stay v0's)
    vertex_calls               worker cycles per vertex (argument unpacking, loop set-up)
    compute_set_cycles         tile cycles per compute set on every tile (control code, launch)
    host_copy_ns_per_byte      host time per byte of trainable state and direction of the
                                 per-epoch round trip of weights and optimizer slots (Keras's
                                 metric reset makes TensorFlow's executor move every variable
                                 to the host and back; :mod:`tilesim.models.snn.step.structure`): the one
                                 rate no source gives, bounded below by Graphcore's documented
                                 host-traffic rate (3 GB/s, one large buffer)

The program's compute cycles are affine in θ, C(θ) = K + Σ_i θ_i·G_i (the barrel rule is linear
in the work and the vertex term), so each case is built five times once and every evaluation of
the least-squares residual r_j(θ) = (t_j(θ) − t_j^meas)/t_j^meas only re-times (milliseconds).
Uncertainty: the fit is repeated leaving each case out; the spread of those fits gives the band
of :func:`prediction_band`.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import io
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from tilesim.engine.events import simulate
from tilesim.errors import ConfigError, TileSimError, config_message
from tilesim.io import atomic_write_bytes, dumps_json, read_text
from tilesim.machine.costs import CostModel, load_costs
from tilesim.machine.description import load_machine
from tilesim.models.cases import MAX_MEASURED, at_bound, correlations
from tilesim.models.snn.commands.hostmem import check_host_memory, estimate_host_memory
from tilesim.models.snn.commands.run import record_activity
from tilesim.models.snn.placement.fit import place
from tilesim.models.snn.step.counters import count_work
from tilesim.models.snn.step.structure import D2H_BYTES_PER_S, H2D_BYTES_PER_S
from tilesim.models.snn.step.timing import STEPS_PER_EXECUTION, default_costs, uncalibrated_costs
from tilesim.models.snn.step.workload import SnnStep
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.running.progress import progress_bar
from tilesim.workload import time_workload

__all__ = [
    "Case",
    "read_cases",
    "shipped_cases_path",
    "shipped_held_out_path",
    "case_setup",
    "CaseBasis",
    "fit",
    "FitResult",
    "predict_cases",
    "prediction_band",
    "costs_from_theta",
    "FIT_PARAMS",
    "loo_cost_models",
    "ParamIdentity",
    "identifiability",
    "format_identifiability",
    "architecture",
]

FIT_PARAMS = ("work_scale", "vertex_calls", "compute_set_cycles", "host_copy_ns_per_byte")
# physically plausible ranges (ipu-hardware.md §1.1, §2, §3.2; structure.py for the host copy)
BOUNDS = {
    "work_scale": (0.25, 4.0),  # v0 counts scalar instructions; float2 SIMD + dual issue: down to 1/4
    "vertex_calls": (10.0, 200.0),  # worker cycles of a vertex's set-up
    "compute_set_cycles": (0.0, 1000.0),  # tile cycles per compute set (sync is the machine's)
    # no faster than the documented host traffic (one large buffer); no slower than 20 MB/s
    "host_copy_ns_per_byte": (1e9 / min(D2H_BYTES_PER_S, H2D_BYTES_PER_S), 50.0),
}
THETA0 = (1.0, 40.0, 50.0, 1.0)
NOT_SCALED = {"vertex_calls", "compute_set_cycles", "host_copy_ns_per_byte"}

REQUIRED = (
    "case",
    "layers",
    "batch",
    "timesteps",
    "input_cap",
    "max_activity",
    "optimizer",
    "machine",
    "neurons_per_tile",
    "activity",
    "measured_ms_per_step",
)
OPTIONAL = {
    "dataset": "synthetic",
    "second_threshold": 0.9,
    "output_second_threshold": None,
    "chips": None,
    "rounding_ms": 0.0,
    "steps_per_execution": 52,
    "weight_mul": 2.0,
    "seed": 0,
    "use": "calibrate",
}
USES = ("calibrate", "check")
"""A row's ``use``: ``calibrate`` rows are fitted by ``tilesim calibrate``; ``check`` rows are held out
(timed and reported by ``tilesim validate``, never fitted)."""


@dataclass(frozen=True)
class Case:
    """One measured training step (a CSV row).

    A case is timed with its own settings, never with :class:`tilesim.models.snn.training.network.NetworkConfig`'s
    defaults: every network setting is a field here, a CSV column left empty takes the value of
    ``OPTIONAL`` (the authors' final benchmark runs: ϑ2 0.9 in every layer, weight_mul 2.0), and
    ϑ2 is constant (no schedule: a measured step is timed at the ϑ2 it ran with).
    """

    case: str
    layers: str
    batch: int
    timesteps: int
    input_cap: int
    max_activity: float
    optimizer: str
    machine: str
    neurons_per_tile: int
    activity: str
    measured_ms: float
    dataset: str = "synthetic"
    second_threshold: float = 0.9
    output_second_threshold: float | None = None
    chips: int | None = None
    rounding_ms: float = 0.0
    steps_per_execution: int = STEPS_PER_EXECUTION
    weight_mul: float = 2.0
    seed: int = 0
    use: str = "calibrate"

    def key(self) -> tuple:
        """Cases with equal keys time identically (fixed activity ignores ϑ2)."""
        d = dataclasses.asdict(self)
        for k in ("case", "measured_ms", "rounding_ms", "use"):
            d.pop(k)
        if self.activity == "fixed":
            d.pop("second_threshold")
            d.pop("output_second_threshold")
            d.pop("dataset")
            d.pop("weight_mul")
        return tuple(sorted(d.items()))


def shipped_cases_path() -> Path:
    """The 12 measured Bow steps shipped with the package (the calibration rows)."""
    return Path(str(resources.files("tilesim.models.snn") / "calibration" / "nmnist_ipu_step_times.csv"))


def shipped_held_out_path() -> Path:
    """The 24 measured Bow steps of the same log that are never fitted (``use = check``): the 3- and
    4-hidden-layer networks and the 5-layer one at ϑ2 0.95 / 0.98."""
    return Path(str(resources.files("tilesim.models.snn") / "calibration" / "nmnist_ipu_held_out.csv"))


def _convert(path, row_no, col, text, kind):
    fixes = {int: "give a whole number", float: "give a number"}
    try:
        if kind is int:
            v = float(text)
            if not v.is_integer():
                raise ValueError
            return int(v)
        if kind is float:
            v = float(text)
            if not math.isfinite(v):
                raise ValueError
            return v
        return str(text).strip()
    except (TypeError, ValueError):
        raise ConfigError(
            config_message(
                f"{path} row {row_no} column {col}", text, f"is not a valid {kind.__name__}", fixes.get(kind, "")
            )
        ) from None


_KINDS = {
    "batch": int,
    "timesteps": int,
    "input_cap": int,
    "neurons_per_tile": int,
    "chips": int,
    "steps_per_execution": int,
    "seed": int,
    "max_activity": float,
    "measured_ms_per_step": float,
    "second_threshold": float,
    "output_second_threshold": float,
    "rounding_ms": float,
    "weight_mul": float,
}


def read_cases(path=None) -> tuple:
    """Read a cases CSV (columns as in the shipped file; unknown extra columns are ignored).

    Raises
    ------
    ConfigError
        Missing file or required column, a bad value (naming row, column, value and fix).
    """
    p = Path(path) if path is not None else shipped_cases_path()
    text = read_text(p, "cases file", "give a CSV like models/snn/calibration/nmnist_ipu_step_times.csv")
    with io.StringIO(text, newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise ConfigError(
                config_message(
                    f"{p} header",
                    ",".join(header) or "(empty)",
                    f"missing required column {missing[0]!r}",
                    f"required: {', '.join(REQUIRED)}",
                )
            )
        out = []
        for i, raw in enumerate(reader, start=2):  # row 1 is the header
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k}
            vals = {}
            for col in REQUIRED + tuple(OPTIONAL):
                text = row.get(col, "")
                if text == "":
                    if col in REQUIRED:
                        raise ConfigError(
                            config_message(
                                f"{p} row {i} column {col}", text, "is empty", "every required column needs a value"
                            )
                        )
                    vals[col] = OPTIONAL[col]
                    continue
                vals[col] = _convert(p, i, col, text, _KINDS.get(col, str))
            for col, ok, limit in (
                ("activity", vals["activity"] in ("fixed", "natural"), "must be fixed or natural"),
                ("optimizer", vals["optimizer"] in ("adam", "sgd"), "must be adam or sgd"),
                ("use", vals["use"] in USES, f"must be one of {', '.join(USES)}"),
                (
                    "measured_ms_per_step",
                    0 < vals["measured_ms_per_step"] <= MAX_MEASURED,
                    f"must be in (0, {MAX_MEASURED:g}]",
                ),
                ("max_activity", 0 < vals["max_activity"] <= 1, "must be in (0, 1]"),
                ("batch", vals["batch"] >= 1, "must be >= 1"),
                ("timesteps", vals["timesteps"] >= 1, "must be >= 1"),
                ("neurons_per_tile", vals["neurons_per_tile"] >= 1, "must be >= 1"),
                ("steps_per_execution", vals["steps_per_execution"] >= 1, "must be >= 1"),
            ):
                if not ok:
                    raise ConfigError(config_message(f"{p} row {i} column {col}", row.get(col), limit))
            meas = vals.pop("measured_ms_per_step")
            out.append(Case(measured_ms=meas, **vals))
    if not out:
        raise ConfigError(config_message("cases file", str(p), "has no rows", "add at least one measured case"))
    names = [c.case for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(config_message(f"{p} column case", dup[0], "appears twice", "give every row its own name"))
    return tuple(out)


def case_setup(case: Case, where: str = "case"):
    """``(config, machine, placement)`` of a case; errors name the case."""
    from tilesim.models.snn.training.network import (
        NetworkConfig,  # Numba kernels load only when they run (start-up time)
    )

    try:
        config = NetworkConfig(
            layers=case.layers,
            batch=case.batch,
            timesteps=case.timesteps,
            max_activity=case.max_activity,
            input_cap=case.input_cap,
            second_threshold=case.second_threshold,
            output_second_threshold=case.output_second_threshold,
            activity=case.activity,
            optimizer=case.optimizer,
            seed=case.seed,
            weight_mul=case.weight_mul,
            second_threshold_schedule=None,
        )  # a measured case: its own constant ϑ2
        machine = load_machine(case.machine, case.chips)
        check_host_memory(estimate_host_memory(config, machine), what="its run")  # as `run` refuses
        placement, _, _ = place(config, machine, case.neurons_per_tile, "contiguous", "report")
    except TileSimError as exc:
        raise type(exc)(f"{where} {case.case!r}: {exc}") from None
    return config, machine, placement


def _natural_activity(case: Case, config, placement):
    """The activity of one functional training step on the case's dataset-shaped generator."""

    return record_activity(config, placement, case.dataset)


def costs_from_theta(theta, base: CostModel, name: str = "snn", version: str = "1", provenance=None) -> CostModel:
    """The cost model with fit parameters ``theta`` (in :data:`FIT_PARAMS` order) applied to ``base``."""
    ws, vc, csc, hs = (float(x) for x in theta)
    coef = {k: (float(v) if k in NOT_SCALED else float(v) * ws) for k, v in base.coefficients.items()}
    coef.update(vertex_calls=vc, compute_set_cycles=csc, host_copy_ns_per_byte=hs)
    return CostModel(name, version, coef, dict(provenance or {}))


class CaseBasis:
    """The step program of one setting, decomposed as C(θ) = K + Σ_i θ_i·G_i (see module doc).

    ``program(theta)`` / ``seconds(theta)`` re-time any θ without rebuilding."""

    def __init__(
        self,
        config,
        placement,
        machine,
        activity=None,
        base: CostModel | None = None,
        steps_per_execution: int = STEPS_PER_EXECUTION,
    ):

        self.base = base or uncalibrated_costs()
        self.machine = machine
        act = fixed_activity(config) if activity is None else activity
        counters = count_work(act, placement, per_step=True)

        def build(theta):  # the dense form: the decomposition reads its [S, tiles] compute
            return SnnStep(
                config, placement, counters, costs_from_theta(theta, self.base), steps_per_execution, form="dense"
            ).program(machine)

        p0 = build((0.0, 0.0, 0.0, 0.0))
        self._p0 = p0
        self._K = p0.compute_cycles.astype(np.float64)
        self._G = []
        for i in range(len(FIT_PARAMS)):
            e = [0.0] * len(FIT_PARAMS)
            e[i] = 1.0
            self._G.append((build(e).compute_cycles - p0.compute_cycles).astype(np.float32))
        self._rest = None
        if machine.chips == 1 and p0.flow_step.size == 0:
            total = simulate(p0, machine, keep_timeline=False).total_s * machine.clock_hz
            self._rest = total - float(p0.compute_cycles.astype(np.float64).max(axis=1).sum())

    def _compute(self, theta) -> np.ndarray:
        comp = self._K.copy()
        for t, g in zip(theta, self._G):
            if t:
                comp += float(t) * g
        return np.maximum(comp, 0.0)

    def program(self, theta):
        return dataclasses.replace(self._p0, compute_cycles=self._compute(theta).astype(np.float32))

    def seconds(self, theta) -> float:
        """Predicted step time. One chip without link flows: the engine's timeline is the sum of
        (max-tile compute + sync + exchange) over supersteps plus host time, so only the compute
        maxima change with θ; otherwise the program is re-simulated."""

        if self._rest is None:
            return float(simulate(self.program(theta), self.machine, keep_timeline=False).total_s)
        comp = self._compute(theta).astype(np.float32).astype(np.float64)
        return (float(comp.max(axis=1).sum()) + self._rest) / self.machine.clock_hz


def _bases(cases, base: CostModel, progress=None) -> dict:
    """One :class:`CaseBasis` per distinct setting (fixed-activity ϑ2 variants share one)."""
    out: dict = {}
    for c in cases:
        k = c.key()
        if k in out:
            continue
        if progress:
            progress(c)
        config, machine, placement = case_setup(c)
        act = None if c.activity == "fixed" else _natural_activity(c, config, placement)
        out[k] = CaseBasis(config, placement, machine, act, base, c.steps_per_execution)
    return out


@dataclass(frozen=True)
class FitResult:
    """A least-squares fit: ``theta`` (FIT_PARAMS order), per-case predictions, LOO refits."""

    theta: tuple
    cases: tuple
    predicted_s: tuple
    loo_theta: tuple  # one θ per left-out case (same order as cases)
    loo_predicted_s: tuple  # [i][j]: prediction of case j by the fit without case i
    base: CostModel
    identifiability: tuple = ()  # one ParamIdentity per FIT_PARAMS entry (with loo)

    @property
    def errors_pct(self) -> np.ndarray:
        m = np.array([c.measured_ms for c in self.cases]) * 1e-3
        return 100.0 * (np.array(self.predicted_s) - m) / m

    @property
    def mean_abs_error_pct(self) -> float:
        return float(np.mean(np.abs(self.errors_pct)))

    def loo_table(self) -> list:
        """Per case: the prediction of the fit that left it out (its LOO error), and the spread
        of all LOO fits' predictions of it."""
        P = np.array(self.loo_predicted_s)
        rows = []
        for j, c in enumerate(self.cases):
            m = c.measured_ms * 1e-3
            rows.append(
                {
                    "case": c.case,
                    "loo_predicted_ms": P[j, j] * 1e3,
                    "loo_error_pct": 100.0 * (P[j, j] - m) / m,
                    "band_lo_ms": min(P[:, j].min(), self.predicted_s[j]) * 1e3,
                    "band_hi_ms": max(P[:, j].max(), self.predicted_s[j]) * 1e3,
                }
            )
        return rows

    def cost_model(self, source: str = "") -> CostModel:
        today = _dt.date.today().isoformat()
        loo = [
            {
                "left_out": c.case,
                **dict(zip(FIT_PARAMS, (float(x) for x in th))),
                "coefficients": dict(costs_from_theta(th, self.base).coefficients),
            }
            for c, th in zip(self.cases, self.loo_theta)
        ]
        prov = {
            "method": "scipy.optimize.least_squares on relative step-time residuals, bounds from ipu-hardware.md",
            "date": today,
            "source": source,
            "base": f"{self.base.name} v{self.base.version}",
            "base_coefficients": dict(self.base.coefficients),
            "fit": dict(zip(FIT_PARAMS, (float(x) for x in self.theta))),
            "bounds": {k: list(v) for k, v in BOUNDS.items()},
            "rows_used": [c.case for c in self.cases],
            "residual_pct": {c.case: round(float(e), 3) for c, e in zip(self.cases, self.errors_pct)},
            "predicted_ms": {c.case: round(p * 1e3, 4) for c, p in zip(self.cases, self.predicted_s)},
            "measured_ms": {c.case: c.measured_ms for c in self.cases},
            "mean_abs_error_pct": round(self.mean_abs_error_pct, 3),
            "loo": loo,
        }
        return costs_from_theta(self.theta, self.base, "snn-calibrated", "1", prov)


def _solve(idx, cases, bases, theta0):
    from scipy.optimize import least_squares  # scipy loads only where used (start-up time)

    lo = np.array([BOUNDS[k][0] for k in FIT_PARAMS])
    hi = np.array([BOUNDS[k][1] for k in FIT_PARAMS])
    scale = hi - lo

    def resid(u):
        th = lo + u * scale
        return np.array(
            [(bases[cases[j].key()].seconds(th) * 1e3 - cases[j].measured_ms) / cases[j].measured_ms for j in idx]
        )

    u0 = np.clip((np.asarray(theta0, float) - lo) / scale, 0.0, 1.0)
    r = least_squares(resid, u0, bounds=(0.0, 1.0), diff_step=1e-3, x_scale="jac", max_nfev=200)
    return tuple(float(x) for x in lo + r.x * scale)


def fit(cases, base: CostModel | None = None, loo: bool = True, progress=None) -> FitResult:
    """Least-squares fit of :data:`FIT_PARAMS` to ``cases``; with ``loo`` also one refit per left-out case."""

    base = base or uncalibrated_costs()
    cases = tuple(cases)
    if not cases:
        raise ConfigError(config_message("cases", 0, "needs at least one row"))
    bases = _bases(cases, base, progress)
    allidx = list(range(len(cases)))
    theta = _solve(allidx, cases, bases, THETA0)
    pred = tuple(bases[c.key()].seconds(theta) for c in cases)
    loo_th, loo_pred = [], []
    ident: tuple = ()
    if loo and len(cases) > 1:
        for i in allidx:
            th = _solve([j for j in allidx if j != i], cases, bases, theta)
            loo_th.append(th)
            loo_pred.append(tuple(bases[c.key()].seconds(th) for c in cases))
        ident = identifiability(cases, bases, theta, loo_th)
    return FitResult(theta, cases, pred, tuple(loo_th), tuple(loo_pred), base, ident)


# ---- identifiability: what the data pin down (issue 42) -------------------------------------------
@dataclass(frozen=True)
class ParamIdentity:
    """How well the cases identify one fitted parameter: its ``value`` and ``bounds``; ``at_bound``
    ("lower", "upper" or "": the fit pushed it there, so the data do not estimate it);
    ``loo_range`` over the leave-one-case-out refits; ``by_architecture``: its value refitted without
    each architecture (group of cases with the same layers) and ``architecture_range`` over those;
    ``correlation``: with each other parameter, from the fit's Jacobian (JᵀJ pseudo-inverse at θ)."""

    name: str
    value: float
    bounds: tuple
    at_bound: str
    loo_range: tuple
    by_architecture: dict
    architecture_range: tuple
    correlation: dict

    def to_dict(self) -> dict:
        """The ``--json`` form."""
        return dataclasses.asdict(self) | {"bounds": list(self.bounds)}


def architecture(case: Case) -> str:
    """The group a case belongs to for leave-one-architecture-out: its hidden layers and sizes."""
    return f"L{len(case.layers.split('-')) - 2} ({case.layers})"


def _jacobian(idx, cases, bases, theta) -> np.ndarray:
    """d r_j / d θ_i of the relative residuals at ``theta`` (one-sided steps of 1e-3 of each
    parameter's range, away from the nearer bound), in the parameters' own units."""
    th = np.asarray(theta, float)
    r0 = np.array([bases[cases[j].key()].seconds(th) for j in idx])
    J = np.zeros((len(idx), len(th)))
    for i, k in enumerate(FIT_PARAMS):
        lo, hi = BOUNDS[k]
        h = 1e-3 * (hi - lo) * (1.0 if th[i] - lo <= hi - th[i] else -1.0)
        t2 = th.copy()
        t2[i] += h
        r2 = np.array([bases[cases[j].key()].seconds(t2) for j in idx])
        J[:, i] = (r2 - r0) / h / np.array([cases[j].measured_ms * 1e-3 for j in idx])
    return J


def identifiability(cases, bases: dict, theta, loo_theta) -> tuple:
    """One :class:`ParamIdentity` per :data:`FIT_PARAMS` entry: the at-bound flag, the
    leave-one-case-out range (``loo_theta``), a refit without each architecture, and the
    correlations from the Jacobian of the fit on every case."""
    cases = tuple(cases)
    allidx = list(range(len(cases)))
    groups: dict = {}
    for j, c in enumerate(cases):
        groups.setdefault(architecture(c), []).append(j)
    by_group = {}
    if len(groups) > 1:
        for g, members in groups.items():
            by_group[g] = _solve([j for j in allidx if j not in members], cases, bases, theta)
    corr = correlations(_jacobian(allidx, cases, bases, theta))
    out = []
    for i, k in enumerate(FIT_PARAMS):
        lo, hi = BOUNDS[k]
        flag = at_bound(theta[i], lo, hi)
        loo = [th[i] for th in loo_theta] or [theta[i]]
        arch = {g: float(th[i]) for g, th in by_group.items()}
        arch_vals = list(arch.values()) or [theta[i]]
        out.append(
            ParamIdentity(
                k,
                float(theta[i]),
                (float(lo), float(hi)),
                flag,
                (float(min(loo)), float(max(loo))),
                arch,
                (float(min(arch_vals)), float(max(arch_vals))),
                {o: float(corr[i, m]) for m, o in enumerate(FIT_PARAMS) if m != i},
            )
        )
    return tuple(out)


def format_identifiability(ident: tuple) -> str:
    """The identifiability report as text: per parameter its value, bounds and at-bound flag, its
    leave-one-case-out and leave-one-architecture-out ranges and its correlations."""
    if not ident:
        return "identifiability: needs the leave-one-out refits (drop --no-loo)"
    lines = ["identifiability (what the cases pin down):"]
    for p in ident:
        flag = f"  AT ITS {p.at_bound.upper()} BOUND: not identified by these cases" if p.at_bound else ""
        lines.append(f"  {p.name:<24} {p.value:.4g}   bounds {p.bounds[0]:g}-{p.bounds[1]:g}{flag}")
        lines.append(f"    leave one case out          {p.loo_range[0]:.4g} - {p.loo_range[1]:.4g}")
        arch = ", ".join(f"without {g}: {v:.4g}" for g, v in p.by_architecture.items())
        lines.append(
            f"    leave one architecture out  {p.architecture_range[0]:.4g} - {p.architecture_range[1]:.4g}"
            + (f"  ({arch})" if arch else "")
        )
        corr = ", ".join(f"{o} {'n/a' if math.isnan(r) else f'{r:+.2f}'}" for o, r in p.correlation.items())
        lines.append(f"    correlation                 {corr}")
    return "\n".join(lines)


def predict_cases(cases, costs: CostModel | None = None, progress=None) -> list:
    """``(mid_s, lo_s, hi_s)`` per case under ``costs`` (default: the shipped model); the band
    comes from the model's leave-one-out sets (lo = mid = hi without them)."""
    out, memo = [], {}
    for c in cases:
        if progress:
            progress(c)
        k = c.key()
        if k not in memo:
            config, machine, placement = case_setup(c)
            act = None if c.activity == "fixed" else _natural_activity(c, config, placement)
            lo, mid, hi = prediction_band(config, placement, machine, act, costs, c.steps_per_execution)
            memo[k] = (mid, lo, hi)
        out.append(memo[k])
    return out


def _retime_spe(activity, config, placement, machine, costs, spe):

    act = fixed_activity(config) if activity is None else activity
    counters = count_work(act, placement, per_step=True)
    step = SnnStep(config, placement, counters, costs, spe, form="dense")
    return float(time_workload(step, machine, keep_timeline=False).step_s)


def loo_cost_models(costs: CostModel) -> list:
    """The leave-one-out refits stored in ``costs``'s provenance, as cost models (none if it has none)."""
    return _loo_sets(costs)


def _loo_sets(costs: CostModel) -> list:
    sets = []
    for i, entry in enumerate(costs.provenance.get("loo", []) or []):
        if isinstance(entry, dict) and isinstance(entry.get("coefficients"), dict):
            sets.append(CostModel(f"{costs.name}-loo{i}", costs.version, entry["coefficients"]))
    return sets


def prediction_band(
    config,
    placement,
    machine,
    activity=None,
    costs: CostModel | None = None,
    steps_per_execution: int = STEPS_PER_EXECUTION,
) -> tuple:
    """``(lo_s, mid_s, hi_s)``: the step time under ``costs`` (default: the shipped calibrated
    model) and the range over its leave-one-out coefficient sets (lo ≤ mid ≤ hi).

    ``activity`` None times a fixed-activity step. A model without LOO sets gives lo = mid = hi.
    """

    costs = costs or default_costs()
    fitp = costs.provenance.get("fit") if isinstance(costs.provenance, dict) else None
    base_coef = costs.provenance.get("base_coefficients") if isinstance(costs.provenance, dict) else None
    sets = costs.provenance.get("loo", []) or []
    if fitp and base_coef and sets and all(all(k in e for k in FIT_PARAMS) for e in sets):
        basis = CaseBasis(config, placement, machine, activity, CostModel("base", "0", base_coef), steps_per_execution)
        mid = basis.seconds([fitp[k] for k in FIT_PARAMS])
        others = [basis.seconds([e[k] for k in FIT_PARAMS]) for e in sets]
    else:
        mid = _retime_spe(activity, config, placement, machine, costs, steps_per_execution)
        others = [_retime_spe(activity, config, placement, machine, cm, steps_per_execution) for cm in _loo_sets(costs)]
    vals = [mid] + others
    return (min(vals), mid, max(vals))


# ---- command line ---------------------------------------------------------------------------
def _load_costs_arg(path):
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            config_message("--costs", str(path), "no such file", "give a TOML written by `tilesim calibrate`")
        )
    return load_costs(p)


def _bar(total, desc, args):
    """A progress bar on stderr, off with --quiet or --json (stdout stays clean)."""
    return progress_bar(
        total, desc, " cases", quiet=bool(getattr(args, "quiet", False) or getattr(args, "json", False))
    )


def cmd_calibrate(args) -> int:
    """Fit the SNN cost coefficients to ``args.cases`` and write them to ``args.out`` (a versioned
    TOML with the rows, residuals and leave-one-out refits); returns the exit status (0)."""
    import tomli_w  # tomli_w is needed only when writing TOML

    cases = tuple(c for c in read_cases(args.cases) if c.use == "calibrate")
    if not cases:
        raise ConfigError(
            config_message("cases", str(args.cases), "has no row with use = calibrate", "mark the rows to fit")
        )
    with _bar(None, "calibrate: timing cases", args) as bar:
        res = fit(cases, loo=not args.no_loo, progress=lambda c: bar.update(1))
    cm = res.cost_model(source=str(args.cases))
    header = (
        "# SNN cost model calibrated by `tilesim calibrate` (models/snn/calibration/calibrate.py).\n"
        "# coefficients: worker cycles per counter unit (compute_set_cycles: tile cycles per compute\n"
        "# set; host_copy_ns_per_byte: host time per byte and direction of the per-epoch round trip of\n"
        "# weights and optimizer slots, models/snn/step/structure.py).\n"
        "# provenance: fitted parameters, rows, residuals, leave-one-out coefficient sets.\n"
    )
    body = tomli_w.dumps(
        {
            "name": cm.name,
            "version": cm.version,
            "coefficients": dict(cm.coefficients),
            "provenance": dict(cm.provenance),
        }
    )
    atomic_write_bytes(args.out, (header + body).encode())
    loo = res.loo_table() if res.loo_theta else []
    if args.json:
        print(
            dumps_json(
                {
                    "out": str(args.out),
                    "fit": dict(zip(FIT_PARAMS, res.theta)),
                    "mean_abs_error_pct": res.mean_abs_error_pct,
                    "rows": [
                        {"case": c.case, "predicted_ms": p * 1e3, "measured_ms": c.measured_ms, "error_pct": float(e)}
                        for c, p, e in zip(res.cases, res.predicted_s, res.errors_pct)
                    ],
                    "loo": loo,
                    "identifiability": [p.to_dict() for p in res.identifiability],
                },
                indent=2,
            )
        )
        return 0
    print(f"fitted {len(cases)} cases -> {args.out}")
    for k, v in zip(FIT_PARAMS, res.theta):
        print(f"  {k:<26} {v:10.3f}   bounds {BOUNDS[k]}")
    for c, p, e in zip(res.cases, res.predicted_s, res.errors_pct):
        print(f"  {c.case:<24} predicted {p * 1e3:7.3f} ms  measured {c.measured_ms:6.2f} ms  {e:+6.1f} %")
    print(f"mean |error| {res.mean_abs_error_pct:.1f} %")
    for r in loo:
        print(
            f"  LOO {r['case']:<20} {r['loo_predicted_ms']:7.3f} ms ({r['loo_error_pct']:+.1f} %)  "
            f"band {r['band_lo_ms']:.2f}-{r['band_hi_ms']:.2f} ms"
        )
    print(format_identifiability(res.identifiability))
    return 0
