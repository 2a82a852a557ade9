"""Place an SNN on a machine: a :mod:`mapping` strategy or file, checked against the SRAM ledger.

``place_network(config, machine, neurons_per_tile, mapping)`` with a strategy name tries
``neurons_per_tile`` = 2, 4, 6, … (or the value given) and returns the first mapping whose
layers fit their chips and whose every tile fits its SRAM (more neurons per tile only adds
memory per tile, so the first overflow ends the search); a ``spread`` that overflows with whole
layers per chip cuts the neurons over every chip instead where the stack lets a layer span chips.
With a JSON file it checks the file against the network and the machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilesim.errors import MappingError, SramOverflowError, require
from tilesim.machine.memory import MemoryLedger
from tilesim.mapping import STRATEGIES, Mapping, load_mapping
from tilesim.mapping import strategies as S
from tilesim.models.snn.stacks import stack_for
from tilesim.models.snn.step.memory import SRAM_REMEDY_NPT
from tilesim.models.snn.training.network import NetworkConfig

__all__ = [
    "AUTO",
    "strategy_or_auto",
    "Placed",
    "place",
    "place_network",
    "layer_weights",
    "edge_bytes",
    "strategy_mapping",
    "to_placement",
    "default_strategy",
    "chip_grid_cols",
]

AUTO = "auto"
"""The ``--mapping`` that means the stack's own placement (:func:`default_strategy`)."""


def strategy_or_auto(mapping: str) -> str:
    """``mapping`` if it names a placement strategy (or ``auto``), else ``auto``: what stands in for a
    mapping file where the file cannot be used (another machine, a search's starting point)."""
    return mapping if mapping in (*STRATEGIES, AUTO) else AUTO


@dataclass(frozen=True)
class Placed:
    """A mapping (sized to the machine) with its SRAM ledger and neurons per tile (max over layers)."""

    mapping: Mapping
    ledger: MemoryLedger
    neurons_per_tile: int

    @property
    def placement(self) -> Mapping:
        """The same :attr:`mapping` (the one placement type), under the name the step code uses."""
        return self.mapping


def layer_weights(config: NetworkConfig) -> list[float]:
    """Relative work per step of each layer: N·B·(2·N_max_in + 1) — weight rows gathered in the
    forward pass and scattered into dW in the backward pass, plus the neuron updates."""
    nmax_in = (config.input_cap,) + tuple(config.n_max[:-1])
    rec = config.recurrent
    return [
        float(n * config.batch * (2 * (k + (nm if r else 0)) + 1))
        for n, k, nm, r in zip(config.layers[1:], nmax_in, config.n_max, rec)
    ]


def edge_bytes(config: NetworkConfig) -> list[float]:
    """Bytes per time step between layer l and l+1: the forward spike lists and the backward
    slot gradients of layer l (snn-on-ipu.md §3.3, §3.4)."""
    B = config.batch
    return [float(B * 4 * (k + 2) + B * (8 * k + 8)) for k in config.n_max[:-1]]


def strategy_mapping(name: str, config: NetworkConfig, machine, neurons_per_tile: int) -> Mapping:
    """The mapping strategy ``name`` gives for ``config`` on ``machine``."""
    sizes = config.layers[1:]
    C, TPC = machine.chips, machine.tiles_per_chip
    if name == "contiguous":
        return S.contiguous(sizes, C, TPC, neurons_per_tile)
    if name == "round_robin":
        return S.round_robin(sizes, C, TPC, neurons_per_tile)
    if name == "balanced":
        return S.balanced(sizes, C, TPC, layer_weights(config), neurons_per_tile)
    if name == "graph":
        return S.graph(sizes, C, TPC, edge_bytes(config), neurons_per_tile, seed=config.seed)
    if name == "spread":
        return S.spread(sizes, C, TPC, layer_weights(config), neurons_per_tile, grid_cols=chip_grid_cols(machine))
    if name == "rectangles":  # the tt-metal stack's: each layer a rectangle, on the chips that are fastest
        from tilesim.models.snn.stacks.tt_place import rectangles_mapping

        return rectangles_mapping(config, machine)
    raise MappingError(
        f"mapping = {name!r}: unknown strategy; use one of {', '.join(STRATEGIES)} or a mapping JSON file"
    )


def chip_grid_cols(machine) -> int | None:
    """Columns of the machine's grid of chips (a 2-D mesh or torus of chip links), else None."""
    sysm = machine.system
    return int(sysm.grid_cols) if sysm.topology in ("mesh", "torus") and getattr(sysm, "grid_cols", 0) else None


def default_strategy(machine, stack: str = "auto") -> str:
    """The placement ``--mapping auto`` stands for: the stack's own
    (:meth:`tilesim.models.snn.stacks.Stack.default_placement`; the paper's ``contiguous`` under ``poplar``)."""
    return stack_for(machine, stack).default_placement(machine)


def to_placement(mapping: Mapping, machine) -> Mapping:
    """``mapping`` on all of ``machine``'s chips (so its per-tile vectors span every tile of the
    system); MappingError if it was made for another chip size."""
    if mapping.tiles_per_chip != machine.tiles_per_chip:
        raise MappingError(
            f"mapping tiles_per_chip = {mapping.tiles_per_chip}: machine {machine.name} has "
            f"{machine.tiles_per_chip} tiles per chip; make the mapping for this machine"
        )
    return mapping if mapping.chips == machine.chips else mapping.with_chips(machine.chips)


def _ledger(config, mapping, machine, stack: str = "auto"):
    return stack_for(machine, stack).memory(config, to_placement(mapping, machine), machine)


