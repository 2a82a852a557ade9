"""One sparse-BPTT training step as a BSP program, and its per-tile SRAM, on a tile machine.

The supersteps follow the authors' IPU implementation (snn-on-ipu.md §3.3, §3.4, §7; the
``sparse_layer`` custom op of ``jrfinkbeiner/graphcore_snn`` as benchmarked in Sept 2022): one
Poplar op runs the whole network and time loop; the vertex compute sets hold *all* layers at
once (the one-step delay between layers), but the PopLibs calls around them
(``dynamicSlice``/``dynamicUpdate`` of the sequences, ``Copy`` programs, ``poprand``,
``mulInPlace``) are issued *per layer*, each its own compute set or exchange with its own sync.
Each compute set's time comes from the per-tile work counters of the functional run
(``models.snn.counters``) through a :class:`tilesim.costs.CostModel`; a superstep's exchange
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
  ``bwd: reduce input grad``  stage-1 sums and the stage-2 ``reduceMany``.
``dW reduce`` (zeroing, 6 copies → 1), ``optimizer`` (Adam or SGD), once per step,
``host: variable sync``: the trainable state (weights and optimizer slots, 4·(1 + slots)·weights
bytes per chip) crosses the host link once per execution or per epoch, one way or both
(:class:`models.snn.structure.StepStructure`), at the documented host-traffic rate
(:func:`models.snn.structure.host_copy_bytes_per_s`), amortised over the steps in between; and
``unexplained: per-weight epoch cost``: what the 12 measured steps need beyond every modelled
mechanism, a fitted ``epoch_residual_cycles_per_weight`` per weight of the chip, amortised over
the epoch's steps (a labelled residual, not a mechanism; shown on its own in every breakdown).
The input sequence (T·B·(input_cap+1)·4 bytes) arrives once per step by host infeed.

Superstep overhead. A compute set costs ``compute_set_cycles`` on every tile (control code,
vertex launch) on top of its vertices; every superstep costs the machine's sync and exchange
fixed cycles. The PopLibs calls listed above are *folded* into the row they precede
(:attr:`StepRow.compute_sets`, :attr:`StepRow.copies`): a row
standing for ``k`` compute sets and ``c`` exchange-only copies adds ``k·compute_set_cycles`` of
compute to every tile (tile 0 of chip 0 is left free, as in the authors' op) and
``(k + c − 1)·sync`` / ``(k + c − 1)·exchange_fixed`` cycles that the breakdown books as sync /
exchange (``Program.sync_extra_cycles`` / ``exchange_extra_cycles``).

Multi-chip (:class:`models.snn.structure.StepStructure`, ``sync_scope``): with ``"all"`` one
Poplar graph spans all chips and every superstep syncs all chips (§3.6); with ``"chip"`` (the
default) only supersteps whose exchange carries cross-chip link flows sync all chips, the rest
(and every folded PopLibs call) sync their own chip. ``copies="merged"`` folds a row's
consecutive ``Copy`` programs into one exchange.

Changes against the first version (which had 6 rows per time step): the per-layer PopLibs
supersteps, the per-compute-set cost, the per-layer replicate exchanges, the dense-flag and
tile-combine compute sets, the host infeed and the amortised variable sync were added after
comparing with the 12 measured Bow steps (``models/snn/calibration``); the coefficients are
fitted by ``tilesim calibrate``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from functools import cached_property, lru_cache
from importlib import resources
from typing import Protocol

import numpy as np

from mapping.core import Mapping, group_tiles
from models.snn.counters import (
    CACHE_BYTES,
    WORKERS_PER_TILE,
    WorkCounters,
    layer_memory,
)
from models.snn.network import NetworkConfig
from models.snn.structure import DEFAULT_STRUCTURE, StepStructure, host_copy_bytes_per_s
from tilesim.costs import CostModel, barrel_tile_cycles, load_costs
from tilesim.errors import ConfigError, MappingError, config_message, require
from tilesim.fabric import make_fabric
from tilesim.memo import BytesLRU, lru_in
from tilesim.memory import EntryGroup, MemoryLedger
from tilesim.program import SYNC_ALL, SYNC_CHIP, ChipPeaks, CompactProgram, Program, TileRows, flow_columns

__all__ = [
    "default_costs",
    "uncalibrated_costs",
    "compaction_spread",
    "build_step_program",
    "predict_step_s",
    "snn_memory",
    "PHASE_LABELS",
    "STEPS_PER_EXECUTION",
    "STEP_ROWS",
    "StepRow",
    "Write",
    "Flow",
    "Calls",
    "LayerTerms",
    "StepShape",
    "step_shape",
    "RowSink",
    "place_tiles",
    "grad_targets",
    "applies",
    "label_sums",
    "RESIDUAL_LABELS",
    "book_step",
]

STEPS_PER_EXECUTION = 52  # the calibration runs: one device execution per epoch of 52 steps


@lru_cache(maxsize=1)
def default_costs() -> CostModel:
    """The shipped calibrated cost model (``tilesim/presets/costs/snn.toml``; read once)."""
    with resources.as_file(resources.files("tilesim") / "presets" / "costs" / "snn.toml") as p:
        return load_costs(p)


def uncalibrated_costs() -> CostModel:
    """Version 0: first-principles instruction counts, before any fit (``models/snn/costs.toml``)."""
    with resources.as_file(resources.files("models.snn") / "costs.toml") as p:
        return load_costs(p)


def compaction_spread(n: int) -> int:
    """f: tiles per (sample, threshold) the dense→sparse step spreads a layer of n neurons over
    (§3.3 step 5: w = ⌊n/64⌋ + [n mod 64 > 32] workers; f = max(⌊w/6⌋ + [w mod 6 ≥ 2], 1))."""
    w = n // 64 + int(n % 64 > 32)
    return max(w // 6 + int(w % 6 >= 2), 1)


@dataclass(frozen=True)
class _Layer:
    chip: int
    tiles: np.ndarray  # owner tiles (global)
    comp_tiles: np.ndarray  # compaction tiles (global), B·2·f of them
    comb_tiles: np.ndarray  # combiner tiles (global), B of them
    f: int


def _layout_nbytes(layout: list) -> int:
    return sum(x.tiles.nbytes + x.comp_tiles.nbytes + x.comb_tiles.nbytes for x in layout)


# (placement's tile ids, layer sizes, batch, tiles per chip) -> [_Layer]: _layout's memo
_LAYOUTS = BytesLRU(32 << 20, getsizeof=_layout_nbytes)


def _layout(config: NetworkConfig, placement: Mapping, tiles_per_chip: int) -> list[_Layer]:
    """Owner, compaction and combiner tiles of every layer; remembered by the placement's
    content and the config fields it depends on (the layer sizes and the batch)."""
    h = hashlib.blake2b(digest_size=16)
    for tiles in placement.tile_of_neuron:
        h.update(np.int64(tiles.size).tobytes())
        h.update(tiles.tobytes())
    key = (h.digest(), config.layers, config.batch, tiles_per_chip)
    hit = _LAYOUTS.get(key)
    if hit is None:
        hit = _LAYOUTS[key] = _make_layout(config, placement, tiles_per_chip)
    return hit


def _make_layout(config: NetworkConfig, placement: Mapping, tiles_per_chip: int) -> list[_Layer]:
    B = config.batch
    out = []
    chip_layers: dict[int, list[int]] = {}
    for l, (tiles, _) in enumerate(placement.groupings):
        first, last = int(tiles[0]) // tiles_per_chip, int(tiles[-1]) // tiles_per_chip
        if first != last:
            chips = np.unique(tiles // tiles_per_chip)
            raise MappingError(
                f"layer {l + 1} spans chips {chips.tolist()}: the sparse op needs each "
                "layer on one chip; use a placement that keeps layers whole"
            )
        chip_layers.setdefault(first, []).append(l)
    for l, (tiles, _) in enumerate(placement.groupings):
        chip = int(tiles[0]) // tiles_per_chip
        mine = chip_layers[chip]
        spreads = tuple(compaction_spread(config.layers[k + 1]) for k in mine)
        comp, comb = _compaction_tiles(chip, spreads, B, tiles_per_chip)[mine.index(l)]
        out.append(_Layer(chip, tiles, comp, comb, spreads[mine.index(l)]))
    return out


@lru_cache(maxsize=4096)
def _compaction_tiles(chip: int, spreads: tuple, B: int, tiles_per_chip: int) -> list:
    """Per layer of a chip (compaction spreads ``f`` in order): its compaction tiles (B·2·f) and
    combiner tiles (B), spread evenly over the chip (§3.3). Read-only arrays (cached)."""
    counts = [B * 2 * f for f in spreads]
    total = sum(counts)
    out, first = [], 0
    for f, n in zip(spreads, counts):
        slots = (np.arange(first, first + n) * tiles_per_chip) // max(total, tiles_per_chip)
        comp = (chip * tiles_per_chip + (slots % tiles_per_chip)).astype(np.int64)
        comb = comp[:: 2 * f][:B].copy()
        comp.flags.writeable = comb.flags.writeable = False
        out.append((comp, comb))
        first += n
    return out


# ---- the step as data ---------------------------------------------------------------------------
# The program's per-tile arrays a term is added to: compute cycles, bytes received, bytes sent.
COMPUTE, IN, OUT = "compute", "in", "out"
ARRAYS = (COMPUTE, IN, OUT)

# Where a term of layer l lands.
OWNER = "owner tiles"  # the layer's own tiles; the term is [T, n_local] (or [n_local] once per step)
CHIP = "layer chip"  # every tile of the layer's chip, each the term ([T] or a scalar)
INPUT_CHIP = "input chip"  # every tile of the chip of the layer's input list (layer l-1; layer 1: its own)
COMPACTION = "compaction tiles"  # each of the layer's B·2·f compaction tiles (a tile may occur twice)
COMBINER = "combiner tiles"  # each of the layer's B combiner tiles
OUTPUT_TILES = "output tiles"  # the layer's own tiles, the same scalar on each (the loss)
GRAD_SENDER = "gradient sender"  # the layer's chip, once per layer it sends slot gradients to (that layer's term)
GRAD_TARGET = "gradient targets"  # the chip of each layer it sends slot gradients to (that layer's term)
HOST_SYNC = "host sync"  # the op's tiles of each chip: the term summed over the chip's layers, as bytes
EPOCH_RESIDUAL = "epoch residual"  # the op's tiles of each chip: the term (weights) summed over the chip's layers
PLACES = (
    OWNER,
    CHIP,
    INPUT_CHIP,
    COMPACTION,
    COMBINER,
    OUTPUT_TILES,
    GRAD_SENDER,
    GRAD_TARGET,
    HOST_SYNC,
    EPOCH_RESIDUAL,
)
PER_CHIP_PLACES = (HOST_SYNC, EPOCH_RESIDUAL)

# Which layers a term or a link flow applies to.
EVERY_LAYER, WITH_INPUT_GRAD, OUTPUT_LAYER = "every layer", "layers with input gradients", "output layer"

# Link flows between chips: (sender chip, receiver chip) of layer l.
TO_NEXT_LAYER = "to the next layer"  # l's chip -> layer l+1's chip (the spike list)
FROM_INPUT_LAYER = "from the input layer"  # layer l-1's chip -> l's chip (replicated input list)
TO_GRAD_TARGETS = "to the gradient targets"  # l's chip -> chip of each layer it sends slot gradients to

# How a row repeats: every time step forward (t ascending), backward (t descending), or once per step.
FORWARD, BACKWARD, ONCE = "forward", "backward", "once"
# What a row is: vertices computing, PopLibs copies/slices only, an exchange of copies, the host copy.
KIND_COMPUTE, KIND_COPY, KIND_EXCHANGE, KIND_HOST = "compute", "copy", "exchange", "host"
KIND_RESIDUAL = "residual"  # a fitted term no modelled mechanism explains (labelled as such)


@dataclass(frozen=True)
class Calls:
    """A number of PopLibs calls a row stands for: ``const + per_layer·L + if_input_grad`` (the
    last only when some layer computes input gradients)."""

    const: int = 0
    per_layer: int = 0
    if_input_grad: int = 0

    def count(self, L: int, any_input_grad: bool) -> int:
        """The number for a network of ``L`` weight layers."""
        return self.const + self.per_layer * L + self.if_input_grad * int(any_input_grad)


@dataclass(frozen=True)
class Write:
    """One layer term added to one array of a row: ``term`` (a :class:`LayerTerms` field) on
    ``where`` (one of :data:`PLACES`), for the layers ``only`` names."""

    array: str
    where: str
    term: str
    only: str = EVERY_LAYER


@dataclass(frozen=True)
class Flow:
    """A link flow of the row (bytes ``term`` of a :class:`LayerTerms`) along ``route``, when
    its sender and receiver chips differ."""

    term: str
    route: str
    only: str = EVERY_LAYER


@dataclass(frozen=True)
class StepRow:
    """One row kind of the training step (see the module docstring).

    ``compute_sets`` and ``copies``: the PopLibs compute sets and exchange-only copies folded
    into the row (each compute set adds ``compute_set_cycles`` to every tile of the op; all
    but one of them add a sync and an exchange set-up). ``writes`` are applied in order, layer
    by layer; the compute-set cycles come after them, or before them if ``sets_first``.
    ``per_layer``: one row per layer (layer l's terms only). ``counters``: the work counters
    (phase, names) its compute is made of. ``exchange``: what the row's exchange carries (its
    senders are the places of its ``out`` writes, its receivers those of its ``in`` writes, or
    ``sent_from`` when the senders pay nothing: :mod:`models.snn.explain` reads these)."""

    label: str
    kind: str
    loop: str
    compute_sets: Calls
    copies: Calls = Calls()
    writes: tuple = ()
    flows: tuple = ()
    per_layer: bool = False
    sets_first: bool = False
    counters: tuple = ()
    exchange: str = ""
    sent_from: str = ""

    def folded(self, L: int, any_input_grad: bool, merged: bool = False) -> int:
        """Supersteps folded into the row beyond the row itself (their syncs and exchange
        set-ups are booked as sync / exchange); ``merged``: the row's copies are one exchange."""
        copies = self.copies.count(L, any_input_grad)
        if merged:
            copies = min(copies, 1)
        return max(self.compute_sets.count(L, any_input_grad) + copies - 1, 0)


