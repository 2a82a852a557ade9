"""The forms a workload's program takes, chosen by the core, and the compact form built chip by chip.

A workload writes its step's rows — compute cycles, bytes in and bytes out per tile and superstep —
and says what its caller needs; the core decides what is kept (:func:`program_form`):

* ``dense``: ``[S, all tiles]`` arrays (:class:`tilesim.program.Program`): per-tile detail of every
  superstep, what a decomposition of the step into its terms needs (a calibration);
* ``compact``: each chip's rows built one at a time and kept as its peaks, its per-tile sums per label
  and its sent bytes (:class:`tilesim.program.CompactProgram`, :func:`compact_program`): a run at any
  scale, the same times, breakdowns and critical tiles as the dense form;
* ``peaks``: the peaks alone (a search's objective). Only where the machine's fabric times an
  exchange from each chip's peaks: a fabric with a grid (a mesh or torus) loads its links from each
  exchange row's per-tile totals, so there the program is ``compact``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from tilesim.errors import require
from tilesim.program.compact import CompactProgram
from tilesim.program.rows import ChipPeaks, TileRows
from tilesim.program.validation import flow_columns

__all__ = ["FORMS", "program_form", "ChipRows", "compact_program", "label_sums_of_rows", "one_chip_rows"]

FORMS = ("dense", "compact", "peaks")
"""The program forms (module docstring)."""


def program_form(machine, want: str) -> str:
    """The form a program for ``machine`` takes when its caller wants ``want`` (one of :data:`FORMS`):
    ``want``, except ``peaks`` on a fabric with a grid, which needs per-tile totals (``compact``).

    Raises :class:`tilesim.errors.ConfigError` for an unknown form."""
    from tilesim.machine.fabric import make_fabric  # the fabric imports the program's rows: not at import

    require(want in FORMS, "form", want, f"must be one of {FORMS}", 'e.g. form="compact"')
    if want == "peaks" and make_fabric(machine).grid is not None:
        return "compact"
    return want


class ChipRows(Protocol):
    """A workload's rows, one chip at a time (what :func:`compact_program` reduces): a
    :class:`tilesim.program.ChipRowSource` that also says which supersteps a chip's rows touch."""

    def chip_rows(self, chip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(compute, bytes in, bytes out) ``[S, tiles of a chip]`` float32 of ``chip``."""
        ...

    def touched_rows(self, chip: int) -> np.ndarray:
        """Sorted supersteps in which ``chip``'s rows may be non-zero (every other row is zero)."""
        ...


def one_chip_rows(compute: np.ndarray, bytes_in: np.ndarray, bytes_out: np.ndarray) -> TileRows:
    """One chip's ``[n, tiles]`` row arrays as :class:`TileRows` (every row may exchange)."""
    n, tiles = compute.shape
    return TileRows.every_row_exchanges(
        compute.reshape(n, 1, tiles), bytes_in.reshape(n, 1, tiles), bytes_out.reshape(n, 1, tiles)
    )


def label_sums_of_rows(
    compute: np.ndarray, rows: np.ndarray, label_id: np.ndarray, run_id: np.ndarray, n_labels: int
) -> np.ndarray:
    """:func:`tilesim.outputs.records.label_sums` of a ``[S, tiles]`` array whose rows outside ``rows``
    are zero, from ``compute`` = its ``rows`` only: each run (``run_id``) summed over its kept rows, the
    runs added in order (a zero row adds nothing, so the sums are the same bit for bit)."""
    out = np.zeros((n_labels, compute.shape[1]))
    if not rows.size:
        return out
    r = run_id[rows]
    cut = np.flatnonzero(np.diff(r) != 0) + 1
    starts = np.concatenate([[0], cut]).tolist()
    ends = np.concatenate([cut, [rows.size]]).tolist()
    for a, b in zip(starts, ends):
        out[int(label_id[rows[a]])] += compute[a:b].sum(axis=0, dtype=np.float64)
    return out


def compact_program(
    source: ChipRows,
    machine,
    *,
    name: str,
    labels: tuple,
    label_id,
    sync_scope,
    flows=None,
    host=None,
    sync_extra=None,
    exchange_extra=None,
    broadcast=None,
) -> CompactProgram:
    """The :class:`CompactProgram` of ``source``'s rows on ``machine``: each chip's rows built once,
    reduced to its peaks, its sent bytes, its per-tile compute per label and (on a fabric with a grid)
    its link peaks, then dropped; ``source`` stays as the program's :attr:`CompactProgram.rows`, to
    rebuild a chip's rows where a person looks at tiles. ``labels``, ``label_id``, ``sync_scope``,
    ``flows``, ``host``, the extras and ``broadcast`` (bool [S]: every superstep is its own exchange
    row) as for :meth:`tilesim.program.Program.from_arrays`."""
    from tilesim.machine.fabric import make_fabric  # the fabric imports the program's rows: not at import

    C, TPC, S = machine.chips, machine.tiles_per_chip, len(label_id)
    comp, crit = np.zeros((S, C)), np.zeros((S, C), np.int64)
    pin, tin, pout, tout = np.zeros((S, C)), np.zeros((S, C), np.int64), np.zeros((S, C)), np.zeros((S, C), np.int64)
    onchip = np.zeros((S, C))
    fabric = make_fabric(machine)
    link, hops = np.zeros((S, C)), np.full((S, C), -1.0)  # a fabric with distance: from the per-tile totals
    label_tiles = np.zeros((len(labels), C * TPC))
    label_id = np.asarray(label_id)
    bcast = np.zeros(S, bool) if broadcast is None else np.asarray(broadcast, bool)
    run_id = np.concatenate([[0], np.cumsum(np.diff(label_id) != 0)])  # runs of one label, as label_sums cuts
    for c in range(C):
        # a row a chip has no call in is all zeros on that chip: its peaks are 0 on tile 0 (issue 15)
        rows = source.touched_rows(c)
        sub = [a[rows] for a in source.chip_rows(c)]  # zero pages outside ``rows`` are never touched
        # the ports' bytes: a broadcast row sent as copies injects more than its totals (the fabric says)
        sent = fabric.injected_bytes(sub[1], sub[2], bcast[rows])
        pk = one_chip_rows(sub[0], sub[1], sent).peaks()
        comp[rows, c], crit[rows, c] = pk.compute[:, 0], pk.compute_tile[:, 0]
        pin[rows, c], tin[rows, c] = pk.bytes_in[:, 0], pk.in_tile[:, 0]
        pout[rows, c], tout[rows, c] = pk.bytes_out[:, 0], pk.out_tile[:, 0]
        onchip[rows, c] = sub[2].sum(axis=1, dtype=np.float64)
        if fabric.grid is not None:
            link[rows, c], hops[rows, c] = fabric.link_peaks(sub[1], sub[2], bcast[rows])
        label_tiles[:, c * TPC : (c + 1) * TPC] = label_sums_of_rows(sub[0], rows, label_id, run_id, len(labels))
    grid = fabric.grid is not None
    return CompactProgram(
        name=name,
        chips=C,
        tiles_per_chip=TPC,
        labels=tuple(labels),
        label_id=np.asarray(label_id, np.int32),
        sync_scope=np.asarray(sync_scope, np.int32),
        partitions=(),
        peaks=ChipPeaks(
            comp,
            crit,
            np.arange(S, dtype=np.int32),
            pin,
            tin,
            pout,
            tout,
            onchip.sum(axis=1),
            link_bytes=link if grid else None,
            hops=hops if grid else None,
        ),  # fmt: skip
        label_tile_cycles=label_tiles,
        onchip_bytes=onchip,
        **flow_columns(flows, host),
        sync_extra_cycles=np.asarray(sync_extra if sync_extra is not None else np.zeros(S), np.float64),
        exchange_extra_cycles=np.asarray(exchange_extra if exchange_extra is not None else np.zeros(S), np.float64),
        rows=source,
        exchange_broadcast=bcast,
    )
