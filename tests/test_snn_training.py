"""Issue 18: training learns with the default settings, and says so when it cannot.

The must-show run is the issue's command (120-96-64-5, B 16, T 40, caps 20 %, input cap 24, Adam
3e-3, 80 steps, seed 1) through the Python API, with the data set the run command builds
(``batch · min(steps, 20)`` synthetic samples)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.snn.training import data as D
from tilesim.models.snn.training.diagnose import Finding, LayerStats, StepRecord, check_depth, diagnose
from tilesim.models.snn.training.network import (
    NetworkConfig,
    SecondThresholdSchedule,
    compute_gradients,
    init_network,
    train,
)

ISSUE = dict(batch=16, timesteps=40, max_activity=0.2, input_cap=24, optimizer="adam", lr=0.003)
STEPS = 80


def _run(layers, seed, steps=STEPS, **kw):
    cfg = NetworkConfig(layers, seed=seed, **{**ISSUE, **kw})
    ds = D.synthetic(cfg.layers, cfg.batch * min(steps, 20), cfg.timesteps, seed=seed)
    return cfg, train(cfg, ds, steps)


@pytest.mark.slow
@pytest.mark.parametrize("layers, seed", [("120-96-64-5", 1), ("100-64-10", 2), ("50-30-3", 11), ("40-200-3", 7)])
def test_defaults_learn(layers, seed):
    """Last 5 steps' mean loss >= 40 % below the first 5, training accuracy of the last 5 >= 0.6
    (with the old defaults — output ϑ2 0.9, weight_mul 2, no schedule — the issue's run stays at
    ln 5 for all 80 steps)."""
    _, run = _run(layers, seed)
    loss, acc = run.losses, run.accuracies
    assert loss[-5:].mean() <= 0.6 * loss[:5].mean(), (loss[:5], loss[-5:])
    assert acc[-5:].mean() >= 0.6, acc[-5:]
    assert not [f for f in run.findings if f.kind in ("dead_layer", "flat_loss", "too_deep")]


def test_dead_output_is_diagnosed_once_with_layer_activity_theta_and_fix():
    """The issue's failure (output ϑ2 0.9, weight_mul 2.0, constant ϑ2): the output never spikes and
    has no gradient entry, the loss stays at ln 5; one finding each, naming layer, ϑ2 and the fix."""
    _, run = _run(
        "120-96-64-5", 1, steps=12, output_second_threshold=0.9, weight_mul=2.0, second_threshold_schedule=None
    )
    assert np.allclose(run.losses, math.log(5))
    kinds = [f.kind for f in run.findings]
    assert kinds == ["dead_layer", "flat_loss"], kinds
    dead = run.findings[0]
    assert dead.layer == 2 and dead.steps == (0, 11)
    assert "layer 3 (output)" in dead.message and "ϑ2 0.9" in dead.message and "0.000 spikes" in dead.message
    assert "-100" in dead.fix
    assert "ln 5" in run.findings[1].message and "\n" not in dead.message
    assert dead.to_dict()["kind"] == "dead_layer"


def test_schedule_is_the_authors_recurrence_and_steps_use_it():
    sched = SecondThresholdSchedule()
    th = -100.0
    for k in range(30):
        assert sched.value(0.9, k) == pytest.approx(th, abs=1e-9)
        th += 0.5 * (0.9 - th)
    cfg = NetworkConfig("20-12-4", batch=3, timesteps=6, caps=(12, 4), output_second_threshold=0.5)
    assert cfg.second_thresholds_at(0) == (-100.0, -100.0)
    assert cfg.second_thresholds_at(1) == pytest.approx((-49.55, -49.75))
    fixed = cfg.at_step(3)
    assert fixed.second_threshold_schedule is None and fixed.second_thresholds == cfg.second_thresholds_at(3)
    assert NetworkConfig("20-12-4", caps=(2, 2), second_threshold_schedule=None).second_thresholds_at(5) == (
        0.9,
        -100.0,
    )
    # step 0 at ϑ2 −100 with caps = N: every neuron is a list entry; after 40 updates ϑ2 ≈ target
    state = init_network(cfg)
    x = (np.random.default_rng(0).random((6, 3, 20)) < 0.2).astype(np.uint8)
    y = np.array([0, 1, 2])
    st = compute_gradients(state, x, y).layer_stats
    assert [s.second_threshold for s in st] == [-100.0, -100.0]
    assert st[0].entries == 12 and st[1].entries == 4 and st[0].wanted_entries == 12
    state.step = 40
    st = compute_gradients(state, x, y).layer_stats
    assert [s.second_threshold for s in st] == pytest.approx([0.9, 0.5])
    assert st[0].entries < 12
    with pytest.raises(ConfigError, match="rate"):
        SecondThresholdSchedule(rate=0.0)
    with pytest.raises(ConfigError, match="second_threshold_schedule.start"):
        NetworkConfig("20-12-4", caps=(2, 2), second_threshold_schedule=SecondThresholdSchedule(start=2.0))


def test_layer_stats_count_what_the_cap_cut():
    cfg = NetworkConfig(
        "30-40-4",
        batch=4,
        timesteps=10,
        caps=(3, 2),
        weight_mul=8.0,
        second_threshold_schedule=None,
        second_threshold=0.0,
    )
    state = init_network(cfg)
    x = (np.random.default_rng(1).random((10, 4, 30)) < 0.3).astype(np.uint8)
    res = compute_gradients(state, x, np.array([0, 1, 2, 3]))
    for s, lst in zip(res.layer_stats, res.activity.layers):
        assert s.spikes == pytest.approx(lst.counts[..., 0].mean())
        assert s.entries == pytest.approx(lst.counts[..., 1].mean())
        assert s.wanted_entries >= s.entries and s.wanted_spikes >= s.spikes
        assert s.full == pytest.approx(np.mean(lst.counts[..., 0] == s.cap))
    hid = res.layer_stats[0]
    assert hid.cut_entries > 0.5 and hid.wanted_entries > 3  # 3 of 40 kept


def _rec(step, loss, full, spikes, wanted, cap=4):
    s = LayerStats(0, 40, cap, 0.9, spikes, spikes, wanted, wanted * 1.5, full)
    out = LayerStats(1, 5, 2, -100.0, 0.5, 2.0, 0.5, 5.0, 0.0)
    return StepRecord(step, loss, 0.5, (s, out))


def test_saturated_layer_says_how_much_is_cut():
    hist = [_rec(k, 1.0 - 0.05 * k, 1.0, 4.0, 10.0) for k in range(6)]
    (f,) = diagnose(hist)
    assert f.kind == "saturated_layer" and f.layer == 0 and f.steps == (0, 5)
    assert "60 % of its spikes" in f.message and "73 % of its gradient-eligible" in f.message
    assert "max_activity" in f.fix
    assert diagnose([_rec(k, 1.0 - 0.05 * k, 0.5, 3.0, 4.0) for k in range(6)]) == ()  # below the cap: fine
    assert diagnose(hist[:4]) == ()  # not yet `window` steps


def test_too_deep_network_is_named_before_training():
    """193 layers at T 10 (the weak-scaling network): nothing reaches the output; the finding says so
    with the numbers. Functionally: 5 layers at T 4 give exactly ln C whatever the weights."""
    deep = NetworkConfig("700-" + "-".join(["8"] * 192) + "-20", timesteps=10, batch=2, max_activity=0.5)
    f = check_depth(deep)
    assert isinstance(f, Finding) and f.kind == "too_deep"
    assert "193 neuron layers at T = 10" in f.message and "ln 20 = 2.996" in f.message and "step 192" in f.message
    assert check_depth(replace(deep, activity="fixed")) is None
    assert check_depth(NetworkConfig("20-10-10-10-10-5", timesteps=6, max_activity=0.5)) is None
    cfg = NetworkConfig("20-10-10-10-10-5", batch=4, timesteps=4, caps=(10, 10, 10, 10, 5), weight_mul=20.0)
    state = init_network(cfg)
    x = np.ones((4, 4, 20), np.uint8)
    assert compute_gradients(state, x, np.arange(4)).loss == pytest.approx(math.log(5))
    assert diagnose([], cfg)[0].kind == "too_deep"


def test_synthetic_drive_is_a_rate_per_ms():
    """The default template drive does not fall as T grows (events per ms stay put)."""
    rates = []
    for T in (40, 100, 200):
        ds = D.synthetic("100-50-4", 40, T, seed=0, noise_per_ms=0.0)
        rates.append(np.mean([ch.size for ch, _ in ds.samples]) / T)
    assert max(rates) / min(rates) < 1.15, rates
    assert rates[0] == pytest.approx(0.2 * 100 * 0.05 * 0.9, rel=0.15)


def test_activity_chart_is_data_the_core_draws(tmp_path):
    """activity.png is a Chart in the Training section: stored in summary.json, drawn by the core, so `tilesim
    report` redraws it from the same numbers (issue 39: it was the one picture report could not redraw)."""
    from tilesim.models.snn.outputs.activity_chart import activity_chart
    from tilesim.outputs.chart import Chart
    from tilesim.outputs.plots import draw_chart

    hist = [_rec(k, 1.0 - 0.1 * k, 1.0, 4.0 + k, 10.0) for k in range(3)]
    chart = activity_chart([r.to_dict() for r in hist])
    spikes = chart.panels[0].series
    assert spikes[0].values == (4.0, 5.0, 6.0) and spikes[-1].name == "loss" and spikes[-1].right
    assert Chart.from_dict(chart.to_dict()) == chart
    draw_chart(chart, tmp_path / "activity.png")
    assert (tmp_path / "activity.png").stat().st_size > 5000
    with pytest.raises(ConfigError, match="activity"):
        activity_chart([])


ISSUE_RUN = (
    "run --machine gc200 --dataset synthetic --layers 120-96-64-5 --batch 16 --timesteps 40 "
    "--max-activity 0.2 --input-cap 24 --optimizer adam --lr 0.003 --seed 1 --json"
).split()


def _cli(argv, capsys):
    from tilesim.cli import main

    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.mark.slow
def test_the_issue_command_learns_through_the_cli_with_the_defaults(capsys):
    """Issue 18: the command, unchanged, sat at ln 5 for 80 steps (weight_mul 2, output theta2 0.9)."""
    import json

    rc, out, _ = _cli(ISSUE_RUN + ["--steps", "80"], capsys)
    s = json.loads(out)
    first, last = np.mean(s["loss"][:5]), np.mean(s["loss"][-5:])
    assert rc == 0 and last <= 0.6 * first and np.mean(s["accuracy"][-5:]) >= 0.6
    assert s["second_threshold_schedule"] == {"start": -100.0, "rate": 0.5} and s["findings"] == []
    assert len(s["activity"]) == 80 and s["activity"][0]["layers"][0]["second_threshold"] == -100.0


def test_a_dead_run_prints_its_diagnosis_once_and_exits_0(capsys, tmp_path):
    """Issue 18: the dead-on-purpose run (output theta2 0.9, no schedule, the old weight scale) says
    which layer, its activity, its theta2 and the fix, on stderr and in summary.json/summary.md."""
    import json

    argv = ISSUE_RUN + [
        "--steps",
        "8",
        "--output-second-threshold",
        "0.9",
        "--second-threshold-schedule",
        "off",
        "--weight-mul",
        "2",
        "--out",
        str(tmp_path / "run"),
    ]
    rc, out, err = _cli(argv, capsys)
    assert rc == 0
    s = json.loads(out)
    kinds = [f["kind"] for f in s["findings"]]
    assert "dead_layer" in kinds and "flat_loss" in kinds
    dead = s["findings"][kinds.index("dead_layer")]
    assert err.count(dead["message"]) == 1 and "0.9" in dead["message"] and "-100" in dead["fix"]
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "## Training" in md and dead["message"] in md
    assert (tmp_path / "run" / "activity.png").stat().st_size > 0
