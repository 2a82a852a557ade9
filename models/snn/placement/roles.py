"""Where each layer of the SNN step works: owner, compaction and combiner tiles per layer
(snn-on-ipu.md §3.3), and the tiles of each place a step row writes to."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tilesim.mapping.core import Mapping
from tilesim.models.snn.step.table import COMBINER, COMPACTION, GRAD_TARGET, HOST_SYNC, INPUT_CHIP, OUTPUT_TILES, OWNER
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.running.memo import BytesLRU


def compaction_spread(n: int) -> int:
    """f: tiles per (sample, threshold) the dense→sparse step spreads a layer of n neurons over
    (§3.3 step 5: w = ⌊n/64⌋ + [n mod 64 > 32] workers; f = max(⌊w/6⌋ + [w mod 6 ≥ 2], 1))."""
    w = n // 64 + int(n % 64 > 32)
    return max(w // 6 + int(w % 6 >= 2), 1)


@dataclass(frozen=True)
class ChipPart:
    """The part of a layer on one chip: its owner tiles ``LayerTiles.tiles[first:stop]`` (a chip's
    tiles are consecutive among the layer's ascending tiles), its ``n`` neurons, their compaction
    spread ``f`` (:func:`compaction_spread` of ``n``) and its compaction tiles (global), B·2·f."""

    chip: int
    first: int
    stop: int
    n: int
    f: int
    comp_tiles: np.ndarray


@dataclass(frozen=True)
class LayerTiles:
    """Where one layer works: its chip (the *head*: that of its first neuron, where its combiners
    are), owner tiles, compaction and combiner tiles (global ids), its compaction spread ``f`` (the
    sum over its parts) and ``parts``, one :class:`ChipPart` per chip it spans, ascending (one part:
    the layer keeps to one chip; :mod:`tilesim.models.snn.stacks.dataflow` "Layers across chips")."""

    chip: int
    tiles: np.ndarray  # owner tiles (global)
    comp_tiles: np.ndarray  # compaction tiles (global), B·2·f of them
    comb_tiles: np.ndarray  # combiner tiles (global), B of them
    f: int
    parts: tuple = ()

    @property
    def chips(self) -> tuple:
        """The chips the layer spans, the head chip first."""
        return (self.chip,) + tuple(p.chip for p in self.parts if p.chip != self.chip)

    @property
    def split(self) -> bool:
        """Whether the layer spans more than one chip."""
        return len(self.parts) > 1

    def signature(self) -> tuple:
        """What the layer's chip-dependent terms depend on: per part its tiles, neurons and spread, and
        the head part (empty for a layer on one chip)."""
        if not self.split:
            return ()
        head = [p.chip for p in self.parts].index(self.chip)
        return (head,) + tuple((p.stop - p.first, p.n, p.f) for p in self.parts)


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
    """Every layer's :class:`LayerTiles`: each chip's compaction tiles shared among the layer parts on it
    (in layer order), a layer's combiners among those of its head chip's part."""
    B, TPC = config.batch, tiles_per_chip
    chip_parts: dict[int, list[tuple[int, int]]] = {}  # chip -> [(layer, f of its part there)]
    split = []  # per layer: [(chip, first, stop, n)]
    for l, (tiles, local) in enumerate(placement.groupings):
        if tiles[0] // TPC == tiles[-1] // TPC:
            cuts = [(int(tiles[0]) // TPC, 0, tiles.size, config.layers[l + 1])]
        else:
            on = tiles // TPC
            chips, first = np.unique(on, return_index=True)
            n = np.bincount(np.searchsorted(chips, on[local]), minlength=chips.size)
            stops = list(first[1:]) + [tiles.size]
            cuts = [(int(c), int(a), int(b), int(k)) for c, a, b, k in zip(chips, first, stops, n)]
        for c, _, _, n_c in cuts:
            chip_parts.setdefault(c, []).append((l, compaction_spread(n_c)))
        split.append(cuts)
    out = []
    for l, cuts in enumerate(split):
        head = int(placement.tile_of_neuron[l][0]) // TPC
        parts, comb = [], None
        for c, first, stop, n_c in cuts:
            mine = [k for k, _ in chip_parts[c]]
            spreads = tuple(f for _, f in chip_parts[c])
            comp, cb = _compaction_tiles(c, spreads, B, TPC)[mine.index(l)]
            parts.append(ChipPart(c, first, stop, n_c, spreads[mine.index(l)], comp))
            comb = cb if c == head else comb
        comp_all = parts[0].comp_tiles if len(parts) == 1 else np.concatenate([p.comp_tiles for p in parts])
        f = sum(p.f for p in parts)
        out.append(LayerTiles(head, placement.groupings[l][0], comp_all, comb, f, tuple(parts)))
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
    :data:`HOST_SYNC` every tile of the layer's chip; a place on a chip is on each chip of a layer that
    spans chips (:func:`input_chips` for :data:`INPUT_CHIP`)."""

    def chip(cs):
        cs = [cs] if isinstance(cs, int) else list(cs)
        return (
            chip_tiles(cs[0], tiles_per_chip)
            if len(cs) == 1
            else np.concatenate([chip_tiles(c, tiles_per_chip) for c in cs])
        )

    ly = lay[l]
    if where in (OWNER, OUTPUT_TILES):
        return ly.tiles
    if where == COMPACTION:
        return ly.comp_tiles
    if where == COMBINER:
        return ly.comb_tiles
    if where == INPUT_CHIP:
        return chip(input_chips(lay, l))
    if where == GRAD_TARGET:
        return chip(lay[target].chips)
    if where == HOST_SYNC:
        return chip(ly.chip)
    return chip(ly.chips)  # CHIP, GRAD_SENDER


def input_chips(lay: list, l: int) -> tuple:
    """The chips whose tiles send layer ``l``'s input list to its owner tiles in the backward pass:
    each chip of layer ``l − 1`` that also holds part of ``l`` (it recorded the list), and that
    layer's head chip if some chip of ``l`` does not hold part of ``l − 1`` (it sends over a link);
    the first layer's input is on each of its own chips (:data:`INPUT_CHIP`)."""
    if l == 0:
        return lay[0].chips
    below, mine = lay[l - 1].chips, lay[l].chips
    both = tuple(c for c in below if c in mine)
    return both if set(mine) <= set(below) else tuple(dict.fromkeys((below[0],) + both))
