"""One sparse-BPTT training step as a BSP program, and its per-tile SRAM, on a tile machine.

The supersteps follow the authors' IPU implementation (snn-on-ipu.md §3.3, §3.4, §7; the
``sparse_layer`` custom op of ``jrfinkbeiner/graphcore_snn`` as benchmarked in Sept 2022): one
Poplar op runs the whole network and time loop; the vertex compute sets hold *all* layers at
once (the one-step delay between layers), but the PopLibs calls around them
(``dynamicSlice``/``dynamicUpdate`` of the sequences, ``Copy`` programs, ``poprand``,
``mulInPlace``) are issued *per layer*, each its own compute set or exchange with its own sync.
Each compute set's time comes from the per-tile work counters of the functional run
(``tilesim.models.snn.step.counters``) through a :class:`tilesim.machine.costs.CostModel`; a superstep's exchange
carries what the *next* superstep needs. The rows are data: :data:`STEP_ROWS` lists every row
kind with what it writes where (:class:`Write` of a :class:`LayerTerms` field), its folded PopLibs
calls and its link flows; :func:`step_shape` places them in the program, and :func:`_emit` is a
loop over the table into a :class:`RowSink`. Rows per time step, with ``L`` weight layers:

Forward, for t = 0 … T−1
  ``fwd: slice inputs``  loop counter, ``dynamicSlice`` of the data input, 2(L−1) ``Copy`` of each
                         layer's list into the next layer's input buffer; exchange: every owner
                         tile receives its sample lists, B·(N_max_in+1)·4 bytes (broadcast).
  ``fwd: state update``  owner tiles: gather weight rows of the input list, LIF update (B vertices),
                         then the dense two-threshold flags (one vertex per neuron and sample);
                         exchange: the flags (8·n·B bytes per owner tile) go to the compaction tiles.
  ``fwd: compaction``    L ``poprand`` calls, then B·2·f compaction tiles per layer (f from the
                         neuron count, §3.3 step 5) scan their chunk of flags on 6 workers and merge
                         the 6 chunk lists; exchange: tile lists to the per-sample combiners.
  ``fwd: combine``       one combiner per (layer, sample) merges 2·f lists, spikes first, up to
                         N_max; exchange: the list to the sequence slice and the next layer's input
                         buffer (a link flow if that layer sits on another chip).
  ``fwd: update sequences``  3L ``dynamicUpdate`` (v, ids, counts).
``loss``                 output tiles turn the last layer's list dense (sparse2dense) and send the
                         slot gradients g back.
Backward, for t = T−1 … 0
  ``bwd: slice sequences``  2 index updates and 5L+1 ``dynamicSlice``.
  ``bwd: replicate lists``  one row per layer: 5 ``Copy`` programs replicate the layer's own list
                         and g (state grad) and its input list (weight grad) onto every owner tile
                         (separate programs per layer, so these exchanges add up over layers).
                         Broadcast receives count 1/tiles_per_supertile of their bytes: both
                         tiles of a supertile take the same data at 8 B/cycle (§3.2).
  ``bwd: state grad``    B vertices per tile scan their sample's whole slot list, apply the
                         surrogate to their own slots; then per layer a ``Copy`` and a
                         ``mulInPlace`` (δI = 10(1−α)δv).
  ``bwd: weight+input grad``  dW += input rows × δI (6 worker vertices, private dW copies), then
                         the input-gradient partials (one vertex per sample); exchange: partials
                         to the stage-1 reduction, spread over the chip's tiles.
  ``bwd: reduce input grad``  stage-1 sums and the stage-2 ``reduceMany``; on C chips stage 1 is one
                         compute set on all of them, then one ``reduceMany`` per chip (:data:`STAGE1_SETS`).
``dW reduce`` (zeroing, 6 copies → 1), ``optimizer`` (Adam or SGD), once per step,
``host: variable sync``: the trainable state (weights and optimizer slots, 4·(1 + slots)·weights
bytes per chip) crosses the host link once per epoch, both ways, because Keras resets its loss
metric at every epoch start and Graphcore's TensorFlow executor then moves every on-device output
to the host and every argument back (:class:`tilesim.models.snn.step.structure.StepStructure` gives the source
and the options), at the round trip's fitted rate (the cost model's ``host_copy_ns_per_byte``) or the
documented host-traffic rate (``host_rate``), amortised over the steps in between.
The input sequence (T·B·(input_cap+1)·4 bytes) arrives once per step by host infeed.

Superstep overhead. A compute set costs ``compute_set_cycles`` on every tile (control code,
vertex launch) on top of its vertices; every superstep costs the machine's sync and exchange
fixed cycles. The PopLibs calls listed above are *folded* into the row they precede
(:attr:`StepRow.compute_sets`, :attr:`StepRow.copies`): a row
standing for ``k`` compute sets and ``c`` exchange-only copies adds ``k·compute_set_cycles`` of
compute to every tile (tile 0 of chip 0 is left free, as in the authors' op) and
``(k + c − 1)·sync`` / ``(k + c − 1)·exchange_fixed`` cycles that the breakdown books as sync /
exchange (``Program.sync_extra_cycles`` / ``exchange_extra_cycles``).

Multi-chip (:class:`tilesim.models.snn.step.structure.StepStructure`, ``sync_scope``): with ``"all"`` one
Poplar graph spans all chips and every superstep syncs all chips (§3.6); with ``"chip"`` (the
default) only supersteps whose exchange carries cross-chip link flows sync all chips, the rest
(and every folded PopLibs call) sync their own chip. ``copies="merged"`` folds a row's
consecutive ``Copy`` programs into one exchange.

Execution stacks (:mod:`tilesim.models.snn.stacks`). All of the above is the ``poplar`` stack, the IPU
presets' default. On ``tt-metal`` and ``csl`` (:attr:`tilesim.models.snn.step.traits.TableTraits.rows`) the rows
keep the algorithm's work and traffic but none of the IPU stack's terms: no folded PopLibs calls, no
sequence-copy rows, one dW per core (no ``dW reduce``; the optimizer zeroes the dW), no host variable
sync, no pipeline switches, the input-gradient reduction on every chip at once; the input crosses
the host link in a ``host:`` row before the step (TT-Metal: with the program's launch; the loss comes
back in a row after it).

A layer across chips (dataflow stacks only; :mod:`tilesim.models.snn.stacks.dataflow` "Layers across chips"):
a place on "the layer's chip" is on each chip it spans, the compaction terms per chip part
(:class:`tilesim.models.snn.step.table.PartTerms`), and the link flows add the parts' chunk lists to the
head chip (``fwd: compaction``), the merged list to the layer's other chips (``fwd: combine``), a first
layer's input lists (``fwd: input lists``), a split output layer's loss gradients (``loss``) and the other
chips' input-gradient partial sums to the head chip (``bwd: reduce input grad``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

import numpy as np

from tilesim.errors import ConfigError, MappingError, config_message, require
from tilesim.machine.costs import CostModel, barrel_tile_cycles, load_costs
from tilesim.mapping.core import Mapping
from tilesim.models.snn.placement.roles import grad_targets, input_chips, layer_layout
from tilesim.models.snn.step.counters import (
    CACHE_BYTES,
    WORKERS_PER_TILE,
    WorkCounters,
)
from tilesim.models.snn.step.rows import (
    ChipCalls,
    DenseRows,
    PeakRows,
    RowSink,
    memo_nbytes,
    replay_chip_rows,
    touched_rows,
)
from tilesim.models.snn.step.structure import (
    CHIPS_PER_HOST_LINK,
    D2H_BYTES_PER_S,
    DEFAULT_STRUCTURE,
    StepStructure,
    host_copy_seconds_per_byte,
)
from tilesim.models.snn.step.table import (
    CHIP,
    COMBINER,
    COMPACTION,
    COMPUTE,
    EVERY_LAYER,
    FROM_INPUT_LAYER,
    GRAD_SENDER,
    IN,
    INPUT_CHIP,
    INPUT_TO_CHIPS,
    OUT,
    OUTPUT_LAYER,
    OUTPUT_TILES,
    OWNER,
    PER_CHIP_PLACES,
    TO_HEAD_CHIP,
    TO_LAYER_CHIPS,
    TO_NEXT_LAYER,
    WITH_INPUT_GRAD,
    Flow,
    LayerTerms,
    PartTerms,
    StepShape,
    Write,
    step_shape,
)
from tilesim.models.snn.step.traits import TableTraits, check_layer_chips, poplar_traits
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.program import SYNC_ALL, SYNC_CHIP, CompactProgram, Program, flow_columns
from tilesim.program.forms import compact_program, program_form
from tilesim.program.rows import ChipPeaks
from tilesim.running.memo import lru_in

__all__ = [
    "default_costs",
    "uncalibrated_costs",
    "build_step_program",
    "host_sync_cycles_per_byte",
    "host_excess_share",
    "applies",
    "STEPS_PER_EXECUTION",
]

STEPS_PER_EXECUTION = 52
"""Training steps per device execution in the measured runs (the calibration's 12 Bow steps): one
execution per epoch of 52 steps (``benchmark_multi_layer_nmnist.py``: ``TRAIN_STEPS_PER_EXECUTION =
STEPS_PER_EPOCH``); the default of every re-timing."""


@lru_cache(maxsize=1)
def default_costs() -> CostModel:
    """The shipped calibrated cost model (``tilesim/presets/costs/snn.toml``; read once)."""
    with resources.as_file(resources.files("tilesim") / "presets" / "costs" / "snn.toml") as p:
        return load_costs(p)


def uncalibrated_costs() -> CostModel:
    """Version 0: first-principles instruction counts, before any fit (``models/snn/costs.toml``)."""
    with resources.as_file(resources.files("tilesim.models.snn") / "costs.toml") as p:
        return load_costs(p)


def _reduce_chips(config, placement, counters, tiles_per_chip: int) -> tuple:
    """The chips, in order, that run the backward input-gradient ``reduceMany`` (those holding a
    layer that computes input gradients): the authors issue one per IPU, one after another."""
    with_input_grad = {p.layer for p in counters.phases if p.phase == "input_grad"}
    lay = layer_layout(config, placement, tiles_per_chip)
    return tuple(sorted({lay[l].chip for l in with_input_grad}))


def _shape(config, placement, counters, machine, structure, stack: TableTraits) -> StepShape:
    """The :class:`StepShape` of this step on ``stack`` (its per-chip reduce slots included where the
    stack reduces chip after chip)."""
    serial = machine.chips > 1 and stack.serial_reduce
    rc = _reduce_chips(config, placement, counters, machine.tiles_per_chip) if serial else ()
    return step_shape(config.timesteps, config.n_layers, structure.copies == "merged", rc, stack.rows)


def _check_step_args(placement, machine, steps_per_execution):
    require(
        isinstance(steps_per_execution, (int, np.integer)) and steps_per_execution >= 1,
        "steps_per_execution",
        steps_per_execution,
        "must be an integer >= 1",
    )
    if placement.n_tiles != machine.total_tiles:
        raise MappingError(
            f"placement n_tiles = {placement.n_tiles}: machine {machine.name} has "
            f"{machine.total_tiles} tiles; build the placement for this machine"
        )


def build_step_program(
    config: NetworkConfig,
    placement: Mapping,
    counters: WorkCounters,
    machine,
    costs: CostModel | None = None,
    name: str = "snn training step",
    steps_per_execution: int = STEPS_PER_EXECUTION,
    cache: dict | None = None,
    form: str = "dense",
    structure: StepStructure = DEFAULT_STRUCTURE,
    stack: TableTraits | None = None,
) -> Program | CompactProgram:
    """The BSP program of one training step, from the step's per-step counters.

    ``counters`` must hold per-step arrays (``train_step(..., per_step_counters=True)`` or
    ``count_work(activity, placement, per_step=True)``). ``steps_per_execution``: training steps
    per device execution, over which the host variable sync is amortised. ``cache`` (a dict the
    caller keeps, e.g. across a mapping search) reuses each layer's position-independent terms
    (:class:`LayerTerms`) for counters with the same ``source`` (:func:`count_work`).

    Per-layer work is computed on the layer's own tiles and written straight into the rows of
    the program's arrays (row views), so a re-timing costs a few passes over ``[S, tiles]``.

    ``form``: what the caller needs (:data:`tilesim.program.forms.FORMS`); the core decides the form
    the program takes on ``machine`` (:func:`tilesim.program.forms.program_form`): ``"dense"``, the
    :class:`tilesim.program.Program` above; ``"compact"``, the rows recorded per chip (:class:`ChipCalls`)
    and reduced chip by chip by the core (:func:`tilesim.program.forms.compact_program`); ``"peaks"``, the
    peaks alone, taken as the rows are emitted (:class:`PeakRows`) — the same time from
    :func:`tilesim.engine.events.makespan_s` at a fraction of the cost, and no per-tile detail (the mapping
    search's objective), where the fabric allows it.

    ``structure``: the structural assumptions (:class:`tilesim.models.snn.step.structure.StepStructure`);
    ``stack``: the traits of the stack whose table program this is (:class:`tilesim.models.snn.step.traits.TableTraits`;
    default: Poplar's, :func:`tilesim.models.snn.step.traits.poplar_traits`).
    """
    _check_step_args(placement, machine, steps_per_execution)
    stack = stack or poplar_traits(machine.chip.workers_per_tile)
    form = program_form(machine, form)
    active = np.ones(machine.total_tiles)
    active[0] = 0.0  # tile 0 of chip 0 is outside the op's graph
    shape = _shape(config, placement, counters, machine, structure, stack)
    what = (steps_per_execution, cache, structure, stack)
    if form == "peaks":
        return _peaks_program(config, placement, counters, machine, costs, name, *what)
    if form == "compact":
        return _compact_program(
            config, placement, counters, machine, costs or default_costs(), name, *what, shape, active
        )
    rows = DenseRows(shape, machine.chips, machine.tiles_per_chip, active)
    meta = _emit(config, placement, counters, machine, costs or default_costs(), *what[:2], rows, *what[2:])
    arr = rows.finish()
    return Program.from_arrays(
        chips=machine.chips,
        tiles_per_chip=machine.tiles_per_chip,
        compute_cycles=arr[COMPUTE],
        labels=stack.labels,
        label_id=meta["label_id"],
        sync_scope=meta["scope"],
        bytes_in=arr[IN],
        bytes_out=arr[OUT],
        flows=meta["flows"],
        host=meta["host"],
        name=name,
        sync_extra=meta["sync_extra"],
        exchange_extra=meta["exchange_extra"],
        broadcast=_broadcast(stack.rows)[meta["label_id"]],
    )


@lru_cache(maxsize=8)
def _broadcast(rows: tuple) -> np.ndarray:
    """Per row of a stack's table (:attr:`TableTraits.rows`): whether its exchange is a broadcast (read-only)."""
    out = np.array([row.broadcast for row in rows])
    out.flags.writeable = False
    return out


def _compact_program(
    config, placement, counters, machine, costs, name, steps_per_execution, cache, structure, stack, shape, active
) -> CompactProgram:
    """:func:`build_step_program` with ``compact``: the rows recorded per chip, reduced by the core."""
    rec = ChipCalls(machine.chips, machine.tiles_per_chip)
    meta = _emit(config, placement, counters, machine, costs, steps_per_execution, cache, rec, structure, stack)
    return compact_program(
        _RecordedRows(shape, rec.finish(), machine.tiles_per_chip, active),
        machine,
        name=name,
        labels=stack.labels,
        label_id=meta["label_id"],
        sync_scope=meta["scope"],
        flows=meta["flows"],
        host=meta["host"],
        sync_extra=meta["sync_extra"],
        exchange_extra=meta["exchange_extra"],
        broadcast=_broadcast(stack.rows)[meta["label_id"]],
    )


@dataclass(frozen=True, eq=False)
class _RecordedRows:
    """The step's recorded row calls per chip (:class:`ChipCalls`), replayed for one chip on
    demand (a :class:`tilesim.program.forms.ChipRows`)."""

    shape: StepShape
    calls: list
    tiles_per_chip: int
    active: np.ndarray

    def chip_rows(self, chip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(compute, bytes in, bytes out) ``[S, tiles of a chip]`` float32 of ``chip``."""
        arr = replay_chip_rows(self.shape, self.calls[chip], chip, self.tiles_per_chip, self.active)
        return arr[COMPUTE], arr[IN], arr[OUT]

    def touched_rows(self, chip: int) -> np.ndarray:
        """The supersteps of the slots ``chip``'s recorded calls write (:func:`touched_rows`)."""
        return touched_rows(self.shape, self.calls[chip])


def _peaks_program(
    config, placement, counters, machine, costs, name, steps_per_execution, cache, structure, stack
) -> CompactProgram:
    """:func:`build_step_program` with ``form="peaks"``: each chip's peaks taken as the rows are
    emitted (:class:`PeakRows`), no per-tile detail."""
    memo = None if cache is None else lru_in(cache, ("chip rows",), CACHE_BYTES, memo_nbytes)
    shape = _shape(config, placement, counters, machine, structure, stack)
    rows = PeakRows(shape, machine.chips, machine.tiles_per_chip, memo)
    what = (steps_per_execution, cache, structure, stack)
    meta = _emit(config, placement, counters, machine, costs or default_costs(), *what[:2], rows, *what[2:])
    arr = rows.finish()
    return CompactProgram(
        name=name,
        chips=machine.chips,
        tiles_per_chip=machine.tiles_per_chip,
        labels=stack.labels,
        label_id=np.asarray(meta["label_id"], np.int32),
        sync_scope=np.asarray(meta["scope"], np.int32),
        partitions=(),
        peaks=ChipPeaks.of_chips(arr[COMPUTE], arr[IN], arr[OUT]),
        label_tile_cycles=None,
        onchip_bytes=None,
        **flow_columns(meta["flows"], meta["host"]),
        sync_extra_cycles=np.asarray(meta["sync_extra"], np.float64),
        exchange_extra_cycles=np.asarray(meta["exchange_extra"], np.float64),
    )


@dataclass(frozen=True)
class _Step:
    """What every term of one step is computed from (built once per :func:`_emit`)."""

    config: NetworkConfig
    counters: WorkCounters
    costs: CostModel
    layers: list  # where each layer works (:class:`tilesim.models.snn.placement.roles.LayerTiles`)
    C: int
    TPC: int
    workers: int
    supervisor_cycles: float  # supervisor overhead cycles
    supertile: float  # tiles per supertile: a broadcast reaches both at 8 B/cycle (§3.2)
    recurrent: tuple  # recurrent per layer
    in_graph: tuple  # per layer: computes input gradients
    steps_per_execution: int
    sync_cycles: float  # one sync of all the step's chips
    exchange_fixed_cycles: float
    structure: StepStructure = DEFAULT_STRUCTURE
    chip_sync_cycles: float = 0.0  # one sync of one chip
    host_cycles_per_byte: float = 0.0  # the host variable copy (:func:`host_sync_cycles_per_byte`)
    transfer_steps: int = 1  # steps one host transfer is amortised over
    stack: TableTraits | None = None  # the execution stack (:mod:`tilesim.models.snn.stacks`)
    launch_cycles: float = 0.0  # the host's launch of the step's program, in tile cycles

    def cycles(self, work, vertices):
        """Tile cycles of ``work`` worker cycles over ``vertices`` vertices (barrel scheduling)."""
        return barrel_tile_cycles(work, vertices, self.workers, self.supervisor_cycles)

    def loc(self, phase: str, layer: int, cname: str) -> np.ndarray:
        """float64 [T, n_local]: a per-step counter on the layer's own tiles (= ``LayerTiles.tiles``)."""
        pc = self.counters.get(phase, layer)
        if pc.local_steps is None:
            raise ConfigError(
                config_message("counters", "totals only", "need per-step arrays", "record with per_step_counters=True")
            )
        return pc.local_steps[pc.row(cname)].astype(np.float64)

    def grad_targets(self, l: int) -> list:
        """Layers layer ``l`` sends reduced slot gradients to (:func:`grad_targets`)."""
        return grad_targets(self.recurrent, l)


def _step(config, placement, counters, machine, costs, steps_per_execution, structure, stack) -> _Step:
    L = config.n_layers
    check_layer_chips(placement, stack)
    with_input_grad = {p.layer for p in counters.phases if p.phase == "input_grad"}
    return _Step(
        config,
        counters,
        costs,
        layer_layout(config, placement, machine.tiles_per_chip),
        machine.chips,
        machine.tiles_per_chip,
        machine.chip.workers_per_tile,
        machine.chip.supervisor_overhead_cycles,
        float(machine.chip.tiles_per_supertile),
        config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * L,
        tuple(l in with_input_grad for l in range(L)),
        steps_per_execution,
        float(machine.group_sync_cycles(machine.chips)),
        float(machine.chip.exchange_fixed_cycles),
        structure,
        float(machine.chip.sync_cycles),
        host_sync_cycles_per_byte(machine, structure, costs),
        structure.transfer_steps(steps_per_execution),
        stack,
        stack.launch_s * machine.clock_hz,
    )


def _forward_terms(s: _Step, l: int) -> dict:
    """The forward-pass fields of :class:`LayerTerms` for layer ``l``."""
    ly, T, B, TPC, costs = s.layers[l], s.config.timesteps, s.config.batch, s.TPC, s.costs
    vc = costs.coef("vertex_calls")
    recv = s.loc("state_update", l, "bytes_received")
    vert = s.loc("state_update", l, "vertices")
    work = (
        costs.worker_cycles(
            {
                "synaptic_adds": s.loc("state_update", l, "synaptic_adds"),
                "neurons_updated": s.loc("state_update", l, "neurons_updated"),
            }
        )
        + vc * vert
    )
    flags = s.loc("spike_detect", l, "neurons_scanned")
    # combine: merge the entries actually kept (real + gradient-only) per sample
    kept = s.loc("spike_detect", l, "entries_kept").sum(axis=1)  # [T] over tiles
    # compaction: 6 chunk vertices per tile scan their flags, then one vertex merges them
    flags_in, compaction, chunk_out = _compaction_terms(s, l, s.config.layers[l + 1], ly.f)
    chunks_in = chunk_out * 2 * ly.f
    if ly.split:  # the combiner takes every part's 2·f_c chunk lists
        chunks_in = sum(_compaction_terms(s, l, p.n, p.f)[2] * 2 * p.f for p in ly.parts)
    list_bytes = 4.0 * (s.config.n_max[l] + 2)
    return {
        "lists_in": recv / s.supertile,
        "lists_copy": (recv[:, 0] if ly.tiles.size else np.zeros(T)) / TPC,
        "update": s.cycles(work, vert) + s.cycles(costs.coef("neurons_scanned") * flags + vc * flags, flags),
        "flags_out": s.loc("spike_detect", l, "bytes_sent"),
        "flags_in": flags_in,
        "compaction": compaction,
        "chunk_out": chunk_out,
        "chunks_in": chunks_in,
        "combine": s.cycles(costs.coef("list_entries_merged") * (kept / B + 2 * ly.f) + vc, 1),
        "list_out": list_bytes,
        "sequence_in": B * list_bytes / TPC,
        "list_link": B * list_bytes,
        "inputs_link": 4.0 * B * (s.config.input_cap + 1),
    }


def _compaction_terms(s: _Step, l: int, n: int, f: int) -> tuple:
    """(flags in, cycles, chunk list out) per compaction tile of ``n`` neurons of layer ``l`` spread
    over ``f`` tiles per (sample, threshold): one uint32 per neuron and threshold in; 6 chunk vertices
    scan the flags, one vertex merges their lists; the tile's list (up to N_max) out."""
    costs, vc = s.costs, s.costs.coef("vertex_calls")
    chunk = -(-n // f)  # neurons per compaction tile
    tile_list = min(s.config.n_max[l], chunk)
    comp_work = costs.coef("flags_scanned") * chunk + vc * 6
    comb1 = costs.coef("list_entries_merged") * tile_list + vc
    return 4.0 * chunk, float(s.cycles(comp_work, 6) + s.cycles(comb1, 1)), 4.0 * (tile_list + 1)


def _part_terms(s: _Step, l: int) -> tuple:
    """The :class:`PartTerms` of each chip of layer ``l`` (one that spans chips): its compaction tiles'
    terms from its own neurons, its stage-1 reduction from its own owner tiles' partials; the head
    chip also adds the other chips' partial sums (2·B·(N_max+1) values per gradient target each)."""
    ly, TPC, B = s.layers[l], s.TPC, s.config.batch
    vc = s.costs.coef("vertex_calls")
    out = []
    for p in ly.parts:
        partials_in = reduce = None
        if s.in_graph[l]:
            cols = slice(p.first, p.stop)
            partials_in = s.loc("input_grad", l, "partial_bytes")[:, cols].sum(axis=1) / TPC
            adds = s.loc("input_grad", l, "reduction_adds")[:, cols].sum(axis=1)
            if p.chip == ly.chip:
                adds = adds + (len(ly.parts) - 1) * sum(2.0 * B * (s.config.n_max[t] + 1) for t in s.grad_targets(l))
            reduce = s.cycles(s.costs.coef("reduction_adds") * (adds / TPC) + vc * 6, 6)
        out.append(PartTerms(*_compaction_terms(s, l, p.n, p.f), partials_in, reduce))
    return tuple(out)


def _backward_terms(s: _Step, l: int) -> dict:
    """The backward-pass and once-per-step fields of :class:`LayerTerms` for layer ``l``."""
    ly, T, B, TPC, costs, nmax = s.layers[l], s.config.timesteps, s.config.batch, s.TPC, s.costs, s.config.n_max
    vc, W = costs.coef("vertex_calls"), s.stack.dw_copies
    # replicated lists: own ids + counts + g (state grad), the input list (weight grad)
    own = s.loc("state_grad", l, "bytes_received")
    inp = s.loc("weight_grad", l, "bytes_received")
    one_in = inp[:, 0] if ly.tiles.size else np.zeros(T)
    vert = s.loc("state_grad", l, "vertices")
    work = (
        costs.worker_cycles(
            {
                "slots_scanned": s.loc("state_grad", l, "slots_scanned"),
                "slots_applied": s.loc("state_grad", l, "slots_applied"),
                "neurons_updated": s.loc("state_grad", l, "neurons_updated"),
            }
        )
        + vc * vert
    )
    wv = s.loc("weight_grad", l, "vertices")
    if W != WORKERS_PER_TILE:  # one weight-gradient kernel per dW copy (the counters hold Poplar's 6 vertices)
        wv = np.where(wv > 0, float(W), 0.0)
    wg = s.cycles(costs.worker_cycles({"grad_adds": s.loc("weight_grad", l, "grad_adds")}) + vc * wv, wv)
    partials = partials_in = reduce = None
    if s.in_graph[l]:
        iv = s.loc("input_grad", l, "vertices")
        wg += s.cycles(costs.worker_cycles({"macs": s.loc("input_grad", l, "macs")}) + vc * iv, iv)
        partials = s.loc("input_grad", l, "partial_bytes")
        partials_in = partials.sum(axis=1) / TPC  # stage-1 reduction spread over the chip
        adds = s.loc("input_grad", l, "reduction_adds").sum(axis=1) / TPC
        reduce = s.cycles(costs.coef("reduction_adds") * adds + vc * 6, 6)
    # once per step: dW reduction (zeroing, W copies -> 1) and the optimizer on the weights per tile;
    # with one copy there is no reduction and the optimizer zeroes the dW it consumes
    upd = s.counters.get("optimizer", l).local_totals[0].astype(np.float64)
    nw = np.where(upd > 0, W, 0)
    opt = "adam_updates" if s.config.optimizer == "adam" else "sgd_updates"
    zero = 0.0 if s.stack.dw_reduce else costs.coef("dw_zero_writes") * upd
    g_bytes = B * (8.0 * nmax[l] + 8)
    return {
        "replicas_in": (own + inp) / s.supertile,
        "own_copy": (own[:, 0] if ly.tiles.size else np.zeros(T)) / TPC,
        "input_copy": one_in / TPC,
        "input_link": float(one_in[0]),
        "state_grad": s.cycles(work, vert),
        "weight_grad": wg,
        "partials_out": partials,
        "partials_in": partials_in,
        "reduce": reduce,
        "slot_grads": g_bytes / TPC,
        "slot_grads_link": g_bytes,
        "dw_reduce": s.cycles(
            costs.coef("dw_reduce_adds") * (W - 1) * upd / W + costs.coef("dw_zero_writes") * W * upd / W, nw
        ),
        "optimizer": s.cycles(costs.coef(opt) * upd / W + zero, nw),
        "weights": upd.sum(),
        "loss": float(s.cycles(costs.coef("loss_entries") * B * nmax[l] / ly.tiles.size + vc, 1)),
        "loss_in": B * (8.0 * nmax[l] + 8),
    }


def _layer_terms(s: _Step, l: int) -> LayerTerms:
    """The :class:`LayerTerms` of layer ``l``: everything of it that does not depend on where
    its tiles are (per-tile arrays on its own tiles, per-step vectors, scalars)."""
    parts = _part_terms(s, l) if s.layers[l].split else ()
    return LayerTerms(**_forward_terms(s, l), **_backward_terms(s, l), parts=parts)


def _costs_key(costs: CostModel) -> tuple:
    return (costs.name, costs.version, tuple(sorted(costs.coefficients.items())))


def _all_terms(s: _Step, cache: dict | None) -> list:
    """Every layer's :class:`LayerTerms`; with a ``cache``, kept in a :class:`BytesLRU` under
    a content key: the step's settings and the counters' ``source`` (what they were counted
    from). Counters without a source (a functional run) are not cached."""
    L = s.config.n_layers
    if cache is None:
        return [_layer_terms(s, l) for l in range(L)]
    mine = lru_in(cache, ("layer terms",), CACHE_BYTES, LayerTerms.nbytes)
    base = (s.config, _costs_key(s.costs), s.TPC, s.supertile, s.workers, s.supervisor_cycles, s.stack)
    out = []
    for l in range(L):
        source = s.counters.get("state_update", l).source
        key = None if source is None else base + (l, source, s.layers[l].signature())
        hit = None if key is None else mine.get(key)
        if hit is None:
            hit = _layer_terms(s, l)
            if key is not None:
                mine[key] = hit
        out.append(hit)
    return out


def applies(only: str, l: int, n_layers: int, input_grad: bool) -> bool:
    """Whether a :class:`Write` or :class:`Flow` for the layers ``only`` names applies to layer
    ``l`` of ``n_layers`` (``input_grad``: the layer computes input gradients)."""
    return (
        only == EVERY_LAYER or (only == WITH_INPUT_GRAD and input_grad) or (only == OUTPUT_LAYER and l == n_layers - 1)
    )


@lru_cache(maxsize=1024)
def _owner_table(shape: StepShape, l: int, with_input_grad: bool, output: bool) -> tuple:
    """((array, slot, term), ...): the :data:`OWNER` writes of layer ``l`` in the step."""
    only = {EVERY_LAYER: True, WITH_INPUT_GRAD: with_input_grad, OUTPUT_LAYER: output}
    return tuple(
        (w.array, shape.slot(j, l), w.term)
        for j, row in enumerate(shape.rows)
        for w in row.writes
        if w.where == OWNER and only[w.only]
    )


def _write(s: _Step, terms: list, rows: RowSink, w: Write, k: int, l: int) -> None:
    """Add the term ``w`` of layer ``l`` to slot ``k`` of ``rows`` (any place but OWNER, HOST_SYNC)."""
    ly = s.layers[l]
    if ly.split and w.where in (CHIP, COMPACTION, OUTPUT_TILES, GRAD_SENDER):
        _write_split(s, terms, rows, w, k, l)
    elif w.where == CHIP:
        rows.chip(w.array, k, ly.chip, getattr(terms[l], w.term))
    elif w.where == INPUT_CHIP:
        for c in input_chips(s.layers, l):
            rows.chip(w.array, k, c, getattr(terms[l], w.term))
    elif w.where in (COMPACTION, COMBINER):
        rows.spread(w.array, k, ly.comp_tiles if w.where == COMPACTION else ly.comb_tiles, getattr(terms[l], w.term))
    elif w.where == OUTPUT_TILES:
        rows.local(w.array, k, ly.tiles, np.full(ly.tiles.size, getattr(terms[l], w.term)))
    else:
        for t in s.grad_targets(l):
            for c in (ly.chip,) if w.where == GRAD_SENDER else s.layers[t].chips:
                rows.chip(w.array, k, c, getattr(terms[t], w.term))


def _write_split(s: _Step, terms: list, rows: RowSink, w: Write, k: int, l: int) -> None:
    """:func:`_write` of a place on the chips of layer ``l``, which spans chips: on each chip its
    part's term (:class:`PartTerms`) or the layer's; a gradient sender's partial sums received by
    the head chip from each other chip (:mod:`tilesim.models.snn.stacks.dataflow` "Layers across chips")."""
    ly, mine = s.layers[l], terms[l]
    for p, pt in zip(ly.parts, mine.parts):
        if w.where == COMPACTION:
            rows.spread(w.array, k, p.comp_tiles, getattr(pt, w.term))
        elif w.where == OUTPUT_TILES:
            rows.local(w.array, k, ly.tiles[p.first : p.stop], np.full(p.stop - p.first, getattr(mine, w.term)))
        elif w.where == CHIP:
            rows.chip(w.array, k, p.chip, getattr(pt if hasattr(pt, w.term) else mine, w.term))
        else:  # GRAD_SENDER: every chip sends its partial sum to the head, which sends the sum on
            for t in s.grad_targets(l):
                rows.chip(w.array, k, p.chip, getattr(terms[t], w.term))
                if p.chip != ly.chip and w.array == OUT:
                    rows.chip(IN, k, ly.chip, getattr(terms[t], w.term))


def host_sync_cycles_per_byte(machine, structure: StepStructure, costs: CostModel) -> float:
    """Tile cycles per byte of trainable state the host variable copy moves (device→host, and back
    for a round trip) at the fitted or the documented rate (:func:`host_copy_seconds_per_byte`; a cost
    model without ``host_copy_ns_per_byte`` moves at the documented rate)."""
    if "epoch_residual_cycles_per_weight" in costs.coefficients:
        raise ConfigError(
            config_message(
                f"costs {costs.name!r}: epoch_residual_cycles_per_weight",
                costs.coefficients["epoch_residual_cycles_per_weight"],
                "is no longer a coefficient: the per-weight epoch cost is the host round trip of weights and "
                "optimizer state now (host_copy_ns_per_byte, models/snn/step/structure.py)",
                "re-run tilesim calibrate on your cases, or drop --costs to use the shipped calibration",
            )
        )
    fitted = float(costs.coefficients.get("host_copy_ns_per_byte", 1e9 / D2H_BYTES_PER_S))
    return machine.clock_hz * host_copy_seconds_per_byte(machine, structure, fitted)


def host_excess_share(machine, structure: StepStructure, costs: CostModel) -> float:
    """Share of the host variable copy's time beyond the round trip at the documented rate:
    ``1 − s_doc / s_used`` with ``s`` the seconds per byte of :func:`host_copy_seconds_per_byte` under
    ``structure`` and under the same structure at ``host_rate="documented"``; 0 at the documented rate
    (or a fitted rate no slower). The copy's time splits exactly: ``t = t·(1 − share) + t·share``, the
    first the sourced round trip (``host: variable sync``), the second the fitted excess no source
    explains (:data:`tilesim.models.snn.step.table.HOST_EXCESS_LABEL`, booked as residual)."""
    used = host_sync_cycles_per_byte(machine, structure, costs)
    documented = machine.clock_hz * host_copy_seconds_per_byte(machine, replace(structure, host_rate="documented"), 0.0)
    return max(0.0, 1.0 - documented / used) if used > 0 else 0.0


def _host_sync(s: _Step, terms: list, rows: RowSink, w: Write, k: int) -> None:
    """Per-chip once-per-step terms on the op's tiles (:data:`HOST_SYNC`): the host variable copy of
    the chip's trainable state (weights and optimizer slots), amortised over the steps between
    transfers; with ``host_shared="host_link"`` each chip waits for its host link's whole group."""
    on_chip = np.zeros(s.C)
    for l, ly in enumerate(s.layers):
        on_chip[ly.chip] += getattr(terms[l], w.term)
    if s.structure.host_shared == "host_link":
        group = np.arange(s.C) // CHIPS_PER_HOST_LINK
        on_chip = np.bincount(group, weights=on_chip)[group]
    slots = 2 if s.config.optimizer == "adam" else 0
    per_step = s.host_cycles_per_byte * 4.0 * (1 + slots) * on_chip / s.transfer_steps
    for c in range(s.C):
        if per_step[c]:
            rows.chip(w.array, k, c, per_step[c], masked=True)


def _links(s: _Step, terms: list, f: Flow, l: int) -> list:
    """(src chip, dst chip, bytes) of flow ``f`` of layer ``l`` (one that applies to it) that cross chips."""
    lay, ly = s.layers, s.layers[l]
    if f.route == TO_NEXT_LAYER:  # the merged list to the next layer's chips and the layer's own other chips
        dst = (lay[l + 1].chips if l + 1 < len(lay) else ()) + ly.chips[1:]
        ends = [(ly.chip, c, l) for c in dict.fromkeys(dst)]
    elif f.route == FROM_INPUT_LAYER:
        ends = [(lay[l - 1].chip, c, l) for c in ly.chips if c not in lay[l - 1].chips] if l > 0 else []
    elif f.route in (TO_LAYER_CHIPS, INPUT_TO_CHIPS):
        ends = [(ly.chip, c, l) for c in ly.chips[1:]] if f.route == TO_LAYER_CHIPS or l == 0 else []
    elif f.route == TO_HEAD_CHIP:  # each other chip's B·2·f_c chunk lists to the head chip's combiners
        B = s.config.batch
        return [
            (p.chip, ly.chip, B * 2 * p.f * pt.chunk_out)
            for p, pt in zip(ly.parts, terms[l].parts)
            if p.chip != ly.chip
        ]
    else:  # the other chips' partial sums to the head chip, then the sum to each chip of every target
        ends = [
            x
            for t in s.grad_targets(l)
            for x in [(c, ly.chip, t) for c in ly.chips[1:]] + [(ly.chip, c, t) for c in lay[t].chips]
        ]
    return [(a, b, getattr(terms[t], f.term)) for a, b, t in ends if a != b]


STAGE1_SETS = 1
"""Compute sets of a ``per_chip`` row that span every chip: the input-gradient reduction's stage 1
(``customReduceSparseInpSpikesGrad_stage1``, ``poplar_code_stateBasedReset.cpp``: one compute set whose
vertices sit on every IPU, one ``Execute``); the rest of the row, stage 2's ``reduceMany``, runs per IPU
virtual graph, one after another. On C chips the row's first slot runs stage 1 on all of them at once."""


def _slot_keeps(shape: StepShape, k: int, layer_chips: tuple, l: int, w=None) -> bool:
    """Whether slot ``k`` carries layer ``l``'s write ``w`` (a flow if ``w`` is None): a slot of
    a row split by chip runs its compute (stage 1) in the first slot, for every chip at once
    (:data:`STAGE1_SETS`); the row's exchange rides with the last."""
    c = shape.chip[k] if shape.chip else -1
    if c < 0:
        return True
    if w is not None and w.array == COMPUTE:
        return c == shape.reduce_chips[0]
    return c == shape.reduce_chips[-1]


@lru_cache(maxsize=256)
def _plan(shape: StepShape, in_graph: tuple, layer_chips: tuple) -> tuple:
    """The table unrolled over ``shape`` for layers ``in_graph`` (computing input gradients or
    not) on chips ``layer_chips``: per slot, in order, ``(slot, sets first, [(layer, Write)],
    [host Writes], [(layer, Flow)])`` with only the writes and flows that apply to each layer."""
    L = shape.L
    out = []
    for k, (j, lk) in enumerate(zip(shape.row, shape.layer)):
        row = shape.rows[j]
        layers = range(L) if lk < 0 else [lk]
        writes = tuple(
            (l, w)
            for l in layers
            for w in row.writes
            if w.where not in (OWNER, *PER_CHIP_PLACES)
            and applies(w.only, l, L, in_graph[l])
            and _slot_keeps(shape, k, layer_chips, l, w)
        )
        flows = tuple(
            (l, f)
            for l in layers
            for f in row.flows
            if applies(f.only, l, L, in_graph[l]) and _slot_keeps(shape, k, layer_chips, l)
        )
        host = tuple(w for w in row.writes if w.where in PER_CHIP_PLACES)
        out.append((k, row, writes, host, flows))
    return tuple(out)


def _emit(
    config,
    placement,
    counters,
    machine,
    costs,
    steps_per_execution,
    cache,
    rows: RowSink,
    structure=DEFAULT_STRUCTURE,
    stack: TableTraits | None = None,
) -> dict:
    """Write every term of the step into ``rows`` (a :class:`RowSink`), row by row of the stack's
    table (:func:`tilesim.models.snn.step.table.stack_rows`; default: the machine vendor's stack); return
    the rest of the program: labels, sync scopes, folded supersteps, link flows, host transfers."""
    stack = stack or poplar_traits(machine.chip.workers_per_tile)
    s = _step(config, placement, counters, machine, costs, steps_per_execution, structure, stack)
    L, cs_cycles = config.n_layers, costs.coef("compute_set_cycles")
    shape = _shape(config, placement, counters, machine, structure, stack)
    terms = _all_terms(s, cache)
    for l, ly in enumerate(s.layers):  # each layer on its own tiles
        table = _owner_table(shape, l, s.in_graph[l], l == L - 1)
        if not ly.split:
            rows.owner(ly.tiles, terms[l], table)
            continue
        for a, k, name in table:  # a layer on several chips: each chip's tiles on their own
            v = getattr(terms[l], name)
            for p in ly.parts:
                rows.local(a, k, ly.tiles[p.first : p.stop], v[..., p.first : p.stop])
    any_in = any(s.in_graph)
    links = []  # per slot: [(src chip, dst chip, bytes)]
    layer_chips = tuple(ly.chip for ly in s.layers)
    for k, row, writes, host, flows in _plan(shape, s.in_graph, layer_chips):
        sets = row.compute_sets.count(L, any_in) * cs_cycles
        own_chip = shape.chip[k] if shape.chip else -1  # a per-chip slot's compute sets run on its chip only
        if own_chip >= 0:  # ... but stage 1's run on every chip, in the first slot only
            sets -= STAGE1_SETS * cs_cycles
            if own_chip == shape.reduce_chips[0]:
                _overhead(rows, k, STAGE1_SETS * cs_cycles, -1)
        if row.sets_first:
            _overhead(rows, k, sets, own_chip)
        for l, w in writes:  # layer by layer, in the row's order
            _write(s, terms, rows, w, k, l)
        for w in host:
            _host_sync(s, terms, rows, w, k)
        if row.launch and s.launch_cycles:  # the host launches the program on every chip
            for c in range(s.C):
                rows.chip(COMPUTE, k, c, s.launch_cycles, masked=True)
        if not row.sets_first and sets:
            _overhead(rows, k, sets, own_chip)
        links.append([x for l, f in flows for x in _links(s, terms, f, l)])
    return _meta(s, shape, links, any_in)


def _overhead(rows: RowSink, k: int, cycles: float, chip: int) -> None:
    """Compute-set cycles of slot ``k`` on every tile of the op, or of ``chip`` (≥ 0) only."""
    if chip < 0:
        rows.overhead(k, cycles)
    elif cycles:
        rows.chip(COMPUTE, k, chip, cycles, masked=True)


@lru_cache(maxsize=256)
def _row_meta(shape: StepShape, any_in: bool) -> tuple:
    """Per superstep: the label id and the supersteps folded into it (read-only arrays;
    ``shape.merged``: a row's consecutive copies are one exchange)."""
    label_id = np.zeros(shape.supersteps, np.int32)
    n_folded = np.zeros(shape.supersteps, np.int64)
    for k, j in enumerate(shape.row):
        at = shape.rows_of(k)
        label_id[at] = j
        n_folded[at] = shape.rows[j].folded(shape.L, any_in, shape.merged)
        if shape.chip and 0 <= shape.chip[k] != shape.reduce_chips[0]:  # stage 1 ran in the first slot
            n_folded[at] -= STAGE1_SETS
    label_id.flags.writeable = n_folded.flags.writeable = False
    return label_id, n_folded


def _meta(s: _Step, shape: StepShape, links: list, any_in: bool) -> dict:
    """Labels, folded supersteps and sync scope per superstep; link flows in superstep order
    within each time step; the host infeed. Sync scope (``structure.sync_scope``): one chip: its
    own; ``"all"``: every superstep syncs all chips; ``"chip"``: only supersteps with link flows
    do, and every folded call syncs its own chip."""
    T, C = shape.T, s.C
    label_id, n_folded = _row_meta(shape, any_in)
    chip_scope = C > 1 and s.structure.sync_scope == "chip"
    scope = np.full(shape.supersteps, SYNC_CHIP if C == 1 or chip_scope else SYNC_ALL, np.int32)
    flows = []
    for i in range(T):  # the i-th forward and the i-th backward iteration
        for k in range(len(shape.row)):
            if links[k]:
                step = shape.start[k] + shape.stride[k] * (i if shape.stride[k] > 0 else T - 1 - i)
                flows += [(step, a, b, nb) for a, b, nb in links[k]]
                if chip_scope:
                    scope[step] = SYNC_ALL
    if chip_scope and shape.reduce_chips:  # stage 1's compute set spans every chip: its superstep syncs all
        scope[shape.rows_of(shape.chip.index(shape.reduce_chips[0]))] = SYNC_ALL
    f_arr = tuple(np.asarray(x) for x in zip(*flows)) if flows else None
    host = _host_transfers(s, shape)
    sync_extra = n_folded * (s.chip_sync_cycles if chip_scope else s.sync_cycles)
    exchange_extra = n_folded * s.exchange_fixed_cycles
    if C > 1 and s.stack.pipeline_stages:
        _pipeline_switches(s, shape, scope, sync_extra, exchange_extra)
    return {
        "label_id": label_id.copy(),
        "scope": scope,
        "flows": f_arr,
        "host": host,
        "sync_extra": sync_extra,
        "exchange_extra": exchange_extra,
    }


def _host_transfers(s: _Step, shape: StepShape) -> tuple:
    """(superstep, chip, bytes) arrays of the step's host transfers: the input (T·B·(input_cap+1)
    ids and counts and B labels, 4 bytes each) to the first layer's chip on the first superstep of
    the stack's ``host_in`` row (Poplar's infeed, TT-Metal's write to DRAM, CSL's input stream) and,
    where the stack reads it back (``host_out``), the per-sample loss (4·B bytes) from the output
    layer's chip."""
    T, B = shape.T, s.config.batch
    step, chip, nbytes = [], [], []
    for j, row in enumerate(shape.rows):
        if row.host_in:
            step.append(shape.start[shape.slot(j)])
            chip.append(s.layers[0].chip)
            nbytes.append(T * B * 4.0 * (s.config.input_cap + 1) + 4.0 * B)
        elif row.host_out:
            step.append(shape.start[shape.slot(j)])
            chip.append(s.layers[-1].chip)
            nbytes.append(4.0 * B)
    return np.array(step, np.int32), np.array(chip, np.int32), np.array(nbytes)


def pipeline_switches(chips: int) -> int:
    """Stage switches per training step of the authors' multi-IPU model: ``chips`` pipeline stages
    (stage 0, the whole op, on all IPUs; C−2 identity stages and the sparse→dense + loss stage on
    the last IPU; ``PipelineSchedule.Sequential``, gradient accumulation 1; ``multi_ipu.py``
    ``model_fn_sparse_layer_multi_ipu``), each crossed forward and backward: 2(C−1); none on one chip."""
    return 2 * (chips - 1) if chips > 1 else 0


def _pipeline_switches(s: _Step, shape: StepShape, scope, sync_extra, exchange_extra) -> None:
    """Book the pipeline's stage switches (:func:`pipeline_switches`) on the loss superstep: each
    syncs every chip (the stages span different IPUs) and is one exchange, the inter-stage copy of
    the last layer's output (ids + counts forward, their gradient backward) on the last chip. That
    tensor is spread over the chip's tiles (``createSliceableTensor`` on the IPU's virtual graph),
    so its bytes per tile are negligible: a switch costs a sync of all chips and an exchange set-up."""
    at = shape.start[shape.slot([r.label for r in shape.rows].index("loss"))]
    n = pipeline_switches(s.C)
    scope[at] = SYNC_ALL
    sync_extra[at] += n * s.sync_cycles
    exchange_extra[at] += n * s.exchange_fixed_cycles