STEP_ROWS = (
    StepRow(
        "fwd: slice inputs",
        KIND_COPY,
        FORWARD,
        Calls(3),
        Calls(-2, 2),
        writes=(Write(IN, OWNER, "lists_in"), Write(OUT, CHIP, "lists_copy")),
        exchange="input lists (forward)",
    ),
    StepRow(
        "fwd: state update",
        KIND_COMPUTE,
        FORWARD,
        Calls(2),
        writes=(Write(COMPUTE, OWNER, "update"), Write(OUT, OWNER, "flags_out"), Write(IN, COMPACTION, "flags_in")),
        counters=(("state_update", ("synaptic_adds", "neurons_updated")), ("spike_detect", ("neurons_scanned",))),
        exchange="threshold flags",
    ),
    StepRow(
        "fwd: compaction",
        KIND_COMPUTE,
        FORWARD,
        Calls(2, 1),
        writes=(
            Write(COMPUTE, COMPACTION, "compaction"),
            Write(OUT, COMPACTION, "chunk_out"),
            Write(IN, COMBINER, "chunks_in"),
        ),
        exchange="chunk lists",
    ),
    StepRow(
        "fwd: combine",
        KIND_COMPUTE,
        FORWARD,
        Calls(1),
        writes=(Write(COMPUTE, COMBINER, "combine"), Write(OUT, COMBINER, "list_out"), Write(IN, CHIP, "sequence_in")),
        flows=(Flow("list_link", TO_NEXT_LAYER),),
        exchange="sequence slices",
    ),
    StepRow("fwd: update sequences", KIND_COPY, FORWARD, Calls(0, 3)),
    StepRow(
        "loss",
        KIND_COMPUTE,
        ONCE,
        Calls(3),
        sets_first=True,
        writes=(Write(COMPUTE, OUTPUT_TILES, "loss", OUTPUT_LAYER), Write(IN, OUTPUT_TILES, "loss_in", OUTPUT_LAYER)),
        exchange="loss gradients",
        sent_from=COMBINER,
    ),
    StepRow("bwd: slice sequences", KIND_COPY, BACKWARD, Calls(3, 5)),
    StepRow(
        "bwd: replicate lists",
        KIND_EXCHANGE,
        BACKWARD,
        Calls(0),
        Calls(5),
        per_layer=True,
        writes=(Write(IN, OWNER, "replicas_in"), Write(OUT, CHIP, "own_copy"), Write(OUT, INPUT_CHIP, "input_copy")),
        flows=(Flow("input_link", FROM_INPUT_LAYER),),
        exchange="replicated lists (backward)",
    ),
    StepRow(
        "bwd: state grad",
        KIND_COMPUTE,
        BACKWARD,
        Calls(1, 1),
        Calls(0, 1),
        writes=(Write(COMPUTE, OWNER, "state_grad"),),
        counters=(("state_grad", ("slots_scanned", "slots_applied", "neurons_updated")),),
    ),
    StepRow(
        "bwd: weight+input grad",
        KIND_COMPUTE,
        BACKWARD,
        Calls(1, 0, 1),
        writes=(
            Write(COMPUTE, OWNER, "weight_grad"),
            Write(OUT, OWNER, "partials_out", WITH_INPUT_GRAD),
            Write(IN, CHIP, "partials_in", WITH_INPUT_GRAD),
        ),
        counters=(("weight_grad", ("grad_adds",)), ("input_grad", ("macs",))),
        exchange="input-gradient partials",
    ),
    StepRow(
        "bwd: reduce input grad",
        KIND_COMPUTE,
        BACKWARD,
        Calls(0, 0, 3),
        writes=(
            Write(COMPUTE, CHIP, "reduce", WITH_INPUT_GRAD),
            Write(OUT, GRAD_SENDER, "slot_grads", WITH_INPUT_GRAD),
            Write(IN, GRAD_TARGET, "slot_grads", WITH_INPUT_GRAD),
        ),
        flows=(Flow("slot_grads_link", TO_GRAD_TARGETS, WITH_INPUT_GRAD),),
        exchange="slot gradients",
    ),
    StepRow(
        "dW reduce",
        KIND_COMPUTE,
        ONCE,
        Calls(2, 1),
        writes=(Write(COMPUTE, OWNER, "dw_reduce"),),
        counters=(("optimizer", ("weights_updated",)),),
    ),
    StepRow(
        "optimizer",
        KIND_COMPUTE,
        ONCE,
        Calls(0, 2),
        writes=(Write(COMPUTE, OWNER, "optimizer"),),
        counters=(("optimizer", ("weights_updated",)),),
    ),
    StepRow("host: variable sync", KIND_HOST, ONCE, Calls(0), writes=(Write(COMPUTE, HOST_SYNC, "weights"),)),
    StepRow(
        "unexplained: per-weight epoch cost",
        KIND_RESIDUAL,
        ONCE,
        Calls(0),
        writes=(Write(COMPUTE, EPOCH_RESIDUAL, "weights"),),
    ),
)
"""The training step's rows in program order (the module docstring says what each does)."""

