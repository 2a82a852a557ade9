"""``tt-metal``: the SNN step on Tenstorrent Tensix cores, built with TT-Metalium.

One fused program per training step: reader, compute and writer kernels on every core loop over the time
steps and layers on the device (as the authors' one Poplar op does), the phases handing data on through
circular buffers and semaphores; the host enqueues the input batch to DRAM (``EnqueueWriteBuffer``), the
program (``EnqueueProgram``, one launch per step) and reads the loss back. A core's one compute thread keeps
one dW in L1 (no per-worker copies, no reduce row; the optimizer zeroes the dW it consumes); no library calls
between the phases; weights and optimizer state stay on the device (no variable sync). Today the program is
the dataflow table program (:mod:`tilesim.models.snn.stacks.dataflow`).
"""

from __future__ import annotations

from tilesim.models.snn.stacks.dataflow import DATAFLOW_BAND, DataflowTableStack, dataflow_rows, dataflow_traits

__all__ = ["TtMetalStack", "TT_LAUNCH_S"]

TT_LAUNCH_S = 5e-6
"""[U] One ``EnqueueProgram`` of the fused step program by fast dispatch (host → prefetch → dispatch
cores → go signal to the workers), booked as host time once per step: 5 µs, band 1-20 µs (Metal
Trace replays the commands from DRAM and removes most of the host part: the low end;
tt-metal ``tests/tt_metal/tt_metal/perf_microbenchmark/dispatch/test_pgm_dispatch.cpp`` measures it)."""

_ROWS = dataflow_rows("host: input to DRAM, launch", "host: loss to host", launch=True)


class TtMetalStack(DataflowTableStack):
    """TT-Metalium on Tensix cores (module docstring)."""

    name = "tt-metal"
    ASSUMPTIONS = (
        "one fused program per step, launched once [U] 5 us (band 1-20 us)",
        "input batch to DRAM and the loss back on one command queue, not overlapped (band: 0 with two)",
        "1 dW per core",
        "a semaphore round trip between phases: the preset's sync_cycles [U], band 50-500 cycles",
        DATAFLOW_BAND,
    )
    HOST_WHY = (
        " The host writes the step's input to the device, launches the step's program and reads the loss back "
        "before and after the cores run: the input's bytes over the host link plus its latency and the launch "
        "(models/snn/stacks/tt_metal.py names the launch and the overlap it leaves out)."
    )

    @classmethod
    def from_machine(cls, machine) -> TtMetalStack:
        traits = dataflow_traits(cls.name, machine, _ROWS, TT_LAUNCH_S, True, "semaphore handshakes (dataflow)")
        return cls(traits, machine)
