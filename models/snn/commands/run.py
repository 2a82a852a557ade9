"""One SNN training run from :class:`tilesim.models.snn.commands.options.RunOptions`: the library behind
``tilesim run``.

>>> summary = run_training(RunOptions(layers=(32, 16, 4), batch=4, timesteps=8, steps=2))
>>> summary.predicted_step_s, summary.to_dict()["breakdown_s"]

The pieces are plain functions the other commands and the experiments share:
:func:`load_model` (a NIR graph), :func:`load_cost_model`, :func:`network_config`,
:func:`make_dataset`, :func:`record_activity` and :func:`tilesim.models.snn.placement.fit.place`.
Nothing here parses arguments or prints (but :func:`load_model`'s one-line NIR warnings on stderr,
which are also in the summary's ``network["nir"]``); the command lines are ``models/snn/*cli.py``.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.machine.costs import CostModel, load_costs
from tilesim.machine.description import load_machine
from tilesim.machine.fabric import make_fabric
from tilesim.machine.memory import MemoryLedger
from tilesim.mapping.core import Mapping
from tilesim.models.snn.commands.extrapolation import host_excess_finding
from tilesim.models.snn.commands.hostmem import check_host_memory, estimate_host_memory, peak_rss_bytes
from tilesim.models.snn.commands.options import DATASET_CHANNELS, DEFAULT_LAYERS, RunOptions, network_fields
from tilesim.models.snn.outputs.explain import exchange_matrices, explain_critical
from tilesim.models.snn.placement.fit import Placed, place, place_network
from tilesim.models.snn.stacks import stack_name
from tilesim.models.snn.step.counters import Activity, count_work
from tilesim.models.snn.step.structure import StepStructure
from tilesim.models.snn.step.workload import SnnStep
from tilesim.models.snn.training import data as D
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.diagnose import Finding, StepRecord, check_depth, diagnose
from tilesim.models.snn.training.network import (
    NetworkConfig,
    SecondThresholdSchedule,
    compute_gradients,
    init_network,
    parse_layers,
    train_step,
)
from tilesim.models.snn.training.nir_import import NirModel, load_nir
from tilesim.outputs.records import (
    ProgramDigest,
    SimResult,
    by_phase_frame,
    critical_tiles,
    label_tile_cycles,
    whole_bytes,
)
from tilesim.outputs.runrecord import Explain, LabelTime, MemoryRecord
from tilesim.workload import time_workload

__all__ = [
    "RunSummary",
    "RunArtifacts",
    "run_training",
    "load_model",
    "load_cost_model",
    "network_config",
    "make_dataset",
    "record_activity",
    "place",
    "batch_gradients",
]

_GENERATORS = {"shd": D.shd_like, "nmnist": D.nmnist_like, "dvsgesture": D.dvsgesture_like}
log = logging.getLogger(__name__)
# A generated data set holds this many batches whatever --steps is (steps cycle through it), so the
# first steps, their loss and their timing do not depend on how many steps are run.
DATASET_BATCHES = 20
# the note of a run at --activity fixed (summary notes, the text output and summary.md)
FIXED_NOTE = "fixed activity: no training, the step is timed at every list's cap"


def load_model(options: RunOptions) -> NirModel | None:
    """The NIR graph of ``options.model`` (None without one). ``options.layers``, when not the
    default, must equal the graph's layers (ConfigError otherwise)."""
    if not options.model:
        return None
    model = load_nir(options.model, None if options.dt is None else float(options.dt), options.discretization)
    for warning in model.warnings:  # the one print of this module: the graph may not mean what it says
        print(f"tilesim: warning: {warning}", file=sys.stderr)
    if options.layers != DEFAULT_LAYERS:
        require(
            parse_layers(options.layers) == tuple(model.layers),
            "--layers",
            "-".join(map(str, options.layers)),
            f"must match the NIR graph's {'-'.join(map(str, model.layers))}",
            "drop --layers when using --model",
        )
    return model


