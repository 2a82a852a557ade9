"""Issue 15: big systems. The compact (chip by chip) program gives the dense program's timing;
the fused per-layer update gives the same weights; a run that cannot fit in host memory is
refused at once with one line."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from tilesim.engine.events import simulate
from tilesim.errors import ConfigError
from tilesim.machine.description import load_machine
from tilesim.models.snn.commands.hostmem import check_host_memory, estimate_host_memory
from tilesim.models.snn.placement.fit import place
from tilesim.models.snn.step.retime import retime
from tilesim.models.snn.step.timing import build_step_program
from tilesim.models.snn.training import data as D
from tilesim.models.snn.training.network import (
    NetworkConfig,
    apply_gradients,
    compute_gradients,
    init_network,
    train_step,
)
from tilesim.outputs.records import ProgramDigest, label_tile_cycles
from tilesim.program import CompactProgram


def _step(layers, chips, recurrent=False, optimizer="adam"):
    cfg = NetworkConfig(
        layers=layers, batch=4, timesteps=6, max_activity=0.1, input_cap=16, recurrent=recurrent, optimizer=optimizer
    )
    m = load_machine("bow", chips)
    pl, _, _ = place(cfg, m, 8, "contiguous", "report")
    st = init_network(cfg, pl)
    sp, lab = next(
        D.synthetic(cfg.layers, 8, cfg.timesteps, seed=0).batches(
            cfg.batch, cfg.timesteps, cfg.input_cap, np.random.default_rng(1)
        )
    )
    return cfg, m, pl, st, sp, lab


@pytest.mark.parametrize(
    "layers,chips,recurrent",
    [
        ((64, 200, 150, 120, 100, 10), 2, False),
        ((64, 96, 80, 80, 60, 40, 30, 10), 4, True),
        ((32, 40, 20, 4), 1, False),
    ],
)
def test_compact_program_times_like_dense(layers, chips, recurrent):
    cfg, m, pl, st, sp, lab = _step(layers, chips, recurrent)
    res = train_step(st, sp, lab, per_step_counters=True)
    dense = build_step_program(cfg, pl, res.counters, m)
    comp = build_step_program(cfg, pl, res.counters, m, form="compact")
    assert isinstance(comp, CompactProgram)
    # nothing of size supersteps x all tiles is kept
    assert all(
        getattr(comp, f).size < dense.supersteps * dense.total_tiles
        for f in comp.__dataclass_fields__
        if isinstance(getattr(comp, f), np.ndarray)
    )
    a, b = simulate(dense, m), simulate(comp, m)
    assert b.total_s == pytest.approx(a.total_s, rel=1e-9)
    np.testing.assert_allclose(b.phase_s, a.phase_s, rtol=1e-9, atol=1e-15)
    np.testing.assert_array_equal(b.critical_tile, a.critical_tile)
    np.testing.assert_array_equal(b.compute_critical_chip, a.compute_critical_chip)
    np.testing.assert_array_equal(b.exchange_critical_tile, a.exchange_critical_tile)
    np.testing.assert_allclose(b.bytes_onchip, a.bytes_onchip, rtol=1e-6)
    assert b.by_label().keys() == a.by_label().keys()
    for lab_, v in a.by_label().items():
        w = b.by_label()[lab_]
        assert (w["critical_chip"], w["critical_tile"], w["supersteps"]) == (
            v["critical_chip"],
            v["critical_tile"],
            v["supersteps"],
        )
        assert w["time_s"] == pytest.approx(v["time_s"], rel=1e-9)
        assert w["breakdown_s"] == pytest.approx(v["breakdown_s"], rel=1e-9, abs=1e-15)
    np.testing.assert_array_equal(label_tile_cycles(comp), label_tile_cycles(dense))
    tiles = (1, m.total_tiles - 1, int(pl.tile_of_neuron[-1][0]))
    da, db = ProgramDigest.of(dense, tiles), ProgramDigest.of(comp, tiles)
    np.testing.assert_array_equal(db.tile_cycles, da.tile_cycles)
    np.testing.assert_allclose(db.work_cycles, da.work_cycles, rtol=1e-12)
    np.testing.assert_allclose(db.onchip_bytes, da.onchip_bytes, rtol=1e-6)


def test_compact_program_carries_no_machine_and_times_like_dense_on_another():
    """Issue 24: a compact program keeps chip peaks, not a fabric's times, so it can be timed on
    another machine of the same shape, with the same result as the dense program there."""
    cfg, m, pl, st, sp, lab = _step((64, 200, 150, 120, 100, 10), 2)
    comp = retime(None, cfg, pl, m).program
    assert not hasattr(comp, "machine_name")
    other = load_machine("gc200", 2)
    from tilesim.models.snn.step.counters import count_work
    from tilesim.models.snn.training.activity import fixed_activity

    dense = build_step_program(cfg, pl, count_work(fixed_activity(cfg), pl, per_step=True), m)
    assert simulate(comp, other).total_s == pytest.approx(simulate(dense, other).total_s, rel=1e-12)
    assert simulate(comp, other).total_s != simulate(comp, m).total_s  # another clock, another time


def test_retime_fixed_is_compact_and_equal():
    cfg, m, pl, *_ = _step((64, 200, 150, 120, 100, 10), 2)
    p = retime(None, cfg, pl, m)
    from tilesim.models.snn.step.counters import count_work
    from tilesim.models.snn.training.activity import fixed_activity

    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    dense = simulate(build_step_program(cfg, pl, counters, m), m)
    assert isinstance(p.program, CompactProgram)
    assert p.step_s == pytest.approx(dense.total_s, rel=1e-9)


@pytest.mark.parametrize("optimizer,recurrent", [("adam", False), ("sgd", True)])
def test_fused_update_gives_the_weights_of_the_two_pass_update(optimizer, recurrent):
    cfg, m, pl, st, sp, lab = _step((32, 40, 20, 4), 1, recurrent, optimizer)
    st2 = init_network(cfg, pl)
    for _ in range(2):
        r1 = train_step(st, sp, lab)
        r2 = compute_gradients(st2, sp, lab)
        apply_gradients(st2, *r2.grads)
        assert r1.loss == r2.loss and r1.grads is None
    assert st.step == st2.step == 2
    for a, b in zip(st.W + [v for v in st.V if v is not None], st2.W + [v for v in st2.V if v is not None]):
        np.testing.assert_array_equal(a, b)


def test_host_memory_estimate_parts():
    cfg = NetworkConfig(layers=(700, 4000, 4000, 20), batch=24, timesteps=10, optimizer="adam")
    est = estimate_host_memory(cfg, load_machine("bow", 1))
    parts = dict(est.parts)
    w = 4.0 * (700 * 4000 + 4000 * 4000 + 4000 * 20)
    assert parts["weights"] == w and parts["optimizer slots"] == 2 * w
    assert parts["gradients"] == 4.0 * 4000 * 4000  # one layer at a time
    sgd = estimate_host_memory(
        NetworkConfig(layers=(700, 4000, 4000, 20), batch=24, timesteps=10, optimizer="sgd"), load_machine("bow", 1)
    )
    assert dict(sgd.parts)["optimizer slots"] == 0
    with pytest.raises(
        ConfigError, match=r"host memory .* GB of memory estimated \(largest part: optimizer slots.*available"
    ):
        check_host_memory(est, available=est.total_bytes - 1)
    check_host_memory(est, available=est.total_bytes + 1)


def test_a_run_that_cannot_fit_is_refused_at_once():
    """~100 GB of weights: one line naming estimate, availability, largest part and fix; exit 2, < 5 s."""
    t0 = time.perf_counter()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilesim",
            "run",
            "--layers",
            "700-160000-160000-20",
            "--chips",
            "16",
            "--neurons-per-tile",
            "8",
            "--steps",
            "1",
            "--optimizer",
            "sgd",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    wall = time.perf_counter() - t0
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.strip().splitlines() if x]
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert "GB of memory estimated" in lines[0] and "available" in lines[0] and "weights" in lines[0], lines[0]
    assert "use --activity fixed" in lines[0], lines[0]  # the timing-only run the guard suggests
    assert wall < 5.0


def test_init_weights_are_numpy_uniform_bit_for_bit():
    """The scratch-buffer initialisation draws exactly rng.uniform(-a, a) + 0.001 in float32."""
    import math

    from tilesim.models.snn.training.network import init_weights

    cfg = NetworkConfig(layers=(32, 40, 20, 4), recurrent=True, max_activity=0.1)
    W, V = init_weights(cfg)
    rng = np.random.default_rng(cfg.seed)
    for l, (n_in, n) in enumerate(zip(cfg.layers, cfg.layers[1:])):
        a = math.sqrt(6.0 / n_in) * cfg.weight_mul
        np.testing.assert_array_equal(W[l], (rng.uniform(-a, a, (n_in, n)) + 0.001).astype(np.float32))
        a = math.sqrt(6.0 / n) * cfg.weight_mul
        np.testing.assert_array_equal(V[l], (rng.uniform(-a, a, (n, n)) + 0.001).astype(np.float32))


def test_trace_of_a_big_step_is_bounded_and_keeps_the_critical_chip():
    """Above the slice budget only the critical chips keep per-superstep phases; the other chips
    get one slice per run of one label, covering the same time."""
    from tilesim.outputs.trace import detail_chips, trace_events

    cfg, m, pl, *_ = _step((64, 96, 80, 80, 60, 40, 30, 10), 4)
    p = retime(None, cfg, pl, m)
    full = trace_events(p.result, p.program)
    S = p.result.supersteps
    small = trace_events(p.result, p.program, max_slices=4 * S)
    keep = detail_chips(p.result, S, 4 * S)
    assert len(keep) == 1 and small["otherData"]["chips_with_phase_slices"] == list(keep)
    crit = int(np.bincount(p.result.compute_critical_chip, weights=p.result.time_s).argmax())
    assert keep == (crit,)
    x_full = [e for e in full["traceEvents"] if e["ph"] == "X" and e.get("cat") != "tile"]
    x_small = [e for e in small["traceEvents"] if e["ph"] == "X" and e.get("cat") != "tile"]
    assert len(x_small) < len(x_full) / 2
    for c in range(m.chips):
        mine = [e for e in x_small if e["pid"] == c]
        assert mine, c
        end = max(e["ts"] + e["dur"] for e in mine)
        assert end == pytest.approx(max(e["ts"] + e["dur"] for e in x_full if e["pid"] == c), rel=1e-9)


def test_racks_beyond_64_chips_are_joined_by_gw_links():
    """A Bow Pod64 is one IPU-Link ladder; 128 chips are two such racks joined by GW-Links at each
    IPU-Machine; a flow between racks is bound by the GW-Link (12.5 GB/s) rather than the IPU-Links."""
    from dataclasses import replace

    from tilesim.engine.timeline import Flow, fluid_batch
    from tilesim.machine.fabric import LadderLinks

    m64 = load_machine("bow", 64)
    one = replace(m64, system=replace(m64.system, chips_per_rack=0))
    a, b = LadderLinks(m64), LadderLinks(one)
    assert a.bw == b.bw and all(a.route(i, j) == b.route(i, j) for i in range(0, 64, 7) for j in range(0, 64, 5))
    m = load_machine("bow", 128)
    links = LadderLinks(m)
    r = links.route(5, 64 + 40)
    assert r[0] == ("gw", 1, 0, 1) and all(g[0] != "gw" for g in r[1:])
    assert links.route(64 + 40, 5)[0] == ("gw", 10, 1, 0)
    nbytes = 1e6
    done, _ = fluid_batch((Flow(5, 64 + 40, nbytes),), links)
    gw = m.system.gw_link_bytes_per_s * m.system.link_efficiency / m.clock_hz
    assert done[0] == pytest.approx(nbytes / gw + links.latency_cycles * len(r))
    with pytest.raises(ConfigError, match="chips_per_rack"):
        replace(m.system, chips_per_rack=6)


def test_small_layers_run_on_one_thread_with_the_same_result():
    """Below PARALLEL_MIN_ENTRIES per layer the step runs its kernels on one thread (the thread
    count is restored after); gradients are bit-identical to every thread's."""
    import numba

    from tilesim.models.snn.kernels import lif as K
    from tilesim.models.snn.training.network import _compute_gradients

    cfg, m, pl, st, sp, lab = _step((64, 200, 150, 120, 100, 10), 1, True, "sgd")
    before = numba.get_num_threads()
    seen = []
    orig = K.lif_forward_recurrent

    def spy(*a, **k):
        seen.append(numba.get_num_threads())
        return orig(*a, **k)

    K.lif_forward_recurrent = spy
    try:
        r1 = compute_gradients(st, sp, lab)
    finally:
        K.lif_forward_recurrent = orig
    assert seen and set(seen) == {1} and numba.get_num_threads() == before
    st2 = init_network(cfg, pl)
    r2 = _compute_gradients(st2, sp, lab)  # every thread
    for a, b in zip(
        r1.grads[0] + [v for v in r1.grads[1] if v is not None], r2.grads[0] + [v for v in r2.grads[1] if v is not None]
    ):
        np.testing.assert_array_equal(a, b)


