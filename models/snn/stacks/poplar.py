"""``poplar``: the SNN step as the authors built it on the Graphcore IPU (their one Poplar op, unchanged).

BSP supersteps with the IPU's hardware sync; the authors' per-layer PopLibs calls (``dynamicSlice``,
``dynamicUpdate``, ``Copy``, ``poprand``, ``mulInPlace``) folded into the rows as compute sets
(``compute_set_cycles`` each) and copies, each with its own sync and exchange set-up; six worker
vertices per tile each keep a private dW copy and a ``dW reduce`` row sums them; the input gradients'
``reduceMany`` once per IPU, one after another; the Keras pipeline's stage switches; the trainable
state's host round trip once per epoch (Keras's metric reset, TensorFlow's executor:
:mod:`tilesim.models.snn.step.structure`) and the input sequence by infeed every step. The program is the
table program (:mod:`tilesim.models.snn.step.timing`, :data:`tilesim.models.snn.step.table.STEP_ROWS`) timed
by the IPU's calibrated cost model (``tilesim/presets/costs/snn.toml``): that calibration times this stack
only. A layer's neurons sit on one chip (a placement that splits one is refused).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesim.models.snn.stacks._table import TableStack
from tilesim.models.snn.step.table import HOST_EXCESS_LABEL, HOST_LABELS, HOST_SYNC_LABEL, KIND_COMPUTE
from tilesim.models.snn.step.timing import default_costs, host_excess_share
from tilesim.models.snn.step.traits import poplar_traits

__all__ = ["PoplarStack"]

_HOST_COPY_WHY = (
    " Keras resets its loss metric at every epoch start, and Graphcore's TensorFlow executor then "
    "moves every variable the device updated to the host and every argument back at the epoch's "
    "first execution (graphcore/tensorflow: keras_extension_base.py _fit_delegate, poplar_executor.cc "
    "CheckMoveDeviceToHostRequired / MoveDeviceToHost / MoveHostToDevice): the weights and optimizer "
    "state, both ways, amortised over the epoch's steps. Its rate is the one number no source gives: "
    "fitted to the measured steps (host_copy_ns_per_byte in tilesim/presets/costs/snn.toml; "
    "--host-rate documented takes Graphcore's 3 GB/s instead). Longer epochs, or SGD instead of Adam "
    "(no optimizer slots to move), shorten it."
)
_HOST_EXCESS_WHY = (
    " This is the part of the host variable copy beyond the round trip at Graphcore's documented 3 GB/s "
    "(--host-rate documented): the fitted rate (host_copy_ns_per_byte) makes the copy slower than any source "
    "says, and no source says why; it is booked as residual, not as a mechanism "
    "(models/snn/calibration/README.md lists what was tried)."
)
_FIXED_WHY = (
    " Every tile spends about the same there: it is the fixed cost of the phase's compute sets, "
    "syncs and copies (per layer and time step), not any tile's data; fewer layers or time "
    "steps shorten it, a different mapping does not."
)
_FIXED_ROWS = tuple(row.label for row in poplar_traits(6).rows if row.kind != KIND_COMPUTE)


@dataclass(frozen=True)
class PoplarStack(TableStack):
    """The authors' IPU op (module docstring)."""

    name = "poplar"
    host_structure = True
    ASSUMPTIONS = (
        "the authors' PopLibs calls per layer",
        "a private dW copy per worker vertex and a dW reduce",
        "host variable sync and infeed per the assumed structure",
    )

    @classmethod
    def from_machine(cls, machine) -> PoplarStack:
        return cls(poplar_traits(machine.chip.workers_per_tile), machine)

    def host(self, step, result):
        """The host copy's rows as host time, the copy's time beyond the documented rate first split off as its
        own residual row (:data:`HOST_EXCESS_LABEL`, share :func:`host_excess_share`; same superstep, totals
        unchanged)."""
        share = host_excess_share(self.machine, step.structure, step.costs or default_costs()) if self.machine else 0.0
        return result.book_part(HOST_SYNC_LABEL, HOST_EXCESS_LABEL, share, "residual").book_as(HOST_LABELS, "host")

    def default_placement(self, machine) -> str:
        """The paper's ``contiguous`` (the authors' op, unchanged)."""
        return "contiguous"

    def explain(self, label: str, uniform: bool) -> str | None:
        if label == HOST_EXCESS_LABEL:
            return _HOST_EXCESS_WHY
        if label in HOST_LABELS:
            return _HOST_COPY_WHY
        if label in _FIXED_ROWS or uniform:
            return _FIXED_WHY
        return None
