"""JIT settings of the SNN kernels: the flags come from :mod:`tilesim.models.jit` (one home for every
workload); the SNN kernels use its re-associable policy (``FAST``).
"""

from __future__ import annotations

from tilesim.models.jit import FAST, PARALLEL_FAST

SERIAL = FAST
"""Flags of the serial inner loops (``@njit(**SERIAL)``)."""

PARALLEL = PARALLEL_FAST
"""Flags of the drivers that ``prange`` over samples, time steps or column blocks."""

COLUMN_ALIGN = 16
"""Column blocks of the weight-gradient scatter are multiples of this many float32 (one
AVX-512 vector); a block is one thread's share of the columns so dW has no write races."""