def test_fixed_activity_host_memory_leaves_out_the_float_math():
    """A 64-chip network whose weights cannot fit is allowed at fixed activity (issue 15)."""
    kw = dict(layers=(700, 160000, 160000, 20), batch=8, timesteps=10, optimizer="sgd")
    m = load_machine("gc200", 64)
    natural = estimate_host_memory(NetworkConfig(**kw), m)
    fixed = estimate_host_memory(NetworkConfig(**kw, activity="fixed"), m)
    for part in ("weights", "gradients", "optimizer slots", "state sequences"):
        assert dict(fixed.parts)[part] == 0.0, part
    assert dict(fixed.parts)["program"] == dict(natural.parts)["program"]
    limit = 10e9
    assert natural.total_bytes > limit > fixed.total_bytes
    with pytest.raises(ConfigError, match=r"use --activity fixed") as e:
        check_host_memory(natural, available=limit)
    assert "retime" not in str(e.value) and "\n" not in str(e.value)
    check_host_memory(fixed, available=limit)
    with pytest.raises(ConfigError) as e:
        check_host_memory(fixed, available=fixed.total_bytes - 1)
    assert "--activity fixed" not in str(e.value)  # already fixed: the fix is elsewhere


def test_compact_build_reduces_only_the_rows_a_chip_works_in(monkeypatch):
    """Issue 15: a chip's rows are the slots it has calls in, not the whole program's supersteps
    (which grow with the layer count, so with the chips), and the times stay those of the dense form."""
    from tilesim.program import TileRows

    cfg, m, pl, *_ = _step((64, *(200,) * 24, 10), 4)
    dense = simulate(retime(None, cfg, pl, m).program, m)
    reduced, real = [], TileRows.peaks
    monkeypatch.setattr(TileRows, "peaks", lambda rows: reduced.append(rows.compute.shape[0]) or real(rows))
    p = retime(None, cfg, pl, m)
    per_chip = reduced[-m.chips :]  # one reduction per chip, in chip order
    assert np.median(per_chip) < p.program.supersteps / 2, per_chip
    assert p.step_s == dense.total_s
    from tilesim.models.snn.step.counters import count_work
    from tilesim.models.snn.training.activity import fixed_activity

    full = build_step_program(cfg, pl, count_work(fixed_activity(cfg), pl, per_step=True), m)
    np.testing.assert_array_equal(label_tile_cycles(p.program), label_tile_cycles(full))
    assert p.step_s == pytest.approx(simulate(full, m).total_s, rel=1e-9)
