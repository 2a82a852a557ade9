"""The execution stack: how a machine's own software turns the SNN training step into its program.

The workload (:mod:`tilesim.models.snn.step.counters`, :mod:`tilesim.models.snn.step.table`) describes the algorithm:
per-tile neuron state and weights, the kernels' work per phase, the lists and gradients exchanged
between layers. An :class:`ExecutionStack` says what the machine's software adds around it, from the
stack and the machine (never a constant): workers per tile and the per-worker dW copies, the per-call
overheads, the host traffic and how the phases synchronise. Three stacks, each what that machine's
own programmers would build (EVIDENCE.md "Execution stacks" gives the sources; where the issue that
asked for them is silent, the choice is the one named here):

``poplar`` (Graphcore IPU; the authors' op, unchanged)
    BSP supersteps with the IPU's hardware sync; the authors' per-layer PopLibs calls (``dynamicSlice``,
    ``dynamicUpdate``, ``Copy``, ``poprand``, ``mulInPlace``) folded into the rows as compute sets
    (``compute_set_cycles`` each) and copies, each with its own sync and exchange set-up; six worker
    vertices per tile each keep a private dW copy and a ``dW reduce`` row sums them; the input
    gradients' ``reduceMany`` once per IPU, one after another; the Keras pipeline's stage switches; the
    trainable state's host round trip once per epoch (Keras's metric reset, TensorFlow's executor:
    :mod:`tilesim.models.snn.step.structure`) and the input sequence by infeed every step.
``tt-metal`` (Tenstorrent Tensix cores, TT-Metalium)
    One fused program per training step: reader, compute and writer kernels on every core loop over
    the time steps and layers on the device (as the authors' one Poplar op does), the phases handing
    data on through circular buffers and semaphores; the host enqueues the input batch to DRAM
    (``EnqueueWriteBuffer``), the program (``EnqueueProgram``, one launch per step) and reads the loss
    back. A core's one compute thread keeps one dW in L1 (no per-worker copies, no reduce row; the
    optimizer zeroes the dW it consumes); no library calls between the phases; weights and optimizer
    state stay on the device (no variable sync). Rows for all layers at once (no per-layer copies),
    the input-gradient reduction on every chip at once.
``csl`` (Cerebras WSE PEs, CSL with the Cerebras SDK)
    Tasks activated by arriving wavelets: no kernel launches, no library calls, one dW per PE, no
    variable sync; the only host traffic is the input stream (streamed into the edge PEs every step).

Layers across chips. On ``poplar`` a layer's neurons sit on one chip (the authors' op: a layer's
dense→sparse compaction and list merge run on one IPU); a placement that splits one is refused
(:func:`check_layer_chips`). On the dataflow stacks a layer may span chips
(``ExecutionStack.layers_span_chips``): each chip holding part of it compacts its own part's flags
on its own compaction tiles (B·2·f_c of them, f_c from the part's neuron count), and the layer's B
combiners, on the chip of its first neuron (its *head* chip), merge every part's chunk lists, those
of the other chips arriving as link flows: one global merge per (layer, sample), so the lists are
those of a one-chip placement. The merged list goes over links to every other chip of the layer
(each records it for the backward pass) and to every chip of the next layer; a first layer's other
chips get the input lists from its head chip. Backward, each chip replicates lists and g to its own
owner tiles from its copy (an input list from the chip of the layer below that holds it, or over a
link from that layer's head chip); the input-gradient partials are reduced on each chip, the other
chips' sums then cross to the head chip, which adds them and sends g to every chip of the receiving
layer. Assumed: the partial sums' link hop and g's hop to the receiving chips share the reduce row's
one exchange (band: one more link latency and chip handshake per time step), and a split output
layer's loss gradients go from the head chip to its other chips whole (B·(8·N_max+8) bytes each).

Sync. The engine is BSP: a superstep ends with its slowest tile and costs the machine's
``chip.sync_cycles``. On the dataflow stacks a core starts a phase when its inputs arrive; tilesim
models that as supersteps whose barrier is the stack's handshake, which is what the Tenstorrent and
Cerebras presets' ``sync_cycles`` are (a semaphore round trip on the NoC, [U] 100 cycles, band 50-500;
a wavelet handshake, 0 cycles: the route's hop latency is in the exchange). The barrier between
phases is an upper bound on a dataflow schedule, in which consecutive phases of different cores
overlap: band down to the busiest core's own work (:data:`DATAFLOW_BAND`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilesim.errors import ConfigError, MappingError, config_message

__all__ = [
    "STACKS",
    "STACK_CHOICES",
    "VENDOR_STACKS",
    "ExecutionStack",
    "stack_for",
    "stack_name",
    "describe_stack",
    "check_layer_chips",
    "ASSUMPTIONS",
    "TT_LAUNCH_S",
]

STACKS = ("poplar", "tt-metal", "csl")
STACK_CHOICES = ("auto", *STACKS)
VENDOR_STACKS = {"graphcore": "poplar", "tenstorrent": "tt-metal", "cerebras": "csl"}
"""The stack a machine's vendor (:attr:`tilesim.machine.description.Machine.vendor`) builds with."""

