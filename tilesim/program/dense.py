"""The dense program form: :class:`Program`, per-tile rows of ``[S, all tiles]`` arrays
(:mod:`tilesim.program`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.program.rows import ChipReducer, TileRows, Transfers
from tilesim.program.validation import SYNC_ALL, SYNC_CHIP, _ProgramShape, flow_columns

if TYPE_CHECKING:
    from tilesim.outputs.records import ChipWork


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
    # exchange rows whose receivers all take the same data from the senders (a broadcast): a fabric
    # that multicasts times them as one tree per sender (tilesim.machine.fabric)
    exchange_broadcast: np.ndarray | None = None  # bool [E]

    def __post_init__(self):
        S = self.supersteps
        for name in ("sync_extra_cycles", "exchange_extra_cycles"):
            v = getattr(self, name)
            object.__setattr__(self, name, np.zeros(S) if v is None else np.asarray(v, np.float64))
        b, E = self.exchange_broadcast, self.bytes_in.shape[0]
        object.__setattr__(self, "exchange_broadcast", np.zeros(E, bool) if b is None else np.asarray(b, bool))
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
        assert self.exchange_broadcast is not None  # filled by __post_init__
        require(
            self.exchange_broadcast.shape == (E,),
            "program.exchange_broadcast",
            self.exchange_broadcast.shape,
            f"must have shape ({E},)",
            "give one flag per exchange row",
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

    def chip_exchange(self, chip: int) -> tuple[np.ndarray, np.ndarray, list, np.ndarray]:
        """One chip's on-chip exchange over the program: ``(bytes_in, bytes_out)`` ``[E, tiles]``
        of the rows a fabric times from per-tile totals (a row with explicit transfers on the chip
        is zero here), those transfers as ``(src, dst, bytes, group)`` with chip-local tiles, and the
        rows' broadcast flags [E] (the arguments of :meth:`tilesim.machine.fabric.MeshFabric.link_totals`)."""
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
        assert self.exchange_broadcast is not None  # filled by __post_init__
        return b_in, b_out, transfers, self.exchange_broadcast

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
            self.exchange_broadcast,
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
        broadcast=None,
    ) -> Program:
        """Bulk constructor for workloads that already hold columnar arrays.

        ``flows`` = (step, src_chip, dst_chip, bytes) arrays; ``host`` = (step, chip, bytes);
        ``transfers`` = (step, src_tile, dst_tile, bytes[, group]) (group: see ``transfer_group``).
        Missing exchange arrays mean none.
        ``sync_extra`` / ``exchange_extra``: [S] fixed cycles booked as sync / exchange.
        ``broadcast``: bool [E], the exchange rows that are broadcasts (``exchange_broadcast``).
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
            exchange_broadcast=broadcast,
        )
