"""Tensix NoC message costs: what one data-movement kernel pays to write (or read) ``transactions``
messages of ``nbytes`` each and wait for them (TT-Metal's ``noc_async_write*`` loop + barrier).

Public API (stable: the tt-metal stack codes against it)
--------------------------------------------------------
``load_costs(path=None) -> NocCosts``
    The shipped Wormhole constants (``models/noc/costs.toml``), or a user's file of the same keys.
``message_cycles(costs, nbytes, transactions=1, destinations=1, linked=False, hops=None, *,
                 multicast=None, read=False, loopback=False, same_axis=True) -> float``
    Cycles of one kernel issuing ``transactions`` messages of ``nbytes`` to ``destinations`` cores and
    waiting for the last (one completion latency). ``destinations > 1`` (or ``multicast=True``) is one
    hardware multicast to a rectangle; ``linked=True`` holds its path across the messages (TT-Metal's
    ``linked`` flag: every message but the last). ``hops``: the round trip in NoC hops (default
    :func:`round_trip_hops` of ``same_axis``; for a multicast give ``round_trip_hops(costs, sender,
    rect.cores())``); ``loopback``: the sender is one of the receivers. Refuses (``ConfigError``)
    ``destinations`` < 1 or > :data:`MAX_DESTINATIONS`, ``nbytes`` beyond 32 bits, ``linked`` unicast.
``kernel_cycles(costs, transfers: Sequence[Transfer]) -> float``
    Several transfers issued back to back by one data mover, then one barrier:
    ``Σ stream_cycles + max completion_cycles``.
``Transfer(nbytes, transactions=1, destinations=1, mechanism="unicast", read=False, same_axis=True,
           loopback=False, hops=None)``: one kernel's messages (``mechanism`` in :data:`MECHANISMS`).
``stream_cycles(costs, t)``, ``completion_cycles(costs, t)``, ``transaction_cycles(costs, t, linked)``:
    the terms below; ``stream_bytes_per_cycle(costs, t)``: one sender's sustained rate.
``round_trip_hops(costs, sender=None, receivers=(), same_axis=True) -> int``
    Hops of a write and its response on the unidirectional torus.
``Rectangle(x0, y0, x1, y1)``: an inclusive rectangle of cores (``cols``, ``rows``, ``count``,
    ``cores()``, ``contains(core)``); cores are ``(x, y)`` = (column, row) of the Tensix grid.
``multicast_rectangle(cols, rows, sender, receivers, loopback=False) -> Rectangle``
    The rectangle a multicast from ``sender`` to exactly ``receivers`` uses; raises
    :class:`MappingError` if they are not a full rectangle of the ``cols`` x ``rows`` grid, or include
    the sender (unless ``loopback``: then they must include it), as ``noc_async_write_multicast``
    requires.
``cover_rectangles(cols, rows, receivers, sender=None) -> tuple[Rectangle, ...]``
    An arbitrary receiver set as disjoint rectangles (row-major greedy: few, never the sender), one
    multicast each; ``receivers_cycles(costs, cols, rows, sender, receivers, nbytes, transactions=1,
    linked=False)`` times them as one kernel.

The equations (cycles of the chip clock; every constant in :class:`NocCosts`)
-------------------------------------------------------------------------------
A transaction of ``b`` bytes leaves the sender's NIU as ``k = ceil(b / max_packet_bytes)`` packets
and takes ``D = b / BW + k · packet_cycles`` to inject (``BW``: ``write_bytes_per_cycle``, or
``read_bytes_per_cycle`` for a read). The data mover issues one transaction every ``I`` cycles at
best (``issue_cycles``; ``read_issue_cycles``), so a stream of transactions costs per transaction::

    unicast, linked multicast (path held):  s = max(I, D)
    non-linked multicast:                   s = max(I, D + k · A),
    A = mcast_path_cycles + mcast_dest_cycles · d + (mcast_exclude_src_cycles if the sender is not a receiver)

(``A``: each packet of a non-linked multicast reserves the virtual-channel path to the rectangle,
and its ``d`` destinations answer, before the next goes; a linked multicast keeps the path). The kernel::

    T = n · s                              unicast, non-linked multicast
    T = (n - 1) · s_linked + s_nonlinked   linked multicast (the last message releases the path)
    T += L,   L = latency_cycles + hop_cycles · H

``L`` is the completion of the last transaction (its response reaches the sender, the barrier sees
it); ``H`` the round-trip hops. Wormhole's NoCs are unidirectional tori, so a write and its response
together go once round every ring whose coordinate differs: ``H = noc_cols · [x differs] +
noc_rows · [y differs]`` (assumption: the response comes back on the same NoC; a same-axis pair is
taken on a row). So a single 64 B write costs ``I + L`` (206-296 cycles measured), a stream of them
``≈ I`` each (~23), a non-linked multicast ``A`` more per packet (~170-280 per message, and
``8192 / (A + 8192/BW)`` ≈ 15-19 B/cycle for large messages), a linked one ``≈ max(I, D)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tilesim.errors import ConfigError, MappingError, config_message
from tilesim.models.noc.costs import NocCosts, load_costs

__all__ = [
    "MECHANISMS",
    "MAX_BYTES",
    "MAX_TRANSACTIONS",
    "MAX_DESTINATIONS",
    "NocCosts",
    "load_costs",
    "Transfer",
    "packets",
    "transaction_cycles",
    "stream_cycles",
    "completion_cycles",
    "kernel_cycles",
    "message_cycles",
    "stream_bytes_per_cycle",
    "round_trip_hops",
    "Rectangle",
    "multicast_rectangle",
    "cover_rectangles",
    "receivers_cycles",
]

MECHANISMS = ("unicast", "multicast", "multicast_linked")
"""How a kernel's messages travel: one destination each; one hardware multicast per message to a
rectangle; the same with the path held between messages (TT-Metal's ``linked``)."""


MAX_BYTES = 2**32 - 1
"""Largest transaction: TT-Metal's ``noc_async_write`` / ``noc_async_read`` take a 32-bit size."""
MAX_TRANSACTIONS = 10**12
"""Most transactions one kernel may issue here (beyond any kernel: ~10 minutes at 1 GHz of 64 B writes)."""
MAX_DESTINATIONS = 4096
"""Most destinations one multicast may name (more cores than any Tenstorrent chip has)."""


def _whole(field: str, value, low: int, fix: str, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer() or value < low:
        raise ConfigError(config_message(field, value, f"must be a whole number >= {low}", fix))
    if high is not None and value > high:
        raise ConfigError(config_message(field, float(value), f"must be <= {high}", fix))
    return int(value)


@dataclass(frozen=True)
class Transfer:
    """One kernel's messages: ``transactions`` of ``nbytes`` each, by ``mechanism`` to
    ``destinations`` cores (unicast: 1); ``read``: the kernel reads them (unicast only);
    ``same_axis``: every receiver shares the sender's row or column; ``loopback``: the sender is one of
    the multicast's receivers; ``hops``: the round trip in NoC hops (None: from ``same_axis``)."""

    nbytes: int
    transactions: int = 1
    destinations: int = 1
    mechanism: str = "unicast"
    read: bool = False
    same_axis: bool = True
    loopback: bool = False
    hops: int | None = None

    def __post_init__(self):
        _whole("nbytes", self.nbytes, 1, "a message carries 1 B to 4 GiB (a 32-bit size)", MAX_BYTES)
        _whole("transactions", self.transactions, 1, "a kernel issues at least one transaction", MAX_TRANSACTIONS)
        _whole("destinations", self.destinations, 1, "a message goes to at least one core", MAX_DESTINATIONS)
        if self.mechanism not in MECHANISMS:
            raise ConfigError(
                config_message("mechanism", self.mechanism, f"must be one of {', '.join(MECHANISMS)}", "fix the name")
            )
        if self.mechanism == "unicast" and self.destinations != 1:
            raise ConfigError(
                config_message(
                    "destinations",
                    self.destinations,
                    "a unicast goes to one core",
                    "give one Transfer per destination, or mechanism multicast",
                )
            )
        if self.read and self.mechanism != "unicast":
            raise ConfigError(config_message("read", self.read, "a NoC read has one source", "use mechanism unicast"))
        if self.loopback and self.mechanism == "unicast":
            raise ConfigError(
                config_message("loopback", self.loopback, "applies to a multicast only", "drop it for a unicast")
            )
        if self.hops is not None:
            _whole("hops", self.hops, 0, "give the round trip in NoC hops, or None")

    @property
    def multicast(self) -> bool:
        """Whether the messages are hardware multicasts."""
        return self.mechanism != "unicast"


def packets(costs: NocCosts, nbytes: int) -> int:
    """Packets one transaction of ``nbytes`` leaves the NIU as (``ceil(nbytes / max_packet_bytes)``)."""
    return max(1, math.ceil(nbytes / costs.max_packet_bytes))


def _path_cycles(costs: NocCosts, t: Transfer) -> float:
    """``A``: one non-linked multicast packet's path reservation and its destinations' responses."""
    exclude = 0.0 if t.loopback else costs.mcast_exclude_src_cycles
    return costs.mcast_path_cycles + costs.mcast_dest_cycles * t.destinations + exclude


def transaction_cycles(costs: NocCosts, t: Transfer, linked: bool) -> float:
    """``s``: one transaction of a stream (``max(I, D)``; ``+ k · A`` inside the max for a multicast
    whose path is not held, ``linked`` False)."""
    k = packets(costs, t.nbytes)
    bw = costs.read_bytes_per_cycle if t.read else costs.write_bytes_per_cycle
    issue = costs.read_issue_cycles if t.read else costs.issue_cycles
    data = t.nbytes / bw + k * costs.packet_cycles
    if t.multicast and not linked:
        data += k * _path_cycles(costs, t)
    return max(issue, data)


def stream_cycles(costs: NocCosts, t: Transfer) -> float:
    """The kernel's issue-and-inject time without the final completion: ``n · s`` (linked multicast:
    ``(n - 1) · s_linked + s_nonlinked``)."""
    n = t.transactions
    if t.mechanism == "multicast_linked":
        return (n - 1) * transaction_cycles(costs, t, True) + transaction_cycles(costs, t, False)
    return n * transaction_cycles(costs, t, False)


def round_trip_hops(costs: NocCosts, sender=None, receivers: Iterable = (), same_axis: bool = True) -> int:
    """Hops of a write and its response on the unidirectional torus: a whole ring (``noc_cols`` or
    ``noc_rows``) per dimension in which some receiver's coordinate differs from the sender's. Without
    coordinates: one ring (a row: ``noc_cols``) when ``same_axis``, both rings otherwise."""
    recv = list(receivers)
    if sender is None or not recv:
        return costs.noc_cols if same_axis else costs.noc_cols + costs.noc_rows
    sx, sy = sender
    dx = any(x != sx for x, _ in recv)
    dy = any(y != sy for _, y in recv)
    return costs.noc_cols * dx + costs.noc_rows * dy


def completion_cycles(costs: NocCosts, t: Transfer) -> float:
    """``L = latency_cycles + hop_cycles · H``: the last transaction's response and the barrier."""
    hops = t.hops if t.hops is not None else round_trip_hops(costs, same_axis=t.same_axis)
    return costs.latency_cycles + costs.hop_cycles * hops


def kernel_cycles(costs: NocCosts, transfers: Sequence[Transfer]) -> float:
    """Cycles of one data mover issuing ``transfers`` back to back and then one barrier:
    ``Σ stream_cycles + max completion_cycles``."""
    if not transfers:
        raise ConfigError(config_message("transfers", 0, "empty", "give at least one Transfer"))
    return sum(stream_cycles(costs, t) for t in transfers) + max(completion_cycles(costs, t) for t in transfers)


def message_cycles(
    costs: NocCosts,
    nbytes: int,
    transactions: int = 1,
    destinations: int = 1,
    linked: bool = False,
    hops: int | None = None,
    *,
    multicast: bool | None = None,
    read: bool = False,
    loopback: bool = False,
    same_axis: bool = True,
) -> float:
    """Cycles of one kernel sending ``transactions`` messages of ``nbytes`` to ``destinations`` cores
    (a multicast when ``destinations > 1`` or ``multicast``; ``linked`` holds its path) and waiting for
    the last. ``hops``: the round trip (default from ``same_axis``, :func:`round_trip_hops`)."""
    mc = destinations > 1 if multicast is None else bool(multicast)
    if linked and not mc:
        raise ConfigError(
            config_message("linked", linked, "holds a multicast path", "give destinations > 1 or multicast=True")
        )
    mechanism = ("multicast_linked" if linked else "multicast") if mc else "unicast"
    t = Transfer(nbytes, transactions, destinations, mechanism, read, same_axis, loopback, hops)
    return kernel_cycles(costs, [t])


def stream_bytes_per_cycle(costs: NocCosts, t: Transfer) -> float:
    """One sender's sustained rate over a long stream of ``t``'s messages (bytes per cycle): ``b / s``
    with the path held for a linked multicast."""
    return t.nbytes / transaction_cycles(costs, t, t.mechanism == "multicast_linked")


# ---- rectangles (TT-Metal's multicast destination rule) ---------------------------------------------


@dataclass(frozen=True)
class Rectangle:
    """Cores ``x0..x1`` x ``y0..y1`` (inclusive; ``x`` the column, ``y`` the row of the Tensix grid)."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def cols(self) -> int:
        return self.x1 - self.x0 + 1

    @property
    def rows(self) -> int:
        return self.y1 - self.y0 + 1

    @property
    def count(self) -> int:
        """Cores in the rectangle (a multicast's ``destinations``)."""
        return self.cols * self.rows

    def contains(self, core) -> bool:
        x, y = core
        return self.x0 <= x <= self.x1 and self.y0 <= y <= self.y1

    def cores(self) -> tuple:
        """Every core, row-major."""
        return tuple((x, y) for y in range(self.y0, self.y1 + 1) for x in range(self.x0, self.x1 + 1))


def _core_set(cols: int, rows: int, cores, what: str) -> set:
    cols = _whole("cols", cols, 1, "give the grid's columns")
    rows = _whole("rows", rows, 1, "give the grid's rows")
    out = set()
    for c in cores:
        try:
            x, y = (int(v) for v in c)
        except (TypeError, ValueError):
            raise MappingError(config_message(what, c, "must be an (x, y) core", "give column, row")) from None
        if not (0 <= x < cols and 0 <= y < rows):
            raise MappingError(
                config_message(
                    what, (x, y), f"outside the {cols} x {rows} grid", f"x in 0..{cols - 1}, y in 0..{rows - 1}"
                )
            )
        out.add((x, y))
    return out


def multicast_rectangle(cols: int, rows: int, sender, receivers, loopback: bool = False) -> Rectangle:
    """The rectangle of a multicast from ``sender`` to exactly ``receivers`` on a ``cols`` x ``rows``
    grid. Raises :class:`MappingError` if the receivers are not every core of a rectangle, or include
    the sender without ``loopback`` (TT-Metal's ``noc_async_write_multicast`` writes to a rectangle and
    not to its sender; ``noc_async_write_multicast_loopback_src`` includes it), or omit it with
    ``loopback``."""
    (s,) = _core_set(cols, rows, [sender], "sender")
    recv = _core_set(cols, rows, receivers, "receiver")
    if not recv:
        raise MappingError(config_message("receivers", (), "empty", "give at least one receiver"))
    xs, ys = [x for x, _ in recv], [y for _, y in recv]
    rect = Rectangle(min(xs), min(ys), max(xs), max(ys))
    missing = [c for c in rect.cores() if c not in recv]
    if missing:
        raise MappingError(
            config_message(
                "multicast receivers",
                f"{len(recv)} cores in a {rect.cols} x {rect.rows} box missing {missing[:4]}"
                + (" ..." if len(missing) > 4 else ""),
                "a multicast writes to a full rectangle of cores (noc_async_write_multicast)",
                "split the set with cover_rectangles() (one multicast each) or widen it to the box",
            )
        )
    if s in recv and not loopback:
        raise MappingError(
            config_message(
                "multicast receivers",
                f"include the sender {s}",
                "noc_async_write_multicast excludes its sender",
                "drop the sender from the set, or give loopback=True (noc_async_write_multicast_loopback_src)",
            )
        )
    if loopback and s not in recv:
        raise MappingError(
            config_message(
                "loopback", True, f"the sender {s} is not in the rectangle", "drop loopback, or add the sender"
            )
        )
    return rect


def cover_rectangles(cols: int, rows: int, receivers, sender=None) -> tuple[Rectangle, ...]:
    """``receivers`` (never the sender: it is dropped) as disjoint rectangles, each a legal multicast
    from ``sender``: row-major greedy, the first uncovered core's run to the right, grown downward while
    the whole run is uncovered receivers."""
    recv = _core_set(cols, rows, receivers, "receiver")
    if sender is not None:
        recv.discard(next(iter(_core_set(cols, rows, [sender], "sender"))))
    left = set(recv)
    out = []
    for y0, x0 in sorted((y, x) for x, y in recv):
        if (x0, y0) not in left:
            continue
        x1 = x0
        while (x1 + 1, y0) in left:
            x1 += 1
        y1 = y0
        while all((x, y1 + 1) in left for x in range(x0, x1 + 1)):
            y1 += 1
        r = Rectangle(x0, y0, x1, y1)
        left.difference_update(r.cores())
        out.append(r)
    return tuple(out)


def receivers_cycles(
    costs: NocCosts, cols: int, rows: int, sender, receivers, nbytes: int, transactions: int = 1, linked: bool = False
) -> float:
    """One kernel sending ``transactions`` messages of ``nbytes`` from ``sender`` to every core of
    ``receivers`` (any set): one multicast per rectangle of :func:`cover_rectangles` (a one-core
    rectangle is a unicast), issued back to back, one barrier; each with its own round trip."""
    rects = cover_rectangles(cols, rows, receivers, sender)
    if not rects:
        raise MappingError(config_message("receivers", (), "empty (or only the sender)", "give a receiver"))
    transfers = []
    for r in rects:
        mc = r.count > 1
        mech = ("multicast_linked" if linked else "multicast") if mc else "unicast"
        hops = round_trip_hops(costs, sender, r.cores())
        transfers.append(Transfer(nbytes, transactions, r.count, mech, hops=hops))
    return kernel_cycles(costs, transfers)
