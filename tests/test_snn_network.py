"""Network configuration, initialisation and end-to-end training."""

import math

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.snn.kernels.spikes import SpikeList, dense_to_input_list
from tilesim.models.snn.training import data
from tilesim.models.snn.training.network import (
    LIFParams,
    NetworkConfig,
    compute_gradients,
    init_network,
    init_weights,
    parse_layers,
    train_step,
)


def test_n_max_rules_paper_table():
    """snn-on-ipu.md §4.2: NMNIST 2312-1466-1466-10 caps at 1 %, 5 %, 10 %."""
    for a, caps in [(0.01, (14, 14, 2)), (0.05, (72, 72, 2)), (0.10, (146, 146, 2))]:
        assert NetworkConfig("2312-1466-1466-10", max_activity=a).n_max == caps
    assert NetworkConfig("700-974-974-974-20", max_activity=0.05).n_max == (48, 48, 48, 2)
    assert NetworkConfig("10-8-4", caps=(100, 3)).n_max == (8, 3)  # caps above N act as N


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(layers="700"), "layers = '700': needs the input size"),
        (dict(layers="700-x-20"), "layers = '700-x-20': must be sizes joined"),
        (dict(layers="700-0-20"), "every size must be >= 1"),
        (dict(layers="7-8-2", batch=0), "batch = 0: must be >= 1"),
        (dict(layers="7-8-2", max_activity=1.5), "max_activity = 1.5: must be in"),
        (dict(layers="7-8-2", activity="lazy"), "activity = 'lazy': must be 'natural' or 'fixed'"),
        (dict(layers="7-8-2", optimizer="rmsprop"), "optimizer = 'rmsprop'"),
        (dict(layers="7-8-2", caps=(2,)), r"caps = \(2,\): needs one cap per neuron layer \(2\)"),
        (dict(layers="7-8-2", caps=(0, 2)), "every cap must be >= 1"),
        (dict(layers="7-8-2", recurrent=(True,)), "needs one flag per neuron layer"),
        (dict(layers="7-8-2", second_threshold=1.0), "must be below the threshold 1.0"),
        (dict(layers="7-100-2", max_activity=0.01), "N_max of layer 1 = 0: .*raise max_activity"),
        (dict(layers="7-8-2", lr=-1.0), "lr = -1.0: must be > 0"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        NetworkConfig(**kwargs)


def test_lif_params():
    assert LIFParams().scale == pytest.approx(0.5)
    with pytest.raises(ConfigError, match="LIFParams.decay = 1.0"):
        LIFParams(decay=1.0)


def test_init_weights_bounds():
    cfg = NetworkConfig("600-400-10", recurrent=(True, False))
    W, V = init_weights(cfg, np.random.default_rng(0))
    a = math.sqrt(6 / 600) * cfg.weight_mul
    assert W[0].dtype == np.float32 and W[0].shape == (600, 400)
    assert W[0].min() >= -a + 0.001 - 1e-6 and W[0].max() <= a + 0.001 + 1e-6
    assert W[0].max() > 0.9 * a
    assert V[0].shape == (400, 400) and V[1] is None
    Wf, _ = init_weights(NetworkConfig("600-400-10", activity="fixed"), np.random.default_rng(0))
    assert Wf[0].max() > 95 and Wf[0].max() <= a + 100.001


def test_input_capping_is_seeded_and_ascending():
    rng = np.random.default_rng(0)
    x = (rng.random((5, 3, 50)) < 0.5).astype(np.uint8)
    a = dense_to_input_list(x, 8, np.random.default_rng(1))
    b = dense_to_input_list(x, 8, np.random.default_rng(1))
    np.testing.assert_array_equal(a.ids, b.ids)
    assert (a.counts[..., 0] == np.minimum(x.sum(2), 8)).all()
    assert (a.counts[..., 0] == a.counts[..., 1]).all()
    for t in range(5):
        for s in range(3):
            ids = a.ids[t, s, : a.counts[t, s, 0]]
            assert (np.diff(ids.astype(int)) > 0).all() and x[t, s, ids].all()


def test_step_input_and_label_errors():
    cfg = NetworkConfig("20-10-3", batch=2, timesteps=4, input_cap=5, max_activity=0.5)
    state = init_network(cfg)
    x = np.zeros((4, 2, 20), np.uint8)
    with pytest.raises(ConfigError, match=r"batch_spikes.shape = \(4, 2, 21\)"):
        train_step(state, np.zeros((4, 2, 21), np.uint8), np.zeros(2, np.int64))
    with pytest.raises(ConfigError, match="labels = "):
        train_step(state, x, np.array([0, 3]))
    with pytest.raises(ConfigError, match=r"labels.shape = \(3,\)"):
        train_step(state, x, np.zeros(3, np.int64))
    big = SpikeList.empty(4, 2, 6)
    with pytest.raises(ConfigError, match="batch_spikes.n_max = 6: must be <= input_cap = 5"):
        train_step(state, big, np.zeros(2, np.int64))
    bad = SpikeList.empty(4, 2, 5)
    bad.ids[0, 0, 0] = 20
    bad.counts[0, 0] = 1
    with pytest.raises(ConfigError, match="batch_spikes ids = 20: must be < N0 = 20"):
        train_step(state, bad, np.zeros(2, np.int64))


def test_dense_and_sparse_inputs_give_the_same_step():
    cfg = NetworkConfig("20-10-3", batch=2, timesteps=4, input_cap=20, max_activity=0.5)
    x = (np.random.default_rng(0).random((4, 2, 20)) < 0.4).astype(np.uint8)
    a = compute_gradients(init_network(cfg), x, np.array([0, 1]))
    lst = dense_to_input_list(x, 20, np.random.default_rng(0))
    b = compute_gradients(init_network(cfg), lst, np.array([0, 1]))
    assert a.loss == b.loss
    np.testing.assert_array_equal(a.grads[0][0], b.grads[0][0])


@pytest.mark.parametrize("optimizer, lr", [("adam", 1e-2), ("sgd", 0.5)])
def test_train_step_updates_in_place(optimizer, lr):
    cfg = NetworkConfig(
        "20-10-3", batch=4, timesteps=6, input_cap=8, caps=(4, 3), second_threshold=-100.0, optimizer=optimizer, lr=lr
    )
    state = init_network(cfg)
    x = (np.random.default_rng(0).random((6, 4, 20)) < 0.4).astype(np.uint8)
    W0 = state.W[0].copy()
    res = train_step(state, x, np.array([0, 1, 2, 0]), return_grads=True)
    assert state.step == 1 and not np.array_equal(W0, state.W[0])
    if optimizer == "sgd":
        np.testing.assert_allclose(state.W[0], W0 - np.float32(lr) * res.grads[0][0], rtol=1e-6)
    assert train_step(state, x, np.array([0, 1, 2, 0])).grads is None


def test_training_on_synthetic_task_learns():
    """~60 Adam steps on the synthetic task: loss falls ≥ 40 %, accuracy ≫ chance (0.25)."""
    layers, B, T, steps = "100-64-4", 32, 30, 60
    cfg = NetworkConfig(layers, batch=B, timesteps=T, input_cap=32, caps=(16, 4), second_threshold=0.0, lr=1e-2, seed=3)
    ds = data.synthetic(layers, B * steps, T, seed=1)
    state = init_network(cfg)
    losses, accs = [], []
    for x, y in ds.batches(B, T, cfg.input_cap, np.random.default_rng(0)):
        r = train_step(state, x, y)
        losses.append(r.loss)
        accs.append(r.accuracy)
    assert len(losses) == steps
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last <= 0.6 * first, (first, last)
    assert np.mean(accs[-10:]) >= 0.6  # each batch is unseen before its update


def test_parse_layers():
    assert parse_layers("2312-1466-10") == (2312, 1466, 10)
    assert parse_layers([3, 4]) == (3, 4)
