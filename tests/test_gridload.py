"""Link loads of a mesh or torus from per-tile totals (proportional traffic) and the tile orders a
mapping search walks a chip's grid in: counted by hand, and against the fabric's own routes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_fabric_grid import grid_machine
from tilesim.machine.description import load_machine
from tilesim.machine.fabric import MeshFabric, TorusFabric, _grid_steps, make_fabric
from tilesim.machine.gridload import grid_link_loads, grid_max_hops, link_slot
from tilesim.mapping.grid import TILE_ORDERS, order_of, reorder, tile_order
from tilesim.mapping.search import anneal, layout_of
from tilesim.mapping.strategies import contiguous
from tilesim.program.rows import TileRows


def _brute(bytes_in, bytes_out, rows, cols, wrap):
    """Every (sender, receiver) flow of proportional traffic walked along the fabric's route."""
    load: dict = {}
    hops = -1
    total = bytes_out.sum()
    for s in np.flatnonzero(bytes_out):
        for r in np.flatnonzero(bytes_in):
            steps = _grid_steps(int(s), int(r), cols, rows, wrap)
            hops = max(hops, len(steps))
            for link in steps:
                load[link] = load.get(link, 0.0) + bytes_out[s] * bytes_in[r] / total
    return load, hops


def read_link(links, link, rows, cols, e=0):
    """The load of directed link ``(x, y, nx, ny)`` in :class:`GridLinks` (of exchange ``e``)."""
    name, y, x = link_slot(link, rows, cols)
    return getattr(links, name)[e, y, x]


def random_traffic(rows, cols, seed):
    """Bytes in and out (``[1, T]``, 0-400 in hundreds, ~40 % of tiles silent) of ``T`` tiles on a
    ``rows x cols`` grid that may have more cells than tiles; None when there is no tile."""
    rng = np.random.default_rng(seed)
    T = rows * cols - int(rng.integers(0, cols))
    if T < 1:
        return None
    out = rng.integers(0, 5, (1, T)) * (rng.random((1, T)) < 0.6) * 100.0
    inn = rng.integers(0, 5, (1, T)) * (rng.random((1, T)) < 0.6) * 100.0
    return inn, out


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 5),
    cols=st.integers(1, 6),
    wrap=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_link_loads_equal_every_flow_walked_along_its_route(rows, cols, wrap, seed):
    traffic = random_traffic(rows, cols, seed)
    if traffic is None:
        return
    inn, out = traffic
    links = grid_link_loads(inn, out, rows, cols, wrap)
    hops = grid_max_hops(inn, out, rows, cols, wrap)[0]
    if not out.any() or not inn.any():
        assert links.busiest()[0] == 0 and hops == -1
        return
    load, longest = _brute(inn[0], out[0], rows, cols, wrap)
    for link, v in load.items():
        assert read_link(links, link, rows, cols) == pytest.approx(v, rel=1e-9)
    total = sum(a.sum() for a in (links.right, links.left, links.down, links.up))
    assert total == pytest.approx(sum(load.values()), rel=1e-9, abs=1e-9)  # no link loaded that no route uses
    if wrap:
        assert hops >= longest  # the torus's hops are an upper bound
    else:
        assert hops == longest


def test_a_line_counted_by_hand():
    """1 x 4 mesh: tile 0 sends 100 B, tiles 2 and 3 take 60 and 40. Links 0->1 and 1->2 carry
    all 100 B, 2->3 the 40 B for tile 3; nothing goes left; the longest route is 3 hops."""
    links = grid_link_loads(np.array([[0, 0, 60, 40.0]]), np.array([[100.0, 0, 0, 0]]), 1, 4, False)
    assert links.right[0, 0].tolist() == [100, 100, 40, 0]
    assert not links.left.any() and not links.down.any() and not links.up.any()
    assert grid_max_hops(np.array([[0, 0, 60, 40.0]]), np.array([[100.0, 0, 0, 0]]), 1, 4, False).tolist() == [3]


