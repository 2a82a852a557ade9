"""The NoC messages of the tt-metal stack's kernels, through the NoC model (:mod:`tilesim.models.noc`).

A writer kernel pays each message's fixed cost (issue, the path set-up, the barrier before its
circular-buffer page is reused) in its own stream; the message's bytes are the program's per-tile
exchange bytes, which the fabric times (:mod:`tilesim.machine.fabric`): so the kernels take
``message_cycles(0, ...)`` from the NoC model, never a constant of their own. A multicast goes to
rectangles of the chip's core grid that exclude the sender (TT-Metal's rule): a destination set that
is no such rectangle is decomposed into several (``multicast_rectangle``), each its own message.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from tilesim.models.snn.stacks.tt_noc_standin import NocCosts, message_cycles, multicast_rectangle

__all__ = ["NOC", "message_fixed", "gather_fixed", "rectangles_of", "multicast_messages"]

NOC = NocCosts()
"""The NoC model's constants (its module gives their sources)."""


def message_fixed(dests: int, linked: bool = False) -> float:
    """Fixed cycles of one message to ``dests`` cores (a multicast when > 1)."""
    return float(message_cycles(0.0, dests, linked=linked, costs=NOC))


def gather_fixed() -> float:
    """Fixed cycles of one read among many in flight (a reader gathering weight rows)."""
    return float(message_cycles(0.0, 1, pipelined=True, costs=NOC))


@lru_cache(maxsize=4096)
def _rects(dests: tuple, cols: int, sender: int) -> tuple:
    return multicast_rectangle(dests, cols, sender, decompose=True)


def rectangles_of(dests, cols: int, sender: int | None = None) -> tuple:
    """The multicast rectangles covering chip-local tiles ``dests`` from ``sender`` (decomposed where
    they form no one rectangle excluding the sender)."""
    return _rects(tuple(sorted(int(t) for t in dests)), int(cols), -1 if sender is None else int(sender))


def multicast_messages(dests_local: np.ndarray, senders_local: np.ndarray, cols: int) -> np.ndarray:
    """Per sender (chip-local tile), the fixed cycles of multicasting one list to ``dests_local`` (its
    rectangles, one message each; a rectangle of one core is a unicast)."""
    d = tuple(sorted(int(t) for t in dests_local))
    out = np.zeros(len(senders_local))
    for i, s in enumerate(senders_local):
        rects = rectangles_of(d, cols, int(s) if int(s) in d else None)
        out[i] = sum(message_fixed(r.cores) for r in rects)
    return out
