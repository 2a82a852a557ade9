"""How the authors' low-level Poplar stencil splits an image over IPUs, tiles and workers.

The image (``rows`` × ``cols`` pixels) is first cut into one strip per IPU, along the dimension
that divides more evenly (rows → horizontal strips, else column strips). Each strip is cut into
tile blocks: a near-square grid of ``tile_rows`` × ``tile_cols`` blocks with at least the minimum
partition (``min_rows`` × ``min_cols``) per block, or a 1-D split when the strip is narrower than
the minimum. Each block is cut again into at most six worker slices (rows or columns, whichever
divides more evenly). Block sizes differ by at most one row/column (the first blocks get the
extra). Written from the description of ``main/StructuredGridUtils.hpp`` in
github.com/thorbenlouw/lbm-graphcore @97cd841 (Louw & McIntosh-Smith 2020); plain functions over
integers, no Poplar.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tilesim.errors import ConfigError, config_message

__all__ = ["Blocks", "partition_image", "MAX_PIXELS_PER_IPU"]

MAX_PIXELS_PER_IPU = 2000 * 1400  # the authors' cap per IPU (partitionForIpus(..., 2000 * 1400))


@dataclass(frozen=True, eq=False)
class Blocks:
    """Worker slices of an image: one entry per (ipu, tile, worker), rows ``r0:r1``, cols ``c0:c1``."""

    height: int
    width: int
    ipu: np.ndarray  # int64 [B]
    tile: np.ndarray  # int64 [B] tile within its IPU
    worker: np.ndarray  # int64 [B]
    r0: np.ndarray
    r1: np.ndarray
    c0: np.ndarray
    c1: np.ndarray

    @property
    def count(self) -> int:
        return int(self.ipu.shape[0])

    def pixels(self) -> np.ndarray:
        return (self.r1 - self.r0) * (self.c1 - self.c0)


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``n`` items over ``parts`` consecutive ranges; the first ``n % parts`` get one extra."""
    base, extra = divmod(n, parts)
    out, a = [], 0
    for i in range(parts):
        b = a + base + (1 if i < extra else 0)
        out.append((a, b))
        a = b
    return out


def _ipu_strips(rows: int, cols: int, ipus: int) -> list[tuple[int, int, int, int]]:
    if rows * cols > MAX_PIXELS_PER_IPU * ipus:
        raise ConfigError(
            config_message(
                "image",
                f"{cols}x{rows}",
                f"has more than {MAX_PIXELS_PER_IPU:,} pixels per IPU on {ipus} IPU(s)",
                "use more IPUs or a smaller image (the authors' limit per IPU)",
            )
        )
    by_rows = (rows % ipus) / rows < (cols % ipus) / cols

    def strips(use_rows: bool):
        n, other = (rows, cols) if use_rows else (cols, rows)
        if ipus > n:
            return None
        out = []
        for a, b in _split(n, ipus):
            if (b - a) * other > MAX_PIXELS_PER_IPU:
                return None
            out.append((a, b, 0, cols) if use_rows else (0, rows, a, b))
        return out

    got = strips(by_rows) or strips(not by_rows)
    if got is None:
        raise ConfigError(
            config_message(
                "ipus",
                ipus,
                f"cannot split a {cols}x{rows} image into {ipus} strips",
                "use fewer IPUs or a larger image",
            )
        )
    return got


def _tile_blocks(r0, r1, c0, c1, tiles, min_rows, min_cols) -> list[tuple[int, int, int, int]]:
    h, w = r1 - r0, c1 - c0
    if h * w < min_rows * min_cols:
        return [(r0, r1, c0, c1)]
    if w < min_cols:  # long and narrow: row chunks
        n = min(tiles, h // min_rows)
        return [(r0 + a, r0 + b, c0, c1) for a, b in _split(h, n)]
    if h < min_rows:  # short and wide: column chunks
        n = min(tiles, w // min_cols)
        return [(r0, r1, c0 + a, c0 + b) for a, b in _split(w, n)]
    aspect = max(min_cols, w) / max(min_rows, h)
    cmax, rmax = min(tiles, w // min_cols), min(tiles, h // min_rows)
    tcols = int(min(float(cmax), math.ceil(math.sqrt(tiles * aspect))))
    trows = min(rmax, tiles // tcols)
    narrow = max(min_cols, w // tcols)
    n_wide = w - tcols * narrow  # columns one pixel wider (may be <= 0)
    n_narrow = tcols - n_wide if tcols > n_wide else 0
    short = max(min_rows, h // trows)
    n_tall = h - trows * short
    n_short = trows - n_tall if trows > n_tall else 0
    widths = [narrow + 1] * max(n_wide, 0) + [narrow] * n_narrow
    heights = [short + 1] * max(n_tall, 0) + [short] * n_short
    out, r = [], r0
    for bh in heights:
        c = c0
        for bw in widths:
            out.append((r, r + bh, c, c + bw))
            c += bw
        r += bh
    return out


def _worker_slices(r0, r1, c0, c1, workers) -> list[tuple[int, int, int, int]]:
    h, w = r1 - r0, c1 - c0
    if (h % workers) / h <= (w % workers) / w:
        return [(r0 + a, r0 + b, c0, c1) for a, b in _split(h, min(h, workers))]
    return [(r0, r1, c0 + a, c0 + b) for a, b in _split(w, min(w, workers))]


def partition_image(
    height: int, width: int, ipus: int, tiles_per_ipu: int, min_rows: int = 6, min_cols: int = 6, workers: int = 6
) -> Blocks:
    """The authors' split of a ``height`` × ``width`` image over ``ipus`` IPUs.

    Raises
    ------
    ConfigError
        Non-positive sizes, or an image that does not fit the authors' per-IPU limit.
    """
    for name, v in (
        ("image height", height),
        ("image width", width),
        ("ipus", ipus),
        ("tiles per IPU", tiles_per_ipu),
        ("min rows per tile", min_rows),
        ("min cols per tile", min_cols),
        ("workers", workers),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(config_message(name, v, "must be an integer >= 1", f"e.g. {name} 100"))
    cols = {k: [] for k in ("ipu", "tile", "worker", "r0", "r1", "c0", "c1")}
    for ipu, strip in enumerate(_ipu_strips(height, width, ipus)):
        blocks = _tile_blocks(*strip, tiles_per_ipu, min_rows, min_cols)
        if len(blocks) > tiles_per_ipu:
            raise ConfigError(
                config_message(
                    "tile blocks", len(blocks), f"exceed {tiles_per_ipu} tiles per IPU", "raise --min-partition"
                )
            )
        for tile, blk in enumerate(blocks):
            for k, (a, b, c, d) in enumerate(_worker_slices(*blk, workers)):
                for key, v in zip(("ipu", "tile", "worker", "r0", "r1", "c0", "c1"), (ipu, tile, k, a, b, c, d)):
                    cols[key].append(v)
    arr = {k: np.asarray(v, np.int64) for k, v in cols.items()}
    return Blocks(height=int(height), width=int(width), **arr)
