"""The NoC's constants (:class:`NocCosts`) and their file (``models/noc/costs.toml``).

What each constant means in the kernel time is in :mod:`tilesim.models.noc.model`; its source and
evidence tag are in costs.toml and tilesim/presets/EVIDENCE.md §4.2a.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.io import loads_toml, read_toml

__all__ = ["NocCosts", "load_costs", "FITTED", "INTEGER"]

INTEGER = ("max_packet_bytes", "noc_cols", "noc_rows")
"""The whole-number constants (hardware sizes, never fitted)."""

POSITIVE = ("write_bytes_per_cycle", "read_bytes_per_cycle")
"""The constants that divide (> 0)."""

FITTED = (
    "issue_cycles",
    "read_issue_cycles",
    "write_bytes_per_cycle",
    "read_bytes_per_cycle",
    "latency_cycles",
    "hop_cycles",
    "mcast_path_cycles",
    "mcast_dest_cycles",
    "mcast_exclude_src_cycles",
)
"""The constants ``tilesim calibrate`` fits (tag [F] in costs.toml), in the fit's order."""


@dataclass(frozen=True)
class NocCosts:
    """One chip's NoC, in cycles of the chip clock (see :mod:`tilesim.models.noc.model` for the
    equations). ``max_packet_bytes``: a transaction leaves the sender's NIU in packets of at most this
    size; ``noc_cols`` x ``noc_rows``: the NoC's torus (every NoC node, not only Tensix cores);
    ``issue_cycles`` / ``read_issue_cycles``: the data mover's cost to issue one write / read;
    ``write_bytes_per_cycle`` / ``read_bytes_per_cycle``: one sender's injection (one reader's
    response) rate; ``packet_cycles``: per packet (header flit); ``latency_cycles`` + ``hop_cycles`` per
    round-trip hop: the completion of the last transaction (its write response and the barrier);
    ``mcast_path_cycles`` + ``mcast_dest_cycles`` per destination (+ ``mcast_exclude_src_cycles`` when
    the sender is not a receiver): per packet of a non-linked multicast."""

    max_packet_bytes: int
    noc_cols: int
    noc_rows: int
    issue_cycles: float
    read_issue_cycles: float
    write_bytes_per_cycle: float
    read_bytes_per_cycle: float
    packet_cycles: float
    latency_cycles: float
    hop_cycles: float
    mcast_path_cycles: float
    mcast_dest_cycles: float
    mcast_exclude_src_cycles: float

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(config_message(f"noc costs {f.name}", v, "must be a number >= 0", "see costs.toml"))
            if f.name in INTEGER and (float(v) != int(v) or v < 1):
                raise ConfigError(
                    config_message(f"noc costs {f.name}", v, "must be a whole number >= 1", "see costs.toml")
                )
            if f.name in POSITIVE and v <= 0:
                raise ConfigError(config_message(f"noc costs {f.name}", v, "must be > 0", "see costs.toml"))


def load_costs(path: str | Path | None = None) -> NocCosts:
    """The shipped Wormhole constants (``models/noc/costs.toml``) or a user's file of the same keys
    (e.g. the one ``tilesim calibrate`` writes: its ``[noc]`` table, or the keys at the top level).

    Raises :class:`ConfigError` on an unknown or missing key, naming the known ones."""
    data = (
        loads_toml((resources.files("tilesim.models.noc") / "costs.toml").read_text())
        if path is None
        else read_toml(Path(path), "noc costs")
    )
    if set(data) == {"noc"} and isinstance(data["noc"], dict):
        data = data["noc"]
    known = [f.name for f in fields(NocCosts)]
    for k in data:
        if k not in known:
            raise ConfigError(config_message(f"noc costs {k}", data[k], "unknown key", f"known: {', '.join(known)}"))
    missing = [k for k in known if k not in data]
    if missing:
        raise ConfigError(config_message("noc costs", missing[0], "missing", f"give {', '.join(known)}"))
    return NocCosts(**{k: data[k] for k in known})
