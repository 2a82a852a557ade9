"""Mesh and torus networks-on-chip and Ethernet lines, rings and meshes of chips: routes and
contention counted by hand on 2x2 and 4x4 grids."""

from dataclasses import replace

import numpy as np
import pytest

from tilesim.engine.timeline import Flow, fluid_batch
from tilesim.errors import ConfigError
from tilesim.machine.description import Fabric, load_machine
from tilesim.machine.fabric import EthernetLinks, MeshFabric, TorusFabric, chip_links
from tilesim.machine.fluid import drain_times


def grid_machine(kind: str, side: int, *, port_bpc=100.0, link_bpc=1.0, hop=0.0, fixed=0):
    base = load_machine("mesh-demo")
    chip = replace(base.chip, tiles=side * side, exchange_bytes_per_cycle=port_bpc, exchange_fixed_cycles=fixed)
    fabric = Fabric(kind=kind, cols=side, rows=side, hop_cycles=hop, link_bytes_per_cycle=link_bpc)
    return replace(base, chip=chip, fabric=fabric)


def test_4x4_mesh_routes_x_then_y():
    f = MeshFabric(grid_machine("mesh", 4))
    # tile 0 at (0, 0) to tile 15 at (3, 3): along row 0, then down column 3
    assert f.route(0, 15) == (
        ("inject", 0), (0, 0, 1, 0), (1, 0, 2, 0), (2, 0, 3, 0),
        (3, 0, 3, 1), (3, 1, 3, 2), (3, 2, 3, 3), ("eject", 15),
    )  # fmt: skip
    assert f.hops(0, 15) == 6 and f.hops(5, 6) == 1 and f.hops(12, 3) == 6


