"""The mapping: which chip and tile owns every neuron of every layer; validation; JSON files.

A :class:`Mapping` is plain data (one int32 array of global tile ids per neuron layer) and is
validated on construction:

* **complete** — one array per neuron layer, one tile per neuron;
* **in range** — every tile id in ``[0, chips · tiles_per_chip)``;
* a layer may span chips here: whether its sparse operation (dense→sparse compaction and list
  merge) can, is the workload's execution stack's to say (the SNN's ``poplar`` keeps a layer on one
  chip, as in the paper's implementation; ``tilesim.models.snn.stacks``);
* **disjoint** — a tile belongs to one layer (each layer's sparse op owns its tiles).

Fitting SRAM is checked by the workload's ledger (``tilesim.models.snn.placement.fit.place``), not here.

JSON form (``format = "tilesim-mapping/1"``), written by :meth:`Mapping.save` and easy to write
by hand — each layer is a list of blocks of consecutive neurons::

    {"format": "tilesim-mapping/1", "strategy": "contiguous", "chips": 1, "tiles_per_chip": 1472,
     "layers": [{"neurons": 1466, "blocks": [{"first_neuron": 0, "count": 1466, "chip": 0,
                 "first_tile": 1, "neurons_per_tile": 2}]}, ...]}

A block puts ``count`` neurons from ``first_neuron`` on tiles ``first_tile …`` of ``chip``
either ``neurons_per_tile`` at a time (neuron k → tile first_tile + k // neurons_per_tile, the
paper's rule) or spread evenly over ``n_tiles`` tiles (k → first_tile + k·n_tiles // count);
``"order": "cyclic"`` deals them round-robin instead (k → first_tile + k mod n_tiles). A layer
may instead give ``"tiles": [t0, t1, …]``: the global tile of every neuron.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from tilesim.errors import MappingError
from tilesim.io import atomic_write_text, dumps_json
from tilesim.running.memo import BytesLRU

__all__ = ["Mapping", "Block", "FORMAT", "STRATEGIES", "load_mapping", "block_tiles"]

FORMAT = "tilesim-mapping/1"
STRATEGIES = ("contiguous", "round_robin", "balanced", "graph", "spread", "rectangles")
"""The placement strategies by name (:mod:`tilesim.mapping.strategies`); a mapping is one of these or a file."""
_BLOCK_KEYS = {"first_neuron", "count", "chip", "first_tile", "neurons_per_tile", "n_tiles", "order"}


@dataclass(frozen=True)
class Block:
    """``count`` consecutive neurons from ``first_neuron`` on consecutive tiles of ``chip``."""

    first_neuron: int
    count: int
    chip: int
    first_tile: int
    n_tiles: int
    neurons_per_tile: int | None = None  # the paper's rule k // npt (else even split)
    order: str = "block"  # or "cyclic"

    def local_tiles(self) -> np.ndarray:
        """int64 ``[count]``: chip-local tile of each neuron of the block."""
        k = np.arange(self.count, dtype=np.int64)
        if self.order == "cyclic":
            return self.first_tile + k % self.n_tiles
        if self.neurons_per_tile:
            return self.first_tile + k // self.neurons_per_tile
        return self.first_tile + (k * self.n_tiles) // self.count


def block_tiles(count: int, neurons_per_tile: int) -> int:
    """Tiles a block of ``count`` neurons needs at ``neurons_per_tile``."""
    return -(-count // neurons_per_tile)


# tile-id bytes -> (tiles, local): group_tiles's memo (keys are about as large as ``local``)
_GROUPS = BytesLRU(32 << 20, getsizeof=lambda v: v[0].nbytes + 2 * v[1].nbytes)


def group_tiles(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(tiles, local)`` of an array of tile ids: the distinct tiles ascending (int64) and each
    entry's index into them (int32) — ``np.unique(a, return_inverse=True)`` by counting over the
    ids' range instead of sorting (a layer's tiles span at most a few chips). Remembered by
    content (a search asks again for every unchanged layer of every candidate); read-only."""
    a = np.asarray(a)
    key = (a.dtype.str, a.tobytes())
    hit = _GROUPS.get(key)
    if hit is not None:
        return hit
    tiles: np.ndarray
    local: np.ndarray
    if not a.size:
        tiles, local = np.zeros(0, np.int64), np.zeros(0, np.int32)
    else:
        lo = int(a.min())
        seen = np.bincount(a - lo) > 0
        rank = np.cumsum(seen, dtype=np.int32) - 1
        tiles, local = np.flatnonzero(seen).astype(np.int64) + lo, rank[a - lo]
    tiles.flags.writeable = local.flags.writeable = False
    _GROUPS[key] = (tiles, local)
    return tiles, local


