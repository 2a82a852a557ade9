"""Tile orders on a chip's 2-D grid: which physical tile is the ``k``-th tile a placement hands out.

Every strategy packs layers onto consecutive *slots* of a chip; on a fabric without distance (the
IPU's all-to-all exchange) the slots are the tiles. On a mesh or torus the order in which slots walk
the grid decides which tiles a layer gets, so how far its traffic travels and which links it shares:

========  =========================================================================================
rows      row by row, left to right (tile ids in order: what every strategy gives)
columns   column by column, top to bottom
snake     row by row, every other row right to left (consecutive slots are always neighbours)
spiral    from the centre outwards, ring by ring: the first layers get the middle of the grid, whose
          links reach every side in the fewest hops (on a mesh without wrap-around the centre's
          links carry the chip-wide traffic in from four directions)
========  =========================================================================================

Slot 0 is always tile 0 (the tile a placement leaves free on chip 0). Tile ``t`` sits at row
``t // cols``, column ``t % cols``; a grid with more cells than tiles skips the missing ones.
"""

from __future__ import annotations

import numpy as np

from tilesim.errors import require
from tilesim.mapping.core import Mapping

__all__ = ["TILE_ORDERS", "tile_order", "reorder", "order_of"]

TILE_ORDERS = ("rows", "columns", "snake", "spiral")
"""The tile orders by name (the module docstring says what each is)."""


def tile_order(order: str, rows: int, cols: int, tiles: int) -> np.ndarray:
    """int64 ``[tiles]``: the physical tile of every slot of a chip of ``tiles`` tiles on a
    ``rows`` x ``cols`` grid walked in ``order`` (:data:`TILE_ORDERS`); slot 0 is tile 0."""
    require(order in TILE_ORDERS, "tile_order", order, f"must be one of {', '.join(TILE_ORDERS)}", "e.g. rows")
    require(rows * cols >= tiles, "grid", f"{rows} x {cols}", f"must hold the chip's {tiles} tiles")
    cell = np.arange(rows * cols)
    y, x = cell // cols, cell % cols
    walk: np.ndarray
    if order == "rows":
        walk = cell
    elif order == "columns":
        walk = np.lexsort((y, x))
    elif order == "snake":
        walk = y * cols + np.where(y % 2 == 1, cols - 1 - x, x)
    else:  # spiral: by ring around the centre (Chebyshev distance), each ring by angle
        dy, dx = y - (rows - 1) / 2, x - (cols - 1) / 2
        walk = np.lexsort((np.arctan2(dy, dx), np.maximum(np.abs(dy), np.abs(dx))))
    walk = walk[walk < tiles]
    return np.concatenate([[0], walk[walk != 0]]).astype(np.int64)


def reorder(m: Mapping, order: str, rows: int, cols: int) -> Mapping:
    """``m`` with every chip's tiles handed out in ``order``: the neurons of local tile ``k`` (a
    slot) move to physical tile ``tile_order(...)[k]`` of the same chip."""
    if order == "rows":
        return m
    perm = tile_order(order, rows, cols, m.tiles_per_chip)
    tpc = m.tiles_per_chip
    tiles = tuple(((a // tpc) * tpc + perm[a % tpc]).astype(np.int32) for a in m.tile_of_neuron)
    return Mapping(m.layer_sizes, m.chips, tpc, tiles, m.strategy)


def order_of(m: Mapping, rows: int, cols: int) -> tuple[str, Mapping]:
    """``(order, slots)``: the first of :data:`TILE_ORDERS` in which every layer of ``m`` sits on
    consecutive slots, and ``m`` in slot numbering (``("rows", m)`` if none does)."""
    tpc = m.tiles_per_chip
    for order in TILE_ORDERS:
        inv = np.empty(tpc, np.int64)
        inv[tile_order(order, rows, cols, tpc)] = np.arange(tpc)
        tiles = tuple(((a // tpc) * tpc + inv[a % tpc]).astype(np.int32) for a in m.tile_of_neuron)
        slots = Mapping(m.layer_sizes, m.chips, tpc, tiles, m.strategy)
        if all(_consecutive(slots.tiles_of_layer(l)) for l in range(slots.n_layers)):
            return order, slots
    return "rows", m


def _consecutive(t: np.ndarray) -> bool:
    return bool(t[-1] - t[0] + 1 == t.size)
