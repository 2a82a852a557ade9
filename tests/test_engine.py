"""The discrete-event engine: exact, hand-computed timelines, invariants, and agreement with a naive
all-event reference (tests/naive_engine.py) on random programs. The engine solves most of a
program in closed form (tilesim/engine/timeline.py); the reference runs every chip, sync and flow as
simpy events, so the comparison checks the closed form against a different path."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.naive_engine import naive_simulate
from tilesim.engine.events import simulate
from tilesim.errors import ConfigError
from tilesim.machine.description import load_machine
from tilesim.program import ProgramBuilder, concat_programs


def cycles(r, m):
    return np.round(r.time_s * m.clock_hz, 6)


def test_one_chip_exact():
    m = load_machine("gc200")
    b = ProgramBuilder.for_machine(m)
    c = b.zeros()
    c[0] = 100
    c[5] = 200
    bo = b.zeros()
    bo[3] = 8
    bi = b.zeros()
    bi[7] = 8
    b.superstep("a", c, bytes_out=bo, bytes_in=bi)  # 200 + sync 90 + (100 fixed + 8/4)
    b.superstep("b", 50)  # 50 + 90, no exchange phase
    r = simulate(b.build(), m)
    assert list(cycles(r, m)) == [392.0, 140.0]
    assert list(np.round(r.phase_s[0] * m.clock_hz, 6)) == [200, 90, 102, 0, 0, 0]
    assert r.critical_tile[0] == 5 and r.exchange_critical_tile[0] in (3, 7)
    assert r.total_s == pytest.approx(532 / m.clock_hz)


def test_two_chips_share_a_link(round2):
    m = round2  # 1 B/cycle per pair group, no latency
    b = ProgramBuilder.for_machine(m)
    b.superstep("x", 0, sync="all", flows=[(0, 1, 1000), (0, 1, 3000)])
    r = simulate(b.build(), m)
    # both flows at 0.5 B/cycle until the first is done (t = 2000), then 1 B/cycle: 4000;
    # sync = chip sync 90 + Sync-Link 30
    assert cycles(r, m)[0] == pytest.approx(120 + 4000)
    assert r.phase_s[0, 3] * m.clock_hz == pytest.approx(4000)
    # opposite directions do not share a group
    b = ProgramBuilder.for_machine(m)
    b.superstep("x", 0, sync="all", flows=[(0, 1, 1000), (1, 0, 1000)])
    assert cycles(simulate(b.build(), m), m)[0] == pytest.approx(120 + 1000)


def test_sync_groups_exact(round4):
    m = round4
    T = m.tiles_per_chip
    b = ProgramBuilder.for_machine(m)
    c = b.zeros()
    for chip, cyc in enumerate([100, 300, 50, 60]):
        c[chip * T] = cyc
    b.superstep("pipeline stages", c, sync=[[0, 1], [2, 3]])  # 2-chip sync: 90 + 30 cycles
    b.superstep("join", 10, sync="all")  # 4 chips: 90 + hops 2 x 30
    r = simulate(b.build(), m)
    tl = r.timeline
    assert list(tl["release"][0]) == [420, 420, 180, 180]
    assert list(tl["end"][1]) == [580, 580, 580, 580]
    assert list(cycles(r, m)) == [420, 160]
    assert r.compute_critical_chip[0] == 1 and r.critical_tile[0] == 0


def test_chip_local_runs_overlap_and_split_sums(round2):
    m = round2
    T = m.tiles_per_chip
    b = ProgramBuilder.for_machine(m)
    c = b.zeros()
    c[:T] = 1000
    c[T:] = 10
    b.superstep("uneven", c, sync="chip", repeat=3)
    b.superstep("join", 0, sync="all", flows=[(1, 0, 100)])
    r = simulate(b.build(), m)
    assert r.total_s * m.clock_hz == pytest.approx(3 * 1090 + 120 + 100)
    np.testing.assert_allclose(r.phase_s.sum(axis=1), r.time_s, rtol=1e-12, atol=1e-18)


def test_host_transfer(round2):
    m = round2
    b = ProgramBuilder.for_machine(m)
    b.superstep("load", 5, host_bytes=[500, 0], sync="chip")
    r = simulate(b.build(), m)
    assert cycles(r, m)[0] == 5 + 90 + 500
    assert r.phase_s[0, 4] * m.clock_hz == pytest.approx(500)


def test_program_machine_mismatch():
    m = load_machine("m2000")
    b = ProgramBuilder(chips=1, tiles_per_chip=1472)
    b.superstep("a", 1)
    with pytest.raises(ConfigError, match="program shape"):
        simulate(b.build(), m)


def test_flow_across_sync_groups_rejected(round4):
    b = ProgramBuilder.for_machine(round4)
    with pytest.raises(ConfigError, match="crosses sync groups"):
        b.superstep("x", 1, sync=[[0, 1], [2, 3]], flows=[(0, 2, 10)])
        b.build()
    b = ProgramBuilder.for_machine(round4)
    with pytest.raises(ConfigError, match=r"flow dst chip = 9: must be in 0..3"):
        b.superstep("x", 1, sync="all", flows=[(0, 9, 10)])


def test_concat_equals_repeat(round2):
    b = ProgramBuilder.for_machine(round2)
    b.superstep("a", 7, bytes_out=4, sync="all", flows=[(0, 1, 64)])
    b.superstep("b", 3, sync=[[0], [1]])
    p = b.build()
    b2 = ProgramBuilder.for_machine(round2)
    for _ in range(3):
        b2.superstep("a", 7, bytes_out=4, sync="all", flows=[(0, 1, 64)])
        b2.superstep("b", 3, sync="chip")
    r1 = simulate(concat_programs([p, p, p]), round2)
    r2 = simulate(b2.build(), round2)
    np.testing.assert_allclose(r1.time_s, r2.time_s)


# ---- properties ----------------------------------------------------------------------------
steps = st.lists(
    st.tuples(
        st.lists(st.integers(0, 5000), min_size=8, max_size=8),
        st.lists(st.integers(0, 4000), min_size=8, max_size=8),
        st.sampled_from(["chip", "all", "pairs"]),
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 50000)), max_size=3),
    ),
    min_size=1,
    max_size=6,
)


def build(m, spec, extra_bytes=None, scope_override=None):
    b = ProgramBuilder.for_machine(m)
    for i, (comp, ex, sync, flows) in enumerate(spec):
        sync = scope_override or sync
        groups = {"chip": "chip", "all": "all", "pairs": [[0, 1], [2, 3]]}[sync]
        fl = [
            (a, bb, n) for a, bb, n in flows if a != bb and (sync == "all" or (sync == "pairs" and a // 2 == bb // 2))
        ]
        exb = np.array(ex, float)
        if extra_bytes is not None and extra_bytes[0] == i:
            exb[extra_bytes[1]] += extra_bytes[2]
        b.superstep(f"s{i % 2}", np.array(comp, float), bytes_out=exb, bytes_in=exb[::-1].copy(), flows=fl, sync=groups)
    return b.build()


@pytest.fixture(scope="module")
def m4(tmp_path_factory):
    from tests.conftest import round_machine

    return load_machine(
        round_machine(tmp_path_factory.mktemp("m"), chips=4, tiles=2, link_latency_s=1e-7, host_latency_s=5e-8)
    )


@settings(max_examples=40, deadline=None)
@given(spec=steps, where=st.tuples(st.integers(0, 5), st.integers(0, 7), st.integers(1, 10000)))
def test_more_bytes_never_faster(m4, spec, where):
    base = simulate(build(m4, spec), m4).total_s
    idx = where[0] % len(spec)
    more = simulate(build(m4, spec, extra_bytes=(idx, where[1], where[2])), m4).total_s
    assert more >= base - 1e-15


@settings(max_examples=40, deadline=None)
@given(spec=steps)
def test_a_wider_sync_never_shortens(m4, spec):
    chip_only = [(c, e, "chip", []) for c, e, _, _ in spec]
    t_chip = simulate(build(m4, chip_only), m4).total_s
    t_all = simulate(build(m4, chip_only, scope_override="all"), m4).total_s
    assert t_all >= t_chip - 1e-15


@settings(max_examples=30, deadline=None)
@given(spec=steps, seed=st.integers(0, 1000))
def test_independent_of_flow_order(m4, spec, seed):
    rng = np.random.default_rng(seed)
    shuffled = [(c, e, s, [f[i] for i in rng.permutation(len(f))] if f else f) for c, e, s, f in spec]
    r1 = simulate(build(m4, spec), m4)
    r2 = simulate(build(m4, shuffled), m4)
    np.testing.assert_allclose(r1.time_s, r2.time_s, rtol=1e-12)
    np.testing.assert_allclose(r1.phase_s.sum(axis=1), r1.time_s, rtol=1e-9, atol=1e-15)


def assert_same_timeline(r, ref, m, rtol=1e-9):
    """simulate's result ``r`` against the naive all-event reference ``ref`` (cycles)."""
    scale = max(float(ref.end.max()), 1.0) if ref.end.size else 1.0
    for key, want in (
        ("start", ref.start),
        ("arrive", ref.arrive),
        ("release", ref.release),
        ("links_end", ref.links_end),
        ("end", ref.end),
    ):
        np.testing.assert_allclose(r.timeline[key], want, rtol=rtol, atol=rtol * scale, err_msg=key)
    np.testing.assert_allclose(r.time_s * m.clock_hz, ref.step_cycles(), rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(r.phase_s.sum(axis=1), r.time_s, rtol=1e-9, atol=1e-15)
    assert r.link_group_bytes == pytest.approx(ref.link_group_bytes, rel=1e-12)


def makespan_of(p, m):
    """makespan_s of ``p`` (the mapping search's entry point: the total alone)."""
    from tilesim.engine.events import makespan_s

    return makespan_s(p, m)


@settings(max_examples=30, deadline=None)
@given(spec=steps)
def test_global_syncs_in_closed_form_equal_the_naive_event_model(m4, spec):
    """Every superstep syncs all chips: simulate and makespan_s take the closed form (one fluid
    batch per superstep's flows, a cumulative sum over supersteps) and never start an event;
    the naive reference runs every chip, sync and flow as simpy events."""
    p = build(m4, spec, scope_override="all")
    ref = naive_simulate(p, m4)
    r = simulate(p, m4)
    assert_same_timeline(r, ref, m4)
    assert makespan_of(p, m4) * m4.clock_hz == pytest.approx(ref.end.max(), rel=1e-12)


SYNCS = {
    "chip": "chip",
    "all": "all",
    "pairs": [[0, 1], [2, 3]],
    "evens": [[0, 2], [1, 3]],
    "one+three": [[0], [1, 2, 3]],
}
mixed_steps = st.lists(
    st.tuples(
        st.lists(st.integers(0, 5000), min_size=8, max_size=8),
        st.one_of(st.none(), st.lists(st.integers(0, 4000), min_size=8, max_size=8)),
        st.sampled_from(sorted(SYNCS)),
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 50000)), max_size=4),
        st.one_of(st.none(), st.lists(st.integers(0, 3000), min_size=4, max_size=4)),
        st.integers(1, 3),
    ),
    min_size=1,
    max_size=7,
)


