"""Result records: the simulated timeline of a program, per superstep and in total.

Attribution of a superstep's time (its advance of the system's frontier, so that the
supersteps' times add up to the makespan) follows the critical path: the compute of the chip
that arrived last at the sync (``compute_critical_chip``, its slowest tile ``critical_tile``),
the sync itself, then the exchange, link and host phases of the chip that finished last
(``critical_chip``). Work that overlapped the previous superstep (chips running ahead under
chip-local syncs) is taken off the front of that path. So for every superstep
``compute + sync + exchange + links + host == time`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.io import atomic_write_text, dumps_json

__all__ = [
    "SimResult",
    "ChipWork",
    "ChipTimeline",
    "ProgramDigest",
    "PHASES",
    "by_phase_frame",
    "critical_tiles",
    "phase_spans",
    "whole_bytes",
    "label_sums",
    "label_tile_cycles",
]

PHASES = ("compute", "sync", "exchange", "links", "host", "residual")
"""Time categories of every breakdown. The engine times the first five; ``residual`` is compute
that a workload books as a fitted term no modelled mechanism explains (:meth:`SimResult.book_as`)."""


def whole_bytes(nbytes) -> int:
    """A byte count as a user reads it: a whole number. Per-tile traffic is modelled from average
    activity and kept in float32, so sums carry fractions; every reported total goes through here."""
    return int(round(float(nbytes)))


def label_sums(compute: np.ndarray, label_id: np.ndarray, n_labels: int) -> np.ndarray:
    """float64 ``[n_labels, tiles]``: the rows of ``compute`` ``[S, tiles]`` summed per label: each
    run of consecutive rows with one label summed in float64 (a view: no copy), the runs of a
    label added in order. The dense and the compact program use this one sum."""
    out = np.zeros((n_labels, compute.shape[1]))
    if not compute.shape[0]:
        return out
    cut = np.flatnonzero(np.diff(label_id) != 0) + 1
    starts = np.concatenate([[0], cut]).tolist()
    ends = np.concatenate([cut, [compute.shape[0]]]).tolist()
    for a, b in zip(starts, ends):
        out[int(label_id[a])] += compute[a:b].sum(axis=0, dtype=np.float64)
    return out


def label_tile_cycles(program) -> np.ndarray:
    """float64 ``[labels, tiles]``: compute cycles of each superstep label summed per tile (a
    compact program keeps them; a dense one is summed by :func:`label_sums`)."""
    if program.form == "compact" and program.label_tile_cycles is not None:
        return program.label_tile_cycles
    return label_sums(program.compute_cycles, program.label_id, len(program.labels))


@dataclass(frozen=True, eq=False, slots=True)
class ChipWork:
    """A program's tiles reduced to chips. Arrays are ``[S, C]`` (superstep, chip) unless noted."""

    compute: np.ndarray  # cycles of the chip's slowest tile
    critical_tile: np.ndarray  # that tile (index on the chip)
    exchange: np.ndarray  # on-chip exchange cycles (0 = no exchange phase)
    exchange_tile: np.ndarray  # the tile whose port bounds the exchange
    bytes_onchip: np.ndarray  # [S] bytes sent over the on-chip fabric


@dataclass(frozen=True, eq=False, slots=True)
class ChipTimeline:
    """When every chip passes each point of every superstep: ``[S, C]`` arrays in cycles of the
    chip clock (see :mod:`tilesim.engine.events` for the time model)."""

    exchange: np.ndarray  # exchange phase cycles, including the program's exchange extra
    start: np.ndarray  # the chip starts computing
    arrive: np.ndarray  # the chip arrives at the sync
    release: np.ndarray  # the sync releases the chip
    links_end: np.ndarray  # on-chip exchange and the chip's cross-chip flows are done
    end: np.ndarray  # host transfers done: the superstep ends on this chip
    arriver: np.ndarray  # int: the chip of the sync group that arrived last
    link_group_bytes: dict  # bytes per directed link group (:data:`tilesim.machine.fabric.CHIP_LINKS`)

    @classmethod
    def empty(cls, chips: int) -> ChipTimeline:
        """The timeline of a program without supersteps."""
        z = np.zeros((0, chips))
        return cls(z, z, z, z, z, z, z.astype(np.int64), {})


