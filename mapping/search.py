"""Search placements for the fastest predicted step that fits: simulated annealing over layouts.

A :class:`Layout` is what the search moves: per layer its chip, its number of tiles (so its
neurons per tile) and how its neurons are dealt onto those tiles (``block`` = consecutive
neurons together, ``cyclic`` = round-robin). Layers on a chip are packed one after another
(:func:`tilesim.mapping.strategies.pack_layers`). The objective — a workload's predicted step time,
``inf`` when the mapping overflows SRAM — is a plain callable, so this module never runs a
kernel. Moves:

* give tiles to a layer from another layer on the same chip (or from the chip's free tiles),
* take tiles from a layer,
* switch a layer between ``block`` and ``cyclic``,
* move a layer to another chip that has room,
* on a mesh or torus, walk the chip's grid in another tile order (:mod:`tilesim.mapping.grid`),
* swap the chips of two layers (on a grid of chips, a chain of layers on neighbouring chips crosses
  one link per layer boundary).

A move is accepted if it is faster, or with probability exp(−Δ/τ) (τ falls linearly to 0 over
the budget); the best mapping seen is returned, never one the objective rejected.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from tilesim.errors import MappingError, require
from tilesim.mapping.core import Mapping
from tilesim.mapping.grid import TILE_ORDERS, order_of, reorder
from tilesim.mapping.strategies import chip_walk, from_layout, on_chips, pack_layers

__all__ = ["Layout", "SearchResult", "anneal", "layout_of"]


@dataclass(frozen=True)
class Layout:
    """A mapping search state: per layer its chip, tile count and neuron order (``"block"`` or
    ``"cyclic"``), packed in layer order from ``first_tile`` on chip 0. :meth:`mapping` turns it into a
    :class:`Mapping` (raises :class:`MappingError` via the packer when the layers do not fit)."""

    layer_sizes: tuple
    chips: int
    tiles_per_chip: int
    chip: tuple  # chip of every layer
    n_tiles: tuple  # tiles of every layer
    order: tuple  # "block" | "cyclic" per layer
    first_tile: int = 1
    grid: tuple | None = None  # (rows, cols) of a chip's tiles on a fabric with distance, else None
    tile_order: str = "rows"  # how slots walk that grid (:data:`tilesim.mapping.grid.TILE_ORDERS`)

    def capacity(self, c: int) -> int:
        return self.tiles_per_chip - (self.first_tile if c == 0 else 0)

    def load(self, c: int) -> int:
        return sum(n for n, ch in zip(self.n_tiles, self.chip) if ch == c)

    def mapping(self, strategy: str = "search") -> Mapping:
        places = pack_layers(self.n_tiles, self.chips, self.tiles_per_chip, self.first_tile, self.chip)
        slots = from_layout(
            self.layer_sizes, self.chips, self.tiles_per_chip, places, self.n_tiles, self.order, None, strategy
        )
        return slots if self.grid is None else reorder(slots, self.tile_order, *self.grid)


def layout_of(m: Mapping, first_tile: int = 1, grid: tuple | None = None) -> Layout:
    """The layout of a mapping whose layers each sit on one run of consecutive tiles (on a
    ``grid``, consecutive in one of the tile orders of :mod:`tilesim.mapping.grid`)."""
    tile_order = "rows"
    if grid is not None:
        tile_order, m = order_of(m, *grid)
    chips, n_tiles, order = [], [], []
    for l, a in enumerate(m.tile_of_neuron):
        t = m.tiles_of_layer(l)
        if len(m.chips_of_layer(l)) > 1:
            raise MappingError(
                f"layer {l + 1} spans chips {sorted(m.chips_of_layer(l))}: the search moves whole layers; "
                "start from a mapping that keeps each layer on one chip"
            )
        if t[-1] - t[0] + 1 != t.size:
            raise MappingError(
                f"layer {l + 1} does not occupy consecutive tiles: the search starts from "
                "contiguous, round_robin, balanced or graph mappings"
            )
        chips.append(m.chip_of_layer(l))
        n_tiles.append(int(t.size))
        cyc = t.size > 1 and a.size > t.size and a[1] != a[0] and a[t.size] == a[0]
        order.append("cyclic" if cyc else "block")
    return Layout(
        m.layer_sizes,
        m.chips,
        m.tiles_per_chip,
        tuple(chips),
        tuple(n_tiles),
        tuple(order),
        first_tile,
        grid,
        tile_order,
    )


@dataclass
class SearchResult:
    """What :func:`anneal` returns: the best mapping and its objective value, the starting (baseline)
    value, how many layouts were evaluated and accepted, the wall time in seconds, and the best-so-far
    history as ``(evaluation, value)`` pairs."""

    best: Mapping
    best_value: float
    baseline_value: float
    evaluated: int
    accepted: int
    wall_s: float
    history: list = field(default_factory=list)  # (evaluation, best value so far)


def _move_odds(grid: bool, fixed_tiles: bool) -> np.ndarray:
    """Odds of the moves (give tiles, take tiles, deal, move a layer's chip, tile order, swap two
    layers' chips); ``fixed_tiles``: no move changes a layer's tile count (its neurons per tile)."""
    p = np.array([0.4, 0.2, 0.2, 0.05, 0.1, 0.05] if grid else [0.45, 0.2, 0.2, 0.1, 0.0, 0.05])
    if fixed_tiles:
        p[:2] = 0.0
    return p / p.sum()


def _neighbour(lay: Layout, rng: np.random.Generator, fixed_tiles: bool = False) -> Layout | None:
    L = len(lay.layer_sizes)
    l = int(rng.integers(L))
    n_tiles, chip, order = list(lay.n_tiles), list(lay.chip), list(lay.order)
    kind = rng.choice(6, p=_move_odds(lay.grid is not None, fixed_tiles))
    if kind == 4:  # walk the grid in another tile order
        other = [o for o in TILE_ORDERS if o != lay.tile_order]
        return replace(lay, tile_order=str(rng.choice(other)))
    if kind == 5:  # swap the chips of two layers (where both still fit)
        k = int(rng.integers(L))
        a, b = chip[l], chip[k]
        if a == b or lay.load(a) - n_tiles[l] + n_tiles[k] > lay.capacity(a):
            return None
        if lay.load(b) - n_tiles[k] + n_tiles[l] > lay.capacity(b):
            return None
        chip[l], chip[k] = b, a
        return replace(lay, chip=tuple(chip))
    step = max(1, int(round(n_tiles[l] * rng.choice([0.01, 0.05, 0.15]))))
    if kind == 0:  # give tiles to layer l
        c = chip[l]
        free = lay.capacity(c) - lay.load(c)
        step = min(step, lay.layer_sizes[l] - n_tiles[l])
        if step <= 0:
            return None
        if free < step:
            donors = [k for k in range(L) if chip[k] == c and k != l and n_tiles[k] - step >= 1]
            if not donors:
                return None
            n_tiles[int(rng.choice(donors))] -= step
        n_tiles[l] += step
    elif kind == 1:  # take tiles from layer l
        if n_tiles[l] - step < 1:
            return None
        n_tiles[l] -= step
    elif kind == 2:
        order[l] = "cyclic" if order[l] == "block" else "block"
    else:  # move layer l to another chip
        if lay.chips == 1:
            return None
        c = int(rng.integers(lay.chips))
        if c == chip[l] or lay.load(c) + n_tiles[l] > lay.capacity(c):
            return None
        chip[l] = c
    return replace(lay, n_tiles=tuple(n_tiles), chip=tuple(chip), order=tuple(order))


def _starts(start: Mapping, extra_starts, grid, chip_cols, fixed_tiles: bool) -> list:
    """:func:`anneal`'s further starts: ``start`` in the other tile orders (on a ``grid``) and on the chips in
    snake order (on a grid of chips), then ``extra_starts``; with ``fixed_tiles`` only those with ``start``'s
    tiles per layer."""
    out = list(extra_starts)
    if grid is not None:
        out = [reorder(start, o, *grid) for o in TILE_ORDERS[1:]] + out
    if chip_cols and start.chips > 1:
        out = [on_chips(start, chip_walk(start.chips, chip_cols))] + out
    if fixed_tiles:  # only starts with the same tiles per layer
        same = [start.tiles_of_layer(l).size for l in range(start.n_layers)]
        out = [m for m in out if [m.tiles_of_layer(l).size for l in range(m.n_layers)] == same]
    return out


def anneal(
    start: Mapping,
    objective,
    budget_s: float = 10.0,
    max_evals: int | None = None,
    seed: int = 0,
    first_tile: int = 1,
    extra_starts=(),
    progress=None,
    grid: tuple | None = None,
    chip_cols: int | None = None,
    fixed_tiles: bool = False,
) -> SearchResult:
    """Minimise ``objective(mapping) -> seconds`` (``inf`` = rejected) from ``start``.

    ``extra_starts`` are further mappings (e.g. the other strategies) evaluated first; the
    annealing walk starts from the best of them. ``grid``: (rows, cols) of a chip's tiles when
    the fabric has distance (a mesh or torus): the search also moves the tile order
    (:mod:`tilesim.mapping.grid`), and ``start`` is tried in every order first. Stops after ``budget_s``
    seconds of wall time or ``max_evals`` evaluations. ``chip_cols``: columns of the machine's grid of
    chips (a mesh or torus of chip links): ``start`` with its chips walked in snake order
    (:func:`tilesim.mapping.strategies.chip_walk`: consecutive chips one hop apart) is tried first too.
    ``fixed_tiles``: every layer keeps its tile count (so its neurons per tile); only where the
    tiles sit, the dealing and the tile order move.
    """
    require(budget_s > 0, "budget_s", budget_s, "must be > 0")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    base = float(objective(start))
    if not math.isfinite(base):
        raise MappingError(
            "the starting mapping is rejected by the objective (it does not fit); start from a mapping that fits"
        )
    evaluated, accepted = 1, 0
    try:
        cur: Layout | None = layout_of(start, first_tile, grid)
    except MappingError:  # e.g. layers spanning chips: the walk starts from the best extra start
        cur = None
    cur_v = base
    best, best_v = start, base
    extra_starts = _starts(start, extra_starts, grid, chip_cols, fixed_tiles)
    for m in extra_starts:
        v = float(objective(m))
        evaluated += 1
        if v < best_v:  # a start the walk cannot move (layers spanning chips) can still be the best
            best, best_v = m, v
        try:
            lay = layout_of(m, first_tile, grid)
        except MappingError:
            continue
        if math.isfinite(v) and (cur is None or v < cur_v):  # the walk starts from the best it can move
            cur, cur_v = lay, v
    history = [(evaluated, best_v)]
    tau0 = 0.02 * best_v
    while True:
        frac = (time.perf_counter() - t0) / budget_s
        if frac >= 1 or (max_evals is not None and evaluated >= max_evals) or cur is None:
            break
        nxt = _neighbour(cur, rng, fixed_tiles)
        if nxt is None:
            continue
        try:
            m = nxt.mapping()
        except MappingError:
            continue
        v = float(objective(m))
        evaluated += 1
        tau = tau0 * max(1.0 - frac, 1e-9)
        if math.isfinite(v) and (v < cur_v or rng.random() < math.exp(-(v - cur_v) / tau)):
            cur, cur_v = nxt, v
            accepted += 1
            if v < best_v:
                best, best_v = m, v
                history.append((evaluated, best_v))
        if progress:
            progress(evaluated, best_v)
    best = Mapping(best.layer_sizes, best.chips, best.tiles_per_chip, best.tile_of_neuron, "search")
    return SearchResult(best, best_v, base, evaluated, accepted, time.perf_counter() - t0, history)