def build_mixed(m, spec, extras=None):
    """A program from ``mixed_steps``: partial, chip and all syncs, flows inside the sync groups,
    host transfers, repeats; ``extras`` = (sync_extra, exchange_extra) cycles per superstep."""
    import dataclasses

    b = ProgramBuilder.for_machine(m)
    for i, (comp, ex, sync, flows, host, repeat) in enumerate(spec):
        groups = SYNCS[sync]
        group_of = {c: g for g, cs in enumerate(groups) for c in cs} if isinstance(groups, list) else None
        fl = [
            (a, bb, n)
            for a, bb, n in flows
            if a != bb and (sync == "all" or (group_of is not None and group_of[a] == group_of[bb]))
        ]
        kw = {} if ex is None else {"bytes_out": np.array(ex, float), "bytes_in": np.array(ex[::-1], float)}
        b.superstep(
            f"s{i % 3}",
            np.array(comp, float),
            flows=fl,
            sync=groups,
            repeat=repeat,
            host_bytes=None if host is None else np.array(host, float),
            **kw,
        )
    p = b.build()
    if extras is not None:
        S = p.supersteps
        p = dataclasses.replace(
            p,
            sync_extra_cycles=np.resize(np.array(extras[0], float), S),
            exchange_extra_cycles=np.resize(np.array(extras[1], float), S),
        )
    return p


