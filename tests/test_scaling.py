"""Issues 17 and 25: named structural assumptions of the SNN step, the per-epoch host round trip of the
trainable state (its fitted or documented rate), and ``tilesim scaling`` (weak/strong efficiency with the
structural band)."""

import json
import time

import numpy as np
import pytest

from tilesim.cli import main
from tilesim.engine.events import simulate
from tilesim.errors import ConfigError
from tilesim.machine.description import load_machine
from tilesim.models.snn.commands.scaling import ScalingRecipe, recipe_layers, scaling_study
from tilesim.models.snn.placement.fit import place
from tilesim.models.snn.step.counters import count_work
from tilesim.models.snn.step.structure import (
    D2H_BYTES_PER_S,
    DEFAULT_STRUCTURE,
    H2D_BYTES_PER_S,
    StepStructure,
    flipped,
)
from tilesim.models.snn.step.table import HOST_LABELS, PHASE_LABELS, step_shape
from tilesim.models.snn.step.timing import build_step_program, default_costs
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.program import SYNC_ALL, SYNC_CHIP


def _two_chip_step(structure, layers="64-4000-4000-4000-4000-4", chips=2, costs=None):
    cfg = NetworkConfig(layers=layers, batch=4, timesteps=6, input_cap=8, max_activity=0.2, activity="fixed")
    m = load_machine("bow", chips)
    pl = place(cfg, m, 8, "contiguous", "report")[0]
    cnt = count_work(fixed_activity(cfg), pl, per_step=True)
    prog = build_step_program(cfg, pl, cnt, m, costs, structure=structure)
    return cfg, m, prog, simulate(prog, m).book_as_host(HOST_LABELS)


def test_structure_values_are_checked_and_flip():
    with pytest.raises(ConfigError, match="sync_scope = 'both'"):
        StepStructure(sync_scope="both")
    with pytest.raises(ConfigError, match="executions_per_epoch"):
        StepStructure(executions_per_epoch=0)
    assert DEFAULT_STRUCTURE.sync_scope == "chip" and DEFAULT_STRUCTURE.copies == "separate"
    assert flipped(DEFAULT_STRUCTURE, "sync_scope").sync_scope == "all"
    assert flipped(DEFAULT_STRUCTURE, "copies").copies == "merged"


def test_chip_scope_syncs_all_chips_only_where_data_crosses():
    _, _, prog, res = _two_chip_step(StepStructure(sync_scope="chip"))
    _, _, prog_all, res_all = _two_chip_step(StepStructure(sync_scope="all"))
    assert (prog_all.sync_scope == SYNC_ALL).all()
    glob = prog.sync_scope == SYNC_ALL
    assert glob.any() and (prog.sync_scope[~glob] == SYNC_CHIP).all()
    loss = int(np.flatnonzero(prog.label_id == prog.labels.index("loss"))[0])  # + the pipeline's stage switches
    red = np.flatnonzero(prog.label_id == prog.labels.index("bwd: reduce input grad"))
    stage1 = set(red[0::2].tolist())  # + the input-gradient reduction's stage 1, one compute set on both chips
    assert set(prog.flow_step.tolist()) | {loss} | stage1 == set(np.flatnonzero(glob).tolist())  # and only they
    assert res.total_s < res_all.total_s
    assert res.breakdown_s()["sync"] < res_all.breakdown_s()["sync"]


def test_merged_copies_make_one_replicate_exchange_per_time_step():
    T, L = 6, 5
    assert step_shape(T, L).supersteps - step_shape(T, L, True).supersteps == (L - 1) * T
    _, _, p_sep, r_sep = _two_chip_step(StepStructure(copies="separate"))
    _, _, p_mer, r_mer = _two_chip_step(StepStructure(copies="merged"))
    assert p_mer.supersteps == p_sep.supersteps - (L - 1) * T
    assert r_mer.total_s < r_sep.total_s
    # the same bytes cross chips either way
    assert p_mer.flow_bytes.sum() == pytest.approx(p_sep.flow_bytes.sum())


