"""Numba kernel of :mod:`tilesim.models.linear.benchpattern`: libstdc++'s ``std::shuffle`` over ``minstd_rand0``.

The algorithm and its source are documented in :mod:`tilesim.models.linear.benchpattern`; this module holds
only the integer loops (a 4096 x 4096 element-wise pattern shuffles 16.7 M block ids one after another).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from tilesim.models.jit import EXACT

MINSTD_MODULUS = 2147483647
"""``minstd_rand0``'s modulus ``2^31 - 1`` (``linear_congruential_engine<uint_fast32_t, 16807, 0, 2147483647>``)."""
MINSTD_MULTIPLIER = 16807
"""``minstd_rand0``'s multiplier (Park and Miller's 1988 minimal standard; ``<random>``)."""
URNG_RANGE = MINSTD_MODULUS - 2
"""``g.max() - g.min()`` of ``minstd_rand0``: it draws ``1 … 2^31 - 2``."""


@nb.njit(**EXACT)
def uniform_below(state: int, urange: int) -> tuple[int, int]:
    """``uniform_int_distribution{0, urange}(g)`` of libstdc++ on ``minstd_rand0`` (``urange <= URNG_RANGE``):
    the fallback downscaling of ``bits/uniform_int_dist.h`` (the engine's range is not 2^32 - 1): ``scaling =
    URNG_RANGE / (urange + 1)``, draw ``g() - 1`` until it is below ``(urange + 1) · scaling``, divide by
    ``scaling``. Returns ``(value, new state)``."""
    uerange = urange + 1
    scaling = URNG_RANGE // uerange
    past = uerange * scaling
    while True:
        p = state * MINSTD_MULTIPLIER  # < 2^46: (p mod 2^31) + (p div 2^31) is p mod (2^31 - 1) up to one subtraction
        state = (p & MINSTD_MODULUS) + (p >> 31)
        if state >= MINSTD_MODULUS:
            state -= MINSTD_MODULUS
        ret = state - 1
        if ret < past:
            return ret // scaling, state


@nb.njit(**EXACT)
def shuffle_minstd(a, state: int) -> int:
    """Shuffle ``a`` in place as libstdc++'s ``std::shuffle(a.begin(), a.end(), g)`` does with ``g`` a
    ``minstd_rand0`` whose state is ``state`` (``bits/stl_algo.h``, GCC 9 and later: the pair path when
    ``URNG_RANGE / n >= n``, else one draw per element). Returns the engine's new state."""
    n = a.size
    if n == 0:
        return state
    if URNG_RANGE // n >= n:  # two swap positions from one draw (__gen_two_uniform_ints)
        i = 1
        if n % 2 == 0:
            j, state = uniform_below(state, 1)
            a[i], a[j] = a[j], a[i]
            i += 1
        while i != n:
            b0 = i + 1
            b1 = b0 + 1
            x, state = uniform_below(state, b0 * b1 - 1)
            j = x // b1
            a[i], a[j] = a[j], a[i]
            i += 1
            j = x % b1
            a[i], a[j] = a[j], a[i]
            i += 1
        return state
    picks = np.empty(n, dtype=np.uint32)  # the draws first, then the swaps: the swaps' cache misses overlap
    for i in range(1, n):
        picks[i], state = uniform_below(state, i)
    for i in range(1, n):
        j = picks[i]
        a[i], a[j] = a[j], a[i]
    return state
