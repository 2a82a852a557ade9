"""Flows sharing links: the one fluid rule every fabric and the chip links use.

Every active flow moves at the rate of its most shared link: a directed link ``g`` of ``bw[g]``
bytes per cycle carrying ``n_g`` active flows gives each ``bw[g] / n_g``, and a flow over route
``R`` moves at ``min_{g in R} bw[g] / n_g`` (Poplar's global-exchange constraint for IPU-Links,
ipu-hardware.md §3.2; on a mesh or torus network-on-chip the same rule is link contention). Rates
are recomputed whenever a flow finishes, so the completion times come from events, not from one
closed form: a flow that shares its busiest link only at the start speeds up when the others
drain. A route is a tuple of hashable link names.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DRAINED_BYTES", "fair_rates", "drain_times"]

DRAINED_BYTES = 1e-6  # a flow with this little left has finished (float round-off)


def fair_rates(routes: list[tuple], bw: dict) -> list[float]:
    """Bytes per cycle of each flow, given by its route (link names): every link's bandwidth
    ``bw[link]`` split evenly among the flows on it, a flow limited by its busiest link."""
    share: dict = {}
    for route in routes:
        for g in route:
            share[g] = share.get(g, 0) + 1
    return [min(bw[g] / share[g] for g in route) for route in routes]


def _pairs(routes: list[tuple], bw: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flow, link) incidence of ``routes`` as two index arrays, and each link's bandwidth (the
    loops run in C: a wafer-wide multicast's route names 1.7 million links)."""
    flat = [g for route in routes for g in route]
    names = dict.fromkeys(flat)
    for i, g in enumerate(names):
        names[g] = i
    pair_link = np.fromiter(map(names.__getitem__, flat), np.int64, len(flat))
    pair_flow = np.repeat(np.arange(len(routes), dtype=np.int64), [len(route) for route in routes])
    cap = np.fromiter(map(bw.__getitem__, names), np.float64, len(names))
    return pair_flow, pair_link, cap


def drain_times(routes: list[tuple], nbytes, bw: dict) -> np.ndarray:
    """Cycles after a common start at which each flow has drained (no latency: the caller adds
    its hops), under the rule of the module docstring.

    ``routes[i]`` are the links of flow ``i`` (an empty route drains at once), ``nbytes[i]`` its
    bytes, ``bw`` bytes per cycle of every link named. Vectorised over (flow, link) pairs: one
    event per group of flows that finish together, so thousands of on-chip transfers cost a few
    array passes each.
    """
    remaining = np.asarray(nbytes, np.float64).copy()
    n = remaining.shape[0]
    done = np.zeros(n)
    pf, pl, cap = _pairs(routes, bw)
    active = (np.bincount(pf, minlength=n) > 0) & (remaining > DRAINED_BYTES)
    now = 0.0
    while active.any():
        on = active[pf]
        users = np.bincount(pl[on], minlength=cap.shape[0])
        rate = np.full(n, np.inf)
        np.minimum.at(rate, pf[on], cap[pl[on]] / users[pl[on]])
        idx = np.flatnonzero(active)
        left = remaining[idx] / rate[idx]
        dt = float(left.min())
        fin = idx[left <= dt * (1.0 + 1e-12)]  # every flow that drains at this event
        now += dt
        remaining[idx] -= rate[idx] * dt
        remaining[fin] = 0.0
        done[fin] = now
        active[fin] = False
    return done
