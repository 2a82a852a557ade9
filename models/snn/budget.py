"""The host memory a training run needs, estimated from its options before anything is allocated.

``tilesim run`` and every sweep point check it against :func:`tilesim.limits.memory_limit_bytes`
and refuse what cannot fit, naming the estimate, the limit and the options that drive it.

The terms are the arrays :mod:`models.snn.network` and :mod:`models.snn.kernels` allocate:

* weights ``W`` (and recurrent ``V``) float32, with as many same-shaped copies again as the
  optimizer keeps: the gradient, and Adam's two moments (``init_network``) — 4 copies with Adam,
  2 with SGD;
* float32 ``[T, B, N]`` arrays: every layer's membrane sequence ``v_seq`` (``lif_forward``,
  kept for the backward pass) and, one layer at a time, the synaptic input
  (``synaptic_input``) or the state gradient ``dI`` (``state_grad``) of the largest layer.

Spike lists (``[T, B, N_max]``, N_max << N), the dataset and the timing program are smaller
and left out, so the estimate is a lower bound of what a run touches.
"""
from __future__ import annotations

from tilesim.limits import check_memory

__all__ = ["run_memory_bytes", "check_run_memory"]

FLOAT32_BYTES = 4


def run_memory_bytes(options) -> float:
    """Estimated host bytes of a run of ``options`` (a :class:`models.snn.options.RunOptions`);
    0 for a NIR model (its layers are known only after the file is read)."""
    if getattr(options, "model", None):
        return 0.0
    sizes = [int(n) for n in options.layers]
    weights = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    if options.recurrent:
        weights += sum(n * n for n in sizes[1:])
    copies = 4 if options.optimizer == "adam" else 2
    neurons = sum(sizes[1:]) + max(sizes[1:])       # all v_seq + one transient of the largest layer
    sequences = float(options.timesteps) * float(options.batch) * neurons
    return FLOAT32_BYTES * (copies * float(weights) + sequences)


def check_run_memory(options, what: str = "run") -> None:
    """Refuse a run whose :func:`run_memory_bytes` exceeds the machine's limit (ConfigError)."""
    layers = "-".join(map(str, options.layers))
    check_memory(f"{what} (layers {layers}, batch {options.batch}, timesteps {options.timesteps})",
                 run_memory_bytes(options),
                 "use fewer or smaller layers, a smaller --batch or fewer --timesteps")