def _err(msg: str):
    raise MappingError(msg)


@dataclass(frozen=True)
class Mapping:
    """Owner tile (global id = chip · tiles_per_chip + local tile) of every neuron of every layer.

    Attributes
    ----------
    layer_sizes : tuple of int
        Neurons per neuron layer ``(N1, …, NL)`` (the input is not placed).
    chips, tiles_per_chip : int
    tile_of_neuron : tuple of np.ndarray
        One int32 array of global tile ids per layer.
    strategy : str
        What made it (``contiguous``, ``round_robin``, ``balanced``, ``graph``, ``search``,
        ``file``, ``custom``).
    """

    layer_sizes: tuple
    chips: int
    tiles_per_chip: int
    tile_of_neuron: tuple
    strategy: str = "custom"
    _chip_of_layer: tuple = field(default=(), repr=False, compare=False)

    def __post_init__(self):
        sizes = tuple(int(n) for n in self.layer_sizes)
        object.__setattr__(self, "layer_sizes", sizes)
        if self.chips < 1 or self.tiles_per_chip < 1:
            _err(f"mapping chips = {self.chips}, tiles_per_chip = {self.tiles_per_chip}: both must be >= 1")
        if len(self.tile_of_neuron) != len(sizes):
            _err(
                f"mapping has {len(self.tile_of_neuron)} layers: the network has {len(sizes)} neuron layers "
                f"{list(sizes)}; give one entry per neuron layer (not the input)"
            )
        arrays, chips, used_tiles = [], [], []
        n_tiles = self.n_tiles
        for l, (tiles, n) in enumerate(zip(self.tile_of_neuron, sizes)):
            a = np.asarray(tiles)
            if a.ndim != 1 or a.size != n:
                _err(f"layer {l + 1} maps {a.size} neurons: it has {n}; give one tile per neuron")
            if a.size and not np.issubdtype(a.dtype, np.integer):
                _err(f"layer {l + 1} tiles have dtype {a.dtype}: tile ids must be integers")
            a = a.astype(np.int64)
            bad = np.nonzero((a < 0) | (a >= n_tiles))[0]
            if bad.size:
                k = int(bad[0])
                _err(
                    f"layer {l + 1} neuron {k} on tile {int(a[k])}: out of range [0, {n_tiles}) for "
                    f"{self.chips} chip(s) x {self.tiles_per_chip} tiles; use a tile below {n_tiles} or more --chips"
                )
            u = group_tiles(a)[0]
            on = u[[0, -1]] // self.tiles_per_chip if u.size else np.zeros(2, np.int64)
            on = on[:1] if on[0] == on[-1] else np.unique(u // self.tiles_per_chip)  # u ascending
            if on.size > 1:  # the chip of the layer's first neuron first, the rest ascending
                head = int(a[0]) // self.tiles_per_chip
                on = np.concatenate([[head], on[on != head]])
            used_tiles.append(u)
            arrays.append(a.astype(np.int32))
            chips.append(tuple(int(c) for c in on))
        tiles = np.concatenate(used_tiles) if used_tiles else np.zeros(0, np.int64)
        if tiles.size and np.max(np.bincount(tiles)) > 1:  # disjoint: a tile belongs to one layer
            layer = np.repeat(np.arange(len(used_tiles)), [u.size for u in used_tiles])
            order = np.argsort(tiles, kind="stable")
            dup = np.flatnonzero(tiles[order][1:] == tiles[order][:-1])
            if dup.size:
                first = min(dup, key=lambda i: (layer[order[i + 1]], tiles[order[i]]))
                t, a_l, b_l = int(tiles[order[first]]), int(layer[order[first]]), int(layer[order[first + 1]])
                _err(
                    f"tile {t} holds neurons of layers {a_l + 1} and {b_l + 1}: each tile belongs "
                    "to one layer (its sparse op owns the tile); move one of them to a free tile"
                )
        object.__setattr__(self, "tile_of_neuron", tuple(arrays))
        object.__setattr__(self, "_chip_of_layer", tuple(chips))

    # ---- queries ------------------------------------------------------------------------------
    @property
    def n_tiles(self) -> int:
        return self.chips * self.tiles_per_chip

    @property
    def n_layers(self) -> int:
        return len(self.layer_sizes)

    def chip_of_layer(self, layer: int) -> int:
        """Chip of neuron layer ``layer`` (0-based over the neuron layers); of a layer that spans chips,
        the chip of its first neuron (:meth:`chips_of_layer`)."""
        return self._chip_of_layer[layer][0]

    def chips_of_layer(self, layer: int) -> tuple:
        """The chips neuron layer ``layer`` spans: the chip of its first neuron, then the others ascending."""
        return self._chip_of_layer[layer]

    def spans_chips(self) -> list[int]:
        """The layers (0-based) whose neurons sit on more than one chip."""
        return [l for l, on in enumerate(self._chip_of_layer) if len(on) > 1]

    def chips_used(self) -> int:
        """How many chips hold a neuron."""
        return len({c for on in self._chip_of_layer for c in on})

    def tiles_of_layer(self, layer: int) -> np.ndarray:
        """Global ids of the tiles the layer occupies (ascending)."""
        return group_tiles(self.tile_of_neuron[layer])[0]

    def neurons_per_tile(self) -> list[int]:
        """Most neurons any tile holds, per layer."""
        return [int(np.max(np.bincount(a))) if a.size else 0 for a in self.tile_of_neuron]

    @cached_property
    def groupings(self) -> tuple:
        """Per layer ``(tiles, local)``: its tiles (global ids, ascending, int64) and every
        neuron's index into them (int32) — :func:`group_tiles` of each layer, read-only."""
        return tuple(group_tiles(ton) for ton in self.tile_of_neuron)

    def neurons_owned(self, layer: int) -> np.ndarray:
        """int64 ``[n_tiles]``: neurons of ``layer`` owned by each tile."""
        return np.bincount(self.tile_of_neuron[layer], minlength=self.n_tiles).astype(np.int64)

    def check(self, layer_sizes) -> None:
        """Raise :class:`MappingError` unless this mapping places exactly the neuron layers ``layer_sizes``."""
        sizes = tuple(int(n) for n in layer_sizes)
        if sizes != self.layer_sizes:
            _err(
                f"mapping layer sizes = {list(self.layer_sizes)}: the network has neuron layers {list(sizes)}; "
                "give one tile per neuron of every layer (not the input)"
            )

    def tiles_used(self) -> int:
        return int(sum(self.tiles_of_layer(l).size for l in range(self.n_layers)))

    def owned(self) -> np.ndarray:
        """int64 ``[n_tiles]``: neurons per tile over all layers."""
        return np.bincount(np.concatenate(self.tile_of_neuron), minlength=self.n_tiles).astype(np.int64)

    def with_chips(self, chips: int) -> Mapping:
        """The same placement on a system of ``chips`` chips (tiles must stay in range)."""
        return Mapping(self.layer_sizes, chips, self.tiles_per_chip, self.tile_of_neuron, self.strategy)

    def summary(self) -> dict:
        """What a run's record says of the placement: ``chips_of_layer`` is every layer's
        :meth:`chips_of_layer` (one list per layer; a layer split over chips names them all)."""
        return {
            "strategy": self.strategy,
            "chips": self.chips,
            "tiles_per_chip": self.tiles_per_chip,
            "tiles_used": self.tiles_used(),
            "neurons_per_tile": self.neurons_per_tile(),
            "chips_used": self.chips_used(),
            "chips_of_layer": [list(on) for on in self._chip_of_layer],
        }

    # ---- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        layers = []
        for a in self.tile_of_neuron:
            blk = _as_block(a, self.tiles_per_chip)
            if blk is None:
                layers.append({"neurons": int(a.size), "tiles": a.tolist()})
            else:
                d: dict[str, int | str] = {
                    "first_neuron": 0,
                    "count": blk.count,
                    "chip": blk.chip,
                    "first_tile": blk.first_tile,
                }
                if blk.neurons_per_tile:
                    d["neurons_per_tile"] = blk.neurons_per_tile
                else:
                    d["n_tiles"] = blk.n_tiles
                if blk.order != "block":
                    d["order"] = blk.order
                layers.append({"neurons": int(a.size), "blocks": [d]})
        return {
            "format": FORMAT,
            "strategy": self.strategy,
            "chips": self.chips,
            "tiles_per_chip": self.tiles_per_chip,
            "layers": layers,
        }

    def save(self, path) -> Path:
        """Write the mapping as JSON (atomically)."""
        return atomic_write_text(path, dumps_json(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, data: dict, where: str = "mapping") -> Mapping:
        if not isinstance(data, dict):
            _err(f"{where}: top level is {type(data).__name__}: must be a JSON object with 'layers'")
        unknown = set(data) - {"format", "strategy", "chips", "tiles_per_chip", "layers", "note"}
        if unknown:
            _err(
                f"{where}: unknown key(s) {sorted(unknown)}; "
                "allowed: format, strategy, chips, tiles_per_chip, layers, note"
            )
        if data.get("format", FORMAT) != FORMAT:
            _err(f"{where}: format = {data.get('format')!r}: expected {FORMAT!r}")
        for key in ("chips", "tiles_per_chip", "layers"):
            if key not in data:
                _err(
                    f"{where}: missing key {key!r}; see the JSON form in mapping/core.py "
                    "or save one with `tilesim run --out DIR` (DIR/mapping.json)"
                )
        chips, tpc = data["chips"], data["tiles_per_chip"]
        if not (isinstance(chips, int) and isinstance(tpc, int) and chips >= 1 and tpc >= 1):
            _err(f"{where}: chips = {chips!r}, tiles_per_chip = {tpc!r}: both must be integers >= 1")
        if not isinstance(data["layers"], list):
            _err(f"{where}: layers must be a list, one entry per neuron layer")
        sizes, arrays = [], []
        for l, entry in enumerate(data["layers"]):
            n, tiles = _layer_from_dict(entry, l + 1, chips, tpc, where)
            sizes.append(n)
            arrays.append(tiles)
        return cls(tuple(sizes), chips, tpc, tuple(arrays), str(data.get("strategy", "file")))


def _layer_from_dict(entry, layer, chips, tpc, where):
    if not isinstance(entry, dict) or "neurons" not in entry:
        _err(f"{where}: layer {layer} must be an object with 'neurons' and 'blocks' or 'tiles'")
    n = entry["neurons"]
    if not isinstance(n, int) or n < 1:
        _err(f"{where}: layer {layer} neurons = {n!r}: must be an integer >= 1")
    if "tiles" in entry:
        tiles = entry["tiles"]
        if not isinstance(tiles, list) or not all(isinstance(t, int) for t in tiles):
            _err(f"{where}: layer {layer} tiles must be a list of integer global tile ids")
        return n, np.asarray(tiles, np.int64)
    blocks = entry.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        _err(f"{where}: layer {layer} needs a non-empty 'blocks' list or a 'tiles' list")
    out = np.full(n, -1, np.int64)
    for i, b in enumerate(blocks):
        what = f"{where}: layer {layer} block {i}"
        if not isinstance(b, dict):
            _err(f"{what}: must be an object")
        unknown = set(b) - _BLOCK_KEYS
        if unknown:
            _err(f"{what}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_BLOCK_KEYS)}")
        first, count = b.get("first_neuron", 0), b.get("count", n - b.get("first_neuron", 0))
        chip, ft = b.get("chip", 0), b.get("first_tile")
        npt, nt, order = b.get("neurons_per_tile"), b.get("n_tiles"), b.get("order", "block")
        ints = {"first_neuron": first, "count": count, "chip": chip, "first_tile": ft}
        for k, v in ints.items():
            if not isinstance(v, int) or v < 0:
                _err(f"{what}: {k} = {v!r}: must be an integer >= 0")
        if count < 1 or first + count > n:
            _err(f"{what}: neurons [{first}, {first + count}) out of range [0, {n}); fix first_neuron/count")
        if not 0 <= chip < chips:
            _err(f"{what}: chip = {chip}: out of range [0, {chips}); raise 'chips' or use another chip")
        if (npt is None) == (nt is None):
            _err(f"{what}: give exactly one of neurons_per_tile or n_tiles")
        for k, v in (("neurons_per_tile", npt), ("n_tiles", nt)):
            if v is not None and (not isinstance(v, int) or v < 1):
                _err(f"{what}: {k} = {v!r}: must be an integer >= 1")
        if order not in ("block", "cyclic"):
            _err(f"{what}: order = {order!r}: must be 'block' or 'cyclic'")
        n_tiles = nt if nt is not None else block_tiles(count, npt)
        if nt is not None and nt > count:
            _err(f"{what}: n_tiles = {nt} > count = {count}: a tile would get no neuron; lower n_tiles")
        if ft + n_tiles > tpc:
            _err(
                f"{what}: tiles [{ft}, {ft + n_tiles}) out of range [0, {tpc}) on chip {chip}; "
                "start earlier, raise neurons_per_tile or use another chip"
            )
        blk = Block(first, count, chip, ft, n_tiles, npt if nt is None else None, order)
        seg = out[first : first + count]
        if (seg >= 0).any():
            k = first + int(np.argmax(seg >= 0))
            _err(
                f"{what}: neuron {k} is already mapped by an earlier block (overlap); make the blocks' "
                "neuron ranges disjoint"
            )
        out[first : first + count] = chip * tpc + blk.local_tiles()
    missing = np.nonzero(out < 0)[0]
    if missing.size:
        _err(
            f"{where}: layer {layer} neuron {int(missing[0])} (and {missing.size - 1} more) not mapped: "
            "the blocks must cover every neuron"
        )
    return n, out


def _as_block(a: np.ndarray, tpc: int) -> Block | None:
    """The single block that reproduces ``a``, if there is one."""
    if a.size == 0:
        return None
    chip, first = divmod(int(a.min()), tpc)
    n = a.size
    local = a.astype(np.int64) - chip * tpc
    n_tiles = int(np.unique(local).size)
    npt = int(np.max(np.bincount(local - first)))
    cands = [
        Block(0, n, chip, first, block_tiles(n, npt), npt, "block"),
        Block(0, n, chip, first, n_tiles, None, "block"),
        Block(0, n, chip, first, n_tiles, None, "cyclic"),
    ]
    for c in cands:
        if c.first_tile + c.n_tiles <= tpc and np.array_equal(c.local_tiles(), local):
            return c
    return None


def load_mapping(path) -> Mapping:
    """Read a mapping JSON file; any problem is a :class:`MappingError` naming the file."""
    p = Path(path)
    if not p.is_file():
        close = difflib.get_close_matches(str(path), STRATEGIES, n=1)
        _err(
            f"mapping file {str(path)!r}: no such file; "
            + (f"did you mean {close[0]}? " if close else "")
            + f"give a strategy name ({', '.join(STRATEGIES)}) or a JSON file"
        )
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        _err(f"mapping file {str(path)!r} is not valid JSON ({exc})")
    return Mapping.from_dict(data, where=f"mapping file {p.name}")
