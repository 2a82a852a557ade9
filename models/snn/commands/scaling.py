"""Weak- and strong-scaling efficiency of the SNN training step over 1 → N chips (``tilesim scaling``).

A *recipe* (:class:`ScalingRecipe`) is the authors' ``multi_neuron`` network (snn-on-ipu.md §4.4;
``experiments/s5_s6_weak_scaling.py``): per chip ``1471·npt`` neurons in ``3·npt/2`` hidden
layers of whole tiles, the block repeated on every chip, the last chip's block shrunk by the
output layer; T = 10, SGD, ϑ2 0.9, two device executions of 500 steps per epoch
(:data:`PAPER_STEPS_PER_EXECUTION`, :data:`PAPER_STRUCTURE`). Every point is timed at fixed activity
(every list at its cap) by the step model without training (natural activity:
``experiments/s5_s6_natural.py``).

Weak scaling: the network grows with the chips at ``npt`` neurons per tile; efficiency
E(C) = throughput(C) / (C · throughput(1)), throughput = samples/s × neurons.
Strong scaling: the network of the largest chip count, on C chips at ``⌈npt·C_max/C⌉`` neurons
per tile (or the next count at which its layers place in whole-layer blocks);
E(C) = t(C_1)·C_1 / (t(C)·C), C_1 the smallest count.

Each point carries the step's split (compute, sync, exchange, links, host) and the *structural
band*: for each assumption of :class:`tilesim.models.snn.step.structure.StepStructure` switched the other way,
the efficiency it would give. The S6 table (:func:`sensitivity_table`) goes further: every combination
of the unknowns (2^k, :func:`combinations`), under the fit and its leave-one-out refits, with a verdict
per half of S6 that is one of :data:`VERDICTS` — the model reproduces a claim or does not; with no
multi-IPU measurement it refutes nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from tilesim.errors import MappingError, require
from tilesim.machine.description import load_machine
from tilesim.models.snn.placement.fit import place
from tilesim.models.snn.step.counters import count_work
from tilesim.models.snn.step.structure import HOST_SHARED, SYNC_SCOPES, StepStructure, flipped
from tilesim.models.snn.step.workload import SnnStep
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.workload import time_workload

__all__ = [
    "ScalingRecipe",
    "ScalingPoint",
    "ScalingStudy",
    "ASSUMPTIONS",
    "recipe_layers",
    "scaling_study",
    "format_table",
    "PAPER_STEPS_PER_EXECUTION",
    "PAPER_STRUCTURE",
    "SensitivityRow",
    "Sensitivity",
    "sensitivity_table",
    "format_sensitivity",
    "combinations",
    "flips_of",
    "coefficient_sets",
    "VERDICTS",
    "REPRODUCED",
    "NOT_REPRODUCED",
    "UNDETERMINED",
]

TILES_USED_PER_CHIP = 1471  # the authors' code maps neurons to 1471 tiles per IPU (tile 0 of IPU 0 free, §3.1)
ASSUMPTIONS = ("sync_scope", "copies", "host_transfer", "host_direction", "host_rate", "host_shared")
SPLIT_KEYS = ("compute", "sync", "exchange", "links", "host", "residual")
"""Every phase of the step (the residual is the fitted host excess on the IPU): the split sums to the step."""
# (weak-scaling input size, classes, input cap) of the §4.4 runs (experiments/s_common.py DATASETS)
_DATASETS = {"shd": (700, 20, 48), "nmnist": (1152, 10, 32)}
MODES = ("weak", "strong")
PAPER_STEPS_PER_EXECUTION = 500
"""Steps per device execution of the §4.4 scaling runs: ``benchmarking_script.py`` (HEAD of
``jrfinkbeiner/graphcore_snn``) sets ``STEPS_PER_EPOCH = 1000`` for ``multi_neuron`` and
``TRAIN_STEPS_PER_EXECUTION = STEPS_PER_EPOCH // 2``: two executions of 500 steps per epoch (the
calibration log ran one execution of 52 steps per epoch: ``timing.STEPS_PER_EXECUTION``)."""
PAPER_EXECUTIONS_PER_EPOCH = 2
PAPER_STRUCTURE = StepStructure(executions_per_epoch=PAPER_EXECUTIONS_PER_EPOCH)
"""The default structure with the §4.4 runs' two executions per epoch."""


