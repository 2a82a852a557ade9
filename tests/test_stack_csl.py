"""The csl stack's native program (issue 49 parts 3, 4 and 7 on the wafer): weight blocks on PEs, spikes as
wavelets along lines, partial sums in column chains, timed by the PE's own costs (``wse_costs.toml``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tilesim.errors import ConfigError, MappingError
from tilesim.machine.description import load_machine
from tilesim.machine.fabric import make_fabric
from tilesim.models.snn.placement.contiguous import contiguous_placement
from tilesim.models.snn.placement.fit import place_network, to_placement
from tilesim.models.snn.stacks import stack_for
from tilesim.models.snn.stacks.csl import CslStack
from tilesim.models.snn.stacks.csl_costs import default_wse_costs, load_wse_costs
from tilesim.models.snn.stacks.csl_layout import colors_needed, zigzag_cells
from tilesim.models.snn.stacks.csl_program import block_counts
from tilesim.models.snn.step.counters import count_work
from tilesim.models.snn.step.timing import default_costs, uncalibrated_costs
from tilesim.models.snn.step.workload import SnnStep
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.workload import time_workload

IPU_CATEGORIES = ("vertex_state", "vertex_code", "exchange_code", "stack")


def _cut(m, cols: int, rows: int):
    """``m`` cut down to a ``cols x rows`` rectangle of its PEs (as a 100 x 100 cut of the wafer)."""
    return replace(
        m,
        name=f"{m.name}-{cols}x{rows}",
        chip=replace(m.chip, tiles=cols * rows),
        fabric=replace(m.fabric, cols=cols, rows=rows),
    )


def _toy(timesteps: int = 2, **kw):
    """Layers 4-2-2 (two weight layers), B 1, T 2, input cap 2, caps (1, 1), SGD, fixed activity, on a 5 x 4 cut
    of wse2 (2 neurons per placement tile)."""
    m = _cut(load_machine("wse2"), 5, 4)
    cfg = NetworkConfig(layers="4-2-2", batch=1, timesteps=timesteps, input_cap=2, caps=(1, 1), optimizer="sgd")
    pl = to_placement(contiguous_placement(cfg.layers[1:], 2, 1, tiles_per_chip=m.tiles_per_chip), m)
    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    return m, cfg, pl, counters, SnnStep(cfg, pl, counters, stack="csl", **kw)


def test_two_layer_toy_counted_by_hand():
    """Each layer fits one weight PE (R = C = 1) and one state PE of m = 2 neurons. Costs (wse_costs.toml): task
    20, DSD set-up 8, wavelet in/out 1, id scalar 6, FP32 FMAC / add / move 1 a cycle, LIF 6 ops, state grad 5
    ops, SGD 2 ops. Counts (fixed activity: every list at its cap): the data input 2 spikes per step (all in
    layer 1's one in-block), layer 1's list 1 spike and 1 slot, layer 2's input at t = 0 the step -1 list (1
    spike), at t = 1 layer 1's list of t = 0.

    Compute of the slowest PE per superstep (n = 2 outputs, s spikes in, k slots in, o ids out):

    ==========================  =========================================================  ======
    host: input stream          feeder: 20 + (2 ids + 1 end)·1                              23
    fwd: synaptic adds (t)      weight PE 1: 20 + 2·8 + s·(1+6+8) + s·2 + 2 = 38 + 17s, s=2  72
    fwd: neuron update t=0      state PE 1: 20+8 + 2 + 6·(8+2) + o·(6+1), o = 1              97
    fwd: neuron update t=1      every state PE: 90 (no ids out: no layer reads step 2)      90
    loss                        state PE 2: 20 + 5·(8+2)                                    70
    bwd: state grad (t)         state PE 1: 20 + κ·(1+6) + 5·(8+2), κ = 1                   77
    bwd: weight+input grad t=1  weight PE 2: 20+3·8 + 2 + (s+k)·(6+8+2) + k, s=k=1          79
    bwd: weight+input grad t=0  weight PE 1: 46 + 16·2 (s = 2, no input gradient)           78
    optimizer                   weight PE 1: 2·8 + 4·2 weights·2 ops                        32
    ==========================  =========================================================  ======

    Exchange (mesh: 4 B a cycle per port and link, 1 cycle a hop, no fixed cost): host: the feeder's 3
    wavelets (2 ids + end) along layer 1's line, 12 B → 3 + 1 hop = 4; synaptic adds: the [1, 2] partials down
    the column into the state PE, 8 B → 2 + 2 hops = 4; neuron update: layer 1's id + end to layer 2's line (8 B)
    and the feeder's next 12 B, 3 + 3 hops = 6 (t = 1: nothing to send); state grad: dI up the column,
    8 B → 2 + 2 = 4; weight+input grad t = 1: layer 2's one partial into layer 1's state PE, 4 B → 1 + 3 = 4.
    """
    m, cfg, pl, counters, step = _toy()
    prog = step.program(m)
    want_compute = [23, 72, 97, 72, 90, 70, 77, 79, 77, 78, 32]
    want_exchange = [4, 4, 6, 4, 0, 0, 4, 4, 4, 0, 0]
    assert [prog.labels[i] for i in prog.label_id] == [
        "host: input stream",
        *["fwd: synaptic adds", "fwd: neuron update"] * 2,
        "loss",
        *["bwd: state grad", "bwd: weight+input grad"] * 2,
        "optimizer",
    ]
    assert prog.peaks.compute[:, 0].tolist() == want_compute
    work = make_fabric(m).reduce_peaks(prog.peaks)
    assert work.exchange[:, 0].tolist() == want_exchange
    res = time_workload(step, m).result
    # the host row's compute (the feeder taking the stream) is booked as host time with the stream itself
    device = sum(want_compute[1:]) + sum(want_exchange)
    host = res.breakdown_s()["host"]
    assert res.total_s - host == pytest.approx(device / m.clock_hz, rel=1e-9)
    assert host > want_compute[0] / m.clock_hz
    assert list(prog.host_bytes) == [4.0 * 2 * 1 * (2 + 1)]  # T·B·(input_cap+1)·4, the input stream only


def test_ipu_cost_file_changes_no_wse2_step():
    """A cost file fitted on the IPU (SnnStep.costs) is never read by the csl program."""
    m, cfg, pl, counters, _ = _toy()
    times = set()
    for costs in (None, default_costs(), uncalibrated_costs()):
        step = SnnStep(cfg, pl, counters, costs=costs, stack="csl")
        times.add(time_workload(step, m).result.total_s)
    assert len(times) == 1


def test_full_wafer_never_slower_than_a_100x100_cut():
    """The issue's network (700-256-256-20, B 16, T 20, fixed 5 %) at the stack's default placement: 1.009 ms on
    the whole wafer and 0.267 ms on a 100 x 100 cut before (the table program spread over 850,000 PEs)."""
    wafer = load_machine("wse2")
    cut = _cut(wafer, 100, 100)
    cfg = NetworkConfig(layers="700-256-256-20", batch=16, timesteps=20, max_activity=0.05)
    out = {}
    for m in (wafer, cut):
        st = stack_for(m)
        placed = place_network(cfg, m, mapping=st.default_placement(m), stack="csl")
        counters = count_work(fixed_activity(cfg), placed.placement, per_step=True)
        step = SnnStep(cfg, placed.placement, counters, stack="csl")
        res = time_workload(step, m).result
        out[m.name] = res.total_s
        assert "idle" in st.describe_layout(cfg, placed.placement, m)
        assert "PEs used" in step.stack_lines(res)[0] and "15 of the router's 24" in step.stack_lines(res)[1]
    assert out[wafer.name] <= out[cut.name]


def test_a_layout_needing_more_colours_than_the_router_has_is_refused():
    m, cfg, pl, counters, _ = _toy()
    few = replace(default_wse_costs(), routable_colors=colors_needed(default_wse_costs()) - 1)
    step = SnnStep(cfg, pl, counters, stack=CslStack(m, costs=few))
    with pytest.raises(MappingError, match=r"needs 15 colours .* the router has 14 routable colours"):
        step.program(m)


def test_memory_is_the_pes_own():
    """Weight block, dW, state and sequences, buffers and the program's code; no IPU categories."""
    m, cfg, pl, counters, step = _toy()
    led = step.memory(m)
    cats = led.by_category()
    assert not set(IPU_CATEGORIES) & {c for c, v in cats.items() if v}
    assert cats["variables:weights"] == 4 * (4 * 2 + 2 * 2)
    assert cats["variables:gradients"] == cats["variables:weights"]
    assert cats["control_code"] > 0
    assert led.check(mode="report").size == 0


