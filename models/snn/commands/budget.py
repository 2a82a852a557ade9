"""The host memory a training run needs, estimated from its options before anything is allocated.

``tilesim run`` and every sweep point check it against :func:`tilesim.running.limits.memory_limit_bytes`
and refuse what cannot fit, naming the estimate, the limit and the options that drive it.

The terms are the arrays :mod:`tilesim.models.snn.training.network` and :mod:`tilesim.models.snn.kernels.lif` allocate:

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

from tilesim.models.snn.commands.hostmem import check_host_memory, estimate_for_options
from tilesim.running.limits import check_time

__all__ = ["run_memory_bytes", "check_run_memory", "check_run_time", "STEP_FLOOR_S"]

# host time of one training step, at least: the smallest network (4-4-2, batch 1, 1 time step)
# took 0.09-0.12 s per step on the 2-core development VM (2026-11; the step's timing simulation
# dominates); half of that is the floor for a faster host
STEP_FLOOR_S = 0.05


def run_memory_bytes(options) -> float:
    """Estimated host bytes of a run of ``options`` (a :class:`tilesim.models.snn.commands.options.RunOptions`);
    0 for a NIR model (its layers are known only after the file is read). The one estimate is
    :func:`tilesim.models.snn.commands.hostmem.estimate_host_memory` (issue 15: by part, checked against the memory
    actually available)."""

    est = estimate_for_options(options)
    return 0.0 if est is None else est.total_bytes


def check_run_memory(options, what: str = "run") -> None:
    """Refuse a run whose estimate exceeds the memory available (ConfigError, one line naming
    the estimate, its largest part, what is available and the fix)."""

    est = estimate_for_options(options)
    if est is not None:
        layers = "-".join(map(str, options.layers))
        check_host_memory(est, what=f"{what} (layers {layers}, batch {options.batch}, timesteps {options.timesteps})")


def check_run_time(options, force: bool = False) -> None:
    """Refuse (without ``force``) a run whose steps take longer than the time limit even at
    :data:`STEP_FLOOR_S` each — a lower bound, so only what surely cannot finish is refused."""
    check_time(
        f"--steps {options.steps:,}",
        options.steps * STEP_FLOOR_S,
        force,
        "run fewer steps (the predicted step time does not depend on how many are run)",
    )
