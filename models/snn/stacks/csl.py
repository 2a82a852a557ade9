"""``csl``: the SNN step on Cerebras WSE processing elements, written in CSL with the Cerebras SDK.

Tasks activated by arriving wavelets: no kernel launches, no library calls, one dW per PE, no variable sync;
the only host traffic is the input stream (streamed into the edge PEs every step). Today the program is the
dataflow table program (:mod:`tilesim.models.snn.stacks.dataflow`).
"""

from __future__ import annotations

from tilesim.models.snn.stacks.dataflow import DATAFLOW_BAND, DataflowTableStack, dataflow_rows, dataflow_traits

__all__ = ["CslStack"]

_ROWS = dataflow_rows("host: input stream", None, launch=False)


class CslStack(DataflowTableStack):
    """CSL on WSE PEs (module docstring)."""

    name = "csl"
    ASSUMPTIONS = (
        "tasks on wavelets, no launches",
        "host I/O: the input stream only, not overlapped with the previous step (band: 0)",
        "1 dW per PE",
        "a wavelet handshake between phases: 0 cycles beyond the route's hops [U], band 0-100 cycles",
        DATAFLOW_BAND,
    )
    HOST_WHY = (
        " The host streams the step's input into the edge PEs before the PEs can start: the input's bytes over "
        "the host link plus its latency (models/snn/stacks/csl.py names the overlap it leaves out)."
    )

    @classmethod
    def from_machine(cls, machine) -> CslStack:
        return cls(dataflow_traits(cls.name, machine, _ROWS, 0.0, False, "wavelet-triggered tasks (dataflow)"), machine)
