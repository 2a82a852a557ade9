"""Per-tile work and traffic on its way to a fabric: :class:`TileRows` (a program's supersteps per
tile, shaped per chip), :class:`ChipPeaks` (each chip's slowest tile and busiest ports, all a
fabric without a distance term needs), the explicit :class:`Transfers` a routing fabric reads, and
the two small protocols between programs and fabrics. Nothing here turns work into time: a
fabric does (:meth:`tilesim.machine.fabric.OnChipFabric.reduce`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from tilesim.outputs.records import ChipWork

__all__ = ["Transfers", "ChipPeaks", "TileRows", "ChipReducer", "ChipRowSource"]


@dataclass(frozen=True, eq=False, slots=True)
class Transfers:
    """Explicit on-chip transfers of one exchange row: per transfer its chip, source and
    destination tile (indices on the chip), bytes and multicast group (all arrays of one length;
    transfers with one group id >= 0 are one message to several tiles; -1 or None: point to point)."""

    chip: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    group: np.ndarray | None = None


@dataclass(frozen=True, eq=False, slots=True)
class ChipPeaks:
    """Per-tile work reduced to what a fabric without a distance term needs of each chip: per
    superstep and chip the slowest tile's compute, per exchange row and chip the busiest port's
    bytes in and out, each with the tile (index on the chip) it comes from. A
    :class:`CompactProgram` keeps only these; :meth:`tilesim.machine.fabric.OnChipFabric.reduce_peaks`
    turns them into time.

    ``compute``, ``compute_tile`` [S, C]; ``exchange_row`` [S] (-1: no exchange phase);
    ``bytes_in``, ``in_tile``, ``bytes_out``, ``out_tile`` [E, C]; ``row_bytes`` [E] all bytes
    sent over the chips' fabrics in that exchange row. On a fabric with distance
    (:meth:`tilesim.machine.fabric.OnChipFabric.link_peaks`) also ``link_bytes`` [E, C], the busiest
    link's bytes, and ``hops`` [E, C], the longest route (−1: unknown), taken from the per-tile
    totals before they were reduced, each row by its own rule (a broadcast row as multicast trees
    where the fabric multicasts) (None: not known, the fabric assumes uniform traffic)."""

    compute: np.ndarray
    compute_tile: np.ndarray
    exchange_row: np.ndarray
    bytes_in: np.ndarray
    in_tile: np.ndarray
    bytes_out: np.ndarray
    out_tile: np.ndarray
    row_bytes: np.ndarray
    link_bytes: np.ndarray | None = None
    hops: np.ndarray | None = None

    @classmethod
    def of_chips(cls, compute: np.ndarray, bytes_in: np.ndarray, bytes_out: np.ndarray) -> ChipPeaks:
        """Peaks given directly as ``[S, C]`` maxima (every superstep its own exchange row; the
        tiles they come from unknown, so 0)."""
        S, C = compute.shape
        zero = np.zeros((S, C), np.int64)
        return cls(
            np.asarray(compute, np.float64), zero, np.arange(S, dtype=np.int32),
            np.asarray(bytes_in, np.float64), zero, np.asarray(bytes_out, np.float64), zero, np.zeros(S),
        )  # fmt: skip


@dataclass(frozen=True, eq=False, slots=True)
class TileRows:
    """Per-tile work and traffic of ``S`` supersteps on ``C`` chips of ``T`` tiles: what a fabric
    reduces to chips (:meth:`tilesim.machine.fabric.OnChipFabric.reduce`).

    ``compute`` [S, C, T] cycles; ``bytes_in`` / ``bytes_out`` [E, C, T] bytes of the ``E``
    exchange rows; ``exchange_row`` [S] the row a superstep exchanges with (-1: no exchange
    phase); ``transfers`` {exchange row: :class:`Transfers`} where the workload knows who talks to
    whom (empty: per-tile totals only); ``broadcast`` [E] the rows whose receivers all take the same
    data from the senders (a fabric that multicasts sends each sender's bytes once down a tree)."""

    compute: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    exchange_row: np.ndarray
    transfers: dict
    broadcast: np.ndarray | None = None  # bool [E]: the row's receivers all take the same data (None: no row)

    @classmethod
    def every_row_exchanges(
        cls, compute: np.ndarray, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast=None
    ) -> TileRows:
        """Rows whose every superstep has its own exchange row (a row without traffic exchanges
        nothing: a fabric books 0 cycles for it)."""
        return cls(compute, bytes_in, bytes_out, np.arange(compute.shape[0], dtype=np.int32), {}, broadcast)

    def peaks(self) -> ChipPeaks:
        """Each chip's slowest tile and busiest ports (:class:`ChipPeaks`)."""
        crit = self.compute.argmax(axis=2)
        comp = np.take_along_axis(self.compute, crit[..., None], 2)[..., 0].astype(np.float64)
        tin = self.bytes_in.argmax(axis=2)
        tout = self.bytes_out.argmax(axis=2)
        E, C, T = self.bytes_out.shape
        return ChipPeaks(
            comp,
            crit,
            np.asarray(self.exchange_row),
            np.take_along_axis(self.bytes_in, tin[..., None], 2)[..., 0].astype(np.float64),
            tin,
            np.take_along_axis(self.bytes_out, tout[..., None], 2)[..., 0].astype(np.float64),
            tout,
            self.bytes_out.reshape(E, C * T).sum(axis=1).astype(np.float64),
        )


class ChipReducer(Protocol):
    """What a program needs of a fabric (:class:`tilesim.machine.fabric.OnChipFabric`) to be reduced to chips."""

    def reduce(self, rows: TileRows) -> ChipWork:
        """Tile rows to per-chip work."""
        ...

    def reduce_peaks(self, peaks: ChipPeaks, transfers: dict | None = None) -> ChipWork:
        """Chip peaks to per-chip work."""
        ...


class ChipRowSource(Protocol):
    """Where a :class:`CompactProgram`'s per-tile rows come from when a person looks at tiles: the
    workload that built it, rebuilding one chip's rows on demand."""

    def chip_rows(self, chip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(compute, bytes in, bytes out) ``[S, tiles of a chip]`` float32 of ``chip``."""
        ...
