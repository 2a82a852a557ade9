"""Where the csl stack's native SNN program puts its PEs: weight blocks, state PEs, the input feeders,
the colours they use, and the choice of block size.

**Blocks.** Weight layer ``l`` (``W_l`` of ``[n_in, n_out]``) is tiled over ``R_l x C_l`` PEs: PE ``(r, c)``
holds ``W[in-block r, out-block c]``. A layer's out-blocks are groups of its placement's tiles (whole
tiles, consecutive in tile order, at most ``b`` neurons each), so the counters' per-tile spike tallies
add up to exact per-block counts; its in-blocks are the out-blocks of the layer below (the data input's
channels are cut into ``ceil(N_0 / b)`` equal blocks). At the end of each column sit ``d_l`` state PEs
holding the column's neurons' state and recorded sequences, ``d_l`` the fewest that fit (where one
neuron's whole-batch history does not fit a PE, the batch is split over them too: ``batch_split``).
Each layer's weight PEs record their input bitmasks over T where they can, else the layer re-sends them
at each backward step (``resend``; :mod:`tilesim.models.snn.stacks.csl_program`).

**Cells.** Each layer's rectangle sits in a square cell of ``S`` PEs a side (``S`` = the largest
``C_l`` and ``R_l + d_l``); cells follow a zig-zag through bands two cells wide (down the first band,
up the next, ...) so that each layer's cell touches the cell of the layer before it on one side and
of the layer after it on a side at right angles: a layer's input lines start at the edge facing the
layer below and its column ends face the layer above, so spikes and input-gradient partials cross
one cell edge (no transpose, nothing crosses the wafer). A column of ``R_0`` feeder PEs at the
fabric's west edge takes the host's input stream and feeds layer 0's lines. A layout whose cells do
not fit on the fabric is not a candidate; :func:`tilesim.models.snn.stacks.csl_program.choose_layout`
takes, among the block sizes whose PEs fit in SRAM and whose cells fit on the fabric, the one with the
least step time at the lists' caps (:func:`tilesim.models.snn.stacks.csl_program.estimate_cycles`). A
block size's estimate does not depend on the fabric (its routes are timed by bounds that hold in any
band) and a bigger fabric has every block size of a smaller one, so at the caps it is never slower (it
leaves PEs idle and says how many); ``tests/test_stack_csl.py`` checks the wafer against a 100 x 100
cut on counted spikes.

**Colours.** Per layer: the spike multicast along the input lines (1), the forward partial-sum chain
down the columns (2, alternating, so a PE receives on one and sends on the other), the δI multicast up
the columns (1), the input-gradient chain along the lines (2): 6. Each move of the zig-zag changes a
cell's parity, so adjacent cells hold layers of opposite parity and two palettes alternate (a hand-off
uses the receiving layer's colours; no route leaves its two cells). With the
memcpy framework's colours: ``2·6 + memcpy_colors``; a layout needing more than the router's
``routable_colors`` is refused (:func:`check_colors`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilesim.errors import MappingError

__all__ = [
    "COLORS_PER_LAYER",
    "PALETTES",
    "BLOCK_CANDIDATES",
    "LayerBlocks",
    "Layout",
    "block_partition",
    "zigzag_cells",
    "colors_needed",
    "check_colors",
    "build_layout",
]

COLORS_PER_LAYER = 6
"""Colours one layer's routes use (the module docstring)."""
PALETTES = 2
"""Colour palettes alternating between adjacent layers."""
BLOCK_CANDIDATES = (4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128)
"""Largest neurons per block tried by :func:`choose_layout` (both the in- and the out-side)."""