def load_cost_model(options: RunOptions) -> CostModel | None:
    """The cost model of ``options.costs`` (None: the shipped calibrated one)."""
    return load_costs(options.costs) if options.costs else None


def network_config(options: RunOptions, model: NirModel | None = None) -> NetworkConfig:
    """The network of ``options``: every option marked ``network`` passed by name; a NIR ``model``
    (loaded by the caller) sets the layers, the recurrence and the LIF constants."""
    kw = {name: getattr(options, name) for name in network_fields()}
    kw["second_threshold_schedule"] = (
        SecondThresholdSchedule(options.second_threshold_start, options.second_threshold_rate)
        if options.second_threshold_schedule == "authors"
        else None
    )
    if model is not None:
        kw.update(layers=model.layers, recurrent=model.recurrent, lif=model.lif)
    return NetworkConfig(**kw)


def _real_dataset(path: Path, config: NetworkConfig):
    """The user's own data file or folder (SHD/SSC .h5, N-MNIST folder, events .npz), checked
    against the network (:func:`_check_fits`)."""
    require(
        path.exists(),
        "--data",
        str(path),
        "no such file or folder",
        "give an SHD/SSC .h5 file, an N-MNIST folder or an events .npz",
    )
    if path.suffix in (".h5", ".hdf5"):
        ds = D.read_shd(path, n_channels=config.layers[0])
    elif path.suffix == ".npz":
        ds = D.read_events_npz(path)
    elif path.is_dir():
        ds = D.read_nmnist_folder(path)
    else:
        raise ConfigError(
            config_message(
                "--data", str(path), "unknown format", "give an SHD/SSC .h5 file, an N-MNIST folder or an events .npz"
            )
        )
    return _check_fits(ds, config)


def _check_fits(ds, config: NetworkConfig):
    """``ds`` if the network's input channels, classes and batch fit it; ConfigError otherwise."""
    require(
        ds.n_channels == config.layers[0],
        "--layers N0",
        config.layers[0],
        f"must equal the data's {ds.n_channels} channels",
        f"use --layers {ds.n_channels}-...",
    )
    require(
        ds.n_classes <= config.layers[-1],
        "--layers classes",
        config.layers[-1],
        f"must be >= the data's {ds.n_classes} classes",
        f"use --layers ...-{ds.n_classes}",
    )
    require(
        len(ds) >= config.batch,
        "--batch",
        config.batch,
        f"the data file has {len(ds)} samples",
        f"give --batch <= {len(ds)} or more data",
    )
    return ds


def make_dataset(
    config: NetworkConfig,
    n_samples: int,
    dataset: str = "synthetic",
    data: str | None = None,
    data_root: str | None = None,
):
    """The training data: the file or folder ``data`` if given; tonic's ``dataset`` kept under
    ``data_root`` if that is given (:func:`tilesim.models.snn.training.data.read_tonic`, its first ``n_samples``);
    else the generator ``dataset`` (``synthetic`` is sized from ``config.layers``; the others need
    their own N0). ConfigError if the network's input or class count does not fit the data."""
    if data:
        return _real_dataset(Path(data), config)
    if data_root:
        return _check_fits(D.read_tonic(dataset, Path(data_root).expanduser(), limit=n_samples), config)
    if dataset == "synthetic":
        return D.synthetic(config.layers, n_samples, config.timesteps, seed=config.seed)
    require(
        dataset in _GENERATORS,
        "--dataset",
        dataset,
        f"must be one of synthetic, {', '.join(_GENERATORS)}",
        "e.g. --dataset shd",
    )
    n0 = DATASET_CHANNELS[dataset]
    require(
        config.layers[0] == n0,
        "--layers N0",
        config.layers[0],
        f"must be {n0} for --dataset {dataset}",
        f"use --layers {n0}-...",
    )
    ds = _GENERATORS[dataset](n_samples, seed=config.seed)
    require(
        ds.n_classes <= config.layers[-1],
        "--layers classes",
        config.layers[-1],
        f"must be >= {ds.n_classes} for --dataset {dataset}",
        f"use --layers ...-{ds.n_classes}",
    )
    return ds


