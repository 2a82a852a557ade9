"""The collective library's own constants (the links' are the machine's).

One collective is one or two passes (:func:`tilesim.models.collective.algorithms.phases`); a pass costs::

    T_pass = launch_cycles / f + drain(paths over links) + H · link_latency_s · (1 + r · reducing)

with ``drain`` the fluid rule of :mod:`tilesim.machine.fluid` over the machine's chip links (a link of
``links_per_neighbour · link_bytes_per_s · link_efficiency``; paths that share a link share it),
``H`` the hops of the pass's longest path, and ``r = reduce_latency_hops`` the extra latency of a
hop that reduces (reduce_scatter), ``f`` the chip clock. ``launch_cycles`` is fitted on measured
Wormhole all_reduce runs and counted in clock cycles, so a chip with a faster clock running the same
firmware starts a pass sooner (the assumption Blackhole's predictions rest on); ``r`` is a named
assumption (costs.toml gives its band).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.io import loads_toml, read_toml

__all__ = ["CollectiveCosts", "load_costs"]


@dataclass(frozen=True)
class CollectiveCosts:
    """``launch_cycles``: chip-clock cycles one pass costs before its data moves;
    ``reduce_latency_hops``: extra link latencies per reducing hop."""

    launch_cycles: float
    reduce_latency_hops: float

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(
                    config_message(f"collective costs {f.name}", v, "must be a number >= 0", "see costs.toml")
                )


def load_costs(path: str | Path | None = None) -> CollectiveCosts:
    """The shipped constants (``models/collective/costs.toml``) or a user's file of the same keys.

    Raises :class:`ConfigError` on an unknown or missing key, naming the known ones."""
    data = (
        loads_toml((resources.files("tilesim.models.collective") / "costs.toml").read_text())
        if path is None
        else read_toml(Path(path), "collective costs")
    )
    known = [f.name for f in fields(CollectiveCosts)]
    for k in data:
        if k not in known:
            raise ConfigError(
                config_message(f"collective costs {k}", data[k], "unknown key", f"known: {', '.join(known)}")
            )
    missing = [k for k in known if k not in data]
    if missing:
        raise ConfigError(config_message("collective costs", missing[0], "missing", f"give {', '.join(known)}"))
    return CollectiveCosts(**{k: data[k] for k in known})