def test_block_counts_are_the_counters_per_tile_tallies():
    """Per out-block spikes are the counters' per-tile tallies summed (exact), and every layer's input per step
    adds up to the counters' synaptic rows."""
    m = _cut(load_machine("wse2"), 100, 100)
    cfg = NetworkConfig(layers="40-30-20-4", batch=3, timesteps=4, max_activity=0.2)
    pl = to_placement(contiguous_placement(cfg.layers[1:], 1, 1, tiles_per_chip=m.tiles_per_chip), m)
    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    layout = CslStack(m).layout(cfg, pl, m)
    counts = block_counts(cfg, counters, list(layout.layers))
    for l, c in enumerate(counts):
        su = counters.get("state_update", l)
        rows = su.step_totals[su.row("synaptic_adds")] / cfg.layers[l + 1]
        np.testing.assert_allclose(c.s_in.sum(axis=1), rows)
        sd = counters.get("spike_detect", l)
        np.testing.assert_allclose(c.o_out.sum(axis=1), sd.step_totals[sd.row("spikes_kept")])


def test_zigzag_cells_touch_and_turn():
    cells = zigzag_cells(4, 5, 16)
    assert len(set(cells)) == 16 and zigzag_cells(4, 5, 17) is None
    for a, b in zip(cells, cells[1:]):
        assert abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1
    for a, b, c in zip(cells, cells[1:], cells[2:]):
        assert (a[0] == b[0]) != (b[0] == c[0])  # each move at right angles to the one before