PHASE_LABELS = tuple(row.label for row in STEP_ROWS)
# rows the tiles run for the host (the variable copy): the engine times them as compute, every
# breakdown books them as host (:func:`book_step`)
HOST_LABELS = tuple(row.label for row in STEP_ROWS if row.kind == KIND_HOST)
# fitted rows no mechanism explains: timed as compute, every breakdown books them as residual
RESIDUAL_LABELS = tuple(row.label for row in STEP_ROWS if row.kind == KIND_RESIDUAL)


SRAM_REMEDY_NPT = "lower --neurons-per-tile (the 6 per-worker dW copies grow with fan-in x neurons per tile), "
SRAM_REMEDY = (
    SRAM_REMEDY_NPT + "reduce --batch or --timesteps (the state history is T x B x n), use SGD instead of Adam, "
    "or spread the network over more chips (--chips)"
)
"""What an SNN SRAM overflow message suggests (the first part only while fewer neurons per tile could help)."""


def book_step(result):
    """A simulated step (:class:`tilesim.records.SimResult`) with its host rows booked as host and its
    fitted residual rows as residual (the engine times both as compute); times and totals unchanged."""
    return result.book_as(HOST_LABELS, "host").book_as(RESIDUAL_LABELS, "residual")


@dataclass(frozen=True)
class LayerTerms:
    """Everything one layer adds to the step that does not depend on where its tiles are
    (cached across re-timings while its counters are the same). ``[T, n]``: per time step and
    owner tile; ``[T]``: per time step, on each tile of a place; ``[n]``: once per step;
    bytes unless named cycles. ``None``: the layer computes no input gradient."""

    lists_in: np.ndarray  # [T, n] input lists received (÷ tiles per supertile: a broadcast)
    lists_copy: np.ndarray  # [T] the senders' copy of one input list, spread over the chip
    update: np.ndarray  # [T, n] cycles: state update + dense threshold flags
    flags_out: np.ndarray  # [T, n] threshold flags to the compaction tiles
    flags_in: float  # per compaction tile: one uint32 per neuron of its chunk
    compaction: float  # cycles per compaction tile: 6 chunk scans + the merge
    chunk_out: float  # per compaction tile: its chunk list
    chunks_in: float  # per combiner: the 2·f chunk lists
    combine: np.ndarray  # [T] cycles per combiner
    list_out: float  # per combiner: the merged list
    sequence_in: float  # per chip tile: the layer's B lists landing in the sequence slice
    list_link: float  # the B lists to the next layer's chip
    replicas_in: np.ndarray  # [T, n] replicated lists: own ids + g, the layer's input list
    own_copy: np.ndarray  # [T] per chip tile: the copy of the layer's own list
    input_copy: np.ndarray  # [T] per tile of the input chip: the copy of the input list
    input_link: float  # the input list to this layer's chip
    state_grad: np.ndarray  # [T, n] cycles
    weight_grad: np.ndarray  # [T, n] cycles: weight (+ input) gradient
    partials_out: np.ndarray | None  # [T, n] input-gradient partials
    partials_in: np.ndarray | None  # [T] per chip tile: stage-1 reduction input
    reduce: np.ndarray | None  # [T] cycles per chip tile: stage-1 sums + reduceMany
    slot_grads: float  # per tile of a chip: slot gradients g *of this layer* (÷ tiles per chip)
    slot_grads_link: float  # g of this layer over a link
    dw_reduce: np.ndarray  # [n] cycles: dW zeroing and 6 copies -> 1
    optimizer: np.ndarray  # [n] cycles
    weights: float  # weights of the layer (the host variable sync)
    loss: float  # cycles per tile of the layer if it is the output layer
    loss_in: float  # bytes per tile of the layer if it is the output layer: the g it gets back
    memo: dict = field(default_factory=dict, compare=False, repr=False)  # chip reductions (:class:`_ChipRows`)

    def nbytes(self) -> int:
        """Bytes of the terms' arrays (the reductions in ``memo`` are small)."""
        return sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))


def grad_targets(recurrent: tuple, l: int) -> list:
    """Layers layer ``l`` sends reduced slot gradients to: the layer below, itself if recurrent."""
    return ([l - 1] if l > 0 else []) + ([l] if recurrent[l] else [])


def place_tiles(where: str, lay: list, l: int, tiles_per_chip: int, target: int | None = None) -> np.ndarray:
    """The tiles (global ids; a compaction tile may occur twice) of place ``where`` for layer
    ``l`` of layout ``lay`` (``target``: the receiving layer of a gradient place); for
    :data:`HOST_SYNC` every tile of the layer's chip."""

    def chip(c):
        return np.arange(c * tiles_per_chip, (c + 1) * tiles_per_chip)

    ly = lay[l]
    if where in (OWNER, OUTPUT_TILES):
        return ly.tiles
    if where == COMPACTION:
        return ly.comp_tiles
    if where == COMBINER:
        return ly.comb_tiles
    if where == INPUT_CHIP:
        return chip(lay[l - 1].chip if l > 0 else ly.chip)
    if where == GRAD_TARGET:
        return chip(lay[target].chip)
    return chip(ly.chip)  # CHIP, GRAD_SENDER, HOST_SYNC, EPOCH_RESIDUAL


def _check_table() -> None:
    names = {f.name for f in fields(LayerTerms)}
    for row in STEP_ROWS:
        for w in row.writes:
            if w.array not in ARRAYS or w.where not in PLACES or w.term not in names:
                raise AssertionError(f"STEP_ROWS row {row.label!r}: bad write {w}")
        for f in row.flows:
            if f.term not in names:
                raise AssertionError(f"STEP_ROWS row {row.label!r}: bad flow {f}")


_check_table()


@dataclass(frozen=True)
class StepShape:
    """Where the rows of :data:`STEP_ROWS` sit in the program of ``T`` time steps and ``L``
    layers. A *slot* is one row of the table (per layer for ``per_layer`` rows): ``row[k]``
    its index in the table, ``layer[k]`` its layer (−1: all), and its superstep at time step
    ``t`` is ``start[k] + stride[k]·t`` (``stride`` 0: once per step)."""

    T: int
    L: int
    supersteps: int
    row: tuple
    layer: tuple
    start: tuple
    stride: tuple
    merged: bool = False  # per-layer exchange rows merged into one slot (``copies="merged"``)

    def slots_of(self, j: int) -> list:
        """The slots of table row ``j``."""
        return [k for k, r in enumerate(self.row) if r == j]

    def slot(self, j: int, l: int = -1) -> int:
        """The slot of table row ``j`` (for layer ``l`` of a per-layer row)."""
        idx = self._slot_index
        k = idx.get((j, l))
        return idx[j, -1] if k is None else k

    @cached_property
    def _slot_index(self) -> dict:
        """(table row, layer or -1) -> slot (the first, as a search in slot order finds)."""
        out: dict = {}
        for k, (r, y) in enumerate(zip(self.row, self.layer)):
            out.setdefault((r, y), k)
        return out

    def rows_of(self, k: int) -> np.ndarray:
        """int64 [T] (per time step) or [1] (once): the supersteps of slot ``k``, by time step."""
        if self.stride[k] == 0:
            return np.array([self.start[k]])
        return self.start[k] + self.stride[k] * np.arange(self.T)

    def view(self, arr: np.ndarray, k: int) -> np.ndarray:
        """A view of slot ``k``'s rows of ``arr`` ([S, ...]): [T, ...] by time step, or [...]."""
        s, d = self.start[k], self.stride[k]
        if d == 0:
            return arr[s]
        if d > 0:
            return arr[s : s + d * self.T : d]
        return arr[s + d * (self.T - 1) : s + 1 : -d][::-1]


