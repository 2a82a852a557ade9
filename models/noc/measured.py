"""Measured NoC kernels: read a cases CSV, predict every row, fit the NoC constants and say what the
rows identify.

Columns (one row per measured kernel; Tenstorrent's data-movement suite, users can bring their own)::

    workload=noc, case, machine, mechanism (unicast|multicast|multicast_linked),
    pattern (one_to_one_write|one_from_one_read|one_to_all), destinations, transactions,
    transaction_bytes, same_axis (0|1), loopback (0|1), measured_cycles, source

and optionally ``use`` (``calibrate``: fitted by ``tilesim calibrate``; anything else: checked only).
``measured_cycles`` is the whole kernel (every transaction, its issue and the final barrier).

How a row becomes :class:`tilesim.models.noc.model.Transfer` s (the file gives no coordinates):
``one_from_one_read`` is a unicast read; ``one_to_one_write`` a unicast write; ``one_to_all`` with a
multicast mechanism one multicast to ``destinations`` cores, with ``unicast`` one unicast stream per
destination. Round trips: a unicast row's from ``same_axis`` (one ring or both); a multicast to a
square rectangle of 4 or more cores (the suite's 2 x 2 and 3 x 3) has receivers off the sender's row
and column, so both rings whatever ``same_axis`` says (in the suite it describes the rectangle's
first core); a multicast to 2 or 3 cores (a line) takes ``same_axis``. The constants are Wormhole's:
a row on another machine is not predicted (it says why).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.models.cases import Case, CaseFit, at_bound, correlations, number, predict, read_rows, validate_rows
from tilesim.models.noc.costs import FITTED, NocCosts, load_costs
from tilesim.models.noc.model import MAX_BYTES, MAX_DESTINATIONS, MAX_TRANSACTIONS, MECHANISMS, Transfer, kernel_cycles

__all__ = [
    "COLUMNS",
    "PATTERNS",
    "NocRow",
    "read_cases",
    "predict_cycles",
    "validate_noc",
    "fit_noc",
    "NocFit",
    "ParamIdentity",
    "format_identifiability",
    "shipped_noc_cases",
    "BOUNDS",
]

COLUMNS = (
    "workload", "case", "machine", "mechanism", "pattern", "destinations", "transactions", "transaction_bytes",
    "same_axis", "loopback", "measured_cycles", "source",
)  # fmt: skip
PATTERNS = ("one_to_one_write", "one_from_one_read", "one_to_all")
MACHINE_PREFIX = "wormhole"
"""The machines the shipped constants describe (their NoC: 32 B flits, 8 KiB packets, a 10 x 12 torus)."""

BOUNDS = {
    "issue_cycles": (1.0, 500.0),
    "read_issue_cycles": (1.0, 500.0),
    "write_bytes_per_cycle": (1.0, 64.0),
    "read_bytes_per_cycle": (1.0, 64.0),
    "latency_cycles": (0.0, 2000.0),
    "hop_cycles": (0.0, 50.0),
    "mcast_path_cycles": (0.0, 2000.0),
    "mcast_dest_cycles": (0.0, 200.0),
    "mcast_exclude_src_cycles": (0.0, 2000.0),
}
"""The fit's range of every fitted constant (a value at a bound is reported as not identified)."""


def shipped_noc_cases() -> list[Path]:
    """The shipped measured-NoC files (``models/noc/cases/*.csv``)."""
    return sorted((Path(__file__).parent / "cases").glob("*.csv"))


@dataclass(frozen=True)
class NocRow:
    """One measured kernel: the transfers its data mover issues before its one barrier, and the group
    it is reported in (mechanism, pattern, transactions, axis, loopback)."""

    transfers: tuple[Transfer, ...]
    group: str


def _flag(r: dict, col: str, case: str) -> bool:
    v = number(r, col, case, integer=True)
    if v not in (0, 1):
        raise ConfigError(config_message(f"{case}: {col}", v, "must be 0 or 1", "fix the row"))
    return bool(v)


def _count(r: dict, col: str, case: str, high: int) -> int:
    v = number(r, col, case, integer=True)
    if v < 1:
        raise ConfigError(config_message(f"{case}: {col}", v, "must be a whole number >= 1", "fix the row"))
    if v > high:
        raise ConfigError(config_message(f"{case}: {col}", float(v), f"must be <= {high}", "fix the row"))
    return int(v)


def _square(d: int) -> bool:
    s = math.isqrt(d)
    return d >= 4 and s * s == d