def test_cost_file_errors_name_the_known_costs(tmp_path):
    p = tmp_path / "w.toml"
    p.write_text('name = "x"\n[pe]\nfmacs = 1.0\n')
    with pytest.raises(ConfigError, match="known: .*fmac_f32_per_cycle"):
        load_wse_costs(p)


def test_wafer_presets_are_the_sdks_programmable_fabric():
    m = load_machine("wse2")
    assert (m.fabric.cols, m.fabric.rows, m.tiles_per_chip, m.clock_hz) == (750, 994, 745_500, 0.85e9)


def test_the_input_split_band_is_switchable_and_bounds_the_step():
    """The named assumption (the data input spread over the first layer's in-blocks by their neurons) and its
    band's end (every in-block taking as many as it can) are one switch apart; the band's end is never faster."""
    m = _cut(load_machine("wse2"), 100, 100)
    cfg = NetworkConfig(layers="64-32-8", batch=4, timesteps=5, max_activity=0.1, input_cap=8)
    pl = to_placement(contiguous_placement(cfg.layers[1:], 1, 1, tiles_per_chip=m.tiles_per_chip), m)
    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    t = {
        split: time_workload(SnnStep(cfg, pl, counters, stack=CslStack(m, input_split=split)), m).result.total_s
        for split in ("uniform", "worst")
    }
    assert t["uniform"] < t["worst"]
    with pytest.raises(ConfigError, match="input split"):
        SnnStep(cfg, pl, counters, stack=CslStack(m, input_split="even")).program(m)