@dataclass(frozen=True)
class ScalingRecipe:
    """The §4.4 network recipe: ``dataset`` (shd | nmnist), ``neurons_per_tile``, ``batch``,
    ``max_activity`` (fixed activity: every list at this cap), ``timesteps``; ``machine`` preset;
    ``steps_per_execution`` (500: two executions per §4.4 epoch of 1000 steps)."""

    dataset: str = "shd"
    neurons_per_tile: int = 8
    batch: int = 24
    max_activity: float = 0.05
    timesteps: int = 10
    machine: str = "bow"
    steps_per_execution: int = PAPER_STEPS_PER_EXECUTION

    def __post_init__(self):
        require(self.dataset in _DATASETS, "dataset", self.dataset, "must be shd or nmnist", "e.g. --dataset shd")
        for name in ("neurons_per_tile", "batch", "timesteps", "steps_per_execution"):
            v = getattr(self, name)
            require(isinstance(v, int) and v >= 1, name, v, "must be an integer >= 1")
        require(0 < self.max_activity <= 1, "max_activity", self.max_activity, "must be in (0, 1]", "e.g. 0.05")


def _hidden_sizes(total: int, n_hidden: int, npt: int) -> list:
    """The benchmark script's split of ``total`` neurons into ``n_hidden`` layers of whole tiles."""
    block = n_hidden * npt
    return [npt * (total // block + int(total % block > npt * i)) for i in range(n_hidden)]


def recipe_layers(recipe: ScalingRecipe, chips: int) -> tuple:
    """Layer sizes of the recipe's network on ``chips`` chips (§4.4 ``multi_neuron``)."""
    n0, classes, _ = _DATASETS[recipe.dataset]
    npt = recipe.neurons_per_tile
    H = max(1, 3 * npt // 2)
    per_chip = TILES_USED_PER_CHIP * npt
    out_pad = -(-classes // npt) * npt
    return (n0, *_hidden_sizes(per_chip, H, npt) * (chips - 1), *_hidden_sizes(per_chip - out_pad, H, npt), classes)


def _config(recipe: ScalingRecipe, layers: tuple):
    from tilesim.models.snn.training.network import (
        NetworkConfig,  # Numba kernels load only when they run (start-up time)
    )

    return NetworkConfig(
        layers=layers,
        batch=recipe.batch,
        timesteps=recipe.timesteps,
        max_activity=recipe.max_activity,
        input_cap=_DATASETS[recipe.dataset][2],
        second_threshold=0.9,
        optimizer="sgd",
        lr=3e-5,
        seed=0,
        weight_mul=2.0,
        output_second_threshold=None,
        second_threshold_schedule=None,
        activity="fixed",
    )


@dataclass(frozen=True)
class ScalingPoint:
    """One chip count: ``neurons``, ``layers``, ``neurons_per_tile``, ``step_s``, ``samples_per_s``,
    ``efficiency`` (under the study's structure), ``split_s`` (seconds per :data:`SPLIT_KEYS`) and
    ``band``: assumption name → the efficiency with that assumption switched the other way."""

    chips: int
    neurons: int
    layers: int
    neurons_per_tile: int
    step_s: float
    samples_per_s: float
    efficiency: float
    split_s: dict
    band: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ScalingStudy:
    """A scaling study: the ``mode``, ``recipe``, ``structure`` it assumed and its points."""

    mode: str
    recipe: ScalingRecipe
    structure: StepStructure
    points: tuple

    def to_dict(self) -> dict:
        """The ``--json`` form."""
        return {
            "mode": self.mode,
            "recipe": asdict(self.recipe),
            "structure": self.structure.to_dict(),
            "points": [asdict(p) for p in self.points],
        }


def _time(recipe: ScalingRecipe, layers: tuple, chips: int, npt: int, structure: StepStructure, memo: dict, costs=None):
    """(step seconds, split) of the recipe's network ``layers`` on ``chips`` chips at ``npt`` under
    ``costs`` (default: the shipped fit); the placement and the work counters are kept in ``memo``."""
    if chips == 1:  # on one chip neither option changes anything (timing.py: every sync is the chip's own)
        structure = replace(structure, sync_scope=SYNC_SCOPES[0], host_shared=HOST_SHARED[0])
    ckey = None if costs is None else (costs.name, tuple(sorted(costs.coefficients.items())))
    key = (layers, chips, npt, structure, ckey)
    if key in memo:
        return memo[key]

    config = _config(recipe, layers)
    machine = load_machine(recipe.machine, chips)
    pkey = ("placement", layers, chips, npt)
    if pkey not in memo:
        placement = place(config, machine, npt, "contiguous", "report")[0]
        memo[pkey] = placement, count_work(fixed_activity(config), placement, per_step=True)
    placement, counters = memo[pkey]
    cache = memo.setdefault(("cache", pkey), {})
    step = SnnStep(config, placement, counters, costs, recipe.steps_per_execution, structure, cache, form="compact")
    res = time_workload(step, machine, keep_timeline=False).result
    bd = res.breakdown_s()
    split = {k: float(bd.get(k, 0.0)) for k in SPLIT_KEYS}
    memo[key] = (float(res.total_s), split)
    return memo[key]


def _strong_npt(recipe: ScalingRecipe, layers: tuple, chips: int, npt: int) -> int:
    """The fewest neurons per tile from ``npt`` up at which ``layers`` place on ``chips`` chips
    in whole-layer blocks (rounding each layer to whole tiles may need a few more than the even share)."""

    machine = load_machine(recipe.machine, chips)
    config = _config(recipe, layers)
    last = None
    for n in range(npt, 2 * npt + 1):
        try:
            place(config, machine, n, "contiguous", "report")
            return n
        except MappingError as exc:
            last = exc
    raise MappingError(f"strong scaling on {chips} chips: {last}")


def _points_layout(recipe: ScalingRecipe, chips: tuple, mode: str) -> list:
    """(chips, layers, neurons per tile) per point."""
    if mode == "weak":
        return [(c, recipe_layers(recipe, c), recipe.neurons_per_tile) for c in chips]
    top = max(chips)
    layers = recipe_layers(recipe, top)
    out = []
    for c in chips:
        require(
            len(layers) - 1 >= c, "chips", c, f"must not exceed the network's {len(layers) - 1} layers (one chip each)"
        )
        out.append((c, layers, _strong_npt(recipe, layers, c, -(-recipe.neurons_per_tile * top // c))))
    return out


def _efficiencies(mode: str, rows: list) -> list:
    """Efficiency per point from (chips, neurons, step_s) rows (the first row is the reference)."""
    c1, n1, t1 = rows[0]
    if mode == "weak":
        return [(n / t) / (c / c1 * n1 / t1) for c, n, t in rows]
    return [(t1 * c1) / (t * c) for c, n, t in rows]


def scaling_study(
    recipe: ScalingRecipe = ScalingRecipe(),
    chips: tuple = (1, 2, 4, 8, 16),
    mode: str = "weak",
    structure: StepStructure = PAPER_STRUCTURE,
    band: bool = True,
    progress=None,
) -> ScalingStudy:
    """The efficiency of ``recipe`` over ``chips`` under ``structure`` (weak or strong, see the
    module docstring), with each point's split and, if ``band``, the efficiency with each of
    :data:`ASSUMPTIONS` switched the other way. ``progress(label)`` is called per timed point."""
    require(mode in MODES, "mode", mode, "must be weak or strong", "e.g. --mode weak")
    chips = tuple(sorted(set(int(c) for c in chips)))
    require(len(chips) >= 1 and chips[0] >= 1, "chips", chips, "must be integers >= 1", "e.g. --chips 1,2,4,8,16")
    memo: dict = {}
    layout = _points_layout(recipe, chips, mode)

    def run(st: StepStructure) -> list:
        rows = []
        for c, layers, npt in layout:
            if progress:
                progress(f"{c} chips, {st.describe()}")
            rows.append((c, sum(layers[1:]), *_time(recipe, layers, c, npt, st, memo)))
        return rows

    main = run(structure)
    eff = _efficiencies(mode, [(c, n, t) for c, n, t, _ in main])
    bands: list = [{} for _ in main]
    if band:
        for name in ASSUMPTIONS:
            other = flipped(structure, name)
            e2 = _efficiencies(mode, [(c, n, t) for c, n, t, _ in run(other)])
            for i, e in enumerate(e2):
                bands[i][name] = e
    points = tuple(
        ScalingPoint(
            chips=c,
            neurons=n,
            layers=len(layout[i][1]) - 1,
            neurons_per_tile=layout[i][2],
            step_s=t,
            samples_per_s=recipe.batch / t,
            efficiency=eff[i],
            split_s=split,
            band=bands[i],
        )
        for i, (c, n, t, split) in enumerate(main)
    )
    return ScalingStudy(mode, recipe, structure, points)


def format_table(study: ScalingStudy) -> str:
    """The study as a text table: per point the step, efficiency, split (ms) and the band."""
    r = study.recipe
    head = (
        f"{study.mode} scaling, {r.dataset} {r.neurons_per_tile} neurons/tile, batch {r.batch}, "
        f"fixed activity {r.max_activity:g}, {r.machine}; structure: {study.structure.describe()}"
    )
    cols = ["chips", "neurons", "layers", "npt", "step ms", "E"] + [f"{k} ms" for k in SPLIT_KEYS]
    names = list(study.points[0].band) if study.points else []
    cols += [f"E if {n} flipped" for n in names]
    lines = [head, "  ".join(cols)]
    for p in study.points:
        vals = [f"{p.chips:5d}", f"{p.neurons:7d}", f"{p.layers:6d}", f"{p.neurons_per_tile:3d}"]
        vals += [f"{p.step_s * 1e3:7.2f}", f"{p.efficiency:5.3f}"]
        vals += [f"{p.split_s[k] * 1e3:{len(k) + 3}.2f}" for k in SPLIT_KEYS]
        vals += [f"{p.band[n]:{len(n) + 13}.3f}" for n in names]
        lines.append("  ".join(vals))
    return "\n".join(lines)


# ---- the S6 table: every combination of the unknowns, with the coefficients' band (claim S6) ------
SENSITIVITY_NPT = (2, 4, 8)
SENSITIVITY_BATCH = (24, 96, 384)
REPRODUCED = "reproduced by the model"
NOT_REPRODUCED = "not reproduced by the model"
UNDETERMINED = "undetermined"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, UNDETERMINED)
"""The S6 verdicts: the model can reproduce a claim or not; without a measurement it refutes nothing."""
SETTLED_BY = {
    "sync_scope": "a PopVision trace of a 2-IPU run: whether supersteps without cross-chip data pay Sync-Link syncs",
    "copies": "a PopVision trace: one exchange or one per layer for the consecutive Copy programs",
    "host_transfer": "a run with two executions per epoch against one with one: whether the variable copy repeats "
    "(the executor's code says once per epoch under Keras fit)",
    "host_direction": "a PopVision host-exchange trace of an epoch's first execution: device->host only, or both "
    "ways (the executor's code says both)",
    "host_rate": "the calibration network with Adam and with SGD (24 against 8 bytes per weight moved), or an "
    "IPU trace of an epoch's first execution (enable_io_trace): the copy's own time",
    "host_shared": "the one-chip §4.4 network and four copies of it on the 4 IPUs of one IPU-Machine, timed per "
    "step: a host-serial copy makes the 4-chip step longer by 3x the one-chip copy",
    "coefficients": "measured single-chip steps of more architectures, to narrow the fitted coefficients' band",
}
"""Per unknown (and for the fitted coefficients), the measurement that would settle it (quoted where a
verdict is undetermined)."""
_SIGN_TEXT = {1: "+", -1: "−", 0: "0"}


def combinations(base: StepStructure = PAPER_STRUCTURE) -> tuple:
    """Every setting of the binary unknowns :data:`ASSUMPTIONS`: 2^k structures, ``base`` first, then
    in the order of a binary count over the unknowns (bit i: ``ASSUMPTIONS[i]`` switched the other way);
    the other fields of ``base`` (executions per epoch) are kept."""
    out = [base]
    for name in ASSUMPTIONS:
        out += [flipped(st, name) for st in out]
    return tuple(out)


def flips_of(structure: StepStructure, base: StepStructure = PAPER_STRUCTURE) -> tuple:
    """The unknowns ``structure`` sets the other way from ``base`` (in :data:`ASSUMPTIONS` order)."""
    return tuple(n for n in ASSUMPTIONS if getattr(structure, n) != getattr(base, n))


def coefficient_sets(costs=None) -> tuple:
    """The cost models of the coefficients' band: ``costs`` (default: the shipped fit) first, then its
    leave-one-out refits, each distinct set once (leaving out one of two rows with equal settings and
    equal measured times gives the same refit)."""
    from tilesim.models.snn.calibration.calibrate import FIT_PARAMS, loo_cost_models  # the calibration loads only here
    from tilesim.models.snn.step.timing import default_costs

    costs = costs or default_costs()
    out, seen = [costs], set()
    for cm in loo_cost_models(costs):
        key = tuple(round(float(cm.coefficients[k]), 9) for k in FIT_PARAMS if k in cm.coefficients)
        if key not in seen:
            seen.add(key)
            out.append(cm)
    return tuple(out)


@dataclass(frozen=True)
class SensitivityRow:
    """One combination of the unknowns: ``flips`` (those set the other way from the assumed structure;
    ``()``: the assumed one) and ``setting`` (its description); per (neurons per tile, batch) the
    efficiency E(chips) under the first coefficient set (the fit) and its ``band`` (lo, hi) over every
    set; ``sign_npt``: per batch, the sign of E(npt max) − E(npt min) under each coefficient set (+1,
    −1 or 0); ``sign_batch``: per npt, that of E(batch max) − E(batch min)."""

    flips: tuple
    setting: str
    efficiency: dict  # (npt, batch) -> E(chips) under the fit
    band: dict  # (npt, batch) -> (lo, hi) over the coefficient sets
    sign_npt: dict  # batch -> (sign per coefficient set)
    sign_batch: dict  # npt -> (sign per coefficient set)

    def signs(self, half: str) -> dict:
        """``sign_npt`` for the per-tile half (``"npt"``), ``sign_batch`` for the batch half."""
        return self.sign_npt if half == "npt" else self.sign_batch

    def outcome(self, half: str, fit_only: bool = False) -> str:
        """``+`` (every sign positive), ``−`` (none positive) or ``±`` (both); ``fit_only``: under
        the first coefficient set (the fit) alone."""
        s = [x for v in self.signs(half).values() for x in (v[:1] if fit_only else v)]
        return "+" if s and all(x > 0 for x in s) else ("−" if all(x <= 0 for x in s) else "±")


@dataclass(frozen=True)
class Sensitivity:
    """The S6 table of ``dataset`` at ``chips`` chips: one row per combination of the unknowns
    (:func:`combinations`), over ``coefficient_sets`` cost models, and the verdict on each half of S6
    ("efficiency at 16 chips rises with batch" / "... with neurons per tile"): one of :data:`VERDICTS`
    (see :func:`_verdict`)."""

    dataset: str
    chips: int
    rows: tuple
    verdict_batch: str
    verdict_npt: str
    coefficient_sets: int = 1

    def to_dict(self) -> dict:
        """The JSON form (keys ``"npt x batch"``)."""
        return {
            "dataset": self.dataset,
            "chips": self.chips,
            "coefficient_sets": self.coefficient_sets,
            "verdict_batch": self.verdict_batch,
            "verdict_npt": self.verdict_npt,
            "rows": [
                {
                    "flips": list(r.flips),
                    "setting": r.setting,
                    "efficiency": {f"{n}x{b}": e for (n, b), e in r.efficiency.items()},
                    "band": {f"{n}x{b}": list(v) for (n, b), v in r.band.items()},
                    "sign_npt": {str(b): list(v) for b, v in r.sign_npt.items()},
                    "sign_batch": {str(n): list(v) for n, v in r.sign_batch.items()},
                }
                for r in self.rows
            ],
        }


def _sign(x: float, tol: float = 1e-3) -> int:
    """+1 / −1 beyond a change of ``tol`` in efficiency, else 0."""
    return 0 if abs(x) <= tol else (1 if x > 0 else -1)


def _verdict(rows: list, half: str) -> str:
    """:data:`REPRODUCED` if every sign of every row under every coefficient set is positive,
    :data:`NOT_REPRODUCED` if none is, else :data:`UNDETERMINED` naming what decides it: each unknown
    whose switch alone changes a row's outcome under the fit (:meth:`SensitivityRow.outcome`), the
    coefficients' band where one row rises under some coefficient set and not under another, and the measurement that
    would settle each."""
    signs = [x for r in rows for v in r.signs(half).values() for x in v]
    if signs and all(x > 0 for x in signs):
        return REPRODUCED
    if all(x <= 0 for x in signs):
        return NOT_REPRODUCED
    by_flips = {frozenset(r.flips): r for r in rows}
    deciding = [
        u
        for u in ASSUMPTIONS
        if any(
            (p := by_flips.get(frozenset(r.flips) ^ {u})) is not None and p.outcome(half, True) != r.outcome(half, True)
            for r in rows
        )
    ]
    straddle = sum(any(max(v) > 0 >= min(v) for v in r.signs(half).values()) for r in rows)
    parts = [f"{u} decides it (settle: {SETTLED_BY[u]})" for u in deciding]
    if straddle:
        parts.append(
            f"the coefficients' leave-one-out band decides whether E rises in {straddle} of {len(rows)} combinations "
            f"(settle: {SETTLED_BY['coefficients']})"
        )
    if not parts:
        parts.append("the sign differs between batches (or neurons per tile) within a combination")
    return f"{UNDETERMINED}: " + "; ".join(parts)


def _row(flips, setting, eff: dict, npts: tuple, batches: tuple) -> SensitivityRow:
    """A :class:`SensitivityRow` from ``eff``: (npt, batch) → E per coefficient set (the fit first)."""
    return SensitivityRow(
        flips,
        setting,
        {k: v[0] for k, v in eff.items()},
        {k: (min(v), max(v)) for k, v in eff.items()},
        {b: tuple(_sign(hi - lo) for lo, hi in zip(eff[npts[0], b], eff[npts[-1], b])) for b in batches},
        {n: tuple(_sign(hi - lo) for lo, hi in zip(eff[n, batches[0]], eff[n, batches[-1]])) for n in npts},
    )


def sensitivity_table(
    recipe: ScalingRecipe = ScalingRecipe(),
    chips: int = 16,
    base: StepStructure = PAPER_STRUCTURE,
    npts: tuple = SENSITIVITY_NPT,
    batches: tuple = SENSITIVITY_BATCH,
    progress=None,
    costs: tuple = (),
) -> Sensitivity:
    """E(``chips``) of the §4.4 weak-scaling network of ``recipe`` (its dataset, activity, machine)
    for every ``npts`` × ``batches`` under every combination of the unknowns (:func:`combinations`:
    2^k rows, not single flips) and every cost model of ``costs`` (default: the shipped fit alone;
    :func:`coefficient_sets` gives the fit and its leave-one-out refits), with the S6 verdicts
    (:func:`_verdict`). One placement and one set of work counters per network serve every timing."""
    require(chips >= 2, "chips", chips, "must be >= 2 (efficiency against one chip)", "e.g. 16")
    sets = tuple(costs) or coefficient_sets()[:1]
    combos = combinations(base)
    eff: dict = {k: {} for k in range(len(combos))}
    for npt in npts:
        for b in batches:
            r = replace(recipe, neurons_per_tile=npt, batch=b)
            memo: dict = {}
            layout = _points_layout(r, (1, chips), "weak")
            for k, st in enumerate(combos):
                if progress:
                    progress(f"npt {npt}, batch {b}: {st.describe()}")
                e = []
                for cm in sets:
                    pts = [(c, sum(ly[1:]), _time(r, ly, c, n, st, memo, cm)[0]) for c, ly, n in layout]
                    e.append(_efficiencies("weak", pts)[1])
                eff[k][npt, b] = e
    rows = [_row(flips_of(st, base), st.describe(), eff[k], npts, batches) for k, st in enumerate(combos)]
    verdicts = _verdict(rows, "batch"), _verdict(rows, "npt")
    return Sensitivity(recipe.dataset, chips, tuple(rows), *verdicts, len(sets))


def format_sensitivity(table: Sensitivity) -> str:
    """The table as markdown: one row per combination (the unknowns switched from the assumed
    structure), E per (npt, batch) under the fit with the coefficients' band, the signs, the verdicts."""
    keys = list(table.rows[0].efficiency) if table.rows else []
    batches = sorted({b for _, b in keys})
    npts = sorted({n for n, _ in keys})
    banded = table.coefficient_sets > 1

    def cell(r, k):
        lo, hi = r.band[k]
        return f"{r.efficiency[k]:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if banded else "")

    def sign(v):
        return _SIGN_TEXT[v[0]] if len(set(v)) == 1 else "±"

    head = ["switched from the assumed structure"] + [f"E npt{n} B{b}" for n, b in keys]
    head += [f"ΔE npt→ B{b}" for b in batches] + [f"ΔE B→ npt{n}" for n in npts]
    band = (
        f"the fit, [lo, hi] over it and its {table.coefficient_sets - 1} distinct leave-one-out refits"
        if banded
        else "the fit only (the leave-one-out band: experiments/s6_combinations.py)"
    )
    lines = [
        f"S6: E({table.chips}) of the §4.4 {table.dataset} network under all {len(table.rows)} combinations of "
        f"the unknowns; coefficients: {band}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in table.rows:
        vals = [", ".join(r.flips) or "(as assumed)"] + [cell(r, k) for k in keys]
        vals += [sign(r.sign_npt[b]) for b in batches] + [sign(r.sign_batch[n]) for n in npts]
        lines.append("| " + " | ".join(vals) + " |")
    lines += [
        "",
        f"S6 first half (E rises with batch {batches[0]} → {batches[-1]}): {table.verdict_batch}",
        f"S6 second half (E rises with neurons per tile {npts[0]} → {npts[-1]}): {table.verdict_npt}",
    ]
    return "\n".join(lines)
