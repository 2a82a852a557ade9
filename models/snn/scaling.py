"""Weak- and strong-scaling efficiency of the SNN training step over 1 → N chips (``tilesim scaling``).

A *recipe* (:class:`ScalingRecipe`) is the authors' ``multi_neuron`` network (snn-on-ipu.md §4.4;
``experiments/s5_s6_weak_scaling.py``): per chip ``1471·npt`` neurons in ``3·npt/2`` hidden
layers of whole tiles, the block repeated on every chip, the last chip's block shrunk by the
output layer; T = 10, SGD, ϑ2 0.9. Every point is timed at fixed activity (every list at its cap)
by :func:`models.snn.retime.retime` without training.

Weak scaling: the network grows with the chips at ``npt`` neurons per tile; efficiency
E(C) = throughput(C) / (C · throughput(1)), throughput = samples/s × neurons.
Strong scaling: the network of the largest chip count, on C chips at ``⌈npt·C_max/C⌉`` neurons
per tile (or the next count at which its layers place in whole-layer blocks);
E(C) = t(C_1)·C_1 / (t(C)·C), C_1 the smallest count.

Each point carries the step's split (compute, sync, exchange, links, host, and the labelled
residual ``unexplained: per-weight epoch cost``) and the *structural band*: for each assumption of
:class:`models.snn.structure.StepStructure` switched the other way, the efficiency it would give.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from models.snn.placing import place
from models.snn.retime import retime
from models.snn.structure import DEFAULT_STRUCTURE, StepStructure, flipped
from tilesim.errors import MappingError, require
from tilesim.machine import load_machine

__all__ = [
    "ScalingRecipe",
    "ScalingPoint",
    "ScalingStudy",
    "ASSUMPTIONS",
    "recipe_layers",
    "scaling_study",
    "format_table",
]

TILES_USED_PER_CHIP = 1471  # the authors' code maps neurons to 1471 tiles per IPU (tile 0 of IPU 0 free, §3.1)
ASSUMPTIONS = ("sync_scope", "copies", "host_transfer", "host_direction")
SPLIT_KEYS = ("compute", "sync", "exchange", "links", "host", "residual")
# (weak-scaling input size, classes, input cap) of the §4.4 runs (experiments/s_common.py DATASETS)
_DATASETS = {"shd": (700, 20, 48), "nmnist": (1152, 10, 32)}
MODES = ("weak", "strong")
PAPER_STEPS_PER_EXECUTION = 1000
"""Steps per device execution of the §4.4 scaling runs: 1000 steps per epoch, one execution per
epoch (as in the calibration log, where an epoch is 52 steps: ``timing.STEPS_PER_EXECUTION``)."""


@dataclass(frozen=True)
class ScalingRecipe:
    """The §4.4 network recipe: ``dataset`` (shd | nmnist), ``neurons_per_tile``, ``batch``,
    ``max_activity`` (fixed activity: every list at this cap), ``timesteps``; ``machine`` preset;
    ``steps_per_execution`` (1000: one execution per §4.4 epoch)."""

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
    from models.snn.network import NetworkConfig  # Numba kernels load only when they run (start-up time)

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


def _time(recipe: ScalingRecipe, layers: tuple, chips: int, npt: int, structure: StepStructure, memo: dict):
    """(step seconds, split) of the recipe's network ``layers`` on ``chips`` chips at ``npt``."""
    key = (layers, chips, npt, structure)
    if key in memo:
        return memo[key]

    config = _config(recipe, layers)
    machine = load_machine(recipe.machine, chips)
    pkey = ("placement", layers, chips, npt)
    if pkey not in memo:
        memo[pkey] = place(config, machine, npt, "contiguous", "report")[0]
    pred = retime(
        None,
        config,
        memo[pkey],
        machine,
        cache=memo.setdefault("cache", {}),
        steps_per_execution=recipe.steps_per_execution,
        structure=structure,
    )
    res = pred.result
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
    structure: StepStructure = DEFAULT_STRUCTURE,
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
