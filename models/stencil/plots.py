"""PNG input/output for the stencil command (matplotlib lives in plot modules only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message

__all__ = ["read_png", "write_png"]


def read_png(path) -> np.ndarray:
    """An RGBA float32 image in [0, 1], shape (rows, cols, 4); RGB gets an opaque alpha."""
    import matplotlib.image as mpimg  # matplotlib is imported only when drawing (start-up time)

    p = Path(path)
    if not p.is_file():
        raise ConfigError(config_message("--image", str(path), "no such file", "give a PNG file"))
    try:
        img = np.asarray(mpimg.imread(p), np.float32)
    except Exception as exc:  # matplotlib raises several kinds for a bad file
        raise ConfigError(
            config_message("--image", str(path), f"is not a readable PNG ({exc.__class__.__name__})", "give a PNG file")
        ) from None
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    if img.shape[2] == 3:
        img = np.concatenate([img, np.ones(img.shape[:2] + (1,), np.float32)], axis=2)
    return np.ascontiguousarray(img[:, :, :4])


def write_png(path, image: np.ndarray) -> None:
    """Write an ``[H, W, 3|4]`` float image to ``path`` as PNG, clipping values to [0, 1]."""
    import matplotlib.image as mpimg  # matplotlib is imported only when drawing (start-up time)

    mpimg.imsave(Path(path), np.clip(image, 0.0, 1.0))
