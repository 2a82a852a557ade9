"""Per-tile work counters: recounting from recorded activity, placement invariants, hand cases."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.errors import ConfigError, MappingError
from tilesim.mapping.core import Mapping
from tilesim.models.snn.placement.contiguous import contiguous_placement, contiguous_tiles
from tilesim.models.snn.step.counters import COUNTER_NAMES, count_work, layer_memory, load_activity, save_activity
from tilesim.models.snn.training.network import NetworkConfig, compute_gradients, init_network


def run(cfg, placement=None, seed=0, per_step=True):
    state = init_network(cfg, placement)
    rng = np.random.default_rng(seed)
    x = (rng.random((cfg.timesteps, cfg.batch, cfg.layers[0])) < 0.3).astype(np.uint8)
    y = rng.integers(0, cfg.layers[-1], cfg.batch)
    return state, compute_gradients(state, x, y, per_step_counters=per_step)


def random_placement(sizes, n_tiles, seed):
    """Every layer on random tiles of its own random pool (one chip of ``n_tiles``): scattered,
    uneven, several neurons on some tiles and none on others."""
    rng = np.random.default_rng(seed)
    pools = np.array_split(rng.permutation(n_tiles), len(sizes))
    return Mapping(tuple(sizes), 1, n_tiles, tuple(rng.choice(pool, n) for pool, n in zip(pools, sizes)))


CFGS = [
    NetworkConfig("30-20-16-5", batch=6, timesteps=9, input_cap=8, caps=(5, 4, 2), seed=1),
    NetworkConfig(
        "30-20-16-5",
        batch=6,
        timesteps=9,
        input_cap=8,
        caps=(5, 4, 2),
        seed=1,
        recurrent=(False, True, True),
        second_threshold=0.3,
    ),
    NetworkConfig("40-24-6", batch=6, timesteps=7, input_cap=10, max_activity=0.25, activity="fixed"),
]


@pytest.mark.parametrize("cfg", CFGS, ids=["capped", "recurrent", "fixed"])
@pytest.mark.parametrize("kind", ["contiguous", "random"])
def test_count_work_equals_functional_counters(cfg, kind):
    sizes = cfg.layers[1:]
    placement = (
        contiguous_placement(sizes, 3, first_tile=1, tiles_per_chip=40)
        if kind == "contiguous"
        else random_placement(sizes, 50, 7)
    )
    _, res = run(cfg, placement)
    again = count_work(res.activity, placement, per_step=True)
    assert again.equals(res.counters)
    for p in res.counters.phases:
        np.testing.assert_array_equal(p.per_step.sum(axis=1), p.tile_totals)
        np.testing.assert_array_equal(p.per_step.sum(axis=2), p.step_totals)
    su = res.counters.tile_vector("state_update", 1, "synaptic_adds", t=2)
    assert su.shape == (placement.n_tiles,) and su.dtype == np.int64
    assert res.counters.tile_total("weight_grad", "grad_adds").sum() == sum(
        p.tile_vector("grad_adds").sum() for p in res.counters.phases if p.phase == "weight_grad"
    )


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(3, 30))  # one tile per layer at least (tiles are disjoint)
def test_math_and_placement_invariant_totals(seed, n_tiles):
    cfg = CFGS[1]
    sizes = cfg.layers[1:]
    _, a = run(cfg, contiguous_placement(sizes, 2, first_tile=0, tiles_per_chip=64), per_step=False)
    _, b = run(cfg, random_placement(sizes, n_tiles, seed), per_step=False)
    assert a.loss == b.loss
    for ga, gb in zip(a.grads[0] + a.grads[1], b.grads[0] + b.grads[1]):
        if ga is not None:
            np.testing.assert_array_equal(ga, gb)
    for pa in a.counters.phases:
        pb = b.counters.get(pa.phase, pa.layer)
        for name in (
            "synaptic_adds",
            "neurons_updated",
            "spikes_kept",
            "entries_kept",
            "slots_applied",
            "grad_adds",
            "macs",
            "weights_updated",
        ):
            if name in pa.names:
                assert pa.tile_vector(name).sum() == pb.tile_vector(name).sum(), (pa.phase, name)


def test_counters_by_hand():
    """layers 6-4-2, B = 2, T = 2, two neurons per tile starting at tile 1: hand-checked."""
    cfg = NetworkConfig("6-4-2", batch=2, timesteps=2, input_cap=3, caps=(2, 2), second_threshold=-100.0)
    placement = contiguous_placement((4, 2), 2, first_tile=1, tiles_per_chip=8)
    assert [t.tolist() for t in placement.tile_of_neuron] == [[1, 1, 2, 2], [3, 3]]
    state, res = run(cfg, placement)
    act = res.activity
    c_in = act.inputs.counts[..., 0]  # [T, B]
    c0, c1 = act.layers[0].counts[..., 0], act.layers[0].counts[..., 1]
    C = res.counters
    su0 = C.get("state_update", 0)
    np.testing.assert_array_equal(su0.tile_vector("synaptic_adds")[1:3], [2 * c_in.sum()] * 2)
    np.testing.assert_array_equal(su0.tile_vector("neurons_updated"), [0, 8, 8, 0, 0, 0, 0, 0])  # T·B·n
    np.testing.assert_array_equal(su0.tile_vector("vertices"), [0, 4, 4, 0, 0, 0, 0, 0])
    assert su0.tile_vector("bytes_received")[1] == 2 * 2 * (3 + 1) * 4  # T·B·(n_max_in+1)·4
    # layer 1 receives layer 0's list of t−1: only step 0 of layer 0 reaches it
    su1 = C.get("state_update", 1)
    assert su1.tile_vector("synaptic_adds")[3] == 2 * c0[0].sum()
    np.testing.assert_array_equal(su1.step_totals[0], [0, 2 * c0[0].sum()])
    ig = C.get("input_grad", 1)
    assert ig.tile_vector("macs")[3] == 2 * c1[0].sum()
    assert ig.tile_vector("reduction_adds")[3] == c1[0].sum()
    np.testing.assert_array_equal(ig.step_totals[ig.row("vertices")], [0, 2])
    sd0 = C.get("spike_detect", 0)
    ids = act.layers[0].ids
    owned_by_1 = sum(int(ids[t, b, i] < 2) for t in range(2) for b in range(2) for i in range(c1[t, b]))
    assert sd0.tile_vector("entries_kept")[1] == owned_by_1
    assert C.get("state_grad", 0).tile_vector("slots_applied")[1] == owned_by_1
    assert C.get("state_grad", 0).tile_vector("slots_scanned")[2] == c1.sum()
    wg = C.get("weight_grad", 0)
    assert wg.tile_vector("grad_adds")[1] == 2 * c_in.sum() and wg.tile_vector("vertices")[1] == 12
    opt = C.get("optimizer", 1)
    np.testing.assert_array_equal(opt.tile_vector("weights_updated"), [0, 0, 0, 8, 0, 0, 0, 0])
    assert opt.step_totals.shape == (1, 1)
    with pytest.raises(KeyError):
        C.get("input_grad", 0)  # layer 0 has no input gradient
    assert set(COUNTER_NAMES) == {p.phase for p in C.phases}


def test_per_step_only_when_asked():
    _, res = run(CFGS[0], per_step=False)
    p = res.counters.get("state_update", 0)
    assert p.per_step is None and p.tile_totals.shape == (4, res.counters.n_tiles)
    assert p.step_totals.shape == (4, CFGS[0].timesteps)
    with pytest.raises(ConfigError, match="per_step = None"):
        p.tile_vector("synaptic_adds", t=0)
    d = res.counters.to_dict()
    assert d["phases"][0]["phase"] == "state_update"


def test_memory_of_paper_layer():
    tiles = contiguous_tiles(1466, 2, 1)
    mem = layer_memory(2312, 1466, 100, 48, 32, tiles, 1472)
    assert mem["weights"][1] == 2312 * 2 * 4 and mem["weights"][0] == 0
    assert mem["dw_worker_copies"][1] == 6 * 2312 * 2 * 4  # 111 KB
    assert mem["state_sequence"][733] == 100 * 48 * 2 * 4  # 38.4 KB


def test_placement_errors():
    with pytest.raises(MappingError, match=r"neuron 5 on tile 5: out of range \[0, 5\)"):
        Mapping((10,), 1, 5, (np.arange(10),))
    with pytest.raises(MappingError, match="must be integers"):
        Mapping((10,), 1, 20, (np.arange(10.0),))
    p = Mapping((3,), 1, 2, (np.zeros(3, np.int32),))
    assert p.tile_of_neuron[0].dtype == np.int32 and p.neurons_owned(0).tolist() == [3, 0]
    with pytest.raises(MappingError, match=r"mapping layer sizes = \[3\]: the network has neuron layers \[4\]"):
        p.check((4,))
    with pytest.raises(MappingError, match="more than one chip"):
        contiguous_placement((5000,), 2, first_tile=1, tiles_per_chip=1472)
    with pytest.raises(ConfigError, match="neurons_per_tile = 0"):
        contiguous_tiles(4, 0)
    # a layer never straddles a chip
    pl = contiguous_placement((6, 6), 2, first_tile=1, tiles_per_chip=5)
    assert pl.tile_of_neuron[1].tolist() == [5, 5, 6, 6, 7, 7] and pl.n_tiles == 10


def test_activity_roundtrip_retimes_identically(tmp_path):
    cfg = CFGS[1]
    placement = random_placement(cfg.layers[1:], 12, 3)
    _, res = run(cfg, placement)
    save_activity(tmp_path / "act.npz", res.activity)
    again = count_work(load_activity(tmp_path / "act.npz"), placement, per_step=True)
    assert again.equals(res.counters)
