"""Sparse spiking-neural-network training (the paper's sparse BPTT) with per-tile counters.

Modules: :mod:`~tilesim.models.snn.training.network` (config, init, ``train_step``),
:mod:`~tilesim.models.snn.kernels.lif` (Numba kernels), :mod:`~tilesim.models.snn.step.counters` (per-tile work,
``count_work``), :mod:`~tilesim.models.snn.kernels.spikes` (the canonical sparse list),
:mod:`~tilesim.models.snn.placement.contiguous`, :mod:`~tilesim.models.snn.training.data` (datasets),
:mod:`~tilesim.models.snn.kernels.reference` (dense float64 twin).
"""

from tilesim.running.lazy import lazy_exports

# loaded on first use (tilesim.running.lazy): importing the package alone imports neither Numba nor networkx
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tilesim.models.snn.step.counters": (
            "Activity",
            "PhaseCounters",
            "WorkCounters",
            "count_work",
            "load_activity",
            "save_activity",
        ),
        "tilesim.models.snn.training.network": (
            "LIFParams",
            "NetworkConfig",
            "NetworkState",
            "StepResult",
            "compute_gradients",
            "init_network",
            "init_weights",
            "train_step",
        ),
        "tilesim.models.snn.placement.contiguous": (
            "contiguous_placement",
            "contiguous_tiles",
        ),
        "tilesim.models.snn.kernels.spikes": ("SpikeList",),
    },
)
