"""Issue 49 parts 2, 4 and 7 (Tensix): the tt-metal stack's native program.

A hand-counted toy, the unit choice flipping with density, the IPU's cost model changing nothing, eight p150s
never slower than one, TT-Metal's multicast rectangle rule, DRAM streaming when L1 is too small, the p150's
usable cores."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tilesim.errors import MappingError
from tilesim.machine.costs import CostModel
from tilesim.machine.description import load_machine
from tilesim.mapping.core import Mapping
from tilesim.models.noc.model import multicast_rectangle
from tilesim.models.snn.placement.fit import place_network
from tilesim.models.snn.stacks import stack_for
from tilesim.models.snn.stacks.tt_metal import TtMetalStack
from tilesim.models.snn.stacks.tt_noc import rectangles_of
from tilesim.models.snn.stacks.tt_program import build_tt_program
from tilesim.models.snn.step.counters import count_work
from tilesim.models.snn.step.timing import default_costs
from tilesim.models.snn.step.workload import SnnStep
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.workload import step_seconds, time_workload

SPARSE = {"forward": "SFPU", "dW": "SFPU", "dIn": "SFPU"}


def _step(cfg, placement, machine, **kw):
    return SnnStep(cfg, placement, count_work(fixed_activity(cfg), placement, per_step=True), **kw)


def test_toy_counted_by_hand():
    """Network 4-2-2, B 1, T 2, input cap 2, caps (2, 2), fixed activity, on a Wormhole n150 (8 x 9 cores):
    layer 1 on cores 0 and 1 (grid row 0), layer 2 on cores 8 and 9 (row 1), one neuron each; sparse units
    pinned. Layer 1's core 0 at t = 0 (superstep 1): its input list has 2 entries, so

    * reader r = rows·(g + n_c·wb/L1) + g + 12·2·1e9/(0.8·288e9) = 2·(24.8588 + 1·2/64) + 24.96297 = 74.74307
      (g: the NoC model's read issue, read_issue_cycles 24.8588; wb 2 B; the L1 port 64 B/cycle; the input
      list of the time step, 4·(2 + 1) = 12 B, read from DRAM at the core's half of 0.8 x 288 GB/s)
    * compute c = rows·⌈1/32⌉·4 + rows·n_c·wb/165.8 + ⌈1/32⌉·12 + 2·B·n_c·4/165.8
      = 8 + 4/165.8 + 12 + 8/165.8 = 20.07238 (SFPU add 4, LIF 12; the unpacker's 165.8 B/cycle)
    * writer w = B·n_c·2 (compaction) + one multicast to the 2 x 1 rectangle of layer 2's cores: the NoC
      model's message at one byte, s + L with A = 35.6585 + 2·3.0368 + 116.177 = 157.9091,
      s = max(21.9099, 1/29.9107 + 1 + A) = 158.94253, L = 123.603 + 7.5176·(10 + 12) = 288.99020
      (the sender differs from the rectangle in x and y: a whole ring of the 10 x 12 NoC each) → w = 449.93273
    * one page of weights (4 B < 2048): no overlap, t = r + c + w = 544.74817 cycles.

    Layer 2's core 8 at t = 0: the reader without the input list, the same compute, a writer of 2 (no list
    goes on): 49.78010 + 20.07238 + 2 = 71.85248.

    Backward at t = 1 (superstep 4), layer 2's core 8: 2 dW rows (1 neuron, FP32: 4 B each) read and written
    back, 2·(24.8588 + 4/64) = 49.84260 each way; 2 input-gradient entries, their W rows gathered
    2·(24.8588 + 2/64) = 49.78010; compute 2·4 (dW adds) + 16 + 16/165.8 (surrogate, state in and out) + 2·(4 + 5)
    (the entries' dot products and horizontal sums) = 42.09650; the writer adds one partial message to each of
    layer 1's 2 cores, back to back with one barrier: 2·21.9099 + 123.603 + 7.5176·22 = 332.81000. Total
    r + c + w = 99.62270 + 42.09650 + 382.65260 = 524.37180. Layer 1's core 0 there: the 2 partials of its one
    entry reduced (⌈2/32⌉·4), the surrogate, its dW rows: 49.84260·2 + 8 + 4 + 16.09650 = 127.78170.
    Optimizer (SGD): layer 1's core updates 4 weights, ⌈4/32⌉·5 = 5 cycles on the SFPU, w read and written
    (2·2 B) and dW read (4 B) through L1 at 64 B/cycle, 4·8/64 = 0.5: 5.5; layer 2's core 2 weights: 5.25."""
    m = load_machine("wormhole-n150")
    cfg = NetworkConfig(layers="4-2-2", batch=1, timesteps=2, input_cap=2, caps=(2, 2), activity="fixed",
                        optimizer="sgd")  # fmt: skip
    pl = Mapping((2, 2), 1, 72, (np.array([0, 1]), np.array([8, 9])), "custom")
    prog, _ = build_tt_program(_step(cfg, pl, m), m, force=SPARSE)
    r = 2 * (24.8588 + 2 / 64)
    inp = 24.8588 + 12 * 2e9 / (0.8 * 288e9)
    c = 8 + 4 / 165.8 + 12 + 8 / 165.8
    A = 35.6585 + 2 * 3.0368 + 116.177
    w = 2 + max(21.9099, 1 / 29.9107 + 1 + A) + 123.603 + 7.5176 * 22
    assert prog.compute_cycles[1, 0] == pytest.approx(544.74817, abs=1e-3)
    assert prog.compute_cycles[1, 0] == pytest.approx(r + inp + c + w, rel=1e-5)
    assert prog.compute_cycles[1, 8] == pytest.approx(r + c + 2, rel=1e-5) == pytest.approx(71.85248, abs=1e-3)
    assert prog.compute_cycles[4, 8] == pytest.approx(524.37180, abs=1e-3)
    assert prog.compute_cycles[4, 0] == pytest.approx(127.78170, abs=1e-3)
    assert prog.compute_cycles[6, [0, 8]].tolist() == pytest.approx([5.5, 5.25])
    # the list's bytes: 4·(1 entry + 2 counts) out of each sender, both senders' into each receiver
    assert prog.bytes_out[1, 0] == 12 and prog.bytes_in[1, 8] == 24


def _choice(max_activity: float, kernel="forward", layer=1):
    m = load_machine("wormhole-n150")
    cfg = NetworkConfig(layers="64-1024-64", batch=32, timesteps=2, input_cap=8, max_activity=max_activity,
                        activity="fixed")  # fmt: skip
    placed = place_network(cfg, m, mapping="auto")
    _, rep = build_tt_program(_step(cfg, placed.mapping, m), m)
    return next(c for c in rep.choices if c.layer == layer and c.kernel == kernel)


def test_fpu_or_sparse_flips_with_density():
    """Layer 2 reads layer 1's list: at a 0.2 % cap it gathers a few weight rows on the SFPU; at a 25 % cap the
    matrix engine's 32 x 32 tiles (one tile row holds the whole batch) are cheaper."""
    sparse, dense = _choice(0.002), _choice(0.25)
    assert sparse.unit == "SFPU" and dense.unit == "FPU"
    assert sparse.density < dense.density
    assert "FPU" in dense.line() and "density" in sparse.line()


def test_an_ipu_cost_file_changes_no_wormhole_step():
    m = load_machine("wormhole-n150")
    cfg = NetworkConfig(layers="700-256-256-20", batch=16, timesteps=4, activity="fixed")
    pl = place_network(cfg, m, mapping="auto").mapping
    base = default_costs()
    doubled = CostModel("doubled", "x", {k: 2 * v + 1 for k, v in base.coefficients.items()})
    t0 = step_seconds(_step(cfg, pl, m, costs=base), m)
    t1 = step_seconds(_step(cfg, pl, m, costs=doubled), m)
    assert t0 == t1 > 0


@pytest.mark.parametrize(
    "layers, more",
    [("700-512-512-512-20", False), ("700-" + "-".join(["1024"] * 12) + "-20", True)],
    ids=["small: one chip is fastest", "deep: more chips are faster"],
)
def test_eight_p150s_never_slower_than_one(layers, more):
    """The default placement on eight p150s is never slower than on one: a small network stays on one chip
    (the rest idle, and the run's notes say so), a deep one (12 hidden layers of 1024: L1 overflows one chip's
    cores, so its weights stream from DRAM) spreads over several and is faster."""
    one, eight = load_machine("blackhole-p150"), load_machine("blackhole-p150x8")
    cfg = NetworkConfig(layers=layers, batch=16, timesteps=4, activity="fixed")
    times, used = {}, {}
    for m in (one, eight):
        pl = place_network(cfg, m, mapping="auto").mapping
        stack = stack_for(m)
        times[m.name] = time_workload(_step(cfg, pl, m, stack=stack), m).step_s
        used[m.name] = pl.chips_used()
        if used[m.name] < m.chips:
            assert "idle" in stack.section_lines(m.name)[0]
    assert times["blackhole-p150x8"] <= times["blackhole-p150"]
    assert (used["blackhole-p150x8"] > 1) == more
    if more:
        assert times["blackhole-p150x8"] < times["blackhole-p150"] / 2


def test_multicast_to_a_non_rectangle_is_refused_or_decomposed():
    # an L of three cores: the NoC model refuses it as one multicast, the stack sends it as two rectangles
    with pytest.raises(MappingError):
        multicast_rectangle(8, 9, (5, 5), [(0, 0), (1, 0), (0, 1)])
    rects = rectangles_of([0, 1, 8], cols=8, rows=9, sender=40)
    assert sorted(r.count for r in rects) == [1, 2]
    # the sender inside its own destination (a recurrent layer) is never a receiver of its multicast
    assert all(not r.contains((1, 0)) for r in rectangles_of([0, 1, 2, 8, 9, 10], 8, 9, sender=1))


def test_dram_streaming_when_l1_is_too_small():
    m = load_machine("wormhole-n150")
    small = replace(m, chip=replace(m.chip, sram_bytes=300_000))
    cfg = NetworkConfig(layers="2000-512-20", batch=8, timesteps=2, activity="fixed", optimizer="sgd")
    pl = Mapping((512, 20), 1, 72, (np.arange(512) // 64, 64 + np.arange(20) // 3), "custom")
    step = _step(cfg, pl, m)
    big_prog, big = build_tt_program(step, m)
    small_prog, streamed = build_tt_program(step, small)
    assert not big.residency[0].weights_dram and streamed.residency[0].weights_dram
    assert any("streamed from DRAM" in line for line in streamed.lines())
    assert not TtMetalStack(small).memory(cfg, pl, small).overflow_tiles().size
    assert small_prog.compute_cycles[-2].max() > big_prog.compute_cycles[-2].max()  # the optimizer streams too


def test_p150_has_the_cores_current_firmware_enables():
    for name in ("blackhole-p150", "blackhole-p150x8"):
        m = load_machine(name)
        assert m.tiles_per_chip == 110 and m.fabric.cols * m.fabric.rows == 110


def test_two_chip_toy_link_flows_by_hand():
    """Network 8-4-2, B 2, T 3, input cap 4, caps (2, 2), fixed activity, on two Galaxy chips: layer 1 on
    cores 0 and 1 of chip 0 (2 neurons each), layer 2 on cores 0 and 1 of chip 1. Counted by hand:

    * forward, every time step: layer 1's lists cross to chip 1, each core's 4·(entries + 2·B) bytes: its
      entries are (3, 1), (3, 1), (2, 2) at t = 0, 1, 2, so 4·(3 + 4) + 4·(1 + 4) = 4·(2 + 4)·2 = 48 bytes;
    * backward, t = 2 and 1 (no partials at t = 0): each of layer 2's cores sends 4 bytes per entry of its
      input list (4 entries: 4·4 = 16 B) back to the owners on chip 0: 32 bytes.
    Each superstep with a flow syncs both chips; no other superstep does."""
    m = load_machine("wormhole-galaxy", 2)
    cfg = NetworkConfig(layers="8-4-2", batch=2, timesteps=3, input_cap=4, caps=(2, 2), activity="fixed")
    tpc = m.tiles_per_chip
    pl = Mapping((4, 2), 2, tpc, (np.array([0, 0, 1, 1]), tpc + np.array([0, 1])), "custom")
    prog, _ = build_tt_program(_step(cfg, pl, m), m)
    got = sorted(zip(prog.flow_step.tolist(), prog.flow_src.tolist(), prog.flow_dst.tolist(), prog.flow_bytes.tolist()))
    assert got == [(1, 0, 1, 48.0), (2, 0, 1, 48.0), (3, 0, 1, 48.0), (5, 1, 0, 32.0), (6, 1, 0, 32.0)]
    assert [int(s) for s in np.flatnonzero(prog.sync_scope == 0)] == [1, 2, 3, 5, 6]


@pytest.mark.parametrize("name", ["wormhole-n150", "wormhole-galaxy", "blackhole-p150x8"])
def test_default_placement_puts_each_layer_on_a_rectangle(name):
    """``--mapping auto`` on a Tenstorrent machine: every layer's cores are one rectangle of its chip's grid,
    which the NoC model accepts as one multicast destination (from a core outside it)."""
    m = load_machine(name)
    cfg = NetworkConfig(layers="700-300-200-100-20", batch=8, timesteps=2, activity="fixed")
    pl = place_network(cfg, m, mapping="auto").mapping
    assert pl.strategy == "rectangles"
    cols = m.fabric.cols
    for l in range(pl.n_layers):
        tiles = np.unique(pl.tile_of_neuron[l])
        assert len({int(t) // m.tiles_per_chip for t in tiles}) == 1
        cores = [(int(t) % m.tiles_per_chip % cols, int(t) % m.tiles_per_chip // cols) for t in tiles]
        outside = next((x, y) for y in range(m.fabric.rows) for x in range(cols) if (x, y) not in cores)
        rect = multicast_rectangle(cols, m.fabric.rows, outside, cores)
        assert rect.count == len(cores)


def test_firmware_figures_follow_the_machines_architecture_not_its_name(tmp_path):
    """Blackhole's firmware L1 and dispatch come from the machine's ``architecture`` (a machine file's key, kept
    through its TOML), not from its name; a file that does not say gets Wormhole's, and the run's notes say so."""
    from tilesim.machine.description import load_machine as load
    from tilesim.models.snn.stacks.tt_costs import architecture_note, default_tensix_costs
    from tilesim.models.snn.stacks.tt_program import dispatch_s

    p150 = load("blackhole-p150")
    assert p150.architecture == "blackhole"
    renamed = replace(p150, name="my-card")
    c = default_tensix_costs()
    assert c.firmware_reserved_bytes(renamed) == c.firmware_reserved_bytes(p150)
    assert dispatch_s(renamed) == dispatch_s(p150) != dispatch_s(load("wormhole-n150"))
    path = tmp_path / "card.toml"
    path.write_text(p150.to_toml())
    assert load(path).architecture == "blackhole"
    unsaid = replace(p150, architecture="")
    assert dispatch_s(unsaid) == dispatch_s(load("wormhole-n150"))
    assert "assumes Wormhole" in architecture_note(unsaid) and architecture_note(p150) is None


def test_on_chip_traffic_runs_through_the_event_model():
    """Issue 49 part 6: the spike lists (one multicast per core to the next layer's cores on its chip) and the
    input-gradient partials (one unicast per core pair) are explicit messages, so the fabric times each row with
    the event model (flows on their routes sharing links and ports, a multicast once per link of its tree), not
    from per-tile totals. On one p150 with four layers the per-tile closed form would charge the forward rows
    about 3x the events' drain (a sender's tree would span every receiver of the row on the chip)."""
    from tilesim.machine.fabric import make_fabric

    m = load_machine("blackhole-p150")
    cfg = NetworkConfig("700-1024-1024-1024-20", batch=16, timesteps=4, input_cap=32, activity="fixed")
    pl = place_network(cfg, m, None, "auto").placement
    prog = _step(cfg, pl, m, form="dense").program(m)
    assert prog.transfer_step.size > 0
    fab = make_fabric(m)
    k = 2  # the forward row of t = 1
    row = prog.transfer_step == k
    group = prog.transfer_group[row]
    assert (group >= 0).all()  # multicasts
    events = fab.transfer_cycles(prog.transfer_src[row], prog.transfer_dst[row], prog.transfer_bytes[row], group)
    assert prog.reduce_on(fab).exchange[k, 0] == pytest.approx(events)  # what the engine is given
    b_in, b_out = prog.bytes_in[k][None, None, :], prog.bytes_out[k][None, None, :]
    closed = fab.exchange_cycles(b_in, b_out)[0][0, 0]
    assert closed - fab.fixed > 2 * (events - fab.fixed)
    back = prog.transfer_step == 2 * cfg.timesteps + 2 - 2  # a backward row: partials as unicasts
    assert back.any() and (prog.transfer_group[back] < 0).all()


def test_default_placement_uses_fewer_core_rows_where_that_is_faster():
    """700-256-256-20 on an n150: every core of the grid gives the first layers 20-odd neurons a core, less than
    the matrix engine's 32-wide tile, and a receiver more for every multicast; the default keeps the layers on the
    first rows where that is faster (here 4 of 9), never slower than the whole grid, and leaves the rest idle."""
    from tilesim.models.snn.placement.fit import chip_grid_cols, layer_weights, to_placement
    from tilesim.models.snn.stacks.tt_place import _mapping, row_candidates

    assert row_candidates(9) == [9, 4, 2, 1] and row_candidates(1) == [1]
    m = load_machine("wormhole-n150")
    cfg = NetworkConfig("700-256-256-20", batch=16, timesteps=20, max_activity=0.05, activity="fixed")
    auto = place_network(cfg, m, None, "auto").placement
    whole = to_placement(_mapping(cfg, m, 1, layer_weights(cfg), chip_grid_cols(m)), m)
    t_auto = step_seconds(_step(cfg, auto, m), m)
    t_whole = step_seconds(_step(cfg, whole, m), m)
    assert auto.tiles_used() < whole.tiles_used() == 72
    assert t_auto < t_whole
    with pytest.raises(Exception, match="rows_used"):
        _mapping(cfg, m, 1, layer_weights(cfg), chip_grid_cols(m), 10)
