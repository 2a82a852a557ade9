"""Where each layer of the SNN step works: owner, compaction and combiner tiles per layer
(snn-on-ipu.md §3.3), and the tiles of each place a step row writes to."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tilesim.errors import MappingError
from tilesim.mapping.core import Mapping
from tilesim.models.snn.step.table import COMBINER, COMPACTION, GRAD_TARGET, INPUT_CHIP, OUTPUT_TILES, OWNER
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.running.memo import BytesLRU


def compaction_spread(n: int) -> int:
    """f: tiles per (sample, threshold) the dense→sparse step spreads a layer of n neurons over
    (§3.3 step 5: w = ⌊n/64⌋ + [n mod 64 > 32] workers; f = max(⌊w/6⌋ + [w mod 6 ≥ 2], 1))."""
    w = n // 64 + int(n % 64 > 32)
    return max(w // 6 + int(w % 6 >= 2), 1)


@dataclass(frozen=True)
class LayerTiles:
    """Where one layer works: its chip, owner tiles, compaction and combiner tiles (global ids), and
    its compaction spread ``f`` (:func:`compaction_spread`)."""

    chip: int
    tiles: np.ndarray  # owner tiles (global)
    comp_tiles: np.ndarray  # compaction tiles (global), B·2·f of them
    comb_tiles: np.ndarray  # combiner tiles (global), B of them
    f: int


def _layout_nbytes(layout: list) -> int:
    return sum(x.tiles.nbytes + x.comp_tiles.nbytes + x.comb_tiles.nbytes for x in layout)


# (placement's tile ids, layer sizes, batch, tiles per chip) -> [LayerTiles]: layer_layout's memo
_LAYOUTS = BytesLRU(32 << 20, getsizeof=_layout_nbytes)


def layer_layout(config: NetworkConfig, placement: Mapping, tiles_per_chip: int) -> list[LayerTiles]:
    """Owner, compaction and combiner tiles of every layer; remembered by the placement's
    content and the config fields it depends on (the layer sizes and the batch)."""
    h = hashlib.blake2b(digest_size=16)
    for tiles in placement.tile_of_neuron:
        h.update(np.int64(tiles.size).tobytes())
        h.update(tiles.tobytes())
    key = (h.digest(), config.layers, config.batch, tiles_per_chip)
    hit = _LAYOUTS.get(key)
    if hit is None:
        hit = _LAYOUTS[key] = _make_layout(config, placement, tiles_per_chip)
    return hit


def _make_layout(config: NetworkConfig, placement: Mapping, tiles_per_chip: int) -> list[LayerTiles]:
    B = config.batch
    out = []
    chip_layers: dict[int, list[int]] = {}
    for l, (tiles, _) in enumerate(placement.groupings):
        first, last = int(tiles[0]) // tiles_per_chip, int(tiles[-1]) // tiles_per_chip
        if first != last:
            chips = np.unique(tiles // tiles_per_chip)
            raise MappingError(
                f"layer {l + 1} spans chips {chips.tolist()}: the sparse op needs each "
                "layer on one chip; use a placement that keeps layers whole"
            )
        chip_layers.setdefault(first, []).append(l)
    for l, (tiles, _) in enumerate(placement.groupings):
        chip = int(tiles[0]) // tiles_per_chip
        mine = chip_layers[chip]
        spreads = tuple(compaction_spread(config.layers[k + 1]) for k in mine)
        comp, comb = _compaction_tiles(chip, spreads, B, tiles_per_chip)[mine.index(l)]
        out.append(LayerTiles(chip, tiles, comp, comb, spreads[mine.index(l)]))
    return out


@lru_cache(maxsize=4096)
def _compaction_tiles(chip: int, spreads: tuple, B: int, tiles_per_chip: int) -> list:
    """Per layer of a chip (compaction spreads ``f`` in order): its compaction tiles (B·2·f) and
    combiner tiles (B), spread evenly over the chip (§3.3). Read-only arrays (cached)."""
    counts = [B * 2 * f for f in spreads]
    total = sum(counts)
    out, first = [], 0
    for f, n in zip(spreads, counts):
        slots = (np.arange(first, first + n) * tiles_per_chip) // max(total, tiles_per_chip)
        comp = (chip * tiles_per_chip + (slots % tiles_per_chip)).astype(np.int64)
        comb = comp[:: 2 * f][:B].copy()
        comp.flags.writeable = comb.flags.writeable = False
        out.append((comp, comb))
        first += n
    return out


@lru_cache(maxsize=64)
def chip_tiles(chip: int, tiles_per_chip: int) -> np.ndarray:
    """The global ids of every tile of ``chip`` (one read-only array per chip, shared by its callers:
    a wafer's chip is 850,000 tiles)."""
    out = np.arange(chip * tiles_per_chip, (chip + 1) * tiles_per_chip)
    out.flags.writeable = False
    return out


def grad_targets(recurrent: tuple, l: int) -> list:
    """Layers layer ``l`` sends reduced slot gradients to: the layer below, itself if recurrent."""
    return ([l - 1] if l > 0 else []) + ([l] if recurrent[l] else [])


def place_tiles(where: str, lay: list, l: int, tiles_per_chip: int, target: int | None = None) -> np.ndarray:
    """The tiles (global ids; a compaction tile may occur twice) of place ``where`` for layer
    ``l`` of layout ``lay`` (``target``: the receiving layer of a gradient place); for
    :data:`HOST_SYNC` every tile of the layer's chip."""

    def chip(c):
        return chip_tiles(c, tiles_per_chip)

    ly = lay[l]
    if where in (OWNER, OUTPUT_TILES):
        return ly.tiles
    if where == COMPACTION:
        return ly.comp_tiles
    if where == COMBINER:
        return ly.comb_tiles
    if where == INPUT_CHIP:
        return chip(lay[l - 1].chip if l > 0 else ly.chip)
    if where == GRAD_TARGET:
        return chip(lay[target].chip)
    return chip(ly.chip)  # CHIP, GRAD_SENDER, HOST_SYNC
