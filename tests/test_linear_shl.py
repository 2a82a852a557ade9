"""Exact Table 4 parameter counts of the SHL CIFAR-10 model (claim B5) and its training step."""

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.linear.layers import pixelfly_layout
from tilesim.models.linear.shl import PIXELFLY_SHL, SHL_METHODS, TABLE4_PARAMS, compression_ratio, shl_model


@pytest.mark.parametrize("method", SHL_METHODS)
def test_table4_parameter_counts_are_exact(method):
    model = shl_model(method)
    assert sum(p.size for p in model.params) == TABLE4_PARAMS[method]
    assert model.n_params == TABLE4_PARAMS[method]
    classifier = 1024 * 10 + 10
    assert model.n_params - model.n_hidden_params == classifier


def test_butterfly_compression_is_whole_model():
    assert round(100 * compression_ratio("butterfly"), 1) == 98.5
    assert round(100 * compression_ratio("butterfly", scope="hidden"), 1) == 99.4


def test_pixelfly_configuration_is_unique_up_to_blocking():
    """404,490 needs rank 32, one bias and a 5/16-dense mask; scan powers of two."""
    hits = set()
    for log_b in range(0, 7):
        for log_s in range(1, 11):
            nnz = int(pixelfly_layout(1024, 1024, 2**log_b, 2**log_s).sum()) * 4**log_b
            for log_r in range(0, 11):
                for biases in range(0, 3):
                    if nnz + 2048 * 2**log_r + 1024 * biases + 10250 == 404_490:
                        hits.add((nnz, 2**log_r, biases))
    assert hits == {(327_680, 32, 1)}
    assert PIXELFLY_SHL == {"block_size": 16, "butterfly_size": 16, "lowrank_size": 32}


@pytest.mark.parametrize("method", SHL_METHODS)
def test_sgd_reduces_loss(method):
    rng = np.random.default_rng(0)
    model = shl_model(method, n=64, classes=10, seed=1)
    x = rng.standard_normal((50, 64))
    y = rng.integers(0, 10, 50)
    first = model.sgd_step(x, y, lr=0.02, momentum=0.9)
    for _ in range(30):
        last = model.sgd_step(x, y, lr=0.02, momentum=0.9)
    assert last < first


def test_model_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    model = shl_model("butterfly", n=16, classes=3)
    for p in model.params:
        p[...] = rng.standard_normal(p.shape) * 0.5
    x, y = rng.standard_normal((4, 16)), rng.integers(0, 3, 4)
    _, grads = model.loss_and_grads(x, y)
    eps = 1e-6
    for p, g in zip(model.params, grads):
        flat = p.reshape(-1)
        for i in range(0, flat.size, max(1, flat.size // 5)):
            old = flat[i]
            flat[i] = old + eps
            lp = model.loss_and_grads(x, y)[0]
            flat[i] = old - eps
            lm = model.loss_and_grads(x, y)[0]
            flat[i] = old
            assert abs((lp - lm) / (2 * eps) - g.reshape(-1)[i]) < 1e-5


def test_bad_method_and_size():
    with pytest.raises(ConfigError, match=r"method = 'sparse': must be one of"):
        shl_model("sparse")
    with pytest.raises(ConfigError, match=r"n = 1000: must be a power of two"):
        shl_model("butterfly", n=1000)
    with pytest.raises(ConfigError, match=r"lr = 0: must be > 0"):
        shl_model("circulant", n=8).sgd_step(np.ones((2, 8)), np.array([0, 1]), lr=0)