TT_LAUNCH_S = 5e-6
"""[U] One ``EnqueueProgram`` of the fused step program by fast dispatch (host → prefetch → dispatch
cores → go signal to the workers), booked as host time once per step: 5 µs, band 1-20 µs (Metal
Trace replays the commands from DRAM and removes most of the host part: the low end;
tt-metal ``tests/tt_metal/tt_metal/perf_microbenchmark/dispatch/test_pgm_dispatch.cpp`` measures it)."""

TT_SEMAPHORE_BAND = "a semaphore round trip between phases: the preset's sync_cycles [U], band 50-500 cycles"
CSL_WAVELET_BAND = "a wavelet handshake between phases: 0 cycles beyond the route's hops [U], band 0-100 cycles"
DATAFLOW_BAND = (
    "phases end at their slowest core (an upper bound: a dataflow schedule overlaps a core's next phase "
    "with others' current one; band down to the busiest core's own work)"
)


ASSUMPTIONS = {
    "poplar": (
        "the authors' PopLibs calls per layer",
        "a private dW copy per worker vertex and a dW reduce",
        "host variable sync and infeed per the assumed structure",
    ),
    "tt-metal": (
        "one fused program per step, launched once [U] 5 us (band 1-20 us)",
        "input batch to DRAM and the loss back on one command queue, not overlapped (band: 0 with two)",
        "1 dW per core",
        TT_SEMAPHORE_BAND,
        DATAFLOW_BAND,
    ),
    "csl": (
        "tasks on wavelets, no launches",
        "host I/O: the input stream only, not overlapped with the previous step (band: 0)",
        "1 dW per PE",
        CSL_WAVELET_BAND,
        DATAFLOW_BAND,
    ),
}
"""The named assumptions of each stack (what a summary prints; EVIDENCE.md "Execution stacks")."""


def describe_stack(name: str) -> str:
    """One line: the stack ``name`` and its named assumptions (``auto``: the machine vendor's)."""
    if name == "auto":
        return "auto (the machine vendor's)"
    return f"{name}: " + "; ".join(ASSUMPTIONS[name])


