"""The tt-metal stack's default placement: each layer a rectangle of a chip's core grid
(:func:`tilesim.mapping.strategies.rectangles`) on no more chips than is fastest.

More hardware is never slower: on a machine of ``C`` chips the stack times the network on the first
``k`` chips of the chip walk for ``k`` in 1, 2, 4, … and ``C`` (each the same rectangles a machine of ``k``
chips would get) and keeps the fastest, the fewer chips on a tie; then it tries the layers on the first half,
quarter, … of each chip's core rows and keeps those that are faster still. The rest of the machine stays idle
and the run's section says so (:class:`tilesim.models.snn.stacks.tt_program.TtReport`). The candidates are
timed by the stack's own program on the network's fixed-activity step (every list at its cap: the most
work the caps allow; :func:`tilesim.models.snn.training.activity.fixed_activity`), a placement whose L1
overflows is skipped.
"""

from __future__ import annotations

from tilesim.errors import MappingError
from tilesim.mapping import strategies as S

__all__ = ["rectangles_mapping", "fastest_layout", "chip_candidates", "row_candidates"]

_CHOSEN: dict = {}


def chip_candidates(chips: int) -> list[int]:
    """1, 2, 4, … below ``chips``, and ``chips``."""
    out, k = [], 1
    while k < chips:
        out.append(k)
        k *= 2
    return out + [chips]


def row_candidates(rows: int) -> list[int]:
    """``rows``, then half, a quarter, … of a chip's core rows (at least one)."""
    out, r = [], rows
    while r >= 1 and r not in out:
        out.append(r)
        r //= 2
    return out


def _mapping(config, machine, k: int, weights, grid_cols, rows_used: int | None = None):
    cols = machine.fabric.cols or machine.tiles_per_chip
    return S.rectangles(
        config.layers[1:], machine.chips, machine.tiles_per_chip, cols, weights, k, grid_cols, rows_used
    )  # fmt: skip


def fastest_layout(config, machine, weights, grid_cols) -> tuple[int, int]:
    """``(chips, rows)``: the chips (:func:`chip_candidates`, on every core row) on which the network's
    fixed-activity step is fastest, then the fewest core rows of each of them (:func:`row_candidates`) that
    are faster still — a core that holds fewer neurons than the matrix engine's 32-wide tile costs its
    kernels as much as a full tile and adds a receiver to every multicast, so a small layer can be faster on
    fewer cores (``weights``: each layer's weight count; ``grid_cols``: the columns of the machine's grid of
    chips, or None). Each candidate is timed by the stack's own program; one whose L1 overflows is skipped."""
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
    rows = machine.tiles_per_chip // (machine.fabric.cols or machine.tiles_per_chip)

    def timed(k: int, r: int) -> float:
        try:
            m = _mapping(config, machine, k, weights, grid_cols, r)
        except MappingError:  # too few cores for the layers: not a candidate
            return float("inf")
        if stack.memory(config, m, machine).overflow_tiles().size:
            return float("inf")
        return step_seconds(SnnStep(config, m, count_work(activity, m, per_step=True), stack=stack), machine)

    best, best_s = (machine.chips, rows), float("inf")
    for k in chip_candidates(machine.chips):
        t = timed(k, rows)
        if t < best_s * (1 - 1e-9):
            best, best_s = (k, rows), t
    for r in row_candidates(rows)[1:]:
        t = timed(best[0], r)
        if t < best_s * (1 - 1e-9):
            best, best_s = (best[0], r), t
    _CHOSEN[key] = best
    return best


def rectangles_mapping(config, machine, weights, grid_cols=None, chips_used: int | None = None):
    """The ``rectangles`` placement of ``config`` on ``machine``: on ``chips_used`` chips (every core row), or
    by default on the fastest chips and core rows (:func:`fastest_layout`); ``weights``, ``grid_cols``: as
    :func:`fastest_layout` takes them."""
    if chips_used:
        return _mapping(config, machine, chips_used, weights, grid_cols)
    k, r = fastest_layout(config, machine, weights, grid_cols)
    return _mapping(config, machine, k, weights, grid_cols, r)
