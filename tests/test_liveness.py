"""Memory over time (issue 39): ledger entries with lifetimes over named program steps, the peak as
the max over steps, the SNN's recorded sequences growing over the forward pass and falling over the
backward, and the outputs that show it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.errors import ConfigError, SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.machine.memory import CATEGORIES, Liveness, MemoryLedger, MemoryTotals
from tilesim.outputs.runrecord import MemoryRecord

STEPS = ("a", "b", "c", "d")
W, SEQ, XB, STACK = (
    CATEGORIES.index(c) for c in ("variables:weights", "variables:sequences", "exchange_buffers", "stack")
)


def _toy(stack_bytes: int = 70) -> MemoryLedger:
    """Two tiles, hand-counted: W always on both; a 50 B buffer on tile 0 at steps b..c; a stack
    on tile 0 at step d only; a 40 B sequence on both, always allocated, filling then emptied."""
    led = MemoryLedger(load_machine("gc200"), steps=STEPS)
    led.add("variables:weights", 100, [0, 1], "W")
    led.add("exchange_buffers", 50, [0], "buf", Liveness("b", "c"))
    led.add("stack", stack_bytes, [0], "tmp", Liveness(first="d"))
    led.add("variables:sequences", 40, [0, 1], "seq", Liveness(held=(0.25, 0.5, 1.0, 0.0)))
    return led


def test_toy_ledger_bytes_per_step_are_hand_counted():
    led = _toy()
    t0, t1 = led.step_bytes(0), led.step_bytes(1)
    assert t0.allocated.sum(axis=1).tolist() == [140, 190, 190, 210]
    assert t0.held.sum(axis=1).tolist() == [110, 170, 190, 170]
    assert t0.allocated[:, XB].tolist() == [0, 50, 50, 0] and t0.allocated[:, STACK].tolist() == [0, 0, 0, 70]
    assert t0.held[:, SEQ].tolist() == [10, 20, 40, 0] and t0.allocated[:, SEQ].tolist() == [40] * 4
    assert t1.allocated.sum(axis=1).tolist() == [140] * 4 and t1.held.sum(axis=1).tolist() == [110, 120, 140, 100]
    # the peak is the max over steps: tile 0 at d (210 B), tile 1 flat, its live data peaking at c
    assert led.per_tile()[:3].tolist() == [210, 140, 0]
    assert (led.peak_step(0), led.peak_step(1)) == ("d", "c")
    assert led.by_category(0) == {"variables:weights": 100, "variables:sequences": 40, "stack": 70}
    assert [r[0] for r in led.explain_tile(0)] == ["W", "tmp", "seq"]  # the buffer is not allocated at d
    chip = led.step_bytes(chip=0)
    assert (chip.allocated == t0.allocated + t1.allocated).all() and (chip.held == t0.held + t1.held).all()
    live = MemoryRecord.of(led).liveness
    assert live is not None and live.tile == 0 and live.peak_step == "d"
    assert live.allocated_bytes == (140, 190, 190, 210) and live.held_bytes["variables:sequences"] == (10, 20, 40, 0)
    assert live.chip_held_bytes == (220, 290, 330, 270)
    assert MemoryRecord.from_dict(MemoryRecord.of(led).to_dict()) == MemoryRecord.of(led)


def test_overflow_names_the_step_where_the_tile_peaks():
    with pytest.raises(SramOverflowError, match=r"tile 0 needs 700,140 B .* at program step 'd'; largest there: tmp"):
        _toy(stack_bytes=700_000).check()
    led = _toy()
    led.add("variables:state", 700_000, [1], "history", Liveness(held=(0.25, 0.5, 1.0, 0.5)))
    with pytest.raises(
        SramOverflowError,
        match=r"tile 1 needs 700,140 B of 638,976 B budget \(\+9.6 %\) \(allocated for the whole program; its "
        r"live data peaks at program step 'c'\)",
    ) as exc:
        led.check()
    assert exc.value.report.splitlines()[1].endswith("peak step") and " c OVERFLOW" in exc.value.report


def test_lifetimes_are_checked():
    led = MemoryLedger(load_machine("gc200"), steps=STEPS)
    with pytest.raises(ConfigError, match=r"memory 'x' first step = 'z': is not a program step"):
        led.add("stack", 1, [0], "x", Liveness(first="z"))
    with pytest.raises(ConfigError, match=r"memory 'x' lifetime = \('c', 'b'\): ends before it starts"):
        led.add("stack", 1, [0], "x", Liveness("c", "b"))
    with pytest.raises(ConfigError, match=r"must be 4 fractions in 0..1"):
        led.add("stack", 1, [0], "x", Liveness(held=(1.0, 1.0)))
    with pytest.raises(ConfigError, match=r"holds data at a step it is not allocated"):
        led.add("stack", 1, [0], "x", Liveness("b", "c", held=(1.0, 1.0, 1.0, 0.0)))
    led.add("stack", 1, [0], "x", Liveness("b", "c"))
    with pytest.raises(ConfigError, match=r"come after entries with lifetimes"):
        led.set_steps(("p", "q"))
    with pytest.raises(TypeError, match="whole program only"):
        MemoryTotals(load_machine("gc200")).add("stack", 1, [0], "x", Liveness("b", "c"))


_entry = st.tuples(
    st.sampled_from(CATEGORIES),
    st.lists(st.integers(0, 7), min_size=1, max_size=6),
    st.integers(0, 10_000),
    st.integers(0, 3),
    st.integers(0, 3),
    st.booleans(),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_entry, min_size=1, max_size=8))
def test_peak_is_the_max_over_steps_and_unchanged_for_always_live_entries(entries):
    m = load_machine("mesh-demo")
    plain, named, timed = MemoryLedger(m), MemoryLedger(m, steps=STEPS), MemoryLedger(m, steps=STEPS)
    old = np.zeros(m.total_tiles, np.int64)
    for k, (cat, tiles, b, i, j, held) in enumerate(entries):
        np.add.at(old, tiles, b)
        plain.add(cat, b, tiles, f"e{k}")
        named.add(cat, b, tiles, f"e{k}", Liveness(held=(0.5, 1.0, 0.25, 0.0)) if held else None)
        lo, hi = sorted((i, j))
        timed.add(cat, b, tiles, f"e{k}", Liveness(STEPS[lo], STEPS[hi]))
    # entries allocated for the whole program: today's sum, with or without named steps and held fractions
    assert (plain.per_tile() == old).all() and (named.per_tile() == old).all()
    assert (named.table == plain.table).all()
    for t in range(8):  # every tile's peak is the max over steps of the same per-step data
        sb = timed.step_bytes(t)
        assert timed.per_tile()[t] == sb.allocated.sum(axis=1).max() <= old[t]
        assert timed.table[:, t].sum() == timed.per_tile()[t]
        assert named.step_bytes(t).allocated.sum(axis=1).max() == old[t]


# ---- the SNN -------------------------------------------------------------------------------


def _snn(T: int = 6):
    from tilesim.models.snn.placement.fit import place
    from tilesim.models.snn.training.network import NetworkConfig

    cfg = NetworkConfig(layers="64-40-30-4", batch=4, timesteps=T, input_cap=10, max_activity=0.2, activity="fixed")
    return place(cfg, load_machine("gc200"))[1]


def test_snn_sequences_grow_over_the_forward_pass_and_fall_over_the_backward():
    led = _snn(T=6)
    assert led.steps == tuple(f"fwd t={t}" for t in range(6)) + ("loss",) + tuple(
        f"bwd t={t}" for t in range(5, -1, -1)
    ) + ("dW reduce", "optimizer")
    tile = led.max_tile()
    sb = led.step_bytes(tile)
    state = sb.held[:, CATEGORIES.index("variables:state")]
    fwd, loss, bwd = state[:6], state[6], state[7:13]
    assert (np.diff(fwd) > 0).all() and loss == fwd[-1] and bwd[0] == loss and (np.diff(bwd) < 0).all()
    assert state[-1] < fwd[0]  # after the pass no state history is kept
    assert sb.flat() and led.per_tile()[tile] == sb.allocated.sum(axis=1)[0]  # every variable always allocated
    assert led.peak_step(tile) == "fwd t=5"
    seq = led.step_bytes(chip=0).held[:, SEQ]
    assert (
        (np.diff(seq[:6]) > 0).all() and seq[6] == seq[5] == seq[7] and (np.diff(seq[7:13]) < 0).all() and seq[-1] == 0
    )
    # the peak and its categories are what they were before lifetimes: the always-live sum
    assert (led.per_tile() == led._always.sum(axis=0)).all()


def test_snn_overflow_names_the_step():
    from tilesim.models.snn.placement.fit import place
    from tilesim.models.snn.training.network import NetworkConfig

    cfg = NetworkConfig(layers="700-1462-1460-20", batch=48, timesteps=300)
    with pytest.raises(SramOverflowError, match=r"its live data peaks at program step 'fwd t=297-299'"):
        place(cfg, load_machine("gc200"), neurons_per_tile=8)


def test_snn_steps_are_grouped_beyond_100_time_steps():
    from tilesim.models.snn.step.memory import program_steps, recorded_liveness

    steps = program_steps(250)
    assert len(steps) == 203 == len(set(steps)) and steps[0] == "fwd t=0-1" and steps[100] == "loss"
    assert steps[101] == "bwd t=249-247" and steps[-3] == "bwd t=1-0"
    held = recorded_liveness(250).held
    assert held is not None and held[99] == held[100] == held[101] == 1.0 and held[0] == 2 / 250 and held[-1] == 0


def test_outputs_show_the_liveness(tmp_path):
    from tilesim.outputs import plots
    from tilesim.outputs.page import _liveness
    from tilesim.outputs.report import _liveness_markdown

    led = _snn()
    rec = MemoryRecord.of(led)
    assert rec.liveness is not None and rec.liveness.peak_step == "fwd t=5"
    fig = _liveness(rec, 1472)
    stacked = [t for t in fig.data if t.stackgroup == "held"]
    assert {t.name for t in stacked} >= {"var:state", "var:sequences"} and len(fig.data) == len(stacked) + 4
    assert "fwd t=5" in fig.layout.title.text
    assert "live data is" in _liveness_markdown(rec)[0]
    used = led.per_tile() / led.budget
    a = plots.tile_heatmap(used, tmp_path / "a.png", 23, 64, "t", "u", tiles_per_chip=1472)
    b = plots.tile_heatmap(
        used,
        tmp_path / "b.png",
        23,
        64,
        "t",
        "u",
        tiles_per_chip=1472,
        panel=lambda f: plots.liveness_panel(f, rec.liveness, led.budget, 1472),
    )
    from PIL import Image

    assert Image.open(b).size[1] > Image.open(a).size[1] + 200


def test_a_memory_record_without_steps_is_written_as_before():
    led = MemoryLedger(load_machine("gc200"))
    led.add("variables:weights", 10)
    d = MemoryRecord.of(led).to_dict()
    assert "liveness" not in d and "liveness" not in led.to_dict()
    assert MemoryRecord.from_dict(d).liveness is None
