"""JIT flags for every SNN kernel, in one place (STUMPY's ``config`` module pattern).

Kernel modules import :data:`SERIAL` / :data:`PARALLEL` and decorate with
``numba.njit(**SERIAL)`` or ``numba.njit(**PARALLEL)``; nothing else in the code base
imports numba.

``fastmath`` allows re-association and contraction only (no ``nnan``/``ninf``), so that
float32 sums and dot products vectorise while NaN checks still work. Results are still
deterministic: the reduction order is fixed at compile time and never depends on the number
of threads or on the neuron-to-tile mapping.
"""
from __future__ import annotations

FASTMATH = frozenset({"reassoc", "contract", "nsz", "arcp"})

SERIAL = dict(cache=True, nogil=True, fastmath=set(FASTMATH), error_model="numpy")
"""Flags of the serial inner loops (``@njit(**SERIAL)``)."""

PARALLEL = dict(SERIAL, parallel=True)
"""Flags of the drivers that ``prange`` over samples, time steps or column blocks."""

COLUMN_ALIGN = 16
"""Column blocks of the weight-gradient scatter are multiples of this many float32 (one
AVX-512 vector); a block is one thread's share of the columns so dW has no write races."""
