"""The NoC messages of the tt-metal stack's kernels, through the NoC model (:mod:`tilesim.models.noc.model`).

A writer kernel pays each message's fixed cost (issue, the multicast path, the completion its barrier
waits for) in its own stream: the model's cycles of that message at one byte; the message's bytes are the
program's per-tile exchange bytes, which the fabric times (:mod:`tilesim.machine.fabric`), so nothing is
counted twice and no constant of this stack stands in for the NoC model's. A reader gathering weight rows
keeps many reads in flight: each costs the model's stream cycles of a read (its issue). A multicast goes to
rectangles of the chip's core grid that exclude the sender (TT-Metal's rule, the model's
``multicast_rectangle``); a destination set that is no such rectangle is decomposed into several
(``cover_rectangles``), each its own message. The model's constants are fitted on Wormhole; Blackhole uses
them too (an assumption, EVIDENCE.md "Tensix SNN costs").
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from tilesim.models.noc.model import (
    Transfer,
    cover_rectangles,
    load_costs,
    message_cycles,
    round_trip_hops,
    stream_cycles,
)

__all__ = [
    "noc_costs",
    "message_fixed",
    "max_packet_bytes",
    "gather_fixed",
    "rectangles_of",
    "multicast_messages",
    "unicast_messages",
]


@lru_cache(maxsize=1)
def noc_costs():
    """The NoC model's shipped constants (``models/noc/costs.toml``)."""
    return load_costs()


@lru_cache(maxsize=4096)
def message_fixed(dests: int, hops: int | None = None, transactions: int = 1) -> float:
    """Fixed cycles of ``transactions`` messages to ``dests`` cores (a multicast when > 1, linked when more
    than one: TT-Metal holds the path for all but the last) issued back to back, then one barrier: their
    cycles at one byte each."""
    k = max(int(transactions), 1)
    return float(message_cycles(noc_costs(), 1, k, int(dests), linked=k > 1 and dests > 1, hops=hops))


def max_packet_bytes() -> int:
    """The largest NoC packet (``max_packet_bytes``: a longer message goes as several transactions)."""
    return int(noc_costs().max_packet_bytes)


@lru_cache(maxsize=1)
def gather_fixed() -> float:
    """Cycles of one read among many in flight (a reader gathering weight rows): the read's issue."""
    return float(stream_cycles(noc_costs(), Transfer(1, 1, 1, "unicast", read=True)))


@lru_cache(maxsize=8192)
def _rects(dests: tuple, cols: int, rows: int, sender: int) -> tuple:
    cores = [(t % cols, t // cols) for t in dests]
    return cover_rectangles(cols, rows, cores, None if sender < 0 else (sender % cols, sender // cols))


def rectangles_of(dests, cols: int, rows: int, sender: int | None = None) -> tuple:
    """The multicast rectangles (:class:`tilesim.models.noc.model.Rectangle`) covering chip-local tiles
    ``dests`` from ``sender`` (decomposed where they form no one rectangle excluding the sender)."""
    return _rects(tuple(sorted(int(t) for t in dests)), int(cols), int(rows), -1 if sender is None else int(sender))


def multicast_messages(
    dests_local: np.ndarray, senders_local: np.ndarray, cols: int, rows: int, transactions: int = 1
) -> np.ndarray:
    """Per sender (chip-local tile), the fixed cycles of multicasting one list of ``transactions`` packets to
    ``dests_local``: one (linked) message per rectangle (a rectangle of one core is a unicast), each with its
    own round trip."""
    d = tuple(sorted(int(t) for t in dests_local))
    out = np.zeros(len(senders_local))
    for i, s in enumerate(senders_local):
        s = int(s)
        for r in rectangles_of(d, cols, rows, s):
            hops = round_trip_hops(noc_costs(), (s % cols, s // cols), r.cores())
            out[i] += message_fixed(r.count, hops, transactions)
    return out


def unicast_messages(dests_local: np.ndarray, senders_local: np.ndarray, cols: int) -> np.ndarray:
    """Per sender (chip-local tile), the fixed cycles of one unicast message to each of ``dests_local``
    (the other cores' own pieces, e.g. input-gradient partials to their owners), issued back to back with one
    barrier; the round trip spans a ring per dimension in which some receiver differs from the sender."""
    d = np.asarray(dests_local, np.int64)
    out = np.zeros(len(senders_local))
    if not d.size:
        return out
    c = noc_costs()
    dx, dy = d % cols, d // cols
    for i, s in enumerate(np.asarray(senders_local, np.int64)):
        hops = c.noc_cols * bool((dx != s % cols).any()) + c.noc_rows * bool((dy != s // cols).any())
        out[i] = message_fixed(1, int(hops), int(d.size))
    return out
