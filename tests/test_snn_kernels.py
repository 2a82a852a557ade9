"""Every SNN kernel against its slow NumPy twin (tilesim.models.snn.kernels.reference.naive_*)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.errors import ConfigError
from tilesim.models.snn.kernels import lif as K
from tilesim.models.snn.kernels import reference as R
from tilesim.models.snn.kernels.spikes import SpikeList, initial_list

SETTINGS = settings(max_examples=20, deadline=None)
ALPHA, SCALE, THR, BETA = 0.95, 0.5, 1.0, 10.0


def random_list(rng, T, B, n_ids, n_max, real_frac=0.7):
    """A canonical-looking list: distinct ids per (t, b), random counts."""
    ids = np.zeros((T, B, n_max), np.uint32)
    counts = np.zeros((T, B, 2), np.int32)
    for t in range(T):
        for b in range(B):
            c1 = int(rng.integers(0, min(n_max, n_ids) + 1))
            c0 = int(rng.integers(0, c1 + 1)) if rng.random() < real_frac else c1
            sel = rng.choice(n_ids, c1, replace=False)
            ids[t, b, :c1] = np.concatenate([np.sort(sel[:c0]), np.sort(sel[c0:])])
            counts[t, b] = (c0, c1)
    return SpikeList(ids, counts)


dims = st.tuples(
    st.integers(1, 6),
    st.integers(1, 4),
    st.integers(1, 40),
    st.integers(1, 37),
    st.integers(1, 12),
    st.integers(0, 2**31 - 1),
)


@SETTINGS
@given(dims)
def test_lif_forward_matches_twin(d):
    T, B, n_in, N, n_max, seed = d
    rng = np.random.default_rng(seed)
    W = rng.normal(0, 1, (n_in, N)).astype(np.float32)
    lst = random_list(rng, T, B, n_in, n_max)
    v, rows = K.lif_forward(W, lst, ALPHA, SCALE, THR)
    v_ref, _, _ = R.naive_lif_forward(W, lst.ids, lst.counts, ALPHA, SCALE, THR)
    np.testing.assert_allclose(v, v_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(rows, lst.counts[..., 0].sum(axis=1))
    I = K.synaptic_input(W, lst)
    I_ref = np.einsum("tbj,jk->tbk", lst.to_dense(n_in, 0).astype(np.float64), W.astype(np.float64))
    np.testing.assert_allclose(I, I_ref, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(
    st.integers(1, 5),
    st.integers(1, 4),
    st.integers(1, 50),
    st.integers(0, 20),
    st.sampled_from([-100.0, 0.0, 0.9]),
    st.integers(0, 2**31 - 1),
)
def test_compact_matches_twin(T, B, N, n_max, thr2, seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(0.8, 0.6, (T, B, N)).astype(np.float32)
    v[rng.random(v.shape) < 0.05] = THR  # exactly at threshold: not a spike
    lst = K.compact_spikes(v, THR, thr2, n_max)
    ids, counts = R.naive_compact(v, THR, thr2, n_max)
    np.testing.assert_array_equal(lst.counts, counts)
    np.testing.assert_array_equal(lst.ids, ids)
    # masks agree with the dense twin used by reference_step
    for t in range(T):
        S, M = R.cap_masks(v[t].astype(np.float64), THR, thr2, n_max)
        np.testing.assert_array_equal(lst.to_dense(N, 0)[t].astype(bool), S)
        np.testing.assert_array_equal(lst.to_dense(N, 1)[t].astype(bool), M)


def test_compact_order_and_cut_by_hand():
    v = np.array([[[2.0, 0.95, 1.0, 3.0, 0.5, 1.5]]], np.float32)
    lst = K.compact_spikes(v, 1.0, 0.9, 4)
    assert lst.ids[0, 0].tolist() == [0, 3, 5, 1]  # real ascending, then gradient-only
    assert lst.counts[0, 0].tolist() == [3, 4]  # 1.0 is not a spike (strict >)
    lst = K.compact_spikes(v, 1.0, 0.9, 2)
    assert lst.ids[0, 0].tolist() == [0, 3] and lst.counts[0, 0].tolist() == [2, 2]


@SETTINGS
@given(dims, st.booleans())
def test_recurrent_forward_matches_twin(d, fixed):
    T, B, n_in, N, n_max, seed = d
    n_max = min(n_max, N)
    rng = np.random.default_rng(seed)
    W = rng.normal(0, 0.5, (n_in, N)).astype(np.float32)
    V = rng.normal(0, 0.5, (N, N)).astype(np.float32)
    lst = random_list(rng, T, B, n_in, 8)
    init = initial_list(B, n_max, fixed)
    v, own, rows = K.lif_forward_recurrent(W, V, lst, init, ALPHA, SCALE, THR, 0.5, n_max)
    v_ref, ids_ref, counts_ref = R.naive_lif_forward(W, lst.ids, lst.counts, ALPHA, SCALE, THR, V, init, 0.5, n_max)
    np.testing.assert_allclose(v, v_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(own.counts, counts_ref)
    np.testing.assert_array_equal(own.ids, ids_ref)
    expect = lst.counts[..., 0].sum(1) + own.shifted(init).counts[..., 0].sum(1)
    np.testing.assert_array_equal(rows, expect)


@SETTINGS
@given(dims, st.booleans())
def test_state_grad_matches_twin(d, recurrent):
    T, B, _, N, n_max, seed = d
    n_max = min(n_max, N)
    rng = np.random.default_rng(seed)
    v = rng.normal(1.0, 0.5, (T, B, N)).astype(np.float32)
    own = random_list(rng, T, B, N, n_max)
    g = rng.normal(0, 1, own.ids.shape).astype(np.float32)
    V = rng.normal(0, 0.5, (N, N)).astype(np.float32) if recurrent else None
    dI, scanned = K.state_grad(v, own, g.copy(), ALPHA, SCALE, THR, BETA, V)
    dI_ref, _ = R.naive_state_grad(v, own.ids, own.counts, g, ALPHA, SCALE, THR, BETA, V)
    np.testing.assert_allclose(dI, dI_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(scanned, own.counts[..., 1].sum(axis=1))


@SETTINGS
@given(dims)
def test_weight_grad_matches_twin(d):
    T, B, n_in, N, n_max, seed = d
    rng = np.random.default_rng(seed)
    dI = rng.normal(0, 1, (T, B, N)).astype(np.float32)
    lst = random_list(rng, T, B, n_in, n_max)
    dW, rows = K.weight_grad(dI, lst, n_in)
    np.testing.assert_allclose(dW, R.naive_weight_grad(dI, lst.ids, lst.counts, n_in), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(rows, lst.counts[..., 0].sum(axis=1))
    acc, _ = K.weight_grad(dI, lst, n_in, out=np.ones((n_in, N), np.float32))
    np.testing.assert_allclose(acc, dW + 1, rtol=1e-5, atol=1e-5)


def test_weight_grad_independent_of_column_block():
    rng = np.random.default_rng(3)
    dI = rng.normal(0, 1, (4, 6, 100)).astype(np.float32)
    lst = random_list(rng, 4, 6, 30, 10)
    outs = []
    for block in (16, 32, 48, 112):
        dW = np.zeros((30, 100), np.float32)
        K._weight_grad_driver(dI, lst.ids, np.ascontiguousarray(lst.counts[..., 0]), dW, block)
        outs.append(dW)
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


@SETTINGS
@given(dims)
def test_input_grad_matches_twin(d):
    T, B, n_in, N, n_max, seed = d
    rng = np.random.default_rng(seed)
    W = rng.normal(0, 1, (n_in, N)).astype(np.float32)
    dI = rng.normal(0, 1, (T, B, N)).astype(np.float32)
    lst = random_list(rng, T, B, n_in, n_max)
    g, slots = K.input_grad(W, dI, lst)
    np.testing.assert_allclose(g, R.naive_input_grad(W, dI, lst.ids, lst.counts), rtol=1e-4, atol=1e-4)
    assert not g[T - 1].any()
    assert slots[0] == 0 and np.array_equal(slots[1:], lst.counts[1:, :, 1].sum(axis=1))


@pytest.mark.parametrize("step", [1, 2, 10])
def test_adam_matches_twin(step):
    rng = np.random.default_rng(step)
    W = rng.normal(0, 1, (17, 9)).astype(np.float32)
    G = rng.normal(0, 1, W.shape).astype(np.float32)
    m = rng.normal(0, 0.1, W.shape).astype(np.float32)
    v = rng.uniform(0, 0.1, W.shape).astype(np.float32)
    Wr, mr, vr = R.naive_adam(W.astype(np.float64), G, m, v, 1e-2, step)
    K.adam_update(W, G, m, v, 1e-2, step)
    np.testing.assert_allclose(W, Wr, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m, mr, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(v, vr, rtol=1e-5, atol=1e-7)


def test_sgd_matches_twin():
    rng = np.random.default_rng(0)
    W = rng.normal(0, 1, (5, 7)).astype(np.float32)
    G = rng.normal(0, 1, W.shape).astype(np.float32)
    expect = W - np.float32(0.1) * G
    K.sgd_update(W, G, 0.1)
    np.testing.assert_allclose(W, expect, rtol=1e-6)


def test_tally_entries_matches_twin():
    rng = np.random.default_rng(1)
    lst = random_list(rng, 5, 4, 20, 8)
    tile_local = (np.arange(20) * 7 % 6).astype(np.int32)
    out = K.tally_entries(lst, tile_local, 6)
    for r in range(2):
        for t in range(5):
            expect = np.zeros(6, np.int64)
            for b in range(4):
                for i in range(lst.counts[t, b, r]):
                    expect[tile_local[lst.ids[t, b, i]]] += 1
            np.testing.assert_array_equal(out[r, t], expect)


def test_kernel_input_errors():
    W = np.zeros((4, 3), np.float64)
    lst = SpikeList.empty(2, 1, 2)
    with pytest.raises(ConfigError, match="W = .*C-contiguous float32"):
        K.lif_forward(W, lst, ALPHA, SCALE, THR)
    with pytest.raises(ConfigError, match="v_seq = .*float32"):
        K.compact_spikes(np.zeros((2, 1, 3)), THR, 0.9, 2)
    with pytest.raises(ConfigError, match="step = 0: must be >= 1"):
        K.adam_update(np.zeros((2, 2), np.float32), *(np.zeros((2, 2), np.float32),) * 3, 1e-3, 0)
    with pytest.raises(ConfigError, match="SpikeList.ids"):
        SpikeList(np.zeros((2, 1, 2), np.int64), np.zeros((2, 1, 2), np.int32))