def _load_weights(state, model: NirModel | None) -> None:
    if model is not None:  # the graph's weights replace the random initialisation
        state.W = [w.copy() for w in model.weights]
        state.V = [None if v is None else v.copy() for v in model.recurrent_weights]


def record_activity(
    config: NetworkConfig,
    placement: Mapping,
    dataset: str = "synthetic",
    data: str | None = None,
    model: NirModel | None = None,
    data_root: str | None = None,
) -> Activity:
    """The activity of one training step of ``config``: fixed activity is built without training;
    natural activity comes from one functional step on the first batch of the data
    (:func:`make_dataset` of ``dataset`` / ``data``), with a NIR ``model``'s weights if given."""
    config = replace(config, second_threshold_schedule=None)  # a steady-state step, not a warm-up one
    if config.activity == "fixed":
        return fixed_activity(config)
    state = init_network(config, placement)
    _load_weights(state, model)
    ds = make_dataset(config, config.batch * DATASET_BATCHES, dataset, data, data_root)  # as run_training
    rng = np.random.default_rng(config.seed + 1)
    spikes, labels = next(ds.batches(config.batch, config.timesteps, config.input_cap, rng))
    return train_step(state, spikes, labels).activity


@dataclass(frozen=True)
class RunArtifacts:
    """The objects behind a summary (not part of its JSON): the median step's engine record
    ``result`` and its ``program`` (a :class:`tilesim.outputs.records.ProgramDigest`), the SRAM ``ledger``,
    the ``exchange`` matrices, the placement ``mapping``, the ``trace_tiles`` given a trace track
    (``--trace-tiles``, else the step's critical tiles) and ``tile_layer`` (int [C*T]: the neuron
    layer, 1-based, whose neurons each tile owns; 0 = none)."""

    result: SimResult
    program: ProgramDigest
    ledger: MemoryLedger
    exchange: dict
    mapping: Mapping
    trace_tiles: tuple
    tile_layer: np.ndarray | None = None
    history: tuple = ()  # per step: diagnose.StepRecord (drawn as activity.png)
    options: RunOptions | None = None  # what the run was asked to do (its folder's settings and options.toml)


@dataclass(frozen=True)
class NetworkSummary:
    """The network a run trained: layer sizes, neuron and weight counts, spike caps, neurons per tile
    and, for a ``--model`` run, the NIR graph's own summary."""

    layers: tuple[int, ...]
    neurons: int
    weights: int
    caps: tuple[int, ...]
    neurons_per_tile: int
    nir: dict | None = None

    def to_dict(self) -> dict:
        """The summary.json form (``nir`` only for a NIR model)."""
        d = {
            "layers": list(self.layers),
            "neurons": self.neurons,
            "weights": self.weights,
            "caps": list(self.caps),
            "neurons_per_tile": self.neurons_per_tile,
        }
        return d if self.nir is None else {**d, "nir": self.nir}


@dataclass(frozen=True)
class HostMemory:
    """The host-memory guard's estimate (total and by part) and the measured peak RSS, bytes."""

    estimate_bytes: int
    estimate_parts_bytes: dict[str, int]
    peak_rss_bytes: int | None

    def to_dict(self) -> dict:
        """The summary.json form."""
        return {
            "estimate_bytes": self.estimate_bytes,
            "estimate_parts_bytes": self.estimate_parts_bytes,
            "peak_rss_bytes": self.peak_rss_bytes,
        }


