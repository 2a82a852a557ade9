"""The Cerebras PE's cycle costs for the csl stack's native program (``wse_costs.toml``).

A PE runs one task at a time; vector work goes through DSD instructions that stream one FP32
element a cycle. The native program (:mod:`tilesim.models.snn.stacks.csl_program`) times a PE's
work in a superstep as::

    cycles = tasks · task_cycles + dsd_ops · dsd_setup_cycles
           + fmacs / fmac_f32_per_cycle + adds / fadd_f32_per_cycle + moves / mem_op_per_cycle
           + ids · spike_scalar_cycles + wavelets_in · wavelet_rx_cycles + wavelets_out · wavelet_tx_cycles

Every constant has its source and evidence tag in the TOML file and in
``tilesim/presets/EVIDENCE.md`` §5.4. The IPU's fitted :class:`tilesim.machine.costs.CostModel`
never enters here: a Cerebras step is timed by these costs alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.io import read_toml

__all__ = ["WseCosts", "load_wse_costs", "default_wse_costs"]

_TABLES = ("pe", "memory", "router")


@dataclass(frozen=True)
class WseCosts:
    """Per-PE costs (cycles, or elements per cycle) of the native csl program; see the module docstring."""

    name: str
    version: str
    # [pe]
    fmac_f32_per_cycle: float
    fadd_f32_per_cycle: float
    fp16_simd_per_cycle: float
    mem_op_per_cycle: float
    dsd_setup_cycles: float
    task_cycles: float
    wavelet_rx_cycles: float
    wavelet_tx_cycles: float
    spike_scalar_cycles: float
    neuron_ops: float
    neuron_grad_ops: float
    sgd_ops: float
    # [memory]
    code_bytes: int
    reserved_bytes: int
    # [router]
    routable_colors: int
    memcpy_colors: int

    def __post_init__(self):
        for f in fields(self):
            if f.name in ("name", "version"):
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(config_message(f"wse costs: {f.name}", v, "must be a finite number >= 0"))
        for rate in ("fmac_f32_per_cycle", "fadd_f32_per_cycle", "mem_op_per_cycle"):
            if getattr(self, rate) <= 0:
                raise ConfigError(
                    config_message(f"wse costs: {rate}", getattr(self, rate), "must be > 0", "elements per cycle")
                )


def load_wse_costs(path) -> WseCosts:
    """Read a WSE cost file (``name``, ``version``, ``[pe]``, ``[memory]``, ``[router]``); an unknown or
    missing key is a :class:`ConfigError` listing the known names."""
    p = Path(path)
    data = read_toml(p, "WSE cost file")
    known = {f.name for f in fields(WseCosts)} - {"name", "version"}
    values: dict = {}
    for k, v in data.items():
        if k in ("name", "version"):
            continue
        if k not in _TABLES or not isinstance(v, dict):
            raise ConfigError(config_message(f"{path}: {k}", v, "unknown key", f"allowed: name, version, {_TABLES}"))
        for name, x in v.items():
            if name not in known:
                raise ConfigError(
                    config_message(f"{path}: [{k}] {name}", x, "unknown cost", f"known: {', '.join(sorted(known))}")
                )
            values[name] = x
    missing = sorted(known - set(values))
    if missing:
        raise ConfigError(config_message(f"{path}", missing, "costs missing", "give every cost of wse_costs.toml"))
    return WseCosts(name=str(data.get("name", p.stem)), version=str(data.get("version", "0")), **values)


@lru_cache(maxsize=1)
def default_wse_costs() -> WseCosts:
    """The shipped costs (``models/snn/stacks/wse_costs.toml``; read once)."""
    with resources.as_file(resources.files("tilesim.models.snn.stacks") / "wse_costs.toml") as p:
        return load_wse_costs(p)