@dataclass(frozen=True)
class LayerBlocks:
    """One weight layer's blocks: ``in_sizes`` [R] and ``out_sizes`` [C] neurons per block;
    ``tile_block`` [n_local]: the out-block of each of the layer's placement tiles (in the order of
    ``placement.groupings[l][0]``); ``depth``: state PEs per column (``depth / batch_split`` groups of the
    column's neurons, each group on ``batch_split`` PEs that split the batch); ``resend``: the weight PEs
    keep only the current step's input bitmasks, which the layer below's state PEs (layer 0: the feeders)
    re-send at every backward step, instead of recording them over T."""

    layer: int
    in_sizes: np.ndarray
    out_sizes: np.ndarray
    tile_block: np.ndarray
    depth: int
    batch_split: int = 1
    resend: bool = False

    @property
    def R(self) -> int:
        return int(self.in_sizes.size)

    @property
    def C(self) -> int:
        return int(self.out_sizes.size)

    @property
    def state_sizes(self) -> np.ndarray:
        """[d, C] neurons per state PE (a column's neurons split over ``depth / batch_split`` groups; state PE
        ``k`` holds group ``k // batch_split``)."""
        q = max(int(self.batch_split), 1)
        d = max(self.depth // q, 1)
        base = self.out_sizes[None, :] // d
        extra = (np.arange(d)[:, None] < (self.out_sizes[None, :] % d)).astype(np.int64)
        return np.repeat(base + extra, q, axis=0)

    def state_batch(self, B: int) -> np.ndarray:
        """[d, 1] samples per state PE: the batch split over a group's ``batch_split`` PEs (state PE ``k``
        takes part ``k % batch_split``)."""
        q = max(int(self.batch_split), 1)
        part = B // q + (np.arange(q) < B % q)
        return np.tile(part, self.depth // q)[:, None].astype(np.int64)

    def state_share(self, B: int) -> np.ndarray:
        """[d, C] each state PE's share of its column's per-sample-and-neuron quantities (neurons x samples
        over ``n_c·B``; a column's shares add up to 1)."""
        return self.state_sizes * self.state_batch(B) / (self.out_sizes[None, :].astype(np.float64) * B)


@dataclass(frozen=True)
class Layout:
    """A placed program: ``block`` (largest neurons per block), the layers' blocks, the cell side,
    each layer's cell ``(cx, cy)`` and the global tile ids of its PEs: ``weight_tiles[l]`` [R, C],
    ``state_tiles[l]`` [d, C]; ``feeder_tiles`` [R_0]; ``colors``: colours the routes use."""

    block: int
    layers: tuple
    cell: int
    cells: tuple
    weight_tiles: tuple
    state_tiles: tuple
    feeder_tiles: np.ndarray
    colors: int
    fabric: tuple  # (cols, rows)

    @property
    def pes_used(self) -> int:
        return int(
            sum(w.size for w in self.weight_tiles) + sum(s.size for s in self.state_tiles) + self.feeder_tiles.size
        )

    def describe(self, tiles: int) -> str:
        """One line: blocks, cells, colours and how many PEs are used of ``tiles``."""
        used = self.pes_used
        return (
            f"weight blocks of <= {self.block} x {self.block} neurons, {len(self.layers)} layers in "
            f"{self.cell} x {self.cell} cells zig-zagging over the {self.fabric[0]} x {self.fabric[1]} fabric, "
            f"{self.colors} colours; {used:,} of {tiles:,} PEs used ({tiles - used:,} idle)"
        )

    def describe_choices(self) -> str:
        """One line: per layer, the input bitmasks recorded over T or re-sent at each backward step, and the
        state PEs per column (with the batch split, if any)."""
        rec = [lb.layer + 1 for lb in self.layers if not lb.resend]
        res = [lb.layer + 1 for lb in self.layers if lb.resend]
        parts = []
        if rec:
            parts.append(f"recorded over T on the weight PEs of layer(s) {_span(rec)}")
        if res:
            parts.append(
                f"re-sent at every backward step to the weight PEs of layer(s) {_span(res)} (SRAM: the recording "
                "does not fit)"
            )
        states = ", ".join(
            f"{lb.depth}"
            + (f" ({lb.depth // lb.batch_split} x {lb.batch_split}-way batch split)" if lb.batch_split > 1 else "")
            for lb in self.layers
        )
        return f"input bitmasks {'; '.join(parts)}; state PEs per column by layer: {states}"


def _span(ids: list) -> str:
    """``[1, 2, 3, 5]`` as ``1-3, 5``."""
    out, start = [], ids[0]
    for a, b in zip(ids, [*ids[1:], None]):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return ", ".join(out)


def equal_blocks(n: int, b: int) -> np.ndarray:
    """``n`` neurons in ``ceil(n / b)`` blocks as equal as can be."""
    k = -(-n // b)
    return np.full(k, n // k, np.int64) + (np.arange(k) < n % k)


def block_partition(owned: np.ndarray, b: int) -> np.ndarray:
    """Out-block of each tile of one layer (``owned`` [n_local] neurons per tile, in tile order): whole
    tiles, consecutive, at most ``b`` neurons a block (a tile with more than ``b`` cannot be split:
    the caller checks ``owned.max() <= b``). Vectorised: a tile joins the block its first neuron's
    offset falls in, on a grid of ``b - (max owned - 1)`` neurons, so no block exceeds ``b``."""
    owned = np.asarray(owned, np.int64)
    step = max(b - (int(owned.max(initial=1)) - 1), 1)
    start = np.cumsum(owned) - owned
    raw = start // step
    _, block = np.unique(raw, return_inverse=True)  # dense ids (a grid cell may start no tile)
    return block.astype(np.int64)


def _band(a: int, row: int, step: int, span: int) -> list:
    """One band's cells (columns ``a``, ``a + 1``) from ``row`` over ``span`` rows in direction ``step``:
    the entry cell, then alternately a move along the band and one across it."""
    out, col = [(a, row)], a
    for i in range(1, span + 1):
        r = row + step * i
        out.append((col, r))  # along the band
        if i == span:
            break
        col = a + 1 if col == a else a
        out.append((col, r))  # across it
    return out


def zigzag_cells(nx: int, ny: int, count: int) -> list | None:
    """The first ``count`` cells ``(cx, cy)`` of the zig-zag over an ``nx x ny`` grid of cells (module
    docstring), each move to a neighbouring cell at right angles to the move before; None if the grid
    holds fewer. A band that the path leaves ends after an even number of rows, in its second column,
    so the path leaves it sideways."""
    out: list = []
    row = 0
    for k in range(nx // 2):
        step = 1 if k % 2 == 0 else -1
        span = (ny - 1 - row) if step == 1 else row
        full = _band(2 * k, row, step, span)
        if len(out) + len(full) >= count:
            return (out + full)[:count]
        span -= span % 2
        out += _band(2 * k, row, step, span)
        row += step * span
    return None


def colors_needed(costs) -> int:
    """Colours the program's routes need (module docstring)."""
    return PALETTES * COLORS_PER_LAYER + int(costs.memcpy_colors)


def check_colors(costs) -> int:
    """:func:`colors_needed`, or :class:`MappingError` if the router has fewer (``routable_colors``)."""
    need = colors_needed(costs)
    have = int(costs.routable_colors)
    if need > have:
        raise MappingError(
            f"csl layout needs {need} colours ({PALETTES} palettes x {COLORS_PER_LAYER} per layer: spikes, "
            f"2 for the partial-sum chain, dI, 2 for the input-gradient chain; + {int(costs.memcpy_colors)} for "
            f"memcpy), but the router has {have} routable colours (routable_colors in the WSE cost file); "
            "a layout must keep within the router's colours: use a cost file with the hardware's colour count"
        )
    return need


def _xy(x0: int, y0: int, S: int, u: tuple, v: tuple, a, e) -> tuple:
    """Global (x, y) in the cell at ``(x0, y0)`` of side ``S`` of the PEs ``a`` from its in-edge (moving
    along ``u``) and ``e`` from its out-edge (the side ``v`` points to)."""
    a, e = np.asarray(a), np.asarray(e)
    if u[0] != 0:  # in-edge west or east, out-edge north or south
        x = x0 + a if u[0] > 0 else x0 + S - 1 - a
        y = y0 + S - 1 - e if v[1] > 0 else y0 + e
    else:
        y = y0 + a if u[1] > 0 else y0 + S - 1 - a
        x = x0 + S - 1 - e if v[0] > 0 else x0 + e
    return x, y


def _e_of(x0: int, y0: int, S: int, v: tuple, coord) -> np.ndarray:
    """Distance from the out-edge (the side ``v`` points to) of the cell at ``(x0, y0)`` of the positions
    ``coord`` along ``v``'s axis."""
    coord = np.asarray(coord, np.int64)
    if v[0] > 0:
        return x0 + S - 1 - coord
    if v[0] < 0:
        return coord - x0
    if v[1] > 0:
        return y0 + S - 1 - coord
    return coord - y0


def build_layout(blocks: list, b: int, cols: int, rows: int, colors: int) -> Layout | None:
    """Place ``blocks`` (:class:`LayerBlocks` per layer) on a ``cols x rows`` fabric (module
    docstring); None if the cells do not fit. Tile ``t`` sits at ``(t % cols, t // cols)``.

    In a cell, ``u`` points from the edge facing the layer below (the west feeders for layer 0) into the
    cell and ``v`` to the edge facing the layer above (at right angles: the zig-zag turns at every cell).
    Column ``c`` runs ``c`` PEs from the in-edge, from the weight rows to the state PEs at the out-edge
    (state PE ``k`` is ``k`` from it). Each in-block's line starts across the in-edge from the column end of
    the layer below that feeds it; where that would put a line among the state PEs (the two layers' columns
    run the other way round), the lines start ``d`` further along the edge, in the same order. So a spike's
    route is at most ``d_l + d_(l+1) + C_(l+1)`` hops, a column's at most ``S``, an input-gradient line's
    at most ``C_l + d_l + d_(l-1)``, whatever the band (:func:`tilesim.models.snn.stacks.csl_program.step_rows`
    times these bounds; ``tests/test_stack_csl.py`` checks them against the routes)."""
    S = max(max(lb.C, lb.R + lb.depth) for lb in blocks)
    R0 = blocks[0].R
    if R0 > rows or cols < 1 + 2 * S:
        return None
    nx, ny = (cols - 1) // S, rows // S
    cells = zigzag_cells(nx, ny, len(blocks))
    if cells is None:
        return None
    L = len(blocks)
    wt, st = [], []
    prev_xy = None  # the layer below's column ends (k = 0): [C] x and y
    feeders = None
    for i, (lb, (cx, cy)) in enumerate(zip(blocks, cells)):
        x0, y0 = 1 + cx * S, cy * S
        u = (1, 0) if i == 0 else (cx - cells[i - 1][0], cy - cells[i - 1][1])
        if i + 1 < L:
            v = (cells[i + 1][0] - cx, cells[i + 1][1] - cy)
        else:
            v = (0, 1) if u[0] != 0 else (1, 0)
        d, R, C = lb.depth, lb.R, lb.C
        if prev_xy is None:
            e_line = d + np.arange(R)  # layer 0: the feeders sit across the west edge from each line
        else:
            px, py = prev_xy  # the layer below's column ends, across our in-edge
            e_line = _e_of(x0, y0, S, v, py if v[1] != 0 else px)
            if e_line.min() < d:  # they run the other way round: the lines start d along the edge
                e_line = d + np.argsort(np.argsort(e_line, kind="stable"), kind="stable")
        a = np.arange(C)[None, :]
        wx, wy = _xy(x0, y0, S, u, v, a, e_line[:, None])
        sx, sy = _xy(x0, y0, S, u, v, a, np.arange(d)[:, None])
        wt.append((wy * cols + wx).astype(np.int64))
        st.append((sy * cols + sx).astype(np.int64))
        if i == 0:
            feeders = (wy[:, 0] * cols).astype(np.int64)  # x = 0, across the west edge from each line
        prev_xy = (sx[0], sy[0])
    return Layout(b, tuple(blocks), S, tuple(cells), tuple(wt), tuple(st), feeders, colors, (cols, rows))
