"""Per-tile counts of a stencil partition: pixels per worker, halo traffic and on-tile copies.

Every worker vertex reads its slice plus eight halos (top/bottom rows, left/right columns, four
corners) taken from the whole image, with the authors' edge rule (``Halos::forSliceTopIs0NoWrap``
in ``main/StencilUtils.hpp``): a halo exists only if its row/column index is strictly inside
``1 .. size-2`` on the far side (top needs ``r0 - 1 > 0``, left ``c0 - 1 > 0``, bottom
``r1 < rows - 1``, right ``c1 < cols - 1``); a missing halo reads zeros. Halo pixels held by the
worker's own tile are on-tile copies; those of another tile of the same IPU are on-chip exchange;
those of another IPU cross IPU-Links. A tile receives each remote pixel once, however many of its
workers read it. A message is a contiguous run in the source tile's memory: adjacent pixels of one
image row held by one source tile; every pixel of a column halo is its own message (the image is
row-major). On-tile copy regions are counted per worker halo.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilesim.models.stencil.partition import Blocks

__all__ = ["HaloCounts", "halo_counts", "owner_map"]


@dataclass(frozen=True, eq=False)
class HaloCounts:
    """Per global tile (``ipu * tiles_per_ipu + tile``) counts, in pixels and runs."""

    tiles_per_ipu: int
    ipus: int
    max_worker_pixels: np.ndarray  # [N] largest worker slice
    tile_pixels: np.ndarray  # [N]
    tile_rows: np.ndarray  # [N] row segments of all worker slices (in/out copy regions)
    onchip_in_px: np.ndarray  # [N] halo pixels received from other tiles of the same IPU
    onchip_out_px: np.ndarray  # [N] halo pixels sent to other tiles of the same IPU
    onchip_in_runs: np.ndarray  # [N]
    local_halo_px: np.ndarray  # [N] halo pixels copied on the tile itself
    local_halo_runs: np.ndarray  # [N]
    link_in_px: np.ndarray  # [N] halo pixels received from other IPUs
    link_in_runs: np.ndarray  # [N]
    flows_px: dict  # {(src_ipu, dst_ipu): pixels}
    flows_runs: dict  # {(src_ipu, dst_ipu): messages (contiguous source regions per destination tile)}


def owner_map(blocks: Blocks, tiles_per_ipu: int) -> np.ndarray:
    """Global tile id of every pixel, shape (height, width)."""
    g = blocks.ipu * tiles_per_ipu + blocks.tile
    h, w = blocks.r1 - blocks.r0, blocks.c1 - blocks.c0
    n = h * w
    k = np.repeat(np.arange(blocks.count), n)
    off = np.arange(k.size) - np.repeat(np.cumsum(n) - n, n)
    own = np.full((blocks.height, blocks.width), -1, np.int64)
    own[blocks.r0[k] + off // w[k], blocks.c0[k] + off % w[k]] = g[k]
    return own


def _segments(starts_r, starts_c, lengths, horizontal: bool):
    """Pixel coordinates of row (horizontal) or column segments, and the segment of each pixel."""
    seg = np.repeat(np.arange(lengths.size), lengths)
    offs = np.arange(seg.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rr = starts_r[seg] + (0 if horizontal else offs)
    cc = starts_c[seg] + (offs if horizontal else 0)
    return rr, cc, seg


def _halo_pieces(blocks: Blocks) -> list:
    """Every worker's halo as pixel runs: per side and corner that exists (not the image border), a
    tuple ``(dst worker index, pixel rows, pixel cols, run id, is_row)``."""
    H, W = blocks.height, blocks.width
    r0, r1, c0, c1 = blocks.r0, blocks.r1, blocks.c0, blocks.c1
    h, w = r1 - r0, c1 - c0
    top, left = r0 - 1 > 0, c0 - 1 > 0
    bottom, right = r1 < H - 1, c1 < W - 1
    pieces = []
    for exists, rs, cs, lens, horiz in (
        (top, r0 - 1, c0, w, True),
        (bottom, r1, c0, w, True),
        (left, r0, c0 - 1, h, False),
        (right, r0, c1, h, False),
        (top & left, r0 - 1, c0 - 1, np.ones_like(h), True),
        (top & right, r0 - 1, c1, np.ones_like(h), True),
        (bottom & left, r1, c0 - 1, np.ones_like(h), True),
        (bottom & right, r1, c1, np.ones_like(h), True),
    ):
        idx = np.flatnonzero(exists)
        if not idx.size:
            continue
        rr, cc, seg = _segments(rs[idx], cs[idx], lens[idx], horiz)
        pieces.append((idx[seg], rr, cc, seg, horiz))
    return pieces


def _local_halo(pieces: list, gt: np.ndarray, own: np.ndarray, N: int) -> tuple:
    """``(local_px, local_runs, remote)``: per tile the halo pixels its workers copy from the tile itself
    and the copy regions (runs of one worker's halo from one owner), and the remote halo pixels as
    ``[dst tile, row, col]`` arrays."""
    local_px, local_runs = np.zeros(N), np.zeros(N)
    remote = []
    for widx, rr, cc, seg, horiz in pieces:
        dst = gt[widx]
        src = own[rr, cc]
        same_tile = src == dst
        new = np.ones(src.size, bool)  # on-tile copy regions, per worker halo
        if horiz:
            new[1:] = (seg[1:] != seg[:-1]) | (src[1:] != src[:-1])
        local_px += np.bincount(dst[same_tile], minlength=N)
        local_runs += np.bincount(dst[same_tile & new], minlength=N)
        remote.append(np.stack([dst[~same_tile], rr[~same_tile], cc[~same_tile]], axis=1))
    return local_px, local_runs, remote


def _link_flows(src: np.ndarray, dst: np.ndarray, new: np.ndarray, tiles_per_ipu: int, ipus: int) -> tuple:
    """``(flows, runs)``: pixels and messages (``new`` marks a message's first pixel) of the inter-IPU
    halo pixels ``src -> dst`` (global tiles), keyed by ``(source IPU, destination IPU)``."""
    flows: dict = {}
    flow_runs: dict = {}
    pair = (src // tiles_per_ipu) * ipus + dst // tiles_per_ipu
    for table, sel in ((flows, np.ones(pair.size, bool)), (flow_runs, new)):
        for p, n in zip(*np.unique(pair[sel], return_counts=True)):
            table[(int(p) // ipus, int(p) % ipus)] = int(n)
    return flows, flow_runs


def halo_counts(blocks: Blocks, tiles_per_ipu: int) -> HaloCounts:
    """Count every tile's halo traffic and copies for one stencil compute set."""
    H, W = blocks.height, blocks.width
    ipus = int(blocks.ipu.max()) + 1
    N = ipus * tiles_per_ipu
    own = owner_map(blocks, tiles_per_ipu)
    gt = blocks.ipu * tiles_per_ipu + blocks.tile
    h = blocks.r1 - blocks.r0
    local_px, local_runs, remote = _local_halo(_halo_pieces(blocks), gt, own, N)
    # a tile receives each remote pixel once, however many of its workers read it; a message is
    # a contiguous run of one source tile's row (adjacent pixels of one row, same source)
    rem = np.concatenate(remote) if remote else np.zeros((0, 3), np.int64)
    key = np.unique((rem[:, 0] * H + rem[:, 1]) * W + rem[:, 2])  # sorted by (dst, row, col)
    dst, rc = np.divmod(key, H * W)
    rr, cc = np.divmod(rc, W)
    src = own[rr, cc]
    new = np.ones(src.size, bool)
    new[1:] = (dst[1:] != dst[:-1]) | (src[1:] != src[:-1]) | (rr[1:] != rr[:-1]) | (cc[1:] != cc[:-1] + 1)
    onchip = (src // tiles_per_ipu) == (dst // tiles_per_ipu)
    link = ~onchip
    flows, flow_runs = _link_flows(src[link], dst[link], new[link], tiles_per_ipu, ipus)
    onchip_in = np.bincount(dst[onchip], minlength=N).astype(np.float64)
    onchip_out = np.bincount(src[onchip], minlength=N).astype(np.float64)
    onchip_runs = np.bincount(dst[onchip & new], minlength=N).astype(np.float64)
    link_in = np.bincount(dst[link], minlength=N).astype(np.float64)
    link_runs = np.bincount(dst[link & new], minlength=N).astype(np.float64)
    px = blocks.pixels()
    maxw = np.zeros(N)
    np.maximum.at(maxw, gt, px)
    return HaloCounts(
        tiles_per_ipu=tiles_per_ipu,
        ipus=ipus,
        max_worker_pixels=maxw,
        tile_pixels=np.bincount(gt, weights=px, minlength=N),
        tile_rows=np.bincount(gt, weights=h, minlength=N).astype(np.float64),
        onchip_in_px=onchip_in,
        onchip_out_px=onchip_out,
        onchip_in_runs=onchip_runs,
        local_halo_px=local_px,
        local_halo_runs=local_runs,
        link_in_px=link_in,
        link_in_runs=link_runs,
        flows_px=flows,
        flows_runs=flow_runs,
    )
