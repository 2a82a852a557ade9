"""Broadcast rows as multicast trees on a mesh or torus (issue 38, part 2): the tree loads in
closed form against every tree walked, the event model against a naive pure-Python twin, the
closed form bounded against the events on random traffic, and a 4 x 4 case counted by hand."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_gridload import random_traffic, read_link
from tilesim.machine.description import Fabric, load_machine
from tilesim.machine.fabric import MeshFabric, _grid_steps, make_fabric
from tilesim.machine.fluid import drain_times
from tilesim.machine.gridload import grid_link_loads, grid_max_hops, proportional_flows
from tilesim.outputs.records import PHASES
from tilesim.program import Program, ProgramBuilder
from tilesim.program.rows import TileRows


def _mcast_machine(kind: str, rows: int, cols: int, *, port=8.0, link=8.0, hop=3.0, fixed=20, multicast=True):
    """A ``cols`` x ``rows`` mesh or torus machine (mesh-demo's other numbers)."""
    base = load_machine("mesh-demo")
    chip = replace(base.chip, tiles=rows * cols, exchange_bytes_per_cycle=port, exchange_fixed_cycles=fixed)
    fabric = Fabric(kind=kind, cols=cols, rows=rows, hop_cycles=hop, link_bytes_per_cycle=link, multicast=multicast)
    return replace(base, chip=chip, fabric=fabric)


def _tree_brute(bytes_in, bytes_out, rows, cols, wrap):
    """Every sender's tree (the union of its routes to the receivers) walked link by link: a link
    carries ``out_s · max φ_r`` over the receivers whose route from ``s`` crosses it."""
    load: dict = {}
    total = bytes_out.sum()
    for s in np.flatnonzero(bytes_out):
        need: dict = {}
        for r in np.flatnonzero(bytes_in):
            for link in _grid_steps(int(s), int(r), cols, rows, wrap):
                need[link] = max(need.get(link, 0.0), bytes_in[r] / total)
        for link, phi in need.items():
            load[link] = load.get(link, 0.0) + bytes_out[s] * phi
    return load


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 6), wrap=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_tree_loads_equal_every_tree_walked_and_never_exceed_the_unicasts(rows, cols, wrap, seed):
    traffic = random_traffic(rows, cols, seed)
    if traffic is None:
        return
    inn, out = traffic
    trees = grid_link_loads(inn, out, rows, cols, wrap, trees=True)
    unis = grid_link_loads(inn, out, rows, cols, wrap)
    if not out.any() or not inn.any():
        assert trees.busiest()[0] == 0
        return
    load = _tree_brute(inn[0], out[0], rows, cols, wrap)
    for link, v in load.items():
        assert read_link(trees, link, rows, cols) == pytest.approx(v, rel=1e-9, abs=1e-9)
    assert sum(a.sum() for a in (trees.right, trees.left, trees.down, trees.up)) == pytest.approx(
        sum(load.values()), rel=1e-9, abs=1e-9
    )  # and nothing elsewhere
    for a, b in zip((trees.right, trees.left, trees.down, trees.up), (unis.right, unis.left, unis.down, unis.up)):
        assert (a <= b + 1e-9).all()  # a maximum never exceeds the sum


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), wrap=st.booleans(), trees=st.booleans(),
       seed=st.integers(0, 2**31 - 1))  # fmt: skip
def test_the_flows_a_row_stands_for_load_the_links_as_the_closed_form(rows, cols, wrap, trees, seed):
    """:func:`proportional_flows` walked along the fabric's routes (a multicast group's tree once)
    gives the closed form's load on every link, and every receiver its bytes."""
    rng = np.random.default_rng(seed)
    T = rows * cols
    out = rng.integers(0, 4, T) * (rng.random(T) < 0.7) * 64.0
    inn = rng.integers(0, 4, T) * (rng.random(T) < 0.7) * 64.0
    if not out.any() or not inn.any():
        return
    inn = inn * (out.sum() / (inn.max() if trees else inn.sum()))  # consistent totals
    src, dst, nb, grp = proportional_flows(inn, out, trees)
    f = make_fabric(_mcast_machine("torus" if wrap else "mesh", rows, cols))
    links = f.link_totals(np.zeros((0, T)), np.zeros((0, T)), list(zip(src, dst, nb, grp)))
    closed = grid_link_loads(inn[None], out[None], rows, cols, wrap, trees)
    for name in ("right", "left", "down", "up"):
        np.testing.assert_allclose(getattr(links, name), getattr(closed, name)[0], rtol=1e-9, atol=1e-6)
    got = np.zeros(T)
    for g in np.unique(grp):  # a group's bytes reach each member once
        m = grp == g
        got[dst[m]] += nb[m][0] if g >= 0 else 0.0
        if g < 0:
            np.add.at(got, dst[m], nb[m])
    np.testing.assert_allclose(got, inn, rtol=1e-9)


