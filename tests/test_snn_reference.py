"""Whole training step (Numba sparse path) against the dense float64 NumPy twin."""

import numpy as np
import pytest

from tilesim.models.snn.kernels.reference import reference_step
from tilesim.models.snn.training.network import NetworkConfig, compute_gradients, init_network

CASES = {
    # uncapped: ϑ2 = −100 and caps ≥ N, so every neuron is a gradient slot
    "uncapped": dict(layers="24-20-16-5", second_threshold=-100.0, caps=(20, 16, 5)),
    # capped below the activity, ϑ2 = 0.9
    "capped": dict(layers="24-20-16-5", second_threshold=0.9, caps=(3, 4, 2)),
    "capped_output_theta": dict(
        layers="24-20-16-5", second_threshold=0.9, caps=(4, 3, 2), output_second_threshold=-100.0
    ),
    "recurrent": dict(layers="24-20-16-5", second_threshold=0.5, caps=(5, 6, 3), recurrent=(True, False, True)),
    "fixed": dict(layers="24-20-16-5", second_threshold=0.9, max_activity=0.25, activity="fixed"),
    "single_layer": dict(layers="30-6", second_threshold=0.0, caps=(4,)),
}


def rel_close(a, b, rtol=1e-4):
    """|a − b| ≤ rtol·max|b| elementwise (float32 sums vs float64)."""
    scale = max(np.abs(b).max(), 1e-30)
    assert np.abs(a - b).max() <= rtol * scale, (np.abs(a - b).max(), scale)


@pytest.mark.parametrize("name", sorted(CASES))
def test_step_matches_dense_twin(name):
    cfg = NetworkConfig(batch=6, timesteps=14, input_cap=7, seed=5, **CASES[name])
    state = init_network(cfg)
    rng = np.random.default_rng(11)
    x = (rng.random((14, 6, cfg.layers[0])) < 0.35).astype(np.uint8)
    y = rng.integers(0, cfg.layers[-1], 6)
    res = compute_gradients(state, x, y)
    act = res.activity
    assert act.inputs.counts[..., 0].max() <= 7
    ref = reference_step(cfg, state.W, state.V, act.inputs.to_dense(cfg.layers[0]), y)
    for l in range(cfg.n_layers):
        n = cfg.layers[l + 1]
        np.testing.assert_array_equal(act.layers[l].to_dense(n, 0).astype(bool), ref.spikes[l])
        np.testing.assert_array_equal(act.layers[l].to_dense(n, 1).astype(bool), ref.slots[l])
    assert res.loss == pytest.approx(ref.loss, rel=1e-6)
    assert res.accuracy == ref.accuracy
    np.testing.assert_array_equal(res.logits, ref.logits)
    dW, dV = res.grads
    nonzero = 0
    for l in range(cfg.n_layers):
        rel_close(dW[l], ref.dW[l])
        nonzero += np.count_nonzero(ref.dW[l])
        if cfg.recurrent[l]:
            rel_close(dV[l], ref.dV[l])
        else:
            assert dV[l] is None and ref.dV[l] is None
    assert nonzero > 0


def test_capped_case_really_caps_and_has_gradient_only_slots():
    cfg = NetworkConfig(batch=6, timesteps=14, input_cap=7, seed=5, **CASES["capped"])
    state = init_network(cfg)
    rng = np.random.default_rng(11)
    x = (rng.random((14, 6, 24)) < 0.35).astype(np.uint8)
    res = compute_gradients(state, x, rng.integers(0, 5, 6))
    ref = reference_step(cfg, state.W, state.V, res.activity.inputs.to_dense(24), rng.integers(0, 5, 6))
    v = ref.v[0]
    assert (v > 1.0).sum(axis=2).max() > cfg.n_max[0]  # activity above the cap
    c = res.activity.layers[0].counts
    assert (c[..., 1] > c[..., 0]).any()  # gradient-only entries exist


def test_fixed_activity_saturates_and_initial_lists():
    cfg = NetworkConfig(
        "200-120-120-10", batch=6, timesteps=14, input_cap=16, seed=5, max_activity=0.1, activity="fixed"
    )
    state = init_network(cfg)
    x = (np.random.default_rng(0).random((14, 6, 200)) < 0.2).astype(np.uint8)
    res = compute_gradients(state, x, np.zeros(6, np.int64))
    for l, lst in enumerate(res.activity.layers):
        full = np.mean(lst.counts[..., 0] == cfg.n_max[l])
        assert full == 1.0 if l < cfg.n_layers - 1 else full > 0.9  # 10 outputs, cap 2: nearly
        init = res.activity.initial[l]
        assert init.ids[0, 0].tolist() == list(range(cfg.n_max[l]))
        assert (init.counts == cfg.n_max[l]).all()