@dataclass(frozen=True, eq=False)
class SimResult:
    """Simulated timeline. Arrays are per superstep (length S) unless noted; times in seconds."""

    program_name: str
    machine_name: str
    clock_hz: float
    chips: int
    tiles_per_chip: int
    labels: tuple
    label_id: np.ndarray
    start_s: np.ndarray
    time_s: np.ndarray
    phase_s: np.ndarray  # [S, 5] in PHASES order
    critical_chip: np.ndarray
    compute_critical_chip: np.ndarray
    critical_tile: np.ndarray  # tile (on compute_critical_chip) with the most compute
    exchange_critical_tile: np.ndarray
    bytes_onchip: np.ndarray
    bytes_links: np.ndarray
    bytes_host: np.ndarray
    link_group_bytes: dict = field(default_factory=dict)
    timeline: dict | None = None  # per-chip [S, C] arrays (cycles) for traces and pictures
    host_labels: tuple = ()  # labels whose compute phase is host work (:meth:`book_as_host`)
    residual_labels: tuple = ()  # labels whose compute phase is a fitted residual (:meth:`book_as`)
    parts: tuple = ()  # (label, part label, phase, seconds): a share of a label's compute as a row (:meth:`book_part`)

    # -------------------------------------------------------------------------------------
    @classmethod
    def from_timeline(
        cls, *, program, machine, work: ChipWork, timeline: ChipTimeline, keep_timeline: bool = True
    ) -> SimResult:
        """The result of ``program`` on ``machine`` from its chip reduction and chip timeline:
        every superstep's time and critical-path attribution (module docstring). With
        ``keep_timeline`` the per-chip arrays are kept (as :attr:`timeline`) for traces and plots."""
        S = program.supersteps
        comp, crit_tile, ex_tile, bytes_onchip = work.compute, work.critical_tile, work.exchange_tile, work.bytes_onchip
        ex, t_start, t_arrive, t_release = timeline.exchange, timeline.start, timeline.arrive, timeline.release
        t_links, t_end, arriver = timeline.links_end, timeline.end, timeline.arriver
        clock = machine.clock_hz
        idx = np.arange(S)
        frontier = t_end.max(axis=1) if S else np.zeros(0)
        f = t_end.argmax(axis=1) if S else np.zeros(0, np.int64)
        prev = np.concatenate([[0.0], frontier[:-1]]) if S else np.zeros(0)
        a = arriver[idx, f]
        phases = (
            np.stack(
                [
                    comp[idx, a],
                    t_release[idx, f] - t_arrive[idx, a],
                    ex[idx, f],
                    t_links[idx, f] - (t_release[idx, f] + ex[idx, f]),
                    t_end[idx, f] - t_links[idx, f],
                ],
                axis=1,
            )
            if S
            else np.zeros((0, 5))
        )
        phases = np.maximum(phases, 0.0)
        overlap = np.maximum(prev - t_start[idx, a], 0.0) if S else np.zeros(0)
        cum = np.cumsum(phases, axis=1)
        cum = np.maximum(cum - overlap[:, None], 0.0)
        phases = np.diff(np.concatenate([np.zeros((S, 1)), cum], axis=1), axis=1)
        time = frontier - prev
        # the attribution sums to the frontier's advance; absorb float rounding in the last phase used
        resid = time - phases.sum(axis=1)
        phases[:, 0] += resid
        phases = np.concatenate([phases, np.zeros((S, len(PHASES) - phases.shape[1]))], axis=1)
        bl = np.zeros(S)
        if program.flow_step.size:
            np.add.at(bl, program.flow_step, program.flow_bytes)
        bh = np.zeros(S)
        if program.host_step.size:
            np.add.at(bh, program.host_step, program.host_bytes)
        arrays = None
        if keep_timeline:
            arrays = {
                "start": t_start,
                "arrive": t_arrive,
                "release": t_release,
                "links_end": t_links,
                "end": t_end,
                "exchange_cycles": ex,
                "compute_cycles": comp,
            }
        return cls(
            program_name=program.name,
            machine_name=machine.name,
            clock_hz=clock,
            chips=machine.chips,
            tiles_per_chip=machine.tiles_per_chip,
            labels=tuple(program.labels),
            label_id=program.label_id.copy(),
            start_s=prev / clock,
            time_s=time / clock,
            phase_s=phases / clock,
            critical_chip=f,
            compute_critical_chip=a,
            critical_tile=crit_tile[idx, a] if S else np.zeros(0, np.int64),
            exchange_critical_tile=ex_tile[idx, f] if S else np.zeros(0, np.int64),
            bytes_onchip=bytes_onchip,
            bytes_links=bl,
            bytes_host=bh,
            link_group_bytes=timeline.link_group_bytes,
            timeline=arrays,
        )

    def book_as(self, labels, phase: str) -> SimResult:
        """The same result with the compute phase of every superstep labelled one of ``labels``
        booked as ``phase`` (``"host"``: work the tiles do for the host, e.g. copying the variables
        to it; ``"residual"``: a fitted term no modelled mechanism explains). The engine times both
        as compute; only the attribution moves, times and totals stay. Pictures and traces draw
        those supersteps' compute in their booked phase (:meth:`booked_phase`)."""

        if phase not in ("host", "residual"):
            raise ConfigError(
                config_message("phase", phase, "must be 'host' or 'residual'", "book as host or residual")
            )
        ids = [i for i, lab in enumerate(self.labels) if lab in set(labels)]
        if not ids:
            return self
        m = np.isin(self.label_id, ids)
        ph = self.phase_s.copy()
        ci, pi = PHASES.index("compute"), PHASES.index(phase)
        ph[m, pi] += ph[m, ci]
        ph[m, ci] = 0.0
        booked = tuple(self.labels[i] for i in ids)
        if phase == "host":
            return replace(self, phase_s=ph, host_labels=booked)
        return replace(self, phase_s=ph, residual_labels=booked)

    def book_part(self, label: str, part: str, share: float, phase: str = "residual") -> SimResult:
        """The same result with ``share`` (0..1) of the compute of every superstep labelled
        ``label`` booked as ``phase`` and reported as its own row ``part`` (:meth:`by_label`): a
        fitted term inside a modelled row's superstep, said out loud without a superstep of its own
        (no sync or exchange added). Call it before :meth:`book_as` books the rest of that compute;
        times and totals stay."""
        if phase not in ("host", "residual"):
            raise ConfigError(
                config_message("phase", phase, "must be 'host' or 'residual'", "book a part as host or residual")
            )
        if not 0.0 <= share <= 1.0:
            raise ConfigError(config_message("share", share, "must be in 0..1", "give the part's share of the row"))
        ids = [i for i, lab in enumerate(self.labels) if lab == label]
        if not ids or share == 0.0:
            return self
        m = self.label_id == ids[0]
        ph = self.phase_s.copy()
        ci, pi = PHASES.index("compute"), PHASES.index(phase)
        moved = ph[m, ci] * share
        ph[m, ci] -= moved
        ph[m, pi] += moved
        return replace(self, phase_s=ph, parts=(*self.parts, (label, part, phase, float(moved.sum()))))

    def book_as_host(self, labels) -> SimResult:
        """:meth:`book_as` ``(labels, "host")``."""
        return self.book_as(labels, "host")

    def booked_phase(self) -> np.ndarray:
        """str [S]: the phase each superstep's compute is drawn in (compute, host or residual)."""
        out = np.full(self.supersteps, "compute", dtype=object)
        for phase in ("host", "residual"):
            ids = [i for i, lab in enumerate(self.labels) if lab in set(getattr(self, f"{phase}_labels"))]
            out[np.isin(self.label_id, ids)] = phase
        return out

    # -------------------------------------------------------------------------------------
    @property
    def supersteps(self) -> int:
        return int(self.time_s.shape[0])

    @property
    def total_s(self) -> float:
        return float(self.time_s.sum())

    def breakdown_s(self, mask=None) -> dict:
        """Seconds per phase (optionally over a boolean mask of supersteps); sums to the time."""
        ph = self.phase_s if mask is None else self.phase_s[mask]
        return {p: float(v) for p, v in zip(PHASES, ph.sum(axis=0))}

    def by_label(self) -> dict:
        """Per label: supersteps, seconds, phase split, and the most frequent critical tile; a part
        (:meth:`book_part`) is a row of its own with 0 supersteps, its seconds out of its label's."""
        out: dict[str, dict] = {}
        for i, lab in enumerate(self.labels):
            m = self.label_id == i
            if not m.any():
                continue
            chips_tiles = self.compute_critical_chip[m] * self.tiles_per_chip + self.critical_tile[m]
            top = int(np.argmax(np.bincount(chips_tiles)))
            out[lab] = {
                "supersteps": int(m.sum()),
                "time_s": float(self.time_s[m].sum()),
                "breakdown_s": self.breakdown_s(m),
                "critical_chip": top // self.tiles_per_chip,
                "critical_tile": top % self.tiles_per_chip,
            }
        for label, part, phase, seconds in self.parts:  # a part's seconds leave its row for their own
            if label not in out:
                continue
            row = out[label]
            row["time_s"] -= seconds
            split: dict[str, float] = row["breakdown_s"]
            split[phase] -= seconds
            out[part] = {
                "supersteps": 0,
                "time_s": seconds,
                "breakdown_s": {p: seconds if p == phase else 0.0 for p in PHASES},
                "critical_chip": row["critical_chip"],
                "critical_tile": row["critical_tile"],
            }
        return out

    def superstep(self, s: int) -> dict:
        return {
            "index": s,
            "label": self.labels[int(self.label_id[s])],
            "start_s": float(self.start_s[s]),
            "time_s": float(self.time_s[s]),
            "breakdown_s": {p: float(v) for p, v in zip(PHASES, self.phase_s[s])},
            "critical_chip": int(self.critical_chip[s]),
            "compute_critical_chip": int(self.compute_critical_chip[s]),
            "critical_tile": int(self.critical_tile[s]),
            "exchange_critical_tile": int(self.exchange_critical_tile[s]),
            "bytes_onchip": whole_bytes(self.bytes_onchip[s]),
            "bytes_links": whole_bytes(self.bytes_links[s]),
            "bytes_host": whole_bytes(self.bytes_host[s]),
        }

    def to_dict(self, supersteps: int = 0) -> dict:
        """Summary; ``supersteps`` > 0 also lists the first that many supersteps."""
        d = {
            "program": self.program_name,
            "machine": self.machine_name,
            "chips": self.chips,
            "tiles_per_chip": self.tiles_per_chip,
            "supersteps": self.supersteps,
            "total_s": self.total_s,
            "breakdown_s": self.breakdown_s(),
            "bytes": {
                "onchip": whole_bytes(self.bytes_onchip.sum()),
                "links": whole_bytes(self.bytes_links.sum()),
                "host": whole_bytes(self.bytes_host.sum()),
            },
            "by_label": self.by_label(),
            "busiest_link_groups": [
                {"group": "/".join(map(str, g)), "bytes": whole_bytes(b)}
                for g, b in sorted(self.link_group_bytes.items(), key=lambda kv: -kv[1])[:5]
            ],
        }
        if supersteps:
            d["superstep_list"] = [self.superstep(s) for s in range(min(supersteps, self.supersteps))]
        return d

    def to_json(self, path=None, supersteps: int = 0) -> str:
        text = dumps_json(self.to_dict(supersteps), indent=2)
        if path is not None:
            atomic_write_text(path, text)
        return text

    def to_dataframe(self):
        """One row per superstep (pandas): label, start and time, seconds per phase, the
        critical chip and tile, bytes on chip / over links / to the host."""
        pd = _pandas()
        cols = {
            "superstep": np.arange(self.supersteps),
            "label": [self.labels[i] for i in self.label_id],
            "start_s": self.start_s,
            "time_s": self.time_s,
        }
        for i, p in enumerate(PHASES):
            cols[f"{p}_s"] = self.phase_s[:, i]
        cols.update(
            critical_chip=self.critical_chip,
            compute_critical_chip=self.compute_critical_chip,
            critical_tile=self.critical_tile,
            bytes_onchip=self.bytes_onchip,
            bytes_links=self.bytes_links,
            bytes_host=self.bytes_host,
        )
        return pd.DataFrame(cols)

    def by_label_frame(self):
        """:meth:`by_label` as rows (pandas), slowest first: label, supersteps, seconds, seconds
        per phase, critical chip and tile."""
        return by_phase_frame(self.by_label())