# ---- the event model against a naive twin ------------------------------------------------------


def _twin_walk(pos: int, target: int, n: int, wrap: bool) -> list[int]:
    """The positions after ``pos`` on the way to ``target`` along a line of ``n`` (a ring: the
    shorter way round, ties forward)."""
    if wrap and n > 2:
        step = 1 if (target - pos) % n <= (pos - target) % n else -1
    else:
        step = 1 if target >= pos else -1
    out = []
    while pos != target:
        pos = (pos + step) % n
        out.append(pos)
    return out


def _twin_tree(src: int, dsts, cols: int, rows: int, wrap: bool) -> set:
    """The links of the multicast tree from ``src`` to ``dsts``, walked cell by cell (X, then Y),
    with the source's and the destinations' ports."""
    links: set = {("in", src)}
    for d in dsts:
        x, y = src % cols, src // cols
        for nx in _twin_walk(x, d % cols, cols, wrap):
            links.add(((x, y), (nx, y)))
            x = nx
        for ny in _twin_walk(y, d // cols, rows, wrap):
            links.add(((x, y), (x, ny)))
            y = ny
        links.add(("out", d))
    return links


def _twin_drain(trees: list[set], sizes: list[int], port: int, link: int) -> list[Fraction]:
    """Exact drain times of flows over link sets, stepping from one finish to the next: every link
    splits its bandwidth evenly among the unfinished flows on it, a flow moves at its most shared
    link's share (pure Python, exact fractions)."""
    left = [Fraction(s) for s in sizes]
    done: list[Fraction | None] = [None if s > 0 else Fraction(0) for s in left]
    now = Fraction(0)
    while any(d is None for d in done):
        live = [i for i, d in enumerate(done) if d is None]
        users: dict = {}
        for i in live:
            for g in trees[i]:
                users[g] = users.get(g, 0) + 1
        rate = {i: min(Fraction(port if isinstance(g[0], str) else link, users[g]) for g in trees[i]) for i in live}
        dt = min(left[i] / rate[i] for i in live)
        now += dt
        for i in live:
            left[i] -= rate[i] * dt
            if left[i] == 0:
                done[i] = now
    return [d for d in done if d is not None]


@settings(max_examples=50, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), wrap=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_the_event_model_times_multicasts_as_a_naive_twin(rows, cols, wrap, seed):
    """Random multicasts and unicasts on one chip: :meth:`MeshFabric.transfer_cycles` (the fluid
    drain over the trees the fabric routes) against the twin, which walks its own trees and
    steps through the finishes in exact arithmetic."""
    rng = np.random.default_rng(seed)
    T = rows * cols
    port, link, hop, fixed = int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(0, 4)), 5
    m = _mcast_machine("torus" if wrap else "mesh", rows, cols, port=port, link=link, hop=hop, fixed=fixed)
    f = make_fabric(m)
    src, dst, nb, grp, trees, sizes, hops = [], [], [], [], [], [], []
    for g in range(int(rng.integers(1, 6))):
        s = int(rng.integers(0, T))
        members = sorted(set(rng.integers(0, T, int(rng.integers(1, T + 1))).tolist()))
        size = int(rng.integers(1, 50)) * 8
        multicast = bool(rng.random() < 0.7)
        for d in members:
            src.append(s), dst.append(d), nb.append(size), grp.append(g if multicast else -1)
        for part in [members] if multicast else [[d] for d in members]:
            trees.append(_twin_tree(s, part, cols, rows, wrap))
            sizes.append(size)
            hops.append(max(len(_grid_steps(s, d, cols, rows, wrap)) for d in part))
    twin = _twin_drain(trees, sizes, port, link)
    want = fixed + max(int(np.ceil(float(t))) + h * hop for t, h in zip(twin, hops))
    got = f.transfer_cycles(np.array(src), np.array(dst), np.array(nb, float), np.array(grp))
    assert got == pytest.approx(want)
    # and the drain itself, flow by flow, over the fabric's own routes (a group's tree: its routes' union)
    groups = sorted({g for g in grp if g >= 0})
    uni = [k for k in range(len(src)) if grp[k] < 0]
    routes = [f.route(src[k], dst[k]) for k in uni]
    for g in groups:
        members = [k for k in range(len(src)) if grp[k] == g]
        routes.append(tuple(dict.fromkeys(link for k in members for link in f.route(src[k], dst[k]))))
    bw = {g: (port if isinstance(g[0], str) else link) for r in routes for g in r}
    fluid = drain_times(routes, [nb[k] for k in uni] + [nb[grp.index(g)] for g in groups], bw)
    assert sorted(fluid.tolist()) == pytest.approx(sorted(float(t) for t in twin), rel=1e-9)


