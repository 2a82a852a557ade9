"""The dataflow stacks' shared table program (``tt-metal``, ``csl``): the algorithm's rows without the IPU
stack's.

Gone: the PopLibs sequence copies (a kernel writes its list where the backward pass reads it), the dW reduce
(one dW per core; the optimizer zeroes it) and the host variable sync (the state stays on the device); no
library calls are folded into any row; a row runs all layers at once (no per-layer ``Copy`` programs) and the
input-gradient reduction runs on every chip at once. The input crosses the host link in a ``host:`` row before
the step (each stack names it; TT-Metal also launches the program there and reads the loss back after it).

Layers across chips. On ``poplar`` a layer's neurons sit on one chip (the authors' op: a layer's
dense→sparse compaction and list merge run on one IPU); a placement that splits one is refused
(:func:`tilesim.models.snn.step.traits.check_layer_chips`). On the dataflow stacks a layer may span chips
(``TableTraits.layers_span_chips``): each chip holding part of it compacts its own part's flags
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

from dataclasses import replace

from tilesim.models.snn.stacks._table import TableStack
from tilesim.models.snn.step.table import KIND_COMPUTE, KIND_HOST, ONCE, STEP_ROWS, Calls, StepRow
from tilesim.models.snn.step.traits import TableTraits

__all__ = ["DataflowTableStack", "dataflow_rows", "dataflow_traits", "DATAFLOW_BAND"]

DATAFLOW_BAND = (
    "phases end at their slowest core (an upper bound: a dataflow schedule overlaps a core's next phase "
    "with others' current one; band down to the busiest core's own work)"
)
_IPU_ONLY_ROWS = ("fwd: update sequences", "bwd: slice sequences", "dW reduce", "host: variable sync")
_RENAMED = {"fwd: slice inputs": "fwd: input lists", "bwd: replicate lists": "bwd: lists to owners"}
_FIXED_WHY = (
    " Every tile spends about the same there: it is the phase's fixed cost (its handshake and the "
    "exchange's set-up and longest route, per time step), not any tile's data; fewer time steps shorten "
    "it, a different mapping does not."
)


def dataflow_rows(first: str, last: str | None, launch: bool) -> tuple:
    """The table's rows on a dataflow stack: a host row ``first`` before the step (``launch``: the host
    launches the program there), :data:`STEP_ROWS` without the IPU stack's rows, and a host row ``last``
    after it (None: none)."""
    rows = [StepRow(first, KIND_HOST, ONCE, Calls(0), host_in=True, launch=launch)]
    for r in STEP_ROWS:
        if r.label in _IPU_ONLY_ROWS:
            continue
        rows.append(
            replace(
                r,
                label=_RENAMED.get(r.label, r.label),
                compute_sets=Calls(0),
                copies=Calls(0),
                per_layer=False,
                per_chip=False,
                host_in=False,
            )
        )
    if last is not None:
        rows.append(StepRow(last, KIND_HOST, ONCE, Calls(0), host_out=True))
    return tuple(rows)


def dataflow_traits(name: str, machine, rows: tuple, launch_s: float, loss_to_host: bool, sync: str) -> TableTraits:
    """The table traits of a dataflow stack: one dW per core, no reduce row, no library calls, no variable
    sync, no pipeline switches, every chip reducing at once; layers may span chips."""
    return TableTraits(
        name,
        int(machine.chip.workers_per_tile),
        dw_copies=1,
        dw_reduce=False,
        library_calls=False,
        host_variable_sync=False,
        pipeline_stages=False,
        serial_reduce=False,
        launch_s=launch_s,
        loss_to_host=loss_to_host,
        sync=sync,
        rows=rows,
    )


class DataflowTableStack(TableStack):
    """A dataflow stack on the table program (subclasses give the traits and the host rows' words)."""

    HOST_WHY = ""

    def explain(self, label: str, uniform: bool) -> str | None:
        if label in self.host_labels():
            return self.HOST_WHY
        fixed = {r.label for r in self.rows() if r.kind != KIND_COMPUTE}
        if label in fixed or uniform:
            return _FIXED_WHY
        return None