def _pandas():
    try:
        import pandas as pd  # pandas loads only where a DataFrame is asked for (start-up time)
    except ImportError:  # pragma: no cover - pandas is a dependency
        raise ConfigError("pandas: not installed; results as tables need it: pip install pandas") from None
    return pd


def by_phase_frame(by: dict):
    """A ``by_label`` / ``by_phase`` dict (label -> supersteps, time_s, breakdown_s, critical chip
    and tile; :meth:`SimResult.by_label`) as a DataFrame, one row per label, slowest first."""
    pd = _pandas()
    rows = []
    for lab, v in by.items():
        row = {"label": lab, "supersteps": int(v["supersteps"]), "time_s": float(v["time_s"])}
        row.update({f"{p}_s": float(v["breakdown_s"].get(p, 0.0)) for p in PHASES})
        row.update(critical_chip=int(v["critical_chip"]), critical_tile=int(v["critical_tile"]))
        rows.append(row)
    cols = ["label", "supersteps", "time_s"] + [f"{p}_s" for p in PHASES] + ["critical_chip", "critical_tile"]
    return pd.DataFrame(rows, columns=cols).sort_values("time_s", ascending=False, kind="stable").reset_index(drop=True)


@dataclass(frozen=True, eq=False)
class ProgramDigest:
    """What the pictures, the trace and the totals need of a :class:`tilesim.program.Program`,
    without its ``[S, tiles]`` arrays (small enough to keep for every step of a run).

    Bytes follow one definition everywhere: *on chip* = bytes each sending tile puts on its
    chip's exchange fabric (a multicast counts once, as the engine times it:
    :attr:`SimResult.bytes_onchip`); *links* = bytes over the chip-to-chip links (each flow once).
    """

    work_cycles: np.ndarray  # float64 [C*T] compute cycles per tile over the program
    tiles: tuple  # global tiles with their own cycles below
    tile_cycles: np.ndarray  # float64 [S, len(tiles)] compute cycles of those tiles
    onchip_bytes: np.ndarray  # float64 [S, C] bytes sent on each chip in each superstep
    label_chip_bytes: np.ndarray  # float64 [labels, C] the same summed per superstep label
    link_bytes: np.ndarray  # float64 [C, C] bytes over the links, sender chip x receiver chip
    flows: tuple  # (step, src chip, dst chip, bytes) arrays of the link flows
    tile_group: np.ndarray | None = None  # int [C*T] the workload's group of each tile (e.g. its
    # layer, 1-based; 0 = none), outlined in the pictures
    label_tile_cycles: np.ndarray | None = None  # [labels, C*T] compute cycles per label and tile
    # (:func:`label_tile_cycles`): the tiles each label keeps busy (report.html); set by the workload
    grid_links: tuple | None = None  # (chip, :class:`tilesim.machine.gridload.GridLinks`): on a mesh or torus,
    # the bytes on every link of the chip that sends the most on chip (links.png)

    @classmethod
    def of(cls, program, tiles=(), host_labels=(), fabric=None) -> ProgramDigest:
        """The digest of ``program`` keeping the compute of global ``tiles`` per superstep.
        ``work_cycles`` leaves out the supersteps labelled one of ``host_labels`` (their compute
        is booked as host time: :meth:`SimResult.book_as_host`, :attr:`SimResult.host_labels`).
        With a ``fabric`` that has a grid, also the load of every link of the busiest chip."""
        if isinstance(program, ProgramDigest):
            return program
        digest = cls._of(program, tiles, host_labels)
        # a compact program built without its rows has no per-tile traffic left to load links with
        if fabric is None or fabric.grid is None or (program.form == "compact" and program.rows is None):
            return digest
        chip = int(np.argmax(digest.onchip_bytes.sum(axis=0)))
        return replace(digest, grid_links=(chip, fabric.link_totals(*program.chip_exchange(chip))))

    @classmethod
    def _of(cls, program, tiles, host_labels) -> ProgramDigest:
        host_ids = [i for i, lab in enumerate(program.labels) if lab in set(host_labels)]
        if program.form == "compact":  # no [S, tiles] arrays to read
            return cls._of_compact(program, tiles, host_ids)
        S, C, T = program.supersteps, program.chips, program.tiles_per_chip
        tiles = tuple(int(t) for t in tiles)
        work = program.compute_cycles[~np.isin(program.label_id, host_ids)].sum(axis=0, dtype=np.float64)
        tile_cycles = program.compute_cycles[:, list(tiles)].astype(np.float64)
        onchip = np.zeros((S, C))
        has = program.exchange_row >= 0
        if has.any():
            bo = program.bytes_out.reshape(-1, C, T).sum(axis=2, dtype=np.float64)
            onchip[has] = bo[program.exchange_row[has]]
        return cls._with_totals(program, work, tiles, tile_cycles, onchip)

    @classmethod
    def _of_compact(cls, program, tiles, host_ids=()) -> ProgramDigest:
        """:meth:`of` a :class:`tilesim.program.CompactProgram` (same numbers, from its chip sums)."""
        per_label_work = np.array(program.label_tile_cycles, np.float64, copy=True)
        per_label_work[list(host_ids)] = 0.0
        tiles = tuple(int(t) for t in tiles)
        return cls._with_totals(
            program, per_label_work.sum(axis=0), tiles, program.tile_compute(tiles), program.onchip_bytes.copy()
        )

    @classmethod
    def _with_totals(cls, program, work, tiles, tile_cycles, onchip) -> ProgramDigest:
        """The digest from its per-program parts, adding the byte totals both program forms share:
        on-chip bytes per label and chip, link bytes per chip pair, and the flows."""
        C = program.chips
        per_label = np.zeros((len(program.labels), C))
        np.add.at(per_label, program.label_id, onchip)
        links = np.zeros((C, C))
        np.add.at(links, (program.flow_src, program.flow_dst), program.flow_bytes)
        flows = (program.flow_step.copy(), program.flow_src.copy(), program.flow_dst.copy(), program.flow_bytes.copy())
        return cls(
            work_cycles=work,
            tiles=tiles,
            tile_cycles=tile_cycles,
            onchip_bytes=onchip,
            label_chip_bytes=per_label,
            link_bytes=links,
            flows=flows,
        )

    def chip_matrix(self) -> np.ndarray:
        """[C, C] bytes per step: the diagonal the bytes sent on each chip, off it the link bytes
        from sender chip (row) to receiver chip (column)."""
        m = self.link_bytes.copy()
        np.fill_diagonal(m, 0.0)
        return m + np.diag(self.onchip_bytes.sum(axis=0))


