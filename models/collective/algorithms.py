"""What a collective moves, as paths over a line or ring of chips, and a NumPy executor that
plays the paths on arrays (the twin that shows the paths compute the collective).

A :class:`Path` starts on chip ``src`` and follows the topology's route to chip ``dst`` (the
route :class:`tilesim.machine.fabric.EthernetLinks` gives: along the line, the shorter way round a ring,
ties the positive way), carrying one chunk. Every chip it passes acts on it:

* a **gather** path drops a copy of its chunk on every chip it passes (a multicast along the
  route: each link carries the chunk once);
* a **reduce** path starts with the source's part of its chunk and adds each chip's part as it
  passes, delivering the partial sum to ``dst`` (its owner);
* a **direct** path delivers its chunk only to ``dst`` (all_to_all).

The algorithms (per-device sizes as in the CCL benchmark, ``N`` chips, chunk = 1/N):

* ``all_gather`` (input: one shard per chip): on a line each chip sends its shard both ways to the
  ends; on a ring ``ceil((N-1)/2)`` chips ahead and ``floor((N-1)/2)`` behind, so every other chip
  gets it once. The end links of a line carry ``N-1`` shards: the line's bound.
* ``reduce_scatter`` (input: the whole array on every chip, chip ``j`` ends with the sum of chunk
  ``j``): the mirror image, partial sums of chunk ``j`` flowing towards ``j`` from both sides.
* ``all_reduce``: reduce_scatter, then all_gather of the reduced chunks.
* ``all_to_all`` (input: N chunks per chip, chunk ``j`` for chip ``j``): one direct path per pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["OPS", "TOPOLOGIES", "Path", "phases", "paths", "execute", "reference"]

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
TOPOLOGIES = ("line", "ring")


@dataclass(frozen=True)
class Path:
    """One chunk's journey: from chip ``src`` along the route to chip ``dst``; ``kind`` is
    ``gather``, ``reduce`` or ``direct``; ``chunk`` names the data (the owner's index)."""

    src: int
    dst: int
    chunk: int
    kind: str


def phases(op: str) -> tuple[str, ...]:
    """The single-pass collectives an operation runs, in order (all_reduce is two)."""
    return ("reduce_scatter", "all_gather") if op == "all_reduce" else (op,)


def paths(op: str, n: int, topology: str) -> list[Path]:
    """The paths of one single-pass collective (:func:`phases`) on ``n`` chips."""
    out: list[Path] = []
    for c in range(n):
        if op == "all_to_all":
            out += [Path(c, d, d, "direct") for d in range(n) if d != c]
            continue
        # a ring splits the other chips into n // 2 ahead (the positive way: a tie goes that way)
        # and (n - 1) // 2 behind; reduce paths mirror gather paths, ending at the chunk's owner
        ahead, behind = n // 2, (n - 1) // 2
        if op == "all_gather":
            ends = [0, n - 1] if topology == "line" else [(c + ahead) % n, (c - behind) % n]
            out += [Path(c, e, c, "gather") for e in ends if e != c]
        else:  # reduce_scatter: partial sums of chunk c start at the far chips and flow to c
            ends = [0, n - 1] if topology == "line" else [(c - ahead) % n, (c + behind) % n]
            out += [Path(e, c, c, "reduce") for e in ends if e != c]
    return out


def _walk(route: tuple) -> list[int]:
    """The chips a route visits after its source (each link group is ``(kind, from, to)``)."""
    return [int(g[2]) for g in route]


def execute(op: str, inputs: list[np.ndarray], topology: str, route) -> list[np.ndarray]:
    """Play ``op`` on per-chip ``inputs`` by following its paths over ``route(src, dst)`` (the
    machine's link routes): what each chip holds at the end. Inputs: all_gather one shard per
    chip; reduce_scatter, all_reduce and all_to_all the whole array (N equal chunks) per chip."""
    data = [np.asarray(x, np.float64) for x in inputs]
    for phase in phases(op):
        data = _one_phase(phase, data, topology, route)
    return data


def _one_phase(op: str, data: list[np.ndarray], topology: str, route) -> list[np.ndarray]:
    n = len(data)
    if op == "all_gather":
        held = [{c: data[c]} for c in range(n)]
    else:
        chunks = [np.split(d, n) for d in data]
        held = [{c: chunks[c][c].copy()} for c in range(n)]  # each chip's own chunk stays
    for p in paths(op, n, topology):
        visits = _walk(route(p.src, p.dst))
        if p.kind == "gather":
            for chip in visits:
                held[chip][p.chunk] = data[p.src]
        elif p.kind == "direct":
            held[visits[-1]][p.src] = chunks[p.src][p.dst]
        else:
            partial = chunks[p.src][p.chunk].copy()
            for chip in visits[:-1]:
                partial = partial + chunks[chip][p.chunk]
            held[p.dst][p.chunk] = held[p.dst][p.chunk] + partial
    if op == "reduce_scatter":
        return [held[c][c] for c in range(n)]
    return [np.concatenate([held[c][k] for k in range(n)]) for c in range(n)]


def reference(op: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """What ``op`` must leave on each chip, computed directly."""
    n = len(inputs)
    if op == "all_gather":
        return [np.concatenate(inputs)] * n
    if op == "all_reduce":
        return [np.sum(inputs, axis=0)] * n
    if op == "reduce_scatter":
        return list(np.split(np.sum(inputs, axis=0), n))
    return [np.concatenate([np.split(inputs[i], n)[c] for i in range(n)]) for c in range(n)]