def _host_cycles(structure, layers="64-40-40-40-40-4", chips=1, steps_per_execution=52, optimizer="adam", costs=None):
    """Per chip, the host copy's cycles per step, the network's weights and its placement."""
    cfg = NetworkConfig(
        layers=layers, batch=4, timesteps=6, input_cap=8, max_activity=0.2, activity="fixed", optimizer=optimizer
    )
    m = load_machine("bow", chips)
    pl = place(cfg, m, 8, "contiguous", "report")[0]
    cnt = count_work(fixed_activity(cfg), pl, per_step=True)
    prog = build_step_program(
        cfg, pl, cnt, m, costs or default_costs(), steps_per_execution=steps_per_execution, structure=structure
    )
    i = prog.labels.index(HOST_LABELS[0])
    rows = prog.compute_cycles[prog.label_id == i]
    per_chip = rows.reshape(rows.shape[0], chips, -1).max(axis=2).sum(axis=0)
    weights = sum(a * b for a, b in zip(cfg.layers, cfg.layers[1:]))
    return per_chip, weights, pl


def test_host_round_trip_moves_weights_and_optimizer_slots_at_its_rate():
    # graphcore/tensorflow: Keras's per-epoch metric reset makes the executor move every variable the
    # device updated to the host and every argument back: 4 (1 + slots) bytes per weight each way
    m, spe = load_machine("bow"), 52
    ns = default_costs().coefficients["host_copy_ns_per_byte"]
    (adam,), weights, _ = _host_cycles(StepStructure())
    assert adam == pytest.approx(m.clock_hz * 2 * 12 * weights * ns * 1e-9 / spe, rel=1e-5)
    (sgd,), _, _ = _host_cycles(StepStructure(), optimizer="sgd")
    assert sgd == pytest.approx(adam / 3, rel=1e-5)  # no optimizer slots to move
    (one,), _, _ = _host_cycles(StepStructure(host_direction="one_way"))
    assert adam == pytest.approx(2 * one, rel=1e-5)
    (doc,), _, _ = _host_cycles(StepStructure(host_rate="documented"))
    want = m.clock_hz * 12 * weights * (1 / D2H_BYTES_PER_S + 1 / H2D_BYTES_PER_S) / spe
    assert doc == pytest.approx(want, rel=1e-5) and doc < adam  # the documented rate is the fast end
    (per_exec,), _, _ = _host_cycles(StepStructure(host_transfer="per_execution", executions_per_epoch=4))
    (per_epoch,), _, _ = _host_cycles(StepStructure(host_transfer="per_epoch", executions_per_epoch=4))
    assert per_exec == pytest.approx(4 * per_epoch, rel=1e-5)
    (long,), _, _ = _host_cycles(StepStructure(), steps_per_execution=4 * spe)
    assert long == pytest.approx(adam / 4, rel=1e-5)  # once per epoch: a longer epoch amortises it


def test_no_residual_is_booked_and_the_host_rate_is_fitted_within_its_bounds():
    from tilesim.models.snn.calibration.calibrate import BOUNDS

    coef = default_costs().coefficients
    lo, hi = BOUNDS["host_copy_ns_per_byte"]
    assert lo == pytest.approx(1e9 / D2H_BYTES_PER_S) and lo < coef["host_copy_ns_per_byte"] < hi
    assert "epoch_residual_cycles_per_weight" not in coef and not any("unexplained" in p for p in PHASE_LABELS)
    _, _, _, res = _two_chip_step(StepStructure(), "64-40-40-40-40-4", chips=1)
    assert res.breakdown_s()["residual"] == 0 and res.breakdown_s()["host"] > 0


