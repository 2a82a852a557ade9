"""Placement strategies: pure functions of the layer sizes (and per-layer weights) and the
machine's shape, returning a :class:`~tilesim.mapping.core.Mapping`. None of them runs a kernel; a
workload checks the result against its SRAM ledger (``tilesim.models.snn.placement.fit.place``).

=============  =================================================================================
contiguous     the paper's (snn-on-ipu.md §3.1): ``neurons_per_tile`` neurons per tile, a layer on
               consecutive tiles, layers one after another from tile ``first_tile`` (tile 0 of
               chip 0 left free), a layer that does not fit the rest of a chip starts the next chip
round_robin    the same tiles as ``contiguous``, neurons dealt out cyclically (neuron k → tile
               k mod n_tiles): a layer's low-index neurons — where capped lists concentrate —
               spread over all its tiles
balanced       whole layers per chip as ``contiguous``; then each chip's usable tiles are shared
               among its layers in proportion to ``weights`` (e.g. predicted cycles per step of
               the layer), so per-tile work is equal across layers; neurons per tile may differ
               per layer and be fractional on average (even split)
graph          layers are nodes of a networkx graph (node weight = tiles needed, edge weight =
               bytes exchanged per step); a recursive Kernighan–Lin bisection assigns layers to
               chips to cut cross-chip traffic within each chip's tile budget; contiguous within
               a chip
spread         the whole machine: consecutive layers in as many groups as there are chips (one
               layer per chip when there are fewer layers), balanced by ``weights``, the groups
               on chips in the system grid's snake order (consecutive groups on neighbouring
               chips: one Ethernet hop between them); each chip's tiles shared among its layers
               ∝ ``weights``, down to ``neurons_per_tile`` per tile (default 1: a wafer's PEs
               one neuron each); what a Tenstorrent or Cerebras programmer would do with a machine
               the network is given the whole of. :func:`spread_neurons` cuts the network's
               *neurons* instead (a workload whose layers may span chips: ``chips`` contiguous runs
               balanced by weight, in the same snake order, a big layer over neighbouring chips);
               the SNN takes that cut where whole layers per chip overflow SRAM, and ``map-search``
               weighs it against the rest (spreading a small network over more chips than its
               layers adds link hops: 4.7x slower for 700-128-128-20 on 32 Galaxy chips)
=============  =================================================================================

The other strategies keep every layer on one chip; whether a layer may span chips is the workload's
to say (the SNN's ``poplar`` stack refuses it, its dataflow stacks allow it).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from tilesim.errors import MappingError, require
from tilesim.mapping.core import STRATEGIES, Block, Mapping, block_tiles

__all__ = [
    "STRATEGIES",
    "contiguous",
    "round_robin",
    "balanced",
    "graph",
    "spread",
    "chip_walk",
    "on_chips",
    "split_layers",
    "neuron_cuts",
    "spread_neurons",
    "pack_layers",
    "from_layout",
    "rectangles",
]


def _check(layer_sizes, chips, tiles_per_chip, neurons_per_tile, first_tile):
    require(
        len(layer_sizes) >= 1 and all(int(n) >= 1 for n in layer_sizes),
        "layer_sizes",
        list(layer_sizes),
        "need at least one layer of >= 1 neuron",
    )
    require(chips >= 1, "chips", chips, "must be >= 1")
    require(tiles_per_chip >= 2, "tiles_per_chip", tiles_per_chip, "must be >= 2")
    require(
        isinstance(neurons_per_tile, (int, np.integer)) and bool(neurons_per_tile >= 1),
        "neurons_per_tile",
        neurons_per_tile,
        "must be an integer >= 1",
    )
    require(0 <= first_tile < tiles_per_chip, "first_tile", first_tile, f"must be in [0, {tiles_per_chip})")


def pack_layers(
    tiles_needed, chips: int, tiles_per_chip: int, first_tile: int = 1, chip_of_layer=None
) -> list[tuple[int, int]]:
    """``(chip, first local tile)`` of every layer, packing layers one after another.

    With ``chip_of_layer`` None a layer that does not fit the rest of the current chip starts
    the next one (the paper's rule); otherwise each layer goes to its given chip, after the
    layers before it there. Chip 0 starts at ``first_tile``, the others at tile 0.
    """
    out = []
    nxt = {c: (first_tile if c == 0 else 0) for c in range(chips)}
    chip = 0
    for l, need in enumerate(tiles_needed):
        if need > tiles_per_chip - (first_tile if chips == 1 else 0):
            raise MappingError(
                f"layer {l + 1} needs {need} tiles: more than a chip ({tiles_per_chip}); "
                "raise neurons per tile (a layer never straddles chips)"
            )
        if chip_of_layer is None:
            if nxt[chip] + need > tiles_per_chip:
                chip += 1
        else:
            chip = int(chip_of_layer[l])
        if chip >= chips or nxt[chip] + need > tiles_per_chip:
            if chip_of_layer is None:
                n = 1 + pack_layers(tiles_needed, len(tiles_needed) + 1, tiles_per_chip, first_tile)[-1][0]
                raise MappingError(
                    f"layers in whole-layer blocks need {n} chips: machine has {chips}; "
                    f"pass --chips {n} or raise neurons per tile"
                )
            raise MappingError(
                f"chip {chip} gets {nxt.get(chip, 0) + need} tiles of layers: it has "
                f"{tiles_per_chip} (tile 0 of chip 0 free); move a layer to another chip"
            )
        out.append((chip, nxt[chip]))
        nxt[chip] += need
    return out


def from_layout(
    layer_sizes, chips, tiles_per_chip, places, n_tiles, order="block", neurons_per_tile=None, strategy="custom"
) -> Mapping:
    """Build a mapping from per-layer ``places`` ``(chip, first tile)`` and tile counts."""
    arrays = []
    for l, n in enumerate(layer_sizes):
        chip, first = places[l]
        npt = None if neurons_per_tile is None else int(neurons_per_tile[l])
        o = order if isinstance(order, str) else order[l]
        blk = Block(0, int(n), chip, first, int(n_tiles[l]), npt if o == "block" else None, o)
        arrays.append(chip * tiles_per_chip + blk.local_tiles())
    return Mapping(tuple(layer_sizes), chips, tiles_per_chip, tuple(arrays), strategy)


def contiguous(layer_sizes, chips: int, tiles_per_chip: int, neurons_per_tile: int = 2, first_tile: int = 1) -> Mapping:
    """The paper's placement (see the module table)."""
    _check(layer_sizes, chips, tiles_per_chip, neurons_per_tile, first_tile)
    need = [block_tiles(int(n), neurons_per_tile) for n in layer_sizes]
    places = pack_layers(need, chips, tiles_per_chip, first_tile)
    return from_layout(
        layer_sizes, chips, tiles_per_chip, places, need, "block", [neurons_per_tile] * len(need), "contiguous"
    )


def round_robin(
    layer_sizes, chips: int, tiles_per_chip: int, neurons_per_tile: int = 2, first_tile: int = 1
) -> Mapping:
    """``contiguous``'s tiles with neurons dealt out cyclically."""
    _check(layer_sizes, chips, tiles_per_chip, neurons_per_tile, first_tile)
    need = [block_tiles(int(n), neurons_per_tile) for n in layer_sizes]
    places = pack_layers(need, chips, tiles_per_chip, first_tile)
    return from_layout(layer_sizes, chips, tiles_per_chip, places, need, "cyclic", None, "round_robin")


def share_tiles(weights, sizes, budget: int) -> list[int]:
    """Split ``budget`` tiles among layers ∝ ``weights`` (water-filling, then largest
    remainder), each layer at least 1 tile and at most one tile per neuron."""
    w = np.maximum(np.asarray(weights, float), 1e-12)
    cap = np.minimum(np.asarray(sizes, np.int64), budget)
    n = w.size
    require(budget >= n, "tile budget", budget, f"must be >= the {n} layers sharing it")
    share = np.zeros(n, np.int64)
    fixed = np.zeros(n, bool)
    while True:
        free = budget - share[fixed].sum()
        ideal = np.where(fixed, share, w * free / w[~fixed].sum())
        over = ~fixed & (ideal >= cap)
        if not over.any() or fixed.all():
            break
        share[over] = cap[over]
        fixed |= over
        if fixed.all():
            break
    share = np.where(fixed, share, np.clip(np.floor(ideal), 1, cap)).astype(np.int64)
    while share.sum() > budget:  # the floor of 1 tile took too much: give back
        share[np.argmax(np.where(share > 1, share - ideal, -np.inf))] -= 1
    for i in np.argsort(-(ideal - share)):  # largest remainder
        if share.sum() >= budget:
            break
        if share[i] < cap[i]:
            share[i] += 1
    return share.tolist()


def balanced(
    layer_sizes,
    chips: int,
    tiles_per_chip: int,
    weights=None,
    neurons_per_tile: int = 2,
    first_tile: int = 1,
) -> Mapping:
    """Whole layers per chip as ``contiguous`` at ``neurons_per_tile``; each chip's usable tiles
    shared among its layers ∝ ``weights`` (default: the layer sizes)."""
    _check(layer_sizes, chips, tiles_per_chip, neurons_per_tile, first_tile)
    w = np.asarray(layer_sizes if weights is None else weights, float)
    require(
        w.size == len(layer_sizes) and bool(np.all(w >= 0)),
        "weights",
        list(w),
        f"need {len(layer_sizes)} non-negative values, one per layer",
    )
    need = [block_tiles(int(n), neurons_per_tile) for n in layer_sizes]
    chip_of = [c for c, _ in pack_layers(need, chips, tiles_per_chip, first_tile)]
    n_tiles = list(need)
    for c in sorted(set(chip_of)):
        ls = [l for l in range(len(need)) if chip_of[l] == c]
        budget = tiles_per_chip - (first_tile if c == 0 else 0)
        for l, k in zip(ls, share_tiles(w[ls], [layer_sizes[l] for l in ls], budget)):
            n_tiles[l] = k
    places = pack_layers(n_tiles, chips, tiles_per_chip, first_tile, chip_of)
    return from_layout(layer_sizes, chips, tiles_per_chip, places, n_tiles, "block", None, "balanced")


def layer_graph(layer_sizes, edge_bytes, neurons_per_tile: int = 2) -> nx.Graph:
    """Layers as nodes (``tiles`` = tiles needed at ``neurons_per_tile``), consecutive layers
    joined by an edge of ``bytes`` = ``edge_bytes[l]`` (layer l ↔ l+1, bytes per step)."""
    G = nx.Graph()
    for l, n in enumerate(layer_sizes):
        G.add_node(l, tiles=block_tiles(int(n), neurons_per_tile))
    for l, b in enumerate(edge_bytes):
        if l + 1 < len(layer_sizes):
            G.add_edge(l, l + 1, bytes=float(b))
    return G


def _bisect(G: nx.Graph, parts: int, capacity: int, seed: int) -> list[set]:
    load = sum(d["tiles"] for _, d in G.nodes(data=True))
    if parts <= 1 or load <= capacity or G.number_of_nodes() <= 1:
        return [set(G.nodes)]
    # best cut among Kernighan–Lin from a few starts and every contiguous split of a path
    cands = []
    nodes = sorted(G.nodes)
    for i in range(1, len(nodes)):
        cands.append((set(nodes[:i]), set(nodes[i:])))
    for s in range(3):
        a, b = nx.community.kernighan_lin_bisection(G, weight="bytes", seed=seed + s)
        cands.append((set(a), set(b)))
    pa = parts // 2

    def score(ab):
        a, b = ab
        la = sum(G.nodes[n]["tiles"] for n in a)
        lb = load - la
        over = max(0, la - pa * capacity) + max(0, lb - (parts - pa) * capacity)
        cut = nx.cut_size(G, a, b, weight="bytes")
        return (over, cut, abs(la / pa - lb / (parts - pa)))

    a, b = min(cands, key=score)
    return _bisect(G.subgraph(a).copy(), pa, capacity, seed) + _bisect(G.subgraph(b).copy(), parts - pa, capacity, seed)


def graph(
    layer_sizes,
    chips: int,
    tiles_per_chip: int,
    edge_bytes=None,
    neurons_per_tile: int = 2,
    first_tile: int = 1,
    seed: int = 0,
) -> Mapping:
    """Layers to chips by recursive Kernighan–Lin bisection of :func:`layer_graph` (cut the
    fewest bytes per step, fit each chip), contiguous within a chip."""
    _check(layer_sizes, chips, tiles_per_chip, neurons_per_tile, first_tile)
    L = len(layer_sizes)
    eb = np.ones(max(L - 1, 0)) if edge_bytes is None else np.asarray(edge_bytes, float)
    G = layer_graph(layer_sizes, eb, neurons_per_tile)
    parts = _bisect(G, chips, tiles_per_chip - first_tile, seed)
    parts.sort(key=min)  # keep the input side on chip 0
    chip_of = [0] * L
    for c, part in enumerate(parts):
        for l in part:
            chip_of[l] = c
    need = [G.nodes[l]["tiles"] for l in range(L)]
    places = pack_layers(need, chips, tiles_per_chip, first_tile, chip_of)
    return from_layout(layer_sizes, chips, tiles_per_chip, places, need, "block", [neurons_per_tile] * L, "graph")


def chip_walk(chips: int, grid_cols: int | None = None) -> list[int]:
    """The chips in the order :func:`spread` hands them out: on a grid of ``grid_cols`` columns
    (row ``c // grid_cols``) row by row, every other row right to left (consecutive chips are
    neighbours: one link apart); without a grid, in id order."""
    if not grid_cols or grid_cols >= chips:
        return list(range(chips))
    out = []
    for r in range(-(-chips // grid_cols)):
        row = [c for c in range(r * grid_cols, (r + 1) * grid_cols) if c < chips]
        out += row[::-1] if r % 2 else row
    return out


def split_layers(weights, groups: int) -> list[int]:
    """Group of every layer when ``weights`` (in layer order) are cut into ``groups`` runs of
    consecutive layers (every run non-empty; ``groups`` at most the layers), the runs' totals as
    even as they can be: the least sum of their squares (dynamic programming over the cut points)."""
    w = np.asarray(weights, float)
    n = w.size
    require(1 <= groups <= n, "groups", groups, f"must be in [1, {n}] (one layer at least per group)")
    S = np.concatenate([[0.0], np.cumsum(w)])
    run = (S[None, :] - S[:, None]) ** 2  # run[j, i]: layers j .. i-1 in one run
    run[np.tril_indices(n + 1)] = np.inf  # a run holds one layer at least
    cost = run[0].copy()  # one run: layers 0 .. i-1
    cut = np.zeros((groups, n + 1), np.int64)
    for g in range(1, groups):
        tot = cost[:, None] + run  # [j, i]: g runs up to j, then one run j .. i-1
        cut[g] = np.argmin(tot, axis=0)
        cost = tot[cut[g], np.arange(n + 1)]
    out, end = np.zeros(n, np.int64), n
    for g in range(groups - 1, -1, -1):
        start = int(cut[g, end]) if g else 0
        out[start:end] = g
        end = start
    return out.tolist()


def spread(
    layer_sizes,
    chips: int,
    tiles_per_chip: int,
    weights=None,
    neurons_per_tile: int = 1,
    first_tile: int = 1,
    grid_cols: int | None = None,
) -> Mapping:
    """The whole-machine placement (see the module table): layers in ``min(chips, layers)`` runs
    balanced by ``weights`` (default: the layer sizes) on the chips of :func:`chip_walk`, each
    chip's usable tiles shared among its layers ∝ ``weights`` with at least ``neurons_per_tile``
    neurons on a tile, neurons split evenly over a layer's tiles (every layer on one chip; :func:`spread_neurons`
    cuts layers over chips)."""
    _check(layer_sizes, chips, tiles_per_chip, neurons_per_tile, first_tile)
    L = len(layer_sizes)
    w = np.asarray(layer_sizes if weights is None else weights, float)
    require(w.size == L and bool(np.all(w >= 0)), "weights", list(w), f"need {L} non-negative values, one per layer")
    walk = chip_walk(chips, grid_cols)
    chip_of = [walk[g] for g in split_layers(np.maximum(w, 1e-12), min(chips, L))]
    n_tiles = [0] * L
    for c in sorted(set(chip_of)):
        ls = [l for l in range(L) if chip_of[l] == c]
        budget = tiles_per_chip - (first_tile if c == 0 else 0)
        if budget < len(ls):
            raise MappingError(
                f"chip {c} gets {len(ls)} layers: it has {budget} usable tiles; a layer needs a tile of its own "
                "(use a machine with more chips or tiles)"
            )
        caps = [block_tiles(int(layer_sizes[l]), neurons_per_tile) for l in ls]
        for l, k in zip(ls, share_tiles(w[ls], caps, budget)):
            n_tiles[l] = k
    places = pack_layers(n_tiles, chips, tiles_per_chip, first_tile, chip_of)
    return from_layout(layer_sizes, chips, tiles_per_chip, places, n_tiles, "block", None, "spread")


def neuron_cuts(layer_sizes, weights, runs: int) -> list[int]:
    """The first neuron (over all layers, in order) of each of ``runs`` contiguous runs of the network's
    neurons whose weights (a layer's ``weights[l]`` shared evenly by its neurons) are as even as whole
    neurons allow, every run at least one neuron."""
    n = np.asarray(layer_sizes, np.int64)
    per = np.maximum(np.asarray(weights, float), 1e-12) / n  # weight per neuron of each layer
    first = np.concatenate([[0], np.cumsum(n)])  # first neuron of each layer
    at = np.concatenate([[0.0], np.cumsum(per * n)])  # weight before each layer
    cuts = [0]
    for g in range(1, runs):
        target = at[-1] * g / runs
        l = min(int(np.searchsorted(at, target, side="right")) - 1, n.size - 1)
        k = int(first[l] + round((target - at[l]) / per[l]))
        cuts.append(min(max(k, cuts[-1] + 1), int(first[-1]) - (runs - g)))
    return cuts


def spread_neurons(layer_sizes, walk, tiles_per_chip: int, weights, neurons_per_tile: int = 1, first_tile: int = 1):
    """``spread`` with layers split over chips: the network's neurons cut into one run per chip of ``walk``
    (at most one per neuron; :func:`neuron_cuts`), each chip's usable tiles shared among the layer
    parts of its run ∝ their weight, at least ``neurons_per_tile`` neurons on a tile, a part's neurons
    split evenly over its tiles."""
    sizes = [int(n) for n in layer_sizes]
    w = np.maximum(np.asarray(weights, float), 1e-12)
    runs = min(len(walk), sum(sizes))
    cuts = neuron_cuts(sizes, w, runs) + [sum(sizes)]
    first = np.concatenate([[0], np.cumsum(sizes)])
    out = [np.full(n, -1, np.int64) for n in sizes]
    for g in range(runs):
        c, lo, hi = walk[g], cuts[g], cuts[g + 1]
        parts = [
            (l, max(lo, int(first[l])) - int(first[l]), min(hi, int(first[l + 1])) - max(lo, int(first[l])))
            for l in range(len(sizes))
            if first[l] < hi and first[l + 1] > lo
        ]
        budget = tiles_per_chip - (first_tile if c == 0 else 0)
        if budget < len(parts):
            raise MappingError(
                f"chip {c} gets parts of {len(parts)} layers: it has {budget} usable tiles; a layer part needs a tile "
                "of its own (use a machine with more chips or tiles)"
            )
        caps = [block_tiles(k, neurons_per_tile) for _, _, k in parts]
        share = share_tiles([w[l] * k / sizes[l] for l, _, k in parts], caps, budget)
        tile = c * tiles_per_chip + (first_tile if c == 0 else 0)
        for (l, a, k), t in zip(parts, share):
            out[l][a : a + k] = tile + (np.arange(k) * t) // k
            tile += t
    return Mapping(tuple(sizes), len(walk), tiles_per_chip, tuple(out), "spread")


def on_chips(m: Mapping, walk) -> Mapping:
    """``m`` with chip ``c``'s tiles moved to chip ``walk[c]`` (same local tiles; ``walk[0]`` must be 0,
    the chip whose tile 0 a placement leaves free)."""
    w = np.asarray(walk, np.int64)
    require(
        w.size == m.chips and int(w[0]) == 0 and np.array_equal(np.sort(w), np.arange(m.chips)),
        "walk",
        w.tolist(),
        f"must order the {m.chips} chips, starting with chip 0",
    )
    tpc = m.tiles_per_chip
    tiles = tuple((w[a // tpc] * tpc + a % tpc).astype(np.int32) for a in m.tile_of_neuron)
    return Mapping(m.layer_sizes, m.chips, tpc, tiles, m.strategy)


def _guillotine(x0: int, y0: int, w: int, h: int, items: list, weights) -> dict:
    """Each of ``items`` (layer ids) a rectangle ``(x0, y0, w, h)`` of the grid cell ``(x0, y0, w, h)``,
    areas ∝ ``weights``: the items cut into two runs of near-equal weight, the cell cut across its longer
    side in proportion, each part keeping at least one core per item (recursively)."""
    if len(items) == 1:
        return {items[0]: (x0, y0, w, h)}
    if w * h < len(items):
        raise MappingError(
            f"a {w}x{h} rectangle of cores gets {len(items)} layers: a layer needs a core of its own "
            "(use a machine with more chips or cores)"
        )
    wt = np.maximum(np.asarray([weights[i] for i in items], float), 1e-12)
    cum = np.cumsum(wt)
    best = int(np.clip(np.searchsorted(cum, cum[-1] / 2) + 1, 1, len(items) - 1))
    for k in sorted(range(1, len(items)), key=lambda j: abs(j - best)):  # the balanced split first
        a, b = items[:k], items[k:]
        share = cum[k - 1] / cum[-1]
        for along_w in ((w >= h), not (w >= h)):
            side, other = (w, h) if along_w else (h, w)
            lo, hi = -(-len(a) // other), side - -(-len(b) // other)
            if lo > hi:
                continue
            cut = int(min(max(round(side * share), lo), hi))
            if along_w:
                return {**_guillotine(x0, y0, cut, h, a, weights), **_guillotine(x0 + cut, y0, w - cut, h, b, weights)}
            return {**_guillotine(x0, y0, w, cut, a, weights), **_guillotine(x0, y0 + cut, w, h - cut, b, weights)}
    raise MappingError(f"no guillotine cut of a {w}x{h} rectangle of cores gives {len(items)} layers a core each")


def _shares(total: int, weights, least: int = 1) -> list[int] | None:
    """``total`` whole units split ∝ ``weights``, each at least ``least`` (largest remainder); None if
    ``total`` cannot give every weight ``least``."""
    w = np.maximum(np.asarray(weights, float), 1e-12)
    n = w.size
    if total < least * n:
        return None
    extra = total - least * n
    raw = extra * w / w.sum()
    out = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - out), kind="stable")[: extra - int(out.sum())]:
        out[i] += 1
    return (out + least).tolist()


def _bands(cols: int, rows: int, items: list, weights, across: bool) -> dict | None:
    """``items`` (in order) in bands of whole rows (``across``: whole columns), each band's items side by side
    with widths ∝ their weights, the band boundaries and heights chosen by dynamic programming to make the
    fullest rectangle's weight per core the least: ``{item: (x0, y0, w, h)}``, or None if no band layout fits."""
    long_side, short_side = (cols, rows) if not across else (rows, cols)
    w = [max(float(weights[i]), 1e-12) for i in items]
    k = len(items)
    widths: dict[tuple[int, int], list[int]] = {}
    load: dict[tuple[int, int], float] = {}
    for i in range(k):  # a band of items i .. j-1: their widths and the fullest one's weight per core column
        for j in range(i + 1, min(k, i + long_side) + 1):
            ws = _shares(long_side, w[i:j])
            assert ws is not None  # j - i <= long_side: every item gets a column
            widths[i, j] = ws
            load[i, j] = max(a / b for a, b in zip(w[i:j], ws))
    # (items placed, rows used) -> (fullest load so far, previous state and band)
    best: dict[tuple[int, int], tuple[float, tuple[int, int, int] | None]] = {(0, 0): (0.0, None)}
    for i in range(k):
        for y in range(short_side):
            if (i, y) not in best:
                continue
            done = best[i, y][0]
            for j in range(i + 1, min(k, i + long_side) + 1):
                for h in range(1, short_side - y + 1):
                    v = max(done, load[i, j] / h)
                    if (j, y + h) not in best or v < best[j, y + h][0]:
                        best[j, y + h] = (v, (i, y, h))
    if (k, short_side) not in best:
        return None
    out, state = {}, (k, short_side)
    while state != (0, 0):
        prev = best[state][1]
        assert prev is not None  # only the start has no previous state
        i, y, h = prev
        x = 0
        for t, wd in zip(range(i, state[0]), widths[i, state[0]]):
            out[items[t]] = (x, y, wd, h) if not across else (y, x, h, wd)
            x += wd
        state = (i, y)
    return out


def _layout(cols: int, rows: int, items: list, weights) -> dict:
    """The rectangles of ``items`` on a ``cols`` x ``rows`` grid whose fullest rectangle (weight per core)
    is the least: the guillotine cut (:func:`_guillotine`) or bands of whole rows or of whole columns
    (:func:`_bands`)."""
    w = {i: max(float(weights[i]), 1e-12) for i in items}
    load = lambda lay: max(w[i] / (r[2] * r[3]) for i, r in lay.items())  # noqa: E731
    best = _guillotine(0, 0, cols, rows, items, weights)
    for across in (False, True):
        lay = _bands(cols, rows, items, weights, across)
        if lay is not None and load(lay) < load(best) * (1 - 1e-12):
            best = lay
    return best


def rectangles(
    layer_sizes,
    chips: int,
    tiles_per_chip: int,
    cols: int,
    weights=None,
    chips_used: int | None = None,
    grid_cols: int | None = None,
    rows_used: int | None = None,
) -> Mapping:
    """Each layer a rectangle of one chip's ``cols``-wide core grid (what a TT-Metal program multicasts to):
    layers in ``min(chips_used, layers)`` runs of consecutive layers balanced by ``weights`` (default: the
    sizes) on the first chips of :func:`chip_walk` (``chips_used`` default: all; the rest stay idle), each
    chip's grid cut into one rectangle per layer with areas ∝ ``weights`` (a guillotine cut: across the
    longer side, recursively); a layer with fewer neurons than its rectangle's cores keeps a smaller
    rectangle at its corner; its neurons split evenly over its cores in row-major order. Every core may be
    used (a Tensix program keeps no core free); ``rows_used`` (default: all) keeps the layers to the first rows
    of each chip's grid, the rest idle."""
    _check(layer_sizes, chips, tiles_per_chip, 1, 0)
    L = len(layer_sizes)
    rows = tiles_per_chip // cols
    require(cols >= 1 and rows * cols == tiles_per_chip, "cols", cols, f"must divide the {tiles_per_chip} cores")
    k = chips if chips_used is None else int(chips_used)
    require(1 <= k <= chips, "chips_used", k, f"must be in 1..{chips}")
    used_rows = rows if rows_used is None else int(rows_used)
    require(1 <= used_rows <= rows, "rows_used", used_rows, f"must be in 1..{rows}")
    w = np.asarray(layer_sizes if weights is None else weights, float)
    require(w.size == L and bool(np.all(w >= 0)), "weights", list(w), f"need {L} non-negative values, one per layer")
    walk = chip_walk(chips, grid_cols)
    group = split_layers(np.maximum(w, 1e-12), min(k, L))
    out = []
    rects: dict = {}
    for g in sorted(set(group)):
        ls = [l for l in range(L) if group[l] == g]
        for l, r in _layout(cols, used_rows, ls, w).items():
            rects[l] = (walk[g], *r)
    for l in range(L):
        c, x0, y0, rw, rh = rects[l]
        n = int(layer_sizes[l])
        if n < rw * rh:  # fewer neurons than cores: a smaller rectangle at the corner
            rw = min(rw, n)
            rh = max(1, min(rh, n // rw))
        cores = np.array([c * tiles_per_chip + (y0 + y) * cols + x0 + x for y in range(rh) for x in range(rw)])
        out.append(cores[(np.arange(n) * cores.size) // n].astype(np.int64))
    return Mapping(tuple(int(n) for n in layer_sizes), chips, tiles_per_chip, tuple(out), "rectangles")
