"""mapping/: the Mapping object, its JSON form, the strategies and the search (no kernels)."""

import json
import math

import numpy as np
import pytest

from tilesim.errors import ConfigError, MappingError
from tilesim.mapping import Mapping, balanced, contiguous, graph, load_mapping, round_robin
from tilesim.mapping.search import anneal, layout_of
from tilesim.mapping.strategies import pack_layers, share_tiles


# ---- strategies on hand-checkable networks ----------------------------------------------------
def test_contiguous_is_the_papers_rule():
    m = contiguous([5, 4, 2], chips=1, tiles_per_chip=10, neurons_per_tile=2)
    assert [a.tolist() for a in m.tile_of_neuron] == [[1, 1, 2, 2, 3], [4, 4, 5, 5], [6, 6]]
    assert m.neurons_per_tile() == [2, 2, 2] and m.tiles_used() == 6


def test_contiguous_layer_never_straddles_a_chip():
    m = contiguous([6, 6, 6], chips=2, tiles_per_chip=8, neurons_per_tile=2)
    # layer 1 on tiles 1-3, layer 2 would need 4-6 (fits), layer 3 needs 7-9: next chip
    assert [m.chip_of_layer(l) for l in range(3)] == [0, 0, 1]
    assert m.tiles_of_layer(2).tolist() == [8, 9, 10]


def test_round_robin_deals_neurons_cyclically_on_the_same_tiles():
    c = contiguous([6], 1, 10, 2)
    r = round_robin([6], 1, 10, 2)
    assert r.tile_of_neuron[0].tolist() == [1, 2, 3, 1, 2, 3]
    assert set(c.tiles_of_layer(0)) == set(r.tiles_of_layer(0))


def test_balanced_shares_tiles_by_weight():
    m = balanced([100, 100], chips=1, tiles_per_chip=31, weights=[1, 2], neurons_per_tile=8)
    assert [m.tiles_of_layer(l).size for l in range(2)] == [10, 20]
    owned = m.owned()
    assert owned.sum() == 200 and owned[0] == 0


def test_share_tiles_respects_caps_and_budget():
    assert share_tiles([1, 1, 1], [5, 100, 100], 50) == [5, 23, 22]
    assert sum(share_tiles([3, 1e-9, 1], [1000, 1000, 1000], 100)) == 100
    assert min(share_tiles([3, 1e-9, 1], [1000, 1000, 1000], 100)) >= 1


def test_graph_cuts_the_lightest_edge_between_chips():
    edge = [1.0] * 19
    edge[10] = 0.1  # layers 10 | 11 exchange little
    m = graph([984] * 20, chips=2, tiles_per_chip=1472, edge_bytes=edge, neurons_per_tile=8)
    assert [m.chip_of_layer(l) for l in range(20)] == [0] * 11 + [1] * 9


def test_graph_on_one_chip_equals_contiguous():
    a = graph([50, 40, 10], 1, 100, [1, 1], 2)
    b = contiguous([50, 40, 10], 1, 100, 2)
    assert all(np.array_equal(x, y) for x, y in zip(a.tile_of_neuron, b.tile_of_neuron))


def test_pack_layers_errors_name_the_fix():
    with pytest.raises(MappingError, match="more than a chip"):
        pack_layers([20], 1, 10)
    with pytest.raises(MappingError, match="need 2 chips: machine has 1"):
        pack_layers([6, 6], 1, 10)


# ---- validation -------------------------------------------------------------------------------
def test_validation_out_of_range():
    with pytest.raises(MappingError, match=r"layer 1 neuron 1 on tile 12: out of range \[0, 10\)"):
        Mapping((2,), 1, 10, (np.array([1, 12]),))


def test_validation_overlap_between_layers():
    with pytest.raises(MappingError, match="tile 3 holds neurons of layers 1 and 2"):
        Mapping((2, 2), 1, 10, (np.array([1, 3]), np.array([3, 4])))


def test_validation_incomplete():
    with pytest.raises(MappingError, match="maps 1 neurons: it has 2"):
        Mapping((2,), 1, 10, (np.array([1]),))
    with pytest.raises(MappingError, match="has 1 layers: the network has 2"):
        Mapping((2, 2), 1, 10, (np.array([1, 2]),))


def test_a_layer_across_chips_is_a_valid_mapping():
    """Whether a layer may span chips is the workload's stack's to say (tests/test_straddle.py): the
    mapping holds it, the chip of its first neuron first."""
    m = Mapping((3,), 2, 10, (np.array([10, 9, 11]),))
    assert m.chips_of_layer(0) == (1, 0) and m.chip_of_layer(0) == 1 and m.spans_chips() == [0]
    assert m.chips_used() == 2
    assert Mapping.from_dict(m.to_dict()).chips_of_layer(0) == (1, 0)