def test_an_old_cost_file_with_the_residual_is_refused(tmp_path):
    from tilesim.machine.costs import CostModel

    old = CostModel("mine", "1", {**default_costs().coefficients, "epoch_residual_cycles_per_weight": 55.0}, {})
    with pytest.raises(ConfigError, match="epoch_residual_cycles_per_weight.*re-run tilesim calibrate"):
        _host_cycles(StepStructure(), costs=old)


def test_run_summary_names_its_structure(tmp_path):
    from tilesim.models.snn.commands.cli import format_run, write_run_outputs
    from tilesim.models.snn.commands.options import RunOptions
    from tilesim.models.snn.commands.run import run_training

    summary = run_training(
        RunOptions(layers=(32, 16, 4), batch=4, timesteps=8, steps=1, max_activity=0.25, copies="merged")
    )
    s = summary.to_dict()
    assert s["structure"]["copies"] == "merged" and s["structure"]["sync_scope"] == "chip"
    assert "copies merged" in format_run(s)
    write_run_outputs(tmp_path, summary)
    assert json.loads((tmp_path / "summary.json").read_text())["structure"]["copies"] == "merged"
    assert "copies `merged`" in (tmp_path / "summary.md").read_text()


def test_scaling_study_weak_and_strong():
    r = ScalingRecipe(neurons_per_tile=2, batch=24)
    from experiments.s_common import paper_layers

    for d, npt, c in (("shd", 2, 1), ("shd", 8, 16), ("nmnist", 4, 2)):
        assert recipe_layers(ScalingRecipe(dataset=d, neurons_per_tile=npt), c) == paper_layers(d, npt, c)
    weak = scaling_study(r, (1, 2), "weak")
    assert weak.points[0].efficiency == pytest.approx(1.0)
    p = weak.points[1]
    assert 0 < p.efficiency < 1 and set(p.band) == {
        "sync_scope",
        "copies",
        "host_transfer",
        "host_direction",
        "host_rate",
        "host_shared",
    }
    assert p.band["sync_scope"] < p.efficiency  # syncing every chip for every superstep costs more
    assert sum(p.split_s.values()) == pytest.approx(p.step_s, rel=1e-6)
    # the residual is the host copy's fitted excess beyond Graphcore's documented rate (its own row)
    assert p.split_s["host"] > 0 and p.split_s["links"] > 0 and p.split_s["residual"] > 0
    strong = scaling_study(r, (1, 2), "strong", band=False)
    assert strong.points[1].neurons_per_tile == 2 and strong.points[0].neurons_per_tile >= 4
    assert strong.points[0].neurons == strong.points[1].neurons


def test_tilesim_scaling_s5_recipe_16_chips_in_a_minute(tmp_path, capsys):
    t0 = time.perf_counter()
    assert main(["scaling", "--chips", "1,2,4,8,16", "--json", "--out", str(tmp_path)]) == 0
    wall = time.perf_counter() - t0
    d = json.loads(capsys.readouterr().out)
    assert [p["chips"] for p in d["points"]] == [1, 2, 4, 8, 16]
    assert d["points"][-1]["neurons"] == 188_284 and d["structure"]["sync_scope"] == "chip"
    assert (tmp_path / "scaling.png").stat().st_size > 10_000 and (tmp_path / "scaling.json").exists()
    assert wall < 60


