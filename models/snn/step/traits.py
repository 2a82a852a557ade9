"""The traits of a stack that runs the SNN step as the shared table program (:mod:`tilesim.models.snn.step.timing`).

The table program (:data:`tilesim.models.snn.step.table.STEP_ROWS` and its emitter) is the authors' IPU op;
a stack built on it (:class:`tilesim.models.snn.stacks.poplar.PoplarStack`) says what its software adds
around the algorithm through these traits. The stacks themselves live in :mod:`tilesim.models.snn.stacks`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesim.errors import MappingError
from tilesim.models.snn.step.table import STEP_ROWS

__all__ = ["TableTraits", "check_layer_chips", "poplar_traits"]


@dataclass(frozen=True)
class TableTraits:
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
    (a named assumption); ``chip_sequences``: each layer's
    recorded spike sequence is a sliceable tensor spread over its whole chip (Poplar's
    ``createSliceableTensor``), else its own tiles keep it (a dataflow core records what it receives);
    ``layers_span_chips``: a layer's neurons may sit on several chips (the module docstring's
    "Layers across chips" of :mod:`tilesim.models.snn.stacks.dataflow`), else each layer keeps to one chip;
    ``rows``: the table rows the stack's program is made of (:data:`STEP_ROWS` on Poplar)."""

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
    rows: tuple = STEP_ROWS  # the table's rows this stack runs, in program order (StepRow)

    @property
    def labels(self) -> tuple:
        """The row labels, in program order."""
        return tuple(row.label for row in self.rows)


def check_layer_chips(placement, stack: TableTraits) -> None:
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


def poplar_traits(workers_per_tile: int) -> TableTraits:
    """The authors' IPU op (the table program as measured): six worker vertices with a private dW copy each
    and a ``dW reduce``, the PopLibs calls folded into the rows, the host variable sync, the Keras pipeline's
    stage switches, one ``reduceMany`` per IPU in turn, the sequences as sliceable tensors over the chip, each
    layer on one chip (:class:`tilesim.models.snn.stacks.poplar.PoplarStack`)."""
    return TableTraits(
        "poplar",
        int(workers_per_tile),
        dw_copies=int(workers_per_tile),
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
