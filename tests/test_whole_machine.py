"""Whole-machine placement (issue 38 parts 3 and 5): ``spread`` over every chip of a chip mesh and one
neuron per PE of a wafer, ``--mapping auto`` unchanged under Poplar, and a mesh map-search whose gain at
fixed neurons per tile is the mesh's and says so."""

from __future__ import annotations

import numpy as np
import pytest

from tilesim.machine.description import load_machine
from tilesim.machine.fabric import EthernetLinks
from tilesim.mapping.search import anneal
from tilesim.mapping.strategies import chip_walk, on_chips, split_layers, spread
from tilesim.models.snn.commands.hostmem import estimate_host_memory
from tilesim.models.snn.placement.fit import chip_grid_cols, place_network
from tilesim.models.snn.placement.search import gain_reasons, make_objective, split_gain
from tilesim.models.snn.stacks import stack_for
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig

DEEP = "700-" + "-".join(["128"] * 40) + "-20"  # 41 layers: two of 32 tiles on a Wormhole chip at 4 per tile


def _chips_used(m) -> set:
    return {m.chip_of_layer(l) for l in range(m.n_layers)}


def test_spread_uses_every_chip_of_a_chip_mesh_one_hop_apart():
    """16 chips on a 2 x 8 mesh, 20 layers of 32 neurons: the paper's contiguous placement packs them on the
    first chips; ``spread`` puts them on all 16 (counted), consecutive layers at most one Ethernet hop apart
    (the snake walk), each chip's 64 tiles shared by its layers. (``auto`` on Tenstorrent is the tt-metal
    stack's ``rectangles`` since issue 49, on the fewest chips that are fastest: tests/test_stack_tt_metal.py.)"""
    cfg = NetworkConfig(layers="64-" + "-".join(["32"] * 20), batch=2, timesteps=3, max_activity=0.1, activity="fixed")
    m = load_machine("wormhole-galaxy", 16)
    auto = place_network(cfg, m, None, "spread").mapping
    contiguous = place_network(cfg, m, None, "contiguous").mapping
    assert auto.strategy == "spread"
    assert place_network(cfg, m, None, "auto").mapping.strategy == "rectangles"
    assert _chips_used(auto) == set(range(16))
    assert len(_chips_used(contiguous)) < 16
    links = EthernetLinks(m)
    chips = [auto.chip_of_layer(l) for l in range(auto.n_layers)]
    assert max(links.hops(a, b) for a, b in zip(chips, chips[1:])) == 1
    # 20 layers on 16 chips: 4 chips hold two layers (16 + 16 tiles of 64), 12 hold one on 32 tiles: 1 per tile
    assert sorted(np.bincount(chips).tolist()) == [1] * 12 + [2] * 4
    assert max(auto.neurons_per_tile()) == 1


def test_chip_walk_and_layer_split():
    assert chip_walk(6, 3) == [0, 1, 2, 5, 4, 3]
    assert chip_walk(4, None) == [0, 1, 2, 3]
    # [1,1,1,5,1,1,1] in 3 runs: the 5 alone, the rest either side (3, 5, 3: the least sum of squares)
    assert split_layers([1, 1, 1, 5, 1, 1, 1], 3) == [0, 0, 0, 1, 2, 2, 2]
    assert split_layers([3] * 5, 5) == [0, 1, 2, 3, 4]
    m = spread([10] * 3, 4, 8, grid_cols=2)  # fewer layers than chips: a chip each, on the walk 0, 1, 3
    assert [m.chip_of_layer(l) for l in range(3)] == [0, 1, 3]


def test_wafer_spread_is_one_neuron_per_pe_and_the_estimate_counts_the_stacks_supersteps():
    """On a wafer ``auto`` (Cerebras: spread) gives every neuron its own PE; the host-memory guard sizes the
    program by the stack's supersteps (CSL: all layers in each row) rather than Poplar's per-layer rows."""
    cfg = NetworkConfig(layers="700-" + "-".join(["200"] * 30) + "-20", batch=4, timesteps=5, activity="fixed")
    wse = load_machine("wse2")
    p = place_network(cfg, wse, None, "auto")
    assert p.mapping.strategy == "spread" and p.neurons_per_tile == 1
    assert p.mapping.tiles_used() == sum(cfg.layers[1:])
    csl = estimate_host_memory(cfg, wse).to_dict()["parts_bytes"]["program"]
    poplar = estimate_host_memory(cfg, wse, stack="poplar").to_dict()["parts_bytes"]["program"]
    s_csl, s_poplar = (stack_for(wse, st).max_supersteps(5, 31, 1) for st in ("csl", "poplar"))
    assert s_csl * 4 < s_poplar
    assert csl / poplar == pytest.approx(s_csl / s_poplar)


def test_auto_is_the_papers_placement_under_poplar():
    cfg = NetworkConfig(layers="700-128-128-20", batch=4, timesteps=5, activity="fixed")
    for name in ("gc200", "bow"):
        m = load_machine(name, 2)
        a, c = place_network(cfg, m, None, "auto"), place_network(cfg, m, None, "contiguous")
        assert a.mapping.strategy == "contiguous" and a.neurons_per_tile == c.neurons_per_tile
        assert all(np.array_equal(x, y) for x, y in zip(a.mapping.tile_of_neuron, c.mapping.tile_of_neuron))