def _spec(r: dict, case: str) -> NocRow:
    mech = (r.get("mechanism") or "").strip()
    if mech not in MECHANISMS:
        raise ConfigError(config_message(f"{case}: mechanism", mech, f"must be one of {', '.join(MECHANISMS)}", "fix"))
    pattern = (r.get("pattern") or "").strip()
    if pattern not in PATTERNS:
        raise ConfigError(config_message(f"{case}: pattern", pattern, f"must be one of {', '.join(PATTERNS)}", "fix"))
    d = _count(r, "destinations", case, MAX_DESTINATIONS)
    n = _count(r, "transactions", case, MAX_TRANSACTIONS)
    b = _count(r, "transaction_bytes", case, MAX_BYTES)
    same_axis, loopback = _flag(r, "same_axis", case), _flag(r, "loopback", case)
    kind = {"one_to_one_write": "", "one_from_one_read": " read", "one_to_all": ""}[pattern]
    group = f"{mech}{kind} d{d} n{n} ax{int(same_axis)} lb{int(loopback)}"
    if pattern != "one_to_all" and (mech != "unicast" or d != 1):
        raise ConfigError(
            config_message(
                f"{case}: mechanism/destinations",
                f"{mech}/{d}",
                f"{pattern} is one unicast to (or from) one core",
                "give mechanism unicast, destinations 1",
            )
        )
    if loopback and mech == "unicast":
        raise ConfigError(config_message(f"{case}: loopback", 1, "applies to a multicast only", "give 0"))
    if mech == "unicast":
        t = Transfer(b, n, 1, "unicast", read=pattern == "one_from_one_read", same_axis=same_axis)
        return NocRow((t,) * d, group)
    off_axis = _square(d) or not same_axis
    return NocRow((Transfer(b, n, d, mech, same_axis=not off_axis, loopback=loopback),), group)


def read_cases(path) -> list[Case]:
    """Every row of a NoC cases CSV (a missing column raises :class:`ConfigError`; a bad value makes
    that row's ``problem``, naming the case and the column)."""
    return read_rows(path, COLUMNS, "measured_cycles", _spec)


def _time(costs: NocCosts):
    def one(spec: NocRow, machine) -> float:
        if not machine.name.startswith(MACHINE_PREFIX):
            raise ConfigError(
                config_message(
                    "machine",
                    machine.name,
                    "the NoC constants are Wormhole's (fitted on Wormhole rows only)",
                    "give a wormhole-* machine; Blackhole's NoC (64 B flits, 16 KiB packets, 1.35 GHz) is not fitted",
                )
            )
        return kernel_cycles(costs, spec.transfers)

    return one


def predict_cycles(cases, costs: NocCosts) -> list:
    """Predicted kernel cycles of each case, or why it cannot be predicted."""
    return predict(cases, _time(costs))


def validate_noc(path, costs: NocCosts | None = None) -> list[dict]:
    """``tilesim validate`` rows of a NoC cases CSV (predicted and measured kernel cycles), each with
    its ``group``."""
    cases = read_cases(path)
    rows = validate_rows("noc", "cycles", cases, predict_cycles(cases, costs or load_costs()))
    for r, c in zip(rows, cases):
        r["group"] = c.spec.group if c.spec is not None else None
    return rows


# ---- the fit and what it identifies ---------------------------------------------------------------


@dataclass(frozen=True)
class ParamIdentity:
    """How well the rows identify one fitted constant: its ``value`` and ``bounds``, ``at_bound``
    ("lower"/"upper"/"": at a bound the rows do not estimate it), its range over the
    leave-one-case-out refits (``loo_range``) and over the leave-one-group-out refits
    (``group_range``; ``by_group``: the value without each group), and its correlation with every other
    constant (from the Jacobian at the fit: pinv(JᵀJ) normalised)."""

    name: str
    value: float
    bounds: tuple
    at_bound: str
    loo_range: tuple
    group_range: tuple
    by_group: dict
    correlation: dict

    def to_dict(self) -> dict:
        """The ``--json`` form."""
        return asdict(self) | {"bounds": list(self.bounds), "loo_range": list(self.loo_range)}


@dataclass(frozen=True)
class NocFit:
    """A NoC fit: ``fit`` (the tables for the costs file, the mean |error| before and after),
    ``costs`` (the fitted constants), ``identity`` (one :class:`ParamIdentity` per fitted constant;
    empty without the leave-one-out refits)."""

    fit: CaseFit
    costs: NocCosts
    identity: tuple


def _with(base: NocCosts, x) -> NocCosts:
    return replace(base, **{k: float(v) for k, v in zip(FITTED, x)})


