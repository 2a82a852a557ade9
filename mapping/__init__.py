"""Neuron-to-tile and layer-to-chip placement: the :class:`Mapping`, strategies, search.

Pure functions over numpy/networkx; nothing here runs a kernel (architecture.md).
"""

from mapping.core import FORMAT, Block, Mapping, load_mapping
from mapping.strategies import STRATEGIES, balanced, contiguous, graph, round_robin

__all__ = ["FORMAT", "Block", "Mapping", "load_mapping", "STRATEGIES", "contiguous", "round_robin", "balanced", "graph"]
