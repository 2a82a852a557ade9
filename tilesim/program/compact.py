"""The compact program form: :class:`CompactProgram`, a program kept reduced to each chip's peaks
(:mod:`tilesim.program`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from tilesim.program.rows import ChipPeaks, ChipReducer, ChipRowSource
from tilesim.program.validation import _ProgramShape

if TYPE_CHECKING:
    from tilesim.outputs.records import ChipWork


@dataclass(frozen=True, eq=False)
class CompactProgram(_ProgramShape):
    """A program too big for ``[S, all tiles]`` arrays, kept reduced to what a fabric without a
    distance term needs (:class:`ChipPeaks`: per superstep and chip the slowest tile and the
    busiest ports), per tile and label the compute summed over the program (the heat maps), the
    bytes each chip sends per superstep, and ``rows`` (a :class:`ChipRowSource`) that rebuilds a
    chip's ``[S, tiles]`` rows for the tiles a person looks at. Everything else (labels, syncs,
    flows, host transfers, extras) as in :class:`Program`. Built chip by chip from the same rows
    as the dense form (a workload's compact build),
    so :func:`tilesim.engine.events.simulate` gives the same result on any fabric that needs no routes."""

    name: str
    chips: int
    tiles_per_chip: int
    labels: tuple
    label_id: np.ndarray  # int32 [S]
    sync_scope: np.ndarray  # int32 [S]
    partitions: tuple
    peaks: ChipPeaks  # [S, chips] / [E, chips] arrays
    label_tile_cycles: np.ndarray | None  # float64 [labels, chips*tiles]; None: peaks only (no tile detail)
    onchip_bytes: np.ndarray | None  # float64 [S, chips] bytes sent on each chip's exchange fabric
    flow_step: np.ndarray
    flow_src: np.ndarray
    flow_dst: np.ndarray
    flow_bytes: np.ndarray
    host_step: np.ndarray
    host_chip: np.ndarray
    host_bytes: np.ndarray
    sync_extra_cycles: np.ndarray
    exchange_extra_cycles: np.ndarray
    rows: ChipRowSource | None = None
    exchange_broadcast: np.ndarray | None = None  # bool [S]: broadcast rows (link peaks already by their rule)

    form: ClassVar[str] = "compact"
    transfer_step = transfer_src = transfer_dst = np.zeros(0, np.int32)  # no explicit transfers
    transfer_bytes = np.zeros(0)

    def nbytes(self) -> int:
        """Bytes held (the chip peaks and per-tile sums; rows rebuilt on demand not counted)."""
        pk = self.peaks
        return sum(
            getattr(self, f).nbytes for f in self.__dataclass_fields__ if isinstance(getattr(self, f), np.ndarray)
        ) + sum(getattr(pk, f).nbytes for f in pk.__slots__)

    def reduce_on(self, fabric: ChipReducer) -> ChipWork:
        """The program reduced to chips by ``fabric``, from its chip peaks."""
        return fabric.reduce_peaks(self.peaks)

    def summary(self) -> dict:
        pk = self.peaks
        busy = np.asarray(((pk.bytes_in > 0) | (pk.bytes_out > 0)).any(axis=1))
        erow = pk.exchange_row
        return {
            "name": self.name,
            "chips": self.chips,
            "tiles_per_chip": self.tiles_per_chip,
            "supersteps": self.supersteps,
            "exchange_supersteps": int(((erow >= 0) & busy[np.maximum(erow, 0)]).sum()) if busy.size else 0,
            "flows": int(self.flow_step.shape[0]),
            "host_transfers": int(self.host_step.shape[0]),
            "labels": list(self.labels),
            "compact": True,
        }

    def work_cycles(self) -> np.ndarray:
        """float64 [chips*tiles]: compute cycles per tile over the program."""
        if self.label_tile_cycles is None:
            raise TypeError(f"compact program {self.name!r} keeps peaks only: it has no per-tile sums")
        return self.label_tile_cycles.sum(axis=0)

    def chip_exchange(self, chip: int) -> tuple[np.ndarray, np.ndarray, list, np.ndarray | None]:
        """One chip's on-chip exchange (as :meth:`Program.chip_exchange`; every superstep its own
        row, no explicit transfers), its rows rebuilt."""
        if self.rows is None:
            raise TypeError(f"compact program {self.name!r} was built without its rows: its tile rows are gone")
        _, b_in, b_out = self.rows.chip_rows(chip)
        return b_in, b_out, [], self.exchange_broadcast

    def tile_compute(self, tiles) -> np.ndarray:
        """float64 [S, len(tiles)]: the compute cycles of global ``tiles`` per superstep (each
        chip's rows rebuilt once)."""
        tiles = [int(t) for t in tiles]
        if self.rows is None:
            raise TypeError(f"compact program {self.name!r} was built without its rows: its tile rows are gone")
        out = np.zeros((self.supersteps, len(tiles)))
        T = self.tiles_per_chip
        for c in sorted({t // T for t in tiles}):
            comp = self.rows.chip_rows(c)[0]
            for j, t in enumerate(tiles):
                if t // T == c:
                    out[:, j] = comp[:, t % T]
        return out
