"""Cost model: per-tile work counters → compute cycles, with calibrated coefficients.

A workload's kernels count what each tile actually did (``counters[name]`` = an array over
tiles, e.g. multiply-adds). A :class:`CostModel` holds *worker cycles per unit* of each counter
and turns them into tile cycles with the barrel-threading rule of ipu-hardware.md §2: a tile
issues one instruction per cycle, round-robin over ``workers`` contexts, so a single busy worker
advances at 1/workers of the issue rate::

    worker_cycles = Σ_k coefficient_k · counter_k                      (per tile)
    tile_cycles   = worker_cycles · workers / min(workers, vertices)   (work spread over vertices)
                    + supervisor_overhead_cycles · ceil(vertices / workers)

Coefficients live in versioned TOML files with their provenance (which data, when, residuals);
``tilesim calibrate`` (a later issue) refits them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.io import read_toml

__all__ = ["CostModel", "barrel_tile_cycles", "load_costs", "MAX_COEFFICIENT"]

MAX_COEFFICIENT = 1e6  # most worker cycles (or ns) per counted unit: the shipped files use at most 40


def barrel_tile_cycles(worker_cycles, vertices, workers: int, supervisor_overhead_cycles: float):
    """Tile cycles for ``worker_cycles`` of work split over ``vertices`` vertices (per tile arrays).

    ``workers`` and ``supervisor_overhead_cycles`` are the machine's (``chip.workers_per_tile``,
    ``chip.supervisor_overhead_cycles``): they have no defaults here, so the machine file is their
    one home. ``vertices == 0`` means the tile runs nothing (0 cycles).
    """
    v = np.asarray(vertices, np.float64)
    out = np.asarray(worker_cycles, np.float64) * workers / np.minimum(np.maximum(v, 1.0), workers)
    out += np.ceil(v / workers) * supervisor_overhead_cycles  # in place on the broadcast shape
    out *= v > 0
    return out


@dataclass(frozen=True)
class CostModel:
    """Worker cycles per unit of each named counter, plus provenance."""

    name: str
    version: str
    coefficients: Mapping[str, float]
    provenance: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        for k, v in self.coefficients.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(config_message(f"costs.coefficients.{k}", v, "must be a finite number >= 0"))
            if v > MAX_COEFFICIENT:
                raise ConfigError(
                    config_message(
                        f"costs.coefficients.{k}",
                        v,
                        f"must be <= {MAX_COEFFICIENT:g} (cycles per counted unit: beyond it a step's time "
                        "leaves the float range)",
                        "use a per-unit cost of a few to a few hundred cycles, as the shipped cost files do",
                    )
                )

    def coef(self, name: str) -> float:
        try:
            return float(self.coefficients[name])
        except KeyError:
            raise ConfigError(
                config_message(
                    "cost coefficient",
                    name,
                    "is not in the cost model",
                    f"known: {', '.join(sorted(self.coefficients))}",
                )
            ) from None

    def worker_cycles(self, counters: Mapping[str, np.ndarray]) -> np.ndarray:
        """Σ coefficient · counter over the counters given (all arrays of one shape)."""
        total = None
        for name, arr in counters.items():
            term = self.coef(name) * np.asarray(arr, np.float64)
            total = term if total is None else total + term
        if total is None:
            raise ConfigError(config_message("counters", {}, "must name at least one counter"))
        return total

    def to_toml(self) -> str:
        import tomli_w  # tomli_w is needed only when writing TOML

        return tomli_w.dumps(
            {
                "name": self.name,
                "version": self.version,
                "coefficients": dict(self.coefficients),
                "provenance": dict(self.provenance),
            }
        )


def load_costs(path) -> CostModel:
    """Read a cost-model TOML file (``name``, ``version``, ``[coefficients]``, ``[provenance]``)."""
    p = Path(path)
    data = read_toml(p, "cost model file")
    for k in data:
        if k not in {"name", "version", "coefficients", "provenance"}:
            raise ConfigError(
                config_message(
                    f"{path}: {k}", data[k], "unknown key", "allowed: name, version, coefficients, provenance"
                )
            )
    if not isinstance(data.get("coefficients"), dict):
        raise ConfigError(config_message(f"{path}: [coefficients]", None, "missing table"))
    return CostModel(
        name=str(data.get("name", p.stem)),
        version=str(data.get("version", "0")),
        coefficients=data["coefficients"],
        provenance=data.get("provenance", {}),
    )
