"""The SNN training step as data: :data:`STEP_ROWS` lists every row kind of the step (what it
writes where, its folded PopLibs calls, its link flows; :mod:`tilesim.models.snn.step.timing` says what each
row is), :class:`LayerTerms` what a layer contributes, and :func:`step_shape` where the rows sit
in the program."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property, lru_cache

import numpy as np

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
)
PER_CHIP_PLACES = (HOST_SYNC,)

HOST_SYNC_LABEL = "host: variable sync"
HOST_EXCESS_LABEL = "host copy: rate beyond documented (fitted, mechanism unknown)"
"""The part of :data:`HOST_SYNC_LABEL`'s time beyond the round trip at Graphcore's documented rate: booked as
residual inside the host row's own superstep (:meth:`tilesim.outputs.records.SimResult.book_part`), its
share :func:`tilesim.models.snn.step.timing.host_excess_share`."""

# Which layers a term or a link flow applies to.
EVERY_LAYER, WITH_INPUT_GRAD, OUTPUT_LAYER = "every layer", "layers with input gradients", "output layer"

# Link flows between chips: (sender chip, receiver chip) of layer l.
TO_NEXT_LAYER = "to the next layer"  # l's chip -> layer l+1's chip (the spike list)
FROM_INPUT_LAYER = "from the input layer"  # layer l-1's chip -> l's chip (replicated input list)
TO_GRAD_TARGETS = "to the gradient targets"  # l's chip -> chip of each layer it sends slot gradients to
# Link flows of a layer that spans chips (:mod:`tilesim.models.snn.stacks.dataflow` "Layers across chips"; none
# on one chip): a part's chunk lists to the head chip's combiners; the head chip to the layer's other chips
# (a split output layer's loss gradients); the first layer's input lists from its head chip to its others.
TO_HEAD_CHIP = "to the layer's head chip"
TO_LAYER_CHIPS = "to the layer's other chips"
INPUT_TO_CHIPS = "the input to the first layer's other chips"

# How a row repeats: every time step forward (t ascending), backward (t descending), or once per step.
FORWARD, BACKWARD, ONCE = "forward", "backward", "once"
# What a row is: vertices computing, PopLibs copies/slices only, an exchange of copies, the host copy.
KIND_COMPUTE, KIND_COPY, KIND_EXCHANGE, KIND_HOST = "compute", "copy", "exchange", "host"


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
    ``per_layer``: one row per layer (layer l's terms only). ``per_chip``: one row per chip that
    has work in it, in chip order (the authors issue one ``reduceMany`` per IPU, one after another:
    each slot computes the layers of its chip; the row's exchange comes with the last chip's slot).
    ``counters``: the work counters
    (phase, names) its compute is made of. ``exchange``: what the row's exchange carries (its
    senders are the places of its ``out`` writes, its receivers those of its ``in`` writes, or
    ``sent_from`` when the senders pay nothing: :mod:`tilesim.models.snn.outputs.explain` reads these)."""

    label: str
    kind: str
    loop: str
    compute_sets: Calls
    copies: Calls = Calls()
    writes: tuple = ()
    flows: tuple = ()
    per_layer: bool = False
    per_chip: bool = False
    sets_first: bool = False
    counters: tuple = ()
    exchange: str = ""
    sent_from: str = ""
    broadcast: bool = False  # the exchange's receivers all take the same data: a multicasting fabric sends it as trees
    host_in: bool = False  # the step's input crosses the host link on this row's (first) superstep
    host_out: bool = False  # the per-sample loss goes back to the host on this row's superstep
    launch: bool = False  # the host launches the step's program here (booked as host)

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
        flows=(Flow("inputs_link", INPUT_TO_CHIPS),),
        exchange="input lists (forward)",
        broadcast=True,
        host_in=True,
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
        flows=(Flow("chunk_out", TO_HEAD_CHIP),),
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
        flows=(Flow("loss_in", TO_LAYER_CHIPS, OUTPUT_LAYER),),
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
        broadcast=True,
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
        per_chip=True,
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
    StepRow(HOST_SYNC_LABEL, KIND_HOST, ONCE, Calls(0), writes=(Write(COMPUTE, HOST_SYNC, "weights"),)),
)
"""The training step's rows in program order (the module docstring says what each does)."""

PHASE_LABELS = tuple(row.label for row in STEP_ROWS)
# rows the tiles run for the host (the variable copy): the engine times them as compute, every
# breakdown books them as host (:func:`book_step`)
HOST_LABELS = tuple(row.label for row in STEP_ROWS if row.kind == KIND_HOST)


