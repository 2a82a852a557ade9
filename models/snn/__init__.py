"""Sparse spiking-neural-network training (the paper's sparse BPTT) with per-tile counters.

Modules: :mod:`~models.snn.network` (config, init, ``train_step``), :mod:`~models.snn.kernels`
(Numba kernels), :mod:`~models.snn.counters` (per-tile work, ``count_work``),
:mod:`~models.snn.spikes` (the canonical sparse list), :mod:`~models.snn.placement`,
:mod:`~models.snn.data` (datasets), :mod:`~models.snn.reference` (dense float64 twin).
"""

from models.snn.counters import Activity, PhaseCounters, WorkCounters, count_work, load_activity, save_activity
from models.snn.network import (
    LIFParams,
    NetworkConfig,
    NetworkState,
    StepResult,
    compute_gradients,
    init_network,
    init_weights,
    train_step,
)
from models.snn.placement import contiguous_placement, contiguous_tiles
from models.snn.spikes import SpikeList

__all__ = [
    "Activity",
    "LIFParams",
    "NetworkConfig",
    "NetworkState",
    "PhaseCounters",
    "SpikeList",
    "StepResult",
    "WorkCounters",
    "compute_gradients",
    "contiguous_placement",
    "contiguous_tiles",
    "count_work",
    "init_network",
    "init_weights",
    "load_activity",
    "save_activity",
    "train_step",
]