@lru_cache(maxsize=64)
def step_shape(T: int, L: int, merged: bool = False) -> StepShape:
    """The :class:`StepShape` of ``T`` time steps and ``L`` layers: consecutive rows of the
    table with the same ``loop`` form a block, repeated T times (forward: t ascending,
    backward: t descending) or once. ``merged`` (``copies="merged"``): a per-layer row made
    of copies only (:data:`KIND_EXCHANGE`) is one slot for all layers: the L consecutive
    ``Copy`` programs are one exchange (each tile's bytes summed, the busiest tile sets it)."""
    row, layer, start, stride = [], [], [], []
    s = 0
    j = 0
    while j < len(STEP_ROWS):
        loop = STEP_ROWS[j].loop
        block = []
        while j < len(STEP_ROWS) and STEP_ROWS[j].loop == loop:
            row_j = STEP_ROWS[j]
            split = row_j.per_layer and not (merged and row_j.kind == KIND_EXCHANGE)
            block += [(j, l) for l in (range(L) if split else [-1])]
            j += 1
        n = len(block)
        for i, (r, l) in enumerate(block):
            row.append(r)
            layer.append(l)
            start.append(s + i + (n * (T - 1) if loop == BACKWARD else 0))
            stride.append({FORWARD: n, BACKWARD: -n, ONCE: 0}[loop])
        s += n * (1 if loop == ONCE else T)
    return StepShape(T, L, s, tuple(row), tuple(layer), tuple(start), tuple(stride), merged)


class RowSink(Protocol):
    """What :func:`_emit` writes the step's terms into, slot by slot (:class:`StepShape`):
    the dense ``[S, tiles]`` arrays (:class:`_DenseRows`) or their per-chip reduction
    (:class:`_ChipRows`). ``array`` is one of :data:`ARRAYS`; ``values`` are [T] for a
    per-time-step slot or a scalar for a once-per-step slot (owner terms: [T, n] or [n])."""

    def owner(self, tiles: np.ndarray, terms: LayerTerms, table: tuple) -> None:
        """Add a layer's terms on its own ``tiles``: ``table`` = ((array, slot, term name), ...)."""

    def local(self, array: str, slot: int, tiles: np.ndarray, values) -> None:
        """Add ``values`` ([T, n] or [n]) to the distinct ``tiles`` of one chip."""

    def chip(self, array: str, slot: int, chip: int, values, masked: bool = False) -> None:
        """Add ``values`` to every tile of ``chip`` (not tile 0 of chip 0 if ``masked``)."""

    def spread(self, array: str, slot: int, tiles: np.ndarray, values) -> None:
        """Add ``values`` to ``tiles`` once per occurrence (tiles may repeat)."""

    def overhead(self, slot: int, cycles: float) -> None:
        """Add ``cycles`` of compute to every tile of the op (all but tile 0 of chip 0)."""

    def finish(self) -> dict:
        """The three arrays by name: float ``[S, tiles]`` or ``[S, chips]``."""


def _cols(tiles):
    """A slice for a run of consecutive tiles (cheap views), else the index array."""
    if tiles.size and tiles[-1] - tiles[0] + 1 == tiles.size:
        return slice(int(tiles[0]), int(tiles[-1]) + 1)
    return tiles


class _SlotViews(dict):
    """(array, slot) -> the slot's row view of that array (:meth:`StepShape.view`), made on first use."""

    def __init__(self, shape: StepShape, arrays: dict):
        super().__init__()
        self.shape, self.arrays = shape, arrays

    def __missing__(self, key):
        a, k = key
        v = self[key] = self.shape.view(self.arrays[a], k)
        return v


class _DenseRows:
    """The program's [S, tiles] arrays, written through per-slot row views (:meth:`StepShape.view`)
    (a :class:`RowSink`)."""

    def __init__(self, shape: StepShape, C: int, TPC: int, active: np.ndarray, first_chip: int = 0):
        self.C, self.TPC, self.active = C, TPC, active
        self.c0, self.off = first_chip, first_chip * TPC  # a window of C chips from ``first_chip``
        self.arrays = {a: np.zeros((shape.supersteps, C * TPC), np.float32) for a in ARRAYS}
        self.views = _SlotViews(shape, self.arrays)  # made on first use: a chip window touches few slots
        self.acc: dict = {}
        self.uniq: dict = {}  # tile set (bytes) -> (distinct tiles, multiplicities)

    def owner(self, tiles, terms, table):
        for a, k, name in table:
            self.local(a, k, tiles, getattr(terms, name))

    def local(self, a, k, tiles, values):
        v = self.views[a, k]
        c = _cols(tiles - self.off if self.off else tiles)
        if v.ndim == 2:
            v[:, c] += values
        else:
            v[c] += values

    def chip(self, a, k, c, values, masked=False):
        """Collected per slot and applied once, in :meth:`finish`."""
        v = self.views[a, k]
        key = (a, k, masked)
        if key not in self.acc:
            self.acc[key] = (v, np.zeros((v.shape[0] if v.ndim == 2 else 1, self.C)))
        self.acc[key][1][:, c - self.c0] += values

    def spread(self, a, k, tiles, values):
        key = tiles.tobytes()
        if key not in self.uniq:
            u, cnt = np.unique(tiles - self.off if self.off else tiles, return_counts=True)
            self.uniq[key] = (_cols(u), cnt.astype(np.float64))
        u, cnt = self.uniq[key]
        v = self.views[a, k]
        val = np.asarray(values, np.float64)
        if v.ndim == 2:
            v[:, u] += (val[:, None] if val.ndim else val) * cnt[None, :]
        else:
            v[u] += val * cnt

    def overhead(self, k, cycles):
        self.views[COMPUTE, k][...] += self.active * cycles

    def finish(self):
        TPC = self.TPC
        for (_a, _k, masked), (v, acc) in self.acc.items():
            for c in np.flatnonzero(acc.any(axis=0)):
                cols = slice(c * TPC, (c + 1) * TPC)
                add = acc[:, c][:, None] if v.ndim == 2 else acc[0, c]
                v[..., cols] += add * self.active[cols] if masked else add
        return self.arrays


