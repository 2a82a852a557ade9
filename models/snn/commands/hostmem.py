"""Host memory of one ``tilesim run``, estimated before anything big is allocated, and the guard
that refuses a run that cannot fit (issue 15).

>>> est = estimate_host_memory(config, machine)
>>> est.total_bytes, est.largest                    # e.g. 6.6e9, ("weights", 2.95e9)
>>> check_host_memory(est)                          # ConfigError (one line) if it cannot fit

The parts follow what :func:`tilesim.models.snn.training.network.train_step` and the run path hold at their peak
(the backward pass of the first layer): the weights (float32, ``W`` and recurrent ``V``), the
gradients of one layer at a time (each layer's update is applied as soon as its gradient is
known, :func:`tilesim.models.snn.training.network.compute_gradients`), Adam's two slots per weight, the
membrane-potential sequences of every layer (float32 ``[T, B, n]``, kept for the backward pass)
with the backward pass's ``dI`` of one layer, the spike lists (ids and counts per layer and step),
one batch of input lists (:func:`tilesim.models.snn.commands.options._host_bytes`, the field-level lower bound the
options already check), the program (per chip, :class:`tilesim.program.CompactProgram`: a
chip's ``[S, tiles]`` rows at a time) and the interpreter with its libraries.

The estimate is checked against :func:`available_bytes`: ``MemAvailable`` of ``/proc/meminfo``
(what the kernel can hand out without swapping), or ``TILESIM_MEMORY_LIMIT`` if that is lower.
"""

from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace

from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import load_machine
from tilesim.models.snn.commands.options import _host_bytes, network_fields
from tilesim.models.snn.stacks import stack_for
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.outputs.records import whole_bytes
from tilesim.running.limits import env_memory_limit

__all__ = [
    "HostMemoryEstimate",
    "estimate_host_memory",
    "estimate_for_options",
    "check_host_memory",
    "available_bytes",
    "peak_rss_bytes",
    "BASE_BYTES",
]

# the interpreter with numpy, numba (compiled kernels), scipy, simpy and pydantic loaded, measured
# with `tilesim run --layers 32-16-4 --steps 1` on the development machine (2026-11: ~330 MB peak
# RSS); the program's per-chip rows and the engine's [S, chips] arrays come on top (below)
BASE_BYTES = 400e6
BASE_PART = "interpreter and libraries"
# float32 arrays per (time step, sample, neuron) the run keeps for every layer at once: the
# membrane-potential sequence v (kept for the backward pass), plus transient copies of one
# layer's v / dI (the state-gradient kernel) — counted once per network below
SEQ_BYTES_PER_ENTRY = 4.0
# [S, tiles] float32 rows of one chip at a time: compute, bytes in, bytes out, and a float64
# label x tile sum (tilesim.models.snn.step.timing.build_step_program, compact form)
ROW_ARRAYS = 3


@dataclass(frozen=True)
class HostMemoryEstimate:
    """Bytes of one run's peak host memory, by part (``parts``: (name, bytes) in a fixed order)."""

    parts: tuple
    fixed: bool = False  # a fixed-activity run: timed only, no float math (no weights, no sequences)

    @property
    def total_bytes(self) -> float:
        """The estimated peak."""
        return float(sum(b for _, b in self.parts))

    @property
    def largest(self) -> tuple:
        """(name, bytes) of the largest part a run's settings change (not the interpreter)."""
        return max((p for p in self.parts if p[0] != BASE_PART), key=lambda p: p[1])

    def to_dict(self) -> dict:
        """``{"total_bytes", "parts_bytes": {name: bytes}}`` (the ``--json`` form)."""
        return {"total_bytes": whole_bytes(self.total_bytes), "parts_bytes": {n: whole_bytes(b) for n, b in self.parts}}


