"""Chrome trace-event JSON (opens in Perfetto / chrome://tracing).

One process per chip. Its "BSP phases" track holds a complete ("X") slice per phase of every
superstep, named ``<superstep label> · <phase>`` (e.g. ``fwd: state update · compute``), so the
timeline reads as the program; the phase is also the slice's category. Per chip, a ``bytes``
counter track: bytes the chip sends on its own exchange fabric, over its links and to the host
in each superstep (the definitions of :class:`tilesim.outputs.records.ProgramDigest`; their sums are the
run's ``bytes`` totals). Every IPU-Link transfer is a flow arrow (``ph`` s/f) from the sending
chip's ``links`` slice to the receiving chip's. Tile tracks show chosen tiles' own compute in
every superstep; by default the step's critical tiles (:func:`tilesim.outputs.records.critical_tiles`).
"""

from __future__ import annotations

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.io import atomic_write_text, dumps_json
from tilesim.outputs.records import PHASES, ProgramDigest, SimResult, critical_tiles, phase_spans, whole_bytes

__all__ = ["trace_events", "write_trace", "detail_chips", "MAX_FLOW_ARROWS", "MAX_PHASE_SLICES"]

# flow arrows drawn at most (a 64-chip step can have ~10^5 link transfers; Perfetto slows down)
MAX_FLOW_ARROWS = 20000
# phase slices at most (~120 B of JSON each): beyond, only the critical chips get every superstep's phases
MAX_PHASE_SLICES = 400_000
_EPS_US = 1e-3  # flow ends sit this far inside their slices so that they bind to them


def _label_runs(label_id: np.ndarray) -> list:
    """(first, last + 1) of every run of consecutive supersteps with one label."""
    if not label_id.size:
        return []
    cut = np.flatnonzero(np.diff(label_id) != 0) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [label_id.size]])
    return list(zip(starts.tolist(), ends.tolist()))


def detail_chips(result: SimResult, S: int, max_slices: int) -> tuple:
    """The chips whose every superstep gets its phase slices within ``max_slices`` slices (4 per
    superstep and chip): all of them if they fit, else the chips the step's critical path runs
    through (by compute time bound, then chip 0)."""
    C = result.chips
    per_chip = 4 * max(S, 1)
    if per_chip * C <= max_slices:
        return tuple(range(C))
    k = max(1, max_slices // per_chip)
    w = np.bincount(result.compute_critical_chip[:S], weights=result.time_s[:S], minlength=C)
    order = [int(c) for c in np.argsort(-w, kind="stable")]
    return tuple(sorted(order[:k]))


def _process_events(C: int, detail: tuple) -> list:
    """Metadata naming each chip's process (detail chips: phase slices; others: runs of one
    label) and its BSP thread."""
    ev: list = []
    for c in range(C):
        ev.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": c,
                "args": {"name": f"chip {c}" + ("" if c in detail else " (runs of one label)")},
            }
        )
        ev.append({"ph": "M", "name": "process_sort_index", "pid": c, "args": {"sort_index": c}})
        ev.append({"ph": "M", "name": "thread_name", "pid": c, "tid": 0, "args": {"name": "BSP phases"}})
    return ev


def _run_slices(result: SimResult, tl: dict, runs: list, coarse: list, us: float) -> list:
    """One slice per run of supersteps with one label on every coarse chip (start of its first
    superstep to end of its last)."""
    ev: list = []
    for s0, s1 in runs:
        label = result.labels[int(result.label_id[s0])]
        for c in coarse:
            t0, t1 = tl["start"][s0, c], tl["end"][s1 - 1, c]
            if t1 - t0 > 0:
                ev.append(
                    {
                        "ph": "X",
                        "name": f"{label} x {s1 - s0}",
                        "cat": "run",
                        "pid": c,
                        "tid": 0,
                        "ts": t0 * us,
                        "dur": (t1 - t0) * us,
                        "args": {"supersteps": f"{s0}..{s1 - 1}", "label": label},
                    }
                )
    return ev


