"""``tt-metal``: the SNN training step as a Tenstorrent programmer writes it with TT-Metalium.

One fused program per step (:mod:`tilesim.models.snn.stacks.tt_program`): each layer on a rectangle of the
Tensix core grid (the ``rectangles`` placement, :func:`tilesim.mapping.strategies.rectangles`, on no more
chips than is fastest: :mod:`tilesim.models.snn.stacks.tt_place`); per core a reader, a compute and a writer
kernel over circular buffers in L1, overlapped (:mod:`tilesim.models.snn.stacks.tt_kernels`); each core
thresholds and compacts its own neurons' spikes and multicasts its list to the next layer's rectangle
(:mod:`tilesim.models.snn.stacks.tt_noc`, the NoC model); the synaptic and gradient work on the matrix
engine or the vector unit, whichever is cheaper per layer and kernel; weights, dW and optimizer state
streamed from DRAM where L1 cannot hold them (:mod:`tilesim.models.snn.stacks.tt_memory`); the program's
dispatch per step as Tenstorrent measured it. Costs per operation: :mod:`tilesim.models.snn.stacks.tt_costs`
(``tensix_costs.toml``) and the ``tilesim matmul`` model; the IPU's fitted cost model is never read.
"""

from __future__ import annotations

from tilesim.models.snn.stacks.base import Described
from tilesim.models.snn.stacks.tt_costs import TensixCosts, default_tensix_costs
from tilesim.models.snn.stacks.tt_memory import residency, tt_ledger
from tilesim.models.snn.stacks.tt_program import (
    BWD,
    DISPATCH_BENCHMARK,
    FWD,
    HOST_IN,
    HOST_LABELS,
    HOST_OUT,
    LOSS,
    OPT,
    build_tt_program,
    tt_layers,
)
from tilesim.models.snn.step.table import BACKWARD, FORWARD, KIND_COMPUTE, KIND_HOST, ONCE, Calls, StepRow

__all__ = ["TtMetalStack", "TT_ROWS"]

TT_ROWS = (
    StepRow(HOST_IN, KIND_HOST, ONCE, Calls(0), host_in=True, launch=True),
    StepRow(
        FWD,
        KIND_COMPUTE,
        FORWARD,
        Calls(0),
        counters=(("state_update", ("synaptic_adds", "neurons_updated")),),
        exchange="each core's spike list, multicast to the next layer's cores",
        broadcast=True,
    ),
    StepRow(LOSS, KIND_COMPUTE, ONCE, Calls(0)),
    StepRow(
        BWD,
        KIND_COMPUTE,
        BACKWARD,
        Calls(0),
        counters=(("weight_grad", ("grad_adds",)), ("input_grad", ("macs",)), ("state_grad", ("slots_applied",))),
        exchange="input-gradient partials to the owner core of each input entry",
    ),
    StepRow(OPT, KIND_COMPUTE, ONCE, Calls(0), counters=(("optimizer", ("weights_updated",)),)),
    StepRow(HOST_OUT, KIND_HOST, ONCE, Calls(0), host_out=True),
)
"""The program's row kinds, in program order (:mod:`tilesim.models.snn.stacks.tt_program`)."""

_WHY = {
    HOST_IN: " The host writes the step's input batch to DRAM over PCIe and dispatches the step's program "
    f"(per-step dispatch measured by Tenstorrent: {DISPATCH_BENCHMARK}, models/snn/stacks/tt_dispatch.csv).",
    HOST_OUT: " The per-sample loss goes back to the host over PCIe after the program.",
    FWD: " A core's time is the slowest of its reader (weight rows or tiles from L1 or DRAM), compute (FPU or "
    "SFPU, LIF, threshold) and writer (compaction, the list's multicast messages) kernels, plus the circular "
    "buffers' fill and drain; the exchange is the lists' multicast trees on the NoC.",
    BWD: " A core's time is the slowest of its reader, compute (partials reduced, state gradient, dW, "
    "input-gradient partials on the FPU or SFPU) and writer (the partial messages) kernels, plus fill and drain.",
}


class TtMetalStack(Described):
    """TT-Metalium on Tensix cores (module docstring). ``costs``: the Tensix costs (default: the shipped file)."""

    name = "tt-metal"
    layers_span_chips = True
    host_structure = False
    ASSUMPTIONS = (
        f"one fused program per step, dispatched once: {DISPATCH_BENCHMARK} measured on Wormhole n300 / Blackhole "
        "p150 [M] (band: traced 0.9-1.2 us to maxed config 6.0-7.3 us)",
        "input batch to DRAM and the loss back on one command queue, not overlapped (band: 0 with two)",
        "reader | compute | writer overlapped over double-buffered circular buffers: slowest stream + fill/drain",
        "FPU (32x32 tiles, BFLOAT16 HiFi2 [U]) or SFPU/RISC-V sparse lists, the cheaper per layer and kernel",
        "SFPU and RISC-V cycles per operation [U] (tensix_costs.toml bands)",
        "a semaphore round trip between phases: the preset's sync_cycles [U], band 50-500 cycles",
        "phases end at their slowest core (an upper bound on the dataflow schedule)",
        "on-chip lists (a multicast per core to the next layer's cores) and partials (a unicast per core pair) "
        "as explicit messages through the event model: links and ports shared; data arriving over Ethernet "
        "written into L1 by the Ethernet cores, off the Tensix grid",
        "the fabric's exchange set-up and drain per phase on top of the messages' own costs from the NoC model "
        "(band: down to 0, the preset's exchange_fixed_cycles + the events' drain per phase)",
    )

    def __init__(self, machine=None, costs: TensixCosts | None = None):
        self.machine = machine
        self.costs = costs or default_tensix_costs()
        self._reports: dict = {}

    @classmethod
    def from_machine(cls, machine) -> TtMetalStack:
        return cls(machine)

    def rows(self) -> tuple:
        return TT_ROWS

    def program(self, step, machine):
        program, report = build_tt_program(step, machine, self.costs)
        self._reports[machine.name] = report
        return program

    def report(self, machine_name: str):
        """The :class:`tilesim.models.snn.stacks.tt_program.TtReport` of the last program built on that machine."""
        return self._reports.get(machine_name)

    def section_lines(self, machine_name: str) -> tuple:
        """The stack's choices on that machine (unit per layer and kernel, DRAM streaming, idle hardware)."""
        rep = self._reports.get(machine_name)
        return tuple(rep.lines()) if rep is not None else ()

    def memory(self, config, placement, machine, totals=None, cache=None):
        layers = tt_layers(config, placement, machine)
        where = [residency(config, ly.l, ly.owned, self.costs, machine) for ly in layers]
        return tt_ledger(config, layers, where, self.costs, machine, totals)

    def host(self, step, result):
        return result.book_as(HOST_LABELS, "host")

    def default_placement(self, machine) -> str:
        return "rectangles"

    def explain(self, label: str, uniform: bool) -> str | None:
        return _WHY.get(label)

    def check_placement(self, placement) -> None:
        return None  # any placement runs: a layer may span cores and chips

    def max_supersteps(self, T: int, L: int, chips: int) -> int:
        return 2 * T + 4