def test_exchange_from_totals_counted_by_hand_and_placement_matters():
    """4 x 4 mesh (port 8 B/cycle, link 4 B/cycle, fixed 20, hop 3). Tiles 0 and 1 each send 400 B;
    tiles 2 and 3 each take 400 B: proportional traffic sends 200 B from each sender to each
    receiver, so the link 1 -> 2 carries all 800 B: 200 cycles, not the ports' 50; the longest
    route 0 -> 3 is 3 hops: 20 + 200 + 9 = 229. The same totals with the senders on tiles 0 and 4
    (column 0) and the receivers on 1 and 5 (column 1): two row links side by side, 400 B each, and
    the longest route 4 -> 1 is 2 hops: 20 + 100 + 6. On the IPU both take the same time."""
    f = MeshFabric(grid_machine("mesh", 4, port_bpc=8.0, link_bpc=4.0, hop=3.0, fixed=20))
    out, inn = np.zeros((1, 1, 16)), np.zeros((1, 1, 16))
    out[0, 0, [0, 1]] = 400
    inn[0, 0, [2, 3]] = 400
    assert f.exchange_cycles(inn, out)[0][0, 0] == 20 + 800 / 4 + 3 * 3
    out2, inn2 = np.zeros((1, 1, 16)), np.zeros((1, 1, 16))
    out2[0, 0, [0, 4]] = 400
    inn2[0, 0, [1, 5]] = 400
    links = grid_link_loads(inn2[0], out2[0], 4, 4, False)
    assert links.busiest()[0] == 400
    assert f.exchange_cycles(inn2, out2)[0][0, 0] == 20 + 400 / 4 + 2 * 3  # 4 -> 1 is 2 hops
    ipu = make_fabric(load_machine("gc200"))
    pad = np.zeros((1, 1, 1472 - 16))
    a = ipu.exchange_cycles(np.concatenate([inn, pad], 2), np.concatenate([out, pad], 2))[0]
    b = ipu.exchange_cycles(np.concatenate([inn2, pad], 2), np.concatenate([out2, pad], 2))[0]
    assert a == b


def test_the_fabric_reduces_rows_with_the_same_rule_as_from_peaks():
    """reduce(rows) (per-tile totals) and reduce_peaks(peaks with their link peaks) agree."""
    f = TorusFabric(grid_machine("torus", 4))
    rng = np.random.default_rng(3)
    r = rng.random((3, 5, 1, 16))
    rows = TileRows.every_row_exchanges(r[0] * 100, r[1] * 900, r[2] * 700)
    work = f.reduce(rows)
    cyc, _ = f.exchange_cycles(rows.bytes_in, rows.bytes_out)
    assert np.allclose(work.exchange, cyc)


def test_tile_orders_are_permutations_that_keep_tile_0():
    for order in TILE_ORDERS:
        for rows, cols, tiles in ((4, 4, 16), (9, 8, 72), (3, 5, 13)):
            p = tile_order(order, rows, cols, tiles)
            assert p[0] == 0 and sorted(p.tolist()) == list(range(tiles)), order
    assert tile_order("columns", 3, 4, 12)[:4].tolist() == [0, 4, 8, 1]
    assert tile_order("snake", 3, 4, 12)[4:8].tolist() == [7, 6, 5, 4]
    assert set(tile_order("spiral", 4, 4, 16)[1:4].tolist()) <= {5, 6, 9, 10}  # the centre first


def test_a_reordered_mapping_is_found_again_and_the_search_moves_the_order():
    m = contiguous((20, 30, 6), 1, 72, 2)
    for order in TILE_ORDERS:
        r = reorder(m, order, 9, 8)
        found, slots = order_of(r, 9, 8)
        assert found == order or order == "rows"
        assert [t.tolist() for t in slots.tile_of_neuron] == [t.tolist() for t in m.tile_of_neuron]
        assert layout_of(r, 1, (9, 8)).tile_order == found
    # an objective that prefers the spiral order: the search finds it from the row-major start
    centre = set(tile_order("spiral", 9, 8, 72)[:40].tolist())

    def objective(mp):
        return 1.0 + sum(t not in centre for a in mp.tile_of_neuron for t in a.tolist())

    res = anneal(m, objective, budget_s=5, max_evals=30, seed=0, grid=(9, 8))
    assert order_of(res.best, 9, 8)[0] == "spiral" and res.best_value < res.baseline_value
    # without a grid (the IPU) the order never moves
    flat = anneal(m, objective, budget_s=5, max_evals=30, seed=0)
    assert order_of(flat.best, 9, 8)[0] == "rows"