@pytest.mark.parametrize("layers,side", [("4-2-2", 5), ("40-30-20-4", 100), ("-".join(["64"] * 8), 200)])
def test_the_closed_form_bounds_the_events_on_the_programs_own_routes(layers, side):
    """Each exchange row's transfers (chains PE to PE, line and column multicasts as trees, on the layout's
    tiles) through the event model (fluid drain, MeshFabric.transfer_cycles) against the closed form the program
    is timed by (the busiest port or link drained, plus the row's route bound): closed - hops <= events <=
    closed. The events see the chains' hops at once, not their pipeline fill: that is the gap."""
    from tilesim.models.snn.stacks.csl_program import _exchange_cycles, row_transfers, step_rows

    m = _cut(load_machine("wse2"), side, max(side, 4) if side > 5 else 4)
    cfg = (
        NetworkConfig(layers=layers, batch=2, timesteps=3, max_activity=0.2)
        if side > 5
        else NetworkConfig(layers=layers, batch=1, timesteps=2, input_cap=2, caps=(1, 1), optimizer="sgd")
    )
    npt = 2 if side == 5 else 1
    pl = to_placement(contiguous_placement(cfg.layers[1:], npt, 1, tiles_per_chip=m.tiles_per_chip), m)
    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    stack = CslStack(m)
    layout = stack.layout(cfg, pl, m)
    rows = step_rows(cfg, list(layout.layers), block_counts(cfg, counters, list(layout.layers)), stack.costs)
    closed = _exchange_cycles(m, rows)
    fabric = make_fabric(m)
    tiles = np.concatenate([t.ravel() for t in (*layout.weight_tiles, *layout.state_tiles, layout.feeder_tiles)])
    assert np.unique(tiles).size == tiles.size  # no PE holds two roles
    cols = m.fabric.cols
    for l in range(1, len(layout.layers)):  # each line starts across the edge from the column end feeding it
        ends, lines = layout.state_tiles[l - 1][0], layout.weight_tiles[l]
        gap = np.abs(lines % cols - (ends % cols)[:, None]) + np.abs(lines // cols - (ends // cols)[:, None])
        assert gap.min(axis=1).max() <= layout.layers[l].depth + 1
    checked = 0
    for s, r in enumerate(rows):
        if not r.exchange:
            continue
        src, dst, nb, group = row_transfers(layout, r, cfg.batch)
        events = fabric.transfer_cycles(src, dst, nb, group)
        assert closed[s] - r.hops * m.fabric.hop_cycles <= events <= closed[s], (r.label, events, closed[s])
        checked += 1
    assert checked == sum(r.exchange for r in rows) > 0


def test_the_feeders_hold_two_time_steps_of_input_lists_not_the_steps_T():
    """The host streams the input a time step at a time: a feeder holds the step being sent and the next one
    (double-buffered), 2·B·(min(n, cap)+1) words, whatever T; the host row still carries the whole stream."""
    from tilesim.models.snn.stacks.csl_program import feeder_bytes

    costs = default_wse_costs()
    code = costs.code_bytes + costs.reserved_bytes
    for T in (2, 10, 100):
        cfg = NetworkConfig(layers="4-2-2", batch=3, timesteps=T, input_cap=2, caps=(1, 1), optimizer="sgd")
        assert feeder_bytes(cfg, costs, 4) == 4 * 2 * 3 * (2 + 1) + code
    m, cfg, pl, counters, step = _toy(timesteps=10)
    led = step.memory(m)
    assert led.by_category()["variables:inputs"] == 4 * 2 * 1 * (2 + 1)  # one feeder, B 1, cap 2
    assert list(step.program(m).host_bytes) == [4.0 * 10 * 1 * (2 + 1)]


def _resend_toy(sram: int):
    """Layers 2-2-2, B 1, T 2, input cap 2, caps (1, 1), SGD, fixed activity, on a 5 x 4 cut of wse2 whose PEs have
    ``sram`` bytes."""
    m = _cut(load_machine("wse2"), 5, 4)
    m = replace(m, chip=replace(m.chip, sram_bytes=sram))
    cfg = NetworkConfig(layers="2-2-2", batch=1, timesteps=2, input_cap=2, caps=(1, 1), optimizer="sgd")
    pl = to_placement(contiguous_placement(cfg.layers[1:], 2, 1, tiles_per_chip=m.tiles_per_chip), m)
    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    return m, cfg, SnnStep(cfg, pl, counters, stack=CslStack(m))


def test_weight_pes_that_cannot_record_their_bitmasks_get_them_re_sent():
    """SRAM of the toy's PEs (code 6144 + reserved 1024 = 7168 B each), B 1, T 2:

    * weight PE 1 (2 x 2): W, dW 32 + accumulator, δI 16 + list and partials buffers 12 + 8 = 7236, with its
      input bitmasks recorded over T (8·T·B·1 word = 16) 7252, re-sent (one step's 1 word from the feeder) 7240;
    * weight PE 2 (2 x 2): the same 7236; recorded 7252; re-sent: layer 1's state PE sends its spike and kept
      masks, 2 words, 7244;
    * state PE (2 neurons): v over T 16 + 24 + masks 16 + 16 = 7240; feeder: two steps of lists 24 (+ the input's
      spike masks over T, 8, where layer 1 re-sends) = 7200.

    At 7245 B neither weight PE can record: both layers re-send. Their backward rows then carry, per step:
    ``bwd: state grad``: the feeder sends 1 word (task 20 + DSD 8 + 1 = 29 cycles) along layer 1's line, the state
    PE of layer 1 its 2 words (+ 20 + 8 + 2 = 30 on its 77) along layer 2's line: 4 + 8 B more on the fabric; the
    weight PEs receive δI (8 B) and the masks (4 / 8 B): port in 16 B → 4 cycles + the spikes' route 3 hops = 7
    (it was 8 B: 2 + 2 = 4). ``bwd: weight+input grad``: each weight PE takes its words (+ 20 + 8 + words):
    t = 1 weight PE 2 79 + 30 = 109, t = 0 weight PE 1 78 + 29 = 107."""
    m, cfg, step = _resend_toy(7245)
    layout = step.stack.layout(cfg, step.placement, m)
    assert [lb.resend for lb in layout.layers] == [True, True]
    assert "re-sent at every backward step" in layout.describe_choices()
    prog = step.program(m)
    labels = [prog.labels[i] for i in prog.label_id]
    sg = [s for s, lab in enumerate(labels) if lab == "bwd: state grad"]
    gr = [s for s, lab in enumerate(labels) if lab == "bwd: weight+input grad"]
    assert prog.peaks.compute[sg, 0].tolist() == [107, 107]
    assert prog.peaks.compute[gr, 0].tolist() == [109, 107]
    work = make_fabric(m).reduce_peaks(prog.peaks)
    assert work.exchange[sg, 0].tolist() == [7, 7]
    # the re-sent bytes on the fabric: δI 8 + 8 B up the two columns, + 4 (feeder) + 8 (state PE) B of masks
    assert prog.onchip_bytes[sg, 0].tolist() == [28.0, 28.0]
    seq = {e.label: int(np.sum(e.bytes)) for e in step.memory(m).entries if e.category == "variables:sequences"}
    assert seq["layer 1 input bitmasks of the step (re-sent)"] == 4
    assert seq["layer 2 input bitmasks of the step (re-sent)"] == 8
    assert seq["input spike bitmasks over T (feeders, re-sent)"] == 8
    # with room to record, nothing is re-sent and the step is faster
    m2, _, step2 = _resend_toy(7252)
    assert not any(lb.resend for lb in step2.stack.layout(cfg, step2.placement, m2).layers)
    assert time_workload(step2, m2).result.total_s < time_workload(step, m).result.total_s


def test_state_pes_split_the_batch_when_one_neurons_history_does_not_fit():
    """At T 100, B 48 one neuron's whole-batch history (v 4·T·B + two list bitmasks 8·T·B) is 57.6 KB: more than
    a PE's 48 KB. Two samples' halves fit (28.8 KB + code), so the batch is split; past one neuron of one
    sample the error names the limit and the fix."""
    from tilesim.models.snn.stacks.csl_program import _depth, state_bytes

    costs = default_wse_costs()
    cfg = NetworkConfig(layers="700-6-2", batch=48, timesteps=100, input_cap=48, caps=(2, 2))
    assert state_bytes(cfg, costs, 1) > 49_152
    d, q = _depth(cfg, costs, 6, 49_152)
    assert q > 1 and d % q == 0
    m = -(-6 // (d // q))
    assert state_bytes(cfg, costs, m, -(-48 // q)) <= 49_152
    m5, cfg5, pl, counters, step = _toy(timesteps=4000)
    with pytest.raises(MappingError, match=r"one neuron's history for one sample .* reduce --timesteps"):
        step.program(m5)


def test_the_shd_demo_network_fits_the_wafer():
    """The paper's SHD network (700-1462-1460-20, B 48, T 100, Adam, caps 48 / 72-72-2): its weight PEs cannot
    record the input bitmasks over T and one neuron's history overflows a state PE, so the layout re-sends and
    splits the batch; before, no block size fitted."""
    from tilesim.models.snn.stacks.csl_program import choose_layout, csl_memory

    m = load_machine("wse2")
    cfg = NetworkConfig(
        layers="700-1462-1460-20", batch=48, timesteps=100, input_cap=48, caps=(72, 72, 2), optimizer="adam"
    )
    placed = place_network(cfg, m, mapping="spread", stack="csl")
    layout = choose_layout(cfg, placed.placement, m)
    assert all(lb.resend for lb in layout.layers) and all(lb.batch_split > 1 for lb in layout.layers)
    assert layout.pes_used < m.tiles_per_chip
    assert csl_memory(cfg, layout, m).check(mode="report").size == 0


def test_re_sent_and_batch_split_routes_are_bounded_by_the_events():
    """Layers 2-2-2, B 4, T 20, SGD on a 12 x 10 cut with 7,700 B PEs: one neuron's whole-batch history (8,208 B)
    does not fit a state PE, half the batch's does (7,688 B), so each column's 2 neurons sit on 2 x 2 state PEs;
    recording the bitmasks (7,984 B) does not fit a weight PE, re-sending does. The state PEs' shares add up to
    their column's, and the re-sent multicasts, like every row's transfers, keep closed - hops <= events <=
    closed."""
    from tilesim.models.snn.stacks.csl_program import _exchange_cycles, row_transfers, step_rows

    m = _cut(load_machine("wse2"), 12, 10)
    m = replace(m, chip=replace(m.chip, sram_bytes=7700))
    cfg = NetworkConfig(layers="2-2-2", batch=4, timesteps=20, input_cap=2, caps=(1, 1), optimizer="sgd")
    pl = to_placement(contiguous_placement(cfg.layers[1:], 2, 1, tiles_per_chip=m.tiles_per_chip), m)
    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    stack = CslStack(m)
    layout = stack.layout(cfg, pl, m)
    assert [(lb.depth, lb.batch_split, lb.resend) for lb in layout.layers] == [(4, 2, True)] * 2
    assert "2 x 2-way batch split" in layout.describe_choices()
    for lb in layout.layers:
        np.testing.assert_allclose(lb.state_share(cfg.batch).sum(axis=0), 1.0)
    assert step_memory_fits(cfg, pl, counters, m, stack)
    rows = step_rows(cfg, list(layout.layers), block_counts(cfg, counters, list(layout.layers)), stack.costs)
    closed = _exchange_cycles(m, rows)
    fabric = make_fabric(m)
    for s, r in enumerate(rows):
        if r.exchange:
            src, dst, nb, group = row_transfers(layout, r, cfg.batch)
            events = fabric.transfer_cycles(src, dst, nb, group)
            assert closed[s] - r.hops * m.fabric.hop_cycles <= events <= closed[s], (r.label, events, closed[s])


def step_memory_fits(cfg, pl, counters, m, stack) -> bool:
    """The csl program's own SRAM ledger has no PE over budget."""
    return SnnStep(cfg, pl, counters, stack=stack).memory(m).check(mode="report").size == 0