def check_file_mapping(mapping: Mapping, config: NetworkConfig, machine, source: str) -> Mapping:
    """``mapping`` (read from ``source``) checked against the network and the machine, resized to
    the machine's chips; MappingError naming ``source`` if it does not fit."""
    sizes = tuple(config.layers[1:])
    if mapping.layer_sizes != sizes:
        raise MappingError(
            f"{source}: layer sizes {list(mapping.layer_sizes)} do not match the network's "
            f"{list(sizes)}; save a mapping for this network (tilesim run --out) or fix the file"
        )
    if mapping.tiles_per_chip != machine.tiles_per_chip:
        raise MappingError(
            f"{source}: tiles_per_chip = {mapping.tiles_per_chip}: machine {machine.name} has "
            f"{machine.tiles_per_chip}; use a mapping made for this machine"
        )
    used = max(max(mapping.chips_of_layer(l)) for l in range(mapping.n_layers)) + 1
    if used > machine.chips:
        raise MappingError(
            f"{source}: uses {used} chips: machine {machine.name} has {machine.chips}; pass --chips {used}"
        )
    return mapping if mapping.chips == machine.chips else mapping.with_chips(machine.chips)


def neuron_cut(config: NetworkConfig, machine, neurons_per_tile: int, stack: str = "auto") -> Mapping | None:
    """The network's neurons cut over every chip in snake order (:func:`tilesim.mapping.strategies.spread_neurons`,
    layers spanning chips), or None where that is no placement: one chip, or a stack whose layers keep to a chip."""
    if machine.chips == 1 or not stack_for(machine, stack).layers_span_chips:
        return None
    walk = S.chip_walk(machine.chips, chip_grid_cols(machine))
    return S.spread_neurons(config.layers[1:], walk, machine.tiles_per_chip, layer_weights(config), neurons_per_tile)


def _cut_neurons_if_it_fits(m: Mapping, ledger, config: NetworkConfig, machine, npt: int, stack: str) -> tuple:
    """``(mapping, ledger)``: a ``spread`` whose layers each keep to a chip overflows SRAM; on a stack whose
    layers may span chips, the network's neurons cut over every chip instead
    (:func:`tilesim.mapping.strategies.spread_neurons`), if that fits; else ``m`` and its ``ledger``."""
    cut = None if m.strategy != "spread" or m.spans_chips() else neuron_cut(config, machine, npt, stack)
    if cut is None:
        return m, ledger
    led = _ledger(config, cut, machine, stack)
    return (cut, led) if not led.overflow_tiles().size else (m, ledger)


def place_network(
    config: NetworkConfig,
    machine,
    neurons_per_tile: int | None = None,
    mapping="contiguous",
    memory_check: str = "raise",
    stack: str = "auto",
) -> Placed:
    """Place ``config`` on ``machine`` with a strategy name, a :class:`Mapping` or a JSON file; its SRAM
    as execution stack ``stack`` keeps it (:func:`tilesim.models.snn.stacks.stack_for`)."""
    require(
        memory_check in ("raise", "report"),
        "memory_check",
        memory_check,
        "must be 'raise' or 'report'",
        "use 'report' to mark overflowing tiles and go on",
    )
    if neurons_per_tile is not None:
        require(
            isinstance(neurons_per_tile, (int, np.integer)) and neurons_per_tile >= 1,
            "neurons_per_tile",
            neurons_per_tile,
            "must be an integer >= 1",
            "or None for the smallest even value that fits",
        )
    if isinstance(mapping, str) and mapping == AUTO:
        mapping = default_strategy(machine, stack)
    if isinstance(mapping, Mapping) or (isinstance(mapping, (str, Path)) and str(mapping) not in STRATEGIES):
        if isinstance(mapping, Mapping):
            m, src = mapping, "mapping"
        else:
            m, src = load_mapping(mapping), f"mapping file {Path(mapping).name}"
        m = check_file_mapping(m, config, machine, src)
        ledger = _ledger(config, m, machine, stack)
        ledger.check(memory_check)
        return Placed(to_placement(m, machine), ledger, max(m.neurons_per_tile()))
    if neurons_per_tile:
        candidates = [int(neurons_per_tile)]
    else:  # spread shares every tile out, down to one neuron each: one try; the rest from 2 per tile up
        candidates = [1] if mapping in ("spread", "rectangles") else list(range(2, 4097, 2))
    last_error = None
    for npt in candidates:
        try:
            m = strategy_mapping(str(mapping), config, machine, npt)
        except MappingError as exc:
            if "unknown strategy" in str(exc):
                raise
            last_error = exc
            continue
        ledger = _ledger(config, m, machine, stack)
        if ledger.overflow_tiles().size:
            m, ledger = _cut_neurons_if_it_fits(m, ledger, config, machine, npt, stack)
        if neurons_per_tile is None and ledger.overflow_tiles().size:
            try:
                ledger.check("raise")
            except SramOverflowError as exc:
                msg = str(exc).replace(SRAM_REMEDY_NPT, "")  # already the fewest: that fix cannot apply
                raise SramOverflowError(
                    f"no neurons-per-tile value fits: {npt} per tile is the fewest that places on "
                    f"{machine.chips} chip(s) and it overflows: {msg}",
                    exc.tiles,
                    exc.report,
                ) from None
        ledger.check(memory_check)
        return Placed(to_placement(m, machine), ledger, max(m.neurons_per_tile()))
    raise last_error or MappingError("no placement fits")


def place(
    config: NetworkConfig,
    machine,
    neurons_per_tile: int | None = None,
    mapping="contiguous",
    memory_check: str = "raise",
):
    """:func:`place_network` as a tuple ``(mapping, ledger, neurons_per_tile)`` — for callers that
    need only the placement and the SRAM ledger (experiments, calibration, tests)."""
    p = place_network(config, machine, neurons_per_tile, mapping, memory_check)
    return p.mapping, p.ledger, p.neurons_per_tile
