"""Building programs: :class:`ProgramBuilder` appends supersteps, :func:`concat_programs` joins
programs (:mod:`tilesim.program`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from tilesim.errors import require
from tilesim.program.dense import Program
from tilesim.program.validation import SYNC_ALL, SYNC_CHIP, _as_row, _check_transfer, sorted_unique


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
        self._broadcast: list[bool] = []
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
        broadcast: bool = False,
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
            rectangle, :func:`tilesim.machine.fabric.rectangle_tiles`); the source sends it once, each
            link of its tree carries it once, each destination receives it
        sync : "chip", "all", or a list of chip groups (lists of chip ids)
        broadcast : every receiver takes the same data (a multicasting fabric sends each sender's as a tree)
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
            self._erow.append(self._exchange_row(bin_, bout, broadcast) if have_exchange else -1)
            self._flows.extend((s, a, b, nb) for a, b, nb in fl)
            if host_bytes is not None:
                self._host.extend((s, c, float(hb[c])) for c in range(self.chips) if hb[c] > 0)
            self._transfers.extend((s, int(a), int(b), float(nb), -1) for a, b, nb in xfers)
            for src, dsts, nb in mcast:
                self._transfers.extend((s, int(src), int(d), float(nb), self._groups) for d in dsts.tolist())
                self._groups += 1

    def _exchange_row(self, bytes_in: np.ndarray, bytes_out: np.ndarray, broadcast: bool) -> int:
        """Store one superstep's exchange bytes; its exchange row index."""
        self._bin.append(bytes_in.astype(np.float32))
        self._bout.append(bytes_out.astype(np.float32))
        self._broadcast.append(bool(broadcast))
        return len(self._bin) - 1

    def _multicast(self, m, N: int, where: str) -> tuple[int, np.ndarray, float]:
        """A checked multicast: (source tile, destination tiles, bytes)."""
        require(len(tuple(m)) == 3, f"{where}: multicast", m, "must be (src_tile, dst_tiles, bytes)",
                "e.g. (0, [1, 2, 3], 4096)")  # fmt: skip
        src, dsts, nb = m
        d = sorted_unique(np.asarray(list(dsts) if not isinstance(dsts, np.ndarray) else dsts, np.int64))
        require(d.size > 0, f"{where}: multicast destinations", list(dsts), "must name at least one tile",
                "give the destination tiles")  # fmt: skip
        _check_transfer((src, int(d[0]), nb), N, where)  # the source, the bytes and the least destination
        if d[-1] >= N:  # d is sorted: the greatest destination is the one that can be out of range
            _check_transfer((src, int(d[-1]), nb), N, where)
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
            broadcast=np.asarray(self._broadcast, bool),
        )


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
    bcast: list[np.ndarray] = []
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
        assert p.exchange_broadcast is not None  # filled by __post_init__
        bcast.append(p.exchange_broadcast)
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
        broadcast=np.concatenate(bcast),
    )
