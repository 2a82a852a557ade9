"""Calibration of the SNN cost model: cases CSV, `tilesim validate`, `tilesim calibrate`, LOO bands."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tilesim.engine.events import simulate
from tilesim.errors import ConfigError
from tilesim.io import loads_toml
from tilesim.models.snn.calibration.calibrate import (
    FIT_PARAMS,
    CaseBasis,
    case_setup,
    prediction_band,
    read_cases,
    shipped_cases_path,
)
from tilesim.models.snn.step.timing import default_costs, uncalibrated_costs

HEADER = (
    "case,dataset,layers,batch,timesteps,input_cap,max_activity,second_threshold,output_second_threshold,"
    "optimizer,machine,chips,neurons_per_tile,activity,measured_ms_per_step,extra_note"
)


def run(*args):
    return subprocess.run([sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def validated():
    """`tilesim validate --json` on every shipped case file (run once)."""
    r = run("validate", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def shipped(validated):
    """The SNN calibration rows of `tilesim validate --json`."""
    return {row["case"]: row for row in validated if row["file"] == shipped_cases_path().name}


def test_held_out_cases_mean_error_within_8_percent(validated):
    """The 24 held-out Bow steps (3- and 4-layer networks, never fitted) are timed and within the
    issue's held-out target."""
    held = [r for r in validated if r["file"] == "nmnist_ipu_held_out.csv"]
    assert len(held) == 24 and {r["use"] for r in held} == {"check"}
    assert np.mean([abs(r["error_pct"]) for r in held]) <= 8.0


def test_shipped_cases_mean_error_within_10_percent(shipped):
    cases = read_cases()
    assert len(cases) == 12 and set(shipped) == {c.case for c in cases}  # every row reported
    for c in cases:
        row = shipped[c.case]
        assert set(row) >= {"case", "predicted_ms", "measured_ms", "error_pct"}
        assert row["measured_ms"] == c.measured_ms
        assert row["error_pct"] == pytest.approx(100 * (row["predicted_ms"] - c.measured_ms) / c.measured_ms, abs=0.01)
    assert np.mean([abs(r["error_pct"]) for r in shipped.values()]) <= 10.0


def test_shipped_predictions_follow_measured_trends(shipped):
    p = {k: v["predicted_ms"] for k, v in shipped.items()}
    for a in ("01", "05", "10"):  # the deeper, narrower net is faster at equal activity
        assert p[f"nmnist-L5-a{a}-t090"] < p[f"nmnist-L2-a{a}-t090"]
    for net in ("L2", "L5"):  # higher caps are slower
        assert p[f"nmnist-{net}-a01-t090"] < p[f"nmnist-{net}-a05-t090"] < p[f"nmnist-{net}-a10-t090"]
    for row in shipped.values():  # the leave-one-out band contains the prediction
        assert row["band_lo_ms"] <= row["predicted_ms"] <= row["band_hi_ms"]
        assert row["band_hi_ms"] > row["band_lo_ms"]


def test_shipped_costs_have_provenance_and_loo_sets():
    cm = default_costs()
    assert cm.version == "1" and cm.name == "snn-calibrated"
    prov = cm.provenance
    assert set(prov["fit"]) == set(FIT_PARAMS)
    assert len(prov["rows_used"]) == 12 and len(prov["residual_pct"]) == 12 and len(prov["loo"]) == 12
    assert prov["mean_abs_error_pct"] <= 10.0
    # physically plausible: exchange and sync are the machine's; the fit stays inside its bounds
    for k in FIT_PARAMS:
        lo, hi = prov["bounds"][k]
        assert lo <= prov["fit"][k] <= hi
    assert uncalibrated_costs().version == "0"


def test_the_host_round_trip_rate_is_fitted_and_nothing_is_left_as_residual(shipped):
    """Issue 25: the per-weight epoch cost is the host round trip of weights and optimizer state (Keras's
    metric reset, structure.py); its rate is the one fitted number, no faster than the documented host
    traffic, identified within ±10 % over leave-one-out refits; no labelled residual is left; the mean
    error stays within 6 %."""
    from tilesim.models.snn.step.structure import D2H_BYTES_PER_S

    assert "host_copy_ns_per_byte" in FIT_PARAMS and "epoch_residual_cycles_per_weight" not in FIT_PARAMS
    cm = default_costs()
    ns = cm.coefficients["host_copy_ns_per_byte"]
    assert 1e9 / D2H_BYTES_PER_S < ns < 50.0
    loo = [r["host_copy_ns_per_byte"] for r in cm.provenance["loo"]]
    assert max(abs(v / ns - 1) for v in loo) < 0.10
    assert "epoch_residual_cycles_per_weight" not in cm.coefficients
    assert np.mean([abs(r["error_pct"]) for r in shipped.values()]) <= 6.0


def test_basis_is_exact():
    """The affine decomposition C(θ) = K + Σ θ_i G_i re-times exactly like the engine."""
    case = read_cases()[9]
    config, machine, placement = case_setup(case)
    b = CaseBasis(config, placement, machine)
    th = (0.6, 30.0, 20.0, 3.0)
    assert b.seconds(th) == pytest.approx(simulate(b.program(th), machine).total_s, rel=1e-9)


def _user_csv(tmp_path, rows, header=HEADER):
    p = tmp_path / "cases.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


