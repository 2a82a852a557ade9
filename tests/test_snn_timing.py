"""The SNN training step as a BSP program: structure, trends, memory, placement and the CLI."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tilesim.engine.events import simulate
from tilesim.errors import MappingError, SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.models.snn.placement.contiguous import contiguous_placement
from tilesim.models.snn.placement.fit import place, to_placement
from tilesim.models.snn.placement.roles import compaction_spread
from tilesim.models.snn.step.memory import snn_memory
from tilesim.models.snn.step.table import PHASE_LABELS
from tilesim.models.snn.step.timing import build_step_program
from tilesim.models.snn.training.network import NetworkConfig, compute_gradients, init_network, train_step


def step(layers, machine="gc200", chips=None, T=10, B=12, **kw):
    kw.setdefault("max_activity", 0.2)
    cfg = NetworkConfig(layers=layers, batch=B, timesteps=T, input_cap=16, **kw)
    m = load_machine(machine, chips)
    pl, led, npt = place(cfg, m)
    st = init_network(cfg, pl)
    rng = np.random.default_rng(0)
    x = (rng.random((T, B, cfg.layers[0])) < 0.05).astype(np.uint8)
    r = train_step(st, x, rng.integers(0, cfg.layers[-1], B), per_step_counters=True)
    prog = build_step_program(cfg, pl, r.counters, m)
    return cfg, m, pl, led, prog, simulate(prog, m)


def test_program_structure_and_split():
    cfg, m, pl, led, prog, res = step("64-40-30-4")
    T, L = cfg.timesteps, cfg.n_layers
    # per time step 5 forward rows and 4 + L backward rows (one replicate row per layer), then
    # loss, dW reduce, optimizer and the host variable sync (module docstring)
    assert prog.supersteps == (5 + 4 + L) * T + 4
    assert [prog.labels[i] for i in prog.label_id[:6]] == list(PHASE_LABELS[:5]) + [PHASE_LABELS[0]]
    np.testing.assert_allclose(res.phase_s.sum(axis=1), res.time_s, rtol=1e-9)
    owners = np.unique(np.concatenate(pl.tile_of_neuron))
    assert (prog.compute_cycles[1, owners] > prog.compute_cycles[1, owners.max() + 1]).all()  # owners update neurons
    assert prog.compute_cycles[1, 0] == 0 and prog.compute_cycles[0, 0] == 0  # tile 0 of chip 0 is left free
    assert res.breakdown_s()["host"] > 0  # the input sequence arrives by infeed
    assert res.breakdown_s()["links"] == 0


def test_higher_caps_are_slower_and_depth_versus_width():
    t = [step("128-96-96-4", max_activity=a, activity="fixed")[-1].total_s for a in (0.05, 0.2, 0.5)]
    assert t[0] < t[1] < t[2]
    # toy sizes: the per-layer PopLibs supersteps dominate, so depth costs more than width
    wide = step("256-120-120-4", activity="fixed", max_activity=0.1)[-1].total_s
    narrow = step("256-48-48-48-48-48-4", activity="fixed", max_activity=0.1)[-1].total_s
    assert narrow > wide
    # the paper's scale (as measured on Bow): 2 x 1466 is slower than 5 x ~586 at equal activity
    from tilesim.models.snn.step.retime import retime

    m = load_machine("bow")
    t = {}
    for layers in ("2312-1466-1466-10", "2312-588-586-586-586-586-10"):
        cfg = NetworkConfig(layers=layers, batch=48, timesteps=100, max_activity=0.05, input_cap=32, activity="fixed")
        t[layers] = retime(None, cfg, place(cfg, m, 2)[0], m).step_s
    assert t["2312-1466-1466-10"] > t["2312-588-586-586-586-586-10"]


def test_recurrent_and_determinism():
    a = step("48-30-4", recurrent=True)
    b = step("48-30-4", recurrent=True)
    assert a[-1].total_s == b[-1].total_s  # same seed, same prediction
    np.testing.assert_array_equal(a[4].compute_cycles, b[4].compute_cycles)
    assert a[-1].total_s > step("48-30-4")[-1].total_s  # recurrence adds work


def test_two_chips_use_links():
    # three layers of 1466 neurons at 2/tile do not fit one chip: the third starts on chip 1
    cfg = NetworkConfig(
        layers="64-1466-1466-1466-4", batch=6, timesteps=3, input_cap=8, activity="fixed", max_activity=0.02
    )
    m = load_machine("gc200x2")
    pl, _, _ = place(cfg, m)
    assert pl.tile_of_neuron[2].min() >= 1472 and pl.tile_of_neuron[1].max() < 1472
    st = init_network(cfg, pl)
    x = (np.random.default_rng(0).random((3, 6, 64)) < 0.3).astype(np.uint8)
    r = train_step(st, x, np.zeros(6, np.int64), per_step_counters=True)
    res = simulate(build_step_program(cfg, pl, r.counters, m), m)
    assert res.breakdown_s()["links"] > 0 and res.bytes_links.sum() > 0


def test_memory_ledger_has_every_tensor():
    cfg = NetworkConfig(layers="2312-1466-1466-10", batch=48, timesteps=100, input_cap=32)
    m = load_machine("gc200")
    pl = contiguous_placement(cfg.layers[1:], 2, 1, tiles_per_chip=1472)
    led = snn_memory(cfg, to_placement(pl, m), m)
    t = int(pl.tile_of_neuron[0][0])
    cats = led.by_category(t)
    for c in (
        "variables:weights",
        "variables:gradients",
        "variables:optimizer",
        "variables:state",
        "variables:sequences",
        "exchange_buffers",
        "vertex_state",
        "vertex_code",
        "control_code",
        "exchange_code",
        "stack",
    ):
        assert cats.get(c, 0) > 0, c
    w = 4 * 2312 * 2
    assert cats["variables:weights"] == w
    assert cats["variables:gradients"] == 7 * w  # 6 per-worker copies + the reduced dW
    assert cats["variables:optimizer"] == 2 * w  # Adam m and v
    assert dict((e[0], e[2]) for e in led.explain_tile(t, 20))["layer 1 state sequence"] == 4 * 100 * 48 * 2
    sgd = snn_memory(NetworkConfig(layers="2312-1466-1466-10", optimizer="sgd"), to_placement(pl, m), m)
    assert "variables:optimizer" not in sgd.by_category(t)


S1 = [
    "2312-1466-1466-10",
    "2312-978-978-976-10",
    "2312-734-734-732-732-10",
    "2312-588-586-586-586-586-10",
    "700-1462-1460-20",
    "700-974-974-974-20",
    "700-732-730-730-730-20",
    "700-586-584-584-584-584-20",
    "4608-1466-1464-11",
    "4608-978-976-976-11",
    "4608-734-732-732-732-11",
    "4608-586-586-586-586-586-11",
]


@pytest.mark.slow
@pytest.mark.parametrize("layers", S1)
def test_paper_single_chip_configs_run_and_fit(layers):
    """S1: all 12 configurations of snn-on-ipu.md §4.2 fit one chip at 2 neurons per tile and
    run a timed training step (fixed activity, the paper's batch and time steps)."""
    n0 = int(layers.split("-")[0])
    T = 50 if n0 == 4608 else 100
    cfg = NetworkConfig(
        layers=layers,
        batch=48,
        timesteps=T,
        max_activity=0.05,
        activity="fixed",
        input_cap={2312: 32, 700: 48, 4608: 32}[n0],
    )
    m = load_machine("bow")
    pl, led, npt = place(cfg, m)
    assert npt == 2 and led.overflow_tiles().size == 0
    assert 2939 <= sum(cfg.layers[1:]) <= 2944
    x = (np.random.default_rng(0).random((T, 48, n0)) < 0.02).astype(np.uint8)
    r = train_step(init_network(cfg, pl), x, np.zeros(48, np.int64), per_step_counters=True)
    res = simulate(build_step_program(cfg, pl, r.counters, m), m)
    assert 1e-3 < res.total_s < 0.05  # milliseconds per step, like the measured 4-11 ms


def test_placement_errors():
    m = load_machine("gc200")
    huge = NetworkConfig(layers="20000-3000-3000-10", batch=48, timesteps=100)
    with pytest.raises(
        SramOverflowError,
        match=r"no neurons-per-tile value fits: 6 per tile is the fewest that places on 1 chip\(s\) and it overflows: "
        r"SRAM overflow .* fix: reduce --batch",
    ):
        place(huge, m)
    wide = NetworkConfig(layers="64-1466-1466-1466-10", batch=6, timesteps=3)
    with pytest.raises(MappingError, match=r"need 2 chips: machine has 1; pass --chips 2"):
        place(wide, m, neurons_per_tile=2)
    assert compaction_spread(1466) == 4 and compaction_spread(978) == 3 and compaction_spread(10) == 1


def run(*args):
    return subprocess.run([sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=600)


def test_cli_run_json_and_outputs(tmp_path):
    r = run(
        "run",
        "--layers",
        "64-40-4",
        "--batch",
        "12",
        "--timesteps",
        "20",
        "--input-cap",
        "16",
        "--steps",
        "3",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    for k in (
        "predicted_step_s",
        "samples_per_s",
        "breakdown_s",
        "memory",
        "network",
        "loss",
        "accuracy",
        "wall_s_per_step",
        "wall_s_total",
    ):
        assert k in s
    assert sum(s["breakdown_s"].values()) == pytest.approx(s["predicted_step_s"], rel=1e-9)
    assert len(s["loss"]) == len(s["accuracy"]) == 3
    assert s["network"] == {
        "layers": [64, 40, 4],
        "neurons": 44,
        "weights": 64 * 40 + 40 * 4,
        "caps": [2, 2],
        "neurons_per_tile": 2,
    }
    assert set(s["memory"]) >= {"budget_bytes", "max_tile_bytes", "max_tile", "overflow_tiles", "by_category_bytes"}
    for f in ("summary.json", "trace.json", "memory.png", "timeline.png"):
        assert (tmp_path / f).stat().st_size > 500


def test_cli_run_config_file_and_bad_input(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('layers = "64-40-4"\nbatch = 12\ntimesteps = 10\ninput_cap = 16\nsteps = 1\njson = true\n')
    r = run("run", str(cfg), "--seed", "3")
    assert r.returncode == 0, r.stderr
    for args, needle in [
        (["run", "--layers", "64-0-4"], "layers"),
        (["run", "--layers", "64-40-4", "--batch", "0"], "batch = 0"),
        (["run", "--layers", "100-40-4", "--dataset", "shd"], "--layers N0 = 100: must be 700"),
        (["run", "--layers", "64-40-4", "--mapping", "zigzag"], "no such file; give a strategy name"),
    ]:
        r = run(*args)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    cfg.write_text("layerz = 3\n")
    r = run("run", str(cfg))
    assert r.returncode == 2 and "layerz = 3: unknown key" in r.stderr


def test_cli_grad_matches_library(tmp_path):
    rng = np.random.default_rng(1)
    W0 = rng.uniform(-0.3, 0.4, (30, 20)).astype(np.float32)
    W1 = rng.uniform(-0.3, 0.5, (20, 5)).astype(np.float32)
    spikes = (rng.random((15, 6, 30)) < 0.2).astype(np.uint8)
    labels = rng.integers(0, 5, 6)
    np.savez(tmp_path / "W.npz", W0=W0, W1=W1)
    np.savez(tmp_path / "X.npz", spikes=spikes, labels=labels)
    r = run(
        "grad",
        "--weights",
        str(tmp_path / "W.npz"),
        "--inputs",
        str(tmp_path / "X.npz"),
        "--out",
        str(tmp_path / "G.npz"),
        "--caps",
        "20-5",
        "--second-threshold",
        "-100",
        "--input-cap",
        "30",
    )
    assert r.returncode == 0, r.stderr
    G = np.load(tmp_path / "G.npz")
    cfg = NetworkConfig(layers=(30, 20, 5), batch=6, timesteps=15, caps=(20, 5), input_cap=30, second_threshold=-100.0)
    st = init_network(cfg)
    st.W = [W0, W1]
    ref = compute_gradients(st, spikes, labels)
    assert float(G["loss"]) == pytest.approx(ref.loss)
    np.testing.assert_allclose(G["dW0"], ref.grads[0][0], rtol=1e-6)
    assert G["out_counts"].shape == (6, 5)
    r = run(
        "grad",
        "--weights",
        str(tmp_path / "X.npz"),
        "--inputs",
        str(tmp_path / "X.npz"),
        "--out",
        str(tmp_path / "G.npz"),
    )
    assert r.returncode == 2 and "--weights keys" in r.stderr


def test_the_step_table_drives_the_program():
    """Rows, labels and folded calls come from STEP_ROWS: the row count, each superstep's label
    and its extra syncs follow from the table (not restated), and every term a row writes is a
    field of LayerTerms."""
    from dataclasses import fields

    from tilesim.models.snn.step.table import STEP_ROWS, LayerTerms, step_shape

    cfg, m, pl, led, prog, res = step("64-40-30-4", T=4)
    T, L = cfg.timesteps, cfg.n_layers
    shape = step_shape(T, L)
    per_t = sum(L if r.per_layer else 1 for r in STEP_ROWS if r.loop != "once")
    once = sum(1 for r in STEP_ROWS if r.loop == "once")
    assert prog.supersteps == shape.supersteps == per_t * T + once
    assert PHASE_LABELS == tuple(r.label for r in STEP_ROWS)
    # forward rows run t = 0..T-1, backward rows t = T-1..0: the replicate row of layer l at time
    # step t sits right after the slice row of the same time step
    rep = [k for k, j in enumerate(shape.row) if STEP_ROWS[j].per_layer]
    assert [shape.layer[k] for k in rep] == list(range(L))
    for k in rep:
        rows = shape.rows_of(k)
        assert (np.diff(rows) < 0).all()  # backward in time
        assert all(prog.labels[prog.label_id[r]] == "bwd: replicate lists" for r in rows)
        assert all(prog.labels[prog.label_id[r - 1 - shape.layer[k]]] == "bwd: slice sequences" for r in rows)
    names = {f.name for f in fields(LayerTerms)}
    assert all(w.term in names for r in STEP_ROWS for w in r.writes)
    j = PHASE_LABELS.index("bwd: state grad")
    assert STEP_ROWS[j].folded(L, True) == (1 + L) + L - 1  # 1 + L compute sets, L copies


def test_both_row_sinks_follow_the_protocol_and_agree():
    """DenseRows and PeakRows implement RowSink, and the chip reduction of the dense arrays is
    what PeakRows builds (max over each chip's tiles)."""
    from tilesim.models.snn.step.counters import count_work
    from tilesim.models.snn.step.rows import DenseRows, PeakRows, RowSink
    from tilesim.models.snn.step.table import step_shape
    from tilesim.models.snn.step.timing import _emit, default_costs
    from tilesim.models.snn.training.activity import fixed_activity

    for sink in (DenseRows, PeakRows):
        for name in ("owner", "local", "chip", "spread", "overhead", "finish"):
            assert callable(getattr(sink, name)), (sink, name)
            assert name in RowSink.__dict__
    cfg = NetworkConfig(layers="64-40-30-4", batch=4, timesteps=5, input_cap=10, max_activity=0.2, activity="fixed")
    m = load_machine("gc200", 2)
    pl, _, _ = place(cfg, m)
    cnt = count_work(fixed_activity(cfg, 1), pl, per_step=True)
    shape = step_shape(cfg.timesteps, cfg.n_layers)
    active = np.ones(m.total_tiles)
    active[0] = 0
    dense, chips = DenseRows(shape, m.chips, m.tiles_per_chip, active), PeakRows(shape, m.chips, m.tiles_per_chip)
    for rows in (dense, chips):
        _emit(cfg, pl, cnt, m, default_costs(), 52, None, rows)
    d, c = dense.finish(), chips.finish()
    for a in ("compute", "in", "out"):
        per_chip = d[a].reshape(shape.supersteps, m.chips, m.tiles_per_chip).max(axis=2)
        np.testing.assert_allclose(c[a], per_chip, rtol=1e-6, atol=1e-3)


def test_layer_terms_are_cached_by_content():
    """A search's cache keeps each layer's terms under the counters' source (activity digest,
    grouping), not their identity: recounting the same activity into a fresh counters cache
    finds the terms; another activity does not."""
    from tilesim.models.snn.step.counters import count_work
    from tilesim.models.snn.step.workload import SnnStep
    from tilesim.models.snn.training.activity import fixed_activity
    from tilesim.workload import step_seconds

    def predict_step_s(cfg, pl, counters, m, cache):
        return step_seconds(SnnStep(cfg, pl, counters, cache=cache, form="peaks"), m)

    cfg = NetworkConfig(layers="64-40-30-4", batch=4, timesteps=5, input_cap=10, max_activity=0.2, activity="fixed")
    m = load_machine("gc200")
    pl, _, _ = place(cfg, m)
    act = fixed_activity(cfg, 1)
    cache = {}
    t0 = predict_step_s(cfg, pl, count_work(act, pl, per_step=True, cache=cache), m, cache=cache)
    terms = cache[("layer terms",)]
    assert len(terms) == cfg.n_layers
    del cache[("counts", True)]  # new counter objects, same content
    again = count_work(act, pl, per_step=True, cache=cache)
    assert all(p.source is not None for p in again.phases)
    assert predict_step_s(cfg, pl, again, m, cache=cache) == t0 and len(terms) == cfg.n_layers
    other = count_work(fixed_activity(cfg, 2), pl, per_step=True, cache=cache)
    predict_step_s(cfg, pl, other, m, cache=cache)
    assert len(terms) == 2 * cfg.n_layers
    assert count_work(act, pl, per_step=True).phases[0].source is None  # no cache: not stamped
