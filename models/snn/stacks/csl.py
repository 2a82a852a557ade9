"""``csl``: the SNN step on Cerebras WSE processing elements, as a CSL programmer would write it.

A native program, not the IPU's table: each weight layer tiled over a rectangle of PEs (PE ``(r, c)`` holds
``W[in-block r, out-block c]``), spikes multicast as wavelets along the input lines, partial sums reduced down
the columns in pipelined chains, neuron state on state PEs at the column ends, the backward pass mirrored (δI
up the columns, input-gradient partials along the lines into the layer below's column ends), the layers in
cells that touch their neighbours so nothing crosses the wafer that the algorithm does not need
(:mod:`~tilesim.models.snn.stacks.csl_layout`, :mod:`~tilesim.models.snn.stacks.csl_program`). Time from the
counted spikes per block and step with the PE's own cycle costs (``wse_costs.toml``,
:mod:`~tilesim.models.snn.stacks.csl_costs`); the IPU's fitted cost model is never read. Memory: the PE's own
(weight block, dW, state, sequences, buffers, code), no IPU categories. The only host traffic is the input
stream, a time step at a time into feeder PEs at the fabric's west edge. Where a PE cannot hold what BPTT
keeps, the layout trades: weight PEs that cannot record their input bitmasks over T get them re-sent at each
backward step, state PEs that cannot hold one neuron's whole-batch history split the batch (the run's
notes print the choice: ``csl choices``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from tilesim.models.snn.stacks.base import Described
from tilesim.models.snn.stacks.csl_costs import WseCosts, default_wse_costs
from tilesim.models.snn.stacks.csl_layout import colors_needed
from tilesim.models.snn.stacks.csl_program import (
    HOST_LABEL,
    block_counts,
    build_program,
    choose_layout,
    csl_memory,
    step_rows,
)
from tilesim.models.snn.stacks.dataflow import DATAFLOW_BAND
from tilesim.models.snn.step.table import (
    BACKWARD,
    FORWARD,
    KIND_COMPUTE,
    KIND_HOST,
    ONCE,
    Calls,
    StepRow,
)

__all__ = ["CslStack"]

_ROWS = (
    StepRow(HOST_LABEL, KIND_HOST, ONCE, Calls(0), host_in=True, exchange="layer 0's t = 0 lists from the feeders"),
    StepRow("fwd: synaptic adds", KIND_COMPUTE, FORWARD, Calls(0), exchange="partial sums down each column (a chain)"),
    StepRow(
        "fwd: neuron update",
        KIND_COMPUTE,
        FORWARD,
        Calls(0),
        exchange="spike ids multicast along the next layer's input lines",
        broadcast=True,
    ),
    StepRow("loss", KIND_COMPUTE, ONCE, Calls(0)),
    StepRow(
        "bwd: state grad",
        KIND_COMPUTE,
        BACKWARD,
        Calls(0),
        exchange="dI multicast up each column (+ the step's input bitmasks re-sent along the lines, where re-sent)",
        broadcast=True,
    ),
    StepRow(
        "bwd: weight+input grad",
        KIND_COMPUTE,
        BACKWARD,
        Calls(0),
        exchange="input-gradient partials along each line into the layer below's column ends (a chain)",
    ),
    StepRow("optimizer", KIND_COMPUTE, ONCE, Calls(0)),
)

_WHY = {
    HOST_LABEL: " The host streams the step's input lists into the feeder PEs at the west edge before the first "
    "layer can start: the input's bytes over the host link plus its latency.",
    "fwd: synaptic adds": " Its critical PE is a weight PE: one weight row of its block per input spike of its "
    "in-block (the busiest in-block sets it), then the [B, n] partial sums down its column; smaller blocks (a "
    "bigger fabric) shorten it.",
    "fwd: neuron update": " Its critical PE is a state PE at a column end: the LIF update and two-threshold "
    "detect of its neurons for every sample, then the spike ids out along the next layer's line.",
    "loss": " The output layer's state PEs turn the last list into slot gradients.",
    "bwd: state grad": " Its critical PE is a state PE: the state gradient of its neurons for every sample and "
    "the slot gradients it received, then dI up its column.",
    "bwd: weight+input grad": " Its critical PE is a weight PE: dW rows for its in-block's recorded (or re-sent) "
    "spikes and one partial dot product per input slot, then the partials along its line into the layer below.",
    "optimizer": " Every weight PE updates its whole block once per step: the largest block sets it.",
}
"""Why each row costs what it does (:meth:`CslStack.explain`)."""

_LAYOUTS: OrderedDict = OrderedDict()
_LAYOUT_CACHE = 16


def _layout_key(config, placement, machine, costs) -> tuple:
    groups = tuple(placement.groupings[l][1].tobytes() for l in range(config.n_layers))
    return (repr(config), hash(groups), machine.name, machine.fabric.cols, machine.fabric.rows,
            machine.chip.sram_bytes, costs)  # fmt: skip


def layout_for(config, placement, machine, costs: WseCosts):
    """:func:`choose_layout`, kept for the last few (config, placement, machine, costs)."""
    key = _layout_key(config, placement, machine, costs)
    got = _LAYOUTS.get(key)
    if got is None:
        got = _LAYOUTS[key] = choose_layout(config, placement, machine, costs)
        while len(_LAYOUTS) > _LAYOUT_CACHE:
            _LAYOUTS.popitem(last=False)
    return got


@dataclass(frozen=True)
class CslStack(Described):
    """CSL on WSE PEs (module docstring). ``costs``: the PE's cycle costs (default ``wse_costs.toml``);
    ``input_split``: how the data input's spikes spread over the first layer's input blocks
    (:data:`tilesim.models.snn.stacks.csl_program.INPUT_SPLITS`)."""

    machine: object = field(compare=False, repr=False, default=None)
    costs: WseCosts = field(default_factory=default_wse_costs)
    input_split: str = "uniform"
    _lines: dict = field(default_factory=dict, compare=False, repr=False)  # per machine name: section_lines

    name = "csl"
    layers_span_chips = True
    host_structure = False
    ASSUMPTIONS = (
        "tasks on wavelets, no launches; PE cycle costs from wse_costs.toml [U] bands there",
        "host I/O: the input stream only, a time step at a time into double-buffered feeders, booked whole "
        "before the forward pass (band: down to one time step's share, the rest streaming under the forward "
        "supersteps)",
        "the layout is compiled for full lists (every list at its cap) before any data",
        "the data input's spikes spread over the first layer's input blocks by their neurons [U] "
        "(band: up to every block taking all it can, input_split='worst')",
        "chains pipelined wavelet by wavelet [U] (band: up to R x the drain)",
        "each exchange timed by its busiest port or link and its route bound (the event model on the "
        "program's own routes is within: closed - hops <= events <= closed, tests/test_stack_csl.py)",
        "a wavelet handshake between phases: 0 cycles beyond the route's hops [U], band 0-100 cycles",
        DATAFLOW_BAND,
    )

    @classmethod
    def from_machine(cls, machine) -> CslStack:
        return cls(machine)

    def rows(self) -> tuple:
        return _ROWS

    def layout(self, config, placement, machine):
        """The :class:`tilesim.models.snn.stacks.csl_layout.Layout` of ``config`` on ``machine``."""
        return layout_for(config, placement, machine, self.costs)

    def program(self, step, machine):
        """The native program (:func:`tilesim.models.snn.stacks.csl_program.build_program`); ``step.costs``
        (the IPU's) is not read, and every form is the compact one (the rows rebuild per tile on demand)."""
        layout = self.layout(step.config, step.placement, machine)
        counts = block_counts(step.config, step.counters, list(layout.layers), self.input_split)
        rows = step_rows(step.config, list(layout.layers), counts, self.costs)
        self._lines[machine.name] = (
            f"csl program: {layout.describe(machine.tiles_per_chip)}",
            f"csl colours: {layout.colors} of the router's {int(self.costs.routable_colors)} routable colours "
            f"({int(self.costs.memcpy_colors)} of them memcpy's)",
            f"csl costs: {self.costs.name} v{self.costs.version} (wse_costs.toml, [U] bands there); "
            f"input spikes over the first layer's blocks: {self.input_split}",
            f"csl choices: {layout.describe_choices()}",
        )
        return build_program(
            layout, rows, machine, f"snn training step (csl: {layout.describe(machine.tiles_per_chip)})"
        )

    def section_lines(self, machine_name: str) -> tuple:
        """What the stack chose on that machine (blocks, cells, colours, PEs used and idle) for the run's notes."""
        return self._lines.get(machine_name, ())

    def memory(self, config, placement, machine, totals=None, cache=None):
        led = csl_memory(config, self.layout(config, placement, machine), machine, self.costs)
        if totals is not None:  # a search's running totals: the same entries
            for e in led._partial():
                totals.add(e.category, e.bytes, e.tiles, e.label)
            return totals
        return led

    def host(self, step, result):
        return result.book_as((HOST_LABEL,), "host")

    def default_placement(self, machine) -> str:
        return "spread"

    def explain(self, label: str, uniform: bool) -> str | None:
        """What the critical PE does in row ``label`` (the placement's tiles are not the program's PEs, so
        the generic owner-tile sentence would not fit)."""
        return _WHY.get(label)

    def describe_layout(self, config, placement, machine) -> str:
        """One line: the chosen blocks, cells, colours and the PEs left idle."""
        return self.layout(config, placement, machine).describe(machine.tiles_per_chip)

    def check_placement(self, placement) -> None:
        return None

    def max_supersteps(self, T: int, L: int, chips: int) -> int:
        return 4 * T + 3

    def colors(self) -> int:
        """Colours the program's routes use (:func:`tilesim.models.snn.stacks.csl_layout.colors_needed`)."""
        return colors_needed(self.costs)
