"""STAND-IN for :mod:`tilesim.models.noc` (branch h-noc), to be deleted when that module is merged.

The same names as its announced API (``NocCosts``, ``message_cycles``, ``multicast_rectangle``) with
the shape of Tenstorrent's own measurements (../shared/reference/calibration/tenstorrent-noc/README.md:
a single 64 B write with its barrier 206-296 cycles, 256 pipelined writes ~23 cycles each, a non-linked
multicast ~170-280 cycles per message, a linked one ~24-70; ~31 B/cycle unicast, ~15-19 B/cycle to a
multicast rectangle). Only :mod:`tilesim.models.snn.stacks.tt_noc` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesim.errors import MappingError

__all__ = ["NocCosts", "message_cycles", "multicast_rectangle", "Rect"]


@dataclass(frozen=True)
class NocCosts:
    unicast_cycles: float = 250.0  # a lone write with its barrier
    pipelined_cycles: float = 23.0  # one of many writes in flight
    multicast_cycles: float = 225.0  # a non-linked multicast message
    linked_cycles: float = 47.0  # a linked multicast message
    unicast_bytes_per_cycle: float = 31.0
    multicast_bytes_per_cycle: float = 17.0


@dataclass(frozen=True)
class Rect:
    """Columns x0..x1, rows y0..y1 (inclusive) of a chip's core grid."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def cores(self) -> int:
        return (self.x1 - self.x0 + 1) * (self.y1 - self.y0 + 1)


def message_cycles(nbytes: float, dests: int = 1, linked: bool = False, pipelined: bool = False,
                   costs: NocCosts = NocCosts()) -> float:  # fmt: skip
    """Cycles of one message of ``nbytes`` to ``dests`` cores: its fixed cost plus its bytes at the rate."""
    if dests <= 1:
        fixed = costs.pipelined_cycles if pipelined else costs.unicast_cycles
        return fixed + nbytes / costs.unicast_bytes_per_cycle
    fixed = costs.linked_cycles if linked else costs.multicast_cycles
    return fixed + nbytes / costs.multicast_bytes_per_cycle


def multicast_rectangle(dests, cols: int, sender: int | None = None, decompose: bool = True) -> tuple[Rect, ...]:
    """The rectangles (TT-Metal: a multicast goes to a rectangle that excludes the sender) that cover the
    chip-local tiles ``dests`` exactly: one if they form one, else (``decompose``) runs of whole rows and
    row pieces; refused (MappingError) with ``decompose=False``."""
    d = sorted({int(t) for t in dests} - ({int(sender)} if sender is not None else set()))
    if not d:
        return ()
    xs, ys = [t % cols for t in d], [t // cols for t in d]
    r = Rect(min(xs), min(ys), max(xs), max(ys))
    inside = sender is not None and r.x0 <= sender % cols <= r.x1 and r.y0 <= sender // cols <= r.y1
    if r.cores == len(d) and not inside:
        return (r,)
    if not decompose:
        raise MappingError(
            f"multicast to {len(d)} cores: not a rectangle excluding the sender (TT-Metal's rule); "
            "decompose it or place the receivers on a rectangle"
        )
    out, run = [], [d[0]]
    for t in d[1:]:
        if t == run[-1] + 1 and t // cols == run[-1] // cols:
            run.append(t)
        else:
            out.append(Rect(run[0] % cols, run[0] // cols, run[-1] % cols, run[0] // cols))
            run = [t]
    out.append(Rect(run[0] % cols, run[0] // cols, run[-1] % cols, run[0] // cols))
    merged: list[Rect] = []  # full-width row pieces stacked vertically are one rectangle
    for q in out:
        p = merged[-1] if merged else None
        if p and p.x0 == q.x0 and p.x1 == q.x1 and q.y0 == p.y1 + 1:
            merged[-1] = Rect(p.x0, p.y0, p.x1, q.y1)
        else:
            merged.append(q)
    return tuple(merged)