@pytest.fixture(scope="module")
def deep_search():
    cfg = NetworkConfig(layers=DEEP, batch=16, timesteps=10, max_activity=0.05, activity="fixed")
    m = load_machine("wormhole-galaxy")
    base = place_network(cfg, m, 4, "contiguous").mapping
    objective = make_objective(cfg, m, fixed_activity(cfg))
    res = anneal(base, objective, 60.0, max_evals=12, chip_cols=chip_grid_cols(m), fixed_tiles=True)
    return cfg, m, base, objective, res


def test_mesh_map_search_gain_at_fixed_neurons_per_tile(deep_search):
    """41 layers at 4 neurons per tile on the Galaxy's 4 x 8 chip mesh: contiguous hands the chips out
    row by row, so the chain of layers jumps 7 hops at every row's end; the search, its tiles per layer
    fixed, walks the chips in snake order (one hop per boundary) and is >= 1.10x faster, all of it the
    mesh's share."""
    cfg, m, base, objective, res = deep_search
    assert [t.size for t in map(base.tiles_of_layer, range(base.n_layers))] == [
        t.size for t in map(res.best.tiles_of_layer, range(res.best.n_layers))
    ]
    assert res.best.neurons_per_tile() == base.neurons_per_tile()
    assert res.baseline_value / res.best_value >= 1.10
    split = split_gain(base, res.best, objective)
    assert split["neurons_per_tile"] == pytest.approx(1.0, abs=1e-12)
    assert split["mesh"] == pytest.approx(res.baseline_value / res.best_value, rel=1e-9)
    a = {"breakdown_s": objective.breakdown_s(base), "neurons_per_tile": [4], "tiles_used": 1, "tile_order": None}
    b = {**a, "breakdown_s": objective.breakdown_s(res.best)}
    why = gain_reasons({**a, "chips_of_layer": [[0]]}, {**b, "chips_of_layer": [[1]]}, False, split)
    assert any(line.startswith("links ") for line in why)
    assert any("the placement's share" in line and "neurons-per-tile share 1.000x" in line for line in why)
    share = next(line for line in why if "the placement's share" in line)
    placement_part = share.split(" x the neurons-per-tile share")[0]
    assert "(links -" in placement_part  # the phase that moved is named in the share it moved in


def test_gain_reasons_name_the_phase_each_share_moved():
    """Issue 49 part 7: a gain at fixed neurons per tile that is all compute (a dealing that re-balances the
    spike work) is not credited to traffic; each share names the phases it moved."""
    a = {"breakdown_s": {"compute": 1e-3, "exchange": 2e-4}, "neurons_per_tile": [4], "tiles_used": 1}
    b = {**a, "breakdown_s": {"compute": 0.98e-3, "exchange": 2e-4}}
    split = {
        "mesh": 1.2e-3 / 1.18e-3,
        "neurons_per_tile": 1.0,
        "moved_s": {"mesh": {"compute": -2e-5, "exchange": 0.0}, "neurons_per_tile": {"compute": 0.0}},
    }
    why = gain_reasons({**a, "chips_of_layer": [[0]]}, {**b, "chips_of_layer": [[0]]}, False, split)
    line = next(x for x in why if "placement's share" in x)
    assert "(compute -20.0 us: the work per tile moved, not the traffic" in line
    assert "neurons-per-tile share 1.000x (no phase moved)" in line


def test_on_chips_moves_whole_chips():
    m = spread([10] * 4, 4, 8)
    moved = on_chips(m, [0, 2, 3, 1])
    assert [moved.chip_of_layer(l) for l in range(4)] == [[0, 2, 3, 1][m.chip_of_layer(l)] for l in range(4)]
    with pytest.raises(Exception, match="walk"):
        on_chips(m, [1, 0, 2, 3])


def test_wafer_link_loads_on_the_busy_band_equal_the_whole_grid(monkeypatch):
    """A 300 x 300 mesh whose senders and receivers fill rows 10-59: the loads found on that band of rows
    (what a wafer's network uses) equal those of the whole grid, and no link outside it carries a byte."""
    from tilesim.machine import gridload

    rng = np.random.default_rng(1)
    bi, bo = np.zeros((6, 90_000)), np.zeros((6, 90_000))
    bi[:, 3000:18000], bo[:, 3000:18000] = rng.random((2, 6, 15000)) * (rng.random((2, 6, 15000)) < 0.3)
    trees = np.array([True, False] * 3)
    band = gridload.grid_link_peaks(bi, bo, 300, 300, False, trees), gridload.grid_link_totals(bi, bo, 300, 300, False)
    assert gridload._busy_rows(bi, bo, 300, 300, False) == (10, 60)
    monkeypatch.setattr(gridload, "_BAND_CELLS", 10**9)
    whole = gridload.grid_link_peaks(bi, bo, 300, 300, False, trees), gridload.grid_link_totals(bi, bo, 300, 300, False)
    np.testing.assert_allclose(band[0][0], whole[0][0], rtol=1e-12)
    np.testing.assert_array_equal(band[0][1], whole[0][1])
    for k in ("right", "left", "down", "up"):
        np.testing.assert_allclose(getattr(band[1], k), getattr(whole[1], k), rtol=1e-12, atol=1e-9)
    assert not band[1].down[60:].any() and not band[1].right[:10].any()