@settings(max_examples=60, deadline=None)
@given(
    spec=mixed_steps,
    extras=st.one_of(
        st.none(),
        st.tuples(
            st.lists(st.integers(0, 400), min_size=1, max_size=5), st.lists(st.integers(0, 400), min_size=1, max_size=5)
        ),
    ),
)
def test_simulate_equals_the_naive_event_model(m4, spec, extras):
    """Random programs mixing partial sync groups with chip and all syncs, flows, host transfers
    and repeats: every chip's timeline, the per-superstep times and the link bytes of simulate
    (closed-form runs and batches, events only where needed) equal the naive all-event model."""
    p = build_mixed(m4, spec, extras)
    ref = naive_simulate(p, m4)
    assert_same_timeline(simulate(p, m4), ref, m4)
    assert makespan_of(p, m4) * m4.clock_hz == pytest.approx(ref.end.max(), rel=1e-9)


def test_naive_reference_reproduces_the_hand_computed_timelines(round2, round4):
    """The reference itself on the exact cases above (two flows sharing a link; sync groups)."""
    b = ProgramBuilder.for_machine(round2)
    b.superstep("x", 0, sync="all", flows=[(0, 1, 1000), (0, 1, 3000)])
    assert list(naive_simulate(b.build(), round2).step_cycles()) == [120 + 4000]
    T = round4.tiles_per_chip
    b = ProgramBuilder.for_machine(round4)
    c = b.zeros()
    for chip, cyc in enumerate([100, 300, 50, 60]):
        c[chip * T] = cyc
    b.superstep("pipeline stages", c, sync=[[0, 1], [2, 3]])
    b.superstep("join", 10, sync="all")
    ref = naive_simulate(b.build(), round4)
    assert list(ref.release[0]) == [420, 420, 180, 180] and list(ref.end[1]) == [580] * 4


