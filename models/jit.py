"""JIT flags for every Numba kernel of every workload, in one place (STUMPY's ``config`` pattern).

Kernel modules decorate with ``numba.njit(**EXACT)``, ``numba.njit(**FAST)`` or their ``PARALLEL_``
forms; nothing else chooses flags. Two policies, each for a stated reason:

* :data:`FAST` allows re-association and contraction (``reassoc``, ``contract``, ``nsz``, ``arcp``;
  no ``nnan``/``ninf``, so NaN checks still work), so that long float32 sums and dot products
  vectorise. Results stay deterministic: the reduction order is fixed at compile time and never
  depends on the number of threads or on the mapping. Used by the SNN training kernels, whose NumPy
  twins are compared with a relative tolerance.
* :data:`EXACT` is IEEE arithmetic in source order, for kernels tested bit for bit against their
  NumPy twins (the stencil's weighted sums) or whose results users compare exactly (the structured
  linear layers).

This module does not import numba.
"""

from __future__ import annotations

FASTMATH = frozenset({"reassoc", "contract", "nsz", "arcp"})

EXACT = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")
"""Serial kernels with IEEE float semantics in source order."""

FAST = dict(EXACT, fastmath=set(FASTMATH))
"""Serial kernels whose float reductions may be re-associated (vectorised)."""

PARALLEL_EXACT = dict(EXACT, parallel=True)
"""Drivers that ``prange`` over independent work, IEEE semantics."""

PARALLEL_FAST = dict(FAST, parallel=True)
"""Drivers that ``prange`` over samples, time steps or column blocks, re-associable reductions."""
