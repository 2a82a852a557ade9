"""Neuron-to-tile placement as plain arrays (the math never depends on it; only the counters do).

A placement gives, for each neuron layer ``l`` (the layers after the input), an int32 array
``tile_of_neuron[l]`` of length ``N_l`` holding *global* tile indices in ``[0, n_tiles)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mapping.core import group_tiles
from mapping.strategies import pack_layers
from tilesim.errors import MappingError, require


def contiguous_tiles(n_neurons: int, neurons_per_tile: int, first_tile: int = 0) -> np.ndarray:
    """Neuron ``k`` → tile ``first_tile + k // neurons_per_tile`` (int32, length ``n_neurons``)."""
    require(n_neurons >= 1, "n_neurons", n_neurons, "must be >= 1")
    require(neurons_per_tile >= 1, "neurons_per_tile", neurons_per_tile, "must be >= 1")
    require(first_tile >= 0, "first_tile", first_tile, "must be >= 0")
    return (first_tile + np.arange(n_neurons) // neurons_per_tile).astype(np.int32)


@dataclass(frozen=True)
class Placement:
    """Owner tile of every neuron of every neuron layer.

    Attributes
    ----------
    tile_of_neuron : tuple of np.ndarray
        One int32 array per neuron layer.
    n_tiles : int
        Length of every per-tile counter vector (all tiles of the simulated system).
    """

    tile_of_neuron: tuple
    n_tiles: int

    def __post_init__(self):
        for l, tiles in enumerate(self.tile_of_neuron):
            if tiles.ndim != 1 or tiles.dtype != np.int32:
                raise MappingError(
                    f"tile_of_neuron[{l}] = {tiles.dtype}{tiles.shape}: "
                    "must be a 1-D int32 array; use np.asarray(..., np.int32)"
                )
            if tiles.size and (tiles.min() < 0 or tiles.max() >= self.n_tiles):
                raise MappingError(
                    f"tile_of_neuron[{l}] range = [{tiles.min()}, {tiles.max()}]: "
                    f"must lie in [0, {self.n_tiles}); raise n_tiles or fix the placement"
                )

    def check(self, layer_sizes) -> None:
        """Raise :class:`MappingError` unless there is one array of the right length per layer."""
        if len(self.tile_of_neuron) != len(layer_sizes):
            raise MappingError(
                f"placement layers = {len(self.tile_of_neuron)}: network has "
                f"{len(layer_sizes)} neuron layers; give one array per layer"
            )
        for l, (tiles, n) in enumerate(zip(self.tile_of_neuron, layer_sizes)):
            if tiles.size != n:
                raise MappingError(
                    f"tile_of_neuron[{l}] length = {tiles.size}: layer has {n} neurons; give one tile per neuron"
                )

    @cached_property
    def groupings(self) -> tuple:
        """Per layer ``(tiles, local)``: its tiles (global ids, ascending, int64) and every
        neuron's index into them (int32) — computed once per placement."""
        return tuple(group_tiles(ton) for ton in self.tile_of_neuron)

    def neurons_owned(self, layer: int) -> np.ndarray:
        """int64 ``[n_tiles]``: neurons of ``layer`` owned by each tile."""
        return np.bincount(self.tile_of_neuron[layer], minlength=self.n_tiles).astype(np.int64)


def contiguous_placement(
    layer_sizes, neurons_per_tile: int = 2, first_tile: int = 1, tiles_per_chip: int = 1472
) -> Placement:
    """The paper's placement (snn-on-ipu.md §3.1): every layer on ⌈N/npt⌉ contiguous tiles,
    layers packed one after another from ``first_tile`` (tile 0 of chip 0 left free), a layer
    never straddling a chip; ``n_tiles`` is a whole number of chips."""
    need = [-(-n // neurons_per_tile) for n in layer_sizes]
    for n, k in zip(layer_sizes, need):
        if k > tiles_per_chip:
            raise MappingError(
                f"layer of {n} neurons at {neurons_per_tile} neurons/tile = {k} "
                f"tiles: more than one chip ({tiles_per_chip}); raise neurons_per_tile"
            )
    places = pack_layers(need, len(need) + 1, tiles_per_chip, first_tile)  # as many chips as it takes
    arrays = tuple(
        contiguous_tiles(n, neurons_per_tile, c * tiles_per_chip + t) for n, (c, t) in zip(layer_sizes, places)
    )
    return Placement(arrays, (places[-1][0] + 1) * tiles_per_chip)