@dataclass(frozen=True)
class ExecutionStack:
    """How one machine's software runs the step (see the module docstring).

    ``workers_per_tile``: the machine's (``chip.workers_per_tile``); ``dw_copies``: weight-gradient
    copies per tile (one per worker on Poplar's race-free vertices, else one); ``dw_reduce``: a
    ``dW reduce`` row zeroes the copies and sums them into one (else the optimizer zeroes the one
    dW it consumes); ``library_calls``: the
    authors' PopLibs calls are folded into the rows (compute sets and copies with their syncs);
    ``host_variable_sync``: the trainable state crosses the host link (Keras/TensorFlow);
    ``pipeline_stages``: the Keras pipeline's stage switches; ``serial_reduce``: one ``reduceMany``
    per chip, one after another; ``launch_s``: host time per step to launch the step's program;
    ``loss_to_host``: the per-sample loss is read back every step; ``sync``: what ends a phase
    (the named assumptions a summary prints: :data:`ASSUMPTIONS`); ``chip_sequences``: each layer's
    recorded spike sequence is a sliceable tensor spread over its whole chip (Poplar's
    ``createSliceableTensor``), else its own tiles keep it (a dataflow core records what it receives);
    ``layers_span_chips``: a layer's neurons may sit on several chips (the module docstring's
    "Layers across chips"), else each layer keeps to one chip."""

    name: str
    workers_per_tile: int
    dw_copies: int
    dw_reduce: bool
    library_calls: bool
    host_variable_sync: bool
    pipeline_stages: bool
    serial_reduce: bool
    launch_s: float
    loss_to_host: bool
    sync: str
    chip_sequences: bool = False
    layers_span_chips: bool = True

    def describe(self) -> str:
        """One line: the stack and its named assumptions (:func:`describe_stack`)."""
        return describe_stack(self.name)


def stack_name(machine, choice: str = "auto") -> str:
    """The stack ``choice`` names on ``machine``: ``"auto"`` is its vendor's
    (:data:`VENDOR_STACKS`); a machine that names no vendor (a user's file) gets ``poplar`` on an
    all-to-all exchange (the IPU's, today's model) and otherwise ``tt-metal`` with device DRAM beside
    the tiles, else ``csl`` (single-thread PEs on a mesh, as ``mesh-demo``)."""
    if choice not in STACK_CHOICES:
        raise ConfigError(
            config_message(
                "stack", choice, f"must be one of {', '.join(STACK_CHOICES)}", "e.g. --stack auto (the vendor's)"
            )
        )
    if choice != "auto":
        return choice
    vendor = getattr(machine, "vendor", "")
    if vendor in VENDOR_STACKS:
        return VENDOR_STACKS[vendor]
    if machine.fabric.kind == "all-to-all":
        return "poplar"
    return "tt-metal" if machine.chip.dram_bytes_per_s > 0 else "csl"


def stack_for(machine, choice: str = "auto") -> ExecutionStack:
    """The :class:`ExecutionStack` ``choice`` (:data:`STACK_CHOICES`) on ``machine``."""
    name = stack_name(machine, choice)
    workers = int(machine.chip.workers_per_tile)
    if name == "poplar":
        return ExecutionStack(
            name,
            workers,
            dw_copies=workers,
            dw_reduce=True,
            library_calls=True,
            host_variable_sync=True,
            pipeline_stages=True,
            serial_reduce=True,
            launch_s=0.0,
            loss_to_host=False,
            sync="BSP barriers (the IPU's sync)",
            chip_sequences=True,
            layers_span_chips=False,
        )
    dataflow = ExecutionStack(  # csl; tt-metal differs in its launch, its loss read-back and its handshakes
        name,
        workers,
        dw_copies=1,
        dw_reduce=False,
        library_calls=False,
        host_variable_sync=False,
        pipeline_stages=False,
        serial_reduce=False,
        launch_s=0.0,
        loss_to_host=False,
        sync="wavelet-triggered tasks (dataflow)",
    )
    if name == "tt-metal":
        return replace(dataflow, launch_s=TT_LAUNCH_S, loss_to_host=True, sync="semaphore handshakes (dataflow)")
    return dataflow


def check_layer_chips(placement, stack: ExecutionStack) -> None:
    """Raise :class:`tilesim.errors.MappingError` if ``placement`` splits a layer over chips and ``stack``
    keeps each layer on one chip (``poplar``: the authors' op), naming the fix."""
    split = placement.spans_chips() if not stack.layers_span_chips else []
    if split:
        l = split[0]
        raise MappingError(
            f"layer {l + 1} spans chips {sorted(placement.chips_of_layer(l))}: on the {stack.name} stack a layer's "
            "sparse operation runs on one chip (as on the IPU); keep each layer on one chip (e.g. --mapping "
            "contiguous or more neurons per tile) or use a dataflow stack (--stack tt-metal or csl)"
        )