def _phase_slices(result: SimResult, tl: dict, S: int, detail: tuple, booked, us: float) -> list:
    """A slice per BSP phase of every superstep on every detail chip (compute of a host step is ``host``)."""
    ev: list = []
    for s in range(S):
        label = result.labels[int(result.label_id[s])]
        for c in detail:
            for phase, t0, t1 in phase_spans(tl, s, c):
                if t1 - t0 > 0:
                    ph = booked[s] if phase == "compute" else phase
                    ev.append(
                        {
                            "ph": "X",
                            "name": f"{label} · {ph}",
                            "cat": ph,
                            "pid": c,
                            "tid": 0,
                            "ts": t0 * us,
                            "dur": (t1 - t0) * us,
                            "args": {"superstep": s, "label": label, "phase": ph},
                        }
                    )
    return ev


def _byte_counters(
    result: SimResult, tl: dict, digest, S: int, detail: tuple, coarse: list, runs: list, us: float
) -> list:
    """Byte counters: per chip (per superstep on detail chips, per run elsewhere) when ``digest`` says which
    chip sent what, else the system's total per superstep on chip 0."""
    ev: list = []
    # counters: per chip when the program says which chip sent what, else the system's total on chip 0
    if digest is not None:
        sent_links = np.zeros((result.supersteps, result.chips))
        fs, fsrc, _, fb = digest.flows
        np.add.at(sent_links, (fs, fsrc), fb)
        for s in range(S):
            for c in detail:
                ev.append(
                    {
                        "ph": "C",
                        "name": "bytes",
                        "pid": c,
                        "ts": tl["start"][s, c] * us,
                        "args": {
                            "onchip": whole_bytes(digest.onchip_bytes[s, c]),
                            "links": whole_bytes(sent_links[s, c]),
                        },
                    }
                )
        for s0, s1 in runs:
            for c in coarse:
                ev.append(
                    {
                        "ph": "C",
                        "name": "bytes",
                        "pid": c,
                        "ts": tl["start"][s0, c] * us,
                        "args": {
                            "onchip": whole_bytes(digest.onchip_bytes[s0:s1, c].sum()),
                            "links": whole_bytes(sent_links[s0:s1, c].sum()),
                        },
                    }
                )
    else:
        for s in range(S):
            ev.append(
                {
                    "ph": "C",
                    "name": "bytes (all chips)",
                    "pid": 0,
                    "ts": result.start_s[s] * 1e6,
                    "args": {
                        "onchip": whole_bytes(result.bytes_onchip[s]),
                        "links": whole_bytes(result.bytes_links[s]),
                    },
                }
            )
    return ev


def _host_counters(result: SimResult, tl: dict, S: int, us: float) -> list:
    """A host-bytes counter at the end of the link phase of every superstep that moves host bytes."""
    ev: list = []
    hs = np.flatnonzero(result.bytes_host[:S] > 0)
    for s in hs.tolist():
        ev.append(
            {
                "ph": "C",
                "name": "host bytes",
                "pid": 0,
                "ts": tl["links_end"][s].min() * us,
                "args": {"host": float(result.bytes_host[s])},
            }
        )
    return ev


def _flow_arrows(result: SimResult, tl: dict, digest, S: int, us: float) -> tuple:
    """``(events, count)``: a flow arrow (send to receive) for each of the first :data:`MAX_FLOW_ARROWS`
    inter-chip flows of the traced supersteps."""
    ev: list = []
    n_arrows = 0
    fs, fsrc, fdst, fb = digest.flows
    for i in np.flatnonzero(fs < S)[:MAX_FLOW_ARROWS]:
        s, a, b = int(fs[i]), int(fsrc[i]), int(fdst[i])
        t_send = (tl["release"][s, a] + tl["exchange_cycles"][s, a]) * us
        t_recv = tl["links_end"][s, b] * us
        label = result.labels[int(result.label_id[s])]
        common = {"name": f"{label}: {fb[i]:,.0f} B chip {a} -> {b}", "cat": "ipu-link", "id": int(i)}
        ev.append({**common, "ph": "s", "pid": a, "tid": 0, "ts": t_send + _EPS_US})
        ev.append({**common, "ph": "f", "bp": "e", "pid": b, "tid": 0, "ts": max(t_recv - _EPS_US, t_send)})
        n_arrows += 1
    return ev, n_arrows