# ---- JSON ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda: contiguous([7, 5, 3], 2, 6, 2),
        lambda: round_robin([7, 5], 1, 10, 3),
        lambda: balanced([9, 4], 1, 12, [1, 3], 2),
    ],
)
def test_json_round_trip(tmp_path, make):
    m = make()
    m.save(tmp_path / "m.json")
    back = load_mapping(tmp_path / "m.json")
    assert back.strategy == m.strategy and back.chips == m.chips
    assert all(np.array_equal(a, b) for a, b in zip(back.tile_of_neuron, m.tile_of_neuron))


def test_hand_written_json(tmp_path):
    doc = {
        "chips": 1,
        "tiles_per_chip": 16,
        "layers": [
            {
                "neurons": 6,
                "blocks": [
                    {"first_neuron": 0, "count": 4, "first_tile": 1, "neurons_per_tile": 2},
                    {"first_neuron": 4, "count": 2, "first_tile": 3, "n_tiles": 2},
                ],
            },
            {"neurons": 3, "tiles": [8, 8, 9]},
        ],
    }
    (tmp_path / "h.json").write_text(json.dumps(doc))
    m = load_mapping(tmp_path / "h.json")
    assert m.tile_of_neuron[0].tolist() == [1, 1, 2, 2, 3, 4]
    assert m.tile_of_neuron[1].tolist() == [8, 8, 9]


@pytest.mark.parametrize(
    "change, match",
    [
        (
            lambda d: d["layers"][0]["blocks"].append({"first_neuron": 2, "count": 2, "first_tile": 9, "n_tiles": 1}),
            "neuron 2 is already mapped.*overlap",
        ),
        (lambda d: d["layers"][0]["blocks"][0].update(count=3), "neuron 3 .* not mapped"),
        (lambda d: d["layers"][0]["blocks"][0].update(first_tile=15), r"tiles \[15, 17\) out of range"),
        (lambda d: d["layers"][0]["blocks"][0].update(chip=2), r"chip = 2: out of range \[0, 1\)"),
        (lambda d: d["layers"][0]["blocks"][0].update(tile=3), r"unknown key\(s\) \['tile'\]"),
        (lambda d: d.pop("tiles_per_chip"), "missing key 'tiles_per_chip'"),
    ],
)
def test_bad_json_is_a_clear_error(tmp_path, change, match):
    doc = {
        "chips": 1,
        "tiles_per_chip": 16,
        "layers": [{"neurons": 4, "blocks": [{"first_neuron": 0, "count": 4, "first_tile": 1, "neurons_per_tile": 2}]}],
    }
    change(doc)
    (tmp_path / "b.json").write_text(json.dumps(doc))
    with pytest.raises(MappingError, match=match):
        load_mapping(tmp_path / "b.json")


def test_not_json(tmp_path):
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(MappingError, match="is not valid JSON"):
        load_mapping(tmp_path / "x.json")


# ---- search -------------------------------------------------------------------------------------
def test_layout_round_trip():
    for m in (
        contiguous([30, 20, 5], 1, 40, 2),
        round_robin([30, 20, 5], 1, 40, 2),
        balanced([30, 20, 5], 1, 40, [1, 3, 1], 2),
    ):
        back = layout_of(m).mapping()
        assert all(np.array_equal(a, b) for a, b in zip(back.tile_of_neuron, m.tile_of_neuron))


def test_anneal_finds_the_optimum_of_a_known_objective_and_never_returns_a_rejected_one():
    # time = the most neurons on any tile of layer 1 (wants many tiles) ; > 20 tiles = "overflow"
    def objective(m):
        n1 = m.tiles_of_layer(0).size
        return math.inf if n1 > 20 else 1.0 + max(m.neurons_per_tile()[:1]) + 0.01 * m.tiles_of_layer(1).size

    start = contiguous([40, 10], 1, 64, 4)
    res = anneal(start, objective, budget_s=5, max_evals=600, seed=1)
    assert res.best_value <= objective(start)
    assert math.isfinite(objective(res.best)) and res.best.tiles_of_layer(0).size <= 20
    assert res.best.neurons_per_tile()[0] == 2  # 40 neurons on 20 tiles
    assert res.evaluated >= 100 and res.best.strategy == "search"


def test_anneal_rejects_an_infeasible_start():
    with pytest.raises(MappingError, match="starting mapping is rejected"):
        anneal(contiguous([4], 1, 8, 2), lambda m: math.inf, budget_s=1)


def test_anneal_budget_must_be_positive():
    with pytest.raises(ConfigError, match="budget_s = 0"):
        anneal(contiguous([4], 1, 8, 2), lambda m: 1.0, budget_s=0)
