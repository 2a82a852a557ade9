"""The BSP program IR: supersteps of per-tile compute cycles, exchange bytes, link flows and syncs.

A superstep on a tile machine is: every tile computes (``compute_cycles[s, tile]``), the tiles
synchronise (within a chip, within a group of chips, or across all chips), then data moves:
on-chip exchange (``bytes_in``/``bytes_out`` per tile), cross-chip flows (bytes per chip pair,
over the system's links) and host transfers. The IR is columnar so that a workload can emit
thousands of supersteps cheaply: per-tile quantities are rows of 2-D numpy arrays indexed by
the global tile id ``chip * tiles_per_chip + tile``; flows and transfers are COO arrays.

Sync scope codes (``sync_scope[s]``): ``-1`` each chip syncs alone, ``0`` all chips together,
``k >= 1`` the chip partition ``partitions[k - 1]`` (an array of group ids, one per chip; chips
with equal ids sync together, e.g. pipeline stages). Cross-chip flows need their two chips in
the same sync group of that superstep (on the IPU a global exchange follows a global sync).

The program's parts: :mod:`~tilesim.program.validation` (sync codes, columns, checks both forms share),
the two forms :mod:`~tilesim.program.dense` (:class:`Program`) and :mod:`~tilesim.program.compact`
(:class:`CompactProgram`), and :mod:`~tilesim.program.builder` (:class:`ProgramBuilder`).
"""

from tilesim.program.builder import ProgramBuilder, concat_programs
from tilesim.program.compact import CompactProgram
from tilesim.program.dense import Program
from tilesim.program.rows import ChipPeaks, ChipReducer, ChipRowSource, TileRows, Transfers
from tilesim.program.validation import SYNC_ALL, SYNC_CHIP, flow_columns

__all__ = [
    "Program",
    "CompactProgram",
    "ProgramBuilder",
    "SYNC_CHIP",
    "SYNC_ALL",
    "flow_columns",
    "concat_programs",
    "ChipPeaks",
    "ChipReducer",
    "ChipRowSource",
    "TileRows",
    "Transfers",
]
