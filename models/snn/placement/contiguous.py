"""The paper's contiguous placement as a :class:`tilesim.mapping.Mapping` (the one placement type: for
each neuron layer after the input an int32 array ``tile_of_neuron[l]`` of global tile ids; the
math never depends on it, only the counters and the timing do).
"""

from __future__ import annotations

import numpy as np

from tilesim.errors import MappingError, require
from tilesim.mapping.core import Mapping
from tilesim.mapping.strategies import pack_layers


def contiguous_tiles(n_neurons: int, neurons_per_tile: int, first_tile: int = 0) -> np.ndarray:
    """Neuron ``k`` → tile ``first_tile + k // neurons_per_tile`` (int32, length ``n_neurons``)."""
    require(n_neurons >= 1, "n_neurons", n_neurons, "must be >= 1")
    require(neurons_per_tile >= 1, "neurons_per_tile", neurons_per_tile, "must be >= 1")
    require(first_tile >= 0, "first_tile", first_tile, "must be >= 0")
    return (first_tile + np.arange(n_neurons) // neurons_per_tile).astype(np.int32)


def contiguous_placement(layer_sizes, neurons_per_tile: int, first_tile: int, tiles_per_chip: int) -> Mapping:
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
    return Mapping(tuple(layer_sizes), places[-1][0] + 1, tiles_per_chip, arrays, "contiguous")
