"""Numba kernel of the 3×3 Gaussian blur over worker slices (the only numba module here).

Kernels take arrays and scalars only; :mod:`tilesim.models.stencil.workload` validates. Layout: images are
``(rows, cols, 4)`` float32, row-major. One call is one compute set: every worker slice
``r0:r1, c0:c1`` writes ``dst`` from ``src``::

    dst[r, c] = (nw + ne + sw + se) / 16 + (n + s + e + w) / 8 + m / 4

A neighbour outside the slice comes from its halo, which exists only when the authors' rule allows
it (top: ``r0 - 1 > 0``, left: ``c0 - 1 > 0``, bottom: ``r1 < rows - 1``, right: ``c1 < cols - 1``;
a corner needs both sides); a missing halo reads 0.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from tilesim.models.jit import EXACT, PARALLEL_EXACT


@nb.njit(**EXACT)
def _slice(src, dst, r0, r1, c0, c1):
    rows, cols = src.shape[0], src.shape[1]
    top, bottom = r0 - 1 > 0, r1 < rows - 1
    left, right = c0 - 1 > 0, c1 < cols - 1
    for r in range(r0, r1):
        for c in range(c0, c1):
            for ch in range(src.shape[2]):
                acc = np.float32(0.0)
                for dr in range(-1, 2):
                    rr = r + dr
                    if rr < r0 and not top:
                        continue
                    if rr >= r1 and not bottom:
                        continue
                    for dc in range(-1, 2):
                        cc = c + dc
                        if cc < c0 and not left:
                            continue
                        if cc >= c1 and not right:
                            continue
                        wgt = (
                            np.float32(0.25)
                            if dr == 0 and dc == 0
                            else (np.float32(0.125) if dr == 0 or dc == 0 else np.float32(0.0625))
                        )
                        acc += wgt * src[rr, cc, ch]
                dst[r, c, ch] = acc


@nb.njit(**PARALLEL_EXACT)
def blur_slices(src, dst, r0, r1, c0, c1):
    """One compute set: blur every slice ``i`` of ``src`` into ``dst`` (parallel over slices)."""
    for i in nb.prange(r0.shape[0]):
        _slice(src, dst, r0[i], r1[i], c0[i], c1[i])