@dataclass(frozen=True)
class PartTerms:
    """The terms that differ between the chips of a layer that spans chips (one per
    :class:`tilesim.models.snn.placement.roles.ChipPart`): its compaction tiles' (per tile: flags in, cycles, chunk
    list out, from the part's own chunk size) and, with input gradients, its chip's stage-1 reduction
    (``[T]`` per chip tile: the partials of its own owner tiles; the head chip's also adds the other
    chips' sums)."""

    flags_in: float
    compaction: float
    chunk_out: float
    partials_in: np.ndarray | None
    reduce: np.ndarray | None


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
    inputs_link: float  # the first layer's B input lists per time step (to its other chips)
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
    parts: tuple = ()  # per chip of a layer that spans chips, its :class:`PartTerms` (else empty)
    memo: dict = field(default_factory=dict, compare=False, repr=False)  # chip reductions (:class:`PeakRows`)

    def nbytes(self) -> int:
        """Bytes of the terms' arrays (the reductions in ``memo`` are small)."""
        return sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))


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
    layers. A *slot* is one row of the table (:attr:`rows`; per layer for ``per_layer`` rows): ``row[k]``
    its index in the table, ``layer[k]`` its layer (−1: all), and its superstep at time step
    ``t`` is ``start[k] + stride[k]·t`` (``stride`` 0: once per step). ``chip[k]``: the chip of
    a slot of a ``per_chip`` row split over ``reduce_chips`` (−1: not split)."""

    T: int
    L: int
    supersteps: int
    row: tuple
    layer: tuple
    start: tuple
    stride: tuple
    merged: bool = False  # per-layer exchange rows merged into one slot (``copies="merged"``)
    chip: tuple = ()
    reduce_chips: tuple = ()  # the chips a ``per_chip`` row runs on, in order (one or none: one slot)
    rows: tuple = STEP_ROWS  # the table rows ``row[k]`` indexes (the stack's: TableTraits.rows)

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


def _slots_of_row(row_j: StepRow, L: int, merged: bool, reduce_chips: tuple) -> list:
    """(layer, chip) of each slot of one table row (−1: all layers / not split by chip)."""
    if row_j.per_chip and len(reduce_chips) > 1:
        return [(-1, c) for c in reduce_chips]
    split = row_j.per_layer and not (merged and row_j.kind == KIND_EXCHANGE)
    return [(l, -1) for l in (range(L) if split else [-1])]


@lru_cache(maxsize=64)
def step_shape(T: int, L: int, merged: bool = False, reduce_chips: tuple = (), rows: tuple = STEP_ROWS) -> StepShape:
    """The :class:`StepShape` of ``T`` time steps and ``L`` layers: consecutive rows of the
    table with the same ``loop`` form a block, repeated T times (forward: t ascending,
    backward: t descending) or once. ``merged`` (``copies="merged"``): a per-layer row made
    of copies only (:data:`KIND_EXCHANGE`) is one slot for all layers: the L consecutive
    ``Copy`` programs are one exchange (each tile's bytes summed, the busiest tile sets it).
    ``reduce_chips``: the chips a ``per_chip`` row runs on; with two or more it is one slot per
    chip, one after another (with one or none it is one slot). ``rows``: the stack's table
    (:attr:`tilesim.models.snn.step.traits.TableTraits.rows`; :data:`STEP_ROWS` on Poplar)."""
    table = rows
    row, layer, chip, start, stride = [], [], [], [], []
    s = 0
    j = 0
    while j < len(table):
        loop = table[j].loop
        block = []
        while j < len(table) and table[j].loop == loop:
            block += [(j, l, c) for l, c in _slots_of_row(table[j], L, merged, reduce_chips)]
            j += 1
        n = len(block)
        for i, (r, l, c) in enumerate(block):
            row.append(r)
            layer.append(l)
            chip.append(c)
            start.append(s + i + (n * (T - 1) if loop == BACKWARD else 0))
            stride.append({FORWARD: n, BACKWARD: -n, ONCE: 0}[loop])
        s += n * (1 if loop == ONCE else T)
    rc = tuple(reduce_chips) if len(reduce_chips) > 1 else ()
    return StepShape(T, L, s, tuple(row), tuple(layer), tuple(start), tuple(stride), merged, tuple(chip), rc, rows)