def test_tilesim_scaling_bad_input_is_one_line(capsys):
    assert main(["scaling", "--chips", "0,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--chips" in err[0]


# ---- issue 25: the host round trip's axes, the §4.4 executions, the S6 sensitivity table ------------


def test_host_round_trip_per_host_link_waits_for_the_whole_group():
    layers = "64-4000-4000-4000-4000-4"
    own, _, pl = _host_cycles(StepStructure(), layers, chips=2)
    shared, _, _ = _host_cycles(StepStructure(host_shared="host_link"), layers, chips=2)
    assert (own > 0).all() and own[0] != pytest.approx(own[1])  # the chips hold different weights
    assert shared == pytest.approx([own.sum(), own.sum()], rel=1e-5)  # two chips behind one gateway


def test_scaling_recipe_runs_two_executions_of_500_steps_per_epoch():
    from tilesim.models.snn.commands.scaling import PAPER_STEPS_PER_EXECUTION, PAPER_STRUCTURE

    assert (PAPER_STEPS_PER_EXECUTION, PAPER_STRUCTURE.executions_per_epoch) == (500, 2)
    r = ScalingRecipe(neurons_per_tile=2, batch=24)
    epoch = scaling_study(r, (1,), band=False).points[0].split_s["host"]
    per_exec = StepStructure(executions_per_epoch=2, host_transfer="per_execution")
    execution = scaling_study(r, (1,), structure=per_exec, band=False)
    host_input = 1 / 2  # the infeed's share: the same either way; the round trip doubles
    assert execution.points[0].split_s["host"] > (1 + host_input) * epoch


def _s6_row(flips, npt_signs, batch_signs=((1,),)):
    """A constructed S6 row: per batch (24, 384) the signs over npt, one per coefficient set."""
    from tilesim.models.snn.commands.scaling import SensitivityRow

    return SensitivityRow(
        tuple(flips), "x", {}, {}, dict(zip((24, 384), npt_signs)), dict(zip((2, 8), batch_signs * 2))
    )


def test_s6_verdict_reproduced_only_if_every_combination_and_coefficient_set_rises():
    from tilesim.models.snn.commands.scaling import REPRODUCED, _verdict

    rows = [_s6_row((), ((1, 1), (1, 1))), _s6_row(("copies",), ((1, 1), (1, 1)))]
    assert _verdict(rows, "npt") == REPRODUCED == "reproduced by the model"


def test_s6_verdict_without_a_measurement_is_never_refuted():
    """No row rises (falling or flat): "not reproduced by the model" — the model cannot refute a
    measured claim (issue 42)."""
    from tilesim.models.snn.commands.scaling import NOT_REPRODUCED, VERDICTS, _verdict

    rows = [_s6_row((), ((-1, -1), (-1, 0))), _s6_row(("sync_scope",), ((-1, -1), (0, 0)))]
    assert _verdict(rows, "npt") == NOT_REPRODUCED == "not reproduced by the model"
    assert not any("refut" in v for v in VERDICTS)


def test_s6_verdict_undetermined_names_the_unknown_whose_switch_changes_the_outcome():
    from tilesim.models.snn.commands.scaling import _verdict

    rows = [
        _s6_row((), ((-1,), (-1,))),
        _s6_row(("copies",), ((1,), (1,))),  # switching copies alone turns the assumed row
        _s6_row(("host_rate",), ((-1,), (-1,))),
        _s6_row(("copies", "host_rate"), ((1,), (1,))),
    ]
    v = _verdict(rows, "npt")
    assert v.startswith("undetermined: copies decides it") and "host_rate" not in v
    assert "PopVision" in v  # names the measurement that would settle it


def test_s6_verdict_undetermined_by_the_coefficients_band_alone():
    from tilesim.models.snn.commands.scaling import _verdict

    rows = [_s6_row((), ((1, -1), (1, 1))), _s6_row(("copies",), ((1, 1), (1, 1)))]
    v = _verdict(rows, "npt")
    assert v.startswith("undetermined: the coefficients' leave-one-out band decides whether E rises in 1 of 2")
    assert "decides it" not in v


def test_s6_rows_are_every_combination_of_the_unknowns():
    """2^k structures, not single flips: every subset of the unknowns switched, each once, the assumed first."""
    from tilesim.models.snn.commands.scaling import ASSUMPTIONS, PAPER_STRUCTURE, combinations, flips_of

    combos = combinations(PAPER_STRUCTURE)
    assert len(combos) == 2 ** len(ASSUMPTIONS) == 64 and len(set(combos)) == 64
    assert combos[0] == PAPER_STRUCTURE
    assert {frozenset(flips_of(c)) for c in combos} == {
        frozenset(n for i, n in enumerate(ASSUMPTIONS) if m >> i & 1) for m in range(64)
    }
    assert all(c.executions_per_epoch == PAPER_STRUCTURE.executions_per_epoch for c in combos)


def test_one_chip_timing_ignores_the_options_that_cannot_matter_there():
    """On one chip sync scope and host sharing change nothing: the table times those once."""
    from tilesim.models.snn.commands.scaling import _time, recipe_layers

    r = ScalingRecipe(neurons_per_tile=2, batch=24)
    lay = recipe_layers(r, 1)
    base = _time(r, lay, 1, 2, StepStructure(), {})
    other = StepStructure(sync_scope="all", host_shared="host_link")
    from tilesim.machine.description import load_machine
    from tilesim.models.snn.commands.scaling import _config
    from tilesim.models.snn.placement.fit import place
    from tilesim.models.snn.step.retime import retime  # the full path, without the table's shortcut

    m = load_machine("bow", 1)
    cfg = _config(r, lay)
    pl = place(cfg, m, 2, "contiguous", "report")[0]
    full = retime(None, cfg, pl, m, steps_per_execution=r.steps_per_execution, structure=other).step_s
    assert base[0] == pytest.approx(full, rel=1e-12)


@pytest.mark.slow
def test_sensitivity_table_covers_every_combination(tmp_path, capsys):
    from tilesim.models.snn.commands.scaling import VERDICTS, coefficient_sets, sensitivity_table

    sets = coefficient_sets()
    assert len(sets) > 2 and sets[0].name == "snn-calibrated"  # the fit, then distinct leave-one-out refits
    t = sensitivity_table(ScalingRecipe(), chips=2, npts=(2, 8), batches=(24, 96), costs=sets[:2])
    assert len(t.rows) == 64 and t.rows[0].flips == () and t.coefficient_sets == 2
    for r in t.rows:
        assert set(r.efficiency) == {(2, 24), (2, 96), (8, 24), (8, 96)}
        assert all(0 < e <= 1.5 for e in r.efficiency.values())
        assert all(lo <= r.efficiency[k] <= hi for k, (lo, hi) in r.band.items())
        assert all(len(v) == 2 for v in r.sign_npt.values())
    assert t.verdict_npt.split(":")[0] in VERDICTS and t.verdict_batch.split(":")[0] in VERDICTS
    assert main(["scaling", "--chips", "1,2", "--no-band", "--sensitivity", "--out", str(tmp_path)]) == 0
    md = (tmp_path / "sensitivity.md").read_text()
    assert "S6 second half" in md and "refuted" not in md and md.count("\n| ") == 65
    assert json.loads((tmp_path / "sensitivity.json").read_text())["chips"] == 2


def test_two_chip_structure_counted_by_hand():
    """The authors' multi-IPU structure on 2 chips (layers on chips 0, 0, 1, 1, 1; T = 6): the
    input-gradient reduction's stage 1 as one compute set on both chips, then one reduceMany per chip,
    one after another, in every backward time step (issue 42); 2 pipeline stage switches
    (stage 0 → 1 forward, 1 → 0 backward) on the loss superstep, each a sync of both chips and an
    exchange set-up. On one chip neither exists."""
    from tilesim.models.snn.step.timing import pipeline_switches

    T = 6
    cfg, m, prog, _ = _two_chip_step(StepStructure())
    TPC, sync_all, sync_chip, xfix = m.tiles_per_chip, m.group_sync_cycles(2), m.chip.sync_cycles, 100
    assert m.chip.exchange_fixed_cycles == xfix
    red = np.flatnonzero(prog.label_id == prog.labels.index("bwd: reduce input grad"))
    assert red.size == 2 * T  # stage 1 with chip 0's reduceMany, then chip 1's, per backward time step
    comp = prog.compute_cycles[red].reshape(T, 2, 2, TPC).max(axis=3)  # [t, slot, chip]
    assert (comp[:, 0, 0] > 0).all() and (comp[:, 0, 1] > 0).all()  # slot 1: stage 1 on both chips at once
    assert (comp[:, 1, 0] == 0).all() and (comp[:, 1, 1] < 1).all()  # slot 2: chip 1's reduceMany (its sets only)
    assert set(prog.flow_step.tolist()) & set(red.tolist()) <= set(red[1::2].tolist())  # slot grads ride with the last
    assert (prog.sync_scope[red] == SYNC_ALL).all()  # stage 1 spans both chips; the last slot carries link flows
    # the row's 3 compute sets (stage 1, reduceMany's 2): slot 1 folds 2 (chip 0's reduceMany), slot 2 folds 1
    assert prog.sync_extra_cycles[red[0::2]] == pytest.approx([2 * sync_chip] * T)
    assert prog.sync_extra_cycles[red[1::2]] == pytest.approx([1 * sync_chip] * T)

    assert pipeline_switches(2) == 2 and pipeline_switches(1) == 0 and pipeline_switches(16) == 30
    loss = int(np.flatnonzero(prog.label_id == prog.labels.index("loss"))[0])
    folded = 2  # the loss row's 3 compute sets: 2 beyond the row itself, each an own-chip sync
    assert prog.sync_scope[loss] == SYNC_ALL
    assert prog.sync_extra_cycles[loss] == pytest.approx(folded * sync_chip + 2 * sync_all)
    assert prog.exchange_extra_cycles[loss] == pytest.approx(folded * xfix + 2 * xfix)

    _, m1, one, _ = _two_chip_step(StepStructure(), "64-400-400-400-400-4", chips=1)
    assert np.count_nonzero(one.label_id == one.labels.index("bwd: reduce input grad")) == T
    loss1 = int(np.flatnonzero(one.label_id == one.labels.index("loss"))[0])
    assert one.sync_extra_cycles[loss1] == pytest.approx(folded * sync_chip)


def test_stage_one_reduces_of_all_chips_overlap_even_when_every_superstep_syncs_all_chips():
    """Stage 1 of the input-gradient reduction is one compute set across the IPUs
    (``customReduceSparseInpSpikesGrad_stage1``, issue 42): under sync scope "all" the row costs the
    slower chip's stage 1 per time step, not the sum of the chips' (the per-chip serial model before)."""
    _, m, prog, res = _two_chip_step(StepStructure(sync_scope="all"))
    red = np.flatnonzero(prog.label_id == prog.labels.index("bwd: reduce input grad"))
    TPC = m.tiles_per_chip
    per_chip = prog.compute_cycles[red].reshape(-1, 2, 2, TPC).max(axis=3)  # [t, slot, chip]
    overlapped = per_chip.max(axis=2).sum() / m.clock_hz
    serial = per_chip[:, 0, :].sum() / m.clock_hz
    got = res.by_label()["bwd: reduce input grad"]["breakdown_s"]["compute"]
    assert got == pytest.approx(overlapped, rel=1e-5) and got < 0.9 * serial


def test_scaling_picture_legends_never_cover_the_curves():
    """scaling.png's legends covered the curves (issue 39): each panel's legend sits outside its axes and
    inside the picture."""
    import matplotlib.pyplot as plt

    from tilesim.models.snn.outputs.scaling_plot import scaling_figure

    fig = scaling_figure(scaling_study(ScalingRecipe(), (1, 2, 4), "weak"))
    fig.canvas.draw()
    page = fig.bbox
    for ax in fig.axes:
        box, legend = ax.get_window_extent(), ax.get_legend().get_window_extent()
        assert not box.overlaps(legend), ax.get_ylabel()
        assert page.x0 <= legend.x0 and legend.x1 <= page.x1 and page.y0 <= legend.y0 and legend.y1 <= page.y1
    plt.close(fig)
