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

import json
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SimResult", "ChipWork", "ChipTimeline", "PHASES"]

PHASES = ("compute", "sync", "exchange", "links", "host")


@dataclass(frozen=True, eq=False, slots=True)
class ChipWork:
    """A program's tiles reduced to chips. Arrays are ``[S, C]`` (superstep, chip) unless noted."""

    compute: np.ndarray          # cycles of the chip's slowest tile
    critical_tile: np.ndarray    # that tile (index on the chip)
    exchange: np.ndarray         # on-chip exchange cycles (0 = no exchange phase)
    exchange_tile: np.ndarray    # the tile whose port bounds the exchange
    bytes_onchip: np.ndarray     # [S] bytes sent over the on-chip fabric


@dataclass(frozen=True, eq=False, slots=True)
class ChipTimeline:
    """When every chip passes each point of every superstep: ``[S, C]`` arrays in cycles of the
    chip clock (see :mod:`tilesim.engine` for the time model)."""

    exchange: np.ndarray         # exchange phase cycles, including the program's exchange extra
    start: np.ndarray            # the chip starts computing
    arrive: np.ndarray           # the chip arrives at the sync
    release: np.ndarray          # the sync releases the chip
    links_end: np.ndarray        # on-chip exchange and the chip's cross-chip flows are done
    end: np.ndarray              # host transfers done: the superstep ends on this chip
    arriver: np.ndarray          # int: the chip of the sync group that arrived last
    link_group_bytes: dict       # bytes per directed link group (:class:`tilesim.fabric.LadderLinks`)

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
    phase_s: np.ndarray               # [S, 5] in PHASES order
    critical_chip: np.ndarray
    compute_critical_chip: np.ndarray
    critical_tile: np.ndarray         # tile (on compute_critical_chip) with the most compute
    exchange_critical_tile: np.ndarray
    bytes_onchip: np.ndarray
    bytes_links: np.ndarray
    bytes_host: np.ndarray
    link_group_bytes: dict = field(default_factory=dict)
    timeline: dict | None = None      # per-chip [S, C] arrays (cycles) for traces and pictures

    # -------------------------------------------------------------------------------------
    @classmethod
    def from_timeline(cls, *, program, machine, work: ChipWork, timeline: ChipTimeline,
                      keep_timeline: bool = True) -> SimResult:
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
        phases = np.stack([
            comp[idx, a],
            t_release[idx, f] - t_arrive[idx, a],
            ex[idx, f],
            t_links[idx, f] - (t_release[idx, f] + ex[idx, f]),
            t_end[idx, f] - t_links[idx, f],
        ], axis=1) if S else np.zeros((0, 5))
        phases = np.maximum(phases, 0.0)
        overlap = np.maximum(prev - t_start[idx, a], 0.0) if S else np.zeros(0)
        cum = np.cumsum(phases, axis=1)
        cum = np.maximum(cum - overlap[:, None], 0.0)
        phases = np.diff(np.concatenate([np.zeros((S, 1)), cum], axis=1), axis=1)
        time = frontier - prev
        # the attribution sums to the frontier's advance; absorb float rounding in the last phase used
        resid = time - phases.sum(axis=1)
        phases[:, 0] += resid
        bl = np.zeros(S)
        if program.flow_step.size:
            np.add.at(bl, program.flow_step, program.flow_bytes)
        bh = np.zeros(S)
        if program.host_step.size:
            np.add.at(bh, program.host_step, program.host_bytes)
        arrays = None
        if keep_timeline:
            arrays = {"start": t_start, "arrive": t_arrive, "release": t_release, "links_end": t_links,
                        "end": t_end, "exchange_cycles": ex, "compute_cycles": comp}
        return cls(program_name=program.name, machine_name=machine.name, clock_hz=clock, chips=machine.chips,
                   tiles_per_chip=machine.tiles_per_chip, labels=tuple(program.labels),
                   label_id=program.label_id.copy(), start_s=prev / clock, time_s=time / clock,
                   phase_s=phases / clock, critical_chip=f, compute_critical_chip=a,
                   critical_tile=crit_tile[idx, a] if S else np.zeros(0, np.int64),
                   exchange_critical_tile=ex_tile[idx, f] if S else np.zeros(0, np.int64),
                   bytes_onchip=bytes_onchip, bytes_links=bl, bytes_host=bh,
                   link_group_bytes=timeline.link_group_bytes, timeline=arrays)

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
        """Per label: supersteps, seconds, phase split, and the most frequent critical tile."""
        out = {}
        for i, lab in enumerate(self.labels):
            m = self.label_id == i
            if not m.any():
                continue
            chips_tiles = self.compute_critical_chip[m] * self.tiles_per_chip + self.critical_tile[m]
            top = int(np.bincount(chips_tiles).argmax())
            out[lab] = {"supersteps": int(m.sum()), "time_s": float(self.time_s[m].sum()),
                        "breakdown_s": self.breakdown_s(m),
                        "critical_chip": top // self.tiles_per_chip, "critical_tile": top % self.tiles_per_chip}
        return out

    def superstep(self, s: int) -> dict:
        return {"index": s, "label": self.labels[int(self.label_id[s])], "start_s": float(self.start_s[s]),
                "time_s": float(self.time_s[s]),
                "breakdown_s": {p: float(v) for p, v in zip(PHASES, self.phase_s[s])},
                "critical_chip": int(self.critical_chip[s]),
                "compute_critical_chip": int(self.compute_critical_chip[s]),
                "critical_tile": int(self.critical_tile[s]),
                "exchange_critical_tile": int(self.exchange_critical_tile[s]),
                "bytes_onchip": float(self.bytes_onchip[s]), "bytes_links": float(self.bytes_links[s]),
                "bytes_host": float(self.bytes_host[s])}

    def to_dict(self, supersteps: int = 0) -> dict:
        """Summary; ``supersteps`` > 0 also lists the first that many supersteps."""
        d = {"program": self.program_name, "machine": self.machine_name, "chips": self.chips,
             "tiles_per_chip": self.tiles_per_chip, "supersteps": self.supersteps,
             "total_s": self.total_s, "breakdown_s": self.breakdown_s(),
             "bytes": {"onchip": float(self.bytes_onchip.sum()), "links": float(self.bytes_links.sum()),
                       "host": float(self.bytes_host.sum())},
             "by_label": self.by_label(),
             "busiest_link_groups": [{"group": "/".join(map(str, g)), "bytes": b} for g, b in
                                     sorted(self.link_group_bytes.items(), key=lambda kv: -kv[1])[:5]]}
        if supersteps:
            d["superstep_list"] = [self.superstep(s) for s in range(min(supersteps, self.supersteps))]
        return d

    def to_json(self, path=None, supersteps: int = 0) -> str:
        text = json.dumps(self.to_dict(supersteps), indent=2)
        if path is not None:
            from tilesim.io import atomic_write_text
            atomic_write_text(path, text)
        return text

    def to_dataframe(self):
        """One row per superstep (requires pandas)."""
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            from tilesim.errors import ConfigError
            raise ConfigError("to_dataframe needs pandas: pip install pandas") from None
        cols = {"label": [self.labels[i] for i in self.label_id], "start_s": self.start_s, "time_s": self.time_s}
        for i, p in enumerate(PHASES):
            cols[f"{p}_s"] = self.phase_s[:, i]
        cols.update(critical_chip=self.critical_chip, critical_tile=self.critical_tile,
                    bytes_onchip=self.bytes_onchip, bytes_links=self.bytes_links, bytes_host=self.bytes_host)
        return pd.DataFrame(cols)
