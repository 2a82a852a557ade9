"""The names the linear-layer commands offer, in a module that imports nothing (start-up time:
``tilesim --help`` lists them without loading the layers' Numba kernels)."""

from __future__ import annotations

__all__ = ["LAYER_KINDS", "TABLE4_PARAMS", "SHL_METHODS", "SHL_DENSE_ALIASES"]

LAYER_KINDS = ("dense", "low-rank", "butterfly", "pixelfly", "fastfood", "circulant", "block-sparse", "dynamic-sparse")
"""The weight structures ``tilesim layer --kind`` times."""

TABLE4_PARAMS = {
    "baseline": 1_059_850,
    "butterfly": 16_390,
    "fastfood": 14_346,
    "circulant": 12_298,
    "low-rank": 13_322,
    "pixelfly": 404_490,
}
"""N_Params column of the paper's Table 4 (identical for GPU and IPU runs)."""

SHL_METHODS = tuple(TABLE4_PARAMS)
"""The single-hidden-layer model's methods (Table 4's rows)."""

SHL_DENSE_ALIASES = {"dense": "baseline"}
"""``time_shl`` method names accepted for a paper method: ``dense`` (as ``tilesim layer`` says) is ``baseline``."""

SPARSE_KINDS = ("block-sparse", "dynamic-sparse")
BLOCK_PATTERNS = ("random", "matmul_bench")
"""Where a static block-sparse layer's non-zero blocks come from: a random draw from its seed, or the PopSparse
paper's benchmark's own pattern (:mod:`tilesim.models.linear.benchpattern`)."""
"""The PopSparse layers: static (pattern known when the program is built) and dynamic (known at run time)."""