def _jsonable(value):
    """A summary field in its JSON form: records by their ``to_dict``, sequences of records as lists."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, tuple) and value and hasattr(value[0], "to_dict"):
        return [v.to_dict() for v in value]
    return value


@dataclass(frozen=True)
class RunSummary:
    """What :func:`run_training` measured; :meth:`to_dict` is the ``--json`` / summary.json form."""

    predicted_step_s: float  # the median step (upper middle for even counts)
    samples_per_s: float
    breakdown_s: dict[str, float]  # seconds per time category (tilesim.outputs.records.PHASES)
    memory: MemoryRecord  # the SRAM of the step (the ledger's record)
    network: NetworkSummary
    machine: str
    chips: int
    mapping: dict  # the placement's own record (tilesim.mapping.Mapping.summary)
    loss: list[float] | None  # per step; None at fixed activity (no training)
    accuracy: list[float] | None
    predicted_step_s_per_step: list[float]
    wall_s_per_step: float
    by_phase: tuple[LabelTime, ...]  # per superstep label: the engine's record (SimResult.by_label)
    explain: Explain  # the critical kernel in words and numbers (tilesim.models.snn.outputs.explain.explain_critical)
    wall_s_total: float
    host_memory: HostMemory | None = None
    second_threshold_schedule: SecondThresholdSchedule | None = None  # None: a constant theta2
    activity: tuple[StepRecord, ...] = ()  # per step: loss, accuracy, theta2 and activity per layer
    # the training diagnosis (dead / silent / saturated layers, flat loss, depth), then the prediction's own
    # (commands/extrapolation.py: a step that is mostly fitted host excess outside the calibration's datasets)
    findings: tuple[Finding, ...] = ()
    structure: StepStructure | None = None  # the structural assumptions the steps were timed under
    stack: str = ""  # the execution stack the steps were built with (tilesim.models.snn.stacks; "" before it)
    notes: tuple[str, ...] = ()  # one-line remarks on how the run was timed (e.g. FIXED_NOTE)
    workload: str = "snn"  # whose report section renders the rest (tilesim.workload.report_parts)
    artifacts: RunArtifacts | None = field(default=None, repr=False, compare=False)

    def by_phase_frame(self):
        """:attr:`by_phase` as a pandas DataFrame, one row per superstep label, slowest first."""
        return by_phase_frame(self.by_phase_table())

    def by_phase_table(self) -> dict[str, dict]:
        """:attr:`by_phase` keyed by label (the form :meth:`tilesim.outputs.records.SimResult.by_label`
        returns, and the ``--json`` form)."""
        return {x.label: {k: v for k, v in asdict(x).items() if k != "label"} for x in self.by_phase}

    def to_dict(self) -> dict:
        """The JSON summary (every field but ``artifacts``, in declaration order)."""
        out = {f.name: _jsonable(getattr(self, f.name)) for f in fields(self) if f.name != "artifacts"}
        out["by_phase"] = self.by_phase_table()
        for name, empty in (("host_memory", {}), ("structure", {}), ("activity", []), ("findings", []), ("notes", [])):
            if out[name] is None or out[name] == ():
                out[name] = empty
        return out


@dataclass
class _Steps:
    losses: list = field(default_factory=list)
    accs: list = field(default_factory=list)
    pred: list = field(default_factory=list)
    walls: list = field(default_factory=list)
    results: list = field(default_factory=list)
    counters: list = field(default_factory=list)
    programs: list = field(default_factory=list)
    digests: list = field(default_factory=list)  # per step: ProgramDigest (pictures, trace, totals)
    history: list = field(default_factory=list)  # per step: diagnose.StepRecord (loss, per-layer activity)
    stack_lines: list = field(default_factory=list)  # per step: what the stack chose (SnnStep.stack_lines)


def _time_step(options, config, machine, placement, costs, counters, out: _Steps, t0: float):
    """Build and simulate the program of one step's ``counters``; append its record, program and
    digest (and the wall time since ``t0``) to ``out``. Returns the engine's record."""
    step = SnnStep(
        config,
        placement,
        counters,
        costs,
        options.steps_per_execution,
        options.structure,
        stack=stack_name(machine, options.stack),
    )
    timed = time_workload(step, machine)
    program, sim = timed.program, timed.result
    out.stack_lines.append(step.stack_lines(sim))
    out.walls.append(time.perf_counter() - t0)
    out.pred.append(sim.total_s)
    out.results.append(sim)
    out.counters.append(counters.totals_only())
    out.programs.append(label_tile_cycles(program))
    out.digests.append(
        ProgramDigest.of(
            program,
            options.trace_tiles or critical_tiles(sim),
            sim.host_labels,
            make_fabric(machine),
        )
    )
    return sim