def test_4x4_torus_goes_the_shorter_way_round():
    f = TorusFabric(grid_machine("torus", 4))
    assert f.route(0, 15) == (("inject", 0), (0, 0, 3, 0), (3, 0, 3, 3), ("eject", 15))  # both wraps
    assert f.hops(0, 15) == 2 and f.hops(0, 2) == 2  # a tie (2 either way) goes the positive way
    assert f.route(0, 2)[1:3] == ((0, 0, 1, 0), (1, 0, 2, 0))
    assert f.mean_hops == pytest.approx(2 * (16 // 4) / 4)  # 1 per dimension on a 4-ring


def test_2x2_mesh_contention_is_an_event_model_not_a_link_load_bound():
    """Tiles 0 (0,0), 1 (1,0), 3 (1,1); links L1 = 0->1 and L2 = (1,0)->(1,1), 1 byte per cycle.
    A, D: 0->1 (30 B, L1); B: 0->3 (30 B, L1 then L2); C: 1->3 (300 B, L2).
    L1 carries three flows (1/3 each), so B moves at 1/3 and C gets half of L2 (0.5) while B is
    on it: A, B, D drain at 90 cycles; C has moved 45 of 300 and then runs alone: 90 + 255 = 345.
    The busiest link's load (L2: 330 B) would say 330."""
    m = grid_machine("mesh", 2)
    f = MeshFabric(m)
    src, dst = np.array([0, 0, 0, 1]), np.array([1, 3, 1, 3])
    nb = np.array([30.0, 30.0, 30.0, 300.0])
    routes = [f.route(a, b) for a, b in zip(src, dst)]
    bw = {g: (100.0 if isinstance(g[0], str) else 1.0) for r in routes for g in r}
    assert drain_times(routes, nb, bw) == pytest.approx([90, 90, 90, 345])
    assert f.transfer_cycles(src, dst, nb) == 345
    # hops add per transfer: C (1 hop) at 345 + 7, B (2 hops) at 90 + 14
    f7 = MeshFabric(grid_machine("mesh", 2, hop=7.0, fixed=20))
    assert f7.transfer_cycles(src, dst, nb) == 20 + 345 + 7


def test_mesh_ports_are_links_too():
    """Two transfers into one tile share its ejection port (4 B/cycle): 2 x 400 B take 200 cycles,
    though they use different mesh links."""
    f = MeshFabric(grid_machine("mesh", 2, port_bpc=4.0, link_bpc=100.0))
    assert f.transfer_cycles(np.array([1, 2]), np.array([0, 0]), np.array([400.0, 400.0])) == 200


def ethernet(topology: str, chips: int, cols: int = 0, links: int = 1):
    m = load_machine("bow")
    system = replace(
        m.system, chips=chips, topology=topology, grid_cols=cols, links_per_neighbour=links,
        link_bytes_per_s=1e9, link_efficiency=1.0, link_latency_s=1e-7,
    )  # fmt: skip
    return replace(m, chip=replace(m.chip, clock_hz=1e9), system=system)


def test_ring_line_and_mesh_routes():
    ring = EthernetLinks(ethernet("ring", 8))
    assert ring.route(0, 5) == (("eth", 0, 7), ("eth", 7, 6), ("eth", 6, 5))  # 3 hops back, not 5 on
    assert [g[2] for g in ring.route(0, 4)] == [1, 2, 3, 4]  # tie: the positive way
    line = EthernetLinks(ethernet("line", 4))
    assert line.route(3, 0) == (("eth", 3, 2), ("eth", 2, 1), ("eth", 1, 0))
    assert ("eth", 3, 0) not in line.bw and ("eth", 7, 0) in ring.bw
    mesh = EthernetLinks(ethernet("mesh", 8, cols=4))  # 2 x 4
    assert mesh.route(0, 7) == (("eth", 0, 1), ("eth", 1, 2), ("eth", 2, 3), ("eth", 3, 7))
    torus = EthernetLinks(ethernet("torus", 16, cols=4))
    assert torus.route(0, 15) == (("eth", 0, 3), ("eth", 3, 15))
    assert len(mesh.bw) == 2 * (2 * 3 + 4)  # 6 row links and 4 column links, both directions


def test_ethernet_flows_share_links_and_pay_latency_per_hop():
    """Ring of 4, 1 B/cycle per link, 100 cycles per hop: 0->2 (over 1) and 1->2 share link 1->2:
    each drains at 200; 0->2 has two hops (400), 1->2 one (300). Two links per neighbour halve it."""
    flows = (Flow(0, 2, 100.0), Flow(1, 2, 100.0))
    done, group_bytes = fluid_batch(flows, chip_links(ethernet("ring", 4)))
    assert done.tolist() == [400.0, 300.0]
    assert group_bytes[("eth", 1, 2)] == 200.0
    done2, _ = fluid_batch(flows, chip_links(ethernet("ring", 4, links=2)))
    assert done2.tolist() == [300.0, 200.0]


def test_a_mesh_of_chips_needs_whole_rows():
    with pytest.raises(ConfigError, match=r"system.grid_cols = 3: must be >= 1 and divide system.chips = 8"):
        ethernet("mesh", 8, cols=3)
    m = ethernet("mesh", 8, cols=4)
    assert m.with_chips(2).system.grid_cols == 2  # fewer chips than a row: one row
    assert m.sync_hops(8) == 4 and ethernet("ring", 8).sync_hops(8) == 4 and ethernet("line", 4).sync_hops(4) == 3
    assert m.with_topology("ring", 8).system.topology == "ring"


def test_rectangular_multicast_counted_by_hand():
    """Tile 0 at (0, 0) sends 1000 B to the 2 x 2 rectangle of columns 2-3, rows 2-3 of a 4 x 4 mesh
    (1 B/cycle links, 5 cycles per hop). As a multicast its tree carries the message once per
    link: 1000 cycles of drain + 6 hops to tile 15 = 1030. As four point-to-point transfers the
    first link carries it four times: 4000 + 30."""
    from tilesim.engine.events import simulate
    from tilesim.machine.fabric import rectangle_tiles
    from tilesim.program import ProgramBuilder

    m = grid_machine("mesh", 4, hop=5.0)
    rect = rectangle_tiles(4, 2, 2, 3, 3)
    assert rect == [10, 11, 14, 15]
    b = ProgramBuilder.for_machine(m)
    b.superstep("multicast", 0, multicasts=[(0, rect, 1000.0)])
    b.superstep("unicasts", 0, transfers=[(0, t, 1000.0) for t in rect])
    p = b.build()
    assert p.bytes_out[0, 0] == 1000 and p.bytes_out[1, 0] == 4000 and (p.bytes_in[0, rect] == 1000).all()
    r = simulate(p, m)
    assert r.phase_s[0, 2] * m.clock_hz == pytest.approx(1030)
    assert r.phase_s[1, 2] * m.clock_hz == pytest.approx(4030)
    f = MeshFabric(m)
    tree = set(dict.fromkeys(link for t in rect for link in f.route(0, t)))
    assert len([g for g in tree if not isinstance(g[0], str)]) == 9  # 3 along row 0, 6 down columns 2 and 3


def test_two_multicasts_share_their_common_links():
    """0 -> {2, 3} and 1 -> {3} on a 4 x 1 row share links 1->2 and 2->3: half each, 2000 cycles."""
    f = MeshFabric(grid_machine("mesh", 4))
    src, dst = np.array([0, 0, 1]), np.array([2, 3, 3])
    nb, group = np.array([1000.0, 1000.0, 1000.0]), np.array([0, 0, 1])
    assert f.transfer_cycles(src, dst, nb, group) == 2000


def test_a_multicast_has_one_source_and_one_size():
    from tilesim.program import Program, ProgramBuilder

    m = grid_machine("mesh", 2)
    b = ProgramBuilder.for_machine(m)
    b.superstep("x", 0, multicasts=[(0, [1, 2], 64.0)])
    p = b.build()
    import dataclasses

    with pytest.raises(ConfigError, match="multicast = 0: mixes supersteps, sources or byte counts"):
        Program(**{**{f.name: getattr(p, f.name) for f in dataclasses.fields(p)},
                   "transfer_src": np.array([0, 3], np.int32)})  # fmt: skip
    with pytest.raises(ConfigError, match="multicast destinations"):
        ProgramBuilder.for_machine(m).superstep("x", 0, multicasts=[(0, [], 64.0)])
