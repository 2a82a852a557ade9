"""Layer kernels of tilesim.models.linear against dense NumPy twins (forward, backward, assembled matrix)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.errors import ConfigError
from tilesim.models.linear.layers import (
    ButterflyLinear,
    CirculantLinear,
    CsrLinear,
    DenseLinear,
    FastfoodLinear,
    LowRankLinear,
    PixelflyLinear,
    butterfly_factor_matrices,
    hadamard_matrix,
    matmul,
    matmul_backward,
    pixelfly_layout,
    random_csr,
    skewed_shape,
)


def _randomise(layer, seed=0):
    rng = np.random.default_rng(seed)
    for p in layer.params:
        p[...] = rng.standard_normal(p.shape)
    return layer


def _check_against_dense(layer, batch=5, seed=1, fd=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, layer.n_in))
    y, cache = layer.forward(x)
    w = layer.dense_matrix()
    b = layer.b if layer.bias else 0.0
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-10, atol=1e-10)
    g = rng.standard_normal(y.shape)
    gx, grads = layer.backward(g, cache)
    np.testing.assert_allclose(gx, g @ w, rtol=1e-10, atol=1e-10)
    assert len(grads) == len(layer.params)
    if not fd:
        return
    eps = 1e-6
    for p, gp in zip(layer.params, grads):
        assert gp.shape == p.shape
        flat = p.reshape(-1)
        idx = rng.choice(flat.size, size=min(flat.size, 12), replace=False)
        for i in idx:
            old = flat[i]
            flat[i] = old + eps
            yp = layer.forward(x)[0]
            flat[i] = old - eps
            ym = layer.forward(x)[0]
            flat[i] = old
            num = ((yp - ym) * g).sum() / (2 * eps)
            assert abs(num - gp.reshape(-1)[i]) < 1e-5 * max(1.0, abs(num))


LAYERS = [
    lambda: DenseLinear(8, 6),
    lambda: DenseLinear(8, 6, bias=False),
    lambda: LowRankLinear(8, 6, rank=2),
    lambda: CirculantLinear(9),
    lambda: FastfoodLinear(16),
    lambda: ButterflyLinear(16, tied=True),
    lambda: ButterflyLinear(16, tied=False, bias=False),
    lambda: PixelflyLinear(32, 32, block_size=4, butterfly_size=8, lowrank_size=3),
    lambda: PixelflyLinear(64, 32, block_size=4, butterfly_size=8, lowrank_size=0),
    lambda: CsrLinear(20, 12, density=0.1),
    lambda: CsrLinear(40, 30, density=0.01),
]


@pytest.mark.parametrize("make", LAYERS)
def test_layer_matches_assembled_dense_matrix_and_gradients(make):
    _check_against_dense(_randomise(make()))


@settings(max_examples=25, deadline=None)
@given(log_n=st.integers(1, 6), tied=st.booleans(), batch=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_butterfly_equals_product_of_factors(log_n, tied, batch, seed):
    layer = _randomise(ButterflyLinear(2**log_n, tied=tied, seed=seed), seed)
    mats = butterfly_factor_matrices(layer.untied_twiddle())
    assert len(mats) == log_n
    for m in mats:  # every factor has exactly two nonzeros per row (2x2 blocks)
        assert ((m != 0).sum(axis=1) <= 2).all()
    _check_against_dense(layer, batch=batch, seed=seed, fd=False)


def test_butterfly_parameter_counts():
    assert ButterflyLinear(1024, tied=True, bias=False).n_params == 4 * 1023
    assert ButterflyLinear(1024, tied=False, bias=False).n_params == 2 * 1024 * 10


def test_tied_butterfly_shares_twiddles_across_blocks():
    layer = _randomise(ButterflyLinear(8, tied=True))
    tw = layer.untied_twiddle()
    np.testing.assert_array_equal(tw[0, 0], tw[0, 3])  # stride 1: one 2x2 for all 4 pairs
    np.testing.assert_array_equal(tw[1, 0], tw[1, 2])  # stride 2: pairs j=0 of blocks 0 and 1


def test_fastfood_is_S_H_G_Pi_H_B():
    layer = _randomise(FastfoodLinear(8))
    h = hadamard_matrix(8) / np.sqrt(8)
    np.testing.assert_allclose(h @ h, np.eye(8), atol=1e-12)
    p = np.eye(8)[layer.perm]
    expect = np.diag(layer.S) @ h @ np.diag(layer.G) @ p @ h @ np.diag(layer.B)
    np.testing.assert_allclose(layer.dense_matrix(), expect)


def test_circulant_structure():
    layer = _randomise(CirculantLinear(5))
    w = layer.dense_matrix()
    np.testing.assert_allclose(w[:, 0], layer.c)
    np.testing.assert_allclose(np.roll(w[:, 0], 1), w[:, 1])


def test_pixelfly_layout_is_flat_butterfly():
    lay = pixelfly_layout(16, 16, block_size=1, butterfly_size=16)
    assert lay.sum(axis=1).tolist() == [5] * 16  # I + 4 factors
    i = np.arange(16)
    assert lay[i, i ^ 4].all() and lay[i, i].all()
    big = pixelfly_layout(1024, 1024, block_size=16, butterfly_size=16)
    assert big.sum() * 16 * 16 == 1024 * 1024 * 5 // 16
    assert pixelfly_layout(1024, 1024, 64, 16).sum() * 64 * 64 == 327_680
    assert pixelfly_layout(16, 16, 1, 16, n_factors=1).sum() == 32


@pytest.mark.parametrize("density,sparsity", [(0.1, 0.9), (0.01, 0.99)])
def test_csr_sparsity_levels(density, sparsity):
    indptr, indices = random_csr(200, 100, density, seed=3)
    assert indptr[-1] == indices.size == round(density * 200 * 100)
    assert 1 - indices.size / (200 * 100) == pytest.approx(sparsity)
    for r in range(200):
        row = indices[indptr[r] : indptr[r + 1]]
        assert (np.diff(row) > 0).all()
    layer = _randomise(CsrLinear(100, 200, density, seed=3))
    _check_against_dense(layer, batch=4, fd=False)


@settings(max_examples=20, deadline=None)
@given(log_mn=st.integers(2, 12), log_ratio=st.integers(-6, 6), k=st.integers(1, 9))
def test_skewed_shape_and_matmul(log_mn, log_ratio, k):
    if abs(log_ratio) > log_mn:
        with pytest.raises(ConfigError, match="aspect_ratio"):
            skewed_shape(2**log_mn, k, 2.0**log_ratio)
        return
    m, kk, n = skewed_shape(2**log_mn, k, 2.0**log_ratio)
    assert m * n == 2**log_mn and kk == k
    assert abs(np.log2(m / n) - log_ratio) <= 1
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    np.testing.assert_allclose(matmul(a, b), a @ b)
    g = rng.standard_normal((m, n))
    ga, gb = matmul_backward(a, b, g)
    np.testing.assert_allclose(ga, g @ b.T)
    np.testing.assert_allclose(gb, a.T @ g)


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: ButterflyLinear(6), r"n = 6: must be a power of two"),
        (lambda: ButterflyLinear(0), r"n = 0: must be a positive integer"),
        (lambda: FastfoodLinear(12), r"n = 12: must be a power of two"),
        (lambda: LowRankLinear(8, 4, rank=5), r"rank = 5: must be <= min"),
        (lambda: PixelflyLinear(32, 32, 3, 8, 1), r"block_size = 3: must be a power of two"),
        (lambda: PixelflyLinear(32, 32, 64, 8, 1), r"n_out = 32: must be a multiple of block_size = 64"),
        (lambda: PixelflyLinear(24, 24, 8, 16, 1), r"n_out = 24: must be a multiple of butterfly_size = 16"),
        (lambda: PixelflyLinear(32, 32, 4, 8, 1, n_factors=4), r"n_factors = 4: must be in \[1, log2"),
        (lambda: PixelflyLinear(32, 32, 4, 8, 40), r"lowrank_size = 40"),
        (lambda: CsrLinear(8, 8, density=0.0), r"density = 0.0: must be in \(0, 1\]"),
        (lambda: matmul(np.ones((2, 3)), np.ones((4, 2))), r"matmul inner dimensions = \(3, 4\)"),
        (lambda: DenseLinear(4, 3).forward(np.ones((2, 5))), r"input features = 5: must equal n_in = 4"),
    ],
)
def test_bad_shapes_raise_config_error(make, match):
    with pytest.raises(ConfigError, match=match):
        make()
