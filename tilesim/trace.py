"""Chrome trace-event JSON (opens in Perfetto / chrome://tracing).

One process per chip, one thread track for its BSP phases (compute, sync, exchange, links,
host as complete "X" slices named after the superstep's label), counters for bytes moved, and
optional per-tile tracks showing each chosen tile's own compute time in every superstep.
"""
from __future__ import annotations

import json

import numpy as np

from tilesim.io import atomic_write_text
from tilesim.records import SimResult

__all__ = ["trace_events", "write_trace"]


def trace_events(result: SimResult, program=None, tiles=(), max_supersteps: int = 20000) -> dict:
    """Build the trace document. ``tiles`` are global tile ids given their own tracks."""
    tl = result.timeline
    if tl is None:
        raise ValueError("the result has no timeline: simulate with keep_timeline=True")
    us = 1e6 / result.clock_hz
    S = min(result.supersteps, max_supersteps)
    ev = []
    for c in range(result.chips):
        ev.append({"ph": "M", "name": "process_name", "pid": c, "args": {"name": f"chip {c}"}})
        ev.append({"ph": "M", "name": "thread_name", "pid": c, "tid": 0, "args": {"name": "BSP phases"}})
    bounds = [("compute", "start", "arrive"), ("sync", "arrive", "release"), ("exchange", "release", None),
              ("links", None, "links_end"), ("host", "links_end", "end")]
    ex = tl["exchange_cycles"]
    for s in range(S):
        label = result.labels[int(result.label_id[s])]
        for c in range(result.chips):
            rel = tl["release"][s, c]
            t = {"start": tl["start"][s, c], "arrive": tl["arrive"][s, c], "release": rel,
                 "links_end": tl["links_end"][s, c], "end": tl["end"][s, c]}
            for phase, a, b in bounds:
                t0 = t[a] if a else rel + ex[s, c]
                t1 = t[b] if b else rel + ex[s, c]
                if t1 - t0 > 0:
                    ev.append({"ph": "X", "name": f"{phase}", "cat": phase, "pid": c, "tid": 0,
                               "ts": t0 * us, "dur": (t1 - t0) * us,
                               "args": {"superstep": s, "label": label}})
        ts = result.start_s[s] * 1e6
        ev.append({"ph": "C", "name": "bytes", "pid": 0, "ts": ts,
                   "args": {"onchip": float(result.bytes_onchip[s]), "links": float(result.bytes_links[s]),
                            "host": float(result.bytes_host[s])}})
    if tiles and program is not None:
        T = result.tiles_per_chip
        for g in tiles:
            c, t = divmod(int(g), T)
            tid = 1 + t
            ev.append({"ph": "M", "name": "thread_name", "pid": c, "tid": tid, "args": {"name": f"tile {t}"}})
            cyc = program.compute_cycles[:S, g]
            for s in np.flatnonzero(cyc > 0):
                ev.append({"ph": "X", "name": result.labels[int(result.label_id[s])], "cat": "tile",
                           "pid": c, "tid": tid, "ts": tl["start"][s, c] * us, "dur": float(cyc[s]) * us})
    meta = {"supersteps_in_trace": S, "supersteps_total": result.supersteps, "machine": result.machine_name}
    return {"traceEvents": ev, "displayTimeUnit": "ns", "otherData": meta}


def write_trace(path, result: SimResult, program=None, tiles=(), max_supersteps: int = 20000):
    atomic_write_text(path, json.dumps(trace_events(result, program, tiles, max_supersteps)))
    return path