def _time_fixed(options, config, machine, placement, costs) -> _Steps:
    """One fixed-activity step (:func:`tilesim.models.snn.training.activity.fixed_activity`, every list at its cap)
    timed without float math, as :func:`tilesim.models.snn.step.retime.retime` with no activity: no weights,
    no kernels. All steps of a fixed run are the same, so one is timed whatever ``options.steps``."""
    t0 = time.perf_counter()
    config = replace(config, second_threshold_schedule=None)  # as record_activity: a steady-state step
    counters = count_work(fixed_activity(config), placement, per_step=True)
    out = _Steps()
    sim = _time_step(options, config, machine, placement, costs, counters, out, t0)
    log.info("fixed activity: predicted %.3f ms on %s, %.2f s", sim.total_s * 1e3, machine.name, out.walls[-1])
    return out


def _n_weights(config: NetworkConfig) -> int:
    """Weights of ``config``: ``W`` of every layer and the recurrent ``V`` where a layer has one."""
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * config.n_layers
    sizes = config.layers
    return int(sum(a * b for a, b in zip(sizes, sizes[1:])) + sum(n * n for n, r in zip(sizes[1:], rec) if r))


def _train(options, config, machine, placement, costs, state, ds, progress) -> _Steps:
    """``options.steps`` functional steps, each timed on the machine."""
    rng = np.random.default_rng(config.seed + 1)
    out, batches = _Steps(), ds.endless_batches(config.batch, config.timesteps, config.input_cap, rng)
    for step in range(options.steps):
        spikes, labels = next(batches)
        t0 = time.perf_counter()
        k = state.step
        res = train_step(state, spikes, labels, per_step_counters=True)
        out.history.append(StepRecord.from_result(k, res))
        sim = _time_step(options, config.at_step(k), machine, placement, costs, res.counters, out, t0)
        out.losses.append(float(res.loss))
        out.accs.append(float(res.accuracy))
        log.info(
            "step %d/%d: loss %.4f, predicted %.3f ms on %s, %.2f s of simulator time",
            step + 1,
            options.steps,
            float(res.loss),
            sim.total_s * 1e3,
            machine.name,
            out.walls[-1],
        )
        if progress:
            progress(step, res, sim)
    return out


def _tile_layer(placement: Mapping, machine) -> np.ndarray:
    """int [C*T]: the (1-based) neuron layer whose neurons each tile owns, 0 for none."""
    out = np.zeros(machine.chips * machine.tiles_per_chip, np.int64)
    for l, tiles in enumerate(placement.tile_of_neuron):
        out[np.unique(np.asarray(tiles))] = l + 1
    return out


@dataclass(frozen=True)
class _RunFacts:
    """What a run knows besides its timed steps, handed to :func:`_summarize` once."""

    structure: StepStructure
    stack: str  # the stack option (auto or a name)
    estimate: object  # the host-memory guard's estimate (tilesim.models.snn.commands.hostmem.HostMemoryEstimate)
    schedule: SecondThresholdSchedule | None = None
    findings: tuple[Finding, ...] = ()
    nir: dict | None = None
    notes: tuple[str, ...] = ()
    dataset: str = "synthetic"  # the data's shape (RunOptions.dataset): the fitted host excess's rule needs it


def _findings(facts: _RunFacts, sim, s: _Steps) -> tuple[Finding, ...]:
    """The run's findings: the training diagnosis (``facts.findings``), then the median step's
    (:func:`tilesim.models.snn.commands.extrapolation.host_excess_finding`)."""
    excess = host_excess_finding(sim.by_label(), sim.total_s, facts.dataset, (0, len(s.pred) - 1))
    return facts.findings + ((excess,) if excess is not None else ())


