"""Claim B1: on the IPU exchange time depends on bytes, not distance; on a mesh it does not."""

from tilesim.engine.events import simulate
from tilesim.machine.description import load_machine
from tilesim.machine.fabric import grid_shape, make_fabric
from tilesim.program import ProgramBuilder


def p2p(machine, src, dst, nbytes):
    b = ProgramBuilder.for_machine(machine)
    b.superstep("send", 0, transfers=[(src, dst, nbytes)])
    return simulate(b.build(), machine).phase_s[0, 2] * machine.clock_hz


def test_ipu_exchange_is_distance_independent():
    m = load_machine("gc200")
    for nbytes in (64, 4096, 65536):
        near, far = p2p(m, 0, 1, nbytes), p2p(m, 0, 644, nbytes)
        assert near == far == 100 + nbytes / 4
    f = make_fabric(m)
    assert f.point_to_point_cycles(0, 1, 4096) == f.point_to_point_cycles(0, 1471, 4096)


def test_mesh_exchange_grows_with_distance():
    m = load_machine("mesh-demo")
    times = [p2p(m, 0, dst, 4096) for dst in (1, 17, 255)]  # 1, 2 and 30 hops
    assert times[0] < times[1] < times[2]
    assert times[2] - times[0] == 29 * m.fabric.hop_cycles
    f = make_fabric(m)
    assert f.point_to_point_cycles(0, 255, 64) > f.point_to_point_cycles(0, 1, 64)


def test_mesh_link_contention():
    m = load_machine("mesh-demo")
    b = ProgramBuilder.for_machine(m)
    # two transfers along the same row share the link 1->2
    b.superstep("shared", 0, transfers=[(0, 3, 8000), (1, 2, 8000)])
    b.superstep("disjoint", 0, transfers=[(0, 1, 8000), (16, 17, 8000)])
    r = simulate(b.build(), m)
    assert r.phase_s[0, 2] > r.phase_s[1, 2]


def test_fabrics_say_whether_they_route_transfers_and_their_grid():
    ipu, mesh = load_machine("gc200"), load_machine("mesh-demo")
    assert make_fabric(ipu).needs_transfers is False and grid_shape(ipu) is None
    assert make_fabric(mesh).needs_transfers is True
    assert grid_shape(mesh) == (mesh.fabric.rows, mesh.fabric.cols)
    rows, cols = grid_shape(mesh)
    f = make_fabric(mesh)
    # tile t sits at row t // cols, column t % cols: the last tile is a full diagonal away
    assert f.hops(0, rows * cols - 1) == (rows - 1) + (cols - 1)


def test_engine_passes_transfers_only_to_a_fabric_that_routes_them():
    """Same bytes per tile port, different partners: only the mesh's time changes."""
    for name, differs in (("gc200", False), ("mesh-demo", True)):
        m = load_machine(name)
        near = p2p(m, 0, 1, 4096)
        far = p2p(m, 0, m.tiles_per_chip - 1, 4096)
        assert (near != far) == differs, name
