"""JIT flags for the Numba kernels of ``models.linear`` (one place, STUMPY style).

This module does not import numba; only :mod:`models.linear.kernels` does.
"""
JIT_FLAGS = {"cache": True, "nogil": True, "fastmath": False}
PARALLEL_JIT_FLAGS = {**JIT_FLAGS, "parallel": True}