def _tile_tracks(result: SimResult, tl: dict, digest, S: int, T: int, us: float) -> list:
    """A thread per tile of ``digest`` (critical tiles marked) with a slice for every superstep it computes in."""
    ev: list = []
    crit = set(critical_tiles(result))
    for k, g in enumerate(digest.tiles):
        c, t = divmod(int(g), T)
        tid = 1 + t
        ev.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": c,
                "tid": tid,
                "args": {"name": f"tile {t}" + (" (critical)" if g in crit else "")},
            }
        )
        cyc = digest.tile_cycles[:S, k]
        for s in np.flatnonzero(cyc > 0).tolist():
            ev.append(
                {
                    "ph": "X",
                    "name": result.labels[int(result.label_id[s])],
                    "cat": "tile",
                    "pid": c,
                    "tid": tid,
                    "ts": tl["start"][s, c] * us,
                    "dur": float(cyc[s]) * us,
                }
            )
    return ev


def trace_events(
    result: SimResult, program=None, tiles=(), max_supersteps: int = 20000, max_slices: int = MAX_PHASE_SLICES
) -> dict:
    """Build the trace document of ``result``; ``program`` (a :class:`tilesim.program.Program`
    or its :class:`ProgramDigest`) adds per-chip byte counters, link flow arrows and tile
    tracks for global ``tiles`` (default: the step's critical tiles).

    Size bound (a 64-chip step has ~7,700 supersteps x 64 chips): phase slices for every
    superstep go to :func:`detail_chips` only, within ``max_slices``; every other chip gets one
    slice per run of supersteps with one label (its start to its end, all phases), and its byte
    counters summed per run."""
    tl = result.timeline
    if tl is None:
        raise ConfigError(config_message("result.timeline", None, "is missing", "simulate with keep_timeline=True"))
    us = 1e6 / result.clock_hz
    S = min(result.supersteps, max_supersteps)
    C, T = result.chips, result.tiles_per_chip
    tiles = tuple(int(t) for t in tiles) or critical_tiles(result)
    digest = None if program is None else ProgramDigest.of(program, tiles)
    booked = result.booked_phase()
    detail = detail_chips(result, S, max_slices)
    coarse = [c for c in range(C) if c not in set(detail)]
    runs = _label_runs(result.label_id[:S]) if coarse else []
    ev = _process_events(C, detail)
    ev += _run_slices(result, tl, runs, coarse, us)
    ev += _phase_slices(result, tl, S, detail, booked, us)
    ev += _byte_counters(result, tl, digest, S, detail, coarse, runs, us)
    ev += _host_counters(result, tl, S, us)
    n_arrows = 0
    if digest is not None:
        arrows, n_arrows = _flow_arrows(result, tl, digest, S, us)
        ev += arrows
        ev += _tile_tracks(result, tl, digest, S, T, us)
    meta = {
        "supersteps_in_trace": S,
        "supersteps_total": result.supersteps,
        "machine": result.machine_name,
        "chips_with_phase_slices": list(detail),
        "tile_tracks": [int(t) for t in (digest.tiles if digest is not None else ())],
        "flow_arrows": n_arrows,
        "phases": list(PHASES),
    }
    return {"traceEvents": ev, "displayTimeUnit": "ns", "otherData": meta}


def write_trace(path, result: SimResult, program=None, tiles=(), max_supersteps: int = 20000):
    """Write :func:`trace_events` to ``path`` (atomically)."""
    atomic_write_text(path, dumps_json(trace_events(result, program, tiles, max_supersteps)))
    return path
