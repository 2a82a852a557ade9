"""The sparsity pattern the PopSparse paper's benchmark measured, drawn exactly as it draws it.

Li et al. 2023 (arXiv:2303.16999) timed every static and dynamic row on one matrix a run:
``createProblem(params, 123u)`` of ``ipu/matmul_bench.cpp`` (github.com/graphcore-research/sparsity-benchmarks)::

    std::default_random_engine generator(seed);            // libstdc++: minstd_rand0
    rowBlocks = outputFeatures / blockSize; columnBlocks = inputFeatures / blockSize;
    denseBlocks = rowBlocks * columnBlocks;
    nonzeroBlocks = static_cast<unsigned>(std::ceil(params.density * denseBlocks));   // float density
    std::iota(ids.begin(), ids.end(), 0u);                 // ids: denseBlocks block ids, row-major
    std::shuffle(ids.begin(), ids.end(), generator);
    // the first nonzeroBlocks ids are the non-zero blocks: row id / columnBlocks, column id % columnBlocks

``density`` is a ``float`` (``SparseParams``), so ``density * denseBlocks`` is a float32 product (the
``unsigned`` converts to ``float``) and its ``std::ceil`` is a float's. The engine is ``minstd_rand0``
(``x <- 16807 x mod (2^31 - 1)``, seeded ``123 mod (2^31 - 1)``; 1 if that is 0), which is what libstdc++'s
``default_random_engine`` is. ``std::shuffle`` is libstdc++'s (``bits/stl_algo.h``, GCC 9 and later; the
benchmark is built with the Poplar SDK's host GCC):

* the **pair path** when ``urngrange / n >= n`` (``urngrange = g.max() - g.min() = 2^31 - 3``; so
  ``n <= 46,340`` block ids, e.g. 1024², block 16): an even ``n`` first swaps ``ids[1]`` with ``ids[d{0, 1}]``;
  then for each remaining pair ``i, i + 1`` one draw ``x = d{0, (i + 1)(i + 2) - 1}`` swaps ``ids[i]`` with
  ``ids[x / (i + 2)]`` and ``ids[i + 1]`` with ``ids[x % (i + 2)]`` (``__gen_two_uniform_ints``);
* else the **simple path**: ``ids[i]`` swaps with ``ids[d{0, i}]`` for ``i = 1 … n - 1``;

where ``d{0, r}`` is ``uniform_int_distribution<unsigned long>`` (``bits/uniform_int_dist.h``): the engine's
range is not ``2^32 - 1``, so the fallback downscaling: ``scaling = urngrange / (r + 1)``, draw ``g() - 1``
until it is below ``(r + 1) · scaling``, then divide by ``scaling``. The loops are
:mod:`tilesim.models.linear.shuffle_kernel` (Numba: a 4096² element-wise pattern is 16.7 M ids).
``tests/test_linear_benchpattern.py`` checks them against hand-traced draws and, where ``g++`` exists,
against libstdc++ itself.
"""

from __future__ import annotations

import math

import numpy as np

from tilesim.errors import require
from tilesim.models.linear.shuffle_kernel import MINSTD_MODULUS, URNG_RANGE, shuffle_minstd
from tilesim.running.memo import BytesLRU

__all__ = ["BENCH_SEED", "minstd_state", "bench_shuffle", "bench_block_count", "benchmark_layout"]

BENCH_SEED = 123
"""The seed ``matmul_bench.cpp`` passes to ``createProblem`` (``createProblem(params, 123u)``)."""


def minstd_state(seed: int) -> int:
    """The state ``minstd_rand0(seed)`` starts from: ``seed mod (2^31 - 1)``, or 1 if that is 0
    (``linear_congruential_engine::seed`` with increment 0)."""
    s = int(seed) % MINSTD_MODULUS
    return s or 1


# (n, seed) -> the shuffled ids; every density of a shape takes a prefix of the same shuffle, and validate's
# rows come in every width and block in turn: 128 MiB keeps the paper's 12 shapes (94 MB) at once
_SHUFFLED = BytesLRU(128 << 20, getsizeof=lambda a: a.nbytes)


def _shuffled(n: int, seed: int) -> np.ndarray:
    key = (n, seed)
    ids = _SHUFFLED.get(key)
    if ids is None:
        ids = np.arange(n, dtype=np.uint32)
        shuffle_minstd(ids, minstd_state(seed))
        ids.setflags(write=False)
        _SHUFFLED[key] = ids
    return ids


def bench_shuffle(n: int, seed: int = BENCH_SEED) -> np.ndarray:
    """``0 … n - 1`` after ``std::iota`` and libstdc++'s ``std::shuffle`` with ``minstd_rand0(seed)``
    (read-only; kept up to 128 MiB: every density of a shape shuffles the same ids)."""
    require(
        isinstance(n, int) and 0 < n <= URNG_RANGE,
        "n",
        n,
        f"must be an integer in 1 … {URNG_RANGE}",
        "libstdc++ would upscale the engine's draws beyond that (not ported)",
    )
    return _shuffled(n, int(seed))


def bench_block_count(blocks: int, density: float) -> int:
    """``nonzeroBlocks`` of ``createProblem``: ``ceil(density · denseBlocks)`` in float32, as the benchmark's
    ``float`` density times its ``unsigned`` block count is computed."""
    product = np.float32(density) * np.float32(blocks)
    return int(math.ceil(float(product)))


def benchmark_layout(m: int, k: int, block: int, density: float, seed: int = BENCH_SEED) -> np.ndarray:
    """The bool block mask ``(m / block, k / block)`` of ``createProblem``'s sparse ``m x k`` operand
    (``outputFeatures = m`` rows, ``inputFeatures = k`` columns; module docstring)."""
    for name, v in (("m", m), ("k", k), ("block", block)):
        require(isinstance(v, int) and v > 0, name, v, "must be a positive integer", "e.g. 4096")
    for name, v in (("m", m), ("k", k)):
        require(v % block == 0, name, v, f"must be a multiple of block = {block}", "as createProblem requires")
    require(0.0 < density <= 1.0, "density", density, "must be in (0, 1]", "density 1/16 keeps one block in sixteen")
    rows, cols = m // block, k // block
    nnz = min(bench_block_count(rows * cols, density), rows * cols)
    ids = bench_shuffle(rows * cols, seed)[:nnz]
    mask = np.zeros((rows, cols), dtype=bool)
    mask[ids // cols, ids % cols] = True
    return mask
