"""Link loads of a 2-D mesh or torus network-on-chip when only each tile's bytes in and out are known.

A routing fabric (:class:`tilesim.machine.fabric.MeshFabric`) times explicit transfers route by route. A
workload that hands it per-tile byte totals of an exchange phase (who receives how much, who sends
how much, not who talks to whom) is timed here under one named assumption, **proportional
traffic**: every receiver draws its bytes from the phase's senders in proportion to what they send,

    f(s -> r) = out_s · in_r / Σ_s out_s

(the pattern of a gather, a scatter or a broadcast when the receivers' shares are equal; what
per-tile totals imply when nothing else is recorded). Each flow follows the fabric's dimension-ordered
route (X along the source's row, then Y along the destination's column; on a torus the shorter way
round, ties in the positive direction), so the load of every directed link is a sum of products
that separates by dimension:

    right(y, x) = Σ_{s in row y, s crosses x -> x+1} out_s · Σ_{columns r beyond} in_col(r) / Σ out
    down(y, x)  = Σ_{source rows crossing y -> y+1} out_row · Σ_{rows beyond, column x} in / Σ out

— prefix and suffix sums on a mesh, ``n / 2`` shifted sums per dimension on a torus.

**Multicast trees** (a *broadcast* row on a fabric that multicasts): every receiver takes the same
data, the fraction ``φ_r = in_r / Σ_s out_s`` of every sender's bytes (all of it when
``in_r = Σ out``), and each sender sends its bytes once along the tree of its dimension-ordered
routes to the receivers: a link of ``s``'s tree carries ``out_s · max φ_r`` over the receivers
beyond it (the data any of them needs; nested fractions, so the largest covers the rest). The same
separation by dimension holds with the receivers' *sums* replaced by *maxima*:

    right(y, x) = Σ_{s in row y, s crosses x -> x+1} out_s · max_{columns r beyond} in_colmax(r) / Σ out
    down(y, x)  = Σ_{source rows crossing y -> y+1} out_row · max_{rows beyond, column x} in / Σ out

(``in_colmax(r)``: the largest ``in`` of column ``r``) — prefix sums times suffix maxima on a mesh,
``n / 2`` shifted maxima per dimension on a torus. A tree link never carries more than the
unicasts (a maximum is at most the sum), and exactly as much when every sender has one receiver.
Where the receivers of one row take *different* data (several data sets, each to its own
receivers), the tree loads are a lower bound (the sum of the sets is the upper one).

The phase's
longest route (its hop latency) is the largest distance between a tile that sends and one that
receives: exact on a mesh (the four sign combinations of ``±x ± y``), on a torus the smaller of that
and the torus's diameter (an upper bound).

Arrays are ``[E, tiles]`` (E exchange rows of one chip; tile ``t`` at row ``t // cols``, column
``t % cols``; a grid with more cells than tiles leaves the rest empty).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "GridLinks",
    "grid_link_loads",
    "grid_link_peaks",
    "grid_link_totals",
    "grid_max_hops",
    "link_slot",
    "proportional_flows",
]

_CHUNK_CELLS = 1 << 22  # rows x cells per chunk of work (a few 32 MiB temporaries)
_BAND_CELLS = 1 << 16  # grids from this many cells are cut to their busy band of rows when it is half or less
# (a wafer; the loads are the same sums with fewer zero terms, equal to the last bits of a float)


@dataclass(frozen=True)
class GridLinks:
    """Bytes on every directed link of a ``rows`` x ``cols`` grid: ``right[..., y, x]`` on the link
    from (x, y) to (x + 1, y) (the last column's is the wrap-around on a torus, 0 on a mesh),
    ``left[..., y, x]`` from (x + 1, y) to (x, y), ``down[..., y, x]`` from (x, y) to (x, y + 1),
    ``up[..., y, x]`` from (x, y + 1) to (x, y)."""

    right: np.ndarray
    left: np.ndarray
    down: np.ndarray
    up: np.ndarray

    def busiest(self) -> np.ndarray:
        """The largest load over all links, per leading index."""
        return np.max([a.max(axis=(-2, -1)) for a in (self.right, self.left, self.down, self.up)], axis=0)


def link_slot(step: tuple[int, int, int, int], rows: int, cols: int) -> tuple[str, int, int]:
    """Where a route's hop ``(x, y, next x, next y)`` is kept in :class:`GridLinks`: the field's name
    and its ``(y, x)`` index (a hop forward in a dimension is ``right`` / ``down`` at its start; one
    back is ``left`` / ``up`` at its end; a dimension of two has no wrap-around, so 1 -> 0 is back)."""
    x, y, nx, ny = step
    if ny == y:
        forward = nx == (x + 1) % cols and not (cols == 2 and nx < x)
        return ("right", y, x) if forward else ("left", y, nx)
    forward = ny == (y + 1) % rows and not (rows == 2 and ny < y)
    return ("down", y, x) if forward else ("up", ny, x)


def _line(a: np.ndarray, b: np.ndarray, wrap: bool, tree: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Σ a_s · b_r over the pairs (s, r) of positions on a line of ``n`` whose route crosses each
    directed link: (forward [..., n] link x -> x+1, backward [..., n] link x+1 -> x); ``a`` and ``b``
    broadcast against each other on the leading axes. ``tree``: Σ_s a_s · max_r b_r instead (each
    sender's tree crosses a link once, carrying what the farthest-reaching receivers need)."""
    n = a.shape[-1]
    shape = np.broadcast_shapes(a.shape, b.shape)
    fwd, bwd = np.zeros(shape), np.zeros(shape)
    if n < 2:
        return fwd, bwd
    if not wrap or n <= 2:  # a mesh line: s <= x < r forward, r <= x < s backward
        ca = np.cumsum(a, axis=-1)
        ta = ca[..., -1:] - ca  # Σ a beyond x
        if tree:  # max b beyond x (suffix maxima shifted by one), max b up to x (prefix maxima)
            sm = np.maximum.accumulate(b[..., ::-1], axis=-1)[..., ::-1]
            tb, cb = np.zeros(sm.shape), np.maximum.accumulate(b, axis=-1)
            tb[..., :-1] = sm[..., 1:]
        else:
            cb = np.cumsum(b, axis=-1)
            tb = cb[..., -1:] - cb  # sums beyond x
        fwd[..., :-1] = (ca * tb)[..., :-1]
        bwd[..., :-1] = (ta * cb)[..., :-1]
        return fwd, bwd
    up, down = n // 2, (n - 1) // 2  # forward for d = 1..n//2 (ties forward), backward for d = 1..(n-1)//2
    gather = np.maximum if tree else np.add
    for steps, out, sign in ((up, fwd, 1), (down, bwd, -1)):
        # the flow s -> s + sign·d crosses the links s + sign·j for j < d: link s + sign·j carries
        # a_s · Σ_{d = j+1..steps} b_{s + sign·d} (a tree: the max over those d)
        tail = np.zeros(shape)
        for j in range(steps - 1, -1, -1):
            tail = gather(tail, np.roll(b, -sign * (j + 1), axis=-1))
            contrib = a * tail
            out += np.roll(contrib, j, axis=-1) if sign > 0 else np.roll(contrib, -j - 1, axis=-1)
    return fwd, bwd


def _cells(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``[E, tiles]`` as ``[E, rows, cols]`` (cells without a tile: 0)."""
    E, T = x.shape
    if T == rows * cols:
        return x.reshape(E, rows, cols).astype(np.float64)
    g = np.zeros((E, rows * cols))
    g[:, :T] = x
    return g.reshape(E, rows, cols)


def grid_link_loads(
    bytes_in: np.ndarray, bytes_out: np.ndarray, rows: int, cols: int, wrap: bool, trees: bool = False
) -> GridLinks:
    """Per exchange row, the bytes on every directed link under proportional traffic (module
    docstring), or with ``trees`` as multicast trees; ``[E, rows, cols]`` each. A row that sends or
    receives nothing loads no link."""
    O, I = _cells(bytes_out, rows, cols), _cells(bytes_in, rows, cols)
    total = O.sum(axis=(1, 2))
    scale = np.divide(1.0, total, out=np.zeros_like(total), where=(total > 0) & (I.sum(axis=(1, 2)) > 0))
    beyond = I.max(axis=1) if trees else I.sum(axis=1)  # what a column's receivers take, for the X part
    right, left = _line(O, beyond[:, None, :], wrap, trees)  # X along each source row
    # Y along each destination column
    down_t, up_t = _line(O.sum(axis=2)[:, None, :], I.transpose(0, 2, 1), wrap, trees)
    s = scale[:, None, None]
    return GridLinks(right * s, left * s, down_t.transpose(0, 2, 1) * s, up_t.transpose(0, 2, 1) * s)


def _split(live: np.ndarray, trees) -> list[tuple[np.ndarray, bool]]:
    """``live`` rows split into those timed as unicasts and those timed as trees (``trees``: bool
    [E] or None), each with its rule."""
    if trees is None:
        return [(live, False)]
    t = np.asarray(trees, bool)[live]
    return [(live[~t], False), (live[t], True)]


def grid_max_hops(bytes_in: np.ndarray, bytes_out: np.ndarray, rows: int, cols: int, wrap: bool) -> np.ndarray:
    """Per exchange row, the hops of the longest route from a tile that sends to one that receives
    (−1: the row sends or receives nothing)."""
    E, T = bytes_out.shape
    t = np.arange(T)
    x, y = t % cols, t // cols
    send, recv = bytes_out > 0, bytes_in > 0
    best = np.full(E, -np.inf)
    big = rows + cols + 1  # below every real sign-combined coordinate
    for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        v = (sx * x + sy * y + big).astype(np.int32)  # > 0 on every tile
        hi = (send * v).max(axis=1)  # 0 where nothing is sent
        lo = big * 4 - (recv * (big * 4 - v)).max(axis=1)
        best = np.maximum(best, (hi - lo).astype(np.float64))
    if wrap:
        best = np.minimum(best, cols // 2 + rows // 2)
    ok = send.any(axis=1) & recv.any(axis=1)
    return np.where(ok, best, -1.0)


def _busy_rows(bytes_in: np.ndarray, bytes_out: np.ndarray, rows: int, cols: int, wrap: bool) -> tuple[int, int]:
    """``(first, last + 1)`` grid rows holding a tile that sends or receives in any row; on a mesh
    every route stays between them (X along the sender's row, Y between the two rows), so the
    links outside carry nothing and the loads may be found on those rows alone (a wafer whose
    network fills a band of it). A torus: every row (its routes may wrap)."""
    if wrap or rows * cols < _BAND_CELLS:
        return 0, rows
    busy = np.flatnonzero(bytes_in.any(axis=0) | bytes_out.any(axis=0))
    if not busy.size:
        return 0, rows
    y0, y1 = int(busy[0]) // cols, int(busy[-1]) // cols + 1
    return (y0, y1) if 2 * (y1 - y0) <= rows else (0, rows)


def grid_link_peaks(
    bytes_in: np.ndarray, bytes_out: np.ndarray, rows: int, cols: int, wrap: bool, trees=None
) -> tuple[np.ndarray, np.ndarray]:
    """``(busiest link's bytes [E], longest route's hops [E])`` of each exchange row (module
    docstring; ``trees``: bool [E], the rows whose traffic goes as multicast trees, None: none), in
    chunks of rows so that a large grid never holds more than a few tens of MiB. A tree reaches as
    far as its farthest receiver, so the hops are the same either way."""
    E = bytes_out.shape[0]
    link, hops = np.zeros(E), np.full(E, -1.0)
    live = np.flatnonzero(bytes_out.any(axis=1) & bytes_in.any(axis=1))  # rows that move bytes at all
    y0, y1 = _busy_rows(bytes_in, bytes_out, rows, cols, wrap)
    if (y0, y1) != (0, rows):  # the band of grid rows that carries every route (a shift in y changes no hop)
        band = slice(y0 * cols, min(y1 * cols, bytes_in.shape[1]))
        bytes_in, bytes_out, rows = bytes_in[:, band], bytes_out[:, band], y1 - y0
    step = max(1, _CHUNK_CELLS // max(rows * cols, 1))
    for part, tree in _split(live, trees):
        for a in range(0, part.size, step):
            r = part[a : a + step]
            link[r] = grid_link_loads(bytes_in[r], bytes_out[r], rows, cols, wrap, tree).busiest()
            hops[r] = grid_max_hops(bytes_in[r], bytes_out[r], rows, cols, wrap)
    return link, hops


def grid_link_totals(
    bytes_in: np.ndarray, bytes_out: np.ndarray, rows: int, cols: int, wrap: bool, trees=None
) -> GridLinks:
    """The bytes every directed link carries over all ``E`` exchange rows (the per-row loads of
    :func:`grid_link_loads` summed, ``trees`` as in :func:`grid_link_peaks`; ``[rows, cols]`` each),
    in chunks of rows as :func:`grid_link_peaks`."""
    acc = [np.zeros((rows, cols)) for _ in range(4)]
    live = np.flatnonzero(bytes_out.any(axis=1) & bytes_in.any(axis=1))
    y0, y1 = _busy_rows(bytes_in, bytes_out, rows, cols, wrap)  # the band of rows every route stays in
    band = slice(y0 * cols, min(y1 * cols, bytes_in.shape[1]))
    step = max(1, _CHUNK_CELLS // max((y1 - y0) * cols, 1))
    for rows_of, tree in _split(live, trees):
        for a in range(0, rows_of.size, step):
            r = rows_of[a : a + step]
            part = grid_link_loads(bytes_in[r, band], bytes_out[r, band], y1 - y0, cols, wrap, tree)
            for k, arr in enumerate((part.right, part.left, part.down, part.up)):
                acc[k][y0:y1] += arr.sum(axis=0)
    return GridLinks(*acc)


def proportional_flows(
    bytes_in: np.ndarray, bytes_out: np.ndarray, trees: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The explicit transfers ``(src, dst, bytes, group)`` one exchange row's per-tile totals
    (``[tiles]`` each) stand for under the assumption of the module docstring — what the closed form
    loads the links with, as flows an event model can time.

    Unicasts: one transfer ``s -> r`` of ``out_s · in_r / Σ out`` for every sender and receiver
    (group −1). ``trees``: each sender's data as nested multicasts, one per distinct fraction
    ``φ_1 < φ_2 < …`` its receivers take (``φ_r = in_r / Σ out``): multicast ``k`` carries
    ``out_s · (φ_k − φ_{k−1})`` to the receivers with ``φ_r ≥ φ_k`` (one group id each), so every
    link of the tree carries ``out_s · max φ`` over the receivers beyond it and receiver ``r`` gets
    ``out_s · φ_r`` — the tree loads of the module docstring, exactly."""
    out, inn = np.asarray(bytes_out, np.float64), np.asarray(bytes_in, np.float64)
    total = out.sum()
    senders, receivers = np.flatnonzero(out > 0), np.flatnonzero(inn > 0)
    if total <= 0 or not receivers.size:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0), z
    phi = inn[receivers] / total
    if not trees:
        src = np.repeat(senders, receivers.size)
        dst = np.tile(receivers, senders.size)
        return src, dst, out[src] * np.tile(phi, senders.size), np.full(src.size, -1, np.int64)
    levels = np.unique(phi)
    steps = np.diff(levels, prepend=0.0)
    src_l: list[np.ndarray] = []
    dst_l: list[np.ndarray] = []
    nb_l: list[np.ndarray] = []
    grp_l: list[np.ndarray] = []
    for s in senders.tolist():
        for level, step in zip(levels.tolist(), steps.tolist()):
            members = receivers[phi >= level]
            src_l.append(np.full(members.size, s))
            dst_l.append(members)
            nb_l.append(np.full(members.size, out[s] * step))
            grp_l.append(np.full(members.size, len(grp_l)))
    return np.concatenate(src_l), np.concatenate(dst_l), np.concatenate(nb_l), np.concatenate(grp_l)