USER_ROWS = [
    "u-wide,synthetic,64-40-40-4,12,10,16,0.1,0.9,,adam,gc200,,2,fixed,0.45,x",
    "u-wide-hi,synthetic,64-40-40-4,12,10,16,0.4,0.9,,adam,gc200,,2,fixed,0.60,x",
    "u-deep,synthetic,64-20-20-20-20-4,12,10,16,0.2,0.9,,sgd,gc200,,2,fixed,0.50,x",
    "u-nat,synthetic,64-40-4,12,10,16,0.2,0.9,,adam,gc200,,2,natural,0.30,x",
]


def test_refit_round_trips_through_out_and_validate(tmp_path):
    csv = _user_csv(tmp_path, USER_ROWS)
    out = tmp_path / "costs.toml"
    r = run("calibrate", str(csv), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    fitted = json.loads(r.stdout)
    data = loads_toml(out.read_text())
    assert data["version"] == "1" and set(data["provenance"]["fit"]) == set(FIT_PARAMS)
    assert data["provenance"]["rows_used"] == ["u-wide", "u-wide-hi", "u-deep", "u-nat"]
    assert len(data["provenance"]["loo"]) == 4 and "date" in data["provenance"]
    r = run("validate", str(csv), "--costs", str(out), "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["case"] for x in rows] == ["u-wide", "u-wide-hi", "u-deep", "u-nat"]
    for a, b in zip(rows, fitted["rows"]):
        assert a["predicted_ms"] == pytest.approx(b["predicted_ms"], rel=1e-3)
        assert a["band_lo_ms"] <= a["predicted_ms"] <= a["band_hi_ms"]
    r = run("validate", str(csv), "--costs", str(out))  # the table form
    assert r.returncode == 0 and "mean |error|" in r.stdout and "u-nat" in r.stdout


def test_prediction_band_brackets_mid():
    case = read_cases()[0]
    config, machine, placement = case_setup(case)
    lo, mid, hi = prediction_band(config, placement, machine)
    assert lo <= mid <= hi and lo < hi
    assert 1e-3 < mid < 0.05


@pytest.mark.parametrize(
    "rows,header,needle",
    [
        (
            ["a,synthetic,64-40-4,12,10,16,0.1,0.9,,adam,gc200,,2,fixed,zero,x"],
            HEADER,
            r"row 2 column measured_ms_per_step = 'zero': is not a valid float; give a number",
        ),
        (
            ["a,synthetic,64-40-4,12.5,10,16,0.1,0.9,,adam,gc200,,2,fixed,1,x"],
            HEADER,
            r"row 2 column batch = '12.5': is not a valid int; give a whole number",
        ),
        (
            ["a,synthetic,64-40-4,12,10,16,0.1,0.9,,adam,gc200,,2,random,1,x"],
            HEADER,
            r"row 2 column activity = 'random': must be fixed or natural",
        ),
        (
            ["a,synthetic,64-40-4,12,10,16,0.1,0.9,,adam,gc200,,,fixed,1,x"],
            HEADER,
            r"row 2 column neurons_per_tile = '': is empty; every required column needs a value",
        ),
        (
            ["a,64-40-4,12,10,16,0.1,0.9,adam,gc200,2,fixed"],
            "case,layers,batch,timesteps,input_cap,max_activity,"
            "second_threshold,optimizer,machine,neurons_per_tile,activity",
            r"missing required column 'measured_ms_per_step'",
        ),
    ],
)
def test_bad_cases_raise(tmp_path, rows, header, needle):
    with pytest.raises(ConfigError, match=needle):
        read_cases(_user_csv(tmp_path, rows, header))


def test_bad_case_setup_names_the_case(tmp_path):
    csv = _user_csv(tmp_path, ["a,synthetic,64-40-4,12,10,16,0.1,0.9,,adam,nosuchmachine,,2,fixed,1,x"])
    with pytest.raises(ConfigError, match=r"case 'a': machine = 'nosuchmachine'"):
        case_setup(read_cases(csv)[0])
    with pytest.raises(ConfigError, match=r"cases file = .*nope.csv': no such file"):
        read_cases(tmp_path / "nope.csv")


def test_cli_errors_exit_2_without_traceback(tmp_path):
    bad = _user_csv(tmp_path, ["a,synthetic,64-40-4,12,10,16,0.1,0.9,,adam,gc200,,2,fixed,zero,x"])
    for args, needle in [
        (["validate", str(bad)], "column measured_ms_per_step = 'zero'"),
        (["calibrate", str(bad), "--out", str(tmp_path / "o.toml")], "column measured_ms_per_step"),
        (["validate", "--costs", str(tmp_path / "none.toml")], "--costs = "),
        (["validate", str(tmp_path / "none.csv")], "no such file"),
    ]:
        r = run(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert needle in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "o.toml").exists()


def test_shipped_csv_is_package_data():
    assert shipped_cases_path().is_file()
    assert (shipped_cases_path().parent / "README.md").is_file()


def test_cases_are_timed_with_their_own_recorded_settings():
    """Every shipped case records what it was measured with (output ϑ2 −100, weight_mul 4.0) and is
    built from those columns with a constant ϑ2 — not from NetworkConfig's learning defaults."""
    for case in read_cases():
        assert case.output_second_threshold == -100.0 and case.weight_mul == 4.0
        config, _, _ = case_setup(case)
        assert config.second_threshold_schedule is None
        assert config.second_thresholds_at(0) == config.second_thresholds_at(50)
        assert config.second_thresholds[-1] == -100.0 and config.weight_mul == 4.0
        assert config.second_thresholds[0] == case.second_threshold
