import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.machine.costs import CostModel, barrel_tile_cycles, load_costs


def test_barrel_rule():
    # one vertex: one worker at 1/6 of the issue rate; six vertices: the tile saturated
    assert barrel_tile_cycles(100, 1, 6, 0).item() == 600
    assert barrel_tile_cycles(600, 6, 6, 0).item() == 600
    assert barrel_tile_cycles(600, 12, 6, 11).item() == 600 + 22
    assert barrel_tile_cycles([5, 0], [0, 0], 6, 11).tolist() == [0, 0]


def test_cost_model(tmp_path):
    cm = CostModel("t", "1", {"adds": 2.0, "bytes": 0.25})
    assert cm.worker_cycles({"adds": np.array([1, 2]), "bytes": np.array([4, 8])}).tolist() == [3, 6]
    with pytest.raises(ConfigError, match=r"cost coefficient = 'muls': is not in the cost model"):
        cm.worker_cycles({"muls": np.ones(2)})
    with pytest.raises(ConfigError, match=r"costs.coefficients.adds = -1"):
        CostModel("t", "1", {"adds": -1})
    p = tmp_path / "c.toml"
    p.write_text(cm.to_toml())
    assert load_costs(p) == cm
    p.write_text("coefficients = 3\n")
    with pytest.raises(ConfigError, match=r"\[coefficients\] = None: missing table"):
        load_costs(p)