def _solve(cases, base: NocCosts, x0):
    from scipy.optimize import least_squares  # scipy is needed only for a fit

    meas = np.array([c.measured for c in cases])
    lo = np.array([BOUNDS[k][0] for k in FITTED])
    hi = np.array([BOUNDS[k][1] for k in FITTED])

    def residual(x):
        c = _with(base, x)
        return np.array([kernel_cycles(c, k.spec.transfers) for k in cases]) / meas - 1.0

    x0 = np.clip(np.asarray(x0, float), lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
    sol = least_squares(residual, x0, bounds=(lo, hi), x_scale="jac")
    return sol, residual


def fit_noc(paths, loo: bool = True, base: NocCosts | None = None) -> NocFit:
    """Least squares of the :data:`~tilesim.models.noc.costs.FITTED` constants on the relative
    errors of the rows marked ``use = calibrate`` (Wormhole rows only), from the shipped values; with
    ``loo`` the leave-one-case-out and leave-one-group-out refits and the correlations (the
    identifiability report). The fixed constants (packet size, torus) are kept."""
    base = base or load_costs()
    cases = [c for p in paths for c in read_cases(p)]
    fitted = [
        c for c in cases if c.calibrate and not c.problem and c.machine.startswith(MACHINE_PREFIX)
    ]  # the constants are one machine's
    if not fitted:
        raise ConfigError(
            config_message("cases", len(cases), "no Wormhole row with use = calibrate", "mark the rows to fit")
        )
    x0 = [getattr(base, k) for k in FITTED]
    sol, residual = _solve(fitted, base, x0)
    costs = _with(base, sol.x)
    start = float(np.mean(np.abs(residual(np.asarray(x0, float)))) * 100)
    after = float(np.mean(np.abs(sol.fun)) * 100)
    table = {k: (int(v) if k in ("max_packet_bytes", "noc_cols", "noc_rows") else round(float(v), 4))
             for k, v in asdict(costs).items()}  # fmt: skip
    fit = CaseFit({"noc": table}, start, after, len(fitted))
    identity: tuple = ()
    if loo and len(fitted) > 1:
        identity = _identify(fitted, base, sol)
    return NocFit(fit, costs, identity)


def _identify(fitted, base: NocCosts, sol) -> tuple:
    loo_x = [_solve(fitted[:i] + fitted[i + 1 :], base, sol.x)[0].x for i in range(len(fitted))]
    groups: dict = {}
    for c in fitted:
        groups.setdefault(c.spec.group, []).append(c)
    by_group = {}
    if len(groups) > 1:
        for g in groups:
            by_group[g] = _solve([c for c in fitted if c.spec.group != g], base, sol.x)[0].x
    corr = correlations(sol.jac)
    out = []
    for i, k in enumerate(FITTED):
        lo, hi = BOUNDS[k]
        v = float(sol.x[i])
        flag = at_bound(v, lo, hi)
        loo_vals = [float(x[i]) for x in loo_x]
        gvals = {g: float(x[i]) for g, x in by_group.items()}
        gv = list(gvals.values()) or [v]
        out.append(
            ParamIdentity(
                k,
                v,
                (lo, hi),
                flag,
                (min(loo_vals), max(loo_vals)),
                (min(gv), max(gv)),
                gvals,
                {o: float(corr[i, m]) for m, o in enumerate(FITTED) if m != i},
            )
        )
    return tuple(out)


def format_identifiability(identity: tuple, strong: float = 0.8) -> str:
    """The identifiability report as text: per constant its value, bounds and at-bound flag, its
    leave-one-case-out and leave-one-group-out ranges (the group whose absence moves it most), and
    its correlations of magnitude ``strong`` or more (the rest are weaker)."""
    if not identity:
        return "identifiability: needs the leave-one-out refits (drop --no-loo)"
    lines = ["identifiability (what the rows pin down):"]
    for p in identity:
        flag = f"  AT ITS {p.at_bound.upper()} BOUND: not identified by these rows" if p.at_bound else ""
        lines.append(f"  {p.name:<26} {p.value:.4g}   bounds {p.bounds[0]:g}-{p.bounds[1]:g}{flag}")
        lines.append(f"    leave one case out   {p.loo_range[0]:.4g} - {p.loo_range[1]:.4g}")
        if p.by_group:
            worst = max(p.by_group, key=lambda g: abs(p.by_group[g] - p.value))
            lines.append(
                f"    leave one group out  {p.group_range[0]:.4g} - {p.group_range[1]:.4g}"
                f"  (most without {worst}: {p.by_group[worst]:.4g})"
            )
        big = [(o, r) for o, r in p.correlation.items() if not math.isnan(r) and abs(r) >= strong]
        corr = ", ".join(f"{o} {r:+.2f}" for o, r in big) or f"none of |r| >= {strong:g}"
        lines.append(f"    correlation          {corr}")
    return "\n".join(lines)