# ---- the closed form bounded against the events --------------------------------------------------


def _closed_cycles(f: MeshFabric, inn: np.ndarray, out: np.ndarray, broadcast: bool) -> tuple[float, float, float]:
    """(cycles, drain D, longest route H) of one row by the closed form, through :meth:`reduce`."""
    rows = TileRows.every_row_exchanges(np.zeros((1, 1, inn.size)), inn[None, None], out[None, None],
                                        np.array([broadcast]))  # fmt: skip
    cycles = f.reduce(rows).exchange[0, 0]
    link, hops = f.link_peaks(inn[None], out[None], np.array([broadcast]))
    sent = f.injected_bytes(inn[None], out[None], np.array([broadcast]))[0]  # copies on a fabric without multicast
    drain = max(max(inn.max(), sent.max()) / f.port_bpc, link[0] / f.link_bpc)
    return float(cycles), drain, float(hops[0])


@settings(max_examples=80, deadline=None)
@given(
    rows=st.integers(1, 4),
    cols=st.integers(1, 4),
    wrap=st.booleans(),
    broadcast=st.booleans(),
    multicast=st.booleans(),
    equal=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_closed_form_is_bounded_by_the_events_on_random_traffic(
    rows, cols, wrap, broadcast, multicast, equal, seed
):
    """The bound of :mod:`tilesim.machine.fabric` (module docstring), with ``B`` the largest over the
    smallest flow the row stands for: ``fixed + max(D, h·hop) ≤ events ≤ fixed + B·D + H·hop``; on a
    mesh ``(closed − fixed)/2 ≤ events − fixed``; with one flow size (``equal``: every sender the
    same bytes, every receiver the same) ``events ≤ closed``. One cycle of slack for the ceilings.
    A broadcast row on a fabric without multicast goes as unicast copies: its senders' ports inject
    ``out·Σin/Σout`` (:meth:`MeshFabric.injected_bytes`), and the bound holds for it too."""
    rng = np.random.default_rng(seed)
    T = rows * cols
    port, link, hop, fixed = float(rng.integers(1, 17)), float(rng.integers(1, 17)), float(rng.integers(0, 5)), 10
    f = make_fabric(
        _mcast_machine(
            "torus" if wrap else "mesh", rows, cols, port=port, link=link, hop=hop, fixed=fixed, multicast=multicast
        )
    )
    send, recv = rng.random(T) < 0.6, rng.random(T) < 0.6
    if not send.any() or not recv.any():
        return
    out = np.where(send, 128.0 if equal else rng.integers(1, 9, T) * 64.0, 0.0)
    inn = np.where(recv, 1.0 if equal else rng.integers(1, 9, T) * 1.0, 0.0)
    inn *= out.sum() / (inn.max() if broadcast else inn.sum())  # consistent totals
    events = f.row_event_cycles(inn, out, broadcast)
    closed, D, H = _closed_cycles(f, inn, out, broadcast)
    sizes = proportional_flows(inn, out, broadcast)[2]
    B = sizes.max() / sizes.min()
    src, dst = f.row_flows(inn, out, broadcast)[:2]
    h = max(f.hops(int(s), int(d)) for s, d in zip(src, dst))
    assert closed == pytest.approx(fixed + np.ceil(D - 1e-9) + H * hop)
    assert events >= fixed + max(D, h * hop) - 1e-6
    assert events <= fixed + B * D + H * hop + 1
    if not wrap:
        assert h == H and events - fixed >= (closed - fixed) / 2 - 1
    if equal:
        assert B == pytest.approx(1.0) and events <= closed + 1


# ---- counted by hand -----------------------------------------------------------------------------


def _column_broadcast(builder: ProgramBuilder, how: str) -> None:
    """Tiles 0, 4, 8, 12 (column 0) each send an 800-byte list to all 16 tiles."""
    senders = [0, 4, 8, 12]
    if how == "unicast":
        builder.superstep("lists", transfers=[(s, d, 800.0) for s in senders for d in range(16)])
    elif how == "multicast":
        builder.superstep("lists", multicasts=[(s, list(range(16)), 800.0) for s in senders])
    else:  # per-tile totals, marked a broadcast
        out = np.zeros(16)
        out[senders] = 800.0
        builder.superstep("lists", bytes_out=out, bytes_in=np.full(16, 3200.0), broadcast=True)


def test_4x4_mesh_multicast_lists_beat_unicasts_through_the_event_model():
    """4 x 4 mesh, ports and links 8 B/cycle, 3 cycles per hop, 20 fixed. Tiles 0, 4, 8, 12
    (column 0) each send an 800 B list to all 16 tiles (themselves included).

    Unicast (64 transfers): a sender's injection port carries its 16 copies, 16 x 800 = 12,800 B,
    so each of its flows moves at 8/16 = 0.5 B/cycle (the busiest mesh link, (0,y) -> (1,y), carries
    the 12 flows to columns 1-3, 9,600 B, 8/12 B/cycle each; an ejection port takes 4 flows, 2 B/cycle
    each): every flow drains at 800 / 0.5 = 1,600 cycles. The farthest route, (0,0) -> (3,3), is 6
    hops: 18 cycles. Exchange: 20 + 1,600 + 18 = 1,638 cycles.

    Multicast (4 trees, one per sender): a tree crosses each link once. Row y's links carry only
    row y's tree (800 B); a column link y -> y+1 carries the trees of the senders in rows 0..y, the
    busiest (2 -> 3, and 1 -> 0 upward) 3 trees, 2,400 B, 8/3 B/cycle each; every tile's ejection
    port takes the 4 trees, 3,200 B at 8/4 = 2 B/cycle each: every tree drains at 800 / 2 = 400
    cycles. Exchange: 20 + 400 + 18 = 438 cycles — 3.74x faster. The same exchange given as
    per-tile totals marked a broadcast (each sender 800 B out, each tile 3,200 B in) is timed by
    the closed form as the same 438: ports 3,200 / 8 = 400 against the busiest tree link
    2,400 / 8 = 300, plus 18; its flows all have one size, so the events give it too.

    On a fabric without multicast those totals are timed as proportional unicasts: each sender
    injects a copy for every receiver, 800 · Σin / Σout = 800 · 51,200 / 3,200 = 12,800 B at its
    port (:meth:`MeshFabric.injected_bytes`), 12,800 / 8 = 1,600 against the busiest link
    9,600 / 8 = 1,200: 20 + 1,600 + 18 = 1,638, the events' figure (before the port term read
    the copies, the closed form charged the sender its 800 B totals and gave 1,238)."""
    from tilesim.engine.events import simulate

    m = _mcast_machine("mesh", 4, 4)
    cycles = {}
    for how in ("unicast", "multicast", "broadcast"):
        b = ProgramBuilder.for_machine(m)
        _column_broadcast(b, how)
        res = simulate(b.build(), m)  # through the engine: the superstep's exchange phase
        cycles[how] = round(float(res.phase_s[0, PHASES.index("exchange")]) * m.clock_hz, 6)
    assert cycles == {"unicast": 1638.0, "multicast": 438.0, "broadcast": 438.0}
    f = make_fabric(m)
    out = np.zeros(16)
    out[[0, 4, 8, 12]] = 800.0
    assert f.row_event_cycles(np.full(16, 3200.0), out, True) == 438.0
    plain = make_fabric(replace(m, fabric=replace(m.fabric, multicast=False)))
    assert plain.row_event_cycles(np.full(16, 3200.0), out, True) == 1638.0
    b = ProgramBuilder.for_machine(m)
    _column_broadcast(b, "broadcast")
    assert float(plain.reduce(b.build().tile_rows()).exchange[0, 0]) == 1638.0
    res = simulate(b.build(), replace(m, fabric=replace(m.fabric, multicast=False)))  # the engine's path
    assert round(float(res.phase_s[0, PHASES.index("exchange")]) * m.clock_hz, 6) == 1638.0


# ---- the flag through the program forms ----------------------------------------------------------


def _rows_source(comp, b_in, b_out, tpc):
    class Rows:
        def chip_rows(self, chip):
            cols = slice(chip * tpc, (chip + 1) * tpc)
            return comp[:, cols], b_in[:, cols], b_out[:, cols]

        def touched_rows(self, chip):
            return np.arange(comp.shape[0])

    return Rows()


@pytest.mark.parametrize("multicast", [True, False])
def test_broadcast_rows_time_the_same_in_the_dense_and_compact_forms(multicast):
    """Rows marked broadcast go as trees in both forms on a fabric that multicasts, and as unicast
    copies (each sender's port injects one per receiver) on one that does not; the other rows keep
    their unicast times exactly."""
    from tilesim.engine.events import simulate
    from tilesim.program.forms import compact_program

    m = _mcast_machine("torus", 4, 4, multicast=multicast)
    rng = np.random.default_rng(3)
    S, n = 4, 16
    comp = rng.uniform(100, 900, (S, n)).astype(np.float32)
    b_out = np.zeros((S, n), np.float32)
    b_out[:, :4] = 512.0
    b_in = np.full((S, n), 2048.0, np.float32)
    bcast = np.array([True, False, True, False])
    kw = dict(labels=("a",), label_id=np.zeros(S, np.int32), sync_scope=np.zeros(S, np.int32))
    dense = Program.from_arrays(chips=1, tiles_per_chip=n, compute_cycles=comp, bytes_in=b_in, bytes_out=b_out,
                                broadcast=bcast, **kw)  # fmt: skip
    plain = Program.from_arrays(chips=1, tiles_per_chip=n, compute_cycles=comp, bytes_in=b_in, bytes_out=b_out, **kw)
    compact = compact_program(_rows_source(comp, b_in, b_out, n), m, name="p", broadcast=bcast, **kw)
    f = make_fabric(m)
    ex_d, ex_c, ex_p = (p.reduce_on(f).exchange[:, 0] for p in (dense, compact, plain))
    np.testing.assert_array_equal(ex_d, ex_c)
    np.testing.assert_array_equal(ex_d[~bcast], ex_p[~bcast])
    if multicast:
        assert (ex_d[bcast] < ex_p[bcast]).all()
    else:  # unicast copies: each sender's port injects 512 · 32,768 / 2,048 B, 1,024 cycles at 8 B/cycle
        np.testing.assert_array_equal(ex_d[bcast], 20 + 8192 / 8 + 4 * 3)
        assert (ex_p[bcast] < ex_d[bcast]).all()  # as a plain row: the busiest link, 6,144 B, 768 cycles
    assert simulate(dense, m).total_s == pytest.approx(simulate(compact, m).total_s, rel=1e-12)
    totals = f.link_totals(*dense.chip_exchange(0))
    want = grid_link_loads(b_in[bcast].astype(float), b_out[bcast].astype(float), 4, 4, True, multicast)
    assert totals.right.sum() >= want.right.sum(axis=0).sum() - 1e-6
    assert grid_max_hops(b_in[:1], b_out[:1], 4, 4, True)[0] >= 0


def test_the_snn_marks_its_list_broadcasts():
    """The forward input lists and the backward replicated lists are the step's broadcasts."""
    from tilesim.models.snn.step.table import STEP_ROWS

    assert [r.label for r in STEP_ROWS if r.broadcast] == ["fwd: slice inputs", "bwd: replicate lists"]


def test_multicast_presets_and_the_field_check():
    from tilesim.errors import ConfigError

    for name in ("wormhole-n150", "wormhole-galaxy", "blackhole-p150", "wse2", "wse3"):
        assert load_machine(name).fabric.multicast, name
    for name in ("mesh-demo", "gc200"):
        assert not load_machine(name).fabric.multicast, name
    with pytest.raises(ConfigError, match="fabric.multicast"):
        Fabric(kind="mesh", cols=2, rows=2, hop_cycles=1, link_bytes_per_cycle=1, multicast="yes")  # type: ignore[arg-type]