def test_mesh_transfers_equal_the_naive_event_model():
    """On a mesh the engine passes each superstep's explicit transfers to the fabric."""
    m = load_machine("mesh-demo")
    b = ProgramBuilder.for_machine(m)
    b.superstep("shared", 5, transfers=[(0, 3, 8000), (1, 2, 8000)], host_bytes=100)
    b.superstep("far", 7, transfers=[(0, 255, 64)], sync="all", repeat=2)
    b.superstep("plain", 3, bytes_out=16, bytes_in=16)
    b.superstep("multicast", 2, multicasts=[(17, [0, 1, 2, 16, 18], 4096), (40, [41, 57], 512)])
    p = b.build()
    assert_same_timeline(simulate(p, m), naive_simulate(p, m), m)


def dataflow(m):
    """The same machine, but its chips go on when their data arrives (no barrier between chips)."""
    import dataclasses

    return dataclasses.replace(m, chip=dataclasses.replace(m.chip, execution="dataflow"))


def test_dataflow_counted_by_hand(round2):
    """Chip 0 computes 100 cycles, chip 1 1000; chip 0 sends 4000 B to chip 1 over links of
    1 B/cycle (1 GB/s at 1 GHz, efficiency 1, no latency). BSP: both wait for chip 1 (1000) and
    the global sync, then the flow takes 4000. Dataflow: chip 0 sends at its own release (100 +
    its chip sync 90): the data is there at 4190, chip 1 ends then, not at 1000 + sync + 4000."""
    import dataclasses

    m = dataclasses.replace(
        round2,
        chip=dataclasses.replace(round2.chip, clock_hz=1e9),
        system=dataclasses.replace(round2.system, link_bytes_per_s=1e9, link_efficiency=1.0, link_latency_s=0.0),
    )
    b = ProgramBuilder.for_machine(m)
    comp = np.zeros(m.total_tiles)
    comp[: m.tiles_per_chip] = 100.0
    comp[m.tiles_per_chip :] = 1000.0
    b.superstep("send", comp, flows=[(0, 1, 4000.0)], sync="all")
    p = b.build()
    bsp = simulate(p, m)
    assert bsp.timeline["end"][0].tolist() == [1000 + m.group_sync_cycles(2) + 4000] * 2
    df = simulate(p, dataflow(m))
    assert df.timeline["release"][0].tolist() == [190.0, 1090.0]
    assert df.timeline["end"][0].tolist() == [4190.0, 4190.0]
    assert makespan_of(p, dataflow(m)) * 1e9 == pytest.approx(4190.0)
    ref = naive_simulate(p, dataflow(m))
    assert ref.end[0].tolist() == [4190.0, 4190.0]


@settings(max_examples=40, deadline=None)
@given(spec=mixed_steps)
def test_dataflow_equals_the_naive_event_model(m4, spec):
    """Random programs on a dataflow machine (every chip its own sync group; flows start at their
    sender's release and hold back only their two chips): simulate equals the naive twin."""
    m = dataflow(m4)
    p = build_mixed(m, spec)
    ref = naive_simulate(p, m)
    assert_same_timeline(simulate(p, m), ref, m)
    assert makespan_of(p, m) * m.clock_hz == pytest.approx(ref.end.max(), rel=1e-9)
