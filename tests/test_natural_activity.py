"""Issue 50 part 1: is the §4.4 "natural activity" network alive, and does the run say when it is not?

The authors' §4.4 configuration (``weak_config``: weight_mul 2, ϑ1 1, α 0.95, ϑ2 0.9, T 10, input cap 48;
``jrfinkbeiner/graphcore_snn`` ``runfile_multi_ipu.sh`` / ``benchmarking_script.py``) goes silent past its
first layers: on SHD-shaped input after layer 1, with the input cap full in every bin after layer 3–4
(the drive), and past layer T whatever the drive (one step of delay per layer). A hidden layer beyond the
first that emits no spike over a step is the ``silent_layer`` finding."""

from __future__ import annotations

import numpy as np

from tilesim.models.snn.training import data as D
from tilesim.models.snn.training.diagnose import LayerStats, StepRecord, check_silent, diagnose
from tilesim.models.snn.training.network import NetworkConfig, init_network, train_step


def _stats(layer, spikes, grad_only, neurons=10, cap=4):
    return LayerStats(layer, neurons, cap, 0.9, spikes, spikes + grad_only, spikes, spikes + grad_only, 0.0)


def _rec(step, per_layer):
    return StepRecord(step, 1.0 - 0.1 * step, 0.5, tuple(_stats(i, s, g) for i, (s, g) in enumerate(per_layer)))


def test_a_silent_hidden_layer_is_named_with_its_steps_reason_and_fix():
    """Hand toy, 4 neuron layers over 3 steps: layer 2 keeps 0.5 gradient-only entries but no spike in
    step 1 (so it is not *dead*); the finding names layer 2 (index 1), step 1 only, 1 of 3 steps, the
    spikes of layer 1 below it (0.250) and the drive fix. The same history with layer 2 spiking in
    every step and the output never spiking (normal for an untrained output) gives no finding."""
    alive = [(1.0, 0.0), (0.5, 0.1), (0.25, 0.1), (0.0, 0.0)]
    silent = [(0.25, 0.0), (0.0, 0.5), (0.0, 0.1), (0.0, 0.0)]
    hist = [_rec(0, alive), _rec(1, silent), _rec(2, alive)]
    f = check_silent(hist)
    assert f is not None and f.kind == "silent_layer" and f.layer == 1 and f.steps == (1, 1)
    assert "layer 2 (10 neurons, cap 4) emitted no spike in 1 of 3 step(s)" in f.message
    assert "0.500 gradient-only" in f.message and "kept 0.250 spikes" in f.message
    assert "weight_mul" in f.fix
    assert [x.kind for x in diagnose(hist)] == ["silent_layer"]
    ok = [_rec(k, alive) for k in range(3)]
    assert check_silent(ok) is None and diagnose(ok) == ()


def test_a_layer_past_T_is_silent_by_the_delay_and_the_fix_says_T():
    """Layer 4 (index 3) of a 5-layer network at T 3 first hears the data at step 3, after the last step:
    the reason is the delay and the fix asks for T ≥ 13 (index + 10)."""
    cfg = NetworkConfig("10-10-10-10-10-3", timesteps=3, max_activity=0.5)
    per = [(1.0, 0.0), (1.0, 0.0), (1.0, 0.0), (0.0, 0.0), (0.0, 0.0)]
    f = check_silent([_rec(0, per)], cfg)
    assert f.layer == 3 and "first hears the data at step 3, after the last of T = 3" in f.message
    assert "T = 13" in f.fix


def test_a_deep_toy_network_spikes_up_to_layer_T_and_is_silent_above_it():
    """A real step of 40-40×12-3 at T 10 with strong weights (weight_mul 8) and 20 input channels in every
    bin: layers 1–10 spike, layers 11 and 12 cannot (one step of delay per layer, as the authors' loopFwd
    copies the previous step's list); the finding names layer 11 and the delay."""
    cfg = NetworkConfig(
        "40-" + "-".join(["40"] * 12) + "-3",
        batch=4,
        timesteps=10,
        max_activity=0.5,
        input_cap=20,
        weight_mul=8.0,
        second_threshold_schedule=None,
        optimizer="sgd",
    )
    x = D.input_at_cap(10, 4, 40, 20, np.random.default_rng(0))
    res = train_step(init_network(cfg), x, np.arange(4) % 3)
    spikes = [s.spikes for s in res.layer_stats]
    assert all(s > 0 for s in spikes[:10]), spikes
    assert spikes[10] == spikes[11] == 0, spikes
    f = check_silent([StepRecord.from_result(0, res)], cfg)
    assert f.layer == 10 and "after the last of T = 10" in f.message


def _authors_one_chip():
    from experiments.s_common import weak_config

    return weak_config("shd", 2, 1)  # 700-982-980-980-20 at T 10, B 24: the authors' §4.4 network on 1 IPU


