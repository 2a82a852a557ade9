"""The per-operation cycle costs of the SNN step's kernels on a Tensix core (the ``tt-metal`` stack).

One frozen dataclass, :class:`TensixCosts`, loaded from ``tensix_costs.toml`` beside this module (or a
user's file of the same keys): formats, the vector unit's (SFPU) cycles per 32-lane operation, the
data-movement RISC-V cores' cycles per neuron, the DRAM efficiency and the firmware-reserved L1. Every
value carries its evidence tag and source in the TOML (tilesim/presets/EVIDENCE.md "Tensix SNN costs").
The matrix engine is timed by the ``tilesim matmul`` model (:mod:`tilesim.models.tensix.matmul`), with its
own fitted constants; nothing here comes from the IPU's :class:`tilesim.machine.costs.CostModel`.

A kernel's cycles on the SFPU for ``n`` elements with ``c`` cycles per 32-lane operation::

    sfpu(n, c) = ceil(n / sfpu_lanes) · c
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.io import loads_toml, read_toml
from tilesim.models.tensix.matmul import DTYPES, FIDELITIES

__all__ = ["TensixCosts", "load_tensix_costs", "default_tensix_costs"]


@dataclass(frozen=True)
class TensixCosts:
    """Per-operation costs on one Tensix core (the TOML's keys; module docstring)."""

    name: str
    version: str
    weight_bytes: float
    grad_bytes: float
    state_bytes: float
    id_bytes: float
    fpu_format: str
    fpu_fidelity: str
    sfpu_lanes: float
    sfpu_add_cycles: float
    lif_cycles: float
    surrogate_cycles: float
    sgd_cycles: float
    reduce_cycles: float
    compact_cycles_per_neuron: float
    densify_bytes_per_cycle: float
    dram_efficiency: float
    firmware_reserved_bytes_wormhole: float
    firmware_reserved_bytes_blackhole: float
    kernel_config_bytes: float
    cb_pages: float
    page_bytes: float

    def __post_init__(self):
        if self.fpu_format not in DTYPES:
            raise ConfigError(
                config_message("tensix costs: fpu_format", self.fpu_format, f"must be one of {', '.join(DTYPES)}")
            )
        if self.fpu_fidelity not in FIDELITIES:
            raise ConfigError(
                config_message(
                    "tensix costs: fpu_fidelity", self.fpu_fidelity, f"must be one of {', '.join(FIDELITIES)}"
                )
            )
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "float" and not (isinstance(v, float) and np.isfinite(v) and v >= 0):
                raise ConfigError(config_message(f"tensix costs: {f.name}", v, "must be a finite number >= 0"))
        for name in ("sfpu_lanes", "densify_bytes_per_cycle", "cb_pages", "page_bytes", "dram_efficiency"):
            if getattr(self, name) <= 0:
                raise ConfigError(config_message(f"tensix costs: {name}", getattr(self, name), "must be > 0"))

    def sfpu(self, n, cycles: float):
        """SFPU cycles of ``n`` elements (array or scalar) at ``cycles`` per 32-lane operation."""
        return np.ceil(np.asarray(n, np.float64) / self.sfpu_lanes) * cycles

    def firmware_reserved_bytes(self, machine) -> float:
        """L1 the firmware keeps on every Tensix core of ``machine`` (MEM_MAP_END of its architecture,
        :func:`tensix_architecture`, plus the kernel-config buffer)."""
        base = {
            "blackhole": self.firmware_reserved_bytes_blackhole,
            "wormhole_b0": self.firmware_reserved_bytes_wormhole,
        }[tensix_architecture(machine)]
        return base + self.kernel_config_bytes


TENSIX_ARCHITECTURES = ("wormhole_b0", "blackhole")
"""The Tensix generations whose firmware and dispatch figures the stack has (the machine's ``architecture``)."""


def tensix_architecture(machine) -> str:
    """``machine.architecture`` where it is a Tensix generation the stack knows (:data:`TENSIX_ARCHITECTURES`),
    else ``wormhole_b0`` (a user's file that does not say, or another vendor's machine under ``--stack
    tt-metal``: Wormhole's firmware figures assumed; :func:`architecture_note` says so)."""
    arch = getattr(machine, "architecture", "")
    return arch if arch in TENSIX_ARCHITECTURES else "wormhole_b0"


def architecture_note(machine) -> str | None:
    """The run's note when :func:`tensix_architecture` assumed Wormhole's figures, else None."""
    arch = getattr(machine, "architecture", "")
    if arch in TENSIX_ARCHITECTURES:
        return None
    said = f"architecture {arch!r}" if arch else "no architecture"
    return (
        f"{machine.name} names {said}: the tt-metal stack assumes Wormhole's firmware L1 and program dispatch "
        f'(give architecture = "wormhole_b0" or "blackhole" in the machine file)'
    )


_STRINGS = ("name", "version", "fpu_format", "fpu_fidelity")


def load_tensix_costs(path: str | Path | None = None) -> TensixCosts:
    """The shipped costs (``tensix_costs.toml``) or a user's TOML of the same keys; unknown or missing
    keys are refused, naming the known ones."""
    if path is None:
        data = loads_toml((resources.files("tilesim.models.snn.stacks") / "tensix_costs.toml").read_text())
    else:
        data = read_toml(Path(path), "tensix costs")
    known = [f.name for f in fields(TensixCosts)]
    bad = [k for k in data if k not in known] + [k for k in known if k not in data]
    if bad:
        raise ConfigError(
            config_message("tensix costs", bad[0], "unknown or missing key", f"give exactly: {', '.join(known)}")
        )
    return TensixCosts(**{k: (str(data[k]) if k in _STRINGS else float(data[k])) for k in known})


@lru_cache(maxsize=1)
def default_tensix_costs() -> TensixCosts:
    """The shipped :class:`TensixCosts` (read once)."""
    return load_tensix_costs()
