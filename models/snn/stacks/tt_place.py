"""The tt-metal stack's default placement: each layer a rectangle of a chip's core grid
(:func:`tilesim.mapping.strategies.rectangles`) on no more chips than is fastest.

More hardware is never slower: on a machine of ``C`` chips the stack times the network on the first
``k`` chips of the chip walk for ``k`` in 1, 2, 4, … and ``C`` (each the same rectangles a machine of ``k``
chips would get) and keeps the fastest, the fewer chips on a tie; the rest of the machine stays idle
and the run's section says so (:class:`tilesim.models.snn.stacks.tt_program.TtReport`). The candidates are
timed by the stack's own program on the network's fixed-activity step (every list at its cap: the most
work the caps allow; :func:`tilesim.models.snn.training.activity.fixed_activity`), a placement whose L1
overflows is skipped.
"""

from __future__ import annotations

from tilesim.errors import MappingError
from tilesim.mapping import strategies as S

__all__ = ["rectangles_mapping", "fastest_chips", "chip_candidates"]

_CHOSEN: dict = {}


def chip_candidates(chips: int) -> list[int]:
    """1, 2, 4, … below ``chips``, and ``chips``."""
    out, k = [], 1
    while k < chips:
        out.append(k)
        k *= 2
    return out + [chips]


def _mapping(config, machine, k: int):
    from tilesim.models.snn.placement.fit import chip_grid_cols, layer_weights

    cols = machine.fabric.cols or machine.tiles_per_chip
    return S.rectangles(
        config.layers[1:], machine.chips, machine.tiles_per_chip, cols, layer_weights(config), k,
        chip_grid_cols(machine),
    )  # fmt: skip


def fastest_chips(config, machine) -> int:
    """The chips (a count, :func:`chip_candidates`) on which the network's fixed-activity step is fastest."""
    key = (repr(config), repr(machine))
    if key in _CHOSEN:
        return _CHOSEN[key]
    from tilesim.models.snn.stacks.tt_metal import TtMetalStack
    from tilesim.models.snn.step.counters import count_work
    from tilesim.models.snn.step.workload import SnnStep
    from tilesim.models.snn.training.activity import fixed_activity
    from tilesim.workload import step_seconds

    stack = TtMetalStack.from_machine(machine)
    activity = fixed_activity(config)
    best, best_s = machine.chips, float("inf")
    for k in chip_candidates(machine.chips):
        try:
            m = _mapping(config, machine, k)
        except MappingError:  # too few cores on k chips for the layers: not a candidate
            continue
        if stack.memory(config, m, machine).overflow_tiles().size:
            continue
        counters = count_work(activity, m, per_step=True)
        t = step_seconds(SnnStep(config, m, counters, stack=stack), machine)
        if t < best_s * (1 - 1e-9):
            best, best_s = k, t
    _CHOSEN[key] = best
    return best


def rectangles_mapping(config, machine, chips_used: int | None = None):
    """The ``rectangles`` placement of ``config`` on ``machine`` on ``chips_used`` chips (default: the fastest)."""
    return _mapping(config, machine, chips_used or fastest_chips(config, machine))