def test_the_authors_network_is_silent_past_layer_1_on_shd_shaped_input_and_past_3_at_the_input_cap():
    """The §4.4 network of one chip (npt 2), initial weights, one step. SHD-shaped input (≈ 8 channels per
    bin): layer 1 keeps ≈ 3 spikes per sample and step (6 % of its cap 48), layer 2 none — the finding names
    layer 2 and the drive. With the input cap full in every bin (the most the authors' loader can deliver)
    layers 1–3 spike, each fewer than the one below (41 → 23 → 7): the gain per layer is below 1, so a
    deeper network goes silent from layer 4–5 whatever SHD's rate is."""
    from experiments.s_common import DATASETS, dataset_for

    cfg = _authors_one_chip()
    assert (cfg.weight_mul, cfg.second_threshold, cfg.timesteps, cfg.input_cap) == (2.0, 0.9, 10, 48)
    ds = dataset_for("shd", cfg.batch, DATASETS["shd"].n_inputs)
    x, y = next(ds.batches(cfg.batch, cfg.timesteps, cfg.input_cap, np.random.default_rng(1)))
    res = train_step(init_network(cfg), x, y)
    s = [st.spikes for st in res.layer_stats]
    assert 1.0 < s[0] < 0.1 * 48 and s[1] == 0, s
    f = check_silent([StepRecord.from_result(0, res)], cfg)
    assert f.layer == 1 and "the layer below (layer 1) kept" in f.message
    cap = D.input_at_cap(cfg.timesteps, cfg.batch, 700, cfg.input_cap, np.random.default_rng(2))
    s = [st.spikes for st in train_step(init_network(cfg), cap, y).layer_stats]
    assert s[0] > s[1] > s[2] > 0, s
    assert s[2] < 0.25 * s[0], s


def test_the_natural_table_prints_per_layer_spikes_and_gradient_entries():
    """One point of ``s5_s6_natural`` (1 chip, npt 2, B 24): a natural row, a row at the input cap and the
    fixed row; the natural rows carry per-layer spikes and gradient-only entries and the lowest silent
    layer, and the summary prints them per layer."""
    from experiments import s5_s6_natural as S

    rows = S._efficiency(S._point(2, 24, 1, {}))
    nat, cap, fix = rows
    assert [r["activity"] for r in rows] == ["natural", "natural_cap", "fixed"]
    assert nat["layer_spikes"].endswith("/0×3") and nat["silent_from"] == 2 and nat["layers_with_spikes"] == 1
    assert len(cap["layer_gradient_only"].split("/")) == 4 and cap["layers_with_spikes"] == 3
    assert fix["layer_spikes"] == "" and fix["cap_fill"] == 1.0
    text = S.summary(rows)
    assert "per-layer activity" in text and "silent from layer 2 (drive)" in text


def test_real_shd_is_binned_from_each_samples_first_event(monkeypatch):
    """The authors' loader bins from ``t_start = times[0]`` (``events_to_sparse_tensors``): 24 samples whose
    events start at 200 ms give an empty 10-step window from 0 ms and a full one from the first event; the
    experiment's ``--data-root`` path reads tonic's SHD (here a stand-in) through ``from_first_event``."""
    from experiments import s5_s6_natural as S

    rng = np.random.default_rng(3)
    samples = tuple(
        (rng.integers(0, 700, 400).astype(np.int32), np.sort(rng.uniform(200.0, 240.0, 400))) for _ in range(24)
    )
    ds = D.EventDataset("shd", 700, 20, samples + ((np.zeros(0, np.int32), np.zeros(0)),), np.arange(25) % 20)
    moved = D.from_first_event(ds)
    assert all(t[0] == 0.0 and np.allclose(np.diff(t), np.diff(t0)) for (_, t), (_, t0) in zip(moved.samples, samples))
    assert moved.samples[-1][1].size == 0
    raw = D.events_to_input_list(ds.samples[:24], 10, 48, np.random.default_rng(0), n_channels=700)
    new = D.events_to_input_list(moved.samples[:24], 10, 48, np.random.default_rng(0), n_channels=700)
    assert raw.counts.sum() == 0 and new.counts[..., 0].mean() > 5
    monkeypatch.setattr(D, "read_tonic", lambda name, root, limit=None: D.EventDataset(*_head(ds, limit)))
    monkeypatch.setattr(S, "DATA_ROOT", "/nowhere")
    nat = S._point(2, 24, 1, {})[0]
    assert nat["input_per_bin"] > 5  # binned from the first event (0 from the recording's start)


def _head(ds, n):
    return ds.name, ds.n_channels, ds.n_classes, ds.samples[:n], ds.labels[:n]