def _summarize(
    config, machine, placed: Placed, n_weights: int, s: _Steps, t_all: float, facts: _RunFacts
) -> RunSummary:
    """The run's summary, built once from its steps and ``facts`` (the peak RSS measured last)."""
    med = int(np.argsort(s.pred)[len(s.pred) // 2])
    sim, placement, digest = s.results[med], placed.placement, s.digests[med]
    stack = stack_name(machine, facts.stack)
    explain = explain_critical(sim, config, placement, s.counters[med], machine, s.programs[med], stack)
    exchange = exchange_matrices(
        config, placement, s.counters[med], machine, chip=explain["chip"], digest=digest, stack=stack
    )
    explain["exchange_bytes"] = exchange["totals_bytes"]
    explain["exchange_received_bytes"] = exchange["received_bytes"]
    tile_layer = _tile_layer(placement, machine)
    digest = replace(digest, tile_group=tile_layer, label_tile_cycles=s.programs[med])
    artifacts = RunArtifacts(
        sim, digest, placed.ledger, exchange, placed.mapping, digest.tiles, tile_layer, tuple(s.history)
    )
    trained = bool(s.history)
    return RunSummary(
        predicted_step_s=float(s.pred[med]),
        samples_per_s=config.batch / float(s.pred[med]),
        breakdown_s=sim.breakdown_s(),
        memory=MemoryRecord.of(placed.ledger),
        network=NetworkSummary(
            layers=tuple(config.layers),
            neurons=int(sum(config.layers[1:])),
            weights=int(n_weights),
            caps=tuple(config.n_max),
            neurons_per_tile=placed.neurons_per_tile,
            nir=facts.nir,
        ),
        machine=machine.name,
        chips=machine.chips,
        mapping=placed.mapping.summary(),
        loss=s.losses if trained else None,
        accuracy=s.accs if trained else None,
        predicted_step_s_per_step=s.pred,
        wall_s_per_step=float(np.median(s.walls[1:] if len(s.walls) > 1 else s.walls)),
        by_phase=tuple(LabelTime(label=k, **v) for k, v in sim.by_label().items()),
        explain=Explain.from_dict(explain),
        wall_s_total=time.perf_counter() - t_all,
        host_memory=_host_memory(facts.estimate),
        second_threshold_schedule=facts.schedule,
        activity=tuple(s.history),
        findings=_findings(facts, sim, s),
        structure=facts.structure,
        stack=stack,
        notes=facts.notes + tuple(s.stack_lines[med] if s.stack_lines else ()),
        artifacts=artifacts,
    )


def run_training(options: RunOptions, progress=None) -> RunSummary:
    """Train ``options.steps`` steps of the network of ``options`` on its machine and time every
    step (:func:`_run_training`); the summary's artifacts keep ``options``."""
    summary = _run_training(options, progress)
    return replace(summary, artifacts=replace(summary.artifacts, options=options))


def _run_training(options: RunOptions, progress=None) -> RunSummary:
    """Train ``options.steps`` steps of the network of ``options`` on its machine and time every
    step; the summary's ``predicted_step_s`` is the median step. ``progress(step, result, sim)``
    is called after each step. Writes nothing (``tilesim.models.snn.commands.cli`` writes ``options.out``).

    Raises ConfigError / MappingError / SramOverflowError (``memory_check = "raise"``) for input
    that cannot run."""
    require(
        isinstance(options, RunOptions),
        "options",
        type(options).__name__,
        "must be a RunOptions",
        "build one with RunOptions(...) or options_from_mapping(dict)",
    )
    require(
        options.implementation == "sparse",
        "implementation",
        options.implementation,
        "is not the sparse training this function runs",
        "run it with tilesim.models.snntorch.run.run_snntorch(options)",
    )
    t_all = time.perf_counter()
    model = load_model(options)
    config = network_config(options, model)
    where = options.placement
    machine = load_machine(where.machine, where.chips)
    n_tiles = machine.chips * machine.tiles_per_chip
    bad = [t for t in options.output.trace_tiles if t >= n_tiles]
    require(
        not bad,
        "--trace-tiles",
        bad[0] if bad else 0,
        f"must be below the machine's {n_tiles} tiles",
        f"give global tile ids 0..{n_tiles - 1}",
    )
    estimate = estimate_host_memory(config, machine, stack=options.stack)
    check_host_memory(estimate)  # before anything big is allocated
    placed = place_network(
        config, machine, where.neurons_per_tile, where.mapping, where.memory_check, stack=options.stack
    )
    costs = load_cost_model(options)
    if config.activity == "fixed":
        return _run_fixed(options, config, machine, placed, costs, estimate, t_all)
    state = init_network(config, placed.placement)
    _load_weights(state, model)
    ds = make_dataset(config, config.batch * DATASET_BATCHES, options.dataset, options.data, options.data_root)
    too_deep = check_depth(config)
    if too_deep is not None:  # said before training, as it decides what training can do
        log.warning("%s; fix: %s", too_deep.message, too_deep.fix)
    steps = _train(options, config, machine, placed.placement, costs, state, ds, progress)
    findings = diagnose(steps.history, config)
    for f in findings:
        if too_deep is None or f.key != too_deep.key:
            log.warning("%s; fix: %s", f.message, f.fix)
    n_weights = sum(w.size for w in state.W) + sum(v.size for v in state.V if v is not None)
    facts = _RunFacts(
        structure=options.structure,
        stack=options.stack,
        estimate=estimate,
        schedule=config.second_threshold_schedule,
        findings=tuple(findings),
        nir=None if model is None else model.summary(),
        dataset=options.dataset,
    )
    return _summarize(config, machine, placed, n_weights, steps, t_all, facts)


def _host_memory(estimate) -> HostMemory:
    """The summary's ``host_memory``: the guard's estimate by part and the measured peak RSS."""
    return HostMemory(whole_bytes(estimate.total_bytes), estimate.to_dict()["parts_bytes"], peak_rss_bytes())


def _run_fixed(options, config, machine, placed: Placed, costs, estimate, t_all: float) -> RunSummary:
    """:func:`run_training` at ``activity = "fixed"``: one step timed without float math
    (:func:`_time_fixed`); loss and accuracy are None and ``notes`` says so."""
    steps = _time_fixed(options, config, machine, placed.placement, costs)
    notes = [FIXED_NOTE]
    if options.steps > 1:
        notes.append(f"{options.steps} steps asked, one timed: at fixed activity every step is the same")
    facts = _RunFacts(
        structure=options.structure, stack=options.stack, estimate=estimate, notes=tuple(notes), dataset=options.dataset
    )
    return _summarize(config, machine, placed, _n_weights(config), steps, t_all, facts)


def batch_gradients(weights: list, spikes: np.ndarray, labels: np.ndarray, options: RunOptions) -> dict:
    """Loss and weight gradients of one batch, no update (``tilesim grad``): ``weights`` W0..W{L-1}
    float32 [N_in, N_out], ``spikes`` [T, B, N0] 0/1, ``labels`` [B]; the caps, thresholds and
    placement from ``options``. Returns ``{"loss", "out_counts", "dW0", ...}`` (arrays)."""
    T, B, _ = spikes.shape
    layers = [weights[0].shape[0]] + [w.shape[1] for w in weights]
    cfg = NetworkConfig(
        layers=layers,
        batch=B,
        timesteps=T,
        max_activity=options.max_activity,
        caps=options.caps,
        input_cap=options.input_cap,
        second_threshold=options.second_threshold,
        output_second_threshold=options.output_second_threshold,
        second_threshold_schedule=None,
    )
    machine = load_machine(options.machine, options.chips)
    placement, _, _ = place(cfg, machine, options.neurons_per_tile, options.mapping, "report")
    state = init_network(cfg, placement)
    state.W = list(weights)
    res = compute_gradients(state, spikes.astype(np.uint8), labels.astype(np.int64))
    dW, _ = res.grads
    out = {"loss": np.float64(res.loss), "out_counts": res.logits}
    out.update({f"dW{i}": g for i, g in enumerate(dW)})
    return out