class _ChipCalls:
    """A :class:`RowSink` that only records its calls, per chip they touch, in order; replayed
    chip by chip into a one-chip :class:`_DenseRows` window (:func:`_chip_rows`), every tile of
    that chip gets the very additions, in the same order, as in the whole-machine arrays."""

    def __init__(self, C: int, TPC: int):
        self.TPC = TPC
        self.calls: list = [[] for _ in range(C)]

    def owner(self, tiles, terms, table):
        self.calls[int(tiles[0]) // self.TPC].append(("owner", tiles, terms, table))

    def local(self, a, k, tiles, values):
        self.calls[int(tiles[0]) // self.TPC].append(("local", a, k, tiles, values))

    def chip(self, a, k, c, values, masked=False):
        self.calls[c].append(("chip", a, k, c, values, masked))

    def spread(self, a, k, tiles, values):
        chips = tiles // self.TPC
        if chips[0] == chips[-1] and (chips == chips[0]).all():
            self.calls[int(chips[0])].append(("spread", a, k, tiles, values))
            return
        for c in np.unique(chips):
            self.calls[int(c)].append(("spread", a, k, tiles[chips == c], values))

    def overhead(self, k, cycles):
        for calls in self.calls:
            calls.append(("overhead", k, cycles))

    def finish(self):
        return self.calls


def label_sums(compute: np.ndarray, label_id: np.ndarray, n_labels: int) -> np.ndarray:
    """float64 ``[n_labels, tiles]``: the rows of ``compute`` ``[S, tiles]`` summed per label: each
    run of consecutive rows with one label summed in float64 (a view: no copy), the runs of a
    label added in order. The dense and the compact program use this one sum."""
    out = np.zeros((n_labels, compute.shape[1]))
    if not compute.shape[0]:
        return out
    cut = np.flatnonzero(np.diff(label_id) != 0) + 1
    starts = np.concatenate([[0], cut]).tolist()
    ends = np.concatenate([cut, [compute.shape[0]]]).tolist()
    for a, b in zip(starts, ends):
        out[int(label_id[a])] += compute[a:b].sum(axis=0, dtype=np.float64)
    return out


def _one_chip_rows(arr: dict) -> TileRows:
    """One chip's ``[n, TPC]`` row arrays as :class:`TileRows` (every row may exchange)."""
    n, TPC = arr[COMPUTE].shape
    return TileRows.every_row_exchanges(
        arr[COMPUTE].reshape(n, 1, TPC), arr[IN].reshape(n, 1, TPC), arr[OUT].reshape(n, 1, TPC)
    )


def _chip_rows(shape: StepShape, calls: list, c: int, TPC: int, active: np.ndarray) -> dict:
    """The three ``[S, TPC]`` float32 arrays of chip ``c``: its recorded calls replayed into a
    one-chip window (equal, bit for bit, to that chip's columns of the dense arrays)."""
    rows = _DenseRows(shape, 1, TPC, active[c * TPC : (c + 1) * TPC], first_chip=c)
    for name, *args in calls:
        getattr(rows, name)(*args)
    return rows.finish()


def _touched_rows(shape: StepShape, calls: list) -> np.ndarray:
    """Sorted superstep rows of the slots ``calls`` (one chip's, :class:`_ChipCalls`) write: every
    other row of that chip's arrays stays zero."""
    slots = set()
    for name, *args in calls:
        if name == "owner":
            slots.update(k for _, k, _ in args[2])
        elif name == "overhead":
            slots.add(args[0])
        else:  # local, chip, spread: (array, slot, ...)
            slots.add(args[1])
    index = np.arange(shape.supersteps)
    rows = [np.atleast_1d(shape.view(index, k)) for k in sorted(slots)]
    return np.unique(np.concatenate(rows)) if rows else np.zeros(0, np.int64)


def _label_sums_of_rows(
    compute: np.ndarray, rows: np.ndarray, label_id: np.ndarray, run_id: np.ndarray, n_labels: int
) -> np.ndarray:
    """:func:`label_sums` of a ``[S, tiles]`` array whose rows outside ``rows`` are zero, from
    ``compute`` = its ``rows`` only: each run (``run_id``) summed over its kept rows, the runs
    added in order (a zero row adds nothing, so the sums are the same bit for bit)."""
    out = np.zeros((n_labels, compute.shape[1]))
    if not rows.size:
        return out
    r = run_id[rows]
    cut = np.flatnonzero(np.diff(r) != 0) + 1
    starts = np.concatenate([[0], cut]).tolist()
    ends = np.concatenate([cut, [rows.size]]).tolist()
    for a, b in zip(starts, ends):
        out[int(label_id[rows[a]])] += compute[a:b].sum(axis=0, dtype=np.float64)
    return out


def _memo_nbytes(hit) -> int:
    return sum(a.nbytes for a in hit)


class _ChipRows:
    """The same rows reduced to chips without the [S, tiles] arrays (a :class:`RowSink`): per
    slot and chip the maximum over the chip's tiles of (chip-wide terms + per-tile terms),
    which is all the engine takes from a row on an all-to-all fabric (slowest tile's compute;
    busiest port in and out). Per-tile terms of one slot that may overlap on a tile (spread
    terms) are summed on their tiles first; owner-tile terms of different layers never
    overlap (a tile holds one layer).

    Every slot of every array is one row of ``[3 · slots, T, C]`` accumulators (a once-per-step
    slot uses time step 0), so the reduction is a few whole-array operations. ``memo``: where
    to keep the tile sets of spread terms (a :class:`BytesLRU` a search keeps), or None."""

    def __init__(self, shape: StepShape, C: int, TPC: int, memo=None):
        self.T, self.C, self.TPC, self.shape = shape.T, C, TPC, shape
        self.memo = {} if memo is None else memo  # tile sets of spread terms -> (tiles, counts)
        K = self.K = len(shape.row)
        self.per_step = np.array(shape.stride) != 0
        shape3 = (3 * K, self.T, C)
        self.uu = np.zeros(shape3)  # chip-wide, every tile
        self.um = np.zeros(shape3)  # chip-wide, not tile 0 of chip 0
        self.vmax = np.zeros(shape3)  # owner-tile terms: max over the chip's tiles but global tile 0
        self.v0 = np.zeros((3 * K, self.T))  # owner-tile terms on global tile 0
        self.parts: dict = {}  # (slot, chip) -> [(tiles, values)] spread terms

    def _slot(self, a, k):
        return ARRAYS.index(a) * self.K + k

    def owner(self, tiles, terms, table):
        """Per row of ``table`` the maximum over the tiles (but global tile 0) and the value on
        tile 0, kept in ``terms.memo`` (they do not depend on where the tiles are, only on
        whether tile 0 is one of them)."""
        t0 = int(tiles[0])
        key = (table, t0 == 0)
        hit = terms.memo.get(key)
        if hit is None:
            slots = np.array([self._slot(a, k) for a, k, _ in table])
            M = np.zeros((len(table), self.T))
            Z = np.zeros((len(table), self.T)) if t0 == 0 else None
            for j, (_, _, name) in enumerate(table):
                m, z = self._owner_max(tiles, getattr(terms, name))
                M[j, : m.size] = m
                if z is not None:
                    Z[j, : z.size] = z
            hit = terms.memo[key] = (slots, M, Z)
        slots, M, Z = hit
        c = t0 // self.TPC
        self.vmax[slots, :, c] = np.maximum(self.vmax[slots, :, c], M)  # one layer per tile: max
        if Z is not None:
            self.v0[slots] += Z

    def local(self, a, k, tiles, values):
        m, z = self._owner_max(tiles, values)
        i = self._slot(a, k)
        col = self.vmax[i, : m.size, int(tiles[0]) // self.TPC]
        np.maximum(col, m, out=col)  # owner tiles of different layers never overlap
        if z is not None:
            self.v0[i, : z.size] += z

    def chip(self, a, k, c, values, masked=False):
        (self.um if masked else self.uu)[self._slot(a, k), : self.T if self.per_step[k] else 1, c] += values

    def spread(self, a, k, tiles, values):
        self.parts.setdefault((self._slot(a, k), int(tiles[0]) // self.TPC), []).append((tiles, values))

    def overhead(self, k, cycles):
        self.um[self._slot(COMPUTE, k)] += cycles

    @staticmethod
    def _owner_max(tiles, values):
        """(max over the tiles but global tile 0 [T'], value on tile 0 [T'] or None)."""
        has0 = bool(tiles[0] == 0)
        v = np.asarray(values, np.float64).reshape(-1, tiles.size)
        rest = v[:, 1:] if has0 else v
        return rest.max(axis=1) if rest.shape[1] else np.zeros(v.shape[0]), v[:, 0] if has0 else None

    def _spread_max(self):
        """Fold the spread terms into ``vmax`` / ``v0``: per tile, the sum over parts of value ×
        multiplicity (tiles may repeat and overlap) = V @ M, with M kept per tile sets."""
        T = self.T
        for (i, c), ps in self.parts.items():
            key = tuple(p[0].tobytes() for p in ps)
            hit = self.memo.get(key)
            if hit is None:
                u, inv = group_tiles(np.concatenate([p[0] for p in ps]))
                M = np.zeros((len(ps), u.size))
                part = np.repeat(np.arange(len(ps)), [p[0].size for p in ps])
                np.add.at(M, (part, inv), 1.0)
                hit = self.memo[key] = (u, M)
            u, M = hit
            V = np.empty((T, len(ps)))
            for j, p in enumerate(ps):
                V[:, j] = p[1]
            tot = V @ M
            if u[0] == 0:
                self.v0[i] += tot[:, 0]
                tot = tot[:, 1:]
            if tot.shape[1]:
                col = self.vmax[i, :, c]
                np.maximum(col, tot.max(axis=1), out=col)

    def finish(self):
        self._spread_max()
        out = self.uu + self.um + self.vmax
        first = self.uu[:, :, 0] + self.v0
        out[:, :, 0] = np.maximum(out[:, :, 0], first) if self.TPC > 1 else first
        per, once = _slot_rows(self.shape.T, self.shape.L, self.shape.merged)
        K = self.K
        arrays = {}
        for j, a in enumerate(ARRAYS):
            arr = arrays[a] = np.zeros((self.shape.supersteps, self.C))
            blk = out[j * K : (j + 1) * K]
            arr[per[1]] = blk[per[0]]
            arr[once[1]] = blk[once[0], 0]
        return arrays


@lru_cache(maxsize=64)
def _slot_rows(T: int, L: int, merged: bool = False) -> tuple:
    """((per-step slots [P], their supersteps [P, T]), (once slots [Q], their supersteps [Q]))."""
    shape = step_shape(T, L, merged)
    per = [k for k in range(len(shape.row)) if shape.stride[k] != 0]
    once = [k for k in range(len(shape.row)) if shape.stride[k] == 0]
    return (
        (np.array(per, np.int64), np.stack([shape.rows_of(k) for k in per])),
        (np.array(once, np.int64), np.array([shape.start[k] for k in once], np.int64)),
    )


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
    compact: bool = False,
    structure: StepStructure = DEFAULT_STRUCTURE,
) -> Program | CompactProgram:
    """The BSP program of one training step, from the step's per-step counters.

    ``counters`` must hold per-step arrays (``train_step(..., per_step_counters=True)`` or
    ``count_work(activity, placement, per_step=True)``). ``steps_per_execution``: training steps
    per device execution, over which the host variable sync is amortised. ``cache`` (a dict the
    caller keeps, e.g. across a mapping search) reuses each layer's position-independent terms
    (:class:`LayerTerms`) for counters with the same ``source`` (:func:`count_work`).

    Per-layer work is computed on the layer's own tiles and written straight into the rows of
    the program's arrays (row views), so a re-timing costs a few passes over ``[S, tiles]``.

    ``compact``: a :class:`tilesim.program.CompactProgram` instead, which never holds
    ``[S, all tiles]``: the same rows are recorded per chip (:class:`_ChipCalls`) and built one
    chip at a time, reduced to what the engine needs by the machine's fabric (its ``reduce``), the
    per-tile label sums and the chip's sent bytes; ``simulate`` gives the same times, breakdowns
    and critical tiles as for the dense program (tests/test_scale.py).

    ``structure``: the structural assumptions (:class:`models.snn.structure.StepStructure`).
    """
    _check_step_args(placement, machine, steps_per_execution)
    active = np.ones(machine.total_tiles)
    active[0] = 0.0  # tile 0 of chip 0 is outside the op's graph
    shape = step_shape(config.timesteps, config.n_layers, structure.copies == "merged")
    if compact:
        return _compact_program(
            config,
            placement,
            counters,
            machine,
            costs or default_costs(),
            name,
            steps_per_execution,
            cache,
            shape,
            active,
            structure,
        )
    rows = _DenseRows(shape, machine.chips, machine.tiles_per_chip, active)
    meta = _emit(
        config, placement, counters, machine, costs or default_costs(), steps_per_execution, cache, rows, structure
    )
    arr = rows.finish()
    return Program.from_arrays(
        chips=machine.chips,
        tiles_per_chip=machine.tiles_per_chip,
        compute_cycles=arr[COMPUTE],
        labels=PHASE_LABELS,
        label_id=meta["label_id"],
        sync_scope=meta["scope"],
        bytes_in=arr[IN],
        bytes_out=arr[OUT],
        flows=meta["flows"],
        host=meta["host"],
        name=name,
        sync_extra=meta["sync_extra"],
        exchange_extra=meta["exchange_extra"],
    )


def _compact_program(
    config, placement, counters, machine, costs, name, steps_per_execution, cache, shape, active, structure
) -> CompactProgram:
    """:func:`build_step_program` with ``compact``: the rows chip by chip (see there)."""
    C, TPC, S = machine.chips, machine.tiles_per_chip, shape.supersteps
    rec = _ChipCalls(C, TPC)
    meta = _emit(config, placement, counters, machine, costs, steps_per_execution, cache, rec, structure)
    calls = rec.finish()
    # a row a chip has no call in is all zeros on that chip: its peaks are 0 on tile 0 (issue 15)
    comp, crit = np.zeros((S, C)), np.zeros((S, C), np.int64)
    pin, tin, pout, tout = np.zeros((S, C)), np.zeros((S, C), np.int64), np.zeros((S, C)), np.zeros((S, C), np.int64)
    onchip = np.zeros((S, C))
    n_labels = len(PHASE_LABELS)
    label_tiles = np.zeros((n_labels, C * TPC))
    label_id = meta["label_id"]
    run_id = np.concatenate([[0], np.cumsum(np.diff(label_id) != 0)])  # runs of one label, as label_sums cuts
    for c in range(C):
        rows = _touched_rows(shape, calls[c])
        arr = _chip_rows(shape, calls[c], c, TPC, active)  # zero pages outside ``rows`` are never touched
        sub = {a: arr[a][rows] for a in ARRAYS}
        del arr
        pk = _one_chip_rows(sub).peaks()
        comp[rows, c], crit[rows, c] = pk.compute[:, 0], pk.compute_tile[:, 0]
        pin[rows, c], tin[rows, c], pout[rows, c], tout[rows, c] = (
            pk.bytes_in[:, 0],
            pk.in_tile[:, 0],
            pk.bytes_out[:, 0],
            pk.out_tile[:, 0],
        )
        onchip[rows, c] = sub[OUT].sum(axis=1, dtype=np.float64)
        label_tiles[:, c * TPC : (c + 1) * TPC] = _label_sums_of_rows(sub[COMPUTE], rows, label_id, run_id, n_labels)
    return CompactProgram(
        name=name,
        chips=C,
        tiles_per_chip=TPC,
        labels=PHASE_LABELS,
        label_id=np.asarray(label_id, np.int32),
        sync_scope=np.asarray(meta["scope"], np.int32),
        partitions=(),
        peaks=ChipPeaks(comp, crit, np.arange(S, dtype=np.int32), pin, tin, pout, tout, onchip.sum(axis=1)),
        label_tile_cycles=label_tiles,
        onchip_bytes=onchip,
        **flow_columns(meta["flows"], meta["host"]),
        sync_extra_cycles=np.asarray(meta["sync_extra"], np.float64),
        exchange_extra_cycles=np.asarray(meta["exchange_extra"], np.float64),
        rows=_RecordedRows(shape, calls, TPC, active),
    )


@dataclass(frozen=True, eq=False)
class _RecordedRows:
    """The step's recorded row calls per chip (:class:`_ChipCalls`), replayed for one chip on
    demand (a :class:`tilesim.program.ChipRowSource`)."""

    shape: StepShape
    calls: list
    tiles_per_chip: int
    active: np.ndarray

    def chip_rows(self, chip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(compute, bytes in, bytes out) ``[S, tiles of a chip]`` float32 of ``chip``."""
        arr = _chip_rows(self.shape, self.calls[chip], chip, self.tiles_per_chip, self.active)
        return arr[COMPUTE], arr[IN], arr[OUT]


def predict_step_s(
    config: NetworkConfig,
    placement: Mapping,
    counters: WorkCounters,
    machine,
    costs: CostModel | None = None,
    steps_per_execution: int = STEPS_PER_EXECUTION,
    cache: dict | None = None,
    structure: StepStructure = DEFAULT_STRUCTURE,
) -> float:
    """Seconds of the step :func:`build_step_program` describes, without building it: every row
    is reduced to chips as it is emitted (:class:`_ChipRows`) and timed by
    :func:`tilesim.engine.makespan_s` — the same number as ``simulate(build_step_program(...))``
    at a fraction of the cost (the mapping search's objective). On a fabric whose exchange
    time depends on which tiles talk (a mesh), the full program is built and simulated."""
    from tilesim.engine import makespan_s, simulate

    fabric = make_fabric(machine)
    if fabric.needs_transfers:
        return simulate(
            build_step_program(
                config,
                placement,
                counters,
                machine,
                costs,
                steps_per_execution=steps_per_execution,
                cache=cache,
                structure=structure,
            ),
            machine,
        ).total_s
    _check_step_args(placement, machine, steps_per_execution)
    C = machine.chips
    memo = None if cache is None else lru_in(cache, ("chip rows",), CACHE_BYTES, _memo_nbytes)
    shape = step_shape(config.timesteps, config.n_layers, structure.copies == "merged")
    rows = _ChipRows(shape, C, machine.tiles_per_chip, memo)
    meta = _emit(
        config, placement, counters, machine, costs or default_costs(), steps_per_execution, cache, rows, structure
    )
    arr = rows.finish()
    work = fabric.reduce_peaks(ChipPeaks.of_chips(arr[COMPUTE], arr[IN], arr[OUT]))
    return makespan_s(
        work.compute,
        work.exchange,
        machine,
        meta["scope"],
        sync_extra=meta["sync_extra"],
        exchange_extra=meta["exchange_extra"],
        flows=meta["flows"],
        host=meta["host"],
    )


@dataclass(frozen=True)
class _Step:
    """What every term of one step is computed from (built once per :func:`_emit`)."""

    config: NetworkConfig
    counters: WorkCounters
    costs: CostModel
    lay: list  # :class:`_Layer` per layer
    C: int
    TPC: int
    workers: int
    sup: float  # supervisor overhead cycles
    pair: float  # tiles per supertile: a broadcast reaches both at 8 B/cycle (§3.2)
    rec: tuple  # recurrent per layer
    in_graph: tuple  # per layer: computes input gradients
    steps_per_execution: int
    sync_cycles: float  # one sync of all the step's chips
    exchange_fixed_cycles: float
    structure: StepStructure = DEFAULT_STRUCTURE
    chip_sync_cycles: float = 0.0  # one sync of one chip
    host_cycles_per_byte: float = 0.0  # the host variable copy (:func:`host_sync_cycles_per_byte`)
    transfer_steps: int = 1  # steps one host transfer is amortised over
    epoch_steps: int = 1  # steps per epoch (the residual's amortisation)

    def cycles(self, work, vertices):
        """Tile cycles of ``work`` worker cycles over ``vertices`` vertices (barrel scheduling)."""
        return barrel_tile_cycles(work, vertices, self.workers, self.sup)

    def loc(self, phase: str, layer: int, cname: str) -> np.ndarray:
        """float64 [T, n_local]: a per-step counter on the layer's own tiles (= ``_Layer.tiles``)."""
        pc = self.counters.get(phase, layer)
        if pc.local_steps is None:
            raise ConfigError(
                config_message("counters", "totals only", "need per-step arrays", "record with per_step_counters=True")
            )
        return pc.local_steps[pc.row(cname)].astype(np.float64)

    def grad_targets(self, l: int) -> list:
        """Layers layer ``l`` sends reduced slot gradients to (:func:`grad_targets`)."""
        return grad_targets(self.rec, l)


def _step(config, placement, counters, machine, costs, steps_per_execution, structure=DEFAULT_STRUCTURE) -> _Step:
    L = config.n_layers
    with_input_grad = {p.layer for p in counters.phases if p.phase == "input_grad"}
    return _Step(
        config,
        counters,
        costs,
        _layout(config, placement, machine.tiles_per_chip),
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
        host_sync_cycles_per_byte(machine, structure),
        structure.transfer_steps(steps_per_execution),
        steps_per_execution * structure.executions_per_epoch,
    )


def _forward_terms(s: _Step, l: int) -> dict:
    """The forward-pass fields of :class:`LayerTerms` for layer ``l``."""
    ly, T, B, TPC, costs = s.lay[l], s.config.timesteps, s.config.batch, s.TPC, s.costs
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
    chunk = -(-s.config.layers[l + 1] // ly.f)  # neurons per compaction tile
    tile_list = min(s.config.n_max[l], chunk)
    comp_work = costs.coef("flags_scanned") * chunk + vc * 6
    comb1 = costs.coef("list_entries_merged") * tile_list + vc
    list_bytes = 4.0 * (s.config.n_max[l] + 2)
    return {
        "lists_in": recv / s.pair,
        "lists_copy": (recv[:, 0] if ly.tiles.size else np.zeros(T)) / TPC,
        "update": s.cycles(work, vert) + s.cycles(costs.coef("neurons_scanned") * flags + vc * flags, flags),
        "flags_out": s.loc("spike_detect", l, "bytes_sent"),
        "flags_in": 4.0 * chunk,  # one uint32 per neuron and threshold
        "compaction": float(s.cycles(comp_work, 6) + s.cycles(comb1, 1)),
        "chunk_out": 4.0 * (tile_list + 1),
        "chunks_in": 4.0 * (tile_list + 1) * 2 * ly.f,
        "combine": s.cycles(costs.coef("list_entries_merged") * (kept / B + 2 * ly.f) + vc, 1),
        "list_out": list_bytes,
        "sequence_in": B * list_bytes / TPC,
        "list_link": B * list_bytes,
    }


def _backward_terms(s: _Step, l: int) -> dict:
    """The backward-pass and once-per-step fields of :class:`LayerTerms` for layer ``l``."""
    ly, T, B, TPC, costs, nmax = s.lay[l], s.config.timesteps, s.config.batch, s.TPC, s.costs, s.config.n_max
    vc, W = costs.coef("vertex_calls"), WORKERS_PER_TILE
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
    wg = s.cycles(costs.worker_cycles({"grad_adds": s.loc("weight_grad", l, "grad_adds")}) + vc * wv, wv)
    partials = partials_in = reduce = None
    if s.in_graph[l]:
        iv = s.loc("input_grad", l, "vertices")
        wg += s.cycles(costs.worker_cycles({"macs": s.loc("input_grad", l, "macs")}) + vc * iv, iv)
        partials = s.loc("input_grad", l, "partial_bytes")
        partials_in = partials.sum(axis=1) / TPC  # stage-1 reduction spread over the chip
        adds = s.loc("input_grad", l, "reduction_adds").sum(axis=1) / TPC
        reduce = s.cycles(costs.coef("reduction_adds") * adds + vc * 6, 6)
    # once per step: dW reduction (zeroing, 6 copies -> 1) and the optimizer on the weights per tile
    upd = s.counters.get("optimizer", l).local_totals[0].astype(np.float64)
    nw = np.where(upd > 0, W, 0)
    opt = "adam_updates" if s.config.optimizer == "adam" else "sgd_updates"
    g_bytes = B * (8.0 * nmax[l] + 8)
    return {
        "replicas_in": (own + inp) / s.pair,
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
        "optimizer": s.cycles(costs.coef(opt) * upd / W, nw),
        "weights": upd.sum(),
        "loss": float(s.cycles(costs.coef("loss_entries") * B * nmax[l] / ly.tiles.size + vc, 1)),
        "loss_in": B * (8.0 * nmax[l] + 8),
    }


def _layer_terms(s: _Step, l: int) -> LayerTerms:
    """The :class:`LayerTerms` of layer ``l``: everything of it that does not depend on where
    its tiles are (per-tile arrays on its own tiles, per-step vectors, scalars)."""
    return LayerTerms(**_forward_terms(s, l), **_backward_terms(s, l))


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
    base = (s.config, _costs_key(s.costs), s.TPC, s.pair, s.workers, s.sup)
    out = []
    for l in range(L):
        source = s.counters.get("state_update", l).source
        key = None if source is None else base + (l, source)
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
def _owner_table(T: int, L: int, l: int, with_input_grad: bool, output: bool, merged: bool = False) -> tuple:
    """((array, slot, term), ...): the :data:`OWNER` writes of layer ``l`` in the step."""
    shape = step_shape(T, L, merged)
    only = {EVERY_LAYER: True, WITH_INPUT_GRAD: with_input_grad, OUTPUT_LAYER: output}
    return tuple(
        (w.array, shape.slot(j, l), w.term)
        for j, row in enumerate(STEP_ROWS)
        for w in row.writes
        if w.where == OWNER and only[w.only]
    )


def _write(s: _Step, terms: list, rows: RowSink, w: Write, k: int, l: int) -> None:
    """Add the term ``w`` of layer ``l`` to slot ``k`` of ``rows`` (any place but OWNER, HOST_SYNC)."""
    ly = s.lay[l]
    if w.where == CHIP:
        rows.chip(w.array, k, ly.chip, getattr(terms[l], w.term))
    elif w.where == INPUT_CHIP:
        rows.chip(w.array, k, s.lay[l - 1].chip if l > 0 else ly.chip, getattr(terms[l], w.term))
    elif w.where in (COMPACTION, COMBINER):
        rows.spread(w.array, k, ly.comp_tiles if w.where == COMPACTION else ly.comb_tiles, getattr(terms[l], w.term))
    elif w.where == OUTPUT_TILES:
        rows.local(w.array, k, ly.tiles, np.full(ly.tiles.size, getattr(terms[l], w.term)))
    else:
        for t in s.grad_targets(l):
            rows.chip(w.array, k, ly.chip if w.where == GRAD_SENDER else s.lay[t].chip, getattr(terms[t], w.term))


def host_sync_cycles_per_byte(machine, structure: StepStructure) -> float:
    """Tile cycles per byte of trainable state the host variable copy moves: device→host, and
    host→device too for a round trip, at the documented host-traffic rates."""
    per_s = 1.0 / host_copy_bytes_per_s(machine, True)
    if structure.host_direction == "round_trip":
        per_s += 1.0 / host_copy_bytes_per_s(machine, False)
    return machine.clock_hz * per_s


def _host_sync(s: _Step, terms: list, rows: RowSink, w: Write, k: int) -> None:
    """Per-chip once-per-step terms on the op's tiles: the host variable copy of the chip's
    trainable state (weights and optimizer slots), amortised over the steps between transfers
    (:data:`HOST_SYNC`), or the labelled per-weight epoch residual (:data:`EPOCH_RESIDUAL`)."""
    on_chip = np.zeros(s.C)
    for l, ly in enumerate(s.lay):
        on_chip[ly.chip] += getattr(terms[l], w.term)
    if w.where == HOST_SYNC:
        slots = 2 if s.config.optimizer == "adam" else 0
        per_step = s.host_cycles_per_byte * 4.0 * (1 + slots) * on_chip / s.transfer_steps  # per chip
    else:
        coef = float(s.costs.coefficients.get("epoch_residual_cycles_per_weight", 0.0))
        per_step = coef * on_chip / s.epoch_steps
    for c in range(s.C):
        if per_step[c]:
            rows.chip(w.array, k, c, per_step[c], masked=True)


def _links(s: _Step, terms: list, f: Flow, l: int) -> list:
    """(src chip, dst chip, bytes) of flow ``f`` of layer ``l`` (one that applies to it) that cross chips."""
    lay = s.lay
    if f.route == TO_NEXT_LAYER:
        ends = [(lay[l].chip, lay[l + 1].chip, l)] if l + 1 < len(lay) else []
    elif f.route == FROM_INPUT_LAYER:
        ends = [(lay[l - 1].chip, lay[l].chip, l)] if l > 0 else []
    else:
        ends = [(lay[l].chip, lay[t].chip, t) for t in s.grad_targets(l)]
    return [(a, b, getattr(terms[t], f.term)) for a, b, t in ends if a != b]


@lru_cache(maxsize=256)
def _plan(T: int, L: int, in_graph: tuple, merged: bool = False) -> tuple:
    """The table unrolled for ``T`` time steps and layers ``in_graph`` (computing input
    gradients or not): per slot, in order, ``(slot, sets first, [(layer, Write)], [host
    Writes], [(layer, Flow)])`` with only the writes and flows that apply to each layer."""
    shape = step_shape(T, L, merged)
    out = []
    for k, (j, lk) in enumerate(zip(shape.row, shape.layer)):
        row = STEP_ROWS[j]
        layers = range(L) if lk < 0 else [lk]
        writes = tuple(
            (l, w)
            for l in layers
            for w in row.writes
            if w.where not in (OWNER, *PER_CHIP_PLACES) and applies(w.only, l, L, in_graph[l])
        )
        flows = tuple((l, f) for l in layers for f in row.flows if applies(f.only, l, L, in_graph[l]))
        host = tuple(w for w in row.writes if w.where in PER_CHIP_PLACES)
        out.append((k, row, writes, host, flows))
    return tuple(out)


def _emit(
    config, placement, counters, machine, costs, steps_per_execution, cache, rows: RowSink, structure=DEFAULT_STRUCTURE
) -> dict:
    """Write every term of the step into ``rows`` (a :class:`RowSink`), row by row of
    :data:`STEP_ROWS`; return the rest of the program: labels, sync scopes, folded supersteps,
    link flows, host infeed."""
    s = _step(config, placement, counters, machine, costs, steps_per_execution, structure)
    T, L, cs_cycles = config.timesteps, config.n_layers, costs.coef("compute_set_cycles")
    merged = structure.copies == "merged"
    terms = _all_terms(s, cache)
    for l, ly in enumerate(s.lay):  # each layer on its own tiles
        rows.owner(ly.tiles, terms[l], _owner_table(T, L, l, s.in_graph[l], l == L - 1, merged))
    any_in = any(s.in_graph)
    links = []  # per slot: [(src chip, dst chip, bytes)]
    for k, row, writes, host, flows in _plan(T, L, s.in_graph, merged):
        sets = row.compute_sets.count(L, any_in) * cs_cycles
        if row.sets_first:
            rows.overhead(k, sets)
        for l, w in writes:  # layer by layer, in the row's order
            _write(s, terms, rows, w, k, l)
        for w in host:
            _host_sync(s, terms, rows, w, k)
        if not row.sets_first and sets:
            rows.overhead(k, sets)
        links.append([x for l, f in flows for x in _links(s, terms, f, l)])
    return _meta(s, step_shape(T, L, merged), links, any_in)


@lru_cache(maxsize=256)
def _row_meta(T: int, L: int, any_in: bool, merged: bool = False) -> tuple:
    """Per superstep: the label id and the supersteps folded into it (read-only arrays);
    ``merged``: a row's consecutive copies are one exchange."""
    shape = step_shape(T, L, merged)
    label_id = np.zeros(shape.supersteps, np.int32)
    n_folded = np.zeros(shape.supersteps, np.int64)
    for k, j in enumerate(shape.row):
        at = shape.rows_of(k)
        label_id[at] = j
        n_folded[at] = STEP_ROWS[j].folded(L, any_in, merged)
    label_id.flags.writeable = n_folded.flags.writeable = False
    return label_id, n_folded


def _meta(s: _Step, shape: StepShape, links: list, any_in: bool) -> dict:
    """Labels, folded supersteps and sync scope per superstep; link flows in superstep order
    within each time step; the host infeed. Sync scope (``structure.sync_scope``): one chip: its
    own; ``"all"``: every superstep syncs all chips; ``"chip"``: only supersteps with link flows
    do, and every folded call syncs its own chip."""
    T, C, B = shape.T, s.C, s.config.batch
    label_id, n_folded = _row_meta(T, shape.L, any_in, s.structure.copies == "merged")
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
    f_arr = tuple(np.asarray(x) for x in zip(*flows)) if flows else None
    infeed = T * B * 4.0 * (s.config.input_cap + 1) + 4.0 * B
    host = (np.array([0], np.int32), np.array([s.lay[0].chip], np.int32), np.array([infeed]))
    return {
        "label_id": label_id.copy(),
        "scope": scope,
        "flows": f_arr,
        "host": host,
        "sync_extra": n_folded * (s.chip_sync_cycles if chip_scope else s.sync_cycles),
        "exchange_extra": n_folded * s.exchange_fixed_cycles,
    }


# code and bookkeeping bytes per tile (ipu-hardware.md §3.3): a vertex's state holds ~3 SPAN
# edges + a 4 B scalar; each codelet's machine code; control code per compute set the tile
# takes part in; exchange code per instruction; worker + supervisor stacks. The per-edge,
# per-compute-set and per-exchange-instruction bytes are those of
# :class:`models.linear.planner.OverheadConstants` (their one home, with their sources).
VERTEX_EDGES = 3  # [S]-based: the SNN vertices' SPAN edges (list, weights/state, output)
VERTEX_SCALAR_BYTES = 4  # [S] one 32-bit scalar field
CODELET_BYTES = 600  # [U] order of a compiled C++ codelet; not published
STACK_BYTES = 6 * 512 + 1024  # [U] worker stacks + supervisor stack


@lru_cache(maxsize=1)
def _code_bytes() -> tuple:
    """(vertex state, control code per compute set, exchange code per instruction) bytes."""
    from models.linear.planner import (
        OverheadConstants,  # deferred: the linear package is big
    )

    o = OverheadConstants()
    return (
        VERTEX_EDGES * o.vertex_edge_bytes + VERTEX_SCALAR_BYTES,
        o.control_code_bytes_per_compute_set,
        o.exchange_instruction_bytes,
    )


def _owner_memory(config: NetworkConfig, placement: Mapping, l: int, n_max_in: int, recurrent: bool) -> list:
    """The entries of layer ``l`` on its own tiles, [(category, bytes [n_local], label)]: its
    variables (§3.2), receive buffers, vertex state and code. They depend on how many neurons
    each tile owns, not on where the tiles are."""
    T, B = config.timesteps, config.batch
    _, local = placement.groupings[l]
    n_local = int(local.max()) + 1 if local.size else 0
    roles = {
        "weights": "variables:weights",
        "dw_worker_copies": "variables:gradients",
        "dw_final": "variables:gradients",
        "optimizer_state": "variables:optimizer",
        "state_sequence": "variables:state",
        "state": "variables:state",
        "input_grad_partials": "variables:activations",
    }
    mem = layer_memory(
        config.layers[l], config.layers[l + 1], T, B, n_max_in, local, n_local, config.optimizer, recurrent
    )
    out = [(roles[key], arr, f"layer {l + 1} {key.replace('_', ' ')}") for key, arr in mem.items() if arr.any()]
    n_own = np.bincount(local, minlength=n_local).astype(np.int64)
    vertices = 3 * B + WORKERS_PER_TILE + B + B * n_own  # update, grads, flags per (neuron, sample)
    const = np.ones(n_local)
    state_bytes, control_bytes, exchange_bytes = _code_bytes()
    out += [
        (
            "exchange_buffers",
            B * 4.0 * ((n_max_in + 1) + (n_max_in + 2) + 2 * config.n_max[l] + 2) * const,
            f"layer {l + 1} receive buffers (input list, replicated inputs, slot ids + g)",
        ),
        ("vertex_state", state_bytes * vertices, f"layer {l + 1} vertex state"),
        ("vertex_code", CODELET_BYTES * 6 * const, f"layer {l + 1} codelets"),
        ("control_code", control_bytes * 8 * const, f"layer {l + 1} compute-set control"),
        ("exchange_code", exchange_bytes * (B * 6 + 16) * const, f"layer {l + 1} exchange code"),
    ]
    return EntryGroup(out)


def _entries_nbytes(entries) -> int:
    return sum(np.asarray(e[1]).nbytes for e in entries)


def snn_memory(
    config: NetworkConfig, placement: Mapping, machine, ledger: MemoryLedger | None = None, cache: dict | None = None
) -> MemoryLedger:
    """Per-tile SRAM of the training step: every tensor of §3.2 plus buffers, vertex state and code.
    ``ledger``: a :class:`MemoryLedger` (default) or a :class:`tilesim.memory.MemoryTotals` for a
    search; ``cache`` (a dict the caller keeps) reuses the owner-tile entries of layers whose
    neuron grouping is unchanged (a :class:`BytesLRU` keyed by layer, grouping and config)."""
    led = ledger or MemoryLedger(machine, remedy=SRAM_REMEDY)
    TPC = machine.tiles_per_chip
    T, B = config.timesteps, config.batch
    nmax = config.n_max
    lay = _layout(config, placement, TPC)
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * config.n_layers
    mine = None if cache is None else lru_in(cache, ("memory",), CACHE_BYTES, _entries_nbytes)
    for l, ly in enumerate(lay):
        n_max_in = config.input_cap if l == 0 else nmax[l - 1]
        key = None if mine is None else (l, placement.groupings[l][1].tobytes(), config)
        entries = None if key is None else mine.get(key)
        if entries is None:
            entries = _owner_memory(config, placement, l, n_max_in, bool(rec[l]))
            if key is not None:
                mine[key] = entries
        led.add_group(entries, ly.tiles)
        # spike id/count sequences [T, B, N_max] + [T, B, 2], spread over the layer's chip (tile 0 of chip 0 free)
        chip_tiles = slice(ly.chip * TPC + (1 if ly.chip == 0 else 0), (ly.chip + 1) * TPC)
        led.add(
            "variables:spikes",
            4.0 * T * B * (nmax[l] + 2) / (chip_tiles.stop - chip_tiles.start),
            chip_tiles,
            f"layer {l + 1} spike sequence",
        )
        led.add(
            "exchange_buffers",
            4.0 * (2 * -(-config.layers[l + 1] // ly.f) + nmax[l] + 2),
            ly.comp_tiles,
            f"layer {l + 1} compaction flags and chunk list",
        )
    # the data input sequence [T, B, input_cap] ids + counts, spread over chip 0
    led.add("variables:inputs", 4.0 * T * B * (config.input_cap + 1) / (TPC - 1), slice(1, TPC), "input spike sequence")
    used = np.zeros(machine.total_tiles, bool)
    for ly in lay:
        used[ly.tiles] = True
        used[ly.comp_tiles] = True
    led.add("stack", STACK_BYTES, np.flatnonzero(used), "worker and supervisor stacks")
    return led
