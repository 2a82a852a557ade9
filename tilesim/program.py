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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.rows import ChipPeaks, ChipReducer, ChipRowSource, TileRows, Transfers

if TYPE_CHECKING:
    from tilesim.records import ChipWork

__all__ = [
    "Program",
    "CompactProgram",
    "ProgramBuilder",
    "SYNC_CHIP",
    "SYNC_ALL",
    "flow_columns",
]

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
    """What both program forms answer from their label ids: supersteps, tiles, a superstep's label."""

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


@dataclass(frozen=True, eq=False)
class Program(_ProgramShape):
    """A validated, columnar BSP program. Build one with :class:`ProgramBuilder`."""

    name: str
    chips: int
    tiles_per_chip: int
    labels: tuple
    label_id: np.ndarray  # int32 [S]
    sync_scope: np.ndarray  # int32 [S]
    partitions: tuple  # of int32 [chips] arrays
    compute_cycles: np.ndarray  # float32 [S, chips*tiles]
    exchange_row: np.ndarray  # int32 [S]; -1 = no on-chip exchange, else row of bytes_in/out
    bytes_in: np.ndarray  # float32 [E, chips*tiles]
    bytes_out: np.ndarray  # float32 [E, chips*tiles]
    flow_step: np.ndarray  # int32 [F]
    flow_src: np.ndarray  # int32 [F] chip
    flow_dst: np.ndarray  # int32 [F] chip
    flow_bytes: np.ndarray  # float64 [F]
    host_step: np.ndarray  # int32 [H]
    host_chip: np.ndarray  # int32 [H]
    host_bytes: np.ndarray  # float64 [H]
    transfer_step: np.ndarray  # int32 [X] explicit on-chip point-to-point transfers (mesh routing)
    transfer_src: np.ndarray  # int32 [X] global tile
    transfer_dst: np.ndarray  # int32 [X] global tile
    transfer_bytes: np.ndarray  # float64 [X]
    # fixed cycles a superstep stands for beyond its own sync and exchange (e.g. several library
    # calls folded into one row: their syncs and exchange set-ups), booked as sync / exchange
    sync_extra_cycles: np.ndarray | None = None  # float64 [S]
    exchange_extra_cycles: np.ndarray | None = None  # float64 [S]
    # transfers with the same group id >= 0 are one multicast (one source, its bytes sent once over
    # each link of the tree to all their destinations); -1: a point-to-point transfer
    transfer_group: np.ndarray | None = None  # int32 [X]

    def __post_init__(self):
        S = self.supersteps
        for name in ("sync_extra_cycles", "exchange_extra_cycles"):
            v = getattr(self, name)
            object.__setattr__(self, name, np.zeros(S) if v is None else np.asarray(v, np.float64))
        X = self.transfer_step.shape[0]
        g = self.transfer_group
        object.__setattr__(self, "transfer_group", np.full(X, -1, np.int32) if g is None else np.asarray(g, np.int32))
        self.validate()

    def validate(self) -> None:
        """Check shapes, ranges and sync-group consistency; raise :class:`ConfigError`."""
        require(
            self.chips >= 1 and self.tiles_per_chip >= 1,
            "program chips/tiles",
            (self.chips, self.tiles_per_chip),
            "must be >= 1",
            "build the program for a machine with >= 1 chip and tile",
        )
        self._check_shapes()
        self._check_step_fields()
        self._check_finite()
        self._check_flows()
        self._check_host()
        self._check_transfers()

    def _check_shapes(self) -> None:
        """Array shapes: per-superstep rows of per-tile cycles, exchange rows of per-tile bytes, one
        label, sync scope and exchange row per superstep."""
        S, N = self.supersteps, self.total_tiles
        require(
            self.compute_cycles.shape == (S, N),
            "program.compute_cycles",
            self.compute_cycles.shape,
            f"must have shape ({S}, {N})",
            "give one row of per-tile cycles per superstep",
        )
        E = self.bytes_in.shape[0]
        require(
            self.bytes_in.shape == (E, N) and self.bytes_out.shape == (E, N),
            "program.bytes_in/bytes_out",
            (self.bytes_in.shape, self.bytes_out.shape),
            f"must both have shape (E, {N})",
            "give one column per tile of the system",
        )
        for name in ("label_id", "sync_scope", "exchange_row"):
            require(
                getattr(self, name).shape == (S,),
                f"program.{name}",
                getattr(self, name).shape,
                f"must have shape ({S},)",
                "give one value per superstep",
            )

    def _check_step_fields(self) -> None:
        """Per-superstep indices (exchange row, label, sync scope) in range, one group id per chip in
        every partition, one extra-cycle value per superstep."""
        S, E = self.supersteps, self.bytes_in.shape[0]
        if S and ((self.exchange_row < -1).any() or (self.exchange_row >= E).any()):
            raise ConfigError(
                config_message(
                    "program.exchange_row",
                    int(self.exchange_row.max()),
                    f"must be -1 or a row index below {E}",
                    "use -1 for no exchange or an existing row",
                )
            )
        if S and ((self.label_id < 0).any() or (self.label_id >= len(self.labels)).any()):
            raise ConfigError(
                config_message(
                    "program.label_id",
                    int(self.label_id.max()),
                    f"must index the {len(self.labels)} labels",
                    "use an index into labels",
                )
            )
        if S and ((self.sync_scope < -1).any() or (self.sync_scope > len(self.partitions)).any()):
            raise ConfigError(
                config_message(
                    "program.sync_scope",
                    int(self.sync_scope.max()),
                    f"must be -1, 0 or 1..{len(self.partitions)}",
                    "use -1 (chip), 0 (all) or a partition number",
                )
            )
        for k, part in enumerate(self.partitions):
            require(
                part.shape == (self.chips,),
                f"program.partitions[{k}]",
                part.shape,
                f"must have one group id per chip ({self.chips})",
                "give one group id per chip",
            )
        for name in ("sync_extra_cycles", "exchange_extra_cycles"):
            require(
                getattr(self, name).shape == (S,),
                f"program.{name}",
                getattr(self, name).shape,
                f"must have shape ({S},)",
                "give one value per superstep",
            )

    def _check_finite(self) -> None:
        """Cycles, bytes and extra cycles finite and >= 0."""
        sync_extra, exchange_extra = self.sync_extra_cycles, self.exchange_extra_cycles
        assert sync_extra is not None and exchange_extra is not None  # __post_init__ replaced None by zeros
        for arr, name in (
            (self.compute_cycles, "compute_cycles"),
            (self.bytes_in, "bytes_in"),
            (self.bytes_out, "bytes_out"),
            (sync_extra, "sync_extra_cycles"),
            (exchange_extra, "exchange_extra_cycles"),
        ):
            require(
                not arr.size or (arr.min() >= 0 and np.isfinite(arr.max())),
                f"program.{name}",
                "a negative or non-finite entry",
                "every entry must be finite and >= 0",
                "give finite numbers >= 0",
            )

    def _check_flows(self) -> None:
        """Cross-chip flows: an existing superstep, two distinct chips of the machine in one sync group,
        and finite bytes >= 0 each."""
        S = self.supersteps
        F = self.flow_step.shape[0]
        for name in ("flow_src", "flow_dst", "flow_bytes"):
            require(
                getattr(self, name).shape == (F,),
                f"program.{name}",
                getattr(self, name).shape,
                f"must have shape ({F},) like flow_step",
                "give one value per flow",
            )
        if F:
            if (self.flow_step < 0).any() or (self.flow_step >= S).any():
                raise ConfigError(
                    config_message(
                        "flow superstep",
                        int(self.flow_step.max()),
                        f"must be in 0..{S - 1}",
                        "use the index of an existing superstep",
                    )
                )
            for name in ("flow_src", "flow_dst"):
                a = getattr(self, name)
                if (a < 0).any() or (a >= self.chips).any():
                    bad = int(a[(a < 0) | (a >= self.chips)][0])
                    raise ConfigError(
                        config_message(
                            f"flow {name[5:]} chip",
                            bad,
                            f"must be in 0..{self.chips - 1}",
                            "use a machine with more chips (--chips)",
                        )
                    )
            same = self.flow_src == self.flow_dst
            if same.any():
                i = int(np.argmax(same))
                raise ConfigError(
                    config_message(
                        "flow",
                        f"{self.flow_src[i]}->{self.flow_dst[i]}",
                        "source and destination chip must differ",
                        "use on-chip exchange bytes for traffic inside a chip",
                    )
                )
            require(
                bool(np.isfinite(self.flow_bytes).all() and (self.flow_bytes >= 0).all()),
                "flow bytes",
                "a negative or non-finite value",
                "must be finite and >= 0",
                "give finite byte counts >= 0",
            )
            scope = self.sync_scope[self.flow_step]
            for fi in np.flatnonzero(scope != SYNC_ALL):
                s, a, b = int(self.flow_step[fi]), int(self.flow_src[fi]), int(self.flow_dst[fi])
                sc = int(scope[fi])
                if sc == SYNC_CHIP or self.partitions[sc - 1][a] != self.partitions[sc - 1][b]:
                    raise ConfigError(
                        config_message(
                            f"superstep {s} ({self.label_of(s)}): flow {a}->{b}",
                            "crosses sync groups",
                            "a cross-chip flow needs both chips in one sync group",
                            "sync 'all' or put both chips in the same group",
                        )
                    )

    def _check_host(self) -> None:
        """Host transfers: an existing superstep and chip, finite bytes >= 0."""
        S = self.supersteps
        H = self.host_step.shape[0]
        if H:
            if (self.host_step < 0).any() or (self.host_step >= S).any():
                raise ConfigError(
                    config_message(
                        "host superstep",
                        int(self.host_step.max()),
                        f"must be in 0..{S - 1}",
                        "use the index of an existing superstep",
                    )
                )
            if (self.host_chip < 0).any() or (self.host_chip >= self.chips).any():
                raise ConfigError(
                    config_message(
                        "host chip",
                        int(self.host_chip.max()),
                        f"must be in 0..{self.chips - 1}",
                        "use a chip of the machine (or --chips)",
                    )
                )
            require(
                bool(np.isfinite(self.host_bytes).all() and (self.host_bytes >= 0).all()),
                "host bytes",
                "a negative or non-finite value",
                "must be finite and >= 0",
                "give finite byte counts >= 0",
            )

    def _check_transfers(self) -> None:
        """On-chip tile-to-tile transfers: tiles of the machine, source and destination on one chip."""
        N = self.total_tiles
        X = self.transfer_step.shape[0]
        if X:
            for name in ("transfer_src", "transfer_dst"):
                a = getattr(self, name)
                if (a < 0).any() or (a >= N).any():
                    bad = int(a[(a < 0) | (a >= N)][0])
                    raise ConfigError(
                        config_message(
                            f"transfer {name[9:]} tile", bad, f"must be in 0..{N - 1}", "use a tile of the machine"
                        )
                    )
            self._check_groups()
            cross = (self.transfer_src // self.tiles_per_chip) != (self.transfer_dst // self.tiles_per_chip)
            if cross.any():
                i = int(np.argmax(cross))
                raise ConfigError(
                    config_message(
                        "transfer",
                        f"tile {self.transfer_src[i]}->{self.transfer_dst[i]}",
                        "on-chip transfers must stay on one chip",
                        "use a cross-chip flow",
                    )
                )

    def _check_groups(self) -> None:
        """A multicast's transfers (one group id) share their superstep, source and bytes."""
        g = self.transfer_group
        assert g is not None  # filled by __post_init__
        require(g.shape == self.transfer_step.shape, "program.transfer_group", g.shape, "must have one id per transfer",
                "give -1 for a point-to-point transfer")  # fmt: skip
        m = g >= 0
        if not m.any():
            return
        order = np.argsort(g[m], kind="stable")
        gid = g[m][order]
        first = np.r_[True, gid[1:] != gid[:-1]]
        lead = np.maximum.accumulate(np.where(first, np.arange(gid.size), 0))  # each member's group's first
        for col in (self.transfer_step, self.transfer_src, self.transfer_bytes):
            v = col[m][order]
            bad = v != v[lead]
            if bad.any():
                raise ConfigError(
                    config_message(
                        "multicast",
                        int(gid[int(np.argmax(bad))]),
                        "mixes supersteps, sources or byte counts",
                        "one multicast is one source sending one message to several tiles",
                    )  # fmt: skip
                )

    def reduce_on(self, fabric: ChipReducer) -> ChipWork:
        """The program reduced to chips by ``fabric`` (its tile rows and transfers)."""
        return fabric.reduce(self.tile_rows())

    def chip_exchange(self, chip: int) -> tuple[np.ndarray, np.ndarray, list]:
        """One chip's on-chip exchange over the program: ``(bytes_in, bytes_out)`` ``[E, tiles]``
        of the rows a fabric times from per-tile totals (a row with explicit transfers on the chip
        is zero here) and those transfers as ``(src, dst, bytes, group)`` with chip-local tiles."""
        T = self.tiles_per_chip
        cols = slice(chip * T, (chip + 1) * T)
        b_in, b_out = np.array(self.bytes_in[:, cols], np.float64), np.array(self.bytes_out[:, cols], np.float64)
        mine = np.flatnonzero(self.transfer_src // T == chip)
        rows = self.exchange_row[self.transfer_step[mine]]
        b_in[rows[rows >= 0]] = 0.0
        b_out[rows[rows >= 0]] = 0.0
        group = self.transfer_group
        assert group is not None  # filled by __post_init__
        transfers = [
            (int(self.transfer_src[k]) % T, int(self.transfer_dst[k]) % T, float(self.transfer_bytes[k]), int(group[k]))
            for k in mine.tolist()
        ]
        return b_in, b_out, transfers

    def tile_rows(self) -> TileRows:
        """The program's per-tile work and traffic, shaped per chip, for a fabric to reduce."""
        S, C, T = self.supersteps, self.chips, self.tiles_per_chip
        E = self.bytes_in.shape[0]
        transfers = {}
        if self.transfer_step.size:
            erow_of = self.exchange_row[self.transfer_step]
            for r in np.unique(erow_of):
                m = erow_of == r
                src, dst = self.transfer_src[m], self.transfer_dst[m]
                assert self.transfer_group is not None  # filled by __post_init__
                transfers[int(r)] = Transfers(
                    src // T, src % T, dst % T, self.transfer_bytes[m], self.transfer_group[m]
                )
        return TileRows(
            self.compute_cycles.reshape(S, C, T),
            self.bytes_in.reshape(E, C, T),
            self.bytes_out.reshape(E, C, T),
            self.exchange_row,
            transfers,
        )

    def nbytes(self) -> int:
        return sum(
            getattr(self, f).nbytes for f in self.__dataclass_fields__ if isinstance(getattr(self, f), np.ndarray)
        )

    def summary(self) -> dict:
        return {
            "name": self.name,
            "chips": self.chips,
            "tiles_per_chip": self.tiles_per_chip,
            "supersteps": self.supersteps,
            "exchange_supersteps": int((self.exchange_row >= 0).sum()),
            "flows": int(self.flow_step.shape[0]),
            "host_transfers": int(self.host_step.shape[0]),
            "labels": list(self.labels),
        }

    @classmethod
    def from_arrays(
        cls,
        *,
        chips: int,
        tiles_per_chip: int,
        compute_cycles,
        labels=("step",),
        label_id=None,
        sync_scope=None,
        partitions=(),
        bytes_in=None,
        bytes_out=None,
        exchange_row=None,
        flows=None,
        host=None,
        transfers=None,
        name: str = "program",
        sync_extra=None,
        exchange_extra=None,
    ) -> Program:
        """Bulk constructor for workloads that already hold columnar arrays.

        ``flows`` = (step, src_chip, dst_chip, bytes) arrays; ``host`` = (step, chip, bytes);
        ``transfers`` = (step, src_tile, dst_tile, bytes[, group]) (group: see ``transfer_group``).
        Missing exchange arrays mean none.
        ``sync_extra`` / ``exchange_extra``: [S] fixed cycles booked as sync / exchange.
        """
        compute = np.ascontiguousarray(compute_cycles, dtype=np.float32)
        require(
            compute.ndim == 2,
            "compute_cycles",
            compute.shape,
            "must be 2-D (supersteps, tiles)",
            "pass a [supersteps, tiles] array",
        )
        S, N = compute.shape
        i32 = lambda a, fill: np.full(S, fill, np.int32) if a is None else np.asarray(a, np.int32)  # noqa: E731
        if bytes_in is None and bytes_out is None:
            bin_: np.ndarray = np.zeros((0, N), np.float32)
            bout: np.ndarray = bin_
            erow = np.full(S, -1, np.int32) if exchange_row is None else np.asarray(exchange_row, np.int32)
        else:
            bin_ = np.ascontiguousarray(bytes_in if bytes_in is not None else bytes_out, dtype=np.float32)
            bout = np.ascontiguousarray(bytes_out if bytes_out is not None else bytes_in, dtype=np.float32)
            erow = (
                np.arange(S, dtype=np.int32)
                if exchange_row is None and bin_.shape[0] == S
                else np.asarray(exchange_row, np.int32)
            )
        z32, z64 = np.zeros(0, np.int32), np.zeros(0, np.float64)
        x: tuple = tuple(transfers) if transfers is not None else (z32, z32, z32, z64)
        return cls(
            name=name,
            chips=int(chips),
            tiles_per_chip=int(tiles_per_chip),
            labels=tuple(labels),
            label_id=i32(label_id, 0),
            sync_scope=i32(sync_scope, SYNC_CHIP),
            partitions=tuple(np.asarray(p, np.int32) for p in partitions),
            compute_cycles=compute,
            exchange_row=erow,
            bytes_in=bin_,
            bytes_out=bout,
            **flow_columns(flows, host),
            transfer_step=np.asarray(x[0], np.int32),
            transfer_src=np.asarray(x[1], np.int32),
            transfer_dst=np.asarray(x[2], np.int32),
            transfer_bytes=np.asarray(x[3], np.float64),
            sync_extra_cycles=sync_extra,
            exchange_extra_cycles=exchange_extra,
            transfer_group=np.asarray(x[4], np.int32) if len(x) > 4 else None,
        )


@dataclass(frozen=True, eq=False)
class CompactProgram(_ProgramShape):
    """A program too big for ``[S, all tiles]`` arrays, kept reduced to what a fabric without a
    distance term needs (:class:`ChipPeaks`: per superstep and chip the slowest tile and the
    busiest ports), per tile and label the compute summed over the program (the heat maps), the
    bytes each chip sends per superstep, and ``rows`` (a :class:`ChipRowSource`) that rebuilds a
    chip's ``[S, tiles]`` rows for the tiles a person looks at. Everything else (labels, syncs,
    flows, host transfers, extras) as in :class:`Program`. Built chip by chip from the same rows
    as the dense form (a workload's compact build),
    so :func:`tilesim.engine.simulate` gives the same result on any fabric that needs no routes."""

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

    def chip_exchange(self, chip: int) -> tuple[np.ndarray, np.ndarray, list]:
        """One chip's on-chip exchange (as :meth:`Program.chip_exchange`; every superstep its own
        row, no explicit transfers), its rows rebuilt."""
        if self.rows is None:
            raise TypeError(f"compact program {self.name!r} was built without its rows: its tile rows are gone")
        _, b_in, b_out = self.rows.chip_rows(chip)
        return b_in, b_out, []

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


class ProgramBuilder:
    """Append supersteps one at a time (or ``repeat`` times), then :meth:`build`.

    >>> b = ProgramBuilder(chips=1, tiles_per_chip=4)
    >>> b.superstep("compute", compute_cycles=[100, 200, 0, 0], bytes_out=64, bytes_in=64)
    >>> b.build().supersteps
    1
    """

    def __init__(self, chips: int, tiles_per_chip: int, name: str = "program"):
        for fname, v in (("chips", chips), ("tiles_per_chip", tiles_per_chip)):
            require(
                not isinstance(v, bool) and isinstance(v, (int, np.integer)) and v >= 1,
                fname,
                v,
                "must be an integer >= 1",
                "e.g. 1",
            )
        self.chips, self.tiles_per_chip, self.name = int(chips), int(tiles_per_chip), name
        self.total_tiles = self.chips * self.tiles_per_chip
        self._labels: dict[str, int] = {}
        self._partitions: dict[tuple, int] = {}
        self._label_id: list[int] = []
        self._scope: list[int] = []
        self._compute: list[np.ndarray] = []
        self._erow: list[int] = []
        self._bin: list[np.ndarray] = []
        self._bout: list[np.ndarray] = []
        self._flows: list[tuple] = []
        self._host: list[tuple] = []
        self._transfers: list[tuple] = []
        self._groups = 0  # multicasts so far (their group ids)

    @classmethod
    def for_machine(cls, machine, name: str = "program") -> ProgramBuilder:
        return cls(machine.chips, machine.tiles_per_chip, name)

    def zeros(self) -> np.ndarray:
        """A per-tile float64 row for the whole system, to fill and pass in."""
        return np.zeros(self.total_tiles)

    def _scope_code(self, sync, where: str) -> int:
        if sync == "chip":
            return SYNC_CHIP
        if sync == "all":
            return SYNC_ALL
        require(
            not isinstance(sync, str),
            f"{where}: sync",
            sync,
            "must be 'chip', 'all' or a list of chip groups",
            'e.g. sync = "all" or sync = [[0, 1], [2, 3]]',
        )
        groups = [list(g) for g in sync]
        for g in groups:
            require(len(g) > 0, f"{where}: sync group", g, "is empty", "leave it out (unnamed chips sync alone)")
        ids = np.full(self.chips, -1, np.int32)
        for gi, g in enumerate(groups):
            for c in g:
                require(
                    bool(not isinstance(c, bool) and isinstance(c, (int, np.integer)) and 0 <= c < self.chips),
                    f"{where}: sync group chip",
                    c,
                    f"must be in 0..{self.chips - 1}",
                    "use chips of the machine (or --chips)",
                )
                require(
                    ids[c] == -1,
                    f"{where}: sync group chip",
                    int(c),
                    "appears in two groups",
                    "put each chip in one group only",
                )
                ids[c] = gi
        missing = np.flatnonzero(ids < 0)
        for c in missing:  # chips not named sync alone
            ids[c] = len(groups) + int(c)
        # canonical group numbering so equal partitions share a code whatever the order given
        _, canon = np.unique(ids, return_inverse=True)
        first: dict[int, int] = {}
        codes = [first.setdefault(int(g), len(first)) for g in canon]
        if len(set(codes)) == 1:
            return SYNC_ALL
        if len(set(codes)) == self.chips:
            return SYNC_CHIP
        key = tuple(codes)
        if key not in self._partitions:
            self._partitions[key] = len(self._partitions) + 1
        return self._partitions[key]

    def _checked_flow(self, f, where: str) -> tuple:
        """``(src_chip, dst_chip, bytes)`` of flow ``f`` as ``(int, int, float)``; raises :class:`ConfigError`
        unless it is a triple of chips of the machine and finite bytes >= 0."""
        require(
            len(f) == 3,
            f"{where}: flow",
            f,
            "must be (src_chip, dst_chip, bytes)",
            "give flows as (src_chip, dst_chip, bytes)",
        )
        src, dst, nb = f
        for nm, v in (("src", src), ("dst", dst)):
            require(
                bool(not isinstance(v, bool) and isinstance(v, (int, np.integer)) and 0 <= v < self.chips),
                f"{where}: flow {nm} chip",
                v,
                f"must be in 0..{self.chips - 1}",
                "use a machine with more chips (--chips)",
            )
        require(
            bool(isinstance(nb, (int, float, np.number)) and math.isfinite(nb) and nb >= 0),
            f"{where}: flow bytes",
            nb,
            "must be finite and >= 0",
            "give finite byte counts >= 0",
        )
        return (int(src), int(dst), float(nb))

    def _host_row(self, host_bytes, where: str) -> np.ndarray:
        """``host_bytes`` (a scalar for every chip, or one value per chip) as a per-chip float64 row;
        raises :class:`ConfigError` unless every value is finite and >= 0."""
        hb = np.asarray(host_bytes, np.float64)
        hb = np.full(self.chips, float(hb)) if hb.ndim == 0 else hb
        require(
            bool(hb.shape == (self.chips,) and np.isfinite(hb).all() and not (hb < 0).any()),
            f"{where}: host_bytes",
            host_bytes,
            f"must be a scalar or {self.chips} finite values >= 0",
            "give one number, or one per chip",
        )
        return hb

    def superstep(
        self,
        label: str,
        compute_cycles=0.0,
        *,
        bytes_out=None,
        bytes_in=None,
        flows: Iterable[tuple] = (),
        host_bytes=None,
        transfers: Iterable[tuple] = (),
        multicasts: Iterable[tuple] = (),
        sync="chip",
        repeat: int = 1,
    ) -> None:
        """Append ``repeat`` identical supersteps.

        Parameters
        ----------
        compute_cycles : scalar or array of length ``chips * tiles_per_chip``
        bytes_out, bytes_in : scalar or per-tile array; None = no on-chip exchange phase
        flows : (src_chip, dst_chip, bytes) triples crossing chip links
        host_bytes : scalar (every chip) or per-chip array moved to/from the host
        transfers : (src_tile, dst_tile, bytes) explicit on-chip transfers (global tile ids);
            they add to ``bytes_out``/``bytes_in`` and let a mesh fabric route them
        multicasts : (src_tile, dst_tiles, bytes): one message to several tiles of its chip (e.g. a
            rectangle, :func:`tilesim.fabric.rectangle_tiles`); the source sends it once, each
            link of its tree carries it once, each destination receives it
        sync : "chip", "all", or a list of chip groups (lists of chip ids)
        """
        where = f"superstep {len(self._label_id)} ({label})"
        require(isinstance(label, str), f"{where}: label", label, "must be a string", "give the label as text")
        require(
            not isinstance(repeat, bool) and isinstance(repeat, (int, np.integer)) and repeat >= 1,
            f"{where}: repeat",
            repeat,
            "must be an integer >= 1",
            "e.g. repeat = 8",
        )
        N = self.total_tiles
        comp = _as_row(compute_cycles, N, "compute_cycles", where)
        scope = self._scope_code(sync, where)
        xfers = [tuple(t) for t in transfers]
        mcast = [self._multicast(m, N, where) for m in multicasts]
        have_exchange = bytes_out is not None or bytes_in is not None or xfers or mcast
        if have_exchange:
            bout = _as_row(0.0 if bytes_out is None else bytes_out, N, "bytes_out", where)
            bin_ = _as_row(0.0 if bytes_in is None else bytes_in, N, "bytes_in", where)
            for t in xfers:
                _check_transfer(t, N, where)
                src, dst, nb = t
                bout[src] += nb
                bin_[dst] += nb
            for src, dsts, nb in mcast:
                bout[src] += nb
                bin_[dsts] += nb
        fl = [self._checked_flow(f, where) for f in flows]
        if host_bytes is not None:
            hb = self._host_row(host_bytes, where)
        lid = self._labels.setdefault(label, len(self._labels))
        comp32 = comp.astype(np.float32)
        for _ in range(int(repeat)):
            s = len(self._label_id)
            self._label_id.append(lid)
            self._scope.append(scope)
            self._compute.append(comp32)
            if have_exchange:
                self._erow.append(len(self._bin))
                self._bin.append(bin_.astype(np.float32))
                self._bout.append(bout.astype(np.float32))
            else:
                self._erow.append(-1)
            self._flows.extend((s, a, b, nb) for a, b, nb in fl)
            if host_bytes is not None:
                self._host.extend((s, c, float(hb[c])) for c in range(self.chips) if hb[c] > 0)
            self._transfers.extend((s, int(a), int(b), float(nb), -1) for a, b, nb in xfers)
            for src, dsts, nb in mcast:
                self._transfers.extend((s, int(src), int(d), float(nb), self._groups) for d in dsts.tolist())
                self._groups += 1

    def _multicast(self, m, N: int, where: str) -> tuple[int, np.ndarray, float]:
        """A checked multicast: (source tile, destination tiles, bytes)."""
        require(len(tuple(m)) == 3, f"{where}: multicast", m, "must be (src_tile, dst_tiles, bytes)",
                "e.g. (0, [1, 2, 3], 4096)")  # fmt: skip
        src, dsts, nb = m
        d = np.unique(np.asarray(list(dsts) if not isinstance(dsts, np.ndarray) else dsts, np.int64))
        require(d.size > 0, f"{where}: multicast destinations", list(dsts), "must name at least one tile",
                "give the destination tiles")  # fmt: skip
        for t in d.tolist():
            _check_transfer((src, t, nb), N, where)
        return int(src), d, float(nb)

    def build(self) -> Program:
        N = self.total_tiles
        S = len(self._label_id)
        comp = np.vstack(self._compute) if S else np.zeros((0, N), np.float32)
        bin_ = np.vstack(self._bin) if self._bin else np.zeros((0, N), np.float32)
        bout = np.vstack(self._bout) if self._bout else np.zeros((0, N), np.float32)

        def cols(rows, k, types):
            if not rows:
                return tuple(np.zeros(0, t) for t in types)
            a = list(zip(*rows))
            return tuple(np.asarray(a[i], types[i]) for i in range(k))

        # codes are 1..len(partitions) in order of first use
        parts = [np.asarray(key, np.int32) for key in sorted(self._partitions, key=self._partitions.__getitem__)]
        return Program.from_arrays(
            chips=self.chips,
            tiles_per_chip=self.tiles_per_chip,
            compute_cycles=comp,
            labels=tuple(sorted(self._labels, key=self._labels.__getitem__)),
            label_id=np.asarray(self._label_id, np.int32),
            sync_scope=np.asarray(self._scope, np.int32),
            partitions=tuple(parts),
            bytes_in=bin_,
            bytes_out=bout,
            exchange_row=np.asarray(self._erow, np.int32),
            flows=cols(self._flows, 4, (np.int32, np.int32, np.int32, np.float64)),
            host=cols(self._host, 3, (np.int32, np.int32, np.float64)),
            transfers=cols(self._transfers, 5, (np.int32, np.int32, np.int32, np.float64, np.int32)),
            name=self.name,
        )


# --------------------------------------------------------------------------------------------
# Program files (TOML): a user's hand-written BSP program
# --------------------------------------------------------------------------------------------


def concat_programs(programs: Sequence[Program], name: str | None = None) -> Program:
    """Concatenate programs of the same shape (e.g. repeated training steps)."""
    require(bool(programs), "programs", [], "needs at least one program", "pass at least one program")
    p0 = programs[0]
    labels: dict[str, int] = {}
    parts: dict[tuple, int] = {}
    lid: list[np.ndarray] = []
    scope: list[np.ndarray] = []
    comp: list[np.ndarray] = []
    erow: list[np.ndarray] = []
    bins: list[np.ndarray] = []
    bouts: list[np.ndarray] = []
    sx: list[np.ndarray] = []
    ex: list[np.ndarray] = []
    fl: list[tuple[np.ndarray, ...]] = []
    ho: list[tuple[np.ndarray, ...]] = []
    xf: list[tuple[np.ndarray, ...]] = []
    s_off = e_off = g_off = 0
    for p in programs:
        require(
            (p.chips, p.tiles_per_chip) == (p0.chips, p0.tiles_per_chip),
            "program shape",
            (p.chips, p.tiles_per_chip),
            f"must match ({p0.chips}, {p0.tiles_per_chip})",
            "concatenate programs built for the same machine",
        )
        lmap = np.array([labels.setdefault(l, len(labels)) for l in p.labels], np.int32)
        pmap = np.array([-1, 0] + [parts.setdefault(tuple(a.tolist()), len(parts) + 1) for a in p.partitions], np.int32)
        lid.append(lmap[p.label_id])
        scope.append(pmap[p.sync_scope + 1])
        comp.append(p.compute_cycles)
        assert p.sync_extra_cycles is not None and p.exchange_extra_cycles is not None  # filled by __post_init__
        sx.append(p.sync_extra_cycles)
        ex.append(p.exchange_extra_cycles)
        erow.append(np.where(p.exchange_row >= 0, p.exchange_row + e_off, -1))
        bins.append(p.bytes_in)
        bouts.append(p.bytes_out)
        fl.append((p.flow_step + s_off, p.flow_src, p.flow_dst, p.flow_bytes))
        ho.append((p.host_step + s_off, p.host_chip, p.host_bytes))
        assert p.transfer_group is not None  # filled by __post_init__
        grp = np.where(p.transfer_group >= 0, p.transfer_group + g_off, -1)
        xf.append((p.transfer_step + s_off, p.transfer_src, p.transfer_dst, p.transfer_bytes, grp))
        g_off += int(p.transfer_group.max(initial=-1)) + 1
        s_off += p.supersteps
        e_off += p.bytes_in.shape[0]
    cat = lambda seq, k: tuple(np.concatenate([t[i] for t in seq]) for i in range(k))  # noqa: E731
    return Program.from_arrays(
        chips=p0.chips,
        tiles_per_chip=p0.tiles_per_chip,
        compute_cycles=np.concatenate(comp),
        labels=tuple(sorted(labels, key=labels.__getitem__)),
        label_id=np.concatenate(lid),
        sync_scope=np.concatenate(scope),
        partitions=tuple(np.asarray(k, np.int32) for k in sorted(parts, key=parts.__getitem__)),
        bytes_in=np.concatenate(bins),
        bytes_out=np.concatenate(bouts),
        exchange_row=np.concatenate(erow),
        flows=cat(fl, 4),
        host=cat(ho, 3),
        transfers=cat(xf, 5),
        name=name or p0.name,
        sync_extra=np.concatenate(sx),
        exchange_extra=np.concatenate(ex),
    )
