"""Neuron-to-tile and layer-to-chip placement: the :class:`Mapping`, strategies, search.

Pure functions over numpy/networkx; nothing here runs a kernel (architecture.md).
"""

from tilesim.running.lazy import lazy_exports

# loaded on first use (tilesim.running.lazy): importing the package alone imports neither Numba nor networkx
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tilesim.mapping.core": (
            "FORMAT",
            "Block",
            "Mapping",
            "load_mapping",
        ),
        "tilesim.mapping.strategies": (
            "STRATEGIES",
            "balanced",
            "contiguous",
            "graph",
            "round_robin",
            "spread",
        ),
    },
)
