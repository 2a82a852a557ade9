"""NumPy twin of :mod:`tilesim.models.stencil.kernels` (slow, obvious, for tests)."""

from __future__ import annotations

import numpy as np

__all__ = ["blur_slices_ref", "blur_zero_padded"]

WEIGHTS = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.float32) / np.float32(16)


def blur_slices_ref(src: np.ndarray, r0, r1, c0, c1) -> np.ndarray:
    """Every slice padded by its halos (zeros where the authors' rule has none), then blurred."""
    rows, cols = src.shape[:2]
    dst = np.zeros_like(src)
    for a, b, c, d in zip(r0, r1, c0, c1):
        pad = np.zeros((b - a + 2, d - c + 2, src.shape[2]), np.float32)
        pad[1:-1, 1:-1] = src[a:b, c:d]
        top, bottom, left, right = a - 1 > 0, b < rows - 1, c - 1 > 0, d < cols - 1
        ra = a - 1 if top else a
        rb = b + 1 if bottom else b
        ca = c - 1 if left else c
        cb = d + 1 if right else d
        pad[ra - a + 1 : rb - a + 1, ca - c + 1 : cb - c + 1] = src[ra:rb, ca:cb]
        h, w = b - a, d - c
        acc = np.zeros((h, w, src.shape[2]), np.float32)
        for i in range(3):
            for j in range(3):
                acc += WEIGHTS[i, j] * pad[i : i + h, j : j + w]
        dst[a:b, c:d] = acc
    return dst


def blur_zero_padded(src: np.ndarray) -> np.ndarray:
    """The textbook blur with zero padding (scipy.ndimage.correlate, mode='constant')."""
    from scipy.ndimage import correlate  # scipy loads only where used (start-up time)

    return correlate(src, WEIGHTS[:, :, None], mode="constant", cval=0.0)