@pytest.mark.parametrize("machine_name", ["wormhole-n150", "mesh-demo"])
def test_every_program_form_gives_the_same_step_on_a_grid_and_placement_matters_on_a_mesh(machine_name):
    """The dense program (per-tile rows reduced by the fabric), the compact one (link peaks kept per
    chip) and the search's form give one step time for every tile order; on the mesh without
    wrap-around the order changes it, on the IPU it would not (test above)."""
    from tilesim.engine.events import simulate
    from tilesim.models.snn.placement.fit import place_network
    from tilesim.models.snn.step.counters import count_work
    from tilesim.models.snn.step.workload import SnnStep
    from tilesim.models.snn.training.activity import fixed_activity
    from tilesim.models.snn.training.network import NetworkConfig
    from tilesim.workload import step_seconds

    cfg = NetworkConfig("64-40-30-6", batch=4, timesteps=8, input_cap=10, max_activity=0.2, seed=3)
    machine = load_machine(machine_name)
    base = place_network(cfg, machine, 2, "contiguous", "raise").placement
    times = {}
    for order in TILE_ORDERS:
        pl = reorder(base, order, machine.fabric.rows, machine.fabric.cols)
        counters = count_work(fixed_activity(cfg), pl, per_step=True)
        forms = [
            simulate(SnnStep(cfg, pl, counters, form=f).program(machine), machine).total_s for f in ("dense", "compact")
        ]
        forms.append(step_seconds(SnnStep(cfg, pl, counters, form="peaks"), machine))
        assert forms == pytest.approx([forms[0]] * 3, rel=1e-9), order
        times[order] = forms[0]
    if machine_name == "mesh-demo":
        assert len(set(times.values())) > 1, times


def test_m3_mesh_placement_quick(tmp_path):
    """The experiment's claims hold in its quick form: the order matters on the mesh (spiral beats
    rows beats columns); on the torus (the n150, the tt-metal stack since issue 49) it matters through
    TT-Metal's multicast rectangle rule: a layer on whole rows of cores is one rectangle (rows, snake: the
    fastest), a spiral's cores are several (the slowest); the search beats contiguous saying why."""
    import csv

    from experiments import m3_mesh_placement

    assert m3_mesh_placement.main(["--quick", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "m3_mesh_placement.csv")))
    step = {(r["machine"], r["mapping"]): float(r["predicted_step_s"]) for r in rows}
    mesh = "mesh-demo"
    assert step[mesh, "contiguous, spiral"] < step[mesh, "contiguous, rows"] < step[mesh, "contiguous, columns"]
    torus = {k: v for (m, k), v in step.items() if m == "wormhole-n150"}
    assert torus["contiguous, rows"] == min(torus.values()) < torus["contiguous, spiral"] == max(torus.values())
    search = next(r for r in rows if r["mapping"].startswith("map-search"))
    assert float(search["predicted_step_s"]) < step[mesh, "contiguous, rows"] and search["why"]
    # (d) the Galaxy's mesh of chips: the gain at fixed neurons per tile, all of it the mesh's
    galaxy = [r for r in rows if r["machine"] == "wormhole-galaxy"]
    assert galaxy[1]["neurons_per_tile"] == galaxy[0]["neurons_per_tile"]
    assert float(galaxy[0]["predicted_step_s"]) / float(galaxy[1]["predicted_step_s"]) >= 1.10
    assert "the placement's share" in galaxy[1]["why"] and "neurons-per-tile share 1.000x" in galaxy[1]["why"]
    assert (tmp_path / "m3_mesh_placement.png").stat().st_size > 1000


def test_link_totals_route_explicit_transfers_and_a_multicast_tree_once():
    """4 x 4 mesh: a multicast from tile 0 to tiles 10 and 11 (group 0) loads each link of its XY tree
    once — row 0 rightwards to column 3, then down columns 2 and 3 to row 2 — and a unicast 5 -> 4
    loads the one link back from (1, 1) to (0, 1); no per-tile rows."""
    f = MeshFabric(grid_machine("mesh", 4))
    none = np.zeros((0, 16))
    links = f.link_totals(none, none, [(0, 10, 1000.0, 0), (0, 11, 1000.0, 0), (5, 4, 300.0, -1)])
    assert links.right[0].tolist() == [1000, 1000, 1000, 0] and not links.right[1:].any()
    assert links.down[:, 2].tolist() == [1000, 1000, 0, 0] and links.down[:, 3].tolist() == [1000, 1000, 0, 0]
    assert links.down.sum() == 4000 and not links.up.any()
    assert links.left[1, 0] == 300 and links.left.sum() == 300
