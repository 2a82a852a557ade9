"""What both program forms share: the sync scope codes, the flow and host columns, the shape
checks of :class:`_ProgramShape` and the row and transfer validators (:mod:`tilesim.program`)."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from tilesim.errors import ConfigError, config_message, require

SYNC_CHIP = -1
SYNC_ALL = 0


def flow_columns(flows=None, host=None) -> dict:
    """The link-flow and host-transfer columns of a program, typed as the program stores them:
    ``flows`` = (step, src chip, dst chip, bytes) arrays, ``host`` = (step, chip, bytes) arrays;
    None is no flows / no host transfers."""
    z32, z64 = np.zeros(0, np.int32), np.zeros(0, np.float64)
    f = flows if flows is not None else (z32, z32, z32, z64)
    h = host if host is not None else (z32, z32, z64)
    return {
        "flow_step": np.asarray(f[0], np.int32),
        "flow_src": np.asarray(f[1], np.int32),
        "flow_dst": np.asarray(f[2], np.int32),
        "flow_bytes": np.asarray(f[3], np.float64),
        "host_step": np.asarray(h[0], np.int32),
        "host_chip": np.asarray(h[1], np.int32),
        "host_bytes": np.asarray(h[2], np.float64),
    }


class _ProgramShape:
    """What both program forms answer from their label ids: supersteps, tiles, a superstep's label;
    ``form`` says which form a program is (:mod:`tilesim.program.forms`)."""

    form: ClassVar[str] = "dense"
    chips: int
    tiles_per_chip: int
    labels: tuple
    label_id: np.ndarray

    @property
    def supersteps(self) -> int:
        return int(self.label_id.shape[0])

    @property
    def total_tiles(self) -> int:
        return self.chips * self.tiles_per_chip

    def label_of(self, s: int) -> str:
        return self.labels[int(self.label_id[s])]


def sorted_unique(a) -> np.ndarray:
    """``np.unique`` of an integer array by a sort (numpy 2's default hash takes seconds on a million
    distinct tile ids; a sort takes milliseconds)."""
    s = np.sort(np.asarray(a).ravel())
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size else s


def _check_transfer(t, N: int, where: str) -> None:
    """Raise :class:`ConfigError` unless on-chip transfer ``t`` is ``(src_tile, dst_tile, bytes)`` with
    tiles in ``0..N-1`` and finite bytes >= 0."""
    require(
        len(t) == 3,
        f"{where}: transfer",
        t,
        "must be (src_tile, dst_tile, bytes)",
        "give transfers as (src_tile, dst_tile, bytes)",
    )
    src, dst, nb = t
    for nm, v in (("src_tile", src), ("dst_tile", dst)):
        require(
            bool(not isinstance(v, bool) and isinstance(v, (int, np.integer)) and 0 <= v < N),
            f"{where}: transfer {nm}",
            v,
            f"must be in 0..{N - 1}",
            "use a tile of the machine",
        )
    require(
        bool(isinstance(nb, (int, float, np.number)) and math.isfinite(nb) and nb >= 0),
        f"{where}: transfer bytes",
        nb,
        "must be finite and >= 0",
        "give finite byte counts >= 0",
    )


def _as_row(value, n: int, what: str, step: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    require(
        arr.shape == (n,),
        f"{step}: {what}",
        f"array of shape {arr.shape}",
        f"must be a scalar or have length {n} (one per tile of the system)",
        "give one number for every tile, or a single number for all",
    )
    if not np.all(np.isfinite(arr)) or (arr < 0).any():
        bad = arr[~np.isfinite(arr) | (arr < 0)][0]
        raise ConfigError(
            config_message(f"{step}: {what}", float(bad), "must be finite and >= 0", "give finite numbers >= 0")
        )
    return arr