def estimate_host_memory(
    config: NetworkConfig, machine, dense_program: bool = False, stack: str = "auto"
) -> HostMemoryEstimate:
    """The peak host memory of training ``config`` on ``machine`` and timing its steps (module
    docstring). ``dense_program``: the program is built as whole ``[S, all tiles]`` arrays
    (the reference form) rather than chip by chip; ``stack``: the execution stack whose supersteps the
    program holds (:func:`tilesim.models.snn.stacks.stack_for`; the vendor's by default). Cheap:
    sizes only, nothing is allocated.
    At ``config.activity == "fixed"`` the run only times the step
    (:func:`tilesim.models.snn.commands.run.run_training`): no weights, gradients, optimizer slots or state
    sequences are held (those parts are 0)."""

    sizes = config.layers
    L = config.n_layers
    T, B = config.timesteps, config.batch
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * L
    n_w = sum(a * b for a, b in zip(sizes, sizes[1:])) + sum(n * n for n, r in zip(sizes[1:], rec) if r)
    largest_layer = max(a * b + (b * b if r else 0) for a, b, r in zip(sizes, sizes[1:], rec))
    neurons = sum(sizes[1:])
    weights = 4.0 * n_w
    grads = 4.0 * largest_layer
    slots = 2 * weights if config.optimizer == "adam" else 0.0
    seqs = SEQ_BYTES_PER_ENTRY * T * B * neurons + 2 * 4.0 * T * B * max(sizes[1:])
    # spike lists: uint32 ids [T, B, N_max] + int32 counts [T, B, 2] per layer, for the step's
    # lists, their shifted copies (the next layer's inputs) and the recorded activity
    lists = 3 * sum(4.0 * T * B * (n + 2) for n in config.n_max)
    inputs = float(_host_bytes(SimpleNamespace(timesteps=T, batch=B, input_cap=config.input_cap)))
    S = stack_for(machine, stack).max_supersteps(T, L, machine.chips)
    tiles = machine.total_tiles if dense_program else machine.tiles_per_chip
    program = ROW_ARRAYS * 4.0 * S * tiles + 8 * S * machine.chips * 12  # rows + the [S, C] engine arrays
    fixed = config.activity == "fixed"
    if fixed:  # timed only: the float math's arrays are never allocated
        weights = grads = slots = seqs = 0.0
    parts = (
        ("weights", weights),
        ("gradients", grads),
        ("optimizer slots", slots),
        ("state sequences", seqs),
        ("spike lists", lists + inputs),
        ("program", program),
        (BASE_PART, BASE_BYTES),
    )
    return HostMemoryEstimate(parts, fixed)


def estimate_for_options(options) -> HostMemoryEstimate | None:
    """:func:`estimate_host_memory` of a :class:`tilesim.models.snn.commands.options.RunOptions` (its network on its
    machine); None for a NIR model (its layers are known only after the file is read) or options
    whose network is invalid (that error is reported where the network is built)."""
    if getattr(options, "model", None):
        return None

    try:
        config = NetworkConfig(**{name: getattr(options, name) for name in network_fields()})
        machine = _machine(options.machine, options.chips)
    except ConfigError:
        return None
    return estimate_host_memory(config, machine, stack=getattr(options, "stack", "auto"))


@lru_cache(maxsize=64)
def _machine(name, chips):
    """The machine of a run's options (a sweep checks every point: read each file once)."""

    return load_machine(name, chips)


def _meminfo_available() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        import psutil  # psutil only where /proc/meminfo is missing

        return float(psutil.virtual_memory().available)
    except Exception:  # no psutil, or it cannot tell
        return None


def available_bytes() -> float | None:
    """Memory this process can still take without swapping: ``MemAvailable`` (``/proc/meminfo``,
    else psutil) plus what the process already holds, capped by ``TILESIM_MEMORY_LIMIT`` (bytes)
    if set. None when the OS does not say (no check)."""
    have = _meminfo_available()
    if have is not None:
        have += peak_rss_bytes(current=True)
    lim = env_memory_limit()
    if lim is not None:
        have = lim if have is None else min(have, lim)
    return have


def check_host_memory(est: HostMemoryEstimate, available: float | None = None, what: str = "run") -> None:
    """Refuse a run whose estimate exceeds ``available`` (default :func:`available_bytes`): one
    line with the estimate, what is available, the largest part and the fixes."""
    have = available_bytes() if available is None else available
    if have is None or est.total_bytes <= have:
        return
    name, nb = est.largest
    timing_only = "" if est.fixed else "; to time the step alone without float math, use --activity fixed"
    fix = {
        "optimizer slots": "use --optimizer sgd (Adam keeps two slots per weight)",
        "state sequences": "use fewer --timesteps or a smaller --batch",
        "spike lists": "use fewer --timesteps or a smaller --batch",
        "program": "use fewer --timesteps or fewer layers",
    }.get(name, "use a smaller network (--layers)")
    sgd = name == "optimizer slots" or est.fixed or config_is_sgd(est)
    fix += ("" if sgd else ", --optimizer sgd") + timing_only
    raise ConfigError(
        config_message(
            f"{what} host memory",
            f"~{est.total_bytes / 1e9:,.1f} GB of memory estimated (largest part: {name} {nb / 1e9:,.1f} GB)",
            f"more than the {have / 1e9:,.1f} GB available",
            fix,
        )
    )


def config_is_sgd(est: HostMemoryEstimate) -> bool:
    """Whether the estimate has no optimizer slots (SGD)."""
    return dict(est.parts).get("optimizer slots", 0.0) == 0.0


def peak_rss_bytes(current: bool = False) -> float:
    """This process's peak resident memory (``ru_maxrss``), or with ``current`` its resident
    memory now (``/proc/self/statm``; the peak where that is missing)."""
    if current:
        try:
            with open("/proc/self/statm") as f:
                return float(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(rss) * (1.0 if sys.platform == "darwin" else 1024.0)
