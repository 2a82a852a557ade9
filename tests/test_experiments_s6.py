"""Issue 42 parts 4 and 5: the S6 combination table, S5/S6 at natural activity and the falsifiable
predictions, each script in --quick mode (together about a minute of CPU, so marked slow)."""

import pytest
from conftest import run_quick_experiments

SCRIPTS = ["s6_combinations", "s5_s6_natural", "s_predictions"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return run_quick_experiments(tmp_path_factory.mktemp("experiments_s6"), SCRIPTS)


@pytest.mark.slow
def test_s6_combinations_cover_every_combination_with_a_band(outputs):
    from tilesim.models.snn.commands.scaling import ASSUMPTIONS, VERDICTS

    rows = outputs["s6_combinations"]
    combos = {tuple(r[u] for u in ASSUMPTIONS) for r in rows}
    assert len(combos) == 2 ** len(ASSUMPTIONS)
    for r in rows:
        assert float(r["efficiency_lo"]) <= float(r["efficiency"]) <= float(r["efficiency_hi"])
        assert r["verdict_npt"].split(":")[0] in VERDICTS and r["verdict_batch"].split(":")[0] in VERDICTS
        assert "refut" not in r["verdict_npt"] + r["verdict_batch"]
    assert "+" in rows[0]["coefficient_sets"]  # the fit and at least one leave-one-out refit


@pytest.mark.slow
def test_natural_activity_rows_beside_fixed_and_never_slower(outputs):
    rows = outputs["s5_s6_natural"]
    key = {(r["neurons_per_tile"], r["batch"], r["chips"]) for r in rows}
    for k in key:
        nat, fix = (
            next(r for r in rows if (r["neurons_per_tile"], r["batch"], r["chips"]) == k and r["activity"] == a)
            for a in ("natural", "fixed")
        )
        assert float(nat["step_ms"]) <= float(fix["step_ms"])
        assert float(nat["cap_fill"]) < 1.0 == float(fix["cap_fill"])


@pytest.mark.slow
def test_predictions_separate_the_hypotheses(outputs):
    rows = outputs["s_predictions"]

    def at(measurement, setting, hypothesis):
        return next(
            float(r["predicted"])
            for r in rows
            if r["measurement"].startswith(measurement) and r["setting"] == setting and r["hypothesis"] == hypothesis
        )

    from experiments.s_predictions import EITHER, H_BYTES, H_STEP

    # SGD moves 8 bytes per weight, Adam 24: under H1 SGD saves the fitted rate on 16 B, under H2 the documented one
    adam = at("1.", "adam", EITHER)
    assert at("1.", "sgd", H_BYTES) < at("1.", "sgd", H_STEP) < adam
    assert adam - at("1.", "sgd", H_BYTES) > 2 * (adam - at("1.", "sgd", H_STEP))
    assert at("2.", "200 steps", H_BYTES) < at("2.", "200 steps", H_STEP) < at("2.", "52 steps", EITHER)
    trace = [r for r in rows if r["measurement"].startswith("3.") and r["exchanges_per_backward_step"] != ""]
    ex = {r["setting"]: float(r["exchanges_per_backward_step"]) for r in trace}
    assert ex["copies merged, sync chip"] == 1 and ex["copies separate, sync chip"] == 5 * int(trace[0]["layers"])
