"""Synthetic recorded activity: time a training step without running its float math.

``fixed_activity`` builds the :class:`~tilesim.models.snn.step.counters.Activity` that a ``activity =
"fixed"`` run records (snn-on-ipu.md §4.3): the init bound +100 makes about half of every
layer's neurons cross ϑ1 at every step, so each list saturates at exactly ``N_max`` real spikes
— the first ``N_max`` spiking neurons in ascending index — and the input list holds
``input_cap`` channels. Which neurons spike is drawn at random (each neuron with probability
``p_spike``), so the per-tile spread of the kept entries matches a fixed run's: concentrated on
the layer's low neuron indices.

The work counters, and so the predicted time, depend only on the lists' counts and on which
tile owns each kept id; with fixed activity neither depends on the weights. This is what makes
weak-scaling predictions for 190k-neuron networks cheap.
"""

from __future__ import annotations

import numpy as np

from tilesim.errors import require
from tilesim.models.snn.kernels.spikes import SpikeList, initial_list
from tilesim.models.snn.step.counters import Activity
from tilesim.models.snn.training.network import NetworkConfig

__all__ = ["fixed_activity"]


def _saturated_ids(rng, T, B, n, k, p):
    """uint32 ``[T, B, k]``: per (t, b), the first k ids of a Bernoulli(p) subset of range(n),
    ascending (a uniform subset of size k when the subset has fewer than k members)."""
    if k == 0:
        return np.zeros((T, B, 0), np.uint32)
    gaps = rng.geometric(p, size=(T, B, k))
    ids = np.cumsum(gaps, axis=2, dtype=np.int64) - 1
    short = ids[..., -1] >= n
    for t, b in zip(*np.nonzero(short)):
        ids[t, b] = np.sort(rng.choice(n, size=k, replace=False))
    return ids.astype(np.uint32)


def fixed_activity(config: NetworkConfig, seed: int | None = None, p_spike: float = 0.5) -> Activity:
    """The activity of a fixed-activity training step of ``config`` (see the module docstring).

    Parameters
    ----------
    config : NetworkConfig
        Any ``activity`` setting; the lists are built as if it were ``"fixed"``.
    seed : int, optional
        Seeds the choice of spiking neurons (default ``config.seed``).
    p_spike : float
        Probability that a neuron crosses ϑ1 at a step (about 1/2 with the +100 init bound).
    """
    require(0.0 < p_spike <= 1.0, "p_spike", p_spike, "must be in (0, 1]")
    rng = np.random.default_rng(config.seed if seed is None else seed)
    T, B = config.timesteps, config.batch
    n0, cap = config.layers[0], min(config.input_cap, config.layers[0])
    inputs = SpikeList(_saturated_ids(rng, T, B, n0, cap, p_spike), np.full((T, B, 2), cap, np.int32))
    layers, initial = [], []
    for n, k in zip(config.layers[1:], config.n_max):
        counts = np.full((T, B, 2), k, np.int32)
        layers.append(SpikeList(_saturated_ids(rng, T, B, n, k, p_spike), counts))
        initial.append(initial_list(B, k, True))
    return Activity(tuple(config.layers), inputs, tuple(layers), tuple(initial), tuple(config.recurrent))