def critical_tiles(result: SimResult, k: int = 4) -> tuple:
    """The global tiles on the step's critical path: the (chip, tile) pairs that were the
    slowest tile of the last-arriving chip, ranked by the compute time they bound."""
    if not result.supersteps:
        return ()
    g = result.compute_critical_chip * result.tiles_per_chip + result.critical_tile
    w = np.bincount(g, weights=result.phase_s[:, PHASES.index("compute")])
    if not (w > 0).any():
        w = np.bincount(g).astype(float)
    order = np.argsort(-w, kind="stable")
    return tuple(int(t) for t in order[:k] if w[t] > 0)


def phase_spans(timeline: dict, s: int | slice, c: int) -> tuple:
    """``(phase, start, end)`` in cycles of chip ``c`` in superstep ``s`` (a slice: arrays over
    those supersteps) of a per-chip timeline
    (:attr:`SimResult.timeline`): compute, sync, exchange, links, host, in that order. The one
    definition the pictures and the trace draw from."""
    rel = timeline["release"][s, c]
    exe = rel + timeline["exchange_cycles"][s, c]
    return (
        ("compute", timeline["start"][s, c], timeline["arrive"][s, c]),
        ("sync", timeline["arrive"][s, c], rel),
        ("exchange", rel, exe),
        ("links", exe, timeline["links_end"][s, c]),
        ("host", timeline["links_end"][s, c], timeline["end"][s, c]),
    )
