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

— prefix and suffix sums on a mesh, ``n / 2`` shifted sums per dimension on a torus. The phase's
longest route (its hop latency) is the largest distance between a tile that sends and one that
receives: exact on a mesh (the four sign combinations of ``±x ± y``), on a torus the smaller of that
and the torus's diameter (an upper bound).

Arrays are ``[E, tiles]`` (E exchange rows of one chip; tile ``t`` at row ``t // cols``, column
``t % cols``; a grid with more cells than tiles leaves the rest empty).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GridLinks", "grid_link_loads", "grid_link_peaks", "grid_link_totals", "grid_max_hops", "link_slot"]

_CHUNK_CELLS = 1 << 22  # rows x cells per chunk of work (a few 32 MiB temporaries)


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


def _line(a: np.ndarray, b: np.ndarray, wrap: bool) -> tuple[np.ndarray, np.ndarray]:
    """Σ a_s · b_r over the pairs (s, r) of positions on a line of ``n`` whose route crosses each
    directed link: (forward [..., n] link x -> x+1, backward [..., n] link x+1 -> x); ``a`` and ``b``
    broadcast against each other on the leading axes."""
    n = a.shape[-1]
    shape = np.broadcast_shapes(a.shape, b.shape)
    fwd, bwd = np.zeros(shape), np.zeros(shape)
    if n < 2:
        return fwd, bwd
    if not wrap or n <= 2:  # a mesh line: s <= x < r forward, r <= x < s backward
        ca, cb = np.cumsum(a, axis=-1), np.cumsum(b, axis=-1)
        ta, tb = ca[..., -1:] - ca, cb[..., -1:] - cb  # sums beyond x
        fwd[..., :-1] = (ca * tb)[..., :-1]
        bwd[..., :-1] = (ta * cb)[..., :-1]
        return fwd, bwd
    up, down = n // 2, (n - 1) // 2  # forward for d = 1..n//2 (ties forward), backward for d = 1..(n-1)//2
    for steps, out, sign in ((up, fwd, 1), (down, bwd, -1)):
        # the flow s -> s + sign·d crosses the links s + sign·j for j < d: link s + sign·j carries
        # a_s · Σ_{d = j+1..steps} b_{s + sign·d}
        tail = np.zeros(shape)
        for j in range(steps - 1, -1, -1):
            tail = tail + np.roll(b, -sign * (j + 1), axis=-1)
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


def grid_link_loads(bytes_in: np.ndarray, bytes_out: np.ndarray, rows: int, cols: int, wrap: bool) -> GridLinks:
    """Per exchange row, the bytes on every directed link under proportional traffic (module
    docstring); ``[E, rows, cols]`` each. A row that sends or receives nothing loads no link."""
    O, I = _cells(bytes_out, rows, cols), _cells(bytes_in, rows, cols)
    total = O.sum(axis=(1, 2))
    scale = np.divide(1.0, total, out=np.zeros_like(total), where=(total > 0) & (I.sum(axis=(1, 2)) > 0))
    right, left = _line(O, I.sum(axis=1)[:, None, :], wrap)  # X along each source row
    down_t, up_t = _line(O.sum(axis=2)[:, None, :], I.transpose(0, 2, 1), wrap)  # Y along each destination column
    s = scale[:, None, None]
    return GridLinks(right * s, left * s, down_t.transpose(0, 2, 1) * s, up_t.transpose(0, 2, 1) * s)


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


def grid_link_peaks(
    bytes_in: np.ndarray, bytes_out: np.ndarray, rows: int, cols: int, wrap: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``(busiest link's bytes [E], longest route's hops [E])`` of each exchange row (module
    docstring), in chunks of rows so that a large grid never holds more than a few tens of MiB."""
    E = bytes_out.shape[0]
    link, hops = np.zeros(E), np.full(E, -1.0)
    live = np.flatnonzero(bytes_out.any(axis=1) & bytes_in.any(axis=1))  # rows that move bytes at all
    step = max(1, _CHUNK_CELLS // max(rows * cols, 1))
    for a in range(0, live.size, step):
        r = live[a : a + step]
        link[r] = grid_link_loads(bytes_in[r], bytes_out[r], rows, cols, wrap).busiest()
        hops[r] = grid_max_hops(bytes_in[r], bytes_out[r], rows, cols, wrap)
    return link, hops


def grid_link_totals(bytes_in: np.ndarray, bytes_out: np.ndarray, rows: int, cols: int, wrap: bool) -> GridLinks:
    """The bytes every directed link carries over all ``E`` exchange rows (the per-row loads of
    :func:`grid_link_loads` summed; ``[rows, cols]`` each), in chunks of rows as
    :func:`grid_link_peaks`."""
    acc = [np.zeros((rows, cols)) for _ in range(4)]
    live = np.flatnonzero(bytes_out.any(axis=1) & bytes_in.any(axis=1))
    step = max(1, _CHUNK_CELLS // max(rows * cols, 1))
    for a in range(0, live.size, step):
        r = live[a : a + step]
        part = grid_link_loads(bytes_in[r], bytes_out[r], rows, cols, wrap)
        for k, arr in enumerate((part.right, part.left, part.down, part.up)):
            acc[k] += arr.sum(axis=0)
    return GridLinks(*acc)
