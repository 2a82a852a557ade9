"""Sparse spiking-neural-network training (the paper's sparse BPTT) with per-tile counters.

Modules: :mod:`~models.snn.network` (config, init, ``train_step``), :mod:`~models.snn.kernels`
(Numba kernels), :mod:`~models.snn.counters` (per-tile work, ``count_work``),
:mod:`~models.snn.spikes` (the canonical sparse list), :mod:`~models.snn.placement`,
:mod:`~models.snn.data` (datasets), :mod:`~models.snn.reference` (dense float64 twin).
"""

from tilesim.lazy import lazy_exports

# loaded on first use (tilesim.lazy): importing the package alone imports neither Numba nor networkx
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "models.snn.counters": (
            "Activity",
            "PhaseCounters",
            "WorkCounters",
            "count_work",
            "load_activity",
            "save_activity",
        ),
        "models.snn.network": (
            "LIFParams",
            "NetworkConfig",
            "NetworkState",
            "StepResult",
            "compute_gradients",
            "init_network",
            "init_weights",
            "train_step",
        ),
        "models.snn.placement": (
            "contiguous_placement",
            "contiguous_tiles",
        ),
        "models.snn.spikes": ("SpikeList",),
    },
)
